"""Configuration choice: the hand rules on devices with little shared memory, a tree's answers that do not
fit (its module's UNFIT, or a launch that ran out of resources) replaced by the hand rules, and the
launcher's fallback when a tree's configuration fails to launch."""

import dataclasses
import types

import pytest
import torch
from triton.runtime.errors import OutOfResources

from tritium.attention import config as config_mod
from tritium.attention import AttentionConfig, launcher, paged_attention, select_attention_config
from tritium.attention.config import MAX_SPLITS, SMALL_SHARED, hand_rules, mark_unfit, resource_key
from tritium.attention.reference import paged_attention_ref
from tritium.runtime import default_device


@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("q_len,seq_len,num_seqs", [(1, 8192, 1), (1, 4096, 16), (1, 2048, 64), (4096, 4096, 1),
                                                    (2048, 2048, 8)])
def test_hand_rules_fit_small_shared_memory(head_dim, q_len, seq_len, num_seqs):
    """With 64 KiB a program (MI300X), no 128-key tiles and no third stage for tiles over 32 keys (the
    sizes in hand_rules' NOTE); with an H100's 227 KiB or no limit, the rules are unchanged."""
    kw = dict(num_seqs=num_seqs, num_q_heads=32, num_kv_heads=8, head_dim=head_dim, max_seqlen_q=q_len,
              max_seqlen_k=seq_len, dtype=torch.bfloat16, sms=304)
    small = hand_rules(**kw, max_shared=64 * 1024)
    assert small.tile_n <= 64 and (small.num_stages <= 2 or small.tile_n <= 32), small
    assert hand_rules(**kw, max_shared=232448) == hand_rules(**kw)
    big = hand_rules(**kw)
    if big.tile_n <= 64:
        assert small == big
    assert SMALL_SHARED > 64 * 1024


def _fake_tree(decode=(128, 3, 1), prefill=(128, 128, 8, 3), unfit=()):
    return types.SimpleNamespace(decode=lambda f: decode, prefill=lambda f: prefill, UNFIT=frozenset(unfit))


_BATCH = dict(num_tokens=1, num_seqs=1, num_q_heads=8, num_kv_heads=2, head_dim=256, block_size=16, max_seqlen_q=1,
              max_seqlen_k=4096, dtype=torch.bfloat16)


def test_tree_answer_in_its_unfit_table_gives_the_hand_rules():
    cpu = torch.device("cpu")
    tree = _fake_tree()
    picked = select_attention_config(**_BATCH, device=cpu, tree=tree)
    assert (picked.tile_n, picked.num_stages) == (128, 3)
    key = resource_key(picked, 256, torch.bfloat16)
    assert key == (16, 128, 4, 3, 256, 16)
    hand = select_attention_config(**_BATCH, device=cpu, tree=False)
    assert select_attention_config(**_BATCH, device=cpu, tree=_fake_tree(unfit=[key])) == hand
    # fp8 KV is another key: the tree's answer stands
    fp8 = select_attention_config(**_BATCH, device=cpu, tree=_fake_tree(unfit=[key]), kv_dtype=torch.float8_e4m3fn)
    assert fp8.tile_n == 128


def test_mark_unfit_is_per_device_and_dtype(monkeypatch):
    monkeypatch.setattr(config_mod, "_UNFIT_HERE", set())
    cpu = torch.device("cpu")
    tree = _fake_tree()
    picked = select_attention_config(**_BATCH, device=cpu, tree=tree)
    mark_unfit(picked, head_dim=256, dtype=torch.bfloat16, kv_dtype=torch.bfloat16, device=cpu)
    assert select_attention_config(**_BATCH, device=cpu, tree=tree) == select_attention_config(
        **_BATCH, device=cpu, tree=False)
    assert select_attention_config(**dict(_BATCH, dtype=torch.float16), device=cpu, tree=tree) == picked
    assert select_attention_config(**_BATCH, device=torch.device("meta"), tree=tree).tile_n == 128


class _Flaky:
    """Stands for the attention kernel: a launch with 128-key tiles runs out of shared memory."""

    def __init__(self, real):
        self.real, self.launches = real, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append((kwargs["TILE_N"], kwargs["num_stages"]))
            if kwargs["TILE_N"] == 128:
                raise OutOfResources(274432, 232448, "shared memory")
            return self.real[grid](*args, **kwargs)
        return launch


def test_launcher_falls_back_to_the_hand_rules_when_a_tree_config_does_not_fit(monkeypatch):
    """A tree's configuration that fails to launch (OutOfResources) is remembered and the call runs the
    hand rules' one, exact; the next call goes straight to the hand rules; a configuration the caller
    gave is not replaced."""
    monkeypatch.setattr(config_mod, "_UNFIT_HERE", set())
    monkeypatch.setattr(config_mod.tuned, "for_device", lambda name: _fake_tree())
    flaky = _Flaky(launcher._paged_attention_kernel)
    monkeypatch.setattr(launcher, "_paged_attention_kernel", flaky)
    torch.manual_seed(0)
    dev = default_device()
    num_seqs, hq, hkv, d, bs, seq_len = 2, 4, 2, 64, 16, 200
    pages = -(-seq_len // bs)
    k_cache = torch.randn(num_seqs * pages, bs, hkv, d, dtype=torch.float16, device=dev)
    v_cache = torch.randn_like(k_cache)
    block_table = torch.randperm(num_seqs * pages, device=dev).int().view(num_seqs, pages)
    seq_lens = torch.full((num_seqs,), seq_len, dtype=torch.int32, device=dev)
    cu = torch.arange(num_seqs + 1, dtype=torch.int32, device=dev)
    q = torch.randn(num_seqs, hq, d, dtype=torch.float16, device=dev)
    ref = paged_attention_ref(q, k_cache, v_cache, block_table, seq_lens, cu)
    for expected in ([(128, 3), (64, 2)], [(64, 2)]):
        flaky.launches.clear()
        out = torch.full_like(q, float("nan"))
        paged_attention(q, k_cache, v_cache, block_table, seq_lens, cu, out=out, max_seqlen_q=1, max_seqlen_k=seq_len)
        assert flaky.launches == expected
        assert not out.isnan().any()
        assert ((out.float() - ref).norm() / ref.norm()).item() < 5e-3
    given = AttentionConfig(block_m=16, block_q=8, tile_n=128, num_splits=1, num_warps=4, num_stages=3)
    with pytest.raises(OutOfResources):
        paged_attention(q, k_cache, v_cache, block_table, seq_lens, cu, config=given)


def test_fallback_reraises_when_the_hand_rules_do_not_fit(monkeypatch):
    monkeypatch.setattr(config_mod, "_UNFIT_HERE", set())
    monkeypatch.setattr(config_mod.tuned, "for_device", lambda name: None)

    class _Never:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                raise OutOfResources(1, 0, "shared memory")
            return launch

    monkeypatch.setattr(launcher, "_paged_attention_kernel", _Never())
    dev = default_device()
    k_cache = torch.zeros(4, 16, 1, 64, dtype=torch.float16, device=dev)
    q = torch.zeros(1, 1, 64, dtype=torch.float16, device=dev)
    with pytest.raises(OutOfResources):
        paged_attention(q, k_cache, k_cache, torch.zeros(1, 4, dtype=torch.int32, device=dev),
                        torch.tensor([20], dtype=torch.int32, device=dev),
                        torch.tensor([0, 1], dtype=torch.int32, device=dev))


@pytest.mark.parametrize("cap", [0, 15, 256, 96.0, "96", True])
def test_max_registers_must_be_a_register_count(cap):
    with pytest.raises(ValueError, match="max_registers"):
        AttentionConfig(block_m=16, block_q=4, tile_n=32, num_splits=1, num_warps=4, num_stages=2, max_registers=cap)


@pytest.mark.parametrize("field,value", [("block_m", 24), ("block_m", 8), ("tile_n", 48), ("tile_n", 16.0),
                                         ("block_q", 0), ("num_splits", 0), ("num_splits", MAX_SPLITS + 1),
                                         ("num_warps", 3), ("num_stages", 0), ("num_warps", True)])
def test_config_fields_are_checked(field, value):
    """A configuration the kernel cannot compile is refused where it is made, naming the field."""
    fields = dict(block_m=16, block_q=4, tile_n=32, num_splits=1, num_warps=4, num_stages=2)
    with pytest.raises(ValueError, match=f"AttentionConfig.{field} must be"):
        AttentionConfig(**dict(fields, **{field: value}))


def test_register_cap_goes_to_cuda_launches_only(monkeypatch):
    free = AttentionConfig(block_m=16, block_q=4, tile_n=32, num_splits=8, num_warps=4, num_stages=2)
    capped = dataclasses.replace(free, max_registers=96)
    cuda = torch.device("cuda", 0)
    monkeypatch.setattr(torch.version, "hip", None)
    assert config_mod.register_cap(capped, cuda) == {"maxnreg": 96}
    assert config_mod.register_cap(free, cuda) == {}
    assert config_mod.register_cap(capped, torch.device("cpu")) == {}  # the interpreter has no such option
    monkeypatch.setattr(torch.version, "hip", "6.4")
    assert config_mod.register_cap(capped, cuda) == {}  # nor has ROCm
