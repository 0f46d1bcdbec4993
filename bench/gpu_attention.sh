#!/usr/bin/env bash
# Paged attention on a GPU machine (torch + triton installed, no network), from the repo root:
#   OUT=/some/dir bash bench/gpu_attention.sh [bench|tests|all|ab] [extra bench args, or test paths for tests...]
# ab: an A/B of the kernels in the same session: OLD=<dir holding an older src/> runs the bench (extra args,
# e.g. --cases) with that tree, then with this one, as $OUT/ab-old.json and $OUT/ab-new.json.
# Writes the benchmark JSON as $OUT/attention-<gpu>.json (<gpu>: NVIDIA-H100, NVIDIA-H200, from
# nvidia-smi) and the logs under $OUT (git-ignored in bench/results). Device calls last 10 minutes at most; measured
# (stop 30, kernel compiles included): bench ~170 s; tests/attention ~1,000 s in all, so `tests` takes paths and runs
# in three calls: test_{config,context_parts,errors,gpu,hopper}.py (~330 s on an H100), test_inconsistent_metadata.py
# with test_kv_cache.py, and test_paged_attention.py (each ~300-400 s).
set -uo pipefail
what=${1:-all}; shift || true
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
# "NVIDIA H100 80GB HBM3" -> NVIDIA-H100: the first two words of the name (bench/results naming).
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{print $1"-"$2}' | tr -cd 'A-Za-z0-9_-')
gpu=${gpu:-gpu}
if [[ $what == bench || $what == all ]]; then
  timeout 480 python3 -m tritium.bench attention --out "$OUT/attention-$gpu.json" --partial "$OUT/attention-$gpu.partial.json" "$@" 2>&1 | tee "$OUT/bench-attention.log"
fi
if [[ $what == ab ]]; then
  PYTHONPATH=${OLD:?OLD=<dir with src/>}/src timeout 240 python3 -m tritium.bench attention --out "$OUT/ab-old.json" "$@" 2>&1 | tee "$OUT/bench-ab-old.log"
  timeout 240 python3 -m tritium.bench attention --out "$OUT/ab-new.json" "$@" 2>&1 | tee "$OUT/bench-ab-new.log"
fi
if [[ $what == tests || $what == all ]]; then
  paths=(tests/attention)
  [[ $what == tests && $# -gt 0 ]] && paths=("$@")  # with `all`, the extra arguments are the bench's
  timeout 540 python3 -m pytest -q -rs -p no:cacheprovider "${paths[@]}" 2>&1 | tee "$OUT/tests-attention.log"
fi
