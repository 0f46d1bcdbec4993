"""Embeddings: how a model pools its final hidden states into one vector, and the vector a caller gets.

An embedding request (``SamplingParams.pooling``) computes its prompt and ends with the final-normed hidden
state of its last token ("last") or the mean over its tokens ("mean"); no token is generated. Which one a model
was trained for is in its sentence-transformers files, where it has them: ``modules.json`` lists a Pooling module
(its ``config.json`` says ``pooling_mode_lasttoken`` or ``pooling_mode_mean_tokens``) and maybe a Normalize one.
Decoder embedding models (Qwen3-Embedding, gte-Qwen2, e5-mistral) pool the last token and normalize; a model
without the files is taken the same way. A vector is cut to its first ``dimensions`` components only for a model
whose ``config.json`` says it was trained for that (Matryoshka: ``matryoshka_dimensions`` or ``is_matryoshka``).
"""

from __future__ import annotations

import json
import os

import torch

DEFAULT = ("last", True)  # (pooling, normalize) of a model that does not say


def model_pooling(path: str | None, pooling: str | None = None) -> tuple[str, bool]:
    """(pooling, normalize) from the sentence-transformers files in model directory ``path``; :data:`DEFAULT`
    where it has none. ValueError for a pooling mode tritium does not implement (CLS, max, weighted mean), unless
    the caller chose ``pooling``, returned in the files' mode's place."""
    mode, normalize = _files_pooling(path, pooling is not None)
    return mode if pooling is None else pooling, normalize


def _files_pooling(path: str | None, chosen: bool) -> tuple[str, bool]:
    modules_file = None if path is None else os.path.join(path, "modules.json")
    if modules_file is None or not os.path.isfile(modules_file):
        return DEFAULT
    with open(modules_file) as f:
        modules = json.load(f)
    kinds = {m.get("type", "").rsplit(".", 1)[-1]: m.get("path", "") for m in modules if isinstance(m, dict)}
    normalize = "Normalize" in kinds
    if "Pooling" not in kinds:
        return DEFAULT[0], normalize
    with open(os.path.join(path, kinds["Pooling"], "config.json")) as f:
        config = json.load(f)
    modes = [k.removeprefix("pooling_mode_") for k, v in config.items() if k.startswith("pooling_mode_") and v is True]
    if chosen:
        return DEFAULT[0], normalize
    if modes == ["lasttoken"]:
        return "last", normalize
    if modes == ["mean_tokens"]:
        return "mean", normalize
    raise ValueError(f"this model pools its hidden states by {' + '.join(modes) or 'nothing'} "
                     f"({os.path.join(kinds['Pooling'], 'config.json')}); tritium pools by the last token or the mean")


class UnsupportedDimensions(ValueError):
    """``dimensions`` asked of a model not trained for Matryoshka embeddings: a parameter the model does not take,
    whatever its value."""


def model_matryoshka(path: str | None) -> list[int] | bool:
    """The embedding sizes the model in directory ``path`` may be cut to, from its ``config.json`` as vLLM reads
    it: ``matryoshka_dimensions`` (a list of sizes: those), else ``is_matryoshka: true`` (True: any size); False
    for a model trained for neither (or with no such file: a GGUF checkpoint, in-memory weights)."""
    try:
        with open(os.path.join(path, "config.json")) as f:
            config = json.load(f)
    except (TypeError, OSError, ValueError):
        return False
    if not isinstance(config, dict):
        return False
    sizes = config.get("matryoshka_dimensions")
    if isinstance(sizes, list) and sizes and all(isinstance(d, int) and not isinstance(d, bool) for d in sizes):
        return sorted(sizes)
    return config.get("is_matryoshka") is True


def check_dimensions(dimensions, hidden: int, matryoshka: list[int] | bool = True, model: str = "") -> None:
    """ValueError unless ``dimensions`` is None or an int in [1, ``hidden``] that the model may be cut to, as
    vLLM rules: ``matryoshka`` as :func:`model_matryoshka` gives it (True: any size; False: none, an
    :class:`UnsupportedDimensions`), ``model`` its name in the message. A vector cut from a model not trained for
    it loses what its last components held. The one rule of ``LLM.embed`` and the server's /v1/embeddings."""
    if dimensions is None:
        return
    if not isinstance(dimensions, int) or isinstance(dimensions, bool) or not 1 <= dimensions <= hidden:
        raise ValueError(f"dimensions must be an int in [1, {hidden}] (the model's hidden size), got {dimensions!r}")
    if not matryoshka:
        raise UnsupportedDimensions(
            f'Model "{model}" does not support matryoshka representation, changing output dimensions will lead to '
            "poor results (its config.json has neither is_matryoshka nor matryoshka_dimensions)")
    if matryoshka is not True and dimensions not in matryoshka:
        raise ValueError(f'Model "{model}" only supports {matryoshka} matryoshka dimensions, got {dimensions}')


def finish(vectors: torch.Tensor, normalize: bool, dimensions: int | None = None) -> torch.Tensor:
    """[N, hidden] pooled vectors as a caller gets them: the first ``dimensions`` components (None: all; whether
    the model may be cut is :func:`check_dimensions`'s to say, before the prompts run), then scaled to unit length
    if ``normalize``."""
    if dimensions is not None:
        check_dimensions(dimensions, vectors.shape[-1])
        vectors = vectors[..., :dimensions]
    if normalize:
        vectors = torch.nn.functional.normalize(vectors.float(), dim=-1)
    return vectors
