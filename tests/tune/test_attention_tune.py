"""The attention tuner: knob -> config mapping, the sweep (interpreter), the fit and its export, and the
committed trees (whole input domain, valid configs, data named in their header)."""

import dataclasses
import hashlib
import importlib.util
import json
import math
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from tritium.attention import paged_attention, select_attention_config, tuned
from tritium.attention import config as config_mod
from tritium.attention.config import DECODE, MAX_SPLITS, PREFILL, config_from_knobs, features
from tritium.attention.reference import paged_attention_ref
from tritium.runtime import default_device, interpreting
from tritium.tune import attention as tune

REPO = Path(__file__).resolve().parents[2]


def _valid(cfg, group, max_seqlen_q):
    assert cfg.block_q >= 1 and cfg.block_q * group <= cfg.block_m, cfg
    assert cfg.block_m & (cfg.block_m - 1) == 0 and cfg.tile_n & (cfg.tile_n - 1) == 0, cfg
    assert 1 <= cfg.num_splits <= MAX_SPLITS and cfg.num_warps in (2, 4, 8) and cfg.num_stages >= 1, cfg
    if max_seqlen_q * group <= 64:
        assert cfg.block_m >= max_seqlen_q * group


def _random_batch(rng):
    """A batch shape from the tuner's domain (and beyond it: the trees must answer everywhere)."""
    group = rng.choice((1, 2, 4, 8, 16))
    kv_heads = rng.choice((1, 2, 4, 8, 16))
    num_seqs = rng.choice((1, 3, 16, 100, 256, 1024))
    q = rng.choice((1, 1, 2, 8, 17, 512, 4096))
    k = max(q, rng.choice((1, 128, 1000, 8192, 131072, 1 << 20)))
    return dict(num_tokens=num_seqs * q, num_seqs=num_seqs, num_q_heads=group * kv_heads, num_kv_heads=kv_heads,
                head_dim=rng.choice((64, 80, 128, 256)), block_size=rng.choice((16, 32, 64)), max_seqlen_q=q,
                max_seqlen_k=k)


@pytest.mark.parametrize("family_knobs", [DECODE, PREFILL])
def test_config_from_knobs_valid(family_knobs):
    rng = random.Random(1)
    for _ in range(200):
        b = _random_batch(rng)
        group = b["num_q_heads"] // b["num_kv_heads"]
        if (b["max_seqlen_q"] * group <= 64) != (family_knobs == DECODE):
            continue
        for knobs in tune.KNOBS[family_knobs]:
            cfg = config_from_knobs(family_knobs, knobs, num_seqs=b["num_seqs"], num_q_heads=b["num_q_heads"],
                                    num_kv_heads=b["num_kv_heads"], max_seqlen_q=b["max_seqlen_q"],
                                    max_seqlen_k=b["max_seqlen_k"], sms=132)
            _valid(cfg, group, b["max_seqlen_q"])
            if family_knobs == DECODE and knobs[2] == 0:
                assert cfg.num_splits == 1


def _committed():
    return [name for name in tuned.TREES.values()
            if importlib.util.find_spec(f"tritium.attention.tuned.{name}") is not None]


def test_trees_committed_for_h100_and_h200():
    assert {"nvidia_h100", "nvidia_h200"} <= set(_committed())


@pytest.mark.parametrize("module", _committed())
def test_committed_tree_covers_domain(module):
    tree = importlib.import_module(f"tritium.attention.tuned.{module}")
    rng = random.Random(0)
    allowed = {DECODE: set(tune.DECODE_KNOBS), PREFILL: set(tune.PREFILL_KNOBS)}
    for _ in range(2000):
        b = _random_batch(rng)
        kv = rng.choice((torch.bfloat16, torch.float8_e4m3fn))
        f = features(**b, kv_dtype=kv)
        for fam in (DECODE, PREFILL):
            knobs = getattr(tree, fam)(f)
            assert knobs == "hand" or knobs in allowed[fam], (fam, f, knobs)
        cfg = select_attention_config(**b, dtype=torch.bfloat16, kv_dtype=kv, device=torch.device("cpu"), tree=tree)
        _valid(cfg, b["num_q_heads"] // b["num_kv_heads"], b["max_seqlen_q"])


@pytest.mark.parametrize("module", _committed())
def test_committed_tree_names_its_data(module):
    """The header names the sweep JSON (committed) and its sha256."""
    tree = importlib.import_module(f"tritium.attention.tuned.{module}")
    m = re.search(r"--fit (\S+)``\n\(sha256 ([0-9a-f]{16})", tree.__doc__)
    assert m, tree.__doc__
    data = (REPO / m.group(1)).read_bytes()
    assert hashlib.sha256(data).hexdigest()[:16] == m.group(2)
    assert json.loads(data)["gpu"].startswith(next(k for k, v in tuned.TREES.items() if v == module))


def test_tuned_for_device():
    assert tuned.for_device("NVIDIA H100 80GB HBM3").__name__.endswith("nvidia_h100")
    assert tuned.for_device("triton-interpreter") is None
    assert tuned.for_device("AMD Instinct MI300X") is None


@pytest.mark.parametrize("module", _committed())
@pytest.mark.parametrize("q_len,seq_len", [(1, 200), (40, 70)])
def test_tree_selected_config_runs(module, q_len, seq_len):
    """The interpreter runs the configuration a GPU's tree picks, and matches the fp32 reference."""
    tree = importlib.import_module(f"tritium.attention.tuned.{module}")
    torch.manual_seed(0)
    num_seqs, hq, hkv, d, bs = 2, 4, 2, 64, 16
    pages = -(-seq_len // bs)
    dev = default_device()
    k_cache = torch.randn(num_seqs * pages, bs, hkv, d, dtype=torch.float16, device=dev)
    v_cache = torch.randn_like(k_cache)
    block_table = torch.randperm(num_seqs * pages, device=dev).int().view(num_seqs, pages)
    seq_lens = torch.full((num_seqs,), seq_len, dtype=torch.int32, device=dev)
    cu = torch.arange(0, (num_seqs + 1) * q_len, q_len, dtype=torch.int32, device=dev)
    q = torch.randn(num_seqs * q_len, hq, d, dtype=torch.float16, device=dev)
    cfg = select_attention_config(num_tokens=q.shape[0], num_seqs=num_seqs, num_q_heads=hq, num_kv_heads=hkv,
                                  head_dim=d, block_size=bs, max_seqlen_q=q_len, max_seqlen_k=seq_len,
                                  dtype=q.dtype, device=q.device, tree=tree)
    out = torch.full_like(q, float("nan"))
    paged_attention(q, k_cache, v_cache, block_table, seq_lens, cu, out=out, config=cfg)
    ref = paged_attention_ref(q, k_cache, v_cache, block_table, seq_lens, cu)
    assert not out.isnan().any()
    assert ((out.float() - ref).norm() / ref.norm()).item() < 5e-3, cfg


def _domain():
    """The workloads the fit distils on (``tune.workload_domain``), as feature dicts."""
    return [w.features() for w in tune.workload_domain()]


def _synthetic_sweep(path, seed=0):
    """A sweep JSON whose times follow a known rule: decode best is no split past 64 programs, else
    split 4/SM; prefill best is 64-row blocks at head_dim 256; every other configuration 20-60% slower (the
    candidates and hand rules that give one configuration take the same time)."""
    rng = random.Random(seed)
    records = []
    for w in tune.workload_grid(seed=seed):
        f = w.features()
        if w.family() == DECODE:
            best = "64-2-0" if f["programs"] > 64 else "64-2-4"
            keys = [tune.HAND] + ["-".join(map(str, k)) for k in tune.DECODE_KNOBS]
        else:
            best = "64-64-4-2" if f["head_dim"] == 256 else "128-128-8-3"
            keys = [tune.HAND] + ["-".join(map(str, k)) for k in tune.PREFILL_KNOBS]
        # one configuration, one time: candidates (and the hand rules) that give the same one time the same
        configs = {k: dataclasses.astuple(w.config(k if k == tune.HAND else tuple(map(int, k.split("-"))), 132))
                   for k in keys}
        by_config = {configs[best]: 1.0}
        for k in keys:
            by_config.setdefault(configs[k], 1.2 + 0.4 * rng.random())
        times = {k: by_config[configs[k]] for k in keys}
        records.append(dict(name=w.name, family=w.family(), features=f, times_ms=times))
    path.write_text(json.dumps(dict(gpu="NVIDIA TestGPU", sms=132, records=records)))


@pytest.mark.parametrize("seed", [0])
def test_fit_export_deterministic_and_learns(tmp_path, seed):
    pytest.importorskip("sklearn", reason="the tune extra: pip install 'tritium[tune]'")
    from tritium.tune import trees

    sweep = tmp_path / "attention-NVIDIA-TestGPU.json"
    _synthetic_sweep(sweep, seed)
    a = trees.fit_and_export(str(sweep), domain=_domain(), tree_dir=str(tmp_path / "a"))
    trees.fit_and_export(str(sweep), domain=_domain(), tree_dir=str(tmp_path / "b"))
    src_a = (tmp_path / "a" / "nvidia_testgpu.py").read_text()
    assert src_a == (tmp_path / "b" / "nvidia_testgpu.py").read_text()  # deterministic given the JSON
    # an experiment's table goes beside its tree, never over the one beside the sweep
    assert json.loads((tmp_path / "a" / "nvidia_testgpu.validation.json").read_text())["held_out"] == a["held_out"]
    assert not (tmp_path / "attention-NVIDIA-TestGPU.validation.json").exists()
    assert a["validation"]["all"]["within_5pct_of_best"] == 1.0, a["held_out"]
    assert set(a["trees"]) == {DECODE, PREFILL}
    for t in a["trees"].values():  # a gate of GATES for every head_dim and KV width swept
        assert set(t["gates"]) == {f"D{d}-KV{b}" for d in (64, 128, 256) for b in (8, 16)}, t
        assert set(map(tuple, t["gates"].values())) <= set(trees.GATES), t
    spec = importlib.util.spec_from_file_location("nvidia_testgpu", tmp_path / "a" / "nvidia_testgpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # B=1 L=8192: the hand rules' configuration there is (64, 2, 4)'s (64 splits of 64-key tiles), so either
    w = tune.Workload(1, 0, 1, 8192, 128, 4, 8, 16, "bf16")
    assert w.config(module.decode(w.features()), 132) == w.config((64, 2, 4), 132)
    w = tune.Workload(64, 0, 1, 2048, 128, 4, 8, 16, "bf16")  # 512 programs: no split
    assert w.config(module.decode(w.features()), 132) == w.config((64, 2, 0), 132)
    f = features(num_tokens=2048, num_seqs=1, num_q_heads=32, num_kv_heads=8, head_dim=256, block_size=16,
                 max_seqlen_q=2048, max_seqlen_k=2048, kv_dtype=torch.bfloat16)
    assert module.prefill(f) == (64, 64, 4, 2)


class _Tree:
    """One tree of a fake cost model: a pair's predicted log slowdown is its feature 0, plus ``offset`` on
    the pairs whose feature 0 is below 0.05 (the fast ones: where the trees of a forest disagree)."""

    def __init__(self, offset=0.0):
        self.offset = offset

    def predict(self, x):
        return x[..., 0] + self.offset * (x[..., 0] < 0.05)


class _Forest:
    def __init__(self, offsets):
        self.estimators_ = [_Tree(o) for o in offsets]

    def predict(self, x):
        return np.mean([t.predict(x) for t in self.estimators_], axis=0)


def test_safe_picks_gate_on_the_trees_spread():
    pytest.importorskip("sklearn", reason="the tune extra: pip install 'tritium[tune]'")
    from tritium.tune import trees

    # 3 workloads x 3 candidates (0: the hand rules); the trees agree: the margin m alone decides
    x = np.array([[[0.10], [0.00], [0.05]],  # candidate 1 gains 0.10 over the hand rules
                  [[0.10], [0.095], [0.30]],  # candidate 1 gains 0.005
                  [[0.00], [0.05], [0.10]]])  # the hand rules are the best predicted
    picks = trees._safe_picks(_Forest([0.0, 0.0]), x, None, 0, [(0.5, 0.0), (0.5, 0.01)])
    assert picks[(0.5, 0.0)].tolist() == [1, 1, 0]
    assert picks[(0.5, 0.01)].tolist() == [1, 0, 0]  # a 0.5% gain is not the 1% asked for
    # an unfit candidate is never picked, however fast it is predicted: the next best is
    unfit = np.array([[False, True, False]] * 3)
    assert trees._safe_picks(_Forest([0.0]), x, unfit, 0, [(0.5, 0.0)])[(0.5, 0.0)].tolist() == [2, 0, 0]
    # ten trees disagree on the pick: its gain over the hand rules is 0.10 - 0.02 i on tree i (mean 0.01)
    x = np.array([[[0.10], [0.00], [0.30]]])
    forest = _Forest([0.02 * i for i in range(10)])
    assert trees._safe_picks(forest, x, None, 0, [(0.5, 0.0)])[(0.5, 0.0)].tolist() == [1]  # median gain 0.01
    assert trees._safe_picks(forest, x, None, 0, [(0.5, 0.02)])[(0.5, 0.02)].tolist() == [0]
    assert trees._safe_picks(forest, x, None, 0, [(0.9, 0.0)])[(0.9, 0.0)].tolist() == [0]  # a loss on a tenth
    # no hand rules among the candidates: the smallest mean, ungated
    assert trees._safe_picks(forest, x, None, None, [(0.9, 0.0)])[(0.9, 0.0)].tolist() == [1]


def test_safe_picks_fall_back_to_the_rows_fallback():
    """Where the gate does not take the pick, the row's fallback is answered; the gain is measured against the
    fallback, and an unfit fallback gives way to the hand rules."""
    from tritium.tune import trees

    # candidate 0 the hand rules; row 0: pick 1 gains 0.10 over the hand rules but only 0.005 over fallback 2
    x = np.array([[[0.10], [0.00], [0.005]],
                  [[0.10], [0.00], [0.005]],
                  [[0.10], [0.095], [0.20]]])  # row 2: pick 1 gains 0.005 over the hand rules, 0.105 over 2
    gate = (0.5, 0.01)
    assert trees._safe_picks(_Forest([0.0]), x, None, 0, [gate])[gate].tolist() == [1, 1, 0]
    assert trees._safe_picks(_Forest([0.0]), x, None, 0, [gate], [2, 0, 2])[gate].tolist() == [2, 1, 1]
    unfit = np.array([[False, False, True], [False] * 3, [False] * 3])
    assert trees._safe_picks(_Forest([0.0]), x, unfit, 0, [gate], [2, 0, 2])[gate].tolist() == [1, 1, 1]


def test_fallbacks_never_slower_than_the_hand_rules():
    """A group's fallback is the candidate most often within 5% of the best that never failed and never ran
    more than 3% slower than the hand rules; a candidate not timed on a row counts neither way."""
    from tritium.tune import trees

    lg = math.log
    # candidates: 0 hand, 1 safe and often best, 2 best more often but once 4% slower than the hand rules,
    # 3 failed once, 4 never timed
    y = np.array([[lg(1.2), 0.0, 0.0, 0.0, lg(4.0)],
                  [lg(1.1), 0.0, 0.0, 0.0, lg(4.0)],
                  [0.0, lg(1.02), lg(1.04), lg(4.0), lg(4.0)],
                  [lg(1.3), lg(1.2), 0.0, 0.0, lg(4.0)]])
    ran = np.array([[True, True, True, True, False]] * 4)
    ok = ran & (y < lg(4.0))
    groups = ["a"] * 4
    assert trees._fallbacks(y, ran, ok, 0, groups) == {"a": 1}
    ran[2, 1] = ok[2, 1] = False  # not re-timed on the row where it was 2% off: still the fallback
    assert trees._fallbacks(y, ran, ok, 0, groups) == {"a": 1}
    y[1, 1] = lg(1.3)  # now 1 is slower than the hand rules on row 1: none is safe and better
    assert trees._fallbacks(y, ran, ok, 0, groups) == {"a": 0}
    # two groups decide apart; without the hand rules there is no fallback
    y2 = np.array([[lg(1.2), 0.0], [0.0, lg(1.1)]])
    both = np.ones((2, 2), dtype=bool)
    assert trees._fallbacks(y2, both, both, 0, ["a", "b"]) == {"a": 1, "b": 0}
    assert trees._fallbacks(y2, both, both, None, ["a", "b"]) == {}
    assert trees.fallback_group(dict(head_dim=64, kv_bits=8, max_seqlen_k=2048)) == "D64-KV8-short"
    assert trees.fallback_group(dict(head_dim=128, kv_bits=16, max_seqlen_k=2049)) == "D128-KV16-long"


def test_matrix_tells_a_failure_from_a_candidate_left_out():
    """A failed candidate (None) counts as the cap, one the record lacks (a re-sweep near the old best left it
    out) as ``left_out``; timings are against the record's best and capped; decode records lacking candidates
    train on LEFT_OUT, prefill ones on the cap."""
    from tritium.tune import trees

    feats = dict.fromkeys(trees.FEATURES, 1)
    records = [dict(features=feats, times_ms={"hand": 2.0, "a": 1.0, "b": None}),
               dict(features=feats, times_ms={"hand": 1.0, "a": 9.0, "b": 1.5, "c": 1.2})]
    _, y = trees._matrix(records, ["a", "b", "c", "hand"], left_out=1.15)
    expect = [[0.0, math.log(trees.CAP), math.log(1.15), math.log(2.0)],
              [math.log(trees.CAP), math.log(1.5), math.log(1.2), 0.0]]
    assert np.allclose(y, expect)
    _, y = trees._matrix(records, ["a", "b", "c", "hand"])
    assert y[0, 2] == pytest.approx(math.log(trees.CAP))
    assert trees.LEFT_OUT.get(DECODE) == pytest.approx(1.15) and PREFILL not in trees.LEFT_OUT


def test_distilled_tree_answers_every_label(tmp_path, monkeypatch):
    """Grown to pure leaves, the exported tree answers each domain workload's label (the cost model's gated
    pick, stood in for here) and each training workload's measured best (the hand rules within 1% of it)."""
    pytest.importorskip("sklearn", reason="the tune extra: pip install 'tritium[tune]'")
    from tritium.tune import trees

    sweep = tmp_path / "attention-NVIDIA-TestGPU.json"
    _synthetic_sweep(sweep)
    train = [r for r in json.loads(sweep.read_text())["records"] if r["family"] == DECODE][:60]
    domain = [w.features() for w in tune.workload_domain() if w.family() == DECODE][::40]
    candidates = sorted({k for r in train for k in r["times_ms"]})

    def row(f):
        return tuple(f[k] for k in trees.FEATURES)

    # any labelling the features determine (equal features, equal label), however irregular
    labels = np.array([hash(row(f)) % len(candidates) for f in domain])
    monkeypatch.setattr(trees, "_safe_picks",
                        lambda model, x, unfit, hand, gates, fallback=None: {g: labels for g in gates})
    x, train_unfit = trees._pairs(DECODE, [r["features"] for r in train], candidates, 132)
    _, y = trees._matrix(train, candidates)
    hand = candidates.index(trees.HAND)
    tree = trees._distil(DECODE, x, y, train_unfit, candidates, hand, {"D128-KV16": (0.5, 0.0)}, 132, domain, train)
    trained = {row(r["features"]) for r in train}
    only = np.array([row(f) not in trained for f in domain])
    assert only.sum() > 100
    got = trees._picks(tree, np.array([row(f) for f in domain], dtype=np.float64))
    assert (got[only] == labels[only]).all()
    best = y.argmin(axis=1)
    best = np.where(y[:, hand] - y[np.arange(len(y)), best] <= math.log(1.01), hand, best)
    assert (trees._picks(tree, np.array([row(r["features"]) for r in train], dtype=np.float64)) == best).all()


def test_fit_with_other_gpu_sweep(tmp_path):
    """Another GPU's sweep joins the cost model's training: the fit is still deterministic, its header
    names that sweep (and the command, ``--fit`` last), and it learns the same rule."""
    pytest.importorskip("sklearn", reason="the tune extra: pip install 'tritium[tune]'")
    from tritium.tune import trees

    sweep, other = tmp_path / "attention-NVIDIA-TestGPU.json", tmp_path / "attention-NVIDIA-OtherGPU.json"
    _synthetic_sweep(sweep, 0)
    _synthetic_sweep(other, 1)
    data = json.loads(other.read_text())
    other.write_text(json.dumps(dict(data, gpu="NVIDIA OtherGPU")))
    a = trees.fit_and_export(str(sweep), domain=_domain(), tree_dir=str(tmp_path / "a"), others=(str(other),))
    trees.fit_and_export(str(sweep), domain=_domain(), tree_dir=str(tmp_path / "b"), others=(str(other),))
    src = (tmp_path / "a" / "nvidia_testgpu.py").read_text()
    assert src == (tmp_path / "b" / "nvidia_testgpu.py").read_text()
    assert re.search(r"--with-sweep \S+OtherGPU\.json --fit \S+TestGPU\.json``", src)
    assert "The cost model also trained on" in src and "NVIDIA OtherGPU" in src and a["others"]
    assert a["validation"]["all"]["within_5pct_of_best"] == 1.0, a["held_out"]
    with pytest.raises(ValueError, match="other GPUs' sweeps"):
        trees.fit_and_export(str(sweep), domain=_domain(), tree_dir=str(tmp_path / "c"), others=(str(sweep),))
    other.write_text(json.dumps(dict(data, gpu="NVIDIA OtherGPU", knobs={"decode": [[16, 1, 0]]})))
    with pytest.raises(ValueError, match="other knob sets"):
        trees.fit_and_export(str(sweep), domain=_domain(), tree_dir=str(tmp_path / "c"), others=(str(other),))


def test_other_pairs_leave_out_held_out_and_untimed(tmp_path):
    """Another GPU's pairs: its records of this family only, none of the excluded (held-out) names, and no
    pair for a candidate the record did not run (a failed one counts as the cap); the same-GPU feature 0 for
    decode, 1 (as this GPU's) for prefill."""
    pytest.importorskip("sklearn", reason="the tune extra: pip install 'tritium[tune]'")
    from tritium.tune import trees

    path = tmp_path / "attention-NVIDIA-OtherGPU.json"
    _synthetic_sweep(path, 2)
    records = [r for r in json.loads(path.read_text())["records"] if r["family"] == DECODE][:6]
    candidates = sorted(records[0]["times_ms"])
    del records[1]["times_ms"][candidates[1]]  # not run
    records[2]["times_ms"][candidates[2]] = None  # failed
    x, y = trees._other_pairs(DECODE, [(records, 132)], candidates, exclude={records[3]["name"]})
    assert len(y) == 5 * len(candidates) - 1 and x.shape == (len(y), x.shape[1]) and np.all(x[:, -1] == 0.0)
    assert np.isclose(y, math.log(trees.CAP)).sum() >= 1
    own, _ = trees._pairs(DECODE, [records[0]["features"]], candidates, 132)
    assert np.array_equal(x[: len(candidates), :-1], own[0])
    assert trees._other_pairs(PREFILL, [(records, 132)], candidates) is None
    pre = [r for r in json.loads(path.read_text())["records"] if r["family"] == PREFILL][:3]
    pre_candidates = sorted(pre[0]["times_ms"])
    x, y = trees._other_pairs(PREFILL, [(pre, 132)], pre_candidates)
    assert len(y) == 3 * len(pre_candidates) and np.all(x[:, -1] == 1.0)


@pytest.mark.parametrize("module", _committed())
def test_committed_tree_answers_its_validation(module):
    """The exported source answers what the fitted tree answered in the held-out validation written beside
    the sweep (a pick of the hand rules there: the tree's answer was "hand" or in UNFIT)."""
    from tritium.tune import trees

    tree = importlib.import_module(f"tritium.attention.tuned.{module}")
    path = REPO / re.search(r"--fit (\S+)``", tree.__doc__).group(1)
    records = {r["name"]: r for r in json.loads(path.read_text())["records"]}
    rows = json.loads(path.with_suffix(".validation.json").read_text())["held_out"]
    assert rows
    for row in rows:
        r = records[row["name"]]
        knobs = getattr(tree, r["family"])(r["features"])
        key = "hand" if knobs == "hand" else "-".join(map(str, knobs))
        if row["pick"] != "hand":
            assert key == row["pick"], (row, key)
        elif key != "hand":
            assert trees._resource_key(r, key) in tree.UNFIT, (row, key)


def test_fit_keeps_hand_rules_when_no_tree_beats_them(tmp_path):
    pytest.importorskip("sklearn", reason="the tune extra: pip install 'tritium[tune]'")
    from tritium.tune import trees

    sweep = tmp_path / "attention-NVIDIA-TestGPU.json"
    _synthetic_sweep(sweep)
    data = json.loads(sweep.read_text())
    for r in data["records"]:  # the hand rules are always best
        r["times_ms"][tune.HAND] = 0.5
    sweep.write_text(json.dumps(data))
    trees.fit_and_export(str(sweep), domain=_domain(), tree_dir=str(tmp_path))
    src = (tmp_path / "nvidia_testgpu.py").read_text()
    assert src.count("return 'hand'") == 2 and "if f[" not in src


@pytest.mark.skipif(not interpreting(), reason="the GPU sweep is run by bench/gpu_tune.sh")
def test_sweep_interpreter_and_resume(tmp_path, monkeypatch):
    """Two tiny workloads swept under the interpreter: every candidate timed or its failure recorded,
    the hand rules checked against the reference; a second run sweeps nothing new."""
    monkeypatch.setattr(tune, "KNOBS", {DECODE: [(16, 1, 0), (16, 1, 2)], PREFILL: [(16, 16, 2, 1)]})
    workloads = [tune.Workload(2, 0, 1, 40, 64, 2, 1, 16, "fp16", dtype="fp16"),
                 tune.Workload(1, 1, 20, 33, 64, 4, 1, 16, "fp16", dtype="fp16")]
    assert [w.family() for w in workloads] == [DECODE, PREFILL]
    path = tune.sweep(str(tmp_path), workloads=workloads)
    data = json.loads(Path(path).read_text())
    assert [r["name"] for r in data["records"]] == [w.name for w in workloads]
    for r in data["records"]:
        assert set(r["times_ms"]) == {"hand"} | {"-".join(map(str, k)) for k in tune.KNOBS[r["family"]]}
        assert all(t is not None and t > 0 for t in r["times_ms"].values())
        assert r["rel_err"] < 1e-2
    tune.sweep(str(tmp_path), workloads=workloads)
    assert len(json.loads(Path(path).read_text())["records"]) == 2


@pytest.mark.skipif(not interpreting(), reason="the GPU sweep is run by bench/gpu_tune.sh")
def test_sweep_repeats(tmp_path, monkeypatch):
    """--repeats 2: every candidate timed twice (runs_ms), the median kept; a sweep continues only with the
    count it was started with."""
    monkeypatch.setattr(tune, "KNOBS", {DECODE: [(16, 1, 0), (16, 1, 2)], PREFILL: []})
    workloads = [tune.Workload(2, 0, 1, 40, 64, 2, 1, 16, "fp16", dtype="fp16")]
    path = tune.sweep(str(tmp_path), workloads=workloads, repeats=2)
    data = json.loads(Path(path).read_text())
    (record,) = data["records"]
    assert data["repeats"] == 2 and set(record["runs_ms"]) == set(record["times_ms"]) == {"hand", "16-1-0", "16-1-2"}
    for key, runs in record["runs_ms"].items():
        assert len(runs) == 2 and record["times_ms"][key] == pytest.approx(sum(runs) / 2)
    with pytest.raises(SystemExit, match="2 timing"):
        tune.sweep(str(tmp_path), workloads=workloads, repeats=1)
    more = workloads + [tune.Workload(1, 0, 1, 17, 64, 2, 1, 16, "fp16", dtype="fp16")]
    tune.sweep(str(tmp_path), workloads=more)  # no count given: the sweep's own
    data = json.loads(Path(path).read_text())
    assert data["repeats"] == 2 and all(len(r) == 2 for r in data["records"][1]["runs_ms"].values())


@pytest.mark.skipif(not interpreting(), reason="the GPU sweep is run by bench/gpu_tune.sh")
def test_sweep_model_order(tmp_path, monkeypatch):
    """--order model: each decode-family call timed after its own projection GEMV (prefill calls not); the
    sweep records its order and continues only in it; from a sweep of the other order only prefill records
    merge in."""
    monkeypatch.setattr(tune, "KNOBS", {DECODE: [(16, 1, 0), (16, 1, 2)], PREFILL: [(16, 16, 2, 1)]})
    launched = []
    real = tune.gemv
    monkeypatch.setattr(tune, "gemv", lambda x, w, **kw: launched.append(w.shape) or real(x, w, **kw))
    decode = tune.Workload(2, 0, 1, 40, 64, 2, 1, 16, "fp16", dtype="fp16")
    prefill = tune.Workload(1, 1, 20, 33, 64, 4, 1, 16, "fp16", dtype="fp16")
    path = Path(tune.sweep(str(tmp_path / "m"), workloads=[prefill], order=tune.MODEL_ORDER))
    assert json.loads(path.read_text())["order"] == tune.MODEL_ORDER and launched == []
    tune.sweep(str(tmp_path / "m"), workloads=[prefill, decode])  # continued in its own order
    data = json.loads(path.read_text())
    assert [r["name"] for r in data["records"]] == [prefill.name, decode.name]
    assert all(t > 0 for t in data["records"][1]["times_ms"].values())
    assert len(launched) >= 3  # (warm-up +) one before each decode candidate's call
    with pytest.raises(SystemExit, match="order"):
        tune.sweep(str(tmp_path / "m"), workloads=[decode], order=tune.BACK_TO_BACK)
    # A back-to-back sweep's prefill records join a model-order one; its decode records do not.
    decode2 = tune.Workload(1, 0, 1, 17, 64, 2, 1, 16, "fp16", dtype="fp16")
    prefill2 = tune.Workload(1, 1, 24, 40, 64, 4, 1, 16, "fp16", dtype="fp16")
    assert [decode2.family(), prefill2.family()] == [DECODE, PREFILL]
    other = Path(tune.sweep(str(tmp_path / "b"), workloads=[decode2, prefill2]))
    assert json.loads(other.read_text())["order"] == tune.BACK_TO_BACK
    assert tune.merge_sweeps(str(path), [str(other)]) == 1
    assert [r["name"] for r in json.loads(path.read_text())["records"]] == [prefill.name, decode.name, prefill2.name]


def test_time_calls_before_each_call(monkeypatch):
    """``before``: the i-th callable runs right before the i-th call (the interpreter's wall-clock path)."""
    monkeypatch.setattr(tune, "interpreting", lambda: True)
    log = []
    calls = [lambda i=i: log.append(("call", i)) for i in range(3)]
    before = [lambda i=i: log.append(("before", i)) for i in range(3)]
    assert tune.time_calls(calls, before=before) >= 0
    assert log == [(k, i) for i in range(3) for k in ("before", "call")]
    with pytest.raises(ValueError, match="order must be one of"):
        tune.sweep_workload(tune.Workload(1, 0, 1, 17, 64, 2, 1, 16, "fp16", dtype="fp16"), "cpu", 4, 0,
                            order="sideways")


@pytest.mark.skipif(not interpreting(), reason="the GPU sweep is run by bench/gpu_tune.sh")
def test_sweep_shards_merge(tmp_path, monkeypatch):
    """Two shards of one sweep take disjoint workloads whose union is the whole; --merge joins their
    records into the sweep they continued (each once) and refuses a sweep of other knobs."""
    monkeypatch.setattr(tune, "KNOBS", {DECODE: [(16, 1, 0)], PREFILL: []})
    workloads = [tune.Workload(b, 0, 1, L, 64, 2, 1, 16, "fp16", dtype="fp16") for b, L in
                 [(1, 17), (2, 40), (1, 33), (3, 20), (2, 9)]]
    base = tmp_path / "base"
    path = Path(tune.sweep(str(base), workloads=workloads[:1]))
    before = path.read_text()
    assert tune.sweep(str(base), workloads=workloads, shard=(0, 2), compile_only=True) == str(path)
    assert path.read_text() == before  # compiling times nothing and writes no record
    shards = []
    for i in range(2):
        d = tmp_path / f"shard{i}"
        d.mkdir()
        (d / path.name).write_text(path.read_text())
        shards.append(Path(tune.sweep(str(d), workloads=workloads, shard=(i, 2))))
    names = [{r["name"] for r in json.loads(p.read_text())["records"][1:]} for p in shards]
    assert names[0] == {w.name for w in workloads[1::2]} and names[1] == {w.name for w in workloads[2::2]}
    assert tune.main(["--merge", str(path), *map(str, shards)]) == 0
    merged = [r["name"] for r in json.loads(path.read_text())["records"]]
    assert sorted(merged) == sorted(w.name for w in workloads)
    assert tune.merge_sweeps(str(path), [str(shards[0])]) == 0  # nothing twice
    other = json.loads(shards[1].read_text())
    other["knobs"] = {DECODE: [[16, 1, 2]], PREFILL: []}
    shards[1].write_text(json.dumps(other))
    with pytest.raises(SystemExit, match="knobs"):
        tune.merge_sweeps(str(path), [str(shards[1])])
    with pytest.raises(SystemExit, match="does not exist"):
        tune.merge_sweeps(str(path), [str(tmp_path / "missing.json")])


@pytest.mark.skipif(not interpreting(), reason="a GPU re-sweep is run by bench/gpu_confirm.sh (WHAT=resweep)")
def test_resweep_then_merge_replacing(tmp_path, monkeypatch):
    """--resweep sweeps a sweep's workloads again (of one family or cache dtype where asked) into its own JSON,
    which a re-run continues; shards join with --resweep-merge; --merge --replace puts its records in place of
    the sweep's, without --replace nothing changes; a filter that leaves nothing, or a sweep of other knobs, is
    refused."""
    monkeypatch.setattr(tune, "KNOBS", {DECODE: [(16, 1, 0)], PREFILL: [(16, 16, 2, 1)]})
    workloads = [tune.Workload(1, 0, 1, 17, 64, 2, 1, 16, "fp16", dtype="fp16"),
                 tune.Workload(2, 0, 1, 40, 64, 2, 1, 16, "fp16", dtype="fp16"),
                 tune.Workload(1, 1, 20, 33, 64, 4, 1, 16, "fp16", dtype="fp16")]
    path = Path(tune.sweep(str(tmp_path / "base"), workloads=workloads))
    out = tmp_path / "again"
    again = Path(tune.resweep(str(path), str(out), part=DECODE))
    assert again.name == path.name.replace(".json", ".resweep.json")
    data = json.loads(again.read_text())
    assert sorted(r["name"] for r in data["records"]) == sorted(w.name for w in workloads[:2])
    assert data["source"]["sweep"] == path.name and data["knobs"] == json.loads(path.read_text())["knobs"]
    assert tune.resweep(str(path), str(out), part=DECODE) == str(again)
    assert json.loads(again.read_text()) == data  # continued: nothing swept twice
    shards = [Path(tune.resweep(str(path), str(tmp_path / f"s{i}"), shard=(i, 2))) for i in range(2)]
    joined = tmp_path / "joined.json"
    assert tune.main(["--resweep-merge", str(joined), *map(str, shards)]) == 0
    assert len(json.loads(joined.read_text())["records"]) == 3

    for r in data["records"]:  # marks to find them by
        r["times_ms"] = {k: 7.0 for k in r["times_ms"]}
    again.write_text(json.dumps(data))
    assert tune.merge_sweeps(str(path), [str(again)]) == 0
    assert tune.main(["--merge", str(path), str(again), "--replace"]) == 0
    merged = {r["name"]: r for r in json.loads(path.read_text())["records"]}
    assert len(merged) == 3 and {n for n, r in merged.items() if set(r["times_ms"].values()) == {7.0}} == {
        w.name for w in workloads[:2]}

    with pytest.raises(SystemExit, match="has no workloads with fp8 caches"):
        tune.resweep(str(path), str(out), kv_dtype="fp8")
    monkeypatch.setattr(tune, "KNOBS", {DECODE: [(16, 1, 2)], PREFILL: []})
    with pytest.raises(SystemExit, match="other candidates"):
        tune.resweep(str(path), str(out))


@pytest.mark.skipif(not interpreting(), reason="a GPU re-sweep is run by bench/gpu_confirm.sh (WHAT=resweep)")
def test_resweep_within_times_only_the_near_best(tmp_path, monkeypatch, capsys):
    """--resweep --within F times again only the candidates the old record timed within F of its best, and the
    hand rules; each record names the ones left out; a re-sweep of another F is not continued; --within is
    refused without --resweep or under 1."""
    monkeypatch.setattr(tune, "KNOBS", {DECODE: [(16, 1, 0), (16, 1, 1), (16, 2, 0)], PREFILL: [(16, 16, 2, 1)]})
    workloads = [tune.Workload(1, 0, 1, 17, 64, 2, 1, 16, "fp16", dtype="fp16"),
                 tune.Workload(2, 0, 1, 40, 64, 2, 1, 16, "fp16", dtype="fp16")]
    path = Path(tune.sweep(str(tmp_path / "base"), workloads=workloads))
    data = json.loads(path.read_text())
    old = [{"hand": 2.0, "16-1-0": 1.0, "16-1-1": 1.05, "16-2-0": 1.2},
           {"hand": 1.0, "16-1-0": 3.0, "16-1-1": None, "16-2-0": 1.08}]
    for r, times in zip(data["records"], old):
        r["times_ms"] = times
    path.write_text(json.dumps(data))
    out = tmp_path / "again"
    again = json.loads(Path(tune.resweep(str(path), str(out), within=1.1)).read_text())
    assert again["source"]["within"] == 1.1
    got = {r["name"]: (sorted(r["times_ms"]), r["left_out"]) for r in again["records"]}
    assert got == {workloads[0].name: (["16-1-0", "16-1-1", "hand"], ["16-2-0"]),
                   workloads[1].name: (["16-2-0", "hand"], ["16-1-0", "16-1-1"])}
    for r in again["records"]:
        assert all(v is not None and v > 0 for v in r["times_ms"].values()), r["times_ms"]
    with pytest.raises(SystemExit, match="asked for one of"):
        tune.resweep(str(path), str(out), within=1.2)
    with pytest.raises(SystemExit, match="no workloads of head_dim 128"):
        tune.resweep(str(path), str(out), within=1.1, head_dim=128)
    for argv, msg in ((["--within", "1.1"], "goes with --resweep"), (["--head-dim", "64"], "goes with --resweep"),
                      (["--resweep", str(path), "--within", "0.9"], "factor >= 1")):
        with pytest.raises(SystemExit):
            tune.main(argv)
        assert msg in capsys.readouterr().err


def test_interleave_families():
    """Every prefix of the sweep order holds both families in the grid's proportion, each in its order."""
    ws = tune.workload_grid(0, 60, 20)
    order = tune.interleave_families(ws)
    assert sorted(w.name for w in order) == sorted(w.name for w in ws)
    for fam in (DECODE, PREFILL):
        assert [w for w in order if w.family() == fam] == [w for w in ws if w.family() == fam]
    share = sum(w.family() == PREFILL for w in ws) / len(ws)
    for n in (8, 20, 40):
        assert abs(sum(w.family() == PREFILL for w in order[:n]) - share * n) <= 1


@pytest.mark.parametrize("argv,message", [(["--repeats", "0"], "argument --repeats: expected an int >= 1, got '0'"),
                                          (["--grid", "120"], "--grid must be two positive counts"),
                                          (["--grid", "a,b"], "--grid must be two positive counts"),
                                          (["--grid", "120,0"], "--grid must be two positive counts"),
                                          (["--shard", "2/2"], "--shard: shard I/N needs 0 <= I < N"),
                                          (["--shard", "x"], "--shard: shard must be I/N"),
                                          (["--merge", "a.json"], "--merge needs the sweep JSON"),
                                          (["--resweep-merge", "a.json"], "--resweep-merge needs the sweep JSON"),
                                          (["--kv-dtype", "fp8"], "--kv-dtype goes with --confirm or --resweep"),
                                          (["--replace"], "--replace goes with --merge or --confirm-merge"),
                                          (["--match", "D64["], "argument --match: expected a regular expression"),
                                          (["--match", "^mixed-B1-"], "--match: no workload of the domain matches"),
                                          (["--match", "D64", "--merge", "a", "b"], "--match goes with a sweep")])
def test_sweep_arguments_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        tune.main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_sweep_match_takes_the_domain_workloads_named(monkeypatch):
    """--match REGEX: the sweep gets exactly the domain's workloads whose names match, in the domain's order."""
    seen = {}
    monkeypatch.setattr(tune.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(tune, "sweep", lambda out, **kw: seen.update(kw) or "unused.json")
    assert tune.main(["--match", r"^prefill-.*x16384-.*-D64-G1-K2-", "--no-fit"]) == 0
    names = [w.name for w in seen["workloads"]]
    expected = [w.name for w in tune.workload_domain() if w.name.startswith("prefill-")
                and "x16384-" in w.name and "-D64-G1-K2-" in w.name]
    assert names == expected and "prefill-B2-P2x16384-L16384-D64-G1-K2-bs16-bf16" in names
    assert len(names) == 2 * 2 * 2  # B 1/2, pages of 16/64, bf16/fp8 KV


def test_workload_grid_covers_the_domain():
    ws = tune.workload_grid()
    assert len({w.name for w in ws}) == len(ws)
    assert {w.head_dim for w in ws} == set(tune.HEAD_DIMS) and {w.group for w in ws} == set(tune.GROUPS)
    assert {w.block_size for w in ws} == set(tune.BLOCK_SIZES) and {w.kv_dtype for w in ws} == set(tune.KV_DTYPES)
    decode = [w for w in ws if w.family() == DECODE]
    assert {w.num_seqs for w in decode} == set(tune.BATCHES) and {w.context for w in decode} >= set(tune.CONTEXTS)
    assert {w.name.split("-")[0] for w in ws if w.family() == PREFILL} == {"prefill", "mixed"}
    assert all(w.kv_bytes() <= tune.MAX_KV_BYTES for w in ws)
    assert math.isclose(sum(w.family() == DECODE for w in ws) / len(ws), 120 / 174, rel_tol=0.05)


def test_workload_domain_holds_the_grid():
    """The domain the trees are distilled on is every workload the sweep's grid can draw (the anchors aside:
    their contexts are the benchmark's), each once, within the size limits."""
    domain = tune.workload_domain()
    names = {w.name for w in domain}
    assert len(names) == len(domain)
    anchors = {w.name for w in tune.anchor_workloads()}
    for seed in (0, 1, 2):
        assert {w.name for w in tune.workload_grid(seed=seed)} - anchors <= names
    assert all(w.kv_bytes() <= tune.MAX_KV_BYTES and w.num_tokens <= tune.MAX_PREFILL_TOKENS for w in domain)
    assert {w.family() for w in domain} == {DECODE, PREFILL}


@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_candidate_configs_are_the_sweeps(gpu):
    """The fit's cost model sees, for every candidate of every swept workload, the configuration the sweep
    ran (recorded in the JSON): knobs through config_from_knobs, "hand" through the hand rules."""
    from tritium.tune import trees

    data = json.loads((REPO / f"bench/results/tuning/attention-NVIDIA-{gpu}.json").read_text())
    for r in data["records"]:
        for key, recorded in r["configs"].items():
            config = trees.candidate_config(r["family"], key, r["features"], data["sms"])
            assert list(dataclasses.astuple(config))[:6] == list(recorded)[:6], (r["name"], key)
        x, _ = trees._pairs(r["family"], [r["features"]], sorted(r["configs"]), data["sms"])
        assert np.isfinite(x).all()


def test_holdout_never_takes_the_anchors():
    """The benchmark's anchor shapes are in every sweep and always in the training set; the held-out
    fifth (of each family's count) comes from the other workloads, the same for the same seed."""
    from tritium.tune import trees

    anchors = {w.name for w in tune.anchor_workloads()}
    grid = tune.workload_grid()
    assert anchors <= {w.name for w in grid}
    assert len(anchors) == 2 * len(tune.DECODE_CASES) + len(tune.PREFILL_CASES) + len(tune.ENGINE_DECODE_CASES)
    records = [dict(name=w.name, family=w.family()) for w in grid]
    train, held = trees.split_holdout(records, 0, anchors)
    assert not anchors & {r["name"] for r in held}
    for fam in (DECODE, PREFILL):
        assert sum(r["family"] == fam for r in held) == round(trees.HOLDOUT * sum(r["family"] == fam for r in records))
    assert held == trees.split_holdout(records, 0, anchors)[1]
    # without the anchors named, some are held out (the draw this guards against)
    assert anchors & {r["name"] for r in trees.split_holdout(records, 0)[1]}


def test_unfit_keys_take_what_failed_and_everything_larger():
    from tritium.tune import trees

    def record(head_dim, kv_bits, configs, errors):
        return dict(features=dict(head_dim=head_dim, kv_bits=kv_bits), configs=configs, errors=errors)

    oor = "OutOfResources: out of resource: shared memory, Required: 274432, Hardware limit: 232448."
    records = [record(256, 16, {"a": [16, 4, 128, 1, 4, 3], "b": [16, 4, 64, 1, 4, 2], "c": [32, 8, 128, 1, 4, 2]},
                      {"a": oor, "z": oor}),
               record(128, 16, {"d": [64, 8, 128, 1, 4, 3]}, {"d": "RuntimeError: something else"}),
               record(192, 8, {"e": [64, 8, 128, 1, 4, 3]}, {})]
    unfit = trees.unfit_keys(records)
    assert (16, 128, 4, 3, 256, 16) in unfit                          # failed
    assert {(32, 128, 4, 3, 256, 16), (64, 128, 4, 3, 256, 16)} <= unfit  # larger Q blocks need more
    assert (16, 64, 4, 2, 256, 16) not in unfit and (32, 128, 4, 2, 256, 16) not in unfit  # fewer stages
    assert (16, 128, 4, 3, 256, 8) not in unfit and (16, 128, 4, 3, 128, 16) not in unfit  # smaller KV / heads
    assert (64, 128, 4, 3, 128, 16) not in unfit  # another error than resources
    assert not trees.unfit_keys([record(256, 16, {"b": [16, 4, 64, 1, 4, 2]}, {})])


@pytest.mark.parametrize("module", _committed())
def test_committed_tree_unfit_is_its_sweeps(module):
    """UNFIT of a committed tree is what its sweep JSON gives, and holds every configuration that ran out
    of resources there; the tree's answers for those go to the hand rules."""
    from tritium.tune import trees

    tree = importlib.import_module(f"tritium.attention.tuned.{module}")
    path = re.search(r"--fit (\S+)``", tree.__doc__).group(1)
    records = json.loads((REPO / path).read_text())["records"]
    assert tree.UNFIT == trees.unfit_keys(records)
    failed = [(r, key) for r in records for key in r.get("errors", {})]
    assert failed and all(trees._resource_key(r, key) in tree.UNFIT for r, key in failed)
    rng = random.Random(3)
    for _ in range(300):
        b = dict(_random_batch(rng), head_dim=rng.choice((192, 256)))
        kv = rng.choice((torch.bfloat16, torch.float8_e4m3fn))
        cfg = select_attention_config(**b, dtype=torch.bfloat16, kv_dtype=kv, device=torch.device("cpu"), tree=tree)
        assert config_mod.resource_key(cfg, b["head_dim"], kv) not in tree.UNFIT, (b, cfg)


def test_validation_counts_an_unfit_pick_as_the_hand_rules():
    from tritium.tune import trees

    record = dict(name="w", family=DECODE, features=dict(head_dim=256, kv_bits=16),
                  times_ms={"hand": 2.0, "128-3-1": None, "64-2-1": 1.0},
                  configs={"hand": [16, 4, 32, 8, 4, 2], "128-3-1": [16, 4, 128, 8, 4, 3],
                           "64-2-1": [16, 4, 64, 8, 4, 2]})
    (row,) = trees.validate([record], lambda fam, f: (128, 3, 1), frozenset({(16, 128, 4, 3, 256, 16)}))
    assert (row["pick"], row["vs_best"], row["vs_hand"]) == ("hand", 2.0, 1.0)
    (row,) = trees.validate([record], lambda fam, f: (128, 3, 1))
    assert row["vs_best"] == math.inf


def test_barred_underfilled_decode_without_split():
    """A decode-family candidate without split is barred where the programs without split fill at most half
    the SMs and the sequences hold at least UNDERFILLED_KEYS keys (the hand rules never are); barred pairs are
    masked in the fit's pairs like unfit ones."""
    from tritium.tune import trees

    def f(num_seqs, q, k, group=8, kv_heads=8, head_dim=256):
        return features(num_tokens=num_seqs * q, num_seqs=num_seqs, num_q_heads=group * kv_heads,
                        num_kv_heads=kv_heads, head_dim=head_dim, block_size=16, max_seqlen_q=q, max_seqlen_k=k,
                        kv_dtype=torch.bfloat16)

    sms = 132
    verify = f(8, 4, 2048)  # 8 sequences x 4 new tokens, 8 KV heads: 64 programs without split
    assert verify["programs"] == 64
    cases = [(verify, "64-3-0", True), (verify, "128-2-0", True), (verify, "64-2-1", False), (verify, "hand", False),
             (f(8, 4, trees.UNDERFILLED_KEYS - 1), "64-3-0", False),  # short: the split's merge costs more
             (f(8, 4, trees.UNDERFILLED_KEYS), "64-3-0", True),
             (f(17, 4, 2048), "64-3-0", False),  # 136 programs: more than half the SMs
             (f(33, 4, 2048, kv_heads=2), "32-2-0", True),  # 66 programs: half
             (f(67, 4, 2048, kv_heads=1), "32-2-0", False)]  # 67
    for feats, key, want in cases:
        config = trees.candidate_config(DECODE, key, feats, sms)
        assert trees.barred(DECODE, key, feats, config, sms) is want, (feats, key)
    prefill = f(1, 4096, 4096, kv_heads=1)
    assert not trees.barred(PREFILL, "128-64-8-3", prefill, trees.candidate_config(PREFILL, "128-64-8-3", prefill, sms),
                            sms)
    candidates = ["128-2-0", "64-2-1", "64-3-0", "hand"]
    _, mask = trees._pairs(DECODE, [verify, f(17, 4, 2048)], candidates, sms)
    assert mask.tolist() == [[True, False, True, False], [False, False, False, False]]


@pytest.mark.parametrize("module", _committed())
def test_committed_tree_never_answers_a_barred_candidate(module):
    """Over the tuner's domain, a committed tree never answers a decode candidate that the fit bars."""
    from tritium.tune import trees

    tree = importlib.import_module(f"tritium.attention.tuned.{module}")
    sms = 132  # the H100's and the H200's
    for f in (w.features() for w in tune.workload_domain()):
        if config_mod.family(max_seqlen_q=f["max_seqlen_q"], num_kv_heads=f["num_kv_heads"],
                             num_q_heads=f["group"] * f["num_kv_heads"]) != DECODE:
            continue
        knobs = tree.decode(f)
        key = trees.knob_key(knobs)
        assert not trees.barred(DECODE, key, f, trees.candidate_config(DECODE, key, f, sms), sms), (f, key)
