"""Re-timing what a kernel change moved (tritium.tune.retime): which candidates, the calibration, resume,
shards, and putting the timings into the sweep."""

import json
import math
from pathlib import Path

import pytest

from tritium.attention.config import DECODE, PREFILL
from tritium.runtime import interpreting
from tritium.tune import attention as tune
from tritium.tune import confirm, retime

# block_m, block_q, tile_n, num_splits, num_warps, num_stages, kernel
SPLIT32 = [16, 4, 32, 8, 4, 2, "triton"]


@pytest.mark.parametrize("config, head_dim, affected", [
    (SPLIT32, 128, True),
    (SPLIT32, 64, True),
    (SPLIT32, 256, False),  # 32 x 256 elements: more than the kernel preloads
    ([16, 4, 32, 1, 4, 2, "triton"], 128, False),  # no split
    ([16, 4, 32, 8, 4, 3, "triton"], 128, False),  # 3 stages
    ([16, 4, 64, 8, 4, 2, "triton"], 64, False),  # 64-key tiles
    ([16, 4, 16, 8, 4, 1, "triton"], 96, True),  # head_dim padded to 128: 16 x 128
    ([128, 32, 64, 1, 4, 2, "gluon"], 128, False),
    ([16, 4, 32, 8, 4, 2], 128, True),  # sweeps before the kernel field
])
def test_preload_affected(config, head_dim, affected):
    assert retime.preload_affected(config, head_dim) is affected


def _record(context, times, configs, head_dim=128, family=DECODE):
    w = dict(num_seqs=1, num_prefill=0, q_len=1, context=context, head_dim=head_dim, group=4, num_kv_heads=8,
             block_size=16, kv_dtype="bf16", dtype="bf16")
    return dict(name=tune.Workload(**w).name, workload=w, family=family, times_ms=times, configs=configs,
                runs_ms={k: [v, v] for k, v in times.items() if v is not None})


def _sweep():
    cfg = {"hand": [16, 4, 64, 64, 4, 2, "triton"], "a": SPLIT32, "b": [16, 4, 32, 16, 4, 2, "triton"],
           "c": [16, 4, 64, 8, 4, 3, "triton"], "d": [16, 4, 128, 1, 4, 3, "triton"]}
    return dict(gpu="G", sms=132, records=[
        _record(4096, {"hand": 1.0, "a": 1.1, "b": 1.3, "c": 0.98, "d": 1.2}, cfg),  # a within 15%: re-timed
        _record(4097, {"hand": 1.0, "a": 1.3, "b": 1.4, "c": 1.0, "d": 1.1}, cfg),  # nothing near the best
        _record(4098, {"hand": 1.0, "a": 0.9, "b": None, "c": 0.95, "d": 0.99}, cfg),  # a is the best
        _record(4099, {"hand": 1.0, "a": 0.9, "b": 0.9, "c": 1.0, "d": 1.0}, cfg, head_dim=256),  # no preload
        _record(4100, {"hand": 1.0, "a": 0.9, "b": 0.9, "c": 1.0, "d": 1.0}, cfg, family=PREFILL),
    ])


def test_targets_pick_the_affected_candidates_and_two_calibrators():
    got = {w.name: (a, c) for w, a, c in retime.targets(_sweep())}
    names = {k: r["name"] for k, r in zip(("near", "far", "best", "d256", "pre"), _sweep()["records"])}
    assert set(got) == {names["near"], names["best"]}
    assert got[names["near"]] == (["a", "b"], ["hand", "c"])
    assert got[names["best"]] == (["a", "b"], ["hand", "c"])  # b failed in the sweep: timed again anyway
    assert [w.name for w, _, _ in retime.targets(_sweep(), PREFILL)] == [names["pre"]]


def test_apply_scales_by_the_calibrators_geomean(tmp_path):
    sweep_path = tmp_path / "attention-G.json"
    sweep = _sweep()
    sweep_path.write_text(json.dumps(sweep))
    near, best = sweep["records"][0]["name"], sweep["records"][2]["name"]
    sha = confirm.sha256_short(str(sweep_path))
    # The new run is 10% slower on hand and 20% slower on c: scale = sqrt(1/1.1 * 0.98/(0.98*1.2)).
    rt = dict(gpu="G", repeats=2, source=dict(sweep="attention-G.json", sweep_sha256=sha), records=[
        dict(name=near, affected=["a", "b"], calibrators=["hand", "c"],
             times_ms={"a": 1.0, "b": None, "hand": 1.1, "c": 0.98 * 1.2}, runs_ms={"a": [1.0, 1.0]},
             errors={"b": "OutOfResources: shared memory"}),
        dict(name=best, affected=["a", "b"], calibrators=["hand", "c"],
             times_ms={"a": 1.0, "b": 2.0, "hand": None, "c": None}, runs_ms={}, errors={}),
    ])
    rt_path = tmp_path / "rt.json"
    rt_path.write_text(json.dumps(rt))
    out = retime.apply(str(sweep_path), [str(rt_path)], date="D")
    assert out["applied"] == 1 and out["skipped"] == 1
    scale = math.sqrt(1 / 1.1 * 1 / 1.2)
    got = {r["name"]: r for r in json.loads(sweep_path.read_text())["records"]}
    assert got[near]["times_ms"]["a"] == pytest.approx(scale)
    assert got[near]["times_ms"]["b"] is None and "OutOfResources" in got[near]["errors"]["b"]
    assert got[near]["times_ms"]["hand"] == 1.0 and got[near]["times_ms"]["c"] == 0.98  # calibrators kept
    assert got[near]["runs_ms"]["a"] == pytest.approx([scale, scale]) and "b" not in got[near]["runs_ms"]
    assert got[near]["retimed"]["scale"] == pytest.approx(scale) and got[near]["retimed"]["date"] == "D"
    assert got[best]["times_ms"]["a"] == 0.9 and "retimed" not in got[best]  # no calibrator: left alone
    with pytest.raises(SystemExit, match="sha256"):  # the sweep changed since it was re-timed
        retime.apply(str(sweep_path), [str(rt_path)])
    # Workloads shorter than min_context keep their sweep timings.
    sweep_path.write_text(json.dumps(sweep))
    rt["source"]["sweep_sha256"] = confirm.sha256_short(str(sweep_path))
    rt_path.write_text(json.dumps(rt))
    out = retime.apply(str(sweep_path), [str(rt_path)], min_context=4099)
    assert out["applied"] == 0 and out["short"] == 2
    assert json.loads(sweep_path.read_text())["records"][0]["times_ms"]["a"] == 1.1


KNOBS = {DECODE: [(16, 1, 0), (16, 1, 2), (32, 3, 2)], PREFILL: [(16, 16, 2, 1)]}
WORKLOADS = [tune.Workload(2, 0, 1, 40, 64, 2, 1, 16, "fp16", dtype="fp16"),
             tune.Workload(1, 0, 1, 33, 64, 2, 1, 16, "fp16", dtype="fp16"),
             tune.Workload(1, 0, 1, 48, 64, 2, 1, 16, "fp16", dtype="fp16")]


@pytest.mark.skipif(not interpreting(), reason="the GPU re-timing is run by bench/gpu_retime.sh")
def test_retime_interpreter_resume_shards_merge_apply(tmp_path, monkeypatch):
    monkeypatch.setattr(tune, "KNOBS", KNOBS)
    sweep = Path(tune.sweep(str(tmp_path / "sweep"), workloads=WORKLOADS))
    data = json.loads(sweep.read_text())
    for r in data["records"]:  # make the split 16-key candidate the best, so that every workload is re-timed
        r["times_ms"]["16-1-2"] = 0.5 * min(v for v in r["times_ms"].values() if v is not None)
    sweep.write_text(json.dumps(data))
    out = tmp_path / "rt"
    path = Path(retime.retime(str(sweep), str(out), repeats=2))
    got = json.loads(path.read_text())
    assert sorted(r["name"] for r in got["records"]) == sorted(w.name for w in WORKLOADS)
    for r in got["records"]:
        assert r["affected"] == ["16-1-2"] and "hand" in r["calibrators"] and len(r["calibrators"]) == 2
        assert set(r["runs_ms"]) == set(r["affected"] + r["calibrators"])
        assert all(len(v) == 2 and min(v) > 0 for v in r["runs_ms"].values())
    retime.retime(str(sweep), str(out), repeats=2)  # resumed: nothing new
    assert len(json.loads(path.read_text())["records"]) == 3
    with pytest.raises(SystemExit, match="repeats"):
        retime.retime(str(sweep), str(out), repeats=3)

    shards = [Path(retime.retime(str(sweep), str(tmp_path / f"s{i}"), repeats=2, shard=(i, 2))) for i in range(2)]
    names = [{r["name"] for r in json.loads(p.read_text())["records"]} for p in shards]
    assert not names[0] & names[1] and names[0] | names[1] == {w.name for w in WORKLOADS}
    merged = tmp_path / "merged.json"
    assert tune.main(["--retime-merge", str(merged), *map(str, shards)]) == 0
    assert retime.merge(str(merged), [str(shards[0])]) == 0
    assert tune.main(["--retime-apply", str(sweep), str(merged)]) == 0
    after = {r["name"]: r for r in json.loads(sweep.read_text())["records"]}
    for r in json.loads(merged.read_text())["records"]:
        rec = after[r["name"]]
        assert rec["retimed"]["keys"] == ["16-1-2"] and rec["retimed"]["scale"] > 0
        assert rec["times_ms"]["16-1-2"] == pytest.approx(r["times_ms"]["16-1-2"] * rec["retimed"]["scale"])


@pytest.mark.parametrize("argv, message", [
    (["--retime", "missing.json"], "does not exist"),
    (["--retime-merge", "only.json"], "at least one shard"),
    (["--retime-apply", "only.json"], "at least one re-timing"),
])
def test_retime_arguments_refused(argv, message, capsys):
    with pytest.raises(SystemExit):
        tune.main(argv)
    assert message in capsys.readouterr().err
