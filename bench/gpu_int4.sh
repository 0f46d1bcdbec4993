#!/usr/bin/env bash
# Weight-only int4 on one GPU: the int4 tests (kernels, formats, engine), the engine bench of int4 against bf16
# (Llama-3-8B shape, random bf16 weights quantized at load; engine-int4-<gpu>.json) and the per-shape probe
# (bench/probe_int4_linear.py: int4 GEMV / matmul / dequantize + cuBLAS against bf16 cuBLAS; int4-linear-<gpu>.json).
#   OUT=/some/dir bash bench/gpu_int4.sh          (PARTS=tests,probe,engine: any of them, in that order)
set -uo pipefail
cd "$(dirname "$0")/.."
PARTS=${PARTS:-tests,probe,engine}
source bench/gpu_one.sh
part tests && { timeout ${TEST_TIMEOUT:-170} python3 -m pytest -q -p no:cacheprovider $workers tests/ops/test_int4_linear.py \
  tests/ops/test_int4.py tests/engine/test_int4.py -m "not serial" > "$OUT/int4-tests-$GPU.log" 2>&1
echo "int4 tests rc=$? ($(tail -1 "$OUT/int4-tests-$GPU.log"))"; }
part probe && { timeout ${PROBE_TIMEOUT:-150} python3 bench/probe_int4_linear.py --ms ${PROBE_MS:-1,4,16,64,256} \
  --out "$OUT/int4-linear-$GPU.json" > "$OUT/int4-linear-$GPU.log" 2>&1
echo "probe rc=$?"; }
part engine && { timeout ${BENCH_TIMEOUT:-240} python3 -m tritium.bench engine --systems ${SYSTEMS:-tritium-int4,tritium} --batch 32 \
  --out "$OUT/engine-int4-$GPU.json" > "$OUT/engine-int4-$GPU.log" 2>&1
echo "engine bench rc=$?"; grep -E "running|batch-1 step|ratio|speedup" "$OUT/engine-int4-$GPU.log" | tail -12; }
python3 - "$OUT/int4-linear-$GPU.json" <<'PY'
import json, sys
try:
    rows = json.load(open(sys.argv[1]))["rows"]
except (OSError, ValueError) as e:
    sys.exit(f"no probe JSON: {e}")
for r in rows:
    best = min((v, k) for k, v in r["us"].items() if k != "cublas_bf16")
    print(f"{r['shape']:8} m={r['m']:4}: cuBLAS bf16 {r['us']['cublas_bf16']} us; best int4 {best[1]} {best[0]} us; "
          f"int4_linear {r['us'].get('int4_linear')} us")
PY
