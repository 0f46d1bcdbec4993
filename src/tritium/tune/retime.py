"""Re-timing the candidates of a sweep that a kernel change made faster or slower, without re-sweeping.

    python -m tritium.tune attention --retime SWEEP [--part FAMILY] [--shard I/N] [--out DIR]
    python -m tritium.tune attention --retime-merge INTO SHARD [SHARD ...]
    python -m tritium.tune attention --retime-apply SWEEP RETIME [RETIME ...]

A sweep holds every candidate's timing of every workload. When a kernel change alters only some
configurations (stop 42: the first key tile loaded before the PDL wait, only in split calls of 32-key tiles at
2 stages), the other timings still hold, and re-sweeping everything costs ~2.3 s a workload a GPU. Here only
the workloads where an affected configuration was the best or within ``WITHIN`` of it are built again, and
only their affected candidates are timed, together with up to two unaffected ones (the hand rules and the
fastest other candidate: the calibrators), in interleaved rounds, cold as the sweep times decode.

Applying puts each new timing into the sweep scaled by the geometric mean, over the calibrators, of
(sweep timing / new timing): the GPU, clocks and process of the new run may differ from the sweep's by a
few percent, and the ratios within a record are what the fit uses. Each record keeps what was done to it
(``retimed``: date, keys, scale, calibrators).
"""

import datetime
import math
import os
import time

import torch

from tritium.attention.config import DECODE
from tritium.bench.common import header
from tritium.tune import attention as sweep_mod
from tritium.tune import confirm
from tritium.tune.trees import HAND, key_knobs

WITHIN = 1.15  # re-time a workload where an affected candidate was within this factor of its best
PRELOAD_ELEMENTS = 4096  # the kernel preloads tiles of at most this many elements (TILE_N x HEAD_DIM_PAD)


def preload_affected(config: list, head_dim: int) -> bool:
    """Whether the stop-42 preload changed a configuration (as a sweep records it: block_m, block_q, tile_n,
    num_splits, num_warps, num_stages[, kernel[, max_registers]]; sweeps before the Gluon kernel had no kernel
    field): the Triton kernel, split, 32-key tiles or smaller, at most 2 stages, and a tile the kernel may
    preload."""
    tile_n, splits, stages = config[2], config[3], config[5]
    kernel = config[6] if len(config) > 6 else "triton"
    pad = 1 << max(0, head_dim - 1).bit_length()
    return kernel == "triton" and splits > 1 and tile_n <= 32 and stages <= 2 and tile_n * pad <= PRELOAD_ELEMENTS


def targets(sweep: dict, part: str | None = DECODE, within: float = WITHIN) -> list[tuple]:
    """(workload, keys to re-time, calibrator keys) for each record of ``sweep`` that the preload may
    have re-ranked, in the sweep's family-interleaved order."""
    out = []
    for r in sweep["records"]:
        if part and r["family"] != part:
            continue
        head_dim = r["workload"]["head_dim"]
        times = {k: v for k, v in r["times_ms"].items() if v is not None}
        affected = [k for k, cfg in r["configs"].items() if preload_affected(cfg, head_dim)]
        if not affected or not times:
            continue
        best = min(times.values())
        timed = [times[k] for k in affected if k in times]
        if not timed or min(timed) > within * best:
            continue
        others = sorted((k for k in times if k not in affected), key=times.get)
        calib = [HAND] if HAND in others else []
        calib += [k for k in others if k != HAND][:2 - len(calib)]  # and the fastest others, two in all
        if not calib:
            continue
        out.append((sweep_mod.Workload(**r["workload"]), affected, calib))
    by_name = {w.name: (w, a, c) for w, a, c in out}
    return [by_name[w.name] for w in sweep_mod.interleave_families([w for w, _, _ in out])]


def sweep_source(sweep_path: str) -> dict:
    """What a re-timing of the sweep at ``sweep_path`` is of: its name and sha256."""
    return dict(sweep=os.path.basename(sweep_path), sweep_sha256=confirm.sha256_short(sweep_path))


def retime(sweep_path: str, out_dir: str, *, repeats: int = 2, part: str | None = DECODE,
           shard: tuple[int, int] = (0, 1), limit: int | None = None, jobs: int = 0, compile_only: bool = False,
           device=None) -> str:
    """Re-time the affected candidates of ``sweep_path`` (see the module docstring); returns the JSON path
    (``DIR/attention-<gpu>.retime.json``, written after every workload; a re-run continues it)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    device, name, sms, l2, sweep, path, data = confirm.open_job(
        sweep_path, out_dir, "retime", repeats=repeats, source=sweep_source(sweep_path), device=device)
    done = {r["name"] for r in data["records"]}
    todo = [(w, a, c) for w, a, c in targets(sweep, part) if w.name not in done]
    todo = confirm.job_share(todo, lambda ws: {w.name: [key_knobs(k) for k in a + c] for w, a, c in ws}, name=name,
                             noun="workloads", done=len(done), device=device, sms=sms, shard=shard, limit=limit,
                             jobs=jobs, compile_only=compile_only)
    if todo is None:
        return path
    if device.type == "cuda":
        data["header"] = header(device)
    for i, (w, affected, calib) in enumerate(todo):
        t0 = time.perf_counter()
        rec = sweep_mod.sweep_workload(w, device, sms, l2, check=False, repeats=repeats,
                                       candidates=[key_knobs(k) for k in affected + calib],
                                       order=sweep.get("order", sweep_mod.BACK_TO_BACK))
        data["records"].append(dict(name=w.name, family=w.family(), affected=affected, calibrators=calib,
                                    copies=rec["copies"], times_ms=rec["times_ms"], runs_ms=rec.get("runs_ms", {}),
                                    errors=rec.get("errors", {})))
        sweep_mod.save_json(data, path)
        print(f"[{i + 1}/{len(todo)}] {w.name}: {len(affected)} re-timed, calibrators {calib} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return path


def merge(into: str, paths) -> int:
    """Add the records of the shards at ``paths`` to the re-timing ``into`` (created from the first shard
    when missing); returns how many were added. Shards of another GPU, repeat count or sweep are refused."""
    return confirm.merge(into, paths, flag="--retime-merge")


def apply(sweep_path: str, retime_paths, *, date: str | None = None, min_context: int = 0) -> dict:
    """Put the re-timings at ``retime_paths`` into the sweep at ``sweep_path`` (in place), each new timing
    scaled by its record's calibration (see the module docstring). A re-timing of another GPU or of
    another version of the sweep is refused; a record without a usable calibrator is skipped, and so is
    one of fewer than ``min_context`` cached tokens (``short``). Returns counts (applied, skipped, short)
    and the scales' spread.

    Why ``min_context``: the sweep times decode as attention calls back to back, where the preload's
    loads overlap the previous attention call's merge; in a model they overlap a GEMV. On the H100 the
    two orders agree on long calls and disagree on short ones (bench/NOTES.md, stop 43: at B=4 L=768,
    12 splits 4% faster back to back and 4% slower after a GEMV; the engine's batch-1 graph 0.8% slower
    with a tree refitted on every re-timing, its calls at L <= 1024 having moved to fewer splits)."""
    sweep = sweep_mod.load_json(sweep_path, "gpu", "records", flag="--retime-apply")
    if sweep is None:
        raise SystemExit(f"--retime-apply: {sweep_path} does not exist")
    sha = confirm.sha256_short(sweep_path)
    records = {r["name"]: r for r in sweep["records"]}
    date = date or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    applied, skipped, short, scales = 0, 0, 0, []
    for path in retime_paths:
        data = sweep_mod.load_json(path, "gpu", "source", "records", flag="--retime-apply")
        if data is None:
            raise SystemExit(f"--retime-apply: {path} does not exist")
        if data["gpu"] != sweep["gpu"] or data["source"]["sweep_sha256"] != sha:
            raise SystemExit(f"--retime-apply: {path} re-times {data['source']} on {data['gpu']}; {sweep_path} is "
                             f"sha256 {sha} of {sweep['gpu']}")
        for rt in data["records"]:
            r = records.get(rt["name"])
            if r is None:
                raise SystemExit(f"--retime-apply: {rt['name']} of {path} is not in {sweep_path}")
            if r["workload"]["context"] < min_context:
                short += 1
                continue
            new, old = rt["times_ms"], r["times_ms"]
            ratios = [old[k] / new[k] for k in rt["calibrators"] if old.get(k) and new.get(k)]
            if not ratios:
                skipped += 1
                continue
            scale = math.exp(sum(map(math.log, ratios)) / len(ratios))
            for k in rt["affected"]:
                old[k] = None if new.get(k) is None else new[k] * scale
                if "runs_ms" in r:
                    r["runs_ms"][k] = [t * scale for t in rt["runs_ms"].get(k, [])]
                    if not r["runs_ms"][k]:
                        del r["runs_ms"][k]
                if k in rt.get("errors", {}):
                    r.setdefault("errors", {})[k] = rt["errors"][k]
            r["retimed"] = dict(date=date, keys=rt["affected"], scale=scale, calibrators=rt["calibrators"],
                                gpu_date=data.get("header", {}).get("date"))
            applied += 1
            scales.append(scale)
    sweep_mod.save_json(sweep, sweep_path)
    scales.sort()
    spread = dict(median=scales[len(scales) // 2], p05=scales[len(scales) // 20],
                  p95=scales[min(len(scales) - 1, 19 * len(scales) // 20)]) if scales else {}
    return dict(applied=applied, skipped=skipped, short=short, scale=spread)

