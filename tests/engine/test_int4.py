"""Weight-only int4 in the engine (``quantization="int4"``). GPTQ (v1 zeros, act-order or not), AWQ and
compressed-tensors pack-quantized checkpoints select it by themselves and give the tokens and prompt
log-probabilities of the same model with the dequantized weights: on the torch path exactly, through
tritium's int4 kernels (GEMV at decode, matmul at prefill, under the interpreter on the CPU) within fp32
rounding, and at tensor_parallel_size 2. A 16-bit checkpoint quantized at load gives the model of
:func:`tritium.ops.int4.quantize_int4` (groups of 128) at any tensor-parallel size."""

import json
import os
import shutil

import pytest
import torch

from tritium import LLM
from tritium.models.config import ModelConfig, UnsupportedModelError
from tritium.models import linear as linear_module
from tritium.ops.int4 import Int4Weight, dequantize_int4_reference, quantize_int4, unpack_int4
from tritium.ops.int4_linear import MATMUL_MAX_M, MAX_M, int4_linear
from tritium.testing.int4_checkpoints import to_awq, to_compressed, to_gptq

from .conftest import PROMPTS, make_tiny_model
from .test_quantization import _assert_same, _run
from .test_tensor_parallel import no_leaks, two_ranks  # noqa: F401 (fixtures)

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ON_GPU = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
GROUP = 32
# the projections that read the same input share an act-order permutation (GPTQ orders a layer's input
# features by the same Hessian)
INPUT = {"q_proj": "attn", "k_proj": "attn", "v_proj": "attn", "o_proj": "o", "gate_proj": "mlp",
         "up_proj": "mlp", "down_proj": "down"}


def _config(kind: str) -> dict:
    if kind.startswith("gptq"):
        return {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": kind == "gptq-actorder",
                "sym": False, "checkpoint_format": "gptq"}
    if kind == "awq":
        return {"quant_method": "awq", "bits": 4, "group_size": GROUP, "version": "gemm", "zero_point": True}
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                "type": "int", "num_bits": 4, "symmetric": True, "strategy": "group", "group_size": GROUP}}}}


def _quantized(name: str, w: torch.Tensor, kind: str, perms: dict) -> tuple[dict, torch.Tensor]:
    """One projection ``name`` (a checkpoint tensor name ending in ``.weight``) of format ``kind``: its
    checkpoint tensors and the dequantized weight."""
    prefix = name[: -len("weight")]
    perm = None
    if kind == "gptq-actorder":
        key = (name.split(".")[2], INPUT[name.split(".")[-2]])  # (layer, input)
        perm = perms.setdefault(key, torch.randperm(w.shape[1]).to(torch.int32))
    stored = w if perm is None else w[:, perm.long()]
    q = quantize_int4(stored, GROUP, symmetric=kind == "compressed")
    if perm is not None:
        q = Int4Weight(q.packed, q.scales, q.zeros, perm, GROUP)
    dequantized = dequantize_int4_reference(q)
    codes = unpack_int4(q.packed)
    if perm is not None:  # the writers take codes in input-feature order
        ordered = torch.empty_like(codes)
        ordered[:, perm.long()] = codes
        codes = ordered
    if kind.startswith("gptq"):
        tensors = to_gptq(codes, q.scales, q.zeros, group_size=GROUP, perm=perm)
    elif kind == "awq":
        tensors = to_awq(codes, q.scales, q.zeros, group_size=GROUP)
    else:
        tensors = to_compressed(codes, q.scales, GROUP)
    return {prefix + k: v for k, v in tensors.items()}, dequantized


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """{name: directory}: "fp32" a tiny Llama; for each int4 format ("gptq", "gptq-actorder", "awq",
    "compressed") the checkpoint and "<format>-dequantized" (its projections as fp32 weights: the
    reference); "rtn-dequantized": the fp32 one with each projection quantized as quantization="int4" does
    at load (asymmetric, groups of 128) and dequantized."""
    from safetensors.torch import load_file, save_file
    root = tmp_path_factory.mktemp("int4")
    base = str(root / "fp32")
    os.makedirs(base)
    make_tiny_model(base, "llama")
    state = load_file(os.path.join(base, "model.safetensors"))
    out = {"fp32": base}
    torch.manual_seed(1)
    for kind in ("gptq", "gptq-actorder", "awq", "compressed", "rtn"):
        quantized, dequantized, perms = {}, {}, {}
        for name, value in state.items():
            if name.endswith(".weight") and name.split(".")[-2] in PROJECTIONS:
                if kind == "rtn":
                    dequantized[name] = dequantize_int4_reference(quantize_int4(value, 128))
                    continue
                tensors, dequantized[name] = _quantized(name, value, kind, perms)
                quantized.update(tensors)
            else:
                quantized[name] = dequantized[name] = value
        variants = {f"{kind}-dequantized": (dequantized, None)}
        if kind != "rtn":
            variants[kind] = (quantized, _config(kind))
        for name, (tensors, qc) in variants.items():
            path = str(root / name)
            shutil.copytree(base, path)
            save_file(tensors, os.path.join(path, "model.safetensors"))
            if qc is not None:
                with open(os.path.join(path, "config.json")) as f:
                    cfg = json.load(f)
                cfg["quantization_config"] = qc
                with open(os.path.join(path, "config.json"), "w") as f:
                    json.dump(cfg, f)
            out[name] = path
    return out


@pytest.fixture(scope="module")
def reference(checkpoints):
    return {kind: _run(checkpoints[f"{kind}-dequantized"])
            for kind in ("gptq", "gptq-actorder", "awq", "compressed", "rtn")}


@pytest.mark.parametrize("kind", ["gptq", "gptq-actorder", "awq", "compressed"])
def test_int4_checkpoint_equals_the_dequantized_model(checkpoints, reference, kind):
    """torch path (the reference dequantization, then F.linear): the dequantized model's numbers; the
    checkpoint's quantization_config selects int4 by itself."""
    _assert_same(_run(checkpoints[kind]), reference[kind], 1e-5)


def test_int4_from_a_16bit_checkpoint(checkpoints, reference):
    _assert_same(_run(checkpoints["fp32"], quantization="int4"), reference["rtn"], 1e-5)


@pytest.mark.parametrize("kind", ["gptq", "gptq-actorder", "compressed"])
def test_int4_through_tritium_kernels(checkpoints, reference, kind, monkeypatch):
    """The int4 GEMV (decode steps) and matmul (prefill chunks) against the dequantized model."""
    if not ON_GPU and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("tritium's kernels on the CPU need TRITON_INTERPRET=1")
    rows = []

    def counted(x, w, bias=None, **kw):
        rows.append(x.shape[0])
        return int4_linear(x, w, bias, **kw)

    monkeypatch.setattr(linear_module, "int4_linear", counted)
    kw = dict(linear_backend="triton", op_backend="triton", attention_backend="torch")
    _assert_same(_run(checkpoints[kind], **kw), reference[kind], 1e-4)
    # decode steps of 4 and fewer rows (the GEMV) and prefill chunks of more (the matmul), 4 projections a layer
    assert any(m <= MAX_M for m in rows) and any(MAX_M < m <= MATMUL_MAX_M for m in rows), sorted(set(rows))


def test_int4_storage(checkpoints):
    """Symmetric checkpoints store no zero points; 16-bit scales stay 16-bit; 4.x bits a weight."""
    kw = dict(max_model_len=64, kv_cache_memory=8 << 20)
    with LLM(checkpoints["compressed"], **kw) as llm:
        model = llm.engine.model
        w = model.layers[0].qkv_proj.weight
        assert isinstance(w, Int4Weight) and w.zeros is None and w.scales.dtype == torch.float16
        assert w.group_size == GROUP and w.perm is None
        assert model.lm_head.weight.dtype == model.dtype  # the LM head is not quantized
    with LLM(checkpoints["gptq-actorder"], **kw) as llm:
        layer = llm.engine.model.layers[0]
        assert layer.qkv_proj.weight.zeros is not None and layer.qkv_proj.weight.perm is not None
        n, k = layer.down_proj.weight.shape
        # codes, fp16 scales and uint8 zero points of groups of 32, and the permutation
        assert layer.down_proj.weight_bytes() == n * k // 2 + 3 * n * k // GROUP + 4 * k


def test_int4_options_and_errors(checkpoints):
    with pytest.raises(ValueError, match="projections are int4 \\(gptq\\): quantization must be 'int4'"):
        LLM(checkpoints["gptq"], quantization="fp8")
    with pytest.raises(ValueError, match="no batch-invariant product"):
        LLM(checkpoints["fp32"], quantization="int4", batch_invariant=True)
    base = dict(model_type="llama", vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                num_attention_heads=2)
    for kind in ("gptq", "awq", "compressed"):
        cfg = ModelConfig.from_hf_dict(dict(base, quantization_config=_config(kind)))
        assert cfg.quantization == "int4" and cfg.int4.format == kind and cfg.int4.group_size == GROUP
    with pytest.raises(UnsupportedModelError, match="bits"):
        ModelConfig.from_hf_dict(dict(base, quantization_config=dict(_config("gptq"), bits=8)))
    with pytest.raises(UnsupportedModelError, match="version"):
        ModelConfig.from_hf_dict(dict(base, quantization_config=dict(_config("awq"), version="gemv")))


def test_int4_missing_tensor_is_named(checkpoints, tmp_path):
    from safetensors.torch import load_file, save_file
    path = str(tmp_path / "broken")
    shutil.copytree(checkpoints["awq"], path)
    state = load_file(os.path.join(path, "model.safetensors"))
    del state["model.layers.1.mlp.up_proj.qzeros"]
    save_file(state, os.path.join(path, "model.safetensors"))
    with pytest.raises(ValueError, match="model.layers.1.mlp.up_proj: .* not \\['qzeros'\\]"):
        LLM(path, max_model_len=64, kv_cache_memory=8 << 20)


@pytest.mark.serial  # starts rank processes: run alone, as tests/engine/test_tensor_parallel.py is
def test_int4_tensor_parallel(checkpoints, reference, no_leaks, two_ranks):  # noqa: F811
    """TP=2 over gloo: row-parallel ranks hold whole groups, so the model is the TP=1 one; an act-order
    checkpoint's row-parallel weights cannot be split by columns and are refused by name."""
    kw = dict(tensor_parallel_size=2, comm="torch")
    _assert_same(_run(checkpoints["gptq"], **kw), reference["gptq"], 1e-4)
    _assert_same(_run(checkpoints["fp32"], quantization="int4", **kw), reference["rtn"], 1e-4)
    with pytest.raises(Exception, match="act-order"):
        _run(checkpoints["gptq-actorder"], **kw)


@pytest.mark.parametrize("kind,name,own", [
    ("gptq", "quantize_config.json", {"bits": 4, "group_size": GROUP, "desc_act": False, "sym": False}),
    ("awq", "quant_config.json", {"zero_point": True, "q_group_size": GROUP, "w_bit": 4, "version": "GEMM"})])
def test_int4_config_in_the_quantizers_own_file(checkpoints, reference, tmp_path, kind, name, own):
    """Checkpoints made before transformers wrote a quantization_config carry AutoGPTQ's quantize_config.json
    or AutoAWQ's quant_config.json instead: read where config.json has none."""
    from tritium.models.weights import load_hf_config
    path = str(tmp_path / kind)
    shutil.copytree(checkpoints[kind], path)
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    del cfg["quantization_config"]
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(path, name), "w") as f:
        json.dump(own, f)
    config = load_hf_config(path)
    assert config.quantization == "int4" and config.int4.format == kind and config.int4.group_size == GROUP
    _assert_same(_run(path), reference[kind], 1e-5)
    with open(os.path.join(path, name), "w") as f:
        f.write("{")
    with pytest.raises(ValueError, match=f"{name}' is not a JSON quantization config"):
        load_hf_config(path)


def test_int4_warm_up_runs_every_kernel_configuration(checkpoints):
    """At start on a GPU the engine runs each int4 projection once in every kernel configuration a step can
    launch (GEMV, each matmul tile, the dequantization): here through the interpreter, the count checked."""
    if not ON_GPU and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("tritium's kernels on the CPU need TRITON_INTERPRET=1")
    from tritium.ops.int4_linear import int4_warm_rows
    with LLM(checkpoints["gptq"], max_model_len=64, kv_cache_memory=8 << 20, linear_backend="triton") as llm:
        model = llm.engine.model
        expected = sum(len(int4_warm_rows(*w.shape, w.group_size, MATMUL_MAX_M + 1))
                       for w in (getattr(model.layers[0], p).weight for p in ("qkv_proj", "o_proj", "gate_up_proj",
                                                                              "down_proj")))
        assert model.warm_quantized(MATMUL_MAX_M + 1) == expected > 4 * 4
