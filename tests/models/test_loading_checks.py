"""Checks at load time on small synthetic checkpoints written to tmp_path, each error naming the file and the field
or tensor: ``generation_config.json``'s ``eos_token_id`` (ids outside the vocabulary dropped with a warning); a GPTQ
or AWQ checkpoint's group size read from its tensors' shapes (a missing ``group_size`` inferred, a stated one that
the shapes contradict refused); NaN and infinite weights (safetensors, GGUF, fp8 and int4 loads; full tensors and
lazy ones; the opt-out)."""

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
from tritium.testing.int4_checkpoints import to_awq, to_gptq

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
    (2.0, r"eos_token_id must be a token id \(an integer\), or eos_token_id a list of them; got 2\.0"),
    ([2, "3"], r"eos_token_id\[1\] must be a token id .* got '3'"),
    ([2, False], r"eos_token_id\[1\] must be a token id .* got False"),
    ([1000, 2.5], r"eos_token_id\[1\] must be a token id .* got 2\.5"),
    ({"id": 2}, r"eos_token_id must be a token id .* got \{'id': 2\}"),
], ids=["string", "bool", "float", "list-string", "list-bool", "list-past-vocab-and-float", "object"])
def test_generation_config_eos_token_id_is_checked(tmp_path, eos, match):
    """generation_config.json's eos_token_id (an id or a list of ids, the one field of it read) must hold integers:
    a string or a float went into the stop set as it was (never matched a sampled id), true was token 1, a dict
    raised a TypeError from tuple(); the error names the file and the field."""
    path = _write(tmp_path / "m", {}, **{"generation_config.json": {"bos_token_id": 1, "eos_token_id": eos}})
    gen = os.path.join(path, "generation_config.json")
    with pytest.raises(ValueError, match=rf"^'{re.escape(gen)}': {match}"):
        load_hf_config(path)


@pytest.mark.parametrize("eos,config_eos,ids,ignored", [
    (64, None, (), ["eos_token_id = 64"]),
    (-1, 2, (2,), ["eos_token_id = -1"]),
    ([5, 1000], None, (5,), ["eos_token_id[1] = 1000"]),
    ([-3, 7, 64, 63], None, (7, 63), ["eos_token_id[0] = -3", "eos_token_id[2] = 64"]),
    ([64, 99], 3, (3,), ["eos_token_id[0] = 64", "eos_token_id[1] = 99"]),
], ids=["vocab-size", "negative-config-eos", "list-past-vocab", "list-both-sides", "list-all-past"])
def test_generation_config_eos_token_ids_outside_the_vocabulary_are_dropped(tmp_path, caplog, eos, config_eos, ids,
                                                                            ignored):
    """An integer outside [0, vocab_size) (was: refused; transformers keeps it, an id never sampled) loads with a
    warning naming the file, the field, the id and vocab_size, and is left out of the stop set. Where none is left,
    a warning says so and config.json's eos_token_id (and the tokenizer's EOS) stays the stop set."""
    config = None if config_eos is None else {"eos_token_id": config_eos}
    path = _write(tmp_path / "m", {}, config, **{"generation_config.json": {"eos_token_id": eos}})
    gen = os.path.join(path, "generation_config.json")
    with caplog.at_level("WARNING", logger="tritium.models.weights"):
        assert load_hf_config(path).eos_token_ids == ids
    warned = [f"{gen!r}: {field} is not a token id of the model (vocab_size = 64): ignored (the model cannot "
              f"produce it)" for field in ignored]
    if len(ignored) == len(eos if isinstance(eos, list) else [eos]):  # none left
        warned.append(f"{gen!r}: none of eos_token_id {eos!r} is a token id of the model (vocab_size = 64): "
                      f"generation stops only at config.json's eos_token_id ({config_eos or 'none'}) and the "
                      f"tokenizer's EOS token, where they have one")
    assert [r.getMessage() for r in caplog.records] == warned


def test_generation_config_eos_token_ids_that_are_right_load(tmp_path):
    for eos, ids in ((7, (7,)), ([7, 63], (7, 63)), ([], ()), (None, ())):
        path = _write(tmp_path / f"m{ids}", {}, **{"generation_config.json": {"eos_token_id": eos}})
        assert load_hf_config(path).eos_token_ids == ids
    path = _write(tmp_path / "list", {}, **{"generation_config.json": [1]})
    with pytest.raises(ValueError, match=r"generation_config.json' must hold a JSON object, got list"):
        load_hf_config(path)


# ---------------------------------------------------------------------------------------- GPTQ and AWQ group size

# per format: its writer, and its quantization_config without group_size
INT4_FORMATS = {"gptq": (to_gptq, {"quant_method": "gptq", "bits": 4, "desc_act": False, "sym": False}),
                "awq": (to_awq, {"quant_method": "awq", "bits": 4, "version": "gemm", "zero_point": True})}


def _int4(path, fmt: str, group: int | dict, quant: dict | None = None, edit=None) -> str:
    """A GPTQ or AWQ (``fmt``) checkpoint of CONFIG's model, its projections quantized in groups of ``group`` (or
    {projection: group}); ``quant``: more quantization_config (default: no group_size); ``edit(tensors)``:
    changed before writing."""
    writer, config = INT4_FORMATS[fmt]
    tensors = {}
    for name, w in _weights().items():
        proj = name[: -len(".weight")]
        if proj.split(".", 3)[-1] not in PROJECTIONS:
            tensors[name] = w
            continue
        g = group.get(proj, 32) if isinstance(group, dict) else group
        q = quantize_int4(w, w.shape[1] if g == -1 else g, symmetric=False, scale_dtype=torch.float16)
        tensors.update({f"{proj}.{k}": v for k, v in writer(unpack_int4(q.packed), q.scales, q.zeros,
                                                            group_size=g).items()})
    if edit is not None:
        edit(tensors)
    return _write(path, tensors, {"quantization_config": {**config, **(quant or {})}})


@pytest.mark.parametrize("fmt", ["gptq", "awq"])
@pytest.mark.parametrize("group", [32, 64, -1], ids=lambda g: f"G{g}")
def test_int4_without_group_size_takes_the_tensors(tmp_path, group, fmt):
    """A quantization_config without group_size (HF's GPTQConfig, AutoGPTQ and AutoAWQ default it to 128; the
    tensors hold the truth) loads with the group size the scales' shapes give: the same model as the config
    stating it (was: refused, "group_size must be -1 ... got None"; GPTQ's inferred before AWQ's)."""
    inferred = _int4(tmp_path / "inferred", fmt, group)
    assert load_hf_config(inferred).int4.group_size == group
    stated = _int4(tmp_path / "stated", fmt, group, {"group_size": group})
    a, b = _load(inferred), _load(stated)
    for la, lb in zip(a.layers, b.layers):
        for pa, pb in zip(la.projections(), lb.projections()):
            assert pa.weight.group_size == pb.weight.group_size
            for ta, tb in zip(pa.weights(), pb.weights()):
                assert torch.equal(ta, tb)


@pytest.mark.parametrize("fmt", ["gptq", "awq"])
def test_int4_group_size_a_linear_of_one_group_fits_both(tmp_path, fmt):
    """Groups of 64: the 64-feature projections hold one group (G = K, also -1), down_proj two: 64."""
    assert load_hf_config(_int4(tmp_path / "m", fmt, 64)).int4.group_size == 64
    assert load_hf_config(_int4(tmp_path / "s", fmt, 64, {"group_size": 64})).int4.group_size == 64


def test_awq_without_group_size_in_quant_config_json(tmp_path):
    """AutoAWQ's quant_config.json (read where config.json has no quantization_config) without q_group_size."""
    path = _int4(tmp_path / "m", "awq", 32)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(CONFIG, f)
    with open(os.path.join(path, "quant_config.json"), "w") as f:
        json.dump({"w_bit": 4, "version": "GEMM", "zero_point": True}, f)
    assert load_hf_config(path).int4 == load_hf_config(_int4(tmp_path / "s", "awq", 32, {"group_size": 32})).int4


def _shrink_qzeros(tensors):
    tensors[Q + ".qzeros"] = tensors[Q + ".qzeros"][:1].contiguous()


def _short_g_idx(tensors):
    tensors[Q + ".g_idx"] = tensors[Q + ".g_idx"][:32].contiguous()


def _g_idx_of_one_group(tensors):
    tensors[Q + ".g_idx"] = torch.zeros_like(tensors[Q + ".g_idx"])


def _three_groups(tensors):  # 3 groups cannot split 128 input features evenly (GPTQ's g_idx, which says 4, left out)
    tensors.pop(DOWN + ".g_idx", None)
    tensors[DOWN + ".scales"] = tensors[DOWN + ".scales"][:3].contiguous()
    tensors[DOWN + ".qzeros"] = tensors[DOWN + ".qzeros"][:3].contiguous()


def _flat_qweight(tensors):
    tensors[Q + ".qweight"] = tensors[Q + ".qweight"].reshape(-1).contiguous()


def _contradictions():
    """(fmt, group, quant, edit, match) of test_int4_group_size_contradicted_by_the_tensors_is_refused: the cases
    of both formats (their down_proj qweight: GPTQ's [K/8, N] = [16, 64], AWQ's [K, N/8] = [128, 8]), then each
    format's own (GPTQ's g_idx, AWQ's qweight)."""
    for fmt, qweight in (("gptq", r"\[16, 64\]"), ("awq", r"\[128, 8\]")):
        kind = fmt.upper()
        cases = {
            "stated-64-tensors-32": (32, {"group_size": 64}, None,
                                     rf"quantization_config's group_size is 64, but {kind} tensor '{DOWN}.scales' has "
                                     rf"shape \[4, 64\]: 4 groups of 32 of the K = 128 input features of "
                                     rf"'{DOWN}.qweight' {qweight}"),
            "stated-per-row-tensors-32": (32, {"group_size": -1}, None,
                                          rf"quantization_config's group_size is -1, but {kind} tensor "
                                          rf"'{DOWN}.scales' has shape \[4, 64\]"),
            "linears-disagree": ({DOWN: 64}, None, None,
                                 rf"{kind} tensors give different group sizes: '{DOWN}.scales' has shape \[2, 64\]: 2 "
                                 rf"groups of 64 of the K = 128 input features of '{DOWN}.qweight' {qweight}, while "
                                 rf"'model.layers.0.mlp.gate_proj.scales' has shape \[2, 128\]: 2 groups of 32"),
            "stated-32-down-64": ({DOWN: 64}, {"group_size": 32}, None,
                                  rf"quantization_config's group_size is 32, but {kind} tensor '{DOWN}.scales' has "
                                  rf"shape \[2, 64\]"),
            "qzeros-vs-scales": (32, None, _shrink_qzeros,
                                 rf"{kind} tensors '{Q}.scales' \[2, 64\] and '{Q}.qzeros' \[1, 8\] disagree on the "
                                 rf"number of groups"),
            "uneven-groups": (32, None, _three_groups,
                              rf"{kind} tensor '{DOWN}.scales' has shape \[3, 64\]: 3 groups do not divide the "
                              rf"K = 128 input features of '{DOWN}.qweight' {qweight} evenly"),
        }
        yield from (pytest.param(fmt, *case, id=f"{fmt}-{name}") for name, case in cases.items())
    yield pytest.param("gptq", 32, {"group_size": 32}, _short_g_idx,
                       rf"GPTQ tensor '{Q}.g_idx' has shape \[32\], expected \[64\]", id="gptq-g_idx-length")
    yield pytest.param("gptq", 32, None, _g_idx_of_one_group,
                       rf"GPTQ tensor '{Q}.g_idx' indexes 1 groups, '{Q}.scales' \[2, 64\] holds 2",
                       id="gptq-g_idx-groups")
    yield pytest.param("awq", 32, {"group_size": 32}, _flat_qweight,
                       rf"AWQ tensor '{Q}.qweight' has shape \[512\], expected \[K, N/8\] \(2-D\)",
                       id="awq-1d-qweight")


@pytest.mark.parametrize("fmt,group,quant,edit,match", list(_contradictions()))
def test_int4_group_size_contradicted_by_the_tensors_is_refused(tmp_path, fmt, group, quant, edit, match):
    """A stated group_size the scales' shapes contradict (was: loaded, then "scales must be a [2, 64] ... tensor"
    at the end of the load, naming no group size; AWQ's not checked before the load), or shapes that give no
    single group size: refused by load_hf_config, naming the directory, the tensors and their shapes."""
    path = _int4(tmp_path / "m", fmt, group, quant, edit)
    with pytest.raises(ValueError, match=rf"^'{re.escape(path)}': {match}"):
        load_hf_config(path)


@pytest.mark.parametrize("fmt", ["gptq", "awq"])
def test_int4_config_without_group_size_is_not_built_unread(fmt):
    """A ModelConfig from the config dict alone (no tensors read) does not build a model with a guessed group."""
    cfg = ModelConfig.from_hf_dict({**CONFIG, "quantization_config": {"quant_method": fmt, "bits": 4}})
    assert cfg.int4.group_size is None
    with pytest.raises(ValueError, match=f"this {fmt} checkpoint's quantization_config states no group_size: build "
                                         f"its config with .*load_hf_config"):
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
        _load(_int4(tmp_path / "gptq", "gptq", 32, {"group_size": 32}, poison))


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
