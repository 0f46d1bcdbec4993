"""Models named by their Hugging Face Hub repository: ``org/name``, ``org/name/FILE.gguf``, either with
``@revision`` (a branch, a tag or a commit hash; default ``main``).

``org/name`` is a model directory (config.json and safetensors weights) or a GGUF repository that holds one
``.gguf`` file (with several, name the one to run as ``org/name/FILE.gguf``). A name is looked up in the
local Hugging Face cache first, in the layout huggingface_hub writes (``$HF_HUB_CACHE``, else
``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``), so a model
downloaded before needs neither the network nor huggingface_hub (a GGUF repository of which the cache holds
one ``.gguf`` file runs that one). Otherwise it is downloaded into that cache
with huggingface_hub where it is installed (``pip install 'tritium[hub]'``) and ``$HF_HUB_OFFLINE`` is not
set: only the files the engine reads (config, generation config, tokenizer, chat template and the weight
files the safetensors index names, or the one GGUF file). A path that exists on disk is always a path.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re

from tritium.models.weights import SAFETENSORS_INDEX, index_files, weight_files

# org/name[/FILE.gguf][@revision]; names as huggingface_hub's validate_repo_id allows them (ASCII letters, digits,
# '-', '_', '.'; at most 96, neither first nor last '-' or '.'; no '--' or '..', not ending '.git': checked
# apart); the extension in any case (FILE.GGUF too); a revision of slash-separated parts (a branch "feature/x",
# "refs/pr/1"), none empty
_NAME = r"[A-Za-z0-9_](?:[\w.-]{0,94}[A-Za-z0-9_])?"
_REPO_ID = re.compile(rf"(?P<repo>{_NAME}/{_NAME})(?P<file>/[\w./-]+\.(?i:gguf))?"
                      r"(?:@(?P<revision>[\w.-]+(?:/[\w.-]+)*))?", re.ASCII)
_COMMIT = re.compile(r"[0-9a-f]{40}")
_FORM = ("org/name or org/name/FILE.gguf, either with @revision; org and name of ASCII letters, digits, '-', '_' "
         "and '.', at most 96 each, not beginning or ending with '-' or '.', without '--' or '..'")
# what a model directory needs besides its weights (tokenizer_config.json holds the chat template)
_DIR_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
              "chat_template.jinja", "model.safetensors.index.json", "quantize_config.json", "quant_config.json")


@dataclasses.dataclass(frozen=True)
class RepoRef:
    """A model named by its Hub repository: ``repo`` (org/name), ``filename`` (a GGUF file in it, or None),
    ``revision`` (None: main)."""
    repo: str
    filename: str | None = None
    revision: str | None = None

    def __str__(self) -> str:
        name = self.repo + (f"/{self.filename}" if self.filename else "")
        return name + (f"@{self.revision}" if self.revision else "")


def parse_repo_ref(model: str) -> RepoRef | None:
    """``model`` as a Hub reference, or None where it cannot be one (an absolute or ./ path, a bare name,
    more path parts without a .gguf file at the end)."""
    if model.startswith((".", "/", "~")) or "\\" in model or "//" in model:
        return None
    m = _REPO_ID.fullmatch(model)
    if m is None or ".." in model or "--" in m["repo"] or m["repo"].endswith(".git"):
        return None
    return RepoRef(m["repo"], m["file"][1:] if m["file"] else None, m["revision"])


def hub_cache_dir() -> str:
    """The Hugging Face Hub cache directory, as huggingface_hub finds it."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.path.expanduser(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.environ["HF_HOME"]), "hub")
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "huggingface", "hub")


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def cached_snapshot(ref: RepoRef, cache: str | None = None) -> str | None:
    """The snapshot directory of ``ref``'s revision in the cache, or None where the cache has none."""
    root = os.path.join(cache or hub_cache_dir(), "models--" + ref.repo.replace("/", "--"))
    revision = ref.revision or "main"
    commit = revision if _COMMIT.fullmatch(revision) else None
    if commit is None:
        try:
            with open(os.path.join(root, "refs", revision)) as f:
                commit = f.read().strip()
        except OSError:
            return None
        if not _COMMIT.fullmatch(commit):  # huggingface_hub writes a commit hash: anything else is no snapshot
            return None
    snapshot = os.path.join(root, "snapshots", commit)
    return snapshot if os.path.isdir(snapshot) else None


def _pick(ref: RepoRef, files: list[str]) -> str | None:
    """What to run among a repository's top-level ``files``: "" for the directory, a GGUF file's name, or
    None where it holds neither; FileNotFoundError where the choice is the user's."""
    if ref.filename is not None:
        if ref.filename not in files:
            raise FileNotFoundError(f"model {str(ref)!r}: the repository has no file {ref.filename!r}")
        return ref.filename
    if "config.json" in files and any(f.endswith(".safetensors") for f in files):
        return ""
    ggufs = sorted(f for f in files if f.lower().endswith(".gguf"))
    if len(ggufs) == 1:
        return ggufs[0]
    if ggufs:
        shown = ", ".join(ggufs[:8]) + (f" and {len(ggufs) - 8} more" if len(ggufs) > 8 else "")
        raise FileNotFoundError(f"model {str(ref)!r} holds {len(ggufs)} .gguf files ({shown}); name one as "
                                f"{ref.repo}/FILE.gguf")
    return None


def _from_snapshot(ref: RepoRef, snapshot: str) -> str | None:
    """The path to run in a cached snapshot, or None where the snapshot lacks it (a partial download)."""
    if ref.filename is not None:
        path = os.path.join(snapshot, ref.filename)
        return path if os.path.isfile(path) else None
    pick = _pick(ref, [f for f in os.listdir(snapshot) if os.path.isfile(os.path.join(snapshot, f))])
    if pick is None:
        return None
    if pick:
        return os.path.join(snapshot, pick)
    try:
        weight_files(snapshot)
    except FileNotFoundError:
        return None
    return snapshot


def resolve_model(model: str) -> tuple[str, str | None]:
    """(local path, Hub name or None) of what ``model`` names: a path that exists is itself; a Hub reference
    comes from the cache, else is downloaded (see the module docstring). FileNotFoundError (one line) where
    it is neither."""
    if os.path.exists(model):
        return model, None
    ref = parse_repo_ref(model)
    if ref is None and ("/" in model or "@" in model) and not model.startswith((".", "/", "~")):
        raise FileNotFoundError(f"model {model!r} is not a path, nor a Hugging Face Hub name ({_FORM})")
    if ref is None:
        return model, None  # check_model_path names it
    snapshot = cached_snapshot(ref)
    if snapshot is not None:
        path = _from_snapshot(ref, snapshot)
        if path is not None:
            return path, str(ref)
    where = f"not a path, and the Hugging Face cache ({hub_cache_dir()}) does not hold {str(ref)!r}"
    if offline():
        raise FileNotFoundError(f"model {model!r} is {where} (HF_HUB_OFFLINE is set, so it is not downloaded)")
    try:
        import huggingface_hub
    except ImportError:
        raise FileNotFoundError(f"model {model!r} is {where}; download it (`hf download {ref.repo}`) or pip install "
                                f"'tritium[hub]' to have it downloaded") from None
    return _download(huggingface_hub, ref), str(ref)


def _download(hub, ref: RepoRef) -> str:
    """Download what ``ref`` needs into the cache; its local path."""
    try:
        files = hub.list_repo_files(ref.repo, revision=ref.revision)
        top = [f for f in files if "/" not in f] + ([ref.filename] if ref.filename in files else [])
        pick = _pick(ref, top)
        if pick is None:
            raise FileNotFoundError(f"model {str(ref)!r}: the repository has neither config.json with safetensors "
                                    f"weights nor a .gguf file")
        if pick:
            return hub.hf_hub_download(ref.repo, pick, revision=ref.revision)
        wanted = [f for f in _DIR_FILES if f in top]
        if SAFETENSORS_INDEX in top:
            index = hub.hf_hub_download(ref.repo, SAFETENSORS_INDEX, revision=ref.revision)
            wanted += index_files(index)
        elif "model.safetensors" in top:
            wanted.append("model.safetensors")
        else:
            wanted += [f for f in top if fnmatch.fnmatch(f, "*.safetensors")]
        return hub.snapshot_download(ref.repo, revision=ref.revision, allow_patterns=wanted)
    except FileNotFoundError:
        raise
    except Exception as e:  # huggingface_hub's and the network's errors: one line naming the model
        message = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise FileNotFoundError(f"model {str(ref)!r} is not a path and could not be fetched from the Hugging Face "
                                f"Hub ({type(e).__name__}: {message})") from e
