"""FP8 in the engine. Weight-only (``quantization="fp8"``): a 16-bit checkpoint quantized at load, and an FP8
checkpoint (compressed-tensors, per-channel and per-tensor scales, static input scales beside them) read
as stored, both give the tokens and prompt log-probabilities of the same model with the dequantized
weights, on the torch path and through tritium's kernels (GEMV at decode, matmul at prefill, under the
interpreter on the CPU), and at tensor_parallel_size 2. W8A8 (``"fp8-dynamic"``, what a checkpoint that
quantizes its activations selects): tritium's kernels give the reference's numbers (each projection's input
quantized per token, :func:`tritium.ops.quant.dynamic_linear`)."""

import json
import os
import shutil

import pytest
import torch

from tritium import LLM, SamplingParams
from tritium.models.config import Fp8Blocks, ModelConfig, UnsupportedModelError
from tritium.ops.quant import FP8_DTYPE, dequantize, quantize_rows

from .conftest import PROMPTS, make_tiny_model
from .test_tensor_parallel import no_leaks, two_ranks  # noqa: F401 (fixtures)

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
PARAMS = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True, prompt_logprobs=1)
ON_GPU = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"


def _compressed_tensors(strategy: str, activations: bool = True) -> dict:
    """A compressed-tensors config: fp8 weights (``strategy``), and fp8 activations (static, per tensor)
    where ``activations`` (W8A8, as llm-compressor's FP8 scheme writes it; else W8A16)."""
    group = {"targets": ["Linear"], "weights": {"type": "float", "num_bits": 8, "strategy": strategy}}
    if activations:
        group["input_activations"] = {"type": "float", "num_bits": 8, "strategy": "tensor"}
    return {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
            "config_groups": {"group_0": group}}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """{name: directory}: "bf16" a tiny Llama (fp32 weights), "dequantized" the same with every projection
    weight replaced by its row-quantized-then-dequantized values (the reference), "fp8-channel" /
    "fp8-tensor" those weights stored in fp8 with their scales (tensor: one scale a tensor, values chosen
    so that it is exact) in compressed-tensors layout; "fp8-channel" declares fp8 activations (W8A8),
    "fp8-tensor" does not (weight-only)."""
    from safetensors.torch import load_file, save_file
    root = tmp_path_factory.mktemp("fp8")
    base = str(root / "bf16")
    os.makedirs(base)
    make_tiny_model(base, "llama")
    state = load_file(os.path.join(base, "model.safetensors"))
    out = {"bf16": base}
    variants = {"dequantized": {}, "fp8-channel": {}, "fp8-tensor": {}, "dequantized-tensor": {}, "autofp8": {}}
    for name, value in state.items():
        if name.endswith(".weight") and name.split(".")[-2] in PROJECTIONS:
            w8, scale = quantize_rows(value)
            variants["dequantized"][name] = dequantize(w8, scale)
            variants["fp8-channel"].update({name: w8, name + "_scale": scale[:, None].contiguous(),
                                            name.replace(".weight", ".input_scale"): torch.ones(1)})
            one = scale.max()  # per tensor: the rows' fp8 values under one scale
            w8t = (dequantize(w8, scale) / one).to(FP8_DTYPE)
            variants["fp8-tensor"].update({name: w8t, name + "_scale": one.reshape(1)})
            variants["autofp8"].update({name: w8t.clone(), name + "_scale": one.reshape(()).clone(),  # 0-d scalars
                                        name.replace(".weight", ".input_scale"): torch.tensor(0.5)})
            variants["dequantized-tensor"][name] = w8t.float() * one
        else:
            for v in variants.values():
                v[name] = value
    for name, tensors in variants.items():
        path = str(root / name)
        shutil.copytree(base, path)
        save_file(tensors, os.path.join(path, "model.safetensors"))
        qc = None
        if name.startswith("fp8"):
            qc = _compressed_tensors(name.split("-")[1], activations=name == "fp8-channel")
        elif name == "autofp8":  # AutoFP8's format (neuralmagic's older -FP8 models): per tensor, static inputs
            qc = {"quant_method": "fp8", "activation_scheme": "static", "ignored_layers": ["lm_head"]}
        if qc is not None:
            with open(os.path.join(path, "config.json")) as f:
                cfg = json.load(f)
            cfg["quantization_config"] = qc
            with open(os.path.join(path, "config.json"), "w") as f:
                json.dump(cfg, f)
        out[name] = path
    return out


def _run(path, **kw):
    # fp32 on a GPU too (its default for an fp32 checkpoint is bf16): kernels that sum in another order must
    # not move the log-probabilities by more than fp32 rounding
    base = dict(max_model_len=128, kv_cache_memory=32 << 20, max_num_seqs=4, dtype=torch.float32)
    with LLM(path, **dict(base, **kw)) as llm:
        return llm.generate(PROMPTS, PARAMS)


def _worst(outs, ref) -> float:
    """The largest difference between the prompt log-probabilities of two runs of the same prompts."""
    return max(abs(a.logprob - b.logprob) for o, r in zip(outs, ref)
               for a, b in zip(o.prompt_logprobs[1:], r.prompt_logprobs[1:]))


def _assert_same(outs, ref, tol):
    for o, r in zip(outs, ref):
        assert o.token_ids == r.token_ids
        worst = max((abs(a.logprob - b.logprob) for a, b in zip(o.prompt_logprobs[1:], r.prompt_logprobs[1:])),
                    default=0.0)
        assert worst <= tol, worst


@pytest.fixture(scope="module")
def reference(checkpoints):
    return {name: _run(checkpoints[name]) for name in ("dequantized", "dequantized-tensor")}


@pytest.mark.parametrize("source", ["bf16", "fp8-channel", "fp8-tensor", "autofp8"])
def test_fp8_equals_the_dequantized_model(checkpoints, reference, source):
    """torch path (dequantize, then F.linear): the dequantized model's numbers exactly; a weight-only
    checkpoint's quantization_config selects fp8 by itself (a W8A8 one runs weight-only when asked)."""
    kw = {} if source == "fp8-tensor" else {"quantization": "fp8"}
    ref = reference["dequantized-tensor" if source in ("fp8-tensor", "autofp8") else "dequantized"]
    _assert_same(_run(checkpoints[source], **kw), ref, 1e-5)


@pytest.mark.parametrize("source", ["bf16", "fp8-channel"])
def test_fp8_through_tritium_kernels(checkpoints, reference, source):
    """The GEMV (decode) and tritium's matmul (prefill chunks) with the fp8 weights and their scales."""
    kw = dict(linear_backend="triton", op_backend="triton", attention_backend="torch")
    if not ON_GPU and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("tritium's kernels on the CPU need TRITON_INTERPRET=1")
    _assert_same(_run(checkpoints[source], quantization="fp8", **kw), reference["dequantized"], 1e-4)


@pytest.mark.serial  # starts rank processes: run alone, as tests/engine/test_tensor_parallel.py is
def test_fp8_tensor_parallel(checkpoints, reference, no_leaks, two_ranks):  # noqa: F811
    """TP=2 over gloo: the row-parallel ranks hold the whole rows' scales, so the model is the TP=1 one."""
    _assert_same(_run(checkpoints["fp8-channel"], quantization="fp8", tensor_parallel_size=2, comm="torch"),
                 reference["dequantized"], 1e-4)
    _assert_same(_run(checkpoints["bf16"], quantization="fp8", tensor_parallel_size=2, comm="torch"),
                 reference["dequantized"], 1e-4)
    # W8A8: each row-parallel rank quantizes its own slice of a row (a scale per slice), so TP=2 is not the
    # TP=1 model bit for bit (0.38 apart in the log-probabilities of this tiny random model, where W8A8 and
    # weight-only are 0.46 apart); the same tokens
    dynamic = _run(checkpoints["fp8-channel"], tensor_parallel_size=2, comm="torch")
    assert [o.token_ids for o in dynamic] == [o.token_ids for o in _run(checkpoints["fp8-channel"])]
    assert 0 < _worst(dynamic, reference["dequantized"]) < 1.0


def test_autofp8_checkpoint_selects_w8a8(checkpoints):
    """AutoFP8's config (quant_method fp8, no blocks, static activations) selects fp8-dynamic; its 0-d scales
    load and its static input scales go unused: the run equals the compressed-tensors per-tensor checkpoint's
    (the same fp8 weights and scales) run as W8A8."""
    from tritium.models.weights import load_hf_config
    assert load_hf_config(checkpoints["autofp8"]).quantization == "fp8-dynamic"
    _assert_same(_run(checkpoints["autofp8"]), _run(checkpoints["fp8-tensor"], quantization="fp8-dynamic"), 0.0)


def test_fp8_options_and_errors(checkpoints):
    with pytest.raises(ValueError, match="quantization must be None or one of 'fp8', 'fp8-dynamic', 'int4'"):
        LLM(checkpoints["bf16"], quantization="int8")
    with LLM(checkpoints["bf16"], quantization="fp8", max_model_len=64, kv_cache_memory=8 << 20) as llm:
        layer = llm.engine.model.layers[0]
        assert layer.qkv_proj.weight.dtype == FP8_DTYPE and layer.down_proj.weight_scale is not None
        assert llm.engine.model.lm_head.weight.dtype == llm.engine.model.dtype  # the LM head is not quantized


@pytest.mark.parametrize("qc,match", [
    ({"quant_method": "fp8", "weight_block_size": [128]}, "weight_block_size must be two positive integers"),
    ({"quant_method": "fp8", "weight_block_size": [128, 128], "fmt": "e5m2"}, "fmt 'e5m2'"),
    ({"quant_method": "fp8", "activation_scheme": "per-token"}, "activation_scheme 'per-token'"),
    ({"quant_method": "compressed-tensors", "format": "float-quantized",
      "config_groups": {"g": {"weights": {"type": "float", "num_bits": 8, "strategy": "block"}}}},
     "block_structure must be two positive integers"),
    ({"quant_method": "compressed-tensors", "format": "float-quantized",
      "config_groups": {"g": {"weights": {"type": "float", "num_bits": 8, "strategy": "block",
                                          "block_structure": [128, 128]}},
                        "h": {"weights": {"type": "float", "num_bits": 8, "strategy": "channel"}}}},
     "expected every group block-wise"),
    ({"quant_method": "gptq", "bits": 8, "group_size": 128}, "bits"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "'bitsandbytes'"),
    ({"quant_method": "compressed-tensors", "format": "pack-quantized",
      "config_groups": {"g": {"weights": {"type": "int", "num_bits": 8, "strategy": "channel", "symmetric": True}}}},
     "8"),
])
def test_unsupported_quantization_configs(qc, match):
    base = dict(model_type="llama", vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                num_attention_heads=2)
    with pytest.raises(UnsupportedModelError, match=match):
        ModelConfig.from_hf_dict(dict(base, quantization_config=qc))
    with pytest.raises(UnsupportedModelError, match="activations to 'int', 8 bits"):
        qc = _compressed_tensors("channel")
        qc["config_groups"]["group_0"]["input_activations"] = {"type": "int", "num_bits": 8}
        ModelConfig.from_hf_dict(dict(base, quantization_config=qc))


def test_quantization_configs_select_the_mode():
    base = dict(model_type="llama", vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                num_attention_heads=2)
    for qc, mode, blocks in ((_compressed_tensors("channel"), "fp8-dynamic", None),
                             (_compressed_tensors("tensor", False), "fp8", None),
                             ({"quant_method": "fbgemm_fp8"}, "fp8-dynamic", None), (None, None, None),
                             ({"quant_method": "fp8", "activation_scheme": "static"}, "fp8-dynamic", None),
                             (_block_config("fp8-block", (128, 64)), None, Fp8Blocks(128, 64, "_scale_inv")),
                             (_block_config("ct-block", (128, 64)), None, Fp8Blocks(128, 64, "_scale"))):
        cfg = ModelConfig.from_hf_dict(dict(base, quantization_config=qc))
        assert (cfg.quantization, cfg.fp8_blocks) == (mode, blocks)


# -- block-wise FP8 checkpoints (Qwen3-FP8, DeepSeek; compressed-tensors "block") ---------------------------

BLOCK = (48, 40)  # blocks that do not divide the tiny models' 64 / 128 / 256: partial blocks at the edges


def _block_config(kind: str, block=BLOCK) -> dict:
    if kind == "fp8-block":  # as Qwen's -FP8 releases write it
        return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": list(block)}
    group = {"targets": ["Linear"], "weights": {"type": "float", "num_bits": 8, "strategy": "block",
                                                "block_structure": list(block)},
             "input_activations": {"type": "float", "num_bits": 8, "strategy": "group", "group_size": 128,
                                   "dynamic": True}}
    return {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
            "config_groups": {"group_0": group}}


def _quantize_blocks(w: torch.Tensor, rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(float8 values, a scale per block, the weight they give) for one 2-D weight."""
    n, k = w.shape
    nb, kb = -(-n // rows), -(-k // cols)
    pad = torch.nn.functional.pad(w.float(), (0, kb * cols - k, 0, nb * rows - n)).reshape(nb, rows, kb, cols)
    scale = pad.abs().amax(dim=(1, 3)) / 448.0
    full = scale.repeat_interleave(rows, 0).repeat_interleave(cols, 1)[:n, :k]
    w8 = (w.float() / full).to(FP8_DTYPE)
    return w8, scale, w8.float() * full


@pytest.fixture(scope="module", params=["llama", "qwen3_moe"])
def block_checkpoints(request, tmp_path_factory):
    """(model type, {name: directory}): a tiny model whose projections (the experts' too; not the router, the
    embeddings or the LM head) are stored as float8 with a scale per 48 x 40 block, as "fp8-block" (quant_method
    fp8, ``weight_scale_inv``) and "ct-block" (compressed-tensors, ``weight_scale``), and "dequantized" with the
    fp32 weights those give."""
    from safetensors.torch import load_file, save_file
    model_type = request.param
    root = tmp_path_factory.mktemp(f"block-{model_type}")
    base = str(root / "base")
    os.makedirs(base)
    make_tiny_model(base, model_type)
    state = load_file(os.path.join(base, "model.safetensors"))
    variants = {"dequantized": {}, "fp8-block": {}, "ct-block": {}}
    for name, value in state.items():
        if name.endswith(".weight") and name.split(".")[-2] in PROJECTIONS:
            w8, scale, deq = _quantize_blocks(value, *BLOCK)
            variants["dequantized"][name] = deq
            variants["fp8-block"].update({name: w8, name + "_scale_inv": scale})
            variants["ct-block"].update({name: w8.clone(), name + "_scale": scale.clone()})
        else:
            for v in variants.values():
                v[name] = value
    out = {}
    for name, tensors in variants.items():
        path = str(root / name)
        shutil.copytree(base, path)
        save_file(tensors, os.path.join(path, "model.safetensors"))
        if name != "dequantized":
            with open(os.path.join(path, "config.json")) as f:
                cfg = json.load(f)
            cfg["quantization_config"] = _block_config(name)
            with open(os.path.join(path, "config.json"), "w") as f:
                json.dump(cfg, f)
        out[name] = path
    return model_type, out


def test_block_fp8_checkpoints_run_dequantized(block_checkpoints):
    """Both block-wise formats load dequantized (exactly: float8 value times fp32 scale) and give the
    dequantized model's tokens and prompt log-probabilities; the model runs in 16/32 bits (no quantization)."""
    model_type, paths = block_checkpoints
    ref = _run(paths["dequantized"])
    for kind in ("fp8-block", "ct-block"):
        assert ModelConfig.from_hf_dict(json.load(open(os.path.join(paths[kind], "config.json")))).quantization is None
        _assert_same(_run(paths[kind]), ref, 1e-5)


@pytest.mark.serial  # starts rank processes: run alone, as tests/engine/test_tensor_parallel.py is
def test_block_fp8_tensor_parallel(block_checkpoints, no_leaks, two_ranks):  # noqa: F811
    """TP=2 over gloo: each rank dequantizes only its shard (rows or columns that cut through 48 x 40 blocks,
    the experts' intermediate size 64 into 32 + 32 too) and the model is the dequantized one."""
    model_type, paths = block_checkpoints
    _assert_same(_run(paths["fp8-block"], tensor_parallel_size=2, comm="torch"), _run(paths["dequantized"]), 1e-4)


def test_fp8_moe_checkpoint_runs_weight_only_as_stored(tmp_path):
    """A compressed-tensors FP8 mixture of experts (per-channel float8 weights, the experts' too, and fp8 activations
    declared, as RedHatAI's -FP8-dynamic MoE releases): its config selects fp8 (weight-only: no W8A8 experts), the
    experts load as stored with their scales and unused input scales, and the model equals the 16-bit one quantized
    per row at load (the same values and scales)."""
    from safetensors.torch import load_file, save_file
    base, path = str(tmp_path / "base"), str(tmp_path / "fp8")
    os.makedirs(base)
    make_tiny_model(base, "qwen3_moe")
    state = load_file(os.path.join(base, "model.safetensors"))
    stored = {}
    for name, value in state.items():
        if name.endswith(".weight") and name.split(".")[-2] in PROJECTIONS:
            w8, scale = quantize_rows(value)
            stored.update({name: w8, name + "_scale": scale[:, None].contiguous(),
                           name.replace(".weight", ".input_scale"): torch.ones(1)})
        else:
            stored[name] = value
    shutil.copytree(base, path)
    save_file(stored, os.path.join(path, "model.safetensors"))
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = _compressed_tensors("channel", activations=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f)
    from tritium.models.weights import load_hf_config
    assert load_hf_config(path).quantization == "fp8"
    _assert_same(_run(path), _run(base, quantization="fp8"), 0.0)
    with pytest.raises(ValueError, match="quantization 'fp8-dynamic' is not supported for mixture-of-experts"):
        LLM(path, quantization="fp8-dynamic", max_model_len=64, kv_cache_memory=8 << 20)


def test_block_fp8_checkpoint_quantized_again_per_row(block_checkpoints):
    """quantization="fp8" on a block-wise checkpoint: its dequantized weights quantized per row as they load (the
    experts' too), the same model as the dequantized checkpoint quantized at load; the torch path, and tritium's
    kernels (the fp8 experts' Triton kernels: one sequence at a time, so that decode takes the per-slot path and
    prefill the sorted one)."""
    model_type, paths = block_checkpoints
    _assert_same(_run(paths["fp8-block"], quantization="fp8"), _run(paths["dequantized"], quantization="fp8"), 1e-5)
    if model_type == "qwen3_moe" and (ON_GPU or os.environ.get("TRITON_INTERPRET") == "1"):
        kw = dict(linear_backend="triton", op_backend="triton", attention_backend="torch", quantization="fp8",
                  max_num_seqs=1)
        _assert_same(_run(paths["fp8-block"], **kw), _run(paths["dequantized"], quantization="fp8"), 1e-4)
        # the start-up warm-up (on a GPU): the attention projections' dense paths, no MLP projection to warm
        with LLM(paths["fp8-block"], max_model_len=64, kv_cache_memory=8 << 20, **kw) as llm:
            assert llm.engine.model.warm_quantized(8) > 0


# -- W8A8: quantization="fp8-dynamic" ------------------------------------------------------------------------

def _kernel_backends() -> dict:
    """The ops and attention the W8A8 comparisons run under, for the reference and the kernels alike: a
    projection's input then differs between the two only by the fp32 rounding of the projections before it."""
    return dict(op_backend="triton" if ON_GPU or os.environ.get("TRITON_INTERPRET") == "1" else "torch",
                attention_backend="torch")


@pytest.fixture(scope="module")
def dynamic_reference(checkpoints):
    """The W8A8 model on the torch path: every projection is ``dynamic_linear`` (the reference)."""
    return _run(checkpoints["fp8-channel"], linear_backend="torch", **_kernel_backends())


def test_fp8_dynamic_is_selected_and_quantizes_activations(checkpoints, reference, dynamic_reference):
    """The W8A8 checkpoint runs fp8-dynamic by itself; quantizing the activations moves the log-probabilities
    off the weight-only model's, by what e4m3's rounding of the activations (2^-4 of a value at most) moves
    them, and no more."""
    with LLM(checkpoints["fp8-channel"], max_model_len=64, kv_cache_memory=8 << 20) as llm:
        assert llm.engine.model.quantization == "fp8-dynamic" and llm.engine.model.linear.dynamic_fp8
    worst = _worst(dynamic_reference, reference["dequantized"])  # 0.46 (CPU): logits of a random tiny model
    assert 1e-4 < worst < 1.0, worst


def test_fp8_dynamic_through_tritium_kernels(checkpoints, dynamic_reference, monkeypatch):
    """Per-token quantization then fp8 x fp8: the W8A8 GEMV at decode, tritium's matmul at prefill; the
    reference's tokens and log-probabilities. Under the interpreter the sums are exact fp32 ones (5e-3: an
    activation may cross an fp8 rounding boundary); a GPU's fp8 MMA sums in a shorter accumulator (relative
    1e-4), which moves some activations of the next projection across one, a step of up to 1/16 of a value in
    this 128-wide model
    (0.076 in the log-probabilities on the H200)."""
    if not ON_GPU and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("tritium's kernels on the CPU need TRITON_INTERPRET=1")
    from tritium.models import linear as linear_module
    calls = {"gemv": 0, "matmul": 0}  # decode through the W8A8 GEMV, prefill through the W8A8 matmul
    gemv_fn, dense_fn = linear_module.LinearDispatch._dynamic_gemv, linear_module.quantized_linear

    def counted_gemv(*a, **k):
        calls["gemv"] += 1
        return gemv_fn(*a, **k)

    def counted_dense(*a, **k):
        calls["matmul"] += bool(k.get("dynamic"))
        return dense_fn(*a, **k)
    monkeypatch.setattr(linear_module.LinearDispatch, "_dynamic_gemv", counted_gemv)
    monkeypatch.setattr(linear_module, "quantized_linear", counted_dense)
    kw = dict(linear_backend="triton", **_kernel_backends())
    tol = 0.2 if ON_GPU else 5e-3
    _assert_same(_run(checkpoints["fp8-channel"], **kw), dynamic_reference, tol)
    _assert_same(_run(checkpoints["bf16"], quantization="fp8-dynamic", **kw), dynamic_reference, tol)
    assert calls["gemv"] > 0 and calls["matmul"] > 0, calls


@pytest.mark.parametrize("linear_backend", ["triton", "torch"])
def test_fp8_dynamic_norms_quantize_as_they_write(checkpoints, monkeypatch, linear_backend):
    """``fuse_act_quant``: the RMSNorms before the QKV and gate/up projections and the SiLU-and-mul before a
    gated down projection write fp8 rows, each replacing one quantization by the projection (kernel launch or
    reference); the tokens and log-probabilities are those of the unfused run, bit for bit."""
    if linear_backend == "triton" and not ON_GPU and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("tritium's kernels on the CPU need TRITON_INTERPRET=1")
    import tritium.ops
    from tritium.models import linear as linear_module
    from tritium.ops import reference as reference_ops
    counts = {"projection": 0, "op": 0}

    def counted(fn, key, when):
        def run(*a, **k):
            counts[key] += when(a, k)
            return fn(*a, **k)
        return run
    # the projections' own quantizations: the kernel, or the reference product given a 16-bit x
    monkeypatch.setattr(linear_module, "quantize_activations_fp8",
                        counted(linear_module.quantize_activations_fp8, "projection", lambda a, k: True))
    monkeypatch.setattr(linear_module, "dynamic_linear", counted(
        linear_module.dynamic_linear, "projection", lambda a, k: isinstance(a[0], torch.Tensor)))
    for module in (tritium.ops, reference_ops):  # the op sets' norms and SiLU-and-mul asked to quantize
        for name in ("rms_norm", "silu_and_mul"):
            monkeypatch.setattr(module, name, counted(getattr(module, name), "op", lambda a, k: k.get("quantize", False)))
    kw = dict(linear_backend=linear_backend, **_kernel_backends())
    runs, outs = [], []
    for fuse in (False, True):
        counts.update(projection=0, op=0)
        # (no start-up warm-up: on a GPU it runs the quantizing kernels once more, with fuse_act_quant only)
        outs.append(_run(checkpoints["fp8-channel"], fuse_act_quant=fuse, warmup_attention=False, **kw))
        runs.append(dict(counts))
    unfused, fused = runs
    assert unfused["op"] == 0 and fused["op"] > 0, runs
    assert fused["projection"] + fused["op"] == unfused["projection"], runs
    _assert_same(outs[1], outs[0], 0.0 if not ON_GPU else 1e-6)


def test_fp8_dynamic_warm_up_runs_the_quantizing_kernels(checkpoints, monkeypatch):
    """The start-up warm-up of a W8A8 model (``LlamaModel.warm_quantized``, on a GPU under ``warmup_attention``)
    runs the dense paths and the quantizing SiLU-and-mul and RMSNorm kernels, and only with fuse_act_quant
    the latter two."""
    if not ON_GPU and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("tritium's kernels on the CPU need TRITON_INTERPRET=1")
    import tritium.ops
    asked = []
    for name in ("rms_norm", "silu_and_mul"):
        fn = getattr(tritium.ops, name)
        monkeypatch.setattr(tritium.ops, name, lambda *a, _f=fn, _n=name, **k: asked.append((_n, k.get("quantize")))
                            or _f(*a, **k))
    kw = dict(linear_backend="triton", **_kernel_backends())
    for fuse in (True, False):
        with LLM(checkpoints["fp8-channel"], max_model_len=64, kv_cache_memory=8 << 20, fuse_act_quant=fuse,
                 **kw) as llm:
            asked.clear()
            count = llm.engine.model.warm_quantized(8)
            dense = count - 2 * fuse
            assert dense > 0
            assert sorted(asked) == ([("rms_norm", True), ("silu_and_mul", True)] if fuse else []), asked
