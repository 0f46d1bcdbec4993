# Sourced by the one-GPU scripts (gpu_int4.sh, gpu_moe.sh): $OUT made, PYTHONPATH, the GPU's name ($GPU, for result
# file names), part NAME (whether $PARTS lists it) and $workers (pytest-xdist's -n where it is installed).
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | awk '{print $1"-"$2}' | tr -cd 'A-Za-z0-9_-')
GPU=${GPU:-gpu}
part() { [[ ",$PARTS," == *",$1,"* ]]; }
workers=""; python3 -c "import xdist" 2>/dev/null && workers="-n ${TEST_WORKERS:-8}"
