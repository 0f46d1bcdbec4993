#!/usr/bin/env bash
# Engine on a GPU machine (no network; torch, triton, transformers preinstalled): the engine tests
# (GPU-only tests included) and the attention tests of the kernels the decode chain launches with
# programmatic dependent launch (KV write, attention, split-KV merge), then `python -m tritium.bench engine` (Llama-3-8B shape, random bf16 weights:
# tritium vs the same engine on SDPA vs transformers). Logs and JSON go to $OUT (default bench/results):
# JSON as engine-<gpu>.json / engine-ablate-<gpu>.json (<gpu>: NVIDIA-H100, NVIDIA-H200, from nvidia-smi);
# the logs are git-ignored there.
# Budget: tests ~3 min, benchmark ~4-5 min (start-up tuning compiles every GEMV candidate).
#   OUT=/some/dir bash bench/gpu_engine.sh [all|tests|bench|ablate|fp8|fp8-engine|kv-fp8]
# fp8: the FP8 tests and W8A8 with / without its fused quantization against bf16 (fp8-fusion-<gpu>.json);
# fp8-engine: the engine bench of bf16 / fp8 / fp8-dynamic (engine-fp8-<gpu>.json) and the batch-64 step probe
# (fp8-step-<gpu>.json).
# kv-fp8: the engine bench with the KV cache in the model dtype and in fp8 at 2k-token contexts, batch 64
# (engine-kv-fp8-<gpu>.json); both systems ~330 s on a fresh H200 (stop 71).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}  # and the caller's (e.g. .carry with pytest-xdist)
# "NVIDIA H100 80GB HBM3" -> NVIDIA-H100: the first two words of the name (bench/results naming).
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | awk '{print $1"-"$2}' | tr -cd 'A-Za-z0-9_-')
GPU=${GPU:-gpu}

{ nvidia-smi; python3 -c "import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)"
  python3 -c "import gguf" 2>&1 | tail -1; } > "$OUT/engine-env.txt" 2>&1

what=${1:-all}
if [[ $what == tests || $what == all ]]; then
  # in TEST_WORKERS processes (pytest-xdist; default 8): one process did not finish the set within a 540 s
  # bound on a fresh H200 with a cold compile cache (stop 57: 68% done)
  workers=""; python3 -c "import xdist" 2>/dev/null && workers="-n ${TEST_WORKERS:-8}"
  timeout ${TEST_TIMEOUT:-400} python3 -m pytest -q -p no:cacheprovider $workers tests/engine tests/models tests/ops tests/attention/test_kv_cache.py \
    tests/attention/test_gpu.py tests/attention/test_paged_attention.py \
    -k "not test_paged_attention.py or splits or decode_regimes or shapes or split_prefill or workspace" \
    > "$OUT/engine-tests-$GPU.log" 2>&1
  echo "engine tests rc=$? ($(tail -1 "$OUT/engine-tests-$GPU.log"))"
  [[ $what == tests ]] && exit 0
fi

if [[ $what == fp8 ]]; then  # FP8: the fp8 tests on the GPU, then W8A8 with and without fuse_act_quant and bf16
  # (bench/probe_fp8_fusion.py: batch-1 and batch-64 steps, prefill; fp8-fusion-<gpu>.json). ~9 min on a fresh
  # machine (stop 63: the tests compile for ~3 min there, 45 s warm)
  workers=""; python3 -c "import xdist" 2>/dev/null && workers="-n ${TEST_WORKERS:-16}"
  timeout ${TEST_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider $workers -rfE tests/ops/test_act_quant.py \
    tests/ops/test_ops.py tests/ops/test_quant.py tests/ops/test_gemv.py tests/fused/test_matmul.py \
    tests/models/test_linear.py tests/engine/test_quantization.py \
    -k "fp8 or w8a8 or quant or warm or rows or rms_norm or silu" -m "not serial" \
    > "$OUT/engine-fp8-tests-$GPU.log" 2>&1
  echo "fp8 tests rc=$? ($(tail -1 "$OUT/engine-fp8-tests-$GPU.log"))"
  timeout ${BENCH_TIMEOUT:-330} python3 bench/probe_fp8_fusion.py --out "$OUT/fp8-fusion-$GPU.json" \
    > "$OUT/fp8-fusion-$GPU.log" 2>&1
  rc=$?; echo "fp8 fusion probe rc=$rc"; grep -E "greedy|\{" "$OUT/fp8-fusion-$GPU.log" | tail -4
  exit $rc
fi

if [[ $what == fp8-engine ]]; then  # the engine bench of bf16 / fp8 / fp8-dynamic (engine-fp8-<gpu>.json; W8A8
  # last: the first system pays any kernel compiled mid-run) and the batch-64 step probe; ~10 min warm, more
  # than one call on a fresh machine (stop 63: cut at 400 s in the second system)
  timeout ${BENCH_TIMEOUT:-560} python3 -m tritium.bench engine --systems tritium,tritium-fp8,tritium-fp8-dynamic \
    --out "$OUT/engine-fp8-$GPU.json" > "$OUT/engine-fp8-bench-$GPU.log" 2>&1
  rc=$?; echo "fp8 engine bench rc=$rc"; tail -16 "$OUT/engine-fp8-bench-$GPU.log"
  timeout 300 python3 bench/probe_fp8_step.py --new-tokens 64 --systems fp8-dynamic,bf16,fp8 \
    --out "$OUT/fp8-step-$GPU.json" > "$OUT/fp8-step-$GPU.log" 2>&1
  echo "fp8 step probe rc=$?"; grep -E "wall_ms|total_us" "$OUT/fp8-step-$GPU.log"
  exit $rc
fi

if [[ $what == kv-fp8 ]]; then  # the fp8 KV cache against the model dtype's, where the KV read is as large as the
  # weights' (64 sequences of 2k tokens: ~17 GB a step beside 16 GB of Llama-3-8B weights)
  timeout ${BENCH_TIMEOUT:-560} python3 -m tritium.bench engine --systems tritium,tritium-kv-fp8 --prompt-len 2048 \
    --new-tokens 128 --batch 64 --repeats 2 --kv-cache-gib 24 --out "$OUT/engine-kv-fp8-$GPU.json" \
    > "$OUT/engine-kv-fp8-bench-$GPU.log" 2>&1
  rc=$?; echo "kv fp8 engine bench rc=$rc"; tail -16 "$OUT/engine-kv-fp8-bench-$GPU.log"
  exit $rc
fi

if [[ $what == ablate ]]; then  # the engine-ablate suite: decode-chain ablations and the kernel trace of one step
  timeout 400 python3 -m tritium.bench engine-ablate --trace \
    --out "$OUT/engine-ablate-$GPU.json" > "$OUT/engine-ablate-$GPU.log" 2>&1
  rc=$?; echo "engine ablate rc=$rc"; grep -E "ablation|windows|trace|exposed|linear|step|tok/s" "$OUT/engine-ablate-$GPU.log" | head -80
  exit $rc
fi

timeout ${BENCH_TIMEOUT:-450} python3 -m tritium.bench engine --out "$OUT/engine-$GPU.json" > "$OUT/engine-bench-$GPU.log" 2>&1
rc=$?
echo "engine bench rc=$rc"
tail -20 "$OUT/engine-bench-$GPU.log"
exit $rc
