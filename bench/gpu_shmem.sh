#!/usr/bin/env bash
# Symmetric memory on a GPU machine (torch + triton + cuda-bindings installed, no network), from the
# repo root, on all visible GPUs:
#   OUT=/some/dir bash bench/gpu_shmem.sh [all|tests|examples|bench] [extra bench args...]
# Runs the shmem tests (GPU ones included), the three examples and `python -m tritium.bench shmem`;
# writes the benchmark JSON as $OUT/shmem-<gpu>[-x<N>].json (<gpu>: NVIDIA-H100, NVIDIA-H200, from
# nvidia-smi; -x<N> with N > 1 GPUs) and the logs under $OUT (flat; git-ignored in bench/results). About 6 minutes on 2x H200 at most
# (each step has its own timeout; the sum stays under 8 minutes).
set -uo pipefail
what=${1:-all}; shift || true
source "$(dirname "$0")/gpu_env.sh"
gpu=${gpu:-gpu}
(( ngpu > 1 )) && gpu="$gpu-x$ngpu"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nvidia-smi topo -m; } > "$OUT/shmem-gpu.txt" 2>&1
python3 -c "import torch, triton, cuda.bindings; print('torch', torch.__version__, 'triton', triton.__version__, \
'cuda-bindings', getattr(cuda.bindings, '__version__', '?'))" >> "$OUT/shmem-gpu.txt" 2>&1
status=0
if [[ $what == tests || $what == all ]]; then
  timeout 200 python3 -m pytest -q tests/shmem 2>&1 | tee "$OUT/shmem-tests.log"
  (( PIPESTATUS[0] == 0 )) || status=1
fi
if [[ $what == examples || $what == all ]]; then
  for example in message_passing producer_consumer all_gather; do
    timeout 40 python3 "examples/shmem/$example.py" "$ngpu" 2>&1 | tee -a "$OUT/shmem-examples.log"
    (( PIPESTATUS[0] == 0 )) || status=1
  done
fi
if [[ $what == bench || $what == all ]]; then
  timeout 190 python3 -m tritium.bench shmem --world-size "$ngpu" --timeout 180 \
    --out "$OUT/shmem-$gpu.json" "$@" 2>&1 | tee "$OUT/shmem-bench.log"
  (( PIPESTATUS[0] == 0 )) || status=1
fi
echo "gpu_shmem.sh: exit status $status" | tee -a "$OUT/shmem-tests.log"
exit $status
