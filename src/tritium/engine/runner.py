"""Model runner: owns the KV cache, turns a scheduled batch into tensors, runs the model (eagerly or by
replaying a CUDA graph of a decode step) and returns the logits of the sequences that sample.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from tritium.engine.attention import AttentionMetadata
from tritium.engine.model import LlamaModel
from tritium.engine.scheduler import ScheduledBatch

log = logging.getLogger(__name__)

# Decode batch sizes that get a CUDA graph; a batch runs in the smallest bucket that holds it.
GRAPH_BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256)
# Most greedy decode steps queued back to back between two host syncs (run_greedy_steps).
MAX_DECODE_STEPS = 64


def kv_cache_bytes_per_block(model: LlamaModel, block_size: int) -> int:
    cfg = model.config
    return 2 * cfg.num_hidden_layers * block_size * cfg.num_key_value_heads * cfg.head_dim * model.dtype.itemsize


class ModelRunner:
    """Runs ``model`` over scheduled batches.

    The KV cache is one tensor [layers, 2, num_blocks + 1, block_size, Hkv, D]; the extra last page is
    scratch for skipped slots (never handed out by the block manager).
    """

    def __init__(self, model: LlamaModel, *, num_blocks: int, block_size: int, max_model_len: int,
                 max_num_seqs: int, cuda_graphs: bool):
        cfg = model.config
        self.model = model
        self.device = model.device
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.max_model_len = max_model_len
        self.max_blocks_per_seq = -(-max_model_len // block_size)
        self.kv_cache = torch.zeros(cfg.num_hidden_layers, 2, num_blocks + 1, block_size, cfg.num_key_value_heads,
                                    cfg.head_dim, dtype=model.dtype, device=self.device)
        self.kv_caches = [(self.kv_cache[i, 0], self.kv_cache[i, 1]) for i in range(cfg.num_hidden_layers)]
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, dict]] = {}
        self._buckets: tuple[int, ...] = ()  # sorted keys of graphs
        if cuda_graphs and self.device.type == "cuda":
            self.capture(max_num_seqs)

    # -- inputs --------------------------------------------------------------------------------------------
    def _host_inputs(self, batch: ScheduledBatch):
        bs = self.block_size
        ids, pos, slots, q_lens, seq_lens, logit_rows = [], [], [], [], [], []
        for seq, n in zip(batch.seqs, batch.num_new):
            start = seq.num_computed
            ids += seq.token_ids[start:start + n]
            positions = range(start, start + n)
            pos += positions
            slots += [seq.block_table[p // bs] * bs + p % bs for p in positions]
            q_lens.append(n)
            seq_lens.append(start + n)
            if start + n == seq.num_tokens:
                logit_rows.append(len(ids) - 1)
        return ids, pos, slots, q_lens, seq_lens, logit_rows

    @staticmethod
    def _fill_block_table(batch: ScheduledBatch, table: np.ndarray) -> np.ndarray:
        """Write the batch's page ids into ``table`` [rows >= batch, max_blocks_per_seq], zeros elsewhere."""
        table.fill(0)
        for i, seq in enumerate(batch.seqs):
            table[i, :len(seq.block_table)] = seq.block_table
        return table

    # -- execution -----------------------------------------------------------------------------------------
    def run(self, batch: ScheduledBatch) -> torch.Tensor:
        """Logits [S', vocab] fp32 of the sequences of ``batch`` that finished their tokens, in order."""
        bucket = self.graph_bucket(len(batch.seqs)) if self.graphs else None
        if bucket is not None and batch.is_decode:
            return self._run_graph(batch, bucket)
        ids, pos, slots, q_lens, seq_lens, logit_rows = self._host_inputs(batch)
        dev = self.device
        cu = [0]
        for n in q_lens:
            cu.append(cu[-1] + n)
        table = self._fill_block_table(batch, np.empty((len(batch.seqs), self.max_blocks_per_seq), dtype=np.int32))
        meta = AttentionMetadata(
            slot_mapping=torch.tensor(slots, dtype=torch.int64).to(dev, non_blocking=True),
            block_table=torch.from_numpy(table).to(dev, non_blocking=True),
            seq_lens=torch.tensor(seq_lens, dtype=torch.int32).to(dev, non_blocking=True),
            cu_seqlens_q=torch.tensor(cu, dtype=torch.int32).to(dev, non_blocking=True),
            max_seqlen_q=max(q_lens), max_seqlen_k=max(seq_lens), q_lens_host=q_lens, seq_lens_host=seq_lens)
        hidden = self.model.forward(torch.tensor(ids, dtype=torch.int64).to(dev, non_blocking=True),
                                    torch.tensor(pos, dtype=torch.int64).to(dev, non_blocking=True),
                                    meta, self.kv_caches)
        if not logit_rows:
            return hidden.new_empty(0, self.model.config.vocab_size, dtype=torch.float32)
        # NOTE: built on the host and copied without blocking: torch.tensor(..., device=cuda) would wait
        # for the whole forward pass before the LM head could even be queued.
        rows = torch.tensor(logit_rows, dtype=torch.int64).to(dev, non_blocking=True)
        return self.model.compute_logits(hidden[rows])

    def graph_bucket(self, batch_size: int) -> int | None:
        for b in self._buckets:
            if b >= batch_size:
                return b
        return None

    def capture(self, max_num_seqs: int) -> None:
        """Capture one decode step per bucket size <= max_num_seqs (largest first, one memory pool)."""
        buckets = [b for b in GRAPH_BUCKETS if b <= max_num_seqs]
        if max_num_seqs not in buckets and max_num_seqs < GRAPH_BUCKETS[-1]:
            buckets.append(max_num_seqs)
        dev = self.device
        pool = None
        for b in sorted(buckets, reverse=True):
            bufs = {
                "ids": torch.zeros(b, dtype=torch.int64, device=dev),
                "pos": torch.zeros(b, dtype=torch.int64, device=dev),
                "slots": torch.full((b,), -1, dtype=torch.int64, device=dev),
                "block_table": torch.zeros(b, self.max_blocks_per_seq, dtype=torch.int32, device=dev),
                "seq_lens": torch.ones(b, dtype=torch.int32, device=dev),
                "cu": torch.arange(b + 1, dtype=torch.int32, device=dev),
            }
            # pinned staging: each replay's inputs go up as plain async H2D copies, no temporaries
            host = {"i64": torch.empty(3, b, dtype=torch.int64), "seq_lens": torch.empty(b, dtype=torch.int32),
                    "block_table": torch.zeros(b, self.max_blocks_per_seq, dtype=torch.int32)}
            host = {k: v.pin_memory() for k, v in host.items()}
            meta = AttentionMetadata(bufs["slots"], bufs["block_table"], bufs["seq_lens"], bufs["cu"],
                                     max_seqlen_q=1, max_seqlen_k=self.max_model_len)

            def step():
                hidden = self.model.forward(bufs["ids"], bufs["pos"], meta, self.kv_caches)
                return self.model.compute_logits(hidden)

            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(2):  # warm up: compile Triton kernels, settle allocations
                    step()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                bufs["logits"] = step()
            pool = graph.pool()
            bufs["host"] = host
            bufs["host_np"] = {k: v.numpy() for k, v in host.items()}
            bufs["staged"] = torch.cuda.Event()
            bufs["tok"] = torch.zeros(b, dtype=torch.int64, device=dev)
            bufs["hist"] = torch.zeros(MAX_DECODE_STEPS, b, dtype=torch.int64, device=dev)
            self.graphs[b] = (graph, bufs)
        torch.cuda.synchronize()
        self._buckets = tuple(sorted(self.graphs))
        log.info("captured decode CUDA graphs for batch sizes %s", sorted(self.graphs))

    def _stage(self, batch: ScheduledBatch, bufs: dict) -> None:
        """Copy a decode batch's inputs into a graph's buffers (padded rows: slot -1, length 1)."""
        n = len(batch.seqs)
        ids, pos, slots, _, seq_lens, _ = self._host_inputs(batch)
        host, np_host = bufs["host"], bufs["host_np"]
        # NOTE: the previous step's copies out of the pinned buffers must be done before they are rewritten;
        # the sampler has normally waited for them already, so this wait costs nothing.
        bufs["staged"].synchronize()
        i64 = np_host["i64"]
        i64[0, :n], i64[1, :n], i64[2, :n] = ids, pos, slots
        i64[0:2, n:] = 0
        i64[2, n:] = -1                      # padded slots write nowhere
        np_host["seq_lens"][:n] = seq_lens
        np_host["seq_lens"][n:] = 1
        self._fill_block_table(batch, np_host["block_table"])
        bufs["ids"].copy_(host["i64"][0], non_blocking=True)
        bufs["pos"].copy_(host["i64"][1], non_blocking=True)
        bufs["slots"].copy_(host["i64"][2], non_blocking=True)
        bufs["seq_lens"].copy_(host["seq_lens"], non_blocking=True)
        bufs["block_table"].copy_(host["block_table"], non_blocking=True)
        bufs["staged"].record()

    def _run_graph(self, batch: ScheduledBatch, bucket: int) -> torch.Tensor:
        graph, bufs = self.graphs[bucket]
        self._stage(batch, bufs)
        graph.replay()
        return bufs["logits"][:len(batch.seqs)]

    def run_greedy_steps(self, batch: ScheduledBatch, k: int) -> torch.Tensor:
        """Run ``k`` greedy decode steps of ``batch`` back to back on the GPU, with no host sync between
        them: after each replay the argmax token becomes the next step's input and positions, lengths and
        cache slots advance on the device. Returns the tokens, int64 [k, len(batch.seqs)] on the GPU.

        The caller guarantees a decode batch in a graph bucket, 1 <= k <= MAX_DECODE_STEPS, and pages in
        every block table for ``k`` new tokens; it owns what to keep (a sequence that stops at step j
        discards its later tokens; their cache writes land in its own pages, freed with it).
        """
        from tritium.engine.ops import advance_decode

        n = len(batch.seqs)
        graph, bufs = self.graphs[self.graph_bucket(n)]
        if not 1 <= k <= MAX_DECODE_STEPS:
            raise ValueError(f"k must be in [1, {MAX_DECODE_STEPS}], got {k}")
        self._stage(batch, bufs)
        tok, hist, logits = bufs["tok"][:n], bufs["hist"], bufs["logits"][:n]
        for j in range(k):
            graph.replay()
            torch.argmax(logits, dim=-1, out=tok)
            advance_decode(tok, hist[j], bufs["ids"], bufs["pos"], bufs["seq_lens"], bufs["slots"],
                           bufs["block_table"], self.block_size)
        return hist[:k, :n]
