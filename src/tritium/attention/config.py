"""Kernel configuration: the one place where tiles, warps, stages and split counts are chosen.

``select_attention_config`` is keyed on the batch shape, head geometry, dtypes and GPU. On a GPU with a
tuned decision tree (``tritium.attention.tuned``, exported by ``python -m tritium.tune attention``), the
tree picks the kernel's knobs; elsewhere (other GPUs, fp32, the interpreter) the hand rules below do.
Every number in the hand rules names the measurement that chose it.
"""

import dataclasses
from dataclasses import dataclass

import torch

from tritium.runtime import device_name, max_shared_memory, num_sms

from tritium.attention import tuned

# Split-KV never goes beyond this many splits (the merge kernel loads them all at once).
MAX_SPLITS = 64

# The two kernel families a tree is fitted for, and the knobs it picks (see ``config_from_knobs``):
#   decode  (max_seqlen_q * group <= 64 rows: decode, speculative verification):
#           (tile_n, num_stages, splits_per_sm); splits_per_sm 0 means no split-KV
#   prefill (everything else: prefill, chunked prefill, mixed batches):
#           (block_m, tile_n, num_warps, num_stages)
# A tree may also answer "hand": the hand rules' configuration.
DECODE, PREFILL = "decode", "prefill"
DECODE_ROWS = 64


@dataclass(frozen=True)
class AttentionConfig:
    block_m: int  # rows of a Q block: block_q tokens x (num_q_heads // num_kv_heads) heads, padded
    block_q: int  # query tokens per Q block
    tile_n: int  # keys per inner iteration (independent of the page size)
    num_splits: int  # split-KV factor (1: no split, no merge kernel)
    num_warps: int
    num_stages: int
    # "triton": kernels.py, every feature. "gluon": the Hopper causal-prefill kernel (tritium.attention.hopper:
    # its tiles are fixed, the fields above are ignored). paged_attention picks it by itself, before the trees
    # and hand rules, for prefill-heavy calls that it serves on Hopper (hopper.auto_selects).
    kernel: str = "triton"
    # Registers a thread of the Triton kernel may use (Triton's ``maxnreg``, ptxas ``.maxnreg``) on NVIDIA
    # GPUs: more programs an SM, at the cost of spills where the kernel needs more. None: the compiler's
    # choice. Passed only on CUDA builds (ROCm and the interpreter have no such option). The trees do not
    # set it: the sweep has no timings of it (bench/NOTES.md, stop 41: 96 on 32-key tiles x 2 stages, no
    # spills, +6.6% at cold B=1 L=8192 decode, -15% at L=768; 64/128-key tiles spill and lose 7-19%).
    max_registers: int | None = None
    # Batch invariance (``invariant_config``): > 0 puts a sequence's key tiles in groups of this many, counted
    # from its first key, each with its own online softmax, folded in order; num_splits then means "split s
    # computes group s" and must cover the longest sequence's groups (or be 1: one program walks them). 0: off.
    group_tiles: int = 0

    def __post_init__(self):
        if self.kernel not in KERNELS:
            raise ValueError(f"AttentionConfig.kernel must be one of {KERNELS}, got {self.kernel!r}")
        # What the Triton kernel can compile: power-of-two tiles of at least 16 (tl.arange, tl.dot), at most
        # MAX_SPLITS splits (the merge loads them all at once), Triton's warp counts.
        checks = (("block_m", _pow2_at_least_16, "a power of two >= 16"),
                  ("tile_n", _pow2_at_least_16, "a power of two >= 16"),
                  ("block_q", lambda v: v >= 1, "an int >= 1"),
                  ("num_splits", lambda v: 1 <= v <= MAX_SPLITS, f"an int in [1, {MAX_SPLITS}]"),
                  ("num_warps", lambda v: v in (1, 2, 4, 8, 16), "one of 1, 2, 4, 8, 16"),
                  ("num_stages", lambda v: v >= 1, "an int >= 1"),
                  ("group_tiles", lambda v: v >= 0, "an int >= 0"))
        for name, ok, what in checks:
            value = getattr(self, name)
            if type(value) is not int or not ok(value):
                raise ValueError(f"AttentionConfig.{name} must be {what}, got {value!r}")
        cap = self.max_registers
        if cap is not None and (type(cap) is not int or not 16 <= cap <= 255):
            raise ValueError(f"AttentionConfig.max_registers must be None or an int in [16, 255], got {cap!r}")


def _pow2_at_least_16(value: int) -> bool:
    return value >= 16 and value & (value - 1) == 0


def register_cap(config: AttentionConfig, device: torch.device) -> dict:
    """Launch keywords for ``config.max_registers``: ``maxnreg`` on a CUDA device of a CUDA build, none
    elsewhere."""
    if config.max_registers is None or device.type != "cuda" or torch.version.hip is not None:
        return {}
    return {"maxnreg": config.max_registers}


KERNELS = ("triton", "gluon")


def next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def family(*, max_seqlen_q: int, num_q_heads: int, num_kv_heads: int) -> str:
    """``DECODE`` when every Q block of the batch fits in 64 rows (tokens x heads of a group), else ``PREFILL``."""
    return DECODE if max_seqlen_q * (num_q_heads // num_kv_heads) <= DECODE_ROWS else PREFILL


def features(*, num_tokens: int, num_seqs: int, num_q_heads: int, num_kv_heads: int, head_dim: int,
             block_size: int, max_seqlen_q: int, max_seqlen_k: int, kv_dtype: torch.dtype) -> dict:
    """What a tuned tree is keyed on: the batch shape and head geometry, plus ``programs``, the
    attention programs the batch gives without split-KV (Q blocks x KV heads, with the decode family's
    Q block, or 128-row blocks for prefill)."""
    group = num_q_heads // num_kv_heads
    rows = max_seqlen_q * group
    block_m = max(16, next_pow2(rows)) if rows <= DECODE_ROWS else max(128, next_pow2(group))
    block_q = max(1, block_m // group)
    programs = num_seqs * max(1, -(-max_seqlen_q // block_q)) * num_kv_heads
    return dict(num_seqs=num_seqs, num_tokens=num_tokens, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                head_dim=head_dim, group=group, num_kv_heads=num_kv_heads, block_size=block_size,
                kv_bits=8 * kv_dtype.itemsize, programs=programs)


def config_from_knobs(kind: str, knobs: tuple, *, num_seqs: int, num_q_heads: int, num_kv_heads: int,
                      max_seqlen_q: int, max_seqlen_k: int, sms: int, max_splits: int = MAX_SPLITS
                      ) -> AttentionConfig:
    """The configuration a tree's knobs (see ``DECODE``/``PREFILL`` above) give for one batch.

    Decode: the smallest Q block that holds the rows (at least 16), 4 warps; ``splits_per_sm`` p > 0
    splits the KV range into ceil(p * SMs / programs) parts, at most one per key tile.
    """
    group = num_q_heads // num_kv_heads
    if kind == DECODE:
        tile_n, num_stages, per_sm = knobs
        block_m = max(16, next_pow2(max_seqlen_q * group))
        block_q = max(1, block_m // group)
        programs = num_seqs * max(1, -(-max_seqlen_q // block_q)) * num_kv_heads
        splits = 1 if per_sm == 0 else -(-per_sm * sms // programs)
        splits = max(1, min(splits, max_seqlen_k // tile_n, max_splits))
        return AttentionConfig(block_m=block_m, block_q=block_q, tile_n=tile_n, num_splits=splits, num_warps=4,
                               num_stages=num_stages)
    block_m, tile_n, num_warps, num_stages = knobs
    block_m = max(block_m, next_pow2(group))
    return AttentionConfig(block_m=block_m, block_q=max(1, block_m // group), tile_n=tile_n, num_splits=1,
                           num_warps=num_warps, num_stages=num_stages)


def select_attention_config(*, num_tokens: int, num_seqs: int, num_q_heads: int, num_kv_heads: int,
                            head_dim: int, block_size: int, max_seqlen_q: int, max_seqlen_k: int,
                            dtype: torch.dtype, device: torch.device, max_splits: int = MAX_SPLITS,
                            kv_dtype: torch.dtype | None = None, tree=None) -> AttentionConfig:
    """Pick the paged-attention kernel configuration for one batch.

    ``kv_dtype``: the cache's dtype (default ``dtype``). ``tree``: a tuned-tree module to use instead of
    the one for ``device`` (``tritium.attention.tuned.for_device``); ``False`` forces the hand rules.
    fp32 always uses the hand rules (the trees are fitted for fp16/bf16 queries).
    """
    kv_dtype = dtype if kv_dtype is None else kv_dtype
    if tree is None:
        tree = tuned.for_device(device_name(device))
    if tree and dtype != torch.float32:
        kind = family(max_seqlen_q=max_seqlen_q, num_q_heads=num_q_heads, num_kv_heads=num_kv_heads)
        knobs = getattr(tree, kind)(features(
            num_tokens=num_tokens, num_seqs=num_seqs, num_q_heads=num_q_heads, num_kv_heads=num_kv_heads,
            head_dim=head_dim, block_size=block_size, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
            kv_dtype=kv_dtype))
        if knobs != "hand":
            config = config_from_knobs(kind, knobs, num_seqs=num_seqs, num_q_heads=num_q_heads,
                                       num_kv_heads=num_kv_heads, max_seqlen_q=max_seqlen_q,
                                       max_seqlen_k=max_seqlen_k, sms=num_sms(device), max_splits=max_splits)
            key = resource_key(config, head_dim, kv_dtype)
            if key not in getattr(tree, "UNFIT", ()) and (key, dtype, device) not in _UNFIT_HERE:
                return config
    return hand_rules(num_seqs=num_seqs, num_q_heads=num_q_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                      max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, dtype=dtype, sms=num_sms(device),
                      max_splits=max_splits, max_shared=max_shared_memory(device))


# Configurations that did not fit on this process's GPUs (``mark_unfit``): (resource key, q dtype, device).
_UNFIT_HERE: set = set()


def resource_key(config: AttentionConfig, head_dim: int, kv_dtype: torch.dtype) -> tuple:
    """What a configuration's shared memory and registers depend on: (block_m, tile_n, num_warps,
    num_stages, padded head_dim, KV bits). A tree module's ``UNFIT`` holds the keys whose launches ran
    out of resources in its sweep (``python -m tritium.tune attention`` exports them); the tree's
    answer is not taken for those, nor for keys ``mark_unfit`` recorded in this process."""
    return (config.block_m, config.tile_n, config.num_warps, config.num_stages, next_pow2(head_dim),
            8 * kv_dtype.itemsize)


def mark_unfit(config: AttentionConfig, *, head_dim: int, dtype: torch.dtype, kv_dtype: torch.dtype,
               device: torch.device) -> None:
    """Record that ``config`` ran out of resources (shared memory, registers) on ``device``: from now on
    ``select_attention_config`` answers the hand rules where a tree would answer it. The launcher calls
    this when a tree's configuration fails to launch, then runs the hand rules' one."""
    _UNFIT_HERE.add((resource_key(config, head_dim, kv_dtype), dtype, torch.device(device)))


# Below this much shared memory a program (AMD MI300X: 64 KiB of LDS), the hand rules' 128-key tiles do not
# fit (see hand_rules).
SMALL_SHARED = 128 * 1024


def hand_rules(*, num_seqs: int, num_q_heads: int, num_kv_heads: int, head_dim: int, max_seqlen_q: int,
               max_seqlen_k: int, dtype: torch.dtype, sms: int, max_splits: int = MAX_SPLITS,
               max_shared: int | None = None) -> AttentionConfig:
    """The configuration chosen without a tuned tree.

    Decode-like batches (max_seqlen_q * group <= 64 rows: decode, speculative verification) use the
    smallest Q block that holds their rows (at least 16) and split the KV range: tiny batches to about
    4 programs per SM, batches of about one program per SM to about 2 (with larger KV tiles), larger
    batches not at all. The split count is a ceiling/floor of SMs over programs, so it falls smoothly
    as the batch grows. Prefill batches use 128-row Q blocks (64 for fp32 or head_dim > 128), no split.
    ``max_shared``: the device's shared memory a program (``tritium.runtime.max_shared_memory``); under
    ``SMALL_SHARED`` a 128-key tile becomes a 64-key tile with 2 stages.
    """
    group = num_q_heads // num_kv_heads
    rows = max_seqlen_q * group
    head_pad = next_pow2(head_dim)
    fp32 = dtype == torch.float32
    # Short queries (decode, speculative verification) get the smallest Q block that holds them;
    # prefill gets 128 rows (64 where registers are tight: fp32, head_dim > 128).
    decode_like = rows <= 64
    if decode_like:
        block_m = max(16, next_pow2(rows))
    else:
        block_m = max(64 if (fp32 or head_pad > 128) else 128, next_pow2(group))
    block_q = max(1, block_m // group)

    num_splits = 1
    if decode_like:
        # NOTE: H200 sweeps (bench/NOTES.md "Paged attention"; their files are in git history at c3ca5be;
        # bf16, D=128, GQA 32/8, pages of 16),
        # three regimes by the programs the batch gives without splitting (Q blocks x KV heads):
        # - tiny batches: 64-key tiles, 2 stages, split to ~4 programs per SM. B=1 L=8192: 64 splits
        #   2.53 TB/s vs 32 splits 2.37, 128-key tiles 2.31; B=1 L=32768: 3.32 vs 3.21.
        # - about one program per SM: 128-key tiles, 3 stages, split to ~2 per SM. B=16 L=4096:
        #   2 splits 3.71 TB/s vs 5 splits 3.23, 64-key tiles 3.27 (wave quantisation and bytes in flight).
        # - enough programs: no split, 64-key tiles, 2 stages. B=64 L=2048 4.27, B=128 L=8192 4.49.
        q_blocks = num_seqs * max(1, -(-max_seqlen_q // block_q))
        programs = q_blocks * num_kv_heads
        tile_n, num_warps, num_stages = 64, 4, 2
        if programs * 16 <= 4 * sms:
            num_splits = -(-4 * sms // programs)
        elif programs < 2 * sms:
            tile_n, num_stages = 128, 3
            num_splits = max(1, 2 * sms // programs)
        if head_pad > 128:
            tile_n, num_stages = min(tile_n, 32), 2
        # NOTE: at most one split per key tile. Engine decode chain, Llama-3-8B shape, B=1, context ~700 of a
        # 768-key graph (bench/NOTES.md, run 6 ablation): 12 splits of one tile each vs 6 of two, step
        # 5.714 vs 5.749 ms on the H100, 4.664 vs 4.702 on the H200; 3 splits 5.842 / 4.798.
        num_splits = max(1, min(num_splits, max_seqlen_k // tile_n, max_splits))
    elif head_pad <= 128 and not fp32:
        # NOTE: same sweeps, causal prefill: 128x128 tiles, 8 warps, 3 stages beat 128x64 by 14-15% on
        # long sequences (B=1 S=16384 344 -> 393 TFLOP/s, B=4 S=8192 323 -> 370); at S=2048 (B=8)
        # 128x32 tiles with 4 warps are best (317 vs 294 TFLOP/s; SDPA flash 293).
        if max_seqlen_k <= 2048:
            tile_n, num_warps, num_stages = 32, 4, 3
        else:
            tile_n, num_warps, num_stages = 128, 8, 3
    else:
        tile_n = 64 if head_pad <= 128 else 32
        num_warps, num_stages = 8, 2
    if fp32:
        tile_n = min(tile_n, 32)
        num_stages = 2
    if max_shared is not None and max_shared < SMALL_SHARED and tile_n > 64:
        # NOTE: not run on AMD; sizes from Triton's own compiles for gfx942 (MI300X, 64 KiB of LDS) with the
        # GPU's alignment specialisation (python -m tritium.testing.compile_check, which fails a launch over a
        # target's shared memory), head_dim 128, 16-bit KV: prefill 128x128 tiles, 8 warps, 3 stages need
        # 160 KiB, 128x64 with 2 stages 48 KiB; decode 16x128 with 3 stages 128 KiB, 16x64 with 2 stages 32 KiB.
        tile_n, num_stages = 64, 2
    return AttentionConfig(block_m=block_m, block_q=block_q, tile_n=tile_n, num_splits=num_splits,
                           num_warps=num_warps, num_stages=num_stages)


# Batch invariance: the fixed tile every call runs (see invariant_config) and the fewest key tiles a group holds.
INVARIANT_BLOCK_M = 64
INVARIANT_MIN_GROUP_TILES = 2


def invariant_config(*, num_q_heads: int, num_kv_heads: int, head_dim: int, max_seq_len: int,
                     dtype: torch.dtype, max_splits: int = MAX_SPLITS) -> AttentionConfig:
    """The one configuration a batch-invariant engine runs for every call (decode, prefill, mixed batches):
    a row's output then has the same bits whatever the rest of its batch, its Q block or the split count.

    What fixes a row's arithmetic: the key tile (``tile_n``) and the key groups (``group_tiles``: every
    group's softmax is folded in the same order by the grouped kernel and the sequential merge), and the
    Q-block rows and warps (``block_m``, ``num_warps``), which set the layout, hence the order, of the
    score tile's row sums. ``max_seq_len``: the longest sequence (keys) a call will see; the groups are
    sized so that ``num_splits`` <= ``max_splits`` splits cover it. Decode calls launch ``num_splits``
    splits, others pass ``num_splits=1``."""
    group = num_q_heads // num_kv_heads
    head_pad = next_pow2(head_dim)
    tile_n = 32 if (dtype == torch.float32 or head_pad > 128) else 64  # as hand_rules' register limits
    block_m = max(INVARIANT_BLOCK_M, next_pow2(group))
    tiles = max(1, -(-max_seq_len // tile_n))
    group_tiles = max(INVARIANT_MIN_GROUP_TILES, -(-tiles // max_splits))
    config = AttentionConfig(block_m=block_m, block_q=max(1, block_m // group), tile_n=tile_n, num_splits=1,
                             num_warps=4, num_stages=2, group_tiles=group_tiles)
    return dataclasses.replace(config, num_splits=key_groups(config, max_seq_len))


def key_groups(config: AttentionConfig, seq_len: int) -> int:
    """Key groups of a grouped configuration that a sequence of ``seq_len`` keys (at least one) spans: the
    splits a split call needs to cover it."""
    tiles = -(-max(seq_len, 1) // config.tile_n)
    return -(-tiles // config.group_tiles)


def select_merge_warps(head_dim: int, num_splits: int) -> int:
    """Warps of the split-KV merge kernel: one program reads [num_splits, head_dim] fp32 partials.

    NOTE: not swept; the merge moves num_splits * head_dim * 4 bytes per (token, head), which is
    < 1% of the attention kernel's bytes on the decode shapes of bench/results (B=1 L=8192: 1 MiB vs
    33.5 MiB), so 4 warps (one 16-byte load per thread per 512-element row) is enough.
    """
    return 4 if num_splits * next_pow2(head_dim) <= 64 * 128 else 8


def select_write_kv_warps(num_kv_heads: int, head_dim: int) -> int:
    """Warps of the KV-cache write kernel: one program moves one token's [num_kv_heads, head_dim] K and V.

    NOTE: not swept; a token's K+V is 8 KiB at 8 KV heads x 128 (bf16), 4 warps give 16 bytes per
    thread per row; larger head groups get 8 warps.
    """
    return 4 if next_pow2(num_kv_heads) * next_pow2(head_dim) <= 1024 else 8
