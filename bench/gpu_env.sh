# Sourced by the multi-GPU scripts (gpu_shmem.sh, gpu_collectives.sh, gpu_fused.sh): $OUT made, the environment every
# multi-GPU command needs, and the GPU's name and count for result file names.
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1
# NVLink multicast can take a shared host's GPUs down: keep it off everywhere (launch() also does).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ngpu=$(nvidia-smi -L | wc -l)
# "NVIDIA H100 80GB HBM3" -> NVIDIA-H100: the first two words of the name (bench/results naming).
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{print $1"-"$2}' | tr -cd 'A-Za-z0-9_-')

# run_suite NAME WHAT [bench args...]: tests/NAME on the visible GPUs (WHAT = tests or all) and
# `python -m tritium.bench NAME` (WHAT = bench or all), JSON $OUT/NAME-<gpu>-x<N>.json, logs beside it;
# TEST_TIMEOUT / BENCH_TIMEOUT bound each step. Returns 1 if a step failed.
run_suite() {
  local name=$1 what=$2 rc status=0
  shift 2
  if [[ $what == tests || $what == all ]]; then
    timeout ${TEST_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider "tests/$name" > "$OUT/$name-tests-$gpu-x$ngpu.log" 2>&1
    rc=$?; (( rc == 0 )) || status=1
    echo "$name tests rc=$rc ($(tail -1 "$OUT/$name-tests-$gpu-x$ngpu.log"))"
    (( rc == 0 )) || grep -E "Error|FAILED|assert" "$OUT/$name-tests-$gpu-x$ngpu.log" | head -20
  fi
  if [[ $what == bench || $what == all ]]; then
    timeout ${BENCH_TIMEOUT:-330} python3 -m tritium.bench "$name" --world-size "$ngpu" --timeout 320 \
      --out "$OUT/$name-$gpu-x$ngpu.json" "$@" > "$OUT/$name-bench-$gpu-x$ngpu.log" 2>&1
    rc=$?; (( rc == 0 )) || status=1
    echo "$name bench rc=$rc"; grep -v -e Warning -e "return func" "$OUT/$name-bench-$gpu-x$ngpu.log" | tail -30
  fi
  return $status
}
