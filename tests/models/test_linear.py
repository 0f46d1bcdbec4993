"""LinearDispatch: cuBLAS or the Triton GEMV per shape (modes, tuning, the gated path)."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from tritium import ops
from tritium.models.linear import LinearDispatch
from tritium.models.rope import rope_cos_sin, rope_inv_freq
from tritium.ops import reference
from tritium.ops.gemv import CONFIGS, INTERPRETER_CONFIG, MAX_M, GemvConfig, gemv, widest
from tritium.ops.int4 import Int4Weight, linear_int4_reference, pack_int4, quantize_int4
from tritium.ops.int4_linear import GEMV_CONFIGS, WORD_GEMV_CONFIGS, Int4GemvConfig, gemv_candidates, int4_linear
from tritium.ops.qkv_rope import supports as qkv_rope_supports
from tritium.ops.skinny import CONFIGS as SKINNY_CONFIGS
from tritium.ops.skinny import SkinnyConfig, skinny
from tritium.runtime import default_device, interpreting

TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def rel_err(out, ref):
    assert not torch.isnan(out).any() and not torch.isinf(out).any()
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def test_linear_dispatch_modes():
    dev = default_device()
    w = torch.randn(24, 128, device=dev)
    with pytest.raises(ValueError, match="linear_backend"):
        LinearDispatch("cublas")
    for mode in LinearDispatch.MODES:
        lin = LinearDispatch(mode)
        for m in (1, 4, MAX_M + 3):  # beyond MAX_M always F.linear
            x = torch.randn(m, 128, device=dev)
            assert rel_err(lin(x, w), reference.linear(x, w)) < TOL[torch.float32]
    # auto without timings falls back to F.linear; with a recorded choice it runs the GEMV
    lin = LinearDispatch("auto")
    x = torch.randn(1, 128, device=dev)
    assert torch.equal(lin(x, w), F.linear(x, w))
    lin.choices[(1, 24, 128)] = GemvConfig(8, 128, 4)
    assert rel_err(lin(x, w), reference.linear(x, w)) < TOL[torch.float32]
    assert LinearDispatch("torch").tune({"w": [w]}, (1,)) == []


def test_candidate_check():
    """tune() drops a GEMV candidate whose output disagrees with cuBLAS's (gated, normed, plain)."""
    from tritium.models.linear import _disagreement, _expected

    dev = default_device()
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(2, 2 * 96, dtype=dtype, device=dev)
        w = torch.randn(40, 96, dtype=dtype, device=dev) / 10
        nw = (torch.rand(96, device=dev) + 0.5).to(dtype)
        cases = [(dict(gated=True), reference.silu_and_mul, None),
                 (dict(eps=1e-5, norm_weight=nw), None, reference.rms_norm_linear(x[:, :96], nw, 1e-5, w)),
                 ({}, None, reference.linear(x[:, :96], w))]
        for kw, act, ref in cases:
            xin = x if kw.get("gated") else x[:, :96].contiguous()
            want = _expected(xin, w, act, kw)
            if ref is None:
                ref = reference.linear(reference.silu_and_mul(x), w)
            assert rel_err(want, ref) < TOL[dtype]
            good = gemv(xin, w, config=GemvConfig(8, 128, 4, flat=True), **kw)
            assert _disagreement(good, want) is None
            bad = good.clone()
            bad[1, 3:9] += 5
            assert "relative error" in _disagreement(bad, want)
            bad[0, 0] = float("nan")
            assert _disagreement(bad, want) == "non-finite values"


def test_cublas_alternatives():
    """Only shapes tuned onto cuBLAS that have a timed GEMV are offered to the whole-step check."""
    lin = LinearDispatch("auto")
    cfg_a, cfg_b = GemvConfig(8, 128, 4), GemvConfig(16, 256, 4)
    lin.choices.update({(1, 24, 128): None, (1, 48, 128): cfg_a, (2, 24, 128): None, (1, 96, 64): None})
    lin.best_gemv.update({(1, 24, 128): cfg_b, (1, 48, 128): cfg_a, (2, 24, 128): cfg_a})
    shapes = [(24, 128), (48, 128), (96, 64), (12, 12)]
    assert lin.cublas_alternatives(1, shapes) == {(1, 24, 128): cfg_b}  # (96, 64): no GEMV timed; (12, 12): untuned
    assert lin.cublas_alternatives(2, shapes) == {(2, 24, 128): cfg_a}
    assert lin.cublas_alternatives(4, shapes) == {}
    lin.mode = "triton"
    assert lin.cublas_alternatives(1, shapes) == {}


def test_skinny_alternatives():
    """Only shapes tuned onto the skinny GEMM that have a runner-up recorded are offered to the whole-step check:
    a GEMV's config or None (cuBLAS)."""
    lin = LinearDispatch("auto")
    gemv_cfg, sk = GemvConfig(8, 128, 4), SKINNY_CONFIGS[0]
    lin.choices.update({(2, 24, 128): sk, (2, 48, 128): gemv_cfg, (8, 24, 128): sk, (8, 48, 128): None,
                        (8, 96, 64): sk})
    lin.not_skinny.update({(2, 24, 128): gemv_cfg, (8, 24, 128): None})
    shapes = [(24, 128), (48, 128), (96, 64)]
    assert lin.skinny_alternatives(2, shapes) == {(2, 24, 128): gemv_cfg}
    assert lin.skinny_alternatives(8, shapes) == {(8, 24, 128): None}  # (96, 64): no runner-up recorded
    assert lin.skinny_alternatives(4, shapes) == {}
    lin.mode = "triton"
    assert lin.skinny_alternatives(2, shapes) == {}


def test_tune_records_what_a_skinny_pick_displaced(monkeypatch):
    """tune() on the CPU with a stand-in timer that ranks skinny < GEMV < cuBLAS: the skinny GEMM is picked and the
    fastest GEMV recorded as its runner-up at 2 rows, cuBLAS at 8 (no GEMV runs 8 rows); tuned again with cuBLAS
    fastest, the runner-up record goes."""
    from tritium.models import linear as linear_mod

    ran: list[str] = []
    for name in ("skinny", "gemv"):
        real = getattr(linear_mod, name)
        monkeypatch.setattr(linear_mod, name, lambda *a, _f=real, _n=name, **k: (ran.append(_n), _f(*a, **k))[1])
    cost = {"skinny": 1.0, "gemv": 2.0, "cublas": 3.0}

    def timed(fn, group, repeats):
        ran.clear()
        fn(group[0])
        return cost[ran[0] if ran else "cublas"]

    monkeypatch.setattr(linear_mod, "_time_group", timed)
    dev = default_device()
    group = [torch.randn(64, 128, dtype=torch.float16, device=dev) / 10]
    lin = LinearDispatch("auto")
    lin.tune({"plain": group}, (2, 8))
    assert lin.rejected == []
    assert isinstance(lin.choices[(2, 64, 128)], SkinnyConfig) and isinstance(lin.choices[(8, 64, 128)], SkinnyConfig)
    assert isinstance(lin.not_skinny[(2, 64, 128)], GemvConfig) and lin.not_skinny[(8, 64, 128)] is None
    assert lin.skinny_alternatives(2, [(64, 128)]) == {(2, 64, 128): lin.not_skinny[(2, 64, 128)]}
    cost.update(cublas=0.5)
    lin.tune({"plain": group}, (2,))
    assert lin.choices[(2, 64, 128)] is None and (2, 64, 128) not in lin.not_skinny
    assert (8, 64, 128) in lin.not_skinny


def test_rope_bench_is_the_plain_product_and_writes_the_cache():
    """What tune() times a "rope" projection with: every row at position 0 (the identity rotation), so the
    QKV GEMV with rope inside and cuBLAS + the rope kernel both give the plain product, k and v written to
    the rows' own cache slots; bad head counts named."""
    from tritium.models.linear import _RopeBench

    dev = default_device()
    w = torch.randn(8 * 16, 64, device=dev) / 8  # 4 q + 2 x 2 kv heads of 16
    bench = _RopeBench((4, 2), w.shape[0], torch.float32, dev)
    x = torch.randn(3, 64, device=dev)
    want = reference.linear(x, w)
    for run in (lambda: bench.gemv(x, w, config=GemvConfig(4, 64, 4, flat=True)),
                lambda: bench.after_cublas(F.linear(x, w))):
        bench.k_cache.fill_(float("nan"))
        bench.v_cache.fill_(float("nan"))
        out = run()
        assert rel_err(out, want) < TOL[torch.float32]
        assert torch.equal(bench.k_cache[0, :3].reshape(3, -1), out[:, 64:96])
        assert torch.equal(bench.v_cache[0, :3].reshape(3, -1), out[:, 96:])
    for heads in (None, (3, 2), (0, 1), (4,)):
        with pytest.raises(ValueError, match="rope_heads must be"):
            _RopeBench(heads, w.shape[0], torch.float32, dev)


@pytest.mark.gpu
def test_linear_tune_picks_and_reports():
    dev = default_device()
    group = [torch.randn(1024, 2048, dtype=torch.bfloat16, device=dev) for _ in range(4)]
    lin = LinearDispatch("auto")
    report = lin.tune({"proj": group}, (1, 2))
    assert [(r["weight"], r["m"]) for r in report] == [("proj", 1), ("proj", 2)]
    assert set(lin.choices) == set(lin.best_gemv) == {(1, 1024, 2048), (2, 1024, 2048)}
    assert lin.rejected == []  # every candidate agreed with cuBLAS
    # past the GEMV's rows only cuBLAS and the skinny GEMM are timed
    report = lin.tune({"proj": group}, (8, 32))
    assert [r["m"] for r in report[-2:]] == [8, 32] and lin.rejected == []
    assert all(isinstance(lin.choices[(m, 1024, 2048)], (SkinnyConfig, type(None))) for m in (8, 32))
    for m in (8, 32):
        x = torch.randn(m, 2048, dtype=torch.bfloat16, device=dev)
        assert rel_err(lin(x, group[0]), reference.linear(x, group[0])) < TOL[torch.bfloat16]
    for r in report:
        assert r["best_tbs"] >= r["cublas_tbs"] > 0
    x = torch.randn(1, 2048, dtype=torch.bfloat16, device=dev)
    assert rel_err(lin(x, group[0]), reference.linear(x, group[0])) < TOL[torch.bfloat16]
    # every variant is timed as it runs and reported as such
    report = lin.tune({v: group for v in ("norm", "residual", "gated_residual")}, (1,),
                      variants={v: v for v in ("norm", "residual", "gated_residual")})
    assert [(r["weight"], r["variant"]) for r in report[-3:]] == [(v, v) for v in ("norm", "residual", "gated_residual")]
    # a fused variant keeps a GEMV (cuBLAS cannot run it), cuBLAS still reported
    assert all(r["choice"] != "cublas" and r["cublas_tbs"] > 0 for r in report[-3:])
    # the QKV projection that runs as qkv_rope_write_kv is timed as that kernel (4 q + 2 x 2 kv heads of 128),
    # among the configs whose rows split into rope pairs, flat ones included
    report = lin.tune({"qkv": group}, (1, 2), variants={"qkv": "rope"}, rope_heads=(4, 2))
    assert [r["variant"] for r in report[-2:]] == ["rope", "rope"] and lin.rejected == []
    assert any(c.flat for c in CONFIGS if qkv_rope_supports(c, 128))
    for m in (1, 2):
        best = lin.best_gemv[(m, 1024, 2048)]  # the skinny GEMM runs before the rope kernel, as cuBLAS does
        assert isinstance(best, SkinnyConfig) or qkv_rope_supports(best, 128)
        if not lin.gemv_runs(m, group[0]):
            continue
        x = torch.randn(m, 2048, dtype=torch.bfloat16, device=dev)
        kc = torch.zeros(2, 4, 2, 128, dtype=torch.bfloat16, device=dev)
        vc = torch.zeros_like(kc)
        pos = torch.arange(m, device=dev) + 5
        cos_sin = rope_cos_sin(rope_inv_freq(128, 10000.0, None, None), 16, 1.0).to(dev)
        slots = torch.arange(m, device=dev) + 3
        out = lin.qkv_rope(x, group[0], None, pos, cos_sin, kc, vc, slots, num_q_heads=4, num_kv_heads=2)
        ref, kr, vr = reference.linear(x, group[0]), torch.zeros_like(kc), torch.zeros_like(vc)
        views = ref[:, :512].view(m, 4, 128), ref[:, 512:768].view(m, 2, 128), ref[:, 768:].view(m, 2, 128)
        reference.rope_write_kv(*views, pos, cos_sin, kr, vr, slots)
        for a, e in ((out, ref), (kc, kr), (vc, vr)):
            assert rel_err(a, e) < 2 * TOL[torch.bfloat16]
    for heads in (None, (3, 2), (0, 1)):
        with pytest.raises(ValueError, match="rope_heads must be"):
            lin.tune({"qkv": group}, (1,), variants={"qkv": "rope"}, rope_heads=heads)
    # gate/up with the SiLU-and-mul in the epilogue: checked against cuBLAS + the op, even block_n only
    report = lin.tune({"gate_up": group}, (1, 2), variants={"gate_up": "swiglu"})
    assert [r["variant"] for r in report[-2:]] == ["swiglu", "swiglu"] and lin.rejected == []
    for m in (1, 2):
        assert lin.best_gemv[(m, 1024, 2048)].block_n % 2 == 0
        x = torch.randn(m, 2048, dtype=torch.bfloat16, device=dev)
        want = reference.silu_and_mul(reference.linear(x, group[0]))
        assert rel_err(lin.swiglu(x, group[0]), want) < 2 * TOL[torch.bfloat16]
    with pytest.raises(ValueError, match="variants\\['proj'\\] must be one of"):
        lin.tune({"proj": group}, (1,), variants={"proj": "fused"})


@pytest.mark.parametrize("mode", ["triton", "torch"])
def test_linear_dispatch_gated(mode):
    """gated(x, w) = silu_and_mul(x) @ w^T through either path (fused GEMV, or the op then F.linear)."""
    dev = default_device()
    x = torch.randn(3, 2 * 100, device=dev) * 2
    w = torch.randn(37, 100, device=dev) / 10
    lin = LinearDispatch(mode, ops.silu_and_mul)
    assert rel_err(lin.gated(x, w), reference.linear(reference.silu_and_mul(x), w)) < TOL[torch.float32]


@pytest.mark.parametrize("mode", ["triton", "torch", "auto"])
def test_linear_dispatch_swiglu(mode):
    """swiglu(x, w, b) = silu_and_mul(x @ w^T + b) for w = [gate; up] through either path (the GEMV with the
    SiLU-and-mul in its epilogue, or F.linear then the op; auto untuned and with an odd block_n: F.linear)."""
    dev = default_device()
    x = torch.randn(3, 100, device=dev) * 2
    w = torch.randn(2 * 37, 100, device=dev) / 10
    b = torch.randn(2 * 37, device=dev)
    lin = LinearDispatch(mode, ops.silu_and_mul)
    want = reference.silu_and_mul(reference.linear(x, w, b))
    assert rel_err(lin.swiglu(x, w, b), want) < 2 * TOL[torch.float32]
    if mode == "auto":
        lin.choices[(3, 74, 100)] = GemvConfig(1, 128, 4)  # no pairs in a program: the cuBLAS path
        assert torch.equal(lin.swiglu(x, w, b), ops.silu_and_mul(F.linear(x, w, b)))
        lin.choices[(3, 74, 100)] = GemvConfig(2, 128, 4, flat=True)
        assert torch.equal(lin.swiglu(x, w, b), gemv(x, w, b, config=GemvConfig(2, 128, 4, flat=True), swiglu=True))
        lin.choices[(3, 74, 100)] = SkinnyConfig(16, 64, 4, 2)
    # a per-row addend (a LoRA update) before the SiLU-and-mul, on each path; refused with a quantized weight
    add = torch.randn(3, 2 * 37, device=dev)
    want = reference.silu_and_mul(reference.linear(x, w, b, addend=add))
    assert rel_err(lin.swiglu(x, w, b, addend=add), want) < 2 * TOL[torch.float32]
    with pytest.raises(ValueError, match="addend is for 16-bit weights"):
        lin.swiglu(x, w, b, scale=torch.ones(2 * 37, device=dev), addend=add)


def test_linear_dispatch_norm_and_residual():
    """normed / add_into run the fused GEMVs where gemv_runs says the GEMV is the choice, and refuse otherwise."""
    dev = default_device()
    w = torch.randn(24, 128, device=dev) / 10
    h = torch.randn(2, 128, device=dev)
    nw = torch.rand(128, device=dev) + 0.5
    lin = LinearDispatch("auto")
    assert not lin.gemv_runs(2, w)
    with pytest.raises(ValueError, match="no GEMV runs x \\(2, 128\\)"):
        lin.normed(h, nw, 1e-5, w)
    lin.choices[(2, 24, 128)] = GemvConfig(8, 128, 4)
    assert lin.gemv_runs(2, w) and not lin.gemv_runs(3, w) and not lin.gemv_runs(MAX_M + 1, w)
    assert rel_err(lin.normed(h, nw, 1e-5, w), reference.rms_norm_linear(h, nw, 1e-5, w)) < TOL[torch.float32]
    x = torch.randn(2, 24, device=dev)
    w2 = torch.randn(24, 24, device=dev) / 5
    lin.choices[(2, 24, 24)] = GemvConfig(8, 128, 4)
    residual = torch.randn(2, 24, device=dev)
    expected = reference.linear_residual(x, w2, residual)
    assert lin.add_into(x, w2, residual) is residual
    assert rel_err(residual, expected) < TOL[torch.float32]
    assert LinearDispatch("triton").gemv_runs(4, w) and not LinearDispatch("torch").gemv_runs(1, w)


def test_linear_dispatch_skinny():
    """A skinny choice runs the skinny GEMM in cuBLAS's place at any row count up to its MAX_M: plain with a bias,
    swiglu (the SiLU-and-mul in its epilogue) and gated (the SiLU-and-mul kernel first); it is no GEMV for the
    fusions (gemv_runs False, normed refuses) but counts as a product with the SiLU-and-mul inside
    (gemv_chosen). The torch and triton modes never run it."""
    dev = default_device()
    cfg = SkinnyConfig(16, 64, 4, 2)
    w = torch.randn(48, 96, device=dev) / 10
    b = torch.randn(48, device=dev)
    lin = LinearDispatch("auto", ops.silu_and_mul)
    for m in (2, 9, 32):
        x = torch.randn(m, 96, device=dev)
        lin.choices[(m, 48, 96)] = cfg
        out = lin(x, w, b)
        assert torch.equal(out, skinny(x, w, b, config=cfg))
        assert rel_err(out, reference.linear(x, w, b)) < TOL[torch.float32]
        want = reference.silu_and_mul(reference.linear(x, w, b))
        assert rel_err(lin.swiglu(x, w, b), want) < 2 * TOL[torch.float32]
        assert lin.gemv_chosen(m, w) and not lin.gemv_runs(m, w)
        with pytest.raises(ValueError, match="no GEMV runs"):
            lin.normed(x, None, 1e-5, w)
    x = torch.randn(5, 2 * 96, device=dev)
    lin.choices[(5, 48, 96)] = cfg
    assert rel_err(lin.gated(x, w), reference.linear(reference.silu_and_mul(x), w)) < TOL[torch.float32]
    lin.choices[(33, 48, 96)] = cfg  # past the skinny GEMM's rows: cuBLAS
    x = torch.randn(33, 96, device=dev)
    assert torch.equal(lin(x, w, b), F.linear(x, w, b))
    for mode in ("triton", "torch"):
        assert LinearDispatch(mode)._choice(8, w) is None


def test_tune_checks_each_kind_of_candidate(monkeypatch):
    """tune() on the CPU (the interpreter's kernels, a stand-in timer): every candidate it times agrees with the
    dense product; the GEMV from 1 to MAX_M rows, the skinny GEMM from 2 rows where cuBLAS could run (not where
    a residual add is fused in; split-K from 16 rows), cuBLAS always timed."""
    from tritium.models import linear as linear_mod
    from tritium.ops.skinny import CONFIGS as SKINNY

    def timed(fn, group, repeats):
        for p in group:
            fn(p)
        return 1.0

    monkeypatch.setattr(linear_mod, "_time_group", timed)
    dev = default_device()
    group = [torch.randn(128, 128, dtype=torch.float16, device=dev) / 10 for _ in range(2)]
    lin = LinearDispatch("auto", ops.silu_and_mul)
    for variant in ("plain", "swiglu", "gated", "residual", "rope"):
        lin.tune({variant: group}, (1, 2, 8), variants={variant: variant},
                 rope_heads=(2, 1) if variant == "rope" else None)
    assert lin.rejected == []
    timed_at = {(r["variant"], r["m"]): set(r["us_per_call"]) for r in lin.report}
    gemvs = {str(c) for c in CONFIGS if c.block_k <= 256}
    for variant in ("plain", "swiglu", "gated", "rope"):
        kinds = [{"cublas" if k == "cublas" else "skinny" if k.startswith("skinny") else "gemv"
                  for k in timed_at[(variant, m)]} for m in (1, 2, 8)]
        assert kinds == [{"cublas", "gemv"}, {"cublas", "gemv", "skinny"}, {"cublas", "skinny"}], variant
        assert {str(c) for c in SKINNY if c.split_k == 1} == {k for k in timed_at[(variant, 8)] if k != "cublas"}
    lin.tune({"plain": group}, (16,))  # split-K candidates from SKINNY_SPLIT_MIN_M rows
    assert {str(c) for c in SKINNY} | {"cublas"} == set(lin.report[-1]["us_per_call"])
    assert linear_mod.SKINNY_SPLIT_MIN_M == 16
    assert gemvs <= timed_at[("plain", 1)] and ("residual", 8) not in timed_at
    assert not any(k.startswith("skinny") for k in timed_at[("residual", 2)])


def test_state_round_trip():
    """state() -> JSON -> load_state() gives back every choice (cuBLAS's None included) and report; a state
    naming a configuration this version lacks, or malformed, is refused and changes nothing."""
    import json

    lin = LinearDispatch("auto")
    lin.choices = {(1, 384, 128): CONFIGS[0], (2, 384, 128): None, (4, 96, 192): CONFIGS[-1],
                   (16, 384, 128): SKINNY_CONFIGS[1]}
    lin.best_gemv = {(1, 384, 128): CONFIGS[0], (2, 384, 128): CONFIGS[3], (4, 96, 192): CONFIGS[-1],
                     (16, 384, 128): SKINNY_CONFIGS[1]}
    lin.report, lin.chain_report = [{"weight": "qkv_proj", "m": 1}], [{"m": 2, "kept": "as tuned"}]
    state = json.loads(json.dumps(lin.state()))
    other = LinearDispatch("auto")
    other.load_state(state)
    assert other.choices == lin.choices and other.best_gemv == lin.best_gemv
    assert (other.report, other.chain_report, other.rejected) == (lin.report, lin.chain_report, [])
    assert other.restored and not lin.restored
    x, w = torch.randn(1, 128, device=default_device()), torch.randn(384, 128, device=default_device())
    assert other._config(x, w) == CONFIGS[0]
    bad = [dict(state, choices=[[1, 384, 128, {"block_n": 3, "block_k": 7, "num_warps": 4, "num_stages": 1,
                                               "flat": False}]]),
           dict(state, choices=[[8, 384, 128, {"block_n": 3, "block_k": 7, "num_warps": 4, "num_stages": 1}]]),
           dict(state, choices=[[0, 384, 128, None]]), dict(state, choices=[[1, 384, None]]),
           dict(state, best_gemv=[[1, 384, 128, None]]), {k: v for k, v in state.items() if k != "report"},
           dict(state, choices=7), dict(state, int4_choices=[[1, 384, 128, None]]),
           dict(state, int4_choices=[[1, 384, 128, dataclasses.asdict(CONFIGS[0])]])]
    for b in bad:
        fresh = LinearDispatch("auto")
        with pytest.raises(ValueError, match="linear state"):
            fresh.load_state(b)
        assert fresh.choices == {} and fresh.report == [] and fresh.int4_choices == {}
    # int4 GEMV choices round-trip too; a state from before them (no "int4_choices") loads with none
    lin.int4_choices = {(1, 6144, 4096): WORD_GEMV_CONFIGS[1], (4, 4096, 14336): GEMV_CONFIGS[0]}
    other = LinearDispatch("auto")
    other.load_state(json.loads(json.dumps(lin.state())))
    assert other.int4_choices == lin.int4_choices
    other.load_state({k: v for k, v in state.items() if k != "int4_choices"})
    assert other.int4_choices == {} and other.choices == lin.choices


def test_int4_dispatch_takes_the_tuned_gemv(monkeypatch):
    """An int4 weight's product gets the tuned int4 GEMV config of its (M, N, K) in "auto" mode (the default
    where none was tuned, and always in "triton" mode; under the interpreter the candidate with the most rows a
    program), the result right either way; "torch" mode multiplies the reference dequantization."""
    import tritium.models.linear as linear_mod

    dev = default_device()
    codes = torch.randint(0, 16, (24, 256), generator=torch.Generator().manual_seed(0))
    w = Int4Weight(pack_int4(codes).to(dev), (torch.rand(24, 2) + 0.5).to(torch.float16).to(dev), None, None, 128)
    seen = []

    def spy(x, weight, bias=None, *, gemv_config=None):
        seen.append(gemv_config)
        return int4_linear(x, weight, bias, gemv_config=gemv_config)

    monkeypatch.setattr(linear_mod, "int4_linear", spy)
    cfg = Int4GemvConfig(8, 256, 4, words=True)
    for mode in ("auto", "triton"):
        lin = LinearDispatch(mode)
        lin.int4_choices = {(2, 24, 256): cfg} if mode == "auto" else {}
        for m in (1, 2, 3):
            x = torch.randn(m, 256, device=dev)
            assert rel_err(lin(x, w), linear_int4_reference(x, w)) < 1e-5
    default = [widest(gemv_candidates(w)) if interpreting() else None for m in (1, 2, 3)]
    assert seen == [default[0], cfg, default[2], *default]
    if interpreting():  # the word kernel's candidate with the most rows (K 256: one chunk of 512 columns)
        assert default[1] == Int4GemvConfig(32, 512, 4, words=True) and default[1] in WORD_GEMV_CONFIGS
    assert INTERPRETER_CONFIG in CONFIGS  # a GPU may run it too: the tests' launches compile as there
    x = torch.randn(2, 256, device=dev)
    assert rel_err(LinearDispatch("torch")(x, w), linear_int4_reference(x, w)) < 1e-5
    with pytest.raises(TypeError, match="gemv_config must be an Int4GemvConfig"):
        int4_linear(x, w, gemv_config=CONFIGS[0])


@pytest.mark.gpu
def test_linear_tune_int4():
    """tune() on int4 weights: every int4 GEMV config checked and timed alone at M <= 4, the fastest kept
    (one of the word GEMV's for these shapes) and reported; M = 8 left to the matmul."""
    dev = default_device()
    group = [quantize_int4(torch.randn(1024, 2048, dtype=torch.bfloat16, device=dev)) for _ in range(4)]
    lin = LinearDispatch("auto")
    report = lin.tune({"proj": group}, (1, 4, 8))
    assert [(r["weight"], r["variant"], r["m"]) for r in report] == [("proj", "int4", 1), ("proj", "int4", 4)]
    assert set(lin.int4_choices) == {(1, 1024, 2048), (4, 1024, 2048)} and lin.choices == {}
    assert lin.rejected == []
    for r in report:
        assert r["best_tbs"] > 0 and r["choice"] in r["us_per_call"]
        assert min(r["us_per_call"].values()) == r["us_per_call"][r["choice"]]
    x = torch.randn(1, 2048, dtype=torch.bfloat16, device=dev)
    assert rel_err(lin(x, group[0]), linear_int4_reference(x, group[0])) < TOL[torch.bfloat16]


@pytest.mark.gpu
def test_linear_tune_w8a8():
    """``dynamic_fp8``: a quantized group is timed as W8A8 (the GEMV of the quantized x against the W8A8
    matmul), plain, gated and swiglu; the fused variants are not timed (nothing fuses before quantizing x);
    every candidate agrees with the reference and the chosen path gives its numbers; gemv_runs stays False."""
    from tritium.ops.quant import dynamic_linear, quantize_rows
    dev = default_device()
    pairs = [quantize_rows(torch.randn(1024, 2048, device=dev) / 45) for _ in range(4)]
    group, scales = [w for w, _ in pairs], [s for _, s in pairs]
    lin = LinearDispatch("auto", ops.silu_and_mul)
    lin.activation_dtype, lin.dynamic_fp8 = torch.bfloat16, True
    variants = {"plain": "plain", "gated": "gated", "swiglu": "swiglu", "norm": "norm", "rope": "rope"}
    report = lin.tune({v: group for v in variants}, (1, 4), variants=variants, scales={v: scales for v in variants},
                      rope_heads=(4, 2))
    assert sorted({r["variant"] for r in report}) == ["gated", "plain", "swiglu"] and lin.rejected == []
    assert all("fp8 activations" in r["dense"] for r in report)
    w8, s = pairs[0]
    for m in (1, 4):
        assert not lin.gemv_runs(m, w8)
        x = torch.randn(m, 2048, dtype=torch.bfloat16, device=dev)
        assert rel_err(lin(x, w8, scale=s), dynamic_linear(x, w8, s)) < 2 * TOL[torch.bfloat16]
        x2 = torch.randn(m, 4096, dtype=torch.bfloat16, device=dev)
        want = dynamic_linear(reference.silu_and_mul(x2), w8, s)
        assert rel_err(lin.gated(x2, w8, scale=s), want) < 2 * TOL[torch.bfloat16]


@pytest.mark.parametrize("mode", ["triton", "torch", "invariant"])
def test_linear_dispatch_w8a8(mode):
    """``dynamic_fp8``: plain, gated and swiglu products of an fp8 weight are W8A8 at every row count (the GEMV
    with the quantized x to MAX_M rows in "triton" mode, the W8A8 matmul above and in "invariant" mode,
    the reference in "torch" mode): ``dynamic_linear``'s numbers; no fusion is offered (gemv_runs False)."""
    from tritium.ops.quant import dynamic_linear, quantize_rows
    dev = default_device()
    gen = torch.Generator().manual_seed(9)
    w8, s = (t.to(dev) for t in quantize_rows(torch.randn(48, 64, generator=gen) / 8))
    b = torch.randn(48, generator=gen).to(dev)
    lin = LinearDispatch(mode, ops.silu_and_mul)
    lin.dynamic_fp8 = True
    assert not lin.gemv_runs(1, w8) and lin.gemv_chosen(1, w8) == (mode == "triton")
    tol = 1e-5 if interpreting() else 5e-4  # a GPU's fp8 MMA sums a K step in a short accumulator (test_matmul.py)
    for m in (1, 3, 9):
        x = (torch.randn(m, 64, generator=gen) * torch.logspace(-1, 1, m)[:, None]).to(dev)
        assert rel_err(lin(x, w8, b, scale=s), dynamic_linear(x, w8, s, b)) < tol
        x2 = torch.randn(m, 128, generator=gen).to(dev)
        assert rel_err(lin.gated(x2, w8, scale=s), dynamic_linear(reference.silu_and_mul(x2), w8, s)) < tol
        want = reference.silu_and_mul(dynamic_linear(x, w8, s, b))
        assert rel_err(lin.swiglu(x, w8, b, scale=s), want) < tol


@pytest.mark.parametrize("mode", ["triton", "torch", "invariant"])
@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_linear_w8a8_takes_quantized_rows(mode, fuse):
    """x as Fp8Rows (quantized by the norm before, ``fuse_act_quant``): plain and swiglu products give what the
    16-bit x gives, bit for bit (the same quantization, one launch earlier); the gated product's SiLU-and-mul
    quantizes as it writes (``fuse_quant``) with the same bits either way. Fp8Rows with a 16-bit weight, or
    without dynamic_fp8, is a TypeError."""
    from tritium.ops.act_quant import quantize_activations_fp8 as quantize
    from tritium.ops.quant import Fp8Rows, quantize_rows
    dev = default_device()
    gen = torch.Generator().manual_seed(10)
    w8, s = (t.to(dev) for t in quantize_rows(torch.randn(48, 64, generator=gen) / 8))
    b = torch.randn(48, generator=gen).to(dev)
    silu = ops.silu_and_mul if mode != "torch" else reference.silu_and_mul
    lin = LinearDispatch(mode, silu)
    lin.dynamic_fp8, lin.fuse_quant = True, fuse
    for m in (1, 3, 9):
        x = (torch.randn(m, 64, generator=gen) * torch.logspace(-1, 1, m)[:, None]).to(dev)
        rows = Fp8Rows(*quantize(x), x.dtype)
        assert torch.equal(lin(rows, w8, b, scale=s), lin(x, w8, b, scale=s))
        assert torch.equal(lin.swiglu(rows, w8, b, scale=s), lin.swiglu(x, w8, b, scale=s))
        x2 = torch.randn(m, 128, generator=gen).to(dev)
        unfused = LinearDispatch(mode, silu)
        unfused.dynamic_fp8, unfused.fuse_quant = True, False
        assert torch.equal(lin.gated(x2, w8, scale=s), unfused.gated(x2, w8, scale=s))
    with pytest.raises(TypeError, match="Fp8Rows"):
        lin(rows, torch.randn(48, 64, device=dev))
    lin.dynamic_fp8 = False
    with pytest.raises(TypeError, match="Fp8Rows"):
        lin(rows, w8, scale=s)


@pytest.mark.parametrize("mode,dynamic", [("triton", False), ("triton", True), ("invariant", True), ("torch", True)])
def test_warm_dense_paths(mode, dynamic):
    """An fp8 weight's dense path is run once per kernel configuration 1..max_rows rows can select (W8A8: the
    fp8 tiles; weight-only: the 16-bit ones; invariant: its tiles; torch: nothing to compile), and those are
    the configurations the rows select."""
    from tritium.fused.matmul import invariant_config, select_config
    from tritium.models.linear import FP8_MATMUL_MAX_ROWS, dense_paths, warm_dense_paths
    from tritium.ops.quant import quantize_rows
    dev = default_device()
    w8, s = (t.to(dev) for t in quantize_rows(torch.randn(96, 64) / 8))
    lin = LinearDispatch(mode)
    lin.dynamic_fp8 = dynamic
    paths = dense_paths(lin, 96, 64, 200, torch.float32, dev)
    a_dtype = torch.float8_e4m3fn if dynamic else torch.float32
    choose = invariant_config if mode == "invariant" else select_config
    # weight-only on a GPU: past FP8_MATMUL_MAX_ROWS rows the weight is dequantized for cuBLAS (nothing to compile)
    cublas = mode == "triton" and not dynamic and dev.type == "cuda"
    rows = [m for m in range(1, 201) if not (cublas and m > FP8_MATMUL_MAX_ROWS)]
    want = set() if mode == "torch" else {("matmul", choose(m, 96, 64, a_dtype, dev)) for m in rows}
    if cublas:
        want.add(("dequantize + cuBLAS",))
    assert set(paths) == want
    assert all(choose(m, 96, 64, a_dtype, dev) == key[1] for key, m in paths.items() if key[0] == "matmul")
    assert all(m == FP8_MATMUL_MAX_ROWS + 1 for key, m in paths.items() if key[0] != "matmul")
    assert warm_dense_paths(lin, w8, s, 200, torch.float32) == len(paths)
