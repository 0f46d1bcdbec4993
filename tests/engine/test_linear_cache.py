"""The on-disk record of linear_backend auto's choices: its key, where it lives, what is never read back.

The engine path (a second start restores without timing, same tokens) needs a GPU: tests/engine/test_gpu.py.
"""

import dataclasses
import json
import logging
import os
import stat
import types

import pytest
import torch

from tritium.engine import linear_cache
from tritium.engine.config import EngineConfig
from tritium.models.config import ModelConfig
from tritium.models.llama import LlamaModel, ModelOptions

CONFIG = ModelConfig(model_type="llama", vocab_size=97, hidden_size=128, intermediate_size=192, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=64)
H100 = types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, multi_processor_count=132)


@pytest.fixture
def gpu(monkeypatch, tmp_path):
    """A GPU as cache_key reads one (its properties), and a cache folder of the test's own."""
    props = {"value": H100}
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: props["value"])
    monkeypatch.setenv("TRITIUM_CACHE_DIR", str(tmp_path))
    return props


def _model(config=CONFIG, dtype=torch.float32):
    return LlamaModel(config, dtype=dtype, device=torch.device("cpu"), options=ModelOptions())


def _cfg(**kw):
    return EngineConfig(device=torch.device("cpu"), linear_backend="auto", **kw)


STATE = {"linear": {"choices": [[1, 256, 128, None]], "best_gemv": [], "report": [{"m": 1}], "chain_report": [],
                    "rejected": []}, "ways": {}, "ways_applied": {}, "norms_chain": False}


def test_cache_dir_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITIUM_CACHE_DIR", str(tmp_path / "t"))
    assert linear_cache.cache_dir() == tmp_path / "t" / "linear"
    monkeypatch.delenv("TRITIUM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert linear_cache.cache_dir() == tmp_path / "x" / "tritium" / "linear"


def test_key_follows_what_the_choices_depend_on(gpu, monkeypatch):
    """Same model, options and GPU kind: the same key (JSON-able, stable). Another GPU, dtype, model shape,
    rank, decode option or tritium source: another key. Options that only size memory or schedule: the same."""
    model = _model()
    key = linear_cache.cache_key(model, _cfg())
    assert json.loads(json.dumps(key)) == key and key == linear_cache.cache_key(_model(), _cfg())
    assert key["gpu"]["name"] == H100.name and key["shapes"]["qkv_proj"] == [256, 128]
    same = [_cfg(max_num_batched_tokens=512), _cfg(kv_cache_memory=1 << 20), _cfg(enable_prefix_caching=False),
            _cfg(decode_steps=1), _cfg(linear_cache=False), dataclasses.replace(_cfg(), device=torch.device("cuda", 3))]
    for cfg in same:
        assert linear_cache.cache_key(model, cfg) == key, cfg
    other = [linear_cache.cache_key(model, _cfg(fuse_swiglu=False)),
             linear_cache.cache_key(model, _cfg(max_num_seqs=2)),
             linear_cache.cache_key(model, _cfg(), rank=1, world_size=2),
             linear_cache.cache_key(_model(dtype=torch.bfloat16), _cfg()),
             linear_cache.cache_key(_model(dataclasses.replace(CONFIG, intermediate_size=256)), _cfg())]
    gpu["value"] = types.SimpleNamespace(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132)
    other.append(linear_cache.cache_key(model, _cfg()))
    gpu["value"] = H100
    monkeypatch.setattr(linear_cache, "source_digest", lambda: "edited")
    other.append(linear_cache.cache_key(model, _cfg()))
    assert all(k != key for k in other) and len({json.dumps(k, sort_keys=True) for k in other}) == len(other)
    assert len(linear_cache.source_digest()) == 6


def test_source_digest_covers_the_package():
    linear_cache.source_digest.cache_clear()
    digest = linear_cache.source_digest()
    assert len(digest) == 64 and digest == linear_cache.source_digest()


def test_no_key_without_readable_source(gpu, monkeypatch, caplog):
    monkeypatch.setattr(linear_cache, "source_digest", lambda: None)
    with caplog.at_level(logging.WARNING, logger="tritium.engine.linear_cache"):
        assert linear_cache.cache_key(_model(), _cfg()) is None
    assert "timed at every start" in caplog.text


def test_save_then_load(gpu, tmp_path):
    key = linear_cache.cache_key(_model(), _cfg())
    assert linear_cache.load(key) is None  # nothing recorded yet
    path = linear_cache.save(key, STATE)
    assert path is not None and path.parent == tmp_path / "linear" and path.suffix == ".json"
    assert linear_cache.load(key) == STATE
    assert list(path.parent.iterdir()) == [path]  # no temporary file left
    assert linear_cache.save(key, dict(STATE, ways_applied={"x": "y"})) == path  # replaced in place
    assert linear_cache.load(key)["ways_applied"] == {"x": "y"}
    assert linear_cache.load(linear_cache.cache_key(_model(), _cfg(max_num_seqs=2))) is None


def test_records_get_the_umask_mode(gpu, tmp_path):
    """A record is readable by whoever shares the folder, as the umask allows (not mkstemp's 0600)."""
    old = os.umask(0o022)
    try:
        path = linear_cache.save(linear_cache.cache_key(_model(), _cfg()), STATE)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert list(path.parent.iterdir()) == [path]


def test_unusable_records_are_ignored(gpu, caplog):
    """A record that cannot be parsed, is not a dict, or carries another key (a file swapped in by hand, a
    hash collision) is never used: a warning, and None (the engine times the projections again)."""
    key = linear_cache.cache_key(_model(), _cfg())
    path = linear_cache.save(key, STATE)
    other = linear_cache.cache_key(_model(), _cfg(max_num_seqs=2))
    for text in ("{not json", "[1, 2]", json.dumps({"key": other, "state": STATE}), json.dumps({"key": key}),
                 json.dumps({"key": key, "state": [1]})):
        path.write_text(text)
        with caplog.at_level(logging.WARNING, logger="tritium.engine.linear_cache"):
            caplog.clear()
            assert linear_cache.load(key) is None
        assert "timing the projections again" in caplog.text


def test_unwritable_folder_warns_and_runs_on(gpu, monkeypatch, tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("TRITIUM_CACHE_DIR", str(blocker))  # a file where the folder should be
    key = linear_cache.cache_key(_model(), _cfg())
    with caplog.at_level(logging.WARNING, logger="tritium.engine.linear_cache"):
        assert linear_cache.save(key, STATE) is None
    assert "cannot write" in caplog.text and linear_cache.load(key) is None
    monkeypatch.setenv("TRITIUM_CACHE_DIR", str(tmp_path / "ok"))
    with caplog.at_level(logging.WARNING, logger="tritium.engine.linear_cache"):
        caplog.clear()
        assert linear_cache.save(key, {"not json": object()}) is None
    assert "cannot write" in caplog.text and list((tmp_path / "ok" / "linear").iterdir()) == []


def test_engine_config_checks_linear_cache():
    with pytest.raises(TypeError, match="linear_cache must be True or False"):
        EngineConfig(linear_cache="yes").validate()
