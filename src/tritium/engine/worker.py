"""A rank > 0 of a tensor-parallel engine on one host: ``python -m tritium.engine.worker``, started by rank 0
(:class:`tritium.engine.parallel.WorkerPool`) with its spec, a pickled dict, on stdin.

The worker joins torch.distributed through rank 0's store, builds its shard of the model, its KV cache
and CUDA graphs exactly as rank 0 does (:func:`tritium.engine.llm_engine.build_rank`), then runs rank 0's
plans until told to exit. An error is reported in the store for rank 0 to show before the worker exits
with code 1; the worker exits too when rank 0's process is gone.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import pickle
import sys
import threading
import time
import traceback

import torch
import torch.distributed as dist

from tritium.engine import parallel
from tritium.engine.llm_engine import build_rank, load_checkpoint
from tritium.shmem.launch import _run_rank_init


def _watch_parent(pid: int) -> None:
    """Exit when the process that started this one is gone (killed: nobody will stop us)."""
    def run():
        while True:
            if os.getppid() != pid:
                os._exit(1)
            time.sleep(0.5)

    threading.Thread(target=run, name="tritium-parent-watch", daemon=True).start()


def weights_of(source, device):
    """(name, tensor) pairs of a model source: a checkpoint path, an object with ``iter(device)``, or the
    pairs themselves."""
    if isinstance(source, str):
        return load_checkpoint(source)[2]
    if hasattr(source, "iter"):
        return source.iter(device)
    return source


def main() -> None:
    spec = pickle.load(sys.stdin.buffer)
    rank, world_size = spec["rank"], spec["world_size"]
    _watch_parent(spec["parent"])
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size)})

    cfg = spec["config"]
    store = None
    try:
        _run_rank_init()
        device = spec["devices"][rank]
        cfg = dataclasses.replace(cfg, device=device)
        if device.type == "cuda":
            torch.cuda.set_device(device)
        else:
            torch.set_num_threads(1)  # ranks share the host's cores
        span = datetime.timedelta(seconds=cfg.parallel_timeout)
        store = dist.TCPStore("127.0.0.1", spec["port"], is_master=False, timeout=span)
        store.set(parallel.READY_KEY.format(rank), "1")
        dist.init_process_group("cpu:gloo,cuda:nccl" if device.type == "cuda" else "gloo", store=store, rank=rank,
                                world_size=world_size, timeout=span)
        tp = parallel.open_rank(cfg, spec["model_config"])
        _, runner, _ = build_rank(spec["model_config"], weights_of(spec["source"], device), cfg, tp)
        while not isinstance(tp.follow(runner), parallel.Shutdown):
            pass  # a Result ends a call of torchrun followers; workers go on until told to exit
        runner.release_graphs()
        tp.close()
        parallel.release_default_group(device)
    except BaseException as e:
        message = f"{type(e).__name__}: {e}\n--- traceback of rank {rank} ---\n{traceback.format_exc()}"
        if store is not None:
            try:
                store.set(parallel._ERROR_KEY.format(rank), message)
            except Exception:
                pass
        print(f"tritium {parallel.role(cfg.context_parallel_size > 1)} rank {rank}: {message}", file=sys.stderr,
              flush=True)
        os._exit(1)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
