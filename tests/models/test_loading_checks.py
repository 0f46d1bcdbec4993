"""Checks at load time on small synthetic checkpoints written to tmp_path, each error naming the file and the field
or tensor: ``generation_config.json``'s ``eos_token_id``; a GPTQ checkpoint's group size read from its tensors'
shapes (a missing ``group_size`` inferred, a stated one that the shapes contradict refused); NaN and infinite
weights (safetensors, GGUF, fp8 and int4 loads; full tensors and lazy ones; the opt-out)."""

import json
import os
import re

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from tritium.models.config import ModelConfig
from tritium.models.llama import LlamaModel, ModelOptions
from tritium.models.weights import RandomWeights, iter_gguf_weights, iter_hf_weights, load_hf_config
from tritium.ops.int4 import quantize_int4, unpack_int4
from tritium.testing.int4_checkpoints import to_gptq

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 64,
          "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
          "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
          "torch_dtype": "float32"}
PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
               "mlp.up_proj", "mlp.down_proj")
DOWN = "model.layers.0.mlp.down_proj"
Q = "model.layers.0.self_attn.q_proj"


def _weights() -> dict[str, torch.Tensor]:
    """CONFIG's fp32 weights: N(0, 0.02^2), norms ones."""
    cfg = ModelConfig.from_hf_dict(CONFIG)
    return {name: t.materialize().contiguous() for name, t in RandomWeights(cfg, "float32").iter("cpu")}


def _write(path, tensors: dict[str, torch.Tensor], config: dict | None = None, shards: int = 1, **files) -> str:
    """A model directory: config.json (CONFIG updated with ``config``), the tensors in ``shards`` safetensors
    files (more than one: with an index), and ``files`` ({name: JSON value}) beside them."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({**CONFIG, **(config or {})}, f)
    names = list(tensors)
    if shards == 1:
        save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    else:
        weight_map = {}
        for i in range(shards):
            file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
            part = names[i::shards]
            save_file({n: tensors[n] for n in part}, os.path.join(path, file), metadata={"format": "pt"})
            weight_map.update({n: file for n in part})
        with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
    for name, value in files.items():
        with open(os.path.join(path, name), "w") as f:
            json.dump(value, f)
    return str(path)


def _load(path, dtype=torch.float32, lazy=True, **options) -> LlamaModel:
    cfg = load_hf_config(path)
    model = LlamaModel(cfg, dtype=dtype, device=torch.device("cpu"),
                       options=ModelOptions(quantization=cfg.quantization, **options))
    model.load_weights(iter_hf_weights(path, lazy=lazy))
    return model


# ---------------------------------------------------------------------------------------- generation_config.json

@pytest.mark.parametrize("eos,match", [
    ("2", r"eos_token_id must be a token id .* got '2'"),
    (True, r"eos_token_id must be a token id .* got True"),
    (2.0, r"eos_token_id must be a token id .* got 2\.0"),
    (-1, r"eos_token_id must be a token id .* got -1"),
    (64, r"eos_token_id must be a token id \(an integer in \[0, vocab_size = 64\)\), .* got 64"),
    ([2, "3"], r"eos_token_id\[1\] must be a token id .* got '3'"),
    ([2, False], r"eos_token_id\[1\] must be a token id .* got False"),
    ([5, 1000], r"eos_token_id\[1\] must be a token id .* got 1000"),
    ({"id": 2}, r"eos_token_id must be a token id .* got \{'id': 2\}"),
], ids=["string", "bool", "float", "negative", "vocab-size", "list-string", "list-bool", "list-past-vocab", "object"])
def test_generation_config_eos_token_id_is_checked(tmp_path, eos, match):
    """generation_config.json's eos_token_id (an id or a list of ids, the one field of it read) must hold integers
    in [0, vocab_size): a string or a float went into the stop set as it was (never matched a sampled id), true
    was token 1, a dict raised a TypeError from tuple(); the error names the file and the field."""
    path = _write(tmp_path / "m", {}, **{"generation_config.json": {"bos_token_id": 1, "eos_token_id": eos}})
    gen = os.path.join(path, "generation_config.json")
    with pytest.raises(ValueError, match=rf"^'{re.escape(gen)}': {match}"):
        load_hf_config(path)


def test_generation_config_eos_token_ids_that_are_right_load(tmp_path):
    for eos, ids in ((7, (7,)), ([7, 63], (7, 63)), ([], ()), (None, ())):
        path = _write(tmp_path / f"m{ids}", {}, **{"generation_config.json": {"eos_token_id": eos}})
        assert load_hf_config(path).eos_token_ids == ids
    path = _write(tmp_path / "list", {}, **{"generation_config.json": [1]})
    with pytest.raises(ValueError, match=r"generation_config.json' must hold a JSON object, got list"):
        load_hf_config(path)


# ---------------------------------------------------------------------------------------- GPTQ group size

def _gptq(path, group: int | dict, quant: dict | None = None, edit=None) -> str:
    """A GPTQ checkpoint of CONFIG's model, its projections quantized in groups of ``group`` (or {projection:
    group}); ``quant``: the quantization_config (default: no group_size); ``edit(tensors)``: changed before
    writing."""
    tensors = {}
    for name, w in _weights().items():
        proj = name[: -len(".weight")]
        if proj.split(".", 3)[-1] not in PROJECTIONS:
            tensors[name] = w
            continue
        g = group.get(proj, 32) if isinstance(group, dict) else group
        q = quantize_int4(w, w.shape[1] if g == -1 else g, symmetric=False, scale_dtype=torch.float16)
        tensors.update({f"{proj}.{k}": v for k, v in to_gptq(unpack_int4(q.packed), q.scales, q.zeros,
                                                             group_size=g).items()})
    if edit is not None:
        edit(tensors)
    quant = {"quant_method": "gptq", "bits": 4, "desc_act": False, "sym": False, **(quant or {})}
    return _write(path, tensors, {"quantization_config": quant})


@pytest.mark.parametrize("group", [32, 64, -1], ids=lambda g: f"G{g}")
def test_gptq_without_group_size_takes_the_tensors(tmp_path, group):
    """A quantization_config without group_size (HF's GPTQConfig and AutoGPTQ default it to 128; the tensors
    hold the truth) loads with the group size the scales' shapes give: the same model as the config stating it
    (was: refused, "group_size must be -1 ... got None")."""
    inferred = _gptq(tmp_path / "inferred", group)
    assert load_hf_config(inferred).int4.group_size == group
    stated = _gptq(tmp_path / "stated", group, {"group_size": group})
    a, b = _load(inferred), _load(stated)
    for la, lb in zip(a.layers, b.layers):
        for pa, pb in zip(la.projections(), lb.projections()):
            assert pa.weight.group_size == pb.weight.group_size
            for ta, tb in zip(pa.weights(), pb.weights()):
                assert torch.equal(ta, tb)


def test_gptq_group_size_a_linear_of_one_group_fits_both(tmp_path):
    """Groups of 64: the 64-feature projections hold one group (G = K, also -1), down_proj two: 64."""
    assert load_hf_config(_gptq(tmp_path / "m", 64)).int4.group_size == 64
    assert load_hf_config(_gptq(tmp_path / "s", 64, {"group_size": 64})).int4.group_size == 64


def _shrink_qzeros(tensors):
    tensors[Q + ".qzeros"] = tensors[Q + ".qzeros"][:1].contiguous()


def _short_g_idx(tensors):
    tensors[Q + ".g_idx"] = tensors[Q + ".g_idx"][:32].contiguous()


def _g_idx_of_one_group(tensors):
    tensors[Q + ".g_idx"] = torch.zeros_like(tensors[Q + ".g_idx"])


def _three_groups(tensors):  # 3 groups cannot split 128 input features evenly (g_idx, which says 4, left out)
    del tensors[DOWN + ".g_idx"]
    tensors[DOWN + ".scales"] = tensors[DOWN + ".scales"][:3].contiguous()
    tensors[DOWN + ".qzeros"] = tensors[DOWN + ".qzeros"][:3].contiguous()


@pytest.mark.parametrize("group,quant,edit,match", [
    (32, {"group_size": 64}, None,
     rf"quantization_config's group_size is 64, but GPTQ tensor '{DOWN}.scales' has shape \[4, 64\]: 4 groups of 32 "
     rf"of the K = 128 input features of '{DOWN}.qweight' \[16, 64\]"),
    (32, {"group_size": -1}, None,
     rf"quantization_config's group_size is -1, but GPTQ tensor '{DOWN}.scales' has shape \[4, 64\]"),
    ({DOWN: 64}, None, None,
     rf"GPTQ tensors give different group sizes: '{DOWN}.scales' has shape \[2, 64\]: 2 groups of 64 .*, while "
     rf"'model.layers.0.mlp.gate_proj.scales' has shape \[2, 128\]: 2 groups of 32"),
    ({DOWN: 64}, {"group_size": 32}, None,
     rf"quantization_config's group_size is 32, but GPTQ tensor '{DOWN}.scales' has shape \[2, 64\]"),
    (32, None, _shrink_qzeros,
     rf"GPTQ tensors '{Q}.scales' \[2, 64\] and '{Q}.qzeros' \[1, 8\] disagree on the number of groups"),
    (32, {"group_size": 32}, _short_g_idx, rf"GPTQ tensor '{Q}.g_idx' has shape \[32\], expected \[64\]"),
    (32, None, _g_idx_of_one_group, rf"GPTQ tensor '{Q}.g_idx' indexes 1 groups, '{Q}.scales' \[2, 64\] holds 2"),
    (32, None, _three_groups,
     rf"GPTQ tensor '{DOWN}.scales' has shape \[3, 64\]: 3 groups do not divide the K = 128 input features"),
], ids=["stated-64-tensors-32", "stated-per-row-tensors-32", "linears-disagree", "stated-32-down-64",
        "qzeros-vs-scales", "g_idx-length", "g_idx-groups", "uneven-groups"])
def test_gptq_group_size_contradicted_by_the_tensors_is_refused(tmp_path, group, quant, edit, match):
    """A stated group_size the scales' shapes contradict (was: loaded, then "scales must be a [2, 64] ... tensor"
    at the end of the load, naming no group size), or shapes that give no single group size: refused by
    load_hf_config, naming the directory, the tensors and their shapes."""
    path = _gptq(tmp_path / "m", group, quant, edit)
    with pytest.raises(ValueError, match=rf"^'{re.escape(path)}': {match}"):
        load_hf_config(path)


def test_gptq_config_without_group_size_is_not_built_unread():
    """A ModelConfig from the config dict alone (no tensors read) does not build a model with a guessed group."""
    cfg = ModelConfig.from_hf_dict({**CONFIG, "quantization_config": {"quant_method": "gptq", "bits": 4}})
    assert cfg.int4.group_size is None
    with pytest.raises(ValueError, match="states no group_size: build its config with .*load_hf_config"):
        LlamaModel(cfg, dtype=torch.float32, device=torch.device("cpu"), options=ModelOptions(quantization="int4"))


# ---------------------------------------------------------------------------------------- NaN and infinities

def _first(names, path) -> str:
    """Of ``names``, the first a load reads (iter_hf_weights' order)."""
    return next(n for n, _ in iter_hf_weights(path, lazy=True) if n in names)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("shards", [1, 2], ids=["one-file", "two-shards"])
def test_non_finite_weight_names_the_first_tensor_and_its_file(tmp_path, value, shards):
    """A NaN or an infinity in a weight (was: loaded, then NaN logits): ValueError naming the first such tensor
    in checkpoint order, its file, the count and the first index; the second one is not reached."""
    tensors = _weights()
    tensors[DOWN + ".weight"][3, 5] = value
    tensors[Q + ".weight"][0, 1] = value
    path = _write(tmp_path / "m", tensors, shards=shards)
    first = _first({DOWN + ".weight", Q + ".weight"}, path)
    file = next(f for f in sorted(os.listdir(path)) if f.endswith(".safetensors")
                and first in safe_open(os.path.join(path, f), "pt").keys())
    index = "[3, 5]" if first.startswith(DOWN) else "[0, 1]"
    counts = "1 NaN and 0 infinite values" if value != value else "0 NaN and 1 infinite values"
    with pytest.raises(ValueError, match=rf"^checkpoint tensor '{first}' in '{re.escape(os.path.join(path, file))}' "
                                         rf"holds {counts}, the first at {re.escape(index)}"):
        _load(path)


def test_non_finite_full_tensors_are_named(tmp_path):
    """Full tensors (lazy=False): reduced as they come, the first named without a file (none is known)."""
    tensors = _weights()
    tensors["model.norm.weight"][7] = float("nan")
    with pytest.raises(ValueError, match=r"^checkpoint tensor 'model.norm.weight' holds NaN or infinite values"):
        _load(_write(tmp_path / "m", tensors), lazy=False)


def test_non_finite_check_opt_out_and_clean_loads(tmp_path):
    """ModelOptions(check_finite=False) loads such a checkpoint as before; a clean one loads with the check."""
    tensors = _weights()
    clean = _load(_write(tmp_path / "clean", tensors))
    tensors[DOWN + ".weight"][0, 0] = float("nan")
    model = _load(_write(tmp_path / "nan", tensors), check_finite=False)
    assert torch.isnan(model.layers[0].down_proj.weight).any()
    assert torch.equal(clean.layers[0].qkv_proj.weight, model.layers[0].qkv_proj.weight)
    with pytest.raises(TypeError, match="check_finite must be True or False, got 'no'"):
        ModelOptions(check_finite="no")


def test_values_that_overflow_the_dtype_are_named(tmp_path):
    """1e6 in an fp32 checkpoint is finite, but infinite in a float16 model: named as the model's tensor."""
    tensors = _weights()
    tensors[DOWN + ".weight"][1, 2] = 1e6
    with pytest.raises(ValueError, match=r"^model.layers.0.down_proj holds NaN or infinite values after loading, "
                                         r"though no checkpoint tensor does: a value beyond torch.float16's range"):
        _load(_write(tmp_path / "m", tensors), dtype=torch.float16)


def test_non_finite_int4_scales_are_named(tmp_path):
    """An int4 (GPTQ) checkpoint's fp16 scales: the model holds them (narrowed to fp16), and they are scanned.
    (A 16-bit weight quantized at load to fp8 is refused by quantize_rows already, named by the tensor.)"""

    def poison(t):
        t[Q + ".scales"][1, 3] = float("inf")

    with pytest.raises(ValueError, match=rf"^checkpoint tensor '{Q}.scales' in .* holds 0 NaN and 1 infinite values, "
                                         rf"the first at \[1, 3\]"):
        _load(_gptq(tmp_path / "gptq", 32, {"group_size": 32}, poison))


def test_non_finite_gguf_weight_names_the_gguf_tensor_and_file(tmp_path):
    """A GGUF file: the tensor named by its GGUF name (and the model's), with the file."""
    gguf = pytest.importorskip("gguf")
    cfg = ModelConfig.from_hf_dict(CONFIG)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    layer = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
             "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    names.update({f"model.layers.0.{k}.weight": f"blk.0.{v}.weight" for k, v in layer.items()})
    path = str(tmp_path / "m.gguf")
    w = gguf.GGUFWriter(path, "llama")
    for key, value in (("block_count", 1), ("context_length", 64), ("embedding_length", 64),
                       ("feed_forward_length", 128), ("attention.head_count", 4), ("attention.head_count_kv", 2),
                       ("vocab_size", 64)):
        w.add_uint32(f"llama.{key}", value)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    for name, t in _weights().items():
        array = t.numpy().copy()
        if name == DOWN + ".weight":
            array[2, 9] = np.nan
        w.add_tensor(names[name], array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    from tritium.models.weights import load_gguf_config, read_gguf

    reader, meta = read_gguf(path)
    cfg = load_gguf_config(reader, meta)
    model = LlamaModel(cfg, dtype=torch.float32, device=torch.device("cpu"))
    with pytest.raises(ValueError, match=rf"^checkpoint tensor 'blk.0.ffn_down.weight' \({DOWN}.weight\) in "
                                         rf"'{re.escape(path)}' holds 1 NaN and 0 infinite values, the first at "
                                         rf"\[2, 9\]"):
        model.load_weights(iter_gguf_weights(reader, cfg, lazy=True))
