#!/usr/bin/env bash
# Re-time workloads of the committed sweep on a GPU machine (torch + triton, no network), from the repo root:
#   OUT=/some/dir bash bench/gpu_confirm.sh [seconds] [args...]              # the fit's held-out picks
#   WHAT=retime OUT=/some/dir bash bench/gpu_confirm.sh [seconds] [args...]  # what a kernel change moved
#   FRESH=1 OUT=/some/dir bash bench/gpu_confirm.sh [seconds] --kv-dtype fp8  # re-time one kind anew, then merge it
#     into the committed file on the CPU: python -m tritium.tune attention --confirm-merge COMMITTED NEW --replace
#   WHAT=resweep OUT=/some/dir bash bench/gpu_confirm.sh [seconds] --kv-dtype fp8 [--within 1.1]  # sweep the sweep's
#     fp8 workloads again, every candidate (or those near the old best, and the hand rules); when done:
#     python -m tritium.tune attention --merge SWEEP RESWEEP --replace, then --fit
# After a refit (same kernels), first keep the re-timings of the picks it left as they were, on the CPU:
#   python -m tritium.tune attention --confirm-carry SWEEP bench/results/tuning/attention-<gpu>.confirm.json
# Continues bench/results/tuning/attention-<gpu>.{confirm,retime}.json (copied to $OUT first) and stops
# cleanly before [seconds] (default 540); copy the JSON from $OUT back to bench/results/tuning/ and run again
# until nothing is left. On a machine of N GPUs: one compile pool, then N shards (one a GPU), merged at the
# end. What is timed and how: src/tritium/tune/confirm.py and retime.py (a re-timing is then put into the
# sweep on the CPU: python -m tritium.tune attention --retime-apply SWEEP RETIME, and the trees refitted).
set -uo pipefail
limit=${1:-540}; shift || true
OUT=${OUT:-bench/results/tuning}
WHAT=${WHAT:-confirm}
[[ $WHAT == confirm || $WHAT == retime || $WHAT == resweep ]] || {
  echo "WHAT must be confirm, retime or resweep, got $WHAT" >&2; exit 2; }
export PYTHONPATH=src PYTHONUNBUFFERED=1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{print $1"-"$2}' | tr -cd 'A-Za-z0-9_-')
sweep=bench/results/tuning/attention-$gpu.json
name=attention-$gpu.$WHAT.json
n=${TUNE_GPUS:-$(nvidia-smi -L | grep -c '^GPU')}
mkdir -p "$OUT"
# Continue the committed file only where it is of this sweep (and, for a confirmation, of this fit: the
# validation's sha256 too); one of another is left where it is and a new one starts.
if [[ -f bench/results/tuning/$name && $OUT != bench/results/tuning && -z ${FRESH:-} ]]; then
  if python3 -c 'import json, sys; from tritium.tune.confirm import fit_source; from tritium.tune.retime import sweep_source
want = (fit_source if sys.argv[3] == "confirm" else sweep_source)(sys.argv[1])
have = json.load(open(sys.argv[2]))["source"]
have.pop("within", None)  # a re-sweep of other candidates (--within) is refused by the tuner, naming both
sys.exit(have != want)' "$sweep" "bench/results/tuning/$name" "$WHAT"; then
    cp "bench/results/tuning/$name" "$OUT/"
  else
    echo "bench/results/tuning/$name is of another sweep or fit: starting a new one"
  fi
fi
jobs=$(nproc); (( jobs > 32 )) && jobs=32
start=$SECONDS
timeout -s INT "$limit" python3 -m tritium.tune attention --$WHAT "$sweep" --out "$OUT" --compile-only --jobs "$jobs" \
  --shard "0/$n" "$@" > "$OUT/$WHAT-compile-$gpu.log" 2>&1
echo "compile pool: exit $?, $(( SECONDS - start )) s ($(grep -v '^  compile ' "$OUT/$WHAT-compile-$gpu.log" | tail -1))"
left=$(( limit - (SECONDS - start) )); (( left < 60 )) && left=60
pids=()
for (( i = 0; i < n; i++ )); do
  mkdir -p "$OUT/cshard$i"
  [[ -f $OUT/$name ]] && cp "$OUT/$name" "$OUT/cshard$i/"
  dev=$i; [[ -n ${TUNE_GPUS:-} ]] && dev=${CUDA_VISIBLE_DEVICES:-$i}
  CUDA_VISIBLE_DEVICES=$dev timeout -s INT "$left" python3 -m tritium.tune attention --$WHAT "$sweep" \
    --out "$OUT/cshard$i" --jobs 1 --shard "$i/$n" "$@" > "$OUT/cshard$i/$WHAT-$gpu.log" 2>&1 &
  pids+=($!)
done
for (( i = 0; i < n; i++ )); do
  wait "${pids[$i]}"; rc=$?
  echo "shard $i of $n exit: $rc ($(grep -c '^\[' "$OUT/cshard$i/$WHAT-$gpu.log") workloads re-timed)"
  grep -v '^\[' "$OUT/cshard$i/$WHAT-$gpu.log" | tail -3
done
python3 -m tritium.tune attention --$WHAT-merge "$OUT/$name" "$OUT"/cshard*/"$name" && rm -f "$OUT"/cshard*/"$name"
