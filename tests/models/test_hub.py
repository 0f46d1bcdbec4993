"""Models named by their Hugging Face Hub repository: parsing the names; resolving them from a local cache in
huggingface_hub's layout (refs, commit hashes, GGUF repositories, partial downloads); what is downloaded
where the cache lacks them (huggingface_hub's calls replaced, no network); which safetensors files a
directory's weights are (its index, not a ``consolidated.safetensors`` beside it); an engine and a server
name built from a cached ``org/name``."""

import json
import os
import sys

import pytest
import torch
from safetensors.torch import save_file

from engine.conftest import make_tiny_model
from tritium import LLM, SamplingParams
from tritium.models import hub
from tritium.models.hub import RepoRef, parse_repo_ref, resolve_model
from tritium.models.weights import check_model_path, is_gguf, iter_hf_weights, weight_files
from tritium.server.launch import default_model_name

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "hub"
    root.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.chdir(tmp_path)  # no relative path named like a repository
    return root


def snapshot(cache, repo: str, commit: str = COMMIT, ref: str | None = "main"):
    """An empty snapshot directory of ``repo`` at ``commit`` in the cache; ``ref`` points at it."""
    root = cache / ("models--" + repo.replace("/", "--"))
    path = root / "snapshots" / commit
    path.mkdir(parents=True)
    if ref is not None:
        (root / "refs").mkdir(exist_ok=True)
        (root / "refs" / ref).write_text(commit)
    return path


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-llama")
    make_tiny_model(str(path), "llama")
    return path


def copy_model(src, dst):
    for name in os.listdir(src):
        (dst / name).write_bytes((src / name).read_bytes())


@pytest.mark.parametrize("name, want", [
    ("Qwen/Qwen3-8B", RepoRef("Qwen/Qwen3-8B")),
    ("meta-llama/Llama-3.1-8B-Instruct@main", RepoRef("meta-llama/Llama-3.1-8B-Instruct", None, "main")),
    ("org/repo.v2@" + COMMIT, RepoRef("org/repo.v2", None, COMMIT)),
    ("bartowski/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf", RepoRef("bartowski/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf")),
    ("org/repo/sub/m.gguf@v1.0", RepoRef("org/repo", "sub/m.gguf", "v1.0")),
    ("org/repo/M-Q4_0.GGUF", RepoRef("org/repo", "M-Q4_0.GGUF")),
    ("model", None), ("./org/name", None), ("/abs/org/name", None), ("org/name/config.json", None),
    ("org/../name", None), ("org//name", None), ("org/name/", None), ("~/org/name", None),
])
def test_parse_repo_ref(name, want):
    assert parse_repo_ref(name) == want
    if want is not None:
        assert str(want) == name


def test_cache_dir_follows_huggingface_hub(monkeypatch, tmp_path):
    for var in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hub.hub_cache_dir() == str(tmp_path / ".cache" / "huggingface" / "hub")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.hub_cache_dir() == str(tmp_path / "xdg" / "huggingface" / "hub")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert hub.hub_cache_dir() == str(tmp_path / "hf" / "hub")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "c"))
    assert hub.hub_cache_dir() == str(tmp_path / "c")


def test_directory_from_the_cache(cache, tiny_dir):
    snap = snapshot(cache, "org/tiny")
    copy_model(tiny_dir, snap)
    assert resolve_model("org/tiny") == (str(snap), "org/tiny")
    assert resolve_model("org/tiny@" + COMMIT) == (str(snap), "org/tiny@" + COMMIT)
    tagged = snapshot(cache, "org/tiny", OTHER, ref="v1")
    copy_model(tiny_dir, tagged)
    assert resolve_model("org/tiny@v1") == (str(tagged), "org/tiny@v1")
    # a path on disk is a path, even where it looks like a repository
    (cache.parent / "org" / "tiny").mkdir(parents=True)
    assert resolve_model("org/tiny") == ("org/tiny", None)


def test_gguf_repositories(cache):
    snap = snapshot(cache, "org/one-GGUF")
    (snap / "m-Q4_0.gguf").write_bytes(b"GGUF")
    (snap / "README.md").write_text("x")
    assert resolve_model("org/one-GGUF") == (str(snap / "m-Q4_0.gguf"), "org/one-GGUF")
    snap = snapshot(cache, "org/many-GGUF")
    for q in ("Q4_0", "Q8_0"):
        (snap / f"m-{q}.gguf").write_bytes(b"GGUF")
    with pytest.raises(FileNotFoundError, match=r"holds 2 \.gguf files \(m-Q4_0\.gguf, m-Q8_0\.gguf\); name one as "
                                                r"org/many-GGUF/FILE\.gguf"):
        resolve_model("org/many-GGUF")
    assert resolve_model("org/many-GGUF/m-Q8_0.gguf") == (str(snap / "m-Q8_0.gguf"), "org/many-GGUF/m-Q8_0.gguf")


def test_gguf_extension_in_any_case(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    snap = snapshot(cache, "org/caps-GGUF")
    (snap / "M-Q4_0.GGUF").write_bytes(b"GGUF")
    assert resolve_model("org/caps-GGUF") == (str(snap / "M-Q4_0.GGUF"), "org/caps-GGUF")
    check_model_path(str(snap / "M-Q4_0.GGUF"))
    assert is_gguf(str(snap / "M-Q4_0.GGUF"))
    (tmp_path / "m.ggufx").write_bytes(b"GGUF")
    with pytest.raises(FileNotFoundError, match="is not a .gguf file"):
        check_model_path(str(tmp_path / "m.ggufx"))


def test_pytorch_bin_checkpoints_are_named(tmp_path, tiny_dir):
    """A directory of pytorch_model*.bin shards only: an error naming them as unsupported and what is needed."""
    (tmp_path / "config.json").write_bytes((tiny_dir / "config.json").read_bytes())
    for name in ("pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(FileNotFoundError, match=r"has no \*.safetensors weights, only PyTorch pickle checkpoints "
                                                r"\(pytorch_model-00001-of-00002.bin, "
                                                r"pytorch_model-00002-of-00002.bin\), which are not supported: "
                                                r"tritium needs safetensors weights or a GGUF file"):
        LLM(str(tmp_path))


def test_gguf_beside_safetensors_is_named(tmp_path, tiny_dir, caplog):
    """A directory with both: its safetensors weights load, and a warning names the GGUF file left aside; a
    directory with a GGUF file and no config.json points at that file."""
    copy_model(tiny_dir, tmp_path)
    (tmp_path / "model-Q8_0.gguf").write_bytes(b"GGUF")
    with caplog.at_level("WARNING", logger="tritium.models.weights"):
        check_model_path(str(tmp_path))
    assert f"model directory {str(tmp_path)!r} holds safetensors weights and model-Q8_0.gguf: loading the " \
           f"safetensors weights" in caplog.text
    (tmp_path / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"has no config.json; to run its GGUF file give that file's path: "
                                                r".*model-Q8_0.gguf'"):
        check_model_path(str(tmp_path))


def test_tensor_in_two_unindexed_shards_is_named(tmp_path, tiny_dir):
    copy_model(tiny_dir, tmp_path)
    (tmp_path / "model.safetensors").rename(tmp_path / "model-00001-of-00001.safetensors")
    save_file({"model.norm.weight": torch.ones(128)}, str(tmp_path / "extra.safetensors"))
    first, second = (str(tmp_path / f) for f in ("extra.safetensors", "model-00001-of-00001.safetensors"))
    with pytest.raises(ValueError, match=rf"tensor 'model.norm.weight' is in both '{first}' and '{second}', and no "
                                         rf"model.safetensors.index.json says which to load"):
        list(iter_hf_weights(str(tmp_path)))
    with pytest.raises(ValueError, match="tensor 'model.norm.weight' is in both"):
        LLM(str(tmp_path), dtype=torch.float32, max_model_len=32)


def test_not_cached_offline_or_without_huggingface_hub(cache, tiny_dir, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match=f"'org/absent' is not a path, and the Hugging Face cache "
                                                f"\\({cache}\\) does not hold 'org/absent' \\(HF_HUB_OFFLINE is set"):
        resolve_model("org/absent")
    # a partial download (the index names a shard that is not there) is not taken from the cache
    snap = snapshot(cache, "org/partial")
    copy_model(tiny_dir, snap)
    (snap / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    with pytest.raises(FileNotFoundError, match="does not hold 'org/partial'"):
        resolve_model("org/partial")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # not installed
    with pytest.raises(FileNotFoundError, match=r"download it \(`hf download org/absent`\) or pip install "
                                                r"'tritium\[hub\]'"):
        resolve_model("org/absent")
    # not a repository name and not a path: the path's own error
    with pytest.raises(FileNotFoundError, match="model path 'nothing-here' does not exist"):
        LLM("nothing-here")


class FakeHub:
    """huggingface_hub's three calls over a fake repository ``files`` (name -> bytes), writing into the cache
    as huggingface_hub does (snapshots/<commit>/..., refs/<revision>); the calls are recorded."""

    def __init__(self, cache, repo: str, files: dict[str, bytes]):
        self.cache, self.repo, self.files, self.calls = cache, repo, files, []
        self.snap = cache / ("models--" + repo.replace("/", "--")) / "snapshots" / COMMIT

    def list_repo_files(self, repo, revision=None):
        self.calls.append(("list", repo, revision))
        if repo != self.repo:
            raise OSError(f"404 Client Error: Repository Not Found for url: https://huggingface.co/{repo}\nmore")
        return sorted(self.files)

    def _write(self, name, revision):
        refs = self.snap.parent.parent / "refs"
        refs.mkdir(parents=True, exist_ok=True)
        (refs / (revision or "main")).write_text(COMMIT)
        path = self.snap / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.files[name])
        return str(path)

    def hf_hub_download(self, repo, filename, revision=None):
        self.calls.append(("file", filename, revision))
        return self._write(filename, revision)

    def snapshot_download(self, repo, revision=None, allow_patterns=None):
        self.calls.append(("snapshot", tuple(sorted(allow_patterns)), revision))
        for name in allow_patterns:
            self._write(name, revision)
        return str(self.snap)


def test_download_fetches_only_what_the_engine_reads(cache, tiny_dir, monkeypatch):
    """A Mistral-like repository: the HF shards named by the index, a consolidated.safetensors beside them
    (other names, the same bytes again), docs and a subfolder: only config, tokenizer and the index's shards
    come down, and the engine runs from them as from the original directory."""
    import huggingface_hub

    files = {name: (tiny_dir / name).read_bytes() for name in os.listdir(tiny_dir)}
    files["model.safetensors.index.json"] = json.dumps({"weight_map": {"x": "model.safetensors"}}).encode()
    files["consolidated.safetensors"] = b"not read"
    files["README.md"] = b"x"
    files["original/params.json"] = b"{}"
    fake = FakeHub(cache, "org/tiny", files)
    for name in ("list_repo_files", "hf_hub_download", "snapshot_download"):
        monkeypatch.setattr(huggingface_hub, name, getattr(fake, name))
    path, name = resolve_model("org/tiny@main")
    assert (path, name) == (str(fake.snap), "org/tiny@main")
    wanted = sorted({"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                     "model.safetensors.index.json", "model.safetensors"} & set(files))
    assert fake.calls == [("list", "org/tiny", "main"), ("file", "model.safetensors.index.json", "main"),
                          ("snapshot", tuple(wanted), "main")]
    assert not (fake.snap / "consolidated.safetensors").exists()
    # now cached: no call at all
    fake.calls.clear()
    assert resolve_model("org/tiny") == (str(fake.snap), "org/tiny") and fake.calls == []
    # one GGUF file of several, by name; a missing repository is one line naming the model
    fake.repo, fake.files = "org/q-GGUF", {"a-Q4_0.gguf": b"GGUF", "a-Q8_0.gguf": b"GGUF", "README.md": b"x"}
    fake.snap = cache / "models--org--q-GGUF" / "snapshots" / COMMIT
    with pytest.raises(FileNotFoundError, match="holds 2 .gguf files"):
        resolve_model("org/q-GGUF")
    assert resolve_model("org/q-GGUF/a-Q8_0.gguf")[0] == str(fake.snap / "a-Q8_0.gguf")
    assert fake.calls[-1] == ("file", "a-Q8_0.gguf", None)
    # the cache now holds one of them: the bare name runs it, offline
    assert resolve_model("org/q-GGUF")[0] == str(fake.snap / "a-Q8_0.gguf")
    with pytest.raises(FileNotFoundError, match="has no file 'b.gguf'"):
        resolve_model("org/q-GGUF/b.gguf")
    with pytest.raises(FileNotFoundError) as e:
        resolve_model("org/missing")
    assert str(e.value) == ("model 'org/missing' is not a path and could not be fetched from the Hugging Face Hub "
                            "(OSError: 404 Client Error: Repository Not Found for url: https://huggingface.co/org/missing)")
    fake.repo, fake.files = "org/empty", {"README.md": b"x"}
    with pytest.raises(FileNotFoundError, match="has neither config.json with safetensors weights nor a .gguf file"):
        resolve_model("org/empty")


def test_weight_files_follow_the_index(tmp_path, tiny_dir):
    """The safetensors files that hold a directory's weights: its index's, else model.safetensors, else all;
    a shard the index names but the directory lacks, or an index that is not one, is a one-line error."""
    copy_model(tiny_dir, tmp_path)
    decoy = tmp_path / "consolidated.safetensors"
    save_file({"layers.0.attention.wq.weight": torch.zeros(2)}, str(decoy))
    assert weight_files(str(tmp_path)) == [str(tmp_path / "model.safetensors")]
    names = {n for n, _ in iter_hf_weights(str(tmp_path))}
    assert "model.embed_tokens.weight" in names and not any(n.startswith("layers.") for n in names)
    (tmp_path / "model.safetensors").rename(tmp_path / "model-00001-of-00001.safetensors")
    assert sorted(weight_files(str(tmp_path))) == [str(decoy), str(tmp_path / "model-00001-of-00001.safetensors")]
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": {"a": "model-00001-of-00001.safetensors"}}))
    assert weight_files(str(tmp_path)) == [str(tmp_path / "model-00001-of-00001.safetensors")]
    check_model_path(str(tmp_path))
    index.write_text(json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors"}}))
    with pytest.raises(FileNotFoundError, match="lacks model-00001-of-00002.safetensors .named by "
                                                "model.safetensors.index.json: a partial download"):
        check_model_path(str(tmp_path))
    for bad in ("[1]", "{", json.dumps({"weight_map": {"a": "../x.safetensors"}})):
        index.write_text(bad)
        with pytest.raises(FileNotFoundError, match="safetensors"):
            weight_files(str(tmp_path))


def test_engine_from_a_cached_repository(cache, tiny_dir):
    """LLM("org/name") runs the cached snapshot (the same answer as its directory), serves under that name."""
    snap = snapshot(cache, "org/tiny")
    copy_model(tiny_dir, snap)
    params = SamplingParams(max_tokens=6)
    with LLM("org/tiny", dtype=torch.float32, max_model_len=64) as llm:
        got = llm.generate(["w1 w2"], params)[0].text
        assert llm.engine.model_path == str(snap) and default_model_name(llm.engine) == "org/tiny"
    with LLM(str(tiny_dir), dtype=torch.float32, max_model_len=64) as llm:
        assert llm.generate(["w1 w2"], params)[0].text == got
        assert llm.engine.hub_name is None and default_model_name(llm.engine) == tiny_dir.name


@pytest.mark.parametrize("name", [
    "org/", "org/-name", "org/.name", "org/name-", "org/name--x", "a--b/c", "org/name.git", "o" * 97 + "/n",
    "org/café", "a/b/c", "org/name@", "@main", "org/name@main@v2", "org/name@/etc/passwd", "org/name@main/",
    "org/name@a//b",
])
def test_malformed_hub_names_are_named(cache, monkeypatch, name):
    """Names huggingface_hub's validate_repo_id refuses (a name beginning or ending with '-' or '.', '--', '.git',
    over 96 characters, not ASCII) and revisions with an empty part (a leading slash read a file outside the cache as
    a ref): not taken as a Hub name, and not reported as a missing path either. Before, 'org/-name' was looked up
    (and 'a--b/c' and 'a/b--c' share one cache directory, so one could load the other), and '@/etc/passwd' opened
    /etc/passwd as the ref."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert parse_repo_ref(name) is None
    with pytest.raises(FileNotFoundError, match=r"is not a path, nor a Hugging Face Hub name \(org/name or "):
        resolve_model(name)


@pytest.mark.parametrize("name, want", [
    ("org/name@refs/pr/1", RepoRef("org/name", None, "refs/pr/1")),
    ("org/name@feature/x-1.2", RepoRef("org/name", None, "feature/x-1.2")),
    ("_org/Name_1", RepoRef("_org/Name_1")),
    ("o" * 96 + "/" + "n" * 96, RepoRef("o" * 96 + "/" + "n" * 96)),
])
def test_hub_names_at_the_limits_parse(name, want):
    assert parse_repo_ref(name) == want


def test_a_ref_that_is_not_a_commit_is_no_snapshot(cache, tiny_dir, monkeypatch):
    """A ref file holds a commit hash (huggingface_hub writes one); anything else (a path) was joined to
    snapshots/ and could name a directory outside the cache."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    outside = cache.parent / "outside"
    outside.mkdir()
    copy_model(tiny_dir, outside)
    root = cache / "models--org--tiny"
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(str(outside))
    (root / "snapshots").mkdir()
    with pytest.raises(FileNotFoundError, match="does not hold 'org/tiny'"):
        resolve_model("org/tiny")
