"""Embeddings: how a model pools its final hidden states into one vector, and the vector a caller gets.

An embedding request (``SamplingParams.pooling``) computes its prompt and ends with the final-normed hidden
state of its last token ("last") or the mean over its tokens ("mean"); no token is generated. Which one a model
was trained for is in its sentence-transformers files, where it has them: ``modules.json`` lists a Pooling module
(its ``config.json`` says ``pooling_mode_lasttoken`` or ``pooling_mode_mean_tokens``) and maybe a Normalize one.
Decoder embedding models (Qwen3-Embedding, gte-Qwen2, e5-mistral) pool the last token and normalize; a model
without the files is taken the same way.
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


def check_dimensions(dimensions, hidden: int) -> None:
    """ValueError unless ``dimensions`` is None or an int in [1, ``hidden``]."""
    if dimensions is not None and (not isinstance(dimensions, int) or isinstance(dimensions, bool)
                                   or not 1 <= dimensions <= hidden):
        raise ValueError(f"dimensions must be an int in [1, {hidden}] (the model's hidden size), got {dimensions!r}")


def finish(vectors: torch.Tensor, normalize: bool, dimensions: int | None = None) -> torch.Tensor:
    """[N, hidden] pooled vectors as a caller gets them: the first ``dimensions`` components (Matryoshka models;
    None: all), then scaled to unit length if ``normalize``."""
    if dimensions is not None:
        check_dimensions(dimensions, vectors.shape[-1])
        vectors = vectors[..., :dimensions]
    if normalize:
        vectors = torch.nn.functional.normalize(vectors.float(), dim=-1)
    return vectors
