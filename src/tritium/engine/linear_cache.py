"""On-disk record of what ``linear_backend="auto"`` settled at an engine's start, so that a later start of
the same model on the same kind of GPU runs the same projection kernels without timing them again.

Timing cuBLAS against the GEMV at start-up picks between candidates a few percent apart; two starts can
pick differently and so round differently (bench/NOTES.md, "Serving"). A record is keyed by everything the
choices depend on: the GPU (name, compute capability, SM count), the torch, Triton and CUDA/HIP versions,
a digest of tritium's own source (any change to any kernel or to how it is timed makes a new record), the
model's configuration and dtype, this rank's projection shapes, and the engine options the decode step runs
with. A record whose key does not match is never read; one that cannot be read or parsed is ignored (a
warning) and replaced. Records live in ``$TRITIUM_CACHE_DIR/linear`` (default
``$XDG_CACHE_HOME/tritium/linear``, else ``~/.cache/tritium/linear``), one small JSON file each, written
atomically; deleting the folder is always safe.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import pathlib
import secrets

import torch
import triton

from tritium.engine.config import EngineConfig

log = logging.getLogger(__name__)

FORMAT = 1
# engine options that cannot change which kernel is faster for a decode projection (they size memory,
# schedule requests or bound waits)
_IRRELEVANT = ("num_blocks", "num_window_blocks", "kv_cache_dtype", "kv_cache_memory", "gpu_memory_utilization",
               "max_num_batched_tokens", "enable_prefix_caching", "enable_chunked_prefill", "warmup_attention",
               "decode_steps", "pipeline_windows", "parallel_timeout", "linear_cache", "device",
               "num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min", "speculative_model")


def cache_dir() -> pathlib.Path:
    """Where records are kept: ``$TRITIUM_CACHE_DIR/linear``, else under the XDG cache folder."""
    root = os.environ.get("TRITIUM_CACHE_DIR")
    if not root:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "tritium")
    return pathlib.Path(root) / "linear"


@functools.lru_cache(maxsize=1)
def source_digest() -> str | None:
    """sha256 over every Python file of the installed tritium package (path and bytes, in path order): its
    version, kernels, tuned trees and how the projections are timed. None where the source cannot be read
    as files (a zipped install): then nothing is recorded, since no record could be told stale."""
    root = pathlib.Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    try:
        paths = sorted(root.rglob("*.py"))
        for path in paths:
            h.update(str(path.relative_to(root)).encode())
            h.update(b"\0")
            h.update(path.read_bytes())
    except OSError:
        return None
    return h.hexdigest() if paths else None


def cache_key(model, cfg: EngineConfig, rank: int = 0, world_size: int = 1) -> dict | None:
    """What the record of ``model`` (a loaded :class:`~tritium.models.llama.LlamaModel` on a GPU) under
    ``cfg`` depends on, as canonical JSON-able data; None where tritium's source cannot be digested (no
    record then)."""
    source = source_digest()
    if source is None:
        log.warning("linear cache: tritium's source cannot be read as files; the projections are timed at every start")
        return None
    device = torch.device(cfg.device)
    props = torch.cuda.get_device_properties(device)
    engine = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in _IRRELEVANT}
    shapes = {name: list(shape) for name, shape in
              zip(model.projection_names, model.projection_shapes())}
    shapes["lm_head"] = list(model.lm_head.weight.shape)
    key = {"format": FORMAT, "source": source,
           "torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
           "hip": getattr(torch.version, "hip", None),
           "gpu": {"name": props.name, "capability": [props.major, props.minor],
                   "sms": props.multi_processor_count},
           "model": dataclasses.asdict(model.config), "dtype": str(model.dtype), "shapes": shapes,
           "layers": len(model.layers), "rank": [rank, world_size], "engine": engine}
    return json.loads(json.dumps(key, sort_keys=True, default=str))


def _path(key: dict) -> pathlib.Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
    return cache_dir() / f"{digest}.json"


def load(key: dict) -> dict | None:
    """The state recorded under ``key`` (for ``LlamaModel.restore_linears``), or None where there is none
    or it cannot be used (a warning says why)."""
    path = _path(key)
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("linear cache: cannot read %s (%s); timing the projections again", path, e)
        return None
    if not isinstance(record, dict) or record.get("key") != key or not isinstance(record.get("state"), dict):
        log.warning("linear cache: %s is not a record for this model and GPU; timing the projections again", path)
        return None
    return record["state"]


def save(key: dict, state: dict) -> pathlib.Path | None:
    """Record ``state`` under ``key`` (atomically: a reader sees the old record or the new one, never a part).
    Returns the file, or None where it could not be written (a warning; the engine runs on)."""
    path = _path(key)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a fresh name opened exclusively, not mkstemp (mode 0600): the record gets the umask's mode, so every
        # user who shares the folder (a server's account and a developer's) can read it
        name = path.with_name(f".{path.stem}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        with open(name, "x") as f:
            tmp = name
            json.dump({"key": key, "state": state}, f, indent=1)
        os.replace(tmp, path)
        return path
    except (OSError, TypeError, ValueError) as e:
        log.warning("linear cache: cannot write %s (%s); the next start times the projections again", path, e)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return None
