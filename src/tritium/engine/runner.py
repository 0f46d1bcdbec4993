"""Model runner: owns the KV cache, turns a scheduled batch into tensors, runs the model (eagerly or by
replaying a CUDA graph of a decode step) and returns the logits of the sequences that sample.

Greedy decode also runs in *windows*: k steps queued back to back, each ending in ``greedy_advance``
(argmax, then the token, position, length and cache slot of the next step written on the device), with
one device-to-host copy of the tokens at the end. A window can be continued from the device state
before the host has read the one in flight, so the host's bookkeeping overlaps the GPU.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Callable

import numpy as np
import torch

from tritium.engine.scheduler import ScheduledBatch
from tritium.models.attention import AttentionMetadata
from tritium.models.llama import LlamaModel
from tritium.ops import greedy_advance, greedy_scratch, reference, token_logprobs
from tritium.ops.lora import SORT_FROM

log = logging.getLogger(__name__)

# Decode batch sizes that get a CUDA graph; a batch runs in the smallest bucket that holds it.
GRAPH_BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256)
# Most greedy decode steps in one window; also the rows of the token ring each window's tokens go to.
MAX_DECODE_STEPS = 64
# Prompt positions whose logits one LM-head call computes for prompt log-probabilities (rows of the
# vocabulary in the model's dtype on one rank: 256 x 152k x 2 B = 78 MB for Qwen's in bf16; fp32 when
# gathered from several ranks).
PROMPT_LOGITS_CHUNK = 256


def kv_cache_bytes_per_block(model: LlamaModel, block_size: int, layers: int | None = None,
                             dtype: torch.dtype | None = None) -> int:
    """Bytes of one page across ``layers`` layers (default: every layer), K and V, on this rank, in ``dtype``
    (default: the model's)."""
    cfg = model.config
    layers = cfg.num_hidden_layers if layers is None else layers
    return 2 * layers * block_size * model.num_kv_heads * cfg.head_dim * (dtype or model.dtype).itemsize


def window_layers(model: LlamaModel) -> list[int]:
    """Layers with a sliding window: what a window pool (``num_window_blocks``) holds."""
    return [i for i in range(model.config.num_hidden_layers) if model.config.layer_window(i) is not None]


@dataclasses.dataclass(eq=False)
class HostStaging:
    """Pinned host buffers a decode step's inputs go up from, and the window tokens come down to."""

    i64: torch.Tensor            # [7, rows] int64: ids, positions, slots, stops, window slots, LoRA slots and order
    seq_lens: torch.Tensor       # [rows] int32
    block_table: torch.Tensor    # [rows, max_blocks] int32
    tokens: tuple[torch.Tensor, torch.Tensor]  # [MAX_DECODE_STEPS, rows] int64 each: one per window in flight
    window_table: torch.Tensor | None = None  # [rows, max_blocks] int32: the window pool's

    def __post_init__(self):  # numpy views of the same memory, written by the host each step
        self.i64_np: np.ndarray = self.i64.numpy()
        self.seq_lens_np: np.ndarray = self.seq_lens.numpy()
        self.block_table_np: np.ndarray = self.block_table.numpy()
        self.window_table_np = None if self.window_table is None else self.window_table.numpy()


@dataclasses.dataclass(eq=False)
class DecodeBuffers:
    """Static inputs of a decode step of ``rows`` rows (what a CUDA graph of it reads and writes), their
    host staging, and the state of the greedy windows run on them."""

    rows: int
    ids: torch.Tensor            # [rows] int64
    pos: torch.Tensor            # [rows] int64
    slots: torch.Tensor          # [rows] int64, -1: padding (writes nowhere)
    block_table: torch.Tensor    # [rows, max_blocks] int32
    seq_lens: torch.Tensor       # [rows] int32
    cu_seqlens_q: torch.Tensor   # [rows + 1] int32 (one query token per row)
    hist: torch.Tensor           # [MAX_DECODE_STEPS, rows] int64 token ring: the token at position p at row p % H
    stop: torch.Tensor           # [rows] int64, position of each row's last token: its window stops there
    scratch: torch.Tensor | None  # greedy_advance's (Triton ops)
    host: HostStaging
    staged: torch.cuda.Event | None  # the last host-to-device copies out of ``host``
    window_slots: torch.Tensor | None   # [rows] int64, the window pool's slots (None: no window pool)
    window_table: torch.Tensor | None   # [rows, max_blocks] int32
    lora: torch.Tensor | None    # [rows] int64 LoRA adapter slots, -1: none (None: the model serves no adapters)
    lora_order: torch.Tensor | None  # [rows] int64 the rows sorted by LoRA slot (None: rows <= SORT_FROM)
    done: tuple[torch.cuda.Event | None, torch.cuda.Event | None]  # with host.tokens[0] / [1]
    flip: int = 0                # which token buffer the next window uses
    plain: bool = True           # no row has a LoRA adapter: the graph without adapters replays
    logits: torch.Tensor | None = None  # a graph's output


@dataclasses.dataclass(eq=False)
class DecodeGraph:
    """A captured decode step (ending in greedy_advance) and the buffers it runs on."""

    graph: torch.cuda.CUDAGraph
    bufs: DecodeBuffers
    # a model serving LoRA adapters: ``graph`` runs the rows' adapters, ``plain`` the step of no adapter (its logits)
    plain: torch.cuda.CUDAGraph | None = None
    plain_logits: torch.Tensor | None = None

    def pick(self) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        """The graph the staged rows run (and its logits)."""
        if self.plain is not None and self.bufs.plain:
            return self.plain, self.plain_logits
        return self.graph, self.bufs.logits


@dataclasses.dataclass(eq=False)
class StepPlan:
    """Host inputs of one model step over ``S`` sequences and ``T`` tokens: everything the runner needs
    besides its model and cache. Built from a scheduled batch on the rank that schedules; a
    tensor-parallel engine sends it to the other ranks, which run the same step on their shards."""

    ids: np.ndarray          # [T] int64
    pos: np.ndarray          # [T] int64
    slots: np.ndarray        # [T] int64 cache slots
    q_lens: list[int]        # [S] new tokens of each sequence
    seq_lens: list[int]      # [S] tokens of each sequence after the step
    logit_rows: list[int]    # rows of the sequences that finish their tokens (they sample); every row of a draft
    table: np.ndarray        # [S, width] int32 pages of each sequence (the scratch page past its own)
    decode: bool             # every sequence computes exactly its last token
    # the window pool's (``ModelRunner.num_window_blocks``): slots [T] and pages [S, width] (its scratch page
    # for released ones); None without one
    window_slots: np.ndarray | None = None
    window_table: np.ndarray | None = None
    q_start: np.ndarray | None = None  # context parallel, per part: [S] first new token's position in the part
    # prompt log-probabilities (SamplingParams.prompt_logprobs): rows whose next token is a prompt token
    # still to score, that token, the most alternatives any of them reports, and (sequence index, first
    # prompt token scored, count) of each sequence's run of rows, in row order
    prompt_rows: list[int] = dataclasses.field(default_factory=list)
    prompt_targets: list[int] = dataclasses.field(default_factory=list)
    prompt_top: int = 0
    prompt_spans: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)
    # embedding requests (SamplingParams.pooling): the rows each pools ("last": its last prompt token's at the
    # step that computes it; "mean": every row of its chunk), the index among this step's pooling sequences
    # of each row's, and how many pool
    pool_rows: list[int] = dataclasses.field(default_factory=list)
    pool_index: list[int] = dataclasses.field(default_factory=list)
    pool_count: int = 0
    lora: np.ndarray | None = None  # [T] int64 each token's LoRA adapter slot (-1: none); None: no token has one
    lora_order: np.ndarray | None = None  # [T] int64 the tokens sorted by slot, above SORT_FROM tokens


@dataclasses.dataclass(eq=False)
class PromptScores:
    """Log-probabilities of prompt tokens computed in a step (device tensors, one row per
    ``StepPlan.prompt_rows``): ``chosen`` [R] of each row's next prompt token and ``rank`` [R] its rank
    there (1: the most likely), ``top_v`` / ``top_i`` [R, k] the k most likely tokens there (k =
    ``StepPlan.prompt_top``); ``spans`` as the plan's."""

    chosen: torch.Tensor
    rank: torch.Tensor
    top_v: torch.Tensor
    top_i: torch.Tensor
    spans: list[tuple[int, int, int]]


@dataclasses.dataclass(eq=False)
class WindowPlan:
    """A greedy window of ``k`` decode steps (see :meth:`ModelRunner.start_window`); ``inputs`` and
    ``stops`` only when it starts from the host's state (``ahead == 0``), else the device holds them."""

    k: int
    ahead: int
    first: list[int]         # position of each row's first input
    table: np.ndarray        # [S, width] int32
    inputs: StepPlan | None = None
    stops: list[int] | None = None
    window_table: np.ndarray | None = None  # the window pool's


@dataclasses.dataclass(eq=False)
class LoRAOps:
    """The LoRA slots' loads and clears rank 0 made since its last plan (``LoRAStack.take_ops``), sent to the other
    ranks ahead of the plan that first reads them."""

    ops: list[tuple]


class ModelRunner:
    """Runs ``model`` over scheduled batches.

    The KV cache is one tensor [layers, 2, num_blocks + 1, block_size, Hkv, D]; the extra last page is
    scratch for skipped slots (never handed out by the block manager). With ``num_window_blocks`` > 0 the
    layers with a sliding window (:func:`window_layers`) keep theirs in a second tensor, ``window_cache``
    [their count, 2, num_window_blocks + 1, ...], addressed by the sequences' window tables (the block
    manager's ``window_pool``), and ``kv_cache`` holds the other layers. ``kv_cache_dtype``: the caches'
    dtype (default: the model's; float8_e4m3fn stores keys and values saturated, scale 1).
    """

    def __init__(self, model: LlamaModel, *, num_blocks: int, block_size: int, max_model_len: int,
                 max_num_seqs: int, cuda_graphs: bool, cp_rank: int = 0, cp_world: int = 1,
                 num_window_blocks: int = 0, kv_cache_dtype: torch.dtype | None = None):
        cfg = model.config
        self.model = model
        self.device = model.device
        self.block_size = block_size
        self.num_blocks = num_blocks
        windowed = set(window_layers(model)) if num_window_blocks else set()
        if num_window_blocks and (not windowed or cp_world > 1):
            raise ValueError(f"num_window_blocks={num_window_blocks} needs layers with a sliding window and one "
                             f"context-parallel rank")
        self.num_window_blocks = num_window_blocks
        self.max_model_len = max_model_len
        self.max_blocks_per_seq = -(-max_model_len // block_size)
        # context parallel: plans hold global page ids (rank * num_blocks + page); this rank runs its view
        # of each (:meth:`localize`)
        self.cp_rank, self.cp_world = cp_rank, cp_world
        # context parallel steps with prefill run per part where the attention can (else a row per token)
        self.cp_parts = cp_world > 1 and getattr(model.options.context_parallel, "prefill_parts", False)
        page = (block_size, model.num_kv_heads, cfg.head_dim)
        kv_dtype = kv_cache_dtype or model.dtype
        self.kv_cache = torch.zeros(cfg.num_hidden_layers - len(windowed), 2, num_blocks + 1, *page,
                                    dtype=kv_dtype, device=self.device)
        self.window_cache = torch.zeros(len(windowed), 2, num_window_blocks + 1, *page, dtype=kv_dtype,
                                        device=self.device) if windowed else None
        full, win = iter(self.kv_cache), iter(() if self.window_cache is None else self.window_cache)
        self.kv_caches = []
        for i in range(cfg.num_hidden_layers):
            layer = next(win) if i in windowed else next(full)
            self.kv_caches.append((layer[0], layer[1]))
        self.greedy_advance = greedy_advance if model.options.op_backend == "triton" else reference.greedy_advance
        self.token_logprobs = token_logprobs if model.options.op_backend == "triton" else _reference_token_logprobs
        self.max_num_seqs = max_num_seqs
        self.graphs: dict[int, DecodeGraph] = {}
        self._buckets: tuple[int, ...] = ()  # sorted keys of graphs
        self._eager: dict[int, DecodeBuffers] = {}  # window buffers by batch size, without CUDA graphs
        # tensor parallel: ``publish(plan)`` sends each plan to the other ranks before it runs here, and
        # ``wait(event)`` waits for the device (bounded, watching the other ranks); None: plain waits
        self.publish: Callable[[StepPlan | WindowPlan], None] | None = None
        self.wait: Callable[[torch.cuda.Event, int], None] | None = None
        self.window_end: Callable[[int], None] | None = None  # queued behind each window (its flip)
        self.torn = False
        if cuda_graphs and self.device.type == "cuda":
            self.capture(max_num_seqs)

    # -- plans -------------------------------------------------------------------------------------------
    def plan_step(self, batch: ScheduledBatch) -> StepPlan:
        """The host inputs of one step of ``batch``."""
        bs = self.block_size
        ids, pos, slots, q_lens, seq_lens, logit_rows, wslots = [], [], [], [], [], [], []
        windowed = self.num_window_blocks > 0
        prompt_rows, prompt_targets, prompt_spans, prompt_top = [], [], [], 0
        pool_rows, pool_index, pool_count = [], [], 0
        lora = [] if self.model.lora is not None else None
        for i, (seq, n) in enumerate(zip(batch.seqs, batch.num_new)):
            start = seq.num_computed
            if seq.scores_prompt:  # token t's log-probability is at position t - 1's row
                first, end = max(start + 1, seq.prompt_scored), min(start + n + 1, seq.prompt_len)
                if first < end:
                    prompt_rows += range(len(ids) + first - 1 - start, len(ids) + end - 1 - start)
                    prompt_targets += seq.token_ids[first:end]
                    prompt_spans.append((i, first, end - first))
                    prompt_top = max(prompt_top, seq.params.prompt_logprobs)
            ids += seq.token_ids[start:start + n]
            ids += seq.draft  # speculative: the draft after the last token, all of whose rows get logits
            positions = range(start, start + n)
            pos += positions
            slots += [seq.block_table[p // bs] * bs + p % bs for p in positions]
            if windowed:
                wslots += [seq.window_table[p // bs] * bs + p % bs for p in positions]
            q_lens.append(n)
            seq_lens.append(start + n)
            if lora is not None:  # (n counts a draft's tokens)
                lora += [-1 if seq.lora_slot is None else seq.lora_slot] * n
            if seq.params.pooling is not None:  # an embedding: pooled rows, no logits
                rows = range(len(ids) - n, len(ids)) if seq.params.pooling == "mean" else (
                    [len(ids) - 1] if start + n == seq.num_tokens else [])
                pool_rows += rows
                pool_index += [pool_count] * len(rows)
                pool_count += 1
            elif seq.draft:
                logit_rows += range(len(ids) - n, len(ids))
            elif start + n == seq.num_tokens and seq.params.max_tokens:  # (max_tokens 0: the prompt alone)
                logit_rows.append(len(ids) - 1)
        plan = StepPlan(np.array(ids, dtype=np.int64), np.array(pos, dtype=np.int64),
                        np.array(slots, dtype=np.int64), q_lens, seq_lens, logit_rows, self._table(batch),
                        batch.is_decode and not pool_count,
                        window_slots=np.array(wslots, dtype=np.int64) if windowed else None,
                        window_table=self._table(batch, window=True) if windowed else None,
                        prompt_rows=prompt_rows, prompt_targets=prompt_targets,
                        prompt_top=prompt_top, prompt_spans=prompt_spans, pool_rows=pool_rows, pool_index=pool_index,
                        pool_count=pool_count)
        if lora is not None and max(lora, default=-1) >= 0:
            plan.lora = np.array(lora, dtype=np.int64)
            if len(lora) > SORT_FROM:
                plan.lora_order = np.argsort(plan.lora, kind="stable")
        if any(seq.draft for seq in batch.seqs) and self.cp_world == 1 and not pool_count and \
                all(seq.num_computed + 1 == seq.num_tokens for seq in batch.seqs):
            return self._rows_per_token(plan)
        return plan

    @staticmethod
    def _rows_per_token(plan: StepPlan) -> StepPlan:
        """A step of decodes and drafts as a decode step of a row per token (its CUDA graph): the row of a
        token at position p reads its sequence's pages up to p, the K/V of the draft tokens before it written
        by the same step (every layer writes its rows' K/V before it attends); every row gets logits."""
        seq_of = np.repeat(np.arange(len(plan.q_lens)), plan.q_lens)
        rows = len(plan.ids)
        return dataclasses.replace(plan, q_lens=[1] * rows, seq_lens=(plan.pos + 1).tolist(), table=plan.table[seq_of],
                                   window_table=None if plan.window_table is None else plan.window_table[seq_of],
                                   decode=True, logit_rows=list(range(rows)))

    def _table(self, batch: ScheduledBatch, window: bool = False) -> np.ndarray:
        """[S, longest table] int32 page ids of the batch; the scratch page past each sequence's own: a
        slot computed past a sequence's pages (a bug) writes scratch, not someone's KV. ``window``: the
        window tables, their released pages (-1) pointed at the window pool's scratch page."""
        tables = [seq.window_table if window else seq.block_table for seq in batch.seqs]
        width = max(map(len, tables), default=0)
        # context parallel: past every rank's pages, so that no rank takes it for one of its own
        scratch = self.num_window_blocks if window else self.num_blocks * self.cp_world
        table = np.full((len(batch.seqs), max(width, 1)), scratch, dtype=np.int32)
        for i, pages in enumerate(tables):
            table[i, :len(pages)] = pages
        if window:
            table[table < 0] = scratch
        return table

    def _fill_block_table(self, table: np.ndarray, dest: np.ndarray, scratch: int | None = None) -> np.ndarray:
        """Write ``table`` [S, width] into ``dest`` [rows >= S, max_blocks_per_seq], scratch elsewhere (the
        main pool's scratch page unless ``scratch`` is given)."""
        dest.fill(self.num_blocks if scratch is None else scratch)
        dest[:table.shape[0], :table.shape[1]] = table
        return dest

    def localize(self, plan: StepPlan) -> StepPlan:
        """Context parallel: this rank's view of a step whose plan holds global page ids. A sequence's pages
        on this rank are a contiguous, page-aligned run of its logical pages (the block manager's parts);
        each token's K/V slot is here, or -1 where another rank stores it.

        Decode steps (and every step when the attention cannot run per part): every token becomes a row of
        its own (a query of :class:`~tritium.models.attention.DistributedDecodeAttention`): its sequence's
        pages on this rank (local ids) and how many of the keys it sees (positions ``<= pos``) this rank
        holds. Steps with prefill, per part: one row per sequence, its pages here, the keys of the part up
        to its last new token, and ``q_start``, its first new token's position relative to the part."""
        r, nb, bs = self.cp_rank, self.num_blocks, self.block_size
        table = plan.table.astype(np.int64)
        mine = table // nb == r                                  # [S, W]
        count = mine.sum(axis=1)                                 # this rank's pages of each sequence
        first = np.argmax(mine, axis=1)                          # logical index of the first of them
        local = np.full((len(plan.q_lens), max(int(count.max(initial=0)), 1)), nb, dtype=np.int32)
        for s, n in enumerate(count):
            local[s, :n] = table[s, mine[s]] - r * nb
        page = plan.slots // bs
        slots = np.where(page // nb == r, plan.slots - r * nb * bs, -1)
        if not plan.decode and self.cp_parts:
            ends = np.cumsum(plan.q_lens)
            start = first * bs                                   # the part's first key position
            lens = np.clip(plan.pos[ends - 1] + 1 - start, 0, count * bs)
            q_start = plan.pos[ends - np.asarray(plan.q_lens)] - start
            return dataclasses.replace(plan, slots=slots, seq_lens=lens.tolist(), table=local,
                                       q_start=q_start.astype(np.int32))
        seq_of = np.repeat(np.arange(len(plan.q_lens)), plan.q_lens)  # [T]
        lens = np.clip(plan.pos + 1 - first[seq_of] * bs, 0, count[seq_of] * bs)
        # a row per token, in token order: the rows of the logits and of prompt scores stay the same
        return dataclasses.replace(plan, slots=slots, q_lens=[1] * len(plan.ids), seq_lens=lens.tolist(),
                                   table=local[seq_of])

    def execute(self, plan: StepPlan | WindowPlan | LoRAOps):
        """Run a plan made here or by the rank that schedules: a step (-> its logits) or a window; or copy rank 0's
        LoRA slot changes into this rank's slots (-> None)."""
        if isinstance(plan, LoRAOps):
            return self.model.lora.replay(plan.ops)
        return self._window(plan) if isinstance(plan, WindowPlan) else self._step(plan)

    def _share(self, plan, run):
        """Publish ``plan`` to the other ranks, then run it here. ``torn``: an error (or an interrupt)
        escaped between the two, so the other ranks may be inside collectives this rank never launched."""
        if self.publish is None:
            return run(plan)
        self.torn = True  # before: an interrupt inside publish may land after a worker has the plan
        lora_ops = self.model.lora.take_ops() if self.model.lora is not None else None
        if lora_ops:  # the adapters rank 0 put in its slots since the last plan: into the other ranks' first
            self.publish(LoRAOps(lora_ops))
        self.publish(plan)
        out = run(plan)
        self.torn = False
        return out

    # -- execution -----------------------------------------------------------------------------------------
    def run(self, batch: ScheduledBatch) -> tuple[torch.Tensor, PromptScores | None, torch.Tensor | None]:
        """Logits [S', vocab] fp32 of the sequences of ``batch`` that finished their tokens, in order (a
        sequence with a draft: one row per token it computed; embedding requests have none), the
        log-probabilities of the prompt tokens this step scores (None: none), and the embedding requests' pooled
        rows [P, hidden] fp32, one per such sequence in order ("last": its last prompt token's row where this step
        computes it, else zeros; "mean": the sum of its rows here), None without any."""
        return self._share(self.plan_step(batch), self._step)

    def _step(self, plan: StepPlan) -> tuple[torch.Tensor, PromptScores | None, torch.Tensor | None]:
        if self.cp_world > 1:
            plan = self.localize(plan)
        S = len(plan.q_lens)
        bucket = self.graph_bucket(S) if self.graphs else None
        if bucket is not None and plan.decode:  # a decode step scores no prompt token
            entry = self.graphs[bucket]
            self._stage(entry.bufs, plan.table, plan, window_table=plan.window_table)
            graph, logits = entry.pick()
            graph.replay()
            return logits[:S], None, None
        dev = self.device
        cu = np.zeros(S + 1, dtype=np.int32)
        np.cumsum(plan.q_lens, out=cu[1:])
        # context parallel: a row per token, as wide as this rank's longest part
        width = plan.table.shape[1] if self.cp_world > 1 else self.max_blocks_per_seq
        table = self._fill_block_table(plan.table, np.empty((S, width), dtype=np.int32))

        def up(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(a).to(dev, non_blocking=True)

        meta = AttentionMetadata(
            slot_mapping=up(plan.slots), block_table=up(table), seq_lens=up(np.array(plan.seq_lens, dtype=np.int32)),
            cu_seqlens_q=up(cu), max_seqlen_q=max(plan.q_lens), max_seqlen_k=max(plan.seq_lens),
            q_lens_host=plan.q_lens, seq_lens_host=plan.seq_lens,
            q_start_pos=None if plan.q_start is None else up(plan.q_start))
        if plan.window_table is not None:
            wtable = self._fill_block_table(plan.window_table, np.empty((S, width), dtype=np.int32),
                                            self.num_window_blocks)
            meta.window = dataclasses.replace(meta, slot_mapping=up(plan.window_slots), block_table=up(wtable))
        hidden = self.model.forward(up(plan.ids), up(plan.pos), meta, self.kv_caches,
                                    lora_slots=None if plan.lora is None else up(plan.lora),
                                    lora_order=None if plan.lora_order is None else up(plan.lora_order))
        scores = self._score_prompt(hidden, plan, up) if plan.prompt_rows else None
        pooled = None
        if plan.pool_count:
            pooled = hidden.new_zeros(plan.pool_count, hidden.shape[-1], dtype=torch.float32)
            if plan.pool_rows:
                pooled.index_add_(0, up(np.array(plan.pool_index, dtype=np.int64)),
                                  hidden[up(np.array(plan.pool_rows, dtype=np.int64))].float())
        if not plan.logit_rows:
            return hidden.new_empty(0, self.model.config.vocab_size, dtype=torch.float32), scores, pooled
        # NOTE: built on the host and copied without blocking: torch.tensor(..., device=cuda) would wait
        # for the whole forward pass before the LM head could even be queued.
        return self.model.compute_logits(hidden[up(np.array(plan.logit_rows, dtype=np.int64))]), scores, pooled

    def _score_prompt(self, hidden: torch.Tensor, plan: StepPlan, up) -> PromptScores:
        """The LM head over ``plan.prompt_rows`` in chunks of :data:`PROMPT_LOGITS_CHUNK` rows (the full
        logits of a long prompt would not fit), each reduced at once by ``token_logprobs`` (one pass over the
        logits as the head computed them: the target's log-probability, the log-sum-exp, the most likely
        token); a top k > 1 is a ``topk`` of the same logits."""
        R, k = len(plan.prompt_rows), plan.prompt_top
        rows = up(np.array(plan.prompt_rows, dtype=np.int64))
        targets = up(np.array(plan.prompt_targets, dtype=np.int64))
        chosen, lse, best_v = torch.empty(3, R, dtype=torch.float32, device=hidden.device)
        best_i, rank = torch.empty(2, R, dtype=torch.int64, device=hidden.device)
        top_v, top_i = [], []
        for lo in range(0, R, PROMPT_LOGITS_CHUNK):
            part = slice(lo, min(lo + PROMPT_LOGITS_CHUNK, R))
            logits = self.model.compute_logits(hidden[rows[part]], as_computed=True)            # [c, V]
            self.token_logprobs(logits, targets[part],
                                (chosen[part], lse[part], best_v[part], best_i[part], rank[part]))
            if k > 1:
                v, i = logits.topk(k, dim=-1)
                top_v.append(v.float() - lse[part, None])
                top_i.append(i)
        if k > 1:
            return PromptScores(chosen, rank, torch.cat(top_v), torch.cat(top_i), plan.prompt_spans)
        return PromptScores(chosen, rank, best_v[:, None][:, :k], best_i[:, None][:, :k], plan.prompt_spans)

    def graph_bucket(self, batch_size: int) -> int | None:
        for b in self._buckets:
            if b >= batch_size:
                return b
        return None

    def _buffers(self, rows: int) -> DecodeBuffers:
        """Static decode inputs of ``rows`` rows, their host staging, and the window state."""
        dev = self.device
        cuda = dev.type == "cuda"

        def pinned(t: torch.Tensor) -> torch.Tensor:
            # pinned staging: each step's inputs go up as plain async H2D copies, no temporaries
            return t.pin_memory() if cuda else t

        windowed = self.num_window_blocks > 0
        host = HostStaging(
            i64=pinned(torch.empty(7, rows, dtype=torch.int64)),
            seq_lens=pinned(torch.empty(rows, dtype=torch.int32)),
            block_table=pinned(torch.zeros(rows, self.max_blocks_per_seq, dtype=torch.int32)),
            tokens=tuple(pinned(torch.empty(MAX_DECODE_STEPS, rows, dtype=torch.int64)) for _ in range(2)),
            window_table=pinned(torch.zeros(rows, self.max_blocks_per_seq, dtype=torch.int32)) if windowed else None)
        return DecodeBuffers(
            rows=rows,
            ids=torch.zeros(rows, dtype=torch.int64, device=dev),
            pos=torch.zeros(rows, dtype=torch.int64, device=dev),
            slots=torch.full((rows,), -1, dtype=torch.int64, device=dev),
            block_table=torch.full((rows, self.max_blocks_per_seq), self.num_blocks, dtype=torch.int32, device=dev),
            seq_lens=torch.ones(rows, dtype=torch.int32, device=dev),
            cu_seqlens_q=torch.arange(rows + 1, dtype=torch.int32, device=dev),
            hist=torch.zeros(MAX_DECODE_STEPS, rows, dtype=torch.int64, device=dev),
            stop=torch.zeros(rows, dtype=torch.int64, device=dev),
            scratch=greedy_scratch(rows, dev) if self.greedy_advance is greedy_advance else None,
            host=host,
            staged=torch.cuda.Event() if cuda else None,
            window_slots=torch.full((rows,), -1, dtype=torch.int64, device=dev) if windowed else None,
            window_table=torch.full((rows, self.max_blocks_per_seq), self.num_window_blocks, dtype=torch.int32,
                                    device=dev) if windowed else None,
            lora=torch.full((rows,), -1, dtype=torch.int64, device=dev) if self.model.lora is not None else None,
            lora_order=torch.arange(rows, device=dev) if self.model.lora is not None and rows > SORT_FROM else None,
            done=(torch.cuda.Event(), torch.cuda.Event()) if cuda else (None, None))

    def _meta(self, bufs: DecodeBuffers, max_seqlen_k: int) -> AttentionMetadata:
        meta = AttentionMetadata(bufs.slots, bufs.block_table, bufs.seq_lens, bufs.cu_seqlens_q,
                                 max_seqlen_q=1, max_seqlen_k=max_seqlen_k)
        if bufs.window_table is not None:
            meta.window = dataclasses.replace(meta, slot_mapping=bufs.window_slots, block_table=bufs.window_table)
        return meta

    def _greedy_step(self, bufs: DecodeBuffers, meta: AttentionMetadata, plain: bool = False) -> torch.Tensor:
        """One decode step on ``bufs`` ending in greedy_advance; returns the logits. ``plain``: without the rows'
        LoRA adapters (none has one)."""
        lora = bufs.lora is not None and not plain
        hidden = self.model.forward(bufs.ids, bufs.pos, meta, self.kv_caches, lora_slots=bufs.lora if lora else None,
                                    lora_order=bufs.lora_order if lora else None)
        logits = self.model.compute_logits(hidden)
        self.greedy_advance(logits, bufs.hist, bufs.ids, bufs.pos, bufs.seq_lens, bufs.slots, bufs.stop,
                            bufs.block_table, self.block_size, bufs.scratch, bufs.window_slots, bufs.window_table)
        return logits

    def capture(self, max_num_seqs: int | None = None) -> None:
        """Capture one decode step per bucket size <= max_num_seqs (default: the runner's; largest first, one
        memory pool), replacing graphs captured before (after the model's options changed, say).

        NOTE: one graph of a whole window (decode_steps steps, no launch boundary between them) was tried
        at batch <= 4: within the noise of the H100 and H200 batch-1 step (bench/NOTES.md, session 5).

        A step's graph ends in greedy_advance: a plain replay gives the logits (the step's inputs are
        staged again before the next one), a replay in a window feeds the next step on the device.
        """
        max_num_seqs = self.max_num_seqs if max_num_seqs is None else max_num_seqs
        self.graphs.clear()
        buckets = [b for b in GRAPH_BUCKETS if b <= max_num_seqs]
        if max_num_seqs not in buckets and max_num_seqs < GRAPH_BUCKETS[-1]:
            buckets.append(max_num_seqs)
        pool = None
        for b in sorted(buckets, reverse=True):
            self.graphs[b] = self._capture_one(b, pool)
            pool = self.graphs[b].graph.pool()
        torch.cuda.synchronize()
        self._buckets = tuple(sorted(self.graphs))
        log.info("captured decode CUDA graphs for batch sizes %s", sorted(self.graphs))

    def settle_linears(self, ms: tuple[int, ...], rounds: int = 5, replays: int = 20) -> list[dict]:
        """Where ``LinearDispatch.tune`` put a layer projection on cuBLAS or on the skinny GEMM at M rows (M in
        ``ms``, each with a graph of its own), time the decode graph of M rows as tuned and with the other kind
        in their place, in ``rounds`` interleaved rounds of ``replays`` replays; keep the fastest (medians).
        Variants: "gemv", every cuBLAS projection on its fastest GEMV or skinny GEMM; "no skinny", every skinny
        projection on the fastest other kind timed (a GEMV, whose fusions then come back, or cuBLAS). Timed one
        at a time, a kernel can win a shape by a percent that the chain of PDL launches around a GEMV gives back
        (bench/NOTES.md, engine decode chain). One rank only: ranks deciding apart would capture different
        graphs. Returns the rows it adds to ``model.linear.chain_report``."""
        linear = self.model.linear
        shapes = self.model.projection_shapes()
        rows = []
        for m in ms:
            switches = {"gemv": linear.cublas_alternatives(m, shapes),
                        "no skinny": linear.skinny_alternatives(m, shapes)}
            switches = {label: switch for label, switch in switches.items() if switch}
            if m not in self.graphs or not switches:
                continue
            tuned = {k: linear.choices.get(k) for switch in switches.values() for k in switch}
            variants = {"as tuned": tuned, **{label: {**tuned, **switch} for label, switch in switches.items()}}
            graphs = {}
            for label, choice in variants.items():
                linear.choices.update(choice)
                graphs[label] = self._capture_one(m, None)
            times: dict[str, list[float]] = {label: [] for label in variants}
            for r in range(rounds):
                for label in (list(variants) if r % 2 == 0 else list(variants)[::-1]):
                    times[label].append(replay_ms(graphs[label].pick()[0], replays))
            med = {label: sorted(t)[len(t) // 2] for label, t in times.items()}
            keep = min(med, key=med.get)
            linear.choices.update(variants[keep])
            row = {"m": m, "switched": {label: [list(k[1:]) for k in switch] for label, switch in switches.items()},
                   "kept": keep, "graph_ms": {label: round(v, 4) for label, v in med.items()}}
            rows.append(row)
            log.info("decode step of %d rows: %s; kept %s", m,
                     ", ".join(f"{label} {v:.3f} ms" + (f" ({len(switches[label])} switched)" if label in switches
                                                         else "") for label, v in med.items()), keep)
            del graphs
        if rows:
            self.capture()
        linear.chain_report.extend(rows)
        return rows

    def _capture_one(self, b: int, pool) -> DecodeGraph:
        """A decode step of ``b`` rows on buffers of its own, captured (in memory ``pool``, None: a new one)."""
        bufs = self._buffers(b)
        meta = self._meta(bufs, self.max_model_len)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            # warm up: compile Triton kernels, settle allocations (every slot is -1: greedy_advance leaves
            # the inputs as they are)
            for _ in range(2):
                self._greedy_step(bufs, meta)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            bufs.logits = self._greedy_step(bufs, meta)
        entry = DecodeGraph(graph, bufs)
        if bufs.lora is not None:  # serving LoRA adapters: the step of no adapter too, in the same memory pool
            with torch.cuda.stream(stream):
                self._greedy_step(bufs, meta, plain=True)  # compiles the fused kernels the adapters' path skips
            torch.cuda.current_stream().wait_stream(stream)
            entry.plain = torch.cuda.CUDAGraph()
            with torch.cuda.graph(entry.plain, pool=graph.pool()):
                entry.plain_logits = self._greedy_step(bufs, meta, plain=True)
        return entry

    def release_graphs(self) -> None:
        """Drop the captured decode graphs (their memory pool goes with them) after the device finished
        them. Done before a tensor-parallel engine tears its process groups down: NCCL's teardown with
        graphs that captured its collectives still alive is known to hang (pytorch/pytorch#115388)."""
        if self.graphs:
            torch.cuda.synchronize(self.device)
            self.graphs.clear()
            self._buckets = ()

    def _stage(self, bufs: DecodeBuffers, table: np.ndarray, inputs: StepPlan | None = None,
               stops: list[int] | None = None, window_table: np.ndarray | None = None) -> None:
        """Copy a decode batch's inputs into ``bufs`` (padded rows: slot -1, length 1; ``stops``: each row's
        last token position, none given: 0). Without ``inputs`` (a continued window, the device ahead of
        the host), only the block tables: the device already holds the other inputs."""
        host = bufs.host
        # NOTE: the previous copies out of the pinned buffers must be done before they are rewritten: they
        # ran at the start of the window in flight, so this wait is normally over at once.
        if bufs.staged is not None:
            bufs.staged.synchronize()
        self._fill_block_table(table, host.block_table_np)
        windowed = bufs.window_table is not None
        if windowed:
            self._fill_block_table(window_table, host.window_table_np, self.num_window_blocks)
        if inputs is not None:
            n = len(inputs.q_lens)
            i64 = host.i64_np
            i64[0, :n], i64[1, :n], i64[2, :n] = inputs.ids, inputs.pos, inputs.slots
            i64[3, :n] = 0 if stops is None else stops
            i64[4, :n] = inputs.window_slots if windowed else -1
            i64[5, :n] = -1 if inputs.lora is None else inputs.lora
            bufs.plain = inputs.lora is None
            i64[0:2, n:] = 0
            i64[2, n:] = -1                      # padded slots write nowhere
            i64[3, n:] = 0
            i64[4, n:] = -1
            i64[5, n:] = -1
            host.seq_lens_np[:n] = inputs.seq_lens
            host.seq_lens_np[n:] = 1
            bufs.ids.copy_(host.i64[0], non_blocking=True)
            bufs.pos.copy_(host.i64[1], non_blocking=True)
            bufs.slots.copy_(host.i64[2], non_blocking=True)
            bufs.stop.copy_(host.i64[3], non_blocking=True)
            bufs.seq_lens.copy_(host.seq_lens, non_blocking=True)
            if windowed:
                bufs.window_slots.copy_(host.i64[4], non_blocking=True)
            if bufs.lora is not None and not bufs.plain:
                bufs.lora.copy_(host.i64[5], non_blocking=True)
                if bufs.lora_order is not None:  # every row, padded ones (slot -1) first
                    i64[6] = np.argsort(i64[5], kind="stable")
                    bufs.lora_order.copy_(host.i64[6], non_blocking=True)
        bufs.block_table.copy_(host.block_table, non_blocking=True)
        if windowed:
            bufs.window_table.copy_(host.window_table, non_blocking=True)
        if bufs.staged is not None:
            bufs.staged.record()

    # -- greedy windows ------------------------------------------------------------------------------------
    def window_buffers(self, n: int) -> DecodeBuffers:
        """Buffers a greedy window of ``n`` sequences runs on: its graph bucket's, or (no graphs) its own."""
        bucket = self.graph_bucket(n) if self.graphs else None
        if bucket is not None:
            return self.graphs[bucket].bufs
        if n not in self._eager:
            self._eager[n] = self._buffers(n)
        return self._eager[n]

    def start_window(self, batch: ScheduledBatch, k: int, stops: list[int]) -> "Window":
        """Queue ``k`` greedy decode steps of ``batch`` from the host's state of its sequences; row i stops
        (no more cache writes or tokens) once it has sampled the token at position ``stops[i]``.

        The caller guarantees a decode batch, 1 <= k <= MAX_DECODE_STEPS, and pages in every block table
        for the positions each row computes (and the one after them, to continue the window later); it
        owns what to keep (a sequence that stops on EOS or a stop string inside the window drops its later
        tokens; their cache writes land in its own pages, freed with it, before any later step can reuse
        them).
        """
        return self._launch(batch, k, 0, stops)

    def continue_window(self, batch: ScheduledBatch, k: int, ahead: int) -> "Window":
        """Queue ``k`` more steps of the window in flight, ``ahead`` steps past the host's state (the
        device holds the inputs and stops); the block tables are sent again."""
        return self._launch(batch, k, ahead, None)

    def _launch(self, batch: ScheduledBatch, k: int, ahead: int, stops: list[int] | None) -> "Window":
        if not 1 <= k <= MAX_DECODE_STEPS:
            raise ValueError(f"k must be in [1, {MAX_DECODE_STEPS}], got {k}")
        first = [seq.num_computed + ahead for seq in batch.seqs]  # position of each row's first input
        plan = WindowPlan(k, ahead, first, self._table(batch), self.plan_step(batch) if ahead == 0 else None,
                          stops if ahead == 0 else None,
                          self._table(batch, window=True) if self.num_window_blocks else None)
        return self._share(plan, self._window)

    def _window(self, plan: WindowPlan) -> "Window":
        n, k = len(plan.first), plan.k
        bufs = self.window_buffers(n)
        self._stage(bufs, plan.table, plan.inputs, plan.stops, plan.window_table)
        entry = self.graphs.get(bufs.rows)
        graph = entry.pick()[0] if entry is not None and entry.bufs is bufs else None
        if graph is None:
            for j in range(k):  # step j's longest sequence holds max(first) + j + 1 tokens
                self._greedy_step(bufs, self._meta(bufs, max(plan.first) + j + 1), plain=bufs.plain)
        else:
            for _ in range(k):
                graph.replay()
        # two windows can be in flight: alternate token buffers and their events
        flip = bufs.flip
        bufs.flip ^= 1
        dest, done = bufs.host.tokens[flip], bufs.done[flip]
        dest.copy_(bufs.hist, non_blocking=True)
        if self.window_end is not None:
            self.window_end(flip)
        if done is not None:
            done.record()
        wait = None if self.wait is None else (lambda event, f=flip: self.wait(event, f))
        return Window(plan.first, k, dest, done, wait)


class Window:
    """Greedy decode steps in flight; ``tokens()`` waits for them (and nothing queued after them).
    ``first``: position of each row's first input."""

    def __init__(self, first: list[int], k: int, dest: torch.Tensor, done, wait=None):
        self.first, self.k, self._dest, self._done, self._wait = first, k, dest, done, wait

    def tokens(self) -> list[list[int]]:
        """tokens[i][j]: the token row i sampled at step j (its position is first[i] + j + 1; past the row's
        stop, whatever the ring held)."""
        if self._done is not None:
            (self._wait or torch.cuda.Event.synchronize)(self._done)
        ring = self._dest.numpy()
        h = ring.shape[0]
        return [[int(ring[(p + 1 + j) % h, i]) for j in range(self.k)] for i, p in enumerate(self.first)]


def replay_ms(graph: torch.cuda.CUDAGraph, replays: int) -> float:
    """Milliseconds a replay of ``graph``: ``replays`` back to back after one, between two events."""
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / replays


def _reference_token_logprobs(logits: torch.Tensor, targets: torch.Tensor, out: tuple[torch.Tensor, ...]) -> None:
    """:func:`tritium.ops.reference.token_logprobs` with the Triton twin's signature (the torch op backend)."""
    for dest, value in zip(out, reference.token_logprobs(logits, targets)):
        dest.copy_(value)
