"""Re-timing the held-out validation (tritium.tune.confirm): what is timed, the scoring, resume, shards."""

import json
import math
import re
from pathlib import Path

import pytest

from tritium.attention.config import DECODE, PREFILL
from tritium.runtime import interpreting
from tritium.tune import attention as tune
from tritium.tune import confirm

KNOBS = {DECODE: [(16, 1, 0), (16, 1, 2)], PREFILL: [(16, 16, 2, 1)]}
WORKLOADS = [tune.Workload(2, 0, 1, 40, 64, 2, 1, 16, "fp16", dtype="fp16"),
             tune.Workload(1, 0, 1, 33, 64, 2, 1, 16, "fp16", dtype="fp16"),
             tune.Workload(1, 1, 20, 33, 64, 4, 1, 16, "fp16", dtype="fp16")]


def _fit_stub(tmp_path, monkeypatch):
    """A swept JSON of three tiny workloads and a validation JSON naming picks, as --fit writes them."""
    monkeypatch.setattr(tune, "KNOBS", KNOBS)
    sweep = Path(tune.sweep(str(tmp_path / "sweep"), workloads=WORKLOADS))
    rows = [dict(name=WORKLOADS[0].name, family=DECODE, pick="16-1-2", best="16-1-0", vs_best=1.2, vs_hand=1.1),
            dict(name=WORKLOADS[1].name, family=DECODE, pick="hand", best="hand", vs_best=1.0, vs_hand=1.0),
            dict(name=WORKLOADS[2].name, family=PREFILL, pick="16-16-2-1", best="hand", vs_best=1.01,
                 vs_hand=1.01)]
    Path(confirm.validation_path(str(sweep))).write_text(json.dumps(dict(held_out=rows)))
    return sweep


def test_targets_time_pick_hand_and_best_once(tmp_path, monkeypatch):
    sweep = _fit_stub(tmp_path, monkeypatch)
    got = {w.name: keys for w, keys, _ in confirm.targets(str(sweep))}
    assert got == {WORKLOADS[0].name: ["16-1-2", "hand", "16-1-0"], WORKLOADS[1].name: ["hand"],
                   WORKLOADS[2].name: ["16-16-2-1", "hand"]}
    assert [w.name for w, _, _ in confirm.targets(str(sweep), PREFILL)] == [WORKLOADS[2].name]
    assert len(confirm.targets(str(sweep), kv_dtype="fp16")) == 3 and confirm.targets(str(sweep), kv_dtype="fp8") == []
    assert [w.name for w, _, _ in confirm.targets(str(sweep), DECODE, "fp16")] == [w.name for w in WORKLOADS[:2]]
    assert [w.name for w, _, _ in confirm.targets(str(sweep), match=re.compile("^prefill-"))] == [WORKLOADS[2].name]
    assert [w.name for w, _, _ in confirm.targets(str(sweep), DECODE, match=re.compile("-L40-"))] == [WORKLOADS[0].name]
    Path(confirm.validation_path(str(sweep))).unlink()
    with pytest.raises(SystemExit, match="validation.json does not exist"):
        confirm.targets(str(sweep))


def test_score_medians_and_rounds():
    rec = dict(pick="a", times_ms={"a": 1.1, "hand": 1.0, "b": 0.9},
               runs_ms={"a": [1.1, 1.1, 1.2], "hand": [1.0, 1.2, 1.0], "b": [0.9, 0.9, 0.9]})
    s = confirm.score(rec)
    assert s["vs_hand"] == pytest.approx(1.1) and s["vs_best"] == pytest.approx(1.1 / 0.9)
    assert s["vs_hand_runs"] == pytest.approx([1.1, 1.1 / 1.2, 1.2])
    failed = confirm.score(dict(pick="a", times_ms={"a": None, "hand": 1.0}, runs_ms={"hand": [1.0, 1.0]}))
    assert failed["vs_hand"] == math.inf and failed["vs_best"] == math.inf


def test_summary_counts_slower_by_median_and_every_round():
    def rec(fam, vs_hand, runs, vs_best=1.0, sweep_vs_hand=1.0):
        return dict(family=fam, vs_hand=vs_hand, vs_best=vs_best, vs_hand_runs=runs, sweep_vs_best=1.0,
                    sweep_vs_hand=sweep_vs_hand, runs_ms={"hand": [1.0, 1.02]})
    data = dict(records=[rec(DECODE, 1.05, [1.04, 1.06]), rec(DECODE, 1.04, [1.01, 1.07], vs_best=1.06),
                         rec(DECODE, 0.9, [0.9, 0.9], sweep_vs_hand=1.2), rec(PREFILL, 1.0, [1.0, 1.0])])
    s = confirm.summary(data)
    assert s[DECODE]["workloads"] == 3 and s[DECODE]["slower_than_hand"] == 2
    assert s[DECODE]["slower_than_hand_every_round"] == 1 and s[DECODE]["sweep_slower_than_hand"] == 1
    assert s[DECODE]["within_5pct_of_best"] == pytest.approx(2 / 3) and s[DECODE]["worst_vs_hand"] == 1.05
    assert s[PREFILL]["slower_than_hand"] == 0 and s["all"]["workloads"] == 4
    assert s[DECODE]["run_spread_median"] == pytest.approx(1.02)


@pytest.mark.skipif(not interpreting(), reason="the GPU confirmation is run by bench/gpu_confirm.sh")
def test_confirm_interpreter_resume_shards_merge(tmp_path, monkeypatch):
    """Every held-out workload re-timed once, with its keys each timed every round; a re-run times nothing
    new; two shards take disjoint workloads and merge into the whole; another fit's file is refused."""
    sweep = _fit_stub(tmp_path, monkeypatch)
    out = tmp_path / "confirm"
    path = Path(confirm.confirm(str(sweep), str(out), repeats=2))
    data = json.loads(path.read_text())
    assert sorted(r["name"] for r in data["records"]) == sorted(w.name for w in WORKLOADS)
    for r in data["records"]:
        keys = list(dict.fromkeys([r["pick"], "hand", r["best"]]))
        assert set(r["runs_ms"]) == set(keys) and all(len(v) == 2 for v in r["runs_ms"].values())
        assert r["vs_hand"] > 0 and len(r["vs_hand_runs"]) == 2 and r["sweep_vs_hand"] > 0
    confirm.confirm(str(sweep), str(out), repeats=2)
    assert len(json.loads(path.read_text())["records"]) == 3
    with pytest.raises(SystemExit, match="repeats"):
        confirm.confirm(str(sweep), str(out), repeats=3)

    shards = []
    for i in range(2):
        shards.append(Path(confirm.confirm(str(sweep), str(tmp_path / f"s{i}"), repeats=2, shard=(i, 2))))
    names = [{r["name"] for r in json.loads(p.read_text())["records"]} for p in shards]
    assert not names[0] & names[1] and names[0] | names[1] == {w.name for w in WORKLOADS}
    merged = tmp_path / "merged.json"
    assert tune.main(["--confirm-merge", str(merged), *map(str, shards)]) == 0
    assert len(json.loads(merged.read_text())["records"]) == 3
    assert confirm.merge(str(merged), [str(shards[0])]) == 0
    # A re-timing of some workloads (--kv-dtype after an fp8 kernel change) replaces their records with --replace.
    redo = json.loads(shards[0].read_text())
    for r in redo["records"]:
        r["vs_hand"] = 7.0
    shards[0].write_text(json.dumps(redo))
    assert confirm.merge(str(merged), [str(shards[0])]) == 0  # kept without --replace
    assert tune.main(["--confirm-merge", str(merged), str(shards[0]), "--replace"]) == 0
    got = {r["name"]: r["vs_hand"] for r in json.loads(merged.read_text())["records"]}
    assert len(got) == 3 and {n for n, v in got.items() if v == 7.0} == names[0]
    assert all(r["date"] for r in json.loads(merged.read_text())["records"])

    # A refit changes the validation JSON: its confirmation is another one.
    v = Path(confirm.validation_path(str(sweep)))
    v.write_text(v.read_text().replace("16-1-2", "16-1-0"))
    with pytest.raises(SystemExit, match="source"):
        confirm.confirm(str(sweep), str(out), repeats=2)

    # ...which starts from the old one's records of the picks that did not change: WORKLOADS[0]'s pick moved.
    old = json.loads(path.read_text())
    assert tune.main(["--confirm-carry", str(sweep), str(path), "--out", str(out)]) == 0  # in place
    carried = json.loads(path.read_text())
    assert carried["source"] == confirm.fit_source(str(sweep)) and carried["repeats"] == 2
    assert sorted(r["name"] for r in carried["records"]) == sorted(w.name for w in WORKLOADS[1:])
    for r in carried["records"]:
        was = next(o for o in old["records"] if o["name"] == r["name"])
        assert r["runs_ms"] == was["runs_ms"] and r["vs_hand"] == was["vs_hand"]
    prefill = next(r for r in carried["records"] if r["family"] == PREFILL)
    assert prefill["sweep_vs_hand"] == 1.01  # the new validation's ratios
    # Carrying again adds nothing; the new fit's confirmation then times only the moved pick.
    assert confirm.carry(str(sweep), str(shards[0]), str(out))[1:] == (0, 1)
    data = json.loads(Path(confirm.confirm(str(sweep), str(out), repeats=2)).read_text())
    got = {r["name"]: r["pick"] for r in data["records"]}
    assert len(data["records"]) == 3 and got[WORKLOADS[0].name] == "16-1-0"
    # Another GPU's confirmation, or a destination of another fit, is refused.
    other = tmp_path / "other.json"
    other.write_text(json.dumps(dict(old, gpu="Some GPU")))
    with pytest.raises(SystemExit, match="re-timed picks on Some GPU"):
        confirm.carry(str(sweep), str(other), str(out))
    v.write_text(v.read_text().replace("16-16-2-1", "hand"))
    with pytest.raises(SystemExit, match="holds a confirmation with source"):
        confirm.carry(str(sweep), str(shards[0]), str(out))


@pytest.mark.parametrize("argv, message", [
    (["--confirm", "missing.json"], "argument --confirm: missing.json does not exist"),
    (["--confirm", "SWEEP", "--repeats", "1"], "repeats must be >= 2"),
    # (it was a FileNotFoundError from hashing the validation JSON)
    (["--confirm", "SWEEP"], "--confirm: SWEEP_DIR/sweep.validation.json does not exist (--fit SWEEP writes it)"),
    (["--confirm-merge", "only.json"], "at least one shard"),
    (["--confirm-summary", "missing.json"], "does not exist"),
    (["--confirm-carry", "SWEEP"], "--confirm-carry: expected 2 arguments"),
    (["--confirm-carry", "SWEEP", "missing.json"], "argument --confirm-carry: missing.json does not exist"),
    (["--confirm-carry", "SWEEP", "SWEEP"], "--confirm-carry: SWEEP_DIR/sweep.validation.json does not exist"),
    (["--fit", "SWEEP", "--kv-dtype", "fp8"], "--kv-dtype goes with --confirm or --resweep"),
    (["--confirm", "SWEEP", "--kv-dtype", "int4"], "argument --kv-dtype: invalid choice"),
    (["--confirm-summary", "SWEEP", "--replace"], "--replace goes with --merge or --confirm-merge"),
])
def test_confirm_arguments_refused(argv, message, tmp_path, capsys):
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"gpu": "cpu", "knobs": KNOBS, "records": []}))
    with pytest.raises(SystemExit) as exc:
        tune.main([str(sweep) if a == "SWEEP" else a for a in argv])
    assert exc.value.code == 2
    assert message.replace("SWEEP_DIR", str(tmp_path)).replace("SWEEP", str(sweep)) in capsys.readouterr().err
