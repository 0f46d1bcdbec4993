"""Re-timing the held-out validation on a GPU: the tree's pick against the hand rules and the sweep's best.

    python -m tritium.tune attention --confirm SWEEP [--repeats R] [--part FAMILY] [--shard I/N] [--out DIR]
    python -m tritium.tune attention --confirm-merge INTO SHARD [SHARD ...]
    python -m tritium.tune attention --confirm-carry SWEEP OLD [--out DIR]
    python -m tritium.tune attention --confirm-summary FILE

The held-out table of the fit (``SWEEP``'s ``.validation.json``, written by ``--fit``) scores each pick
on the sweep's own timings: two per candidate, taken minutes apart from the hand rules' and the best's.
One configuration timed twice in one sweep differs by more than 3% on ~2.5% of decode workloads
(bench/NOTES.md, stop 38), so "never more than 3% slower than the hand rules" cannot be read off those
timings. Here the held-out workloads are built again and only the configurations the table compares
(the pick, the hand rules, the sweep's best) are timed, ``R`` times each in one interleaved sequence
(A B C, C B A, ...), cold as the sweep times decode. A record keeps every timing; the summary compares
medians, and counts a pick as slower than the hand rules beyond doubt only where every one of its
timings is more than 3% slower than the hand rules' timing next to it.

Records go to ``DIR/attention-<gpu>.confirm.json`` after every workload (a re-run continues); the file
names the sweep and validation it re-times (their sha256), so a confirmation of another fit is refused.
After a refit, ``--confirm-carry`` starts the new fit's confirmation from the old one's records of picks that
did not change (no GPU), and ``--confirm`` then times only the rest.
"""

import datetime
import hashlib
import json
import math
import os
import statistics
import time

import torch

from tritium.bench.common import header
from tritium.runtime import device_name, interpreting, num_sms
# The sweep's module imports this one for its CLI: its names are looked up when called, not at import.
from tritium.tune import attention as sweep_mod
from tritium.tune.trees import HAND, key_knobs

FAMILIES = ("decode", "prefill")
SLOWER = 1.03  # the bar: never more than 3% slower than the hand rules
NEAR = 1.05  # the bar: within 5% of the best


def sha256_short(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def fit_source(sweep_path: str) -> dict:
    """What a confirmation of the fit of ``sweep_path`` is of: the sweep's name, its sha256 and its
    validation's (``validation_path``)."""
    return dict(sweep=os.path.basename(sweep_path), sweep_sha256=sha256_short(sweep_path),
                validation_sha256=sha256_short(validation_path(sweep_path)))


def validation_path(sweep_path: str) -> str:
    return os.path.splitext(sweep_path)[0] + ".validation.json"


def targets(sweep_path: str, part: str | None = None, kv_dtype: str | None = None, match=None) -> list[tuple]:
    """(workload, keys to time, the validation row) for each held-out workload of the fit of
    ``sweep_path`` (of ``part``'s family, ``kv_dtype``'s caches and names that the compiled regular expression
    ``match`` finds, where given): keys are the pick, the hand rules and the sweep's best, each once, in that
    order."""
    with open(sweep_path) as f:
        records = {r["name"]: r for r in json.load(f)["records"]}
    vpath = validation_path(sweep_path)
    if not os.path.exists(vpath):
        raise SystemExit(f"--confirm: {vpath} does not exist (written by --fit {sweep_path})")
    with open(vpath) as f:
        rows = json.load(f)["held_out"]
    out = []
    for row in rows:
        if part and row["family"] != part or match is not None and not match.search(row["name"]):
            continue
        r = records.get(row["name"])
        if r is None:
            raise SystemExit(f"--confirm: held-out workload {row['name']} is not in {sweep_path}")
        if kv_dtype and r["workload"]["kv_dtype"] != kv_dtype:
            continue
        keys = list(dict.fromkeys([row["pick"], HAND, row["best"]]))
        out.append((sweep_mod.Workload(**r["workload"]), keys, row))
    by_name = {w.name: (w, keys, row) for w, keys, row in out}
    return [by_name[w.name] for w in sweep_mod.interleave_families([w for w, _, _ in out])]


def open_job(sweep_path: str, out_dir: str, kind: str, *, repeats: int, source: dict, device=None) -> tuple:
    """What a GPU job re-timing workloads of the sweep at ``sweep_path`` starts from (``kind``: "confirm" or
    "retime"): (device, its name, SMs, L2 bytes, the sweep, the job's JSON path ``DIR/attention-<gpu>.<kind>.json``,
    its data: continued where it is of this GPU, repeat count and ``source``, else refused)."""
    device = torch.device(device or ("cpu" if interpreting() else "cuda"))
    name = device_name(device)
    sms = num_sms(device)
    with open(sweep_path) as f:
        sweep = json.load(f)
    if sweep["gpu"] != name or sweep["sms"] != sms:
        raise SystemExit(f"--{kind}: {sweep_path} is a sweep of {sweep['gpu']} ({sweep['sms']} SMs); this GPU is "
                         f"{name} ({sms} SMs)")
    l2 = torch.cuda.get_device_properties(device).L2_cache_size if device.type == "cuda" else 50 << 20
    path = sweep_mod.job_path(out_dir, name, kind)
    data = sweep_mod.load_json(path) or dict(gpu=name, sms=sms, repeats=repeats, source=source, records=[])
    for key, want in (("gpu", name), ("repeats", repeats), ("source", source)):
        if data[key] != want:
            raise SystemExit(f"--{kind}: {path} holds a {kind} job with {key} {data[key]!r}, asked for {want!r}")
    return device, name, sms, l2, sweep, path, data


def job_share(todo: list, knobs_of, *, name: str, noun: str, done: int, device, sms: int, shard: tuple[int, int],
              limit: int | None, jobs: int, compile_only: bool):
    """The part of ``todo`` (tuples led by a workload) that this process times: the I-th of every N
    (``shard``), at most ``limit``, compiled first unless ``jobs`` == 1 (a pool ran before); with
    ``compile_only``, None after compiling what all N shards will time. ``knobs_of(part)``: workload name
    -> the knob sets to compile."""
    def compile_all(part):
        if part and device.type == "cuda":
            sweep_mod.precompile([t[0] for t in part], sms, jobs or min(16, os.cpu_count() or 1), knobs_of(part))

    if compile_only:
        todo = todo[:limit * shard[1]] if limit else todo
        print(f"{name}: compiling for {len(todo)} {noun} ({shard[1]} shard(s))", flush=True)
        compile_all(todo)
        return None
    todo = todo[shard[0]::shard[1]]
    todo = todo[:limit] if limit else todo
    print(f"{name}: {done} {noun} re-timed, {len(todo)} to go"
          + (f" (shard {shard[0]} of {shard[1]})" if shard[1] > 1 else ""), flush=True)
    if jobs != 1:
        compile_all(todo)
    return todo


def confirm(sweep_path: str, out_dir: str, *, repeats: int = 6, part: str | None = None, kv_dtype: str | None = None,
            match=None, shard: tuple[int, int] = (0, 1), limit: int | None = None, jobs: int = 0,
            compile_only: bool = False, device=None) -> str:
    """Re-time the held-out picks of the fit of ``sweep_path`` (see the module docstring); returns the
    JSON path. ``part``, ``kv_dtype``, ``match``: only the held-out workloads of that family, of caches of that
    dtype, whose names the regex finds (a kernel change that moved one kind only is re-timed alone, then merged
    with ``merge(replace=True)``).
    ``shard`` (I, N): the I-th of every N workloads still to time (one process a GPU; merge
    with ``merge``). ``compile_only``: fill the Triton cache for what all N shards will time."""
    if repeats < 2:
        raise ValueError(f"repeats must be >= 2 (the pick and the hand rules are compared run by run), got {repeats}")
    device, name, sms, l2, sweep, path, data = open_job(
        sweep_path, out_dir, "confirm", repeats=repeats, source=fit_source(sweep_path), device=device)
    done = {r["name"] for r in data["records"]}
    todo = [(w, [key_knobs(k) for k in keys], row) for w, keys, row in targets(sweep_path, part, kv_dtype, match)
            if w.name not in done]
    todo = job_share(todo, lambda ws: {w.name: knobs for w, knobs, _ in ws}, name=name, noun="held-out workloads",
                     done=len(done), device=device, sms=sms, shard=shard, limit=limit, jobs=jobs,
                     compile_only=compile_only)
    if todo is None:
        return path
    if device.type == "cuda":
        data["header"] = header(device)
    for i, (w, knobs, row) in enumerate(todo):
        t0 = time.perf_counter()
        rec = sweep_mod.sweep_workload(w, device, sms, l2, check=False, repeats=repeats, candidates=knobs,
                                       order=sweep.get("order", sweep_mod.BACK_TO_BACK))
        record = dict(name=w.name, date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                      family=row["family"], pick=row["pick"], best=row["best"],
                      sweep_vs_best=row["vs_best"], sweep_vs_hand=row["vs_hand"], copies=rec["copies"],
                      times_ms=rec["times_ms"], runs_ms=rec.get("runs_ms", {}), errors=rec.get("errors", {}))
        record.update(score(record))
        data["records"].append(record)
        sweep_mod.save_json(data, path)
        print(f"[{i + 1}/{len(todo)}] {w.name}: pick {row['pick']} {record['vs_hand']:.3f}x the hand rules "
              f"(sweep {row['vs_hand']:.3f}x), {record['vs_best']:.3f}x the best ({time.perf_counter() - t0:.1f} s)",
              flush=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return path


def score(record: dict) -> dict:
    """The pick's re-timed ratios: median vs the hand rules' median, vs the fastest re-timed configuration
    (the sweep's best, the hand rules or the pick), and its run-by-run ratios to the hand rules (the two
    timed next to each other in each interleaved round). A pick that failed to run counts as infinitely
    slow."""
    times = {k: v for k, v in record["times_ms"].items() if v is not None}
    pick, runs = record["pick"], record["runs_ms"]
    t = times.get(pick)
    if t is None or HAND not in times:
        return dict(vs_hand=math.inf, vs_best=math.inf, vs_hand_runs=[])
    pairs = [a / b for a, b in zip(runs.get(pick, []), runs.get(HAND, []))]
    return dict(vs_hand=t / times[HAND], vs_best=t / min(times.values()), vs_hand_runs=pairs)


def merge(into: str, paths, *, flag: str = "--confirm-merge", replace: bool = False) -> int:
    """Add the records of the shards at ``paths`` to the confirmation ``into`` (created from the first shard
    when missing); returns how many were added or, with ``replace``, replaced: a shard's record then takes the
    place of ``into``'s record of the same workload (a re-timing after a kernel change; without it ``into``'s
    is kept). Shards of another GPU, count or fit are refused. Also joins the shards of a re-timing
    (``tritium.tune.retime``: the same keys; ``flag`` names the option in errors)."""
    need = ("gpu", "repeats", "source", "records")
    data = sweep_mod.load_json(into, *need, flag=flag)
    added = 0
    for path in paths:
        other = sweep_mod.load_json(path, *need, flag=flag)
        if other is None:
            raise SystemExit(f"{flag}: {path} does not exist")
        if data is None:
            data = dict(other, records=[])
        for key in ("gpu", "repeats", "source"):
            if other[key] != data[key]:
                raise SystemExit(f"{flag}: {path} has {key} {other[key]!r}, {into} has {data[key]!r}")
        have = {r["name"]: i for i, r in enumerate(data["records"])}
        for r in other["records"]:
            if r["name"] not in have:
                have[r["name"]] = len(data["records"])
                data["records"].append(r)
                added += 1
            elif replace and data["records"][have[r["name"]]] is not r:
                data["records"][have[r["name"]]] = r
                added += 1
        if other.get("header", {}).get("date", "") > data.get("header", {}).get("date", ""):
            data["header"] = other["header"]
    if data is not None:
        sweep_mod.save_json(data, into)
    return added


def carry(sweep_path: str, old_path: str, out_dir: str) -> tuple[str, int, int]:
    """Start (or add to) the confirmation of the fit of ``sweep_path``, ``DIR/attention-<gpu>.confirm.json``,
    with the records of ``old_path``, a confirmation of another fit of the same GPU, that re-time what this
    one would: the same held-out workload with the same pick and the same best swept configuration, so the
    same configurations are timed. A refit that changes one family's tree, or adds workloads, leaves most
    held-out picks as they were; those need no device time again. The sweep's ratios come from this fit's
    validation. Only for the same kernels: a kernel change is re-timed (``confirm`` with ``part`` /
    ``kv_dtype``). ``old_path`` may be the destination itself (the committed confirmation of the fit before).
    Returns (path, records carried, held-out workloads left to time)."""
    old = sweep_mod.load_json(old_path, "gpu", "repeats", "source", "records", flag="--confirm-carry")
    if old is None:
        raise SystemExit(f"--confirm-carry: {old_path} does not exist")
    gpu = sweep_mod.load_json(sweep_path, "gpu", "records", flag="--confirm-carry")["gpu"]
    if old["gpu"] != gpu:
        raise SystemExit(f"--confirm-carry: {old_path} re-timed picks on {old['gpu']}; {sweep_path} is a sweep "
                         f"of {gpu}")
    source = fit_source(sweep_path)
    path = sweep_mod.job_path(out_dir, gpu, "confirm")
    same = os.path.exists(path) and os.path.samefile(path, old_path)
    data = None if same else sweep_mod.load_json(path, "gpu", "repeats", "source", "records", flag="--confirm-carry")
    if data is None:
        data = dict(gpu=gpu, sms=old.get("sms"), repeats=old["repeats"], source=source, records=[])
        if "header" in old:
            data["header"] = old["header"]
    for key, want in (("repeats", old["repeats"]), ("source", source)):
        if data[key] != want:
            raise SystemExit(f"--confirm-carry: {path} holds a confirmation with {key} {data[key]!r}, "
                             f"this carry would need {want!r}")
    have = {r["name"] for r in data["records"]}
    rows = {row["name"]: row for _, _, row in targets(sweep_path)}
    carried = 0
    for r in old["records"]:
        row = rows.get(r["name"])
        if row is None or r["name"] in have or (r["family"], r["pick"], r["best"]) != (row["family"], row["pick"],
                                                                                        row["best"]):
            continue
        data["records"].append(dict(r, sweep_vs_best=row["vs_best"], sweep_vs_hand=row["vs_hand"]))
        have.add(r["name"])
        carried += 1
    sweep_mod.save_json(data, path)
    return path, carried, sum(name not in have for name in rows)


def summary(data: dict) -> dict:
    """Per family: workloads, picks within 5% of the fastest re-timed configuration, the worst ratios, picks
    more than 3% slower than the hand rules by median and on every round, and the same counts on the
    sweep's timings of the same workloads."""
    out = {}
    for fam in FAMILIES + ("all",):
        sel = [r for r in data["records"] if fam in ("all", r["family"])]
        if not sel:
            continue
        n = len(sel)
        spread = sorted(max(v) / min(v) for r in sel for v in r["runs_ms"].values() if len(v) > 1 and min(v) > 0)
        out[fam] = dict(
            workloads=n,
            within_5pct_of_best=sum(r["vs_best"] <= NEAR for r in sel) / n,
            worst_vs_best=max(r["vs_best"] for r in sel),
            worst_vs_hand=max(r["vs_hand"] for r in sel),
            geomean_vs_hand=math.exp(sum(math.log(r["vs_hand"]) for r in sel) / n),
            slower_than_hand=sum(r["vs_hand"] > SLOWER for r in sel),
            slower_than_hand_every_round=sum(bool(r["vs_hand_runs"]) and min(r["vs_hand_runs"]) > SLOWER for r in sel),
            sweep_within_5pct_of_best=sum(r["sweep_vs_best"] <= NEAR for r in sel) / n,
            sweep_slower_than_hand=sum(r["sweep_vs_hand"] > SLOWER for r in sel),
            sweep_worst_vs_hand=max(r["sweep_vs_hand"] for r in sel),
            run_spread_median=statistics.median(spread) if spread else math.nan,
            run_spread_p99=spread[min(len(spread) - 1, int(0.99 * len(spread)))] if spread else math.nan,
        )
    return out


def print_summary(data: dict) -> dict:
    stats = summary(data)
    print(f"\n{data['gpu']}: held-out picks re-timed, {data['repeats']} interleaved rounds "
          f"(fit of {data['source']['sweep']}, sha256 {data['source']['sweep_sha256']})")
    slow = sorted((r for r in data["records"] if r["vs_hand"] > SLOWER), key=lambda r: -r["vs_hand"])
    if slow:
        print(f"\npicks > {SLOWER:.2f}x the hand rules (median of rounds; every round; the sweep's ratio)")
        for r in slow:
            every = bool(r["vs_hand_runs"]) and min(r["vs_hand_runs"]) > SLOWER
            print(f"  {r['name']:58s} {r['pick']:>12s} {r['vs_hand']:7.3f} {'yes' if every else 'no':>4s} "
                  f"{r['sweep_vs_hand']:7.3f}")
    print(f"\n{'family':8s} {'n':>4s} {'<=5% of best':>13s} {'(sweep)':>8s} {'> 3% slower':>12s} {'every round':>12s} "
          f"{'(sweep)':>8s} {'worst vs hand':>14s} {'(sweep)':>8s} {'geomean vs hand':>16s}")
    for fam, s in stats.items():
        print(f"{fam:8s} {s['workloads']:4d} {s['within_5pct_of_best']:13.1%} {s['sweep_within_5pct_of_best']:8.1%} "
              f"{s['slower_than_hand']:12d} {s['slower_than_hand_every_round']:12d} {s['sweep_slower_than_hand']:8d} "
              f"{s['worst_vs_hand']:14.3f} {s['sweep_worst_vs_hand']:8.3f} {s['geomean_vs_hand']:16.3f}")
    return stats
