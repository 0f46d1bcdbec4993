"""The attention benchmark's pieces that run without a GPU (the suite itself needs one)."""

from tritium.attention import AttentionConfig
from tritium.bench.attention import _decode_configs


def test_decode_sweep_candidates():
    """The decode sweep: the default first, then 32/64/128-key tiles x 2-3 stages x the default's split
    count halved, kept and doubled (within [1, 64]), on the default's Q block."""
    base = AttentionConfig(block_m=16, block_q=4, tile_n=64, num_splits=5, num_warps=4, num_stages=2)
    configs = _decode_configs(True, base)
    assert configs[0] is None and _decode_configs(False, base) == [None]
    rest = configs[1:]
    assert {(c.tile_n, c.num_stages) for c in rest} == {(n, s) for n in (32, 64, 128) for s in (2, 3)}
    assert {c.num_splits for c in rest} == {2, 5, 10}
    assert all((c.block_m, c.block_q, c.num_warps) == (16, 4, 4) for c in rest)
    wide = _decode_configs(True, AttentionConfig(block_m=16, block_q=4, tile_n=32, num_splits=64, num_warps=4,
                                                 num_stages=2))
    assert {c.num_splits for c in wide[1:]} == {32, 64}



def test_interleaved_ms_rounds(monkeypatch):
    """Every system is timed once a round, the order reversed every other round, and its median round
    kept; a system that raises on its first call is left out with its error."""
    from tritium.bench import common

    order, slow = [], iter([5.0] + [1.0] * 10)  # the first timing lands in a slow spell

    def fake_time_ms(fn, *, graph=False, rep_ms=200):
        order.append(fn())
        return next(slow) * (2.0 if order[-1] == "b" else 1.0)

    def broken():
        raise RuntimeError("no cuDNN here")

    monkeypatch.setattr(common, "time_ms", fake_time_ms)
    ms, errors = common.interleaved_ms({"a": lambda: "a", "b": lambda: "b", "c": broken}, rounds=3)
    assert order == ["a", "b", "b", "a", "a", "b"]
    assert ms == {"a": 1.0, "b": 2.0} and set(errors) == {"c"} and "no cuDNN here" in errors["c"]
