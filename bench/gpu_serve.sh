#!/usr/bin/env bash
# Serving benchmark on a GPU machine (no network; torch, triton preinstalled): `python -m tritium.bench serve`
# (a server process over the Llama-3-8B shape with random bf16 weights and the default model's tokenizer,
# offline engine figures measured on the same engine first; an async HTTP load generator at concurrency
# 1, 8, 32, 64, 128 and a Poisson run). JSON and PNG go to $OUT as serve-<gpu>.json / .png (<gpu>: NVIDIA-H100,
# from nvidia-smi); the log is git-ignored there. Budget: ~4 min.
#
# The image lacks FastAPI, uvicorn and prometheus-client: carry their wheels in .whl/ (bench/serve-wheels.txt lists
# them with the command that fetches them; matplotlib's in
# .whl/plot/, installed only where matplotlib is missing), and the default model's tokenizer as a
# tokenizer.json directory in .carry/smollm2-tokenizer (README, "Serving"), e.g. with the run tool's
# carry: [".whl", ".carry"].
#   OUT=/some/dir bash bench/gpu_serve.sh [extra bench arguments]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
SITE=/tmp/tritium-site
if compgen -G ".whl/*.whl" > /dev/null; then
  # a huggingface_hub wheel (not in serve-wheels.txt, but often in a .whl/ fetched for more) breaks the
  # image's transformers; nothing here needs it
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    $(ls .whl/*.whl | grep -v huggingface_hub) || exit 1
fi
if ! python3 -c "import matplotlib" 2>/dev/null && compgen -G ".whl/plot/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/plot/*.whl || exit 1
fi
export PYTHONPATH=src:$SITE
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | awk '{print $1"-"$2}' | tr -cd 'A-Za-z0-9_-')
GPU=${GPU:-gpu}
TOKENIZER=${TOKENIZER:-.carry/smollm2-tokenizer}
[[ -d $TOKENIZER ]] && TOK=(--tokenizer "$TOKENIZER") || TOK=()

timeout ${BENCH_TIMEOUT:-540} python3 -m tritium.bench serve "${TOK[@]}" --poisson 16 --out "$OUT/serve-$GPU.json" "$@" \
  2>&1 | tee "$OUT/serve-bench-$GPU.log"
rc=${PIPESTATUS[0]}
echo "serve bench rc=$rc"
exit $rc
