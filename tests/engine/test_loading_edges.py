"""Checkpoints that are slightly wrong load into one clear error naming the file, the tensor or the config field
(not a traceback from deep inside the loader, not a model that runs wrong): a tiny llama directory with one
thing edited each time."""

import json
import os
import re

import pytest
import torch
from safetensors.torch import load_file, save_file

from tritium import LLM, SamplingParams
from tritium.cli import main
from tritium.engine.config import EngineConfig

from .conftest import make_tiny_model

QPROJ = "model.layers.0.self_attn.q_proj.weight"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("edges-llama")
    make_tiny_model(str(path), "llama")
    return path


def edited(tiny, dst, config=None, tensors=None, shards=None):
    """A copy of ``tiny`` in ``dst`` with ``config`` fields set (None: removed), its tensors passed through
    ``tensors`` (a function of the name -> tensor dict), or split into ``shards`` ({file: [names]}) with an
    index that places each tensor in its file."""
    for name in os.listdir(tiny):
        if name not in ("config.json", "model.safetensors"):
            os.symlink(tiny / name, dst / name)
    cfg = json.loads((tiny / "config.json").read_text())
    for key, value in (config or {}).items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    (dst / "config.json").write_text(json.dumps(cfg))
    weights = {k: v.clone() for k, v in load_file(tiny / "model.safetensors").items()}
    if tensors is not None:
        weights = tensors(weights)
    if shards is None:
        save_file(weights, dst / "model.safetensors", metadata={"format": "pt"})
        return str(dst)
    for file, names in shards.items():
        save_file({n: weights[n] for n in names}, dst / file, metadata={"format": "pt"})
    index = {n: file for file, names in shards.items() for n in names}
    (dst / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": index}))
    return str(dst)


def load(path):
    return LLM(path, dtype=torch.float32, max_model_len=32)


@pytest.mark.parametrize("config,match", [
    (dict(num_key_value_heads=0), "num_key_value_heads must be a positive integer, got 0"),
    (dict(hidden_size=130, head_dim=None), r"hidden_size \(130\) is not divisible by num_attention_heads \(4\)"),
    (dict(num_hidden_layers=0), "num_hidden_layers must be a positive integer, got 0"),
    (dict(hidden_size="128"), "hidden_size must be a positive integer, got '128'"),
    (dict(intermediate_size=256.0), "intermediate_size must be a positive integer, got 256.0"),
    (dict(max_position_embeddings=0), "max_position_embeddings must be a positive integer, got 0"),
    (dict(rms_norm_eps=-1e-6), "rms_norm_eps must be a positive finite number, got -1e-06"),
    (dict(rope_parameters={"rope_type": "default", "rope_theta": 0}), "rope_theta must be a positive finite number"),
    (dict(dtype="float13"), "torch_dtype 'float13' is not a floating-point torch dtype"),
    (dict(tie_word_embeddings="false"), "tie_word_embeddings must be true or false, got 'false'"),
], ids=["kv-heads-0", "hidden-not-divisible", "layers-0", "hidden-str", "intermediate-float", "context-0",
        "eps-negative", "rope-theta-0", "dtype-unknown", "tie-str"])
def test_nonsense_config_values_name_the_file_and_field(tiny, tmp_path, config, match):
    """Before: a shape error from a layer (kv heads 0 taken as "all heads"; 130 / 4 heads), an IndexError (0
    layers), a TypeError deep in a kernel's reference (a string eps), NaN logits generated (rope base 0), a
    KV-cache budget error (context 0), a silently tied LM head ("false" is true) or an ignored dtype."""
    path = edited(tiny, tmp_path, config=config)
    # a value of the wrong JSON type: "has a field of an unexpected type (...)"
    with pytest.raises(ValueError, match=f"{os.path.join(path, 'config.json')}'(: | has a field .*\\(){match}"):
        load(path)


@pytest.mark.parametrize("edit,error,match", [
    (lambda t: {**t, QPROJ: t[QPROJ][:, :64].contiguous()}, ValueError,
     rf"{QPROJ}: QKVParallelLinear: weight\[q\] has shape \(256, 64\), expected \(256, 128\)"),
    (lambda t: {**t, "model.embed_tokens.weight": t["model.embed_tokens.weight"][:100].contiguous()}, ValueError,
     r"model.embed_tokens.weight: VocabParallelEmbedding: weight has shape \(100, 128\), expected \(253, 128\)"),
    (lambda t: {**t, QPROJ: t[QPROJ].to(torch.int32)}, TypeError,
     rf"{QPROJ}: QKVParallelLinear: weight\[q\] must be a floating-point tensor, got torch.int32"),
    (lambda t: {**t, "model.norm.weight": t["model.norm.weight"].to(torch.int8)}, TypeError,
     "model.norm.weight: must be a floating-point tensor, got torch.int8"),
    (lambda t: {**t, "model.layers.1.input_layernorm.weight": torch.ones(64)}, ValueError,
     r"model.layers.1.input_layernorm.weight: expected shape \(128,\) \(hidden_size\), got \(64,\)"),
    (lambda t: {**t, "model.norm.weight": torch.ones(64)}, ValueError,
     r"model.norm.weight: expected shape \(128,\) \(hidden_size\), got \(64,\)"),
    (lambda t: {k: v for k, v in t.items() if k != "lm_head.weight"}, ValueError,
     "checkpoint has no 'lm_head.weight', and the config's tie_word_embeddings is false"),
], ids=["shape", "vocab-rows", "int32", "int8-norm", "layer-norm-shape", "final-norm-shape", "no-lm-head"])
def test_wrong_tensors_are_named(tiny, tmp_path, edit, error, match):
    """Before: layer errors without the tensor's name, an int8 final norm loaded (rounded), a final norm of the
    wrong shape broadcast or failed in torch, and a missing LM head replaced by the embeddings (transformers runs
    a random head with a warning; vLLM refuses: refused)."""
    with pytest.raises(error, match=match):
        load(edited(tiny, tmp_path, tensors=edit))


def test_float64_and_float16_tensors_load_as_the_model_dtype(tiny, tmp_path):
    """Floating tensors of another width are converted (as transformers and vLLM do), not refused."""
    path = edited(tiny, tmp_path, tensors=lambda t: {k: v.double() if "mlp" in k else v.half() if "attn" in k else v
                                                     for k, v in t.items()})
    assert load(path).generate([[1, 5, 6]])[0].outputs[0].token_ids


def test_index_that_places_a_tensor_in_a_shard_without_it(tiny, tmp_path):
    """Before: "checkpoint layer 0 lacks ['gate_up_proj.weight[1]']", no file named; or, where the tensor was
    in another shard, that one loaded."""
    up = "model.layers.0.mlp.up_proj.weight"
    names = sorted(load_file(tiny / "model.safetensors"))
    shards = {"model-00001-of-00002.safetensors": [n for n in names if n != up][:10],
              "model-00002-of-00002.safetensors": [n for n in names if n != up][10:] + [up]}
    # the shard the index names for `up` lacks it (written without it), the first shard has it
    path = edited(tiny, tmp_path, shards=shards)
    second = load_file(tmp_path / "model-00002-of-00002.safetensors")
    up_tensor = second.pop(up)
    save_file(second, tmp_path / "model-00002-of-00002.safetensors", metadata={"format": "pt"})
    first = load_file(tmp_path / "model-00001-of-00002.safetensors")
    save_file({**first, up: up_tensor}, tmp_path / "model-00001-of-00002.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=f"tensor '{up}' is not in '{path}/model-00002-of-00002.safetensors', "
                                         f"where model.safetensors.index.json places it"):
        load(path)


def test_sharded_checkpoint_with_its_index_loads(tiny, tmp_path):
    names = sorted(load_file(tiny / "model.safetensors"))
    path = edited(tiny, tmp_path, shards={"a.safetensors": names[:7], "b.safetensors": names[7:]})
    one = load(str(tiny)).generate([[1, 5, 6, 7]])[0].outputs[0].token_ids
    assert load(path).generate([[1, 5, 6, 7]])[0].outputs[0].token_ids == one


DOWN = "model.layers.1.mlp.down_proj.weight"


def _nan_in_down(t):
    t[DOWN][3, 200] = float("nan")  # column 200 of 256: the second half, a tensor-parallel rank 1's shard
    return t


def test_non_finite_weights_refused_by_default_and_loaded_with_check_finite_false(tiny, tmp_path):
    """EngineConfig.check_finite (was: only ModelOptions had it, out of reach of LLM and the CLI): by default a
    NaN weight is refused, naming the tensor, its file and the opt-out; LLM(..., check_finite=False) loads it."""
    path = edited(tiny, tmp_path, tensors=_nan_in_down)
    file = os.path.join(path, "model.safetensors")
    with pytest.raises(ValueError, match=rf"^checkpoint tensor '{DOWN}' in '{re.escape(file)}' holds 1 NaN and 0 "
                                         rf"infinite values, the first at \[3, 200\].* check_finite=False loads it "
                                         rf"anyway: LLM\(\.\.\., check_finite=False\), EngineConfig, ModelOptions, "
                                         rf"or the command's --no-check-finite\)$"):
        load(path)
    llm = LLM(path, dtype=torch.float32, max_model_len=32, check_finite=False)
    assert llm.engine.config.check_finite is False
    assert torch.isnan(llm.engine.model.layers[1].down_proj.weight).sum() == 1
    assert len(llm.generate([[1, 5, 6]], SamplingParams(max_tokens=2, ignore_eos=True))[0].token_ids) == 2


@pytest.mark.parametrize("value", ["no", 0, None], ids=["string", "int", "none"])
def test_check_finite_must_be_a_bool(tiny, value):
    """Refused naming the field before any weight is read (0 and "no" were not False)."""
    with pytest.raises(TypeError, match=f"^check_finite must be True or False, got {re.escape(repr(value))}$"):
        EngineConfig(check_finite=value).validate()
    with pytest.raises(TypeError, match="^check_finite must be True or False"):
        LLM(str(tiny), check_finite=value)


def test_cli_refuses_non_finite_weights_unless_told(tiny, tmp_path, capsys):
    """The command's one-line error names the tensor, its file and --no-check-finite, which loads it."""
    path = edited(tiny, tmp_path, tensors=_nan_in_down)
    common = ["generate", "--model", path, "--dtype", "float32", "--max-tokens", "2", "--raw", "--no-stream"]
    assert main([*common, "w1 w2"]) == 2
    err = capsys.readouterr().err
    assert f"checkpoint tensor '{DOWN}' in '{os.path.join(path, 'model.safetensors')}' holds 1 NaN" in err
    assert "--no-check-finite" in err and len(err.strip().splitlines()) == 1
    assert main([*common, "--no-check-finite", "w1 w2"]) == 0
