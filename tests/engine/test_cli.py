"""The ``tritium`` command: streamed and waited-for generation, the prompt from stdin, the interactive chat
(history kept, /reset, Ctrl-D), log options on every command, one-line errors for serve, perplexity against
transformers."""

import importlib.util
import io
import json
import re
import socket
import sys
import threading

import pytest
import torch

from tritium import LLM, LoRARequest, SamplingParams
from tritium import cli
from tritium.cli import _engine_kwargs, _params, _parser, _serve_engine_kwargs, main
from tritium.engine import LLMEngine
from tritium.engine.tokenizer import Tokenizer

from .conftest import HANG_BOUND_S
from .test_lora import write_adapter

pytestmark = pytest.mark.timeout(HANG_BOUND_S)


def run(capsys, monkeypatch, *args, stdin: str | None = None):
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_generate_streams_the_same_text(capsys, monkeypatch, tiny_models):
    path, _ = tiny_models["llama"]
    common = ["--model", path, "--max-tokens", "6", "--raw"]
    code, streamed, err = run(capsys, monkeypatch, "generate", *common, "w1 w2", "--quiet")
    assert code == 0 and err == ""  # --quiet: the answer only
    code, waited, err = run(capsys, monkeypatch, "generate", *common, "--no-stream", "w1 w2", "-v")
    assert code == 0 and streamed == waited and len(streamed.split()) == 6 and "tokens/s" in err
    code, from_stdin, _ = run(capsys, monkeypatch, "generate", *common, "-", "--log-level", "error", stdin="w1 w2")
    assert code == 0 and from_stdin == streamed


def test_streamed_chat_answer_is_stripped_as_when_waited_for(capsys):
    """A chat answer streamed prints what --no-stream prints (its text stripped) and gives the chat history the same:
    whitespace inside comes out once text follows it, at the ends never (a trailing "\\n\\n" was printed)."""
    class Streams:
        def generate_stream(self, prompt, params, on_prefill=None, lora_request=None):
            yield from ("  ", "\n Hi", " ", "", "\n", "there", " \n\n", "")

    assert cli._stream(Streams(), [1], SamplingParams(), strip=True) == "Hi \nthere"
    assert capsys.readouterr().out == "Hi \nthere\n"
    assert cli._stream(Streams(), [1], SamplingParams(), strip=False) == "  \n Hi \nthere \n\n"


def test_prompt_from_stdin_drops_its_line_end(monkeypatch):
    """`echo Hi | tritium generate -` sends the chat message "Hi", as `tritium generate Hi` does (the model answered
    the message with its newline differently); --raw sends stdin as it is, a completion's text."""
    for flags, text, want in (([], "What is 2+2?\n", "What is 2+2?"), ([], "a\n\nb\r\n\n", "a\n\nb"),
                              (["--raw"], "def f():\n", "def f():\n"), ([], "  x  ", "  x  ")):
        monkeypatch.setattr("sys.stdin", io.StringIO(text))
        assert cli._prompt_text(_parser().parse_args(["generate", *flags, "-"])) == want
    assert cli._prompt_text(_parser().parse_args(["generate", "Hi\n"])) == "Hi\n"  # an argument stays as given


def _answers(out: str) -> list[str]:
    """The answers printed by a chat session (each line starts with the input prompt "> ")."""
    lines = (re.sub(r"^(> )+", "", line) for line in out.split("\n"))
    return [line for line in lines if line and line != ">"]


def test_chat_keeps_history_and_resets(capsys, monkeypatch, tiny_models):
    path, _ = tiny_models["llama"]
    args = ["chat", "--model", path, "--max-tokens", "4"]
    code, out, err = run(capsys, monkeypatch, *args, stdin="w1 w2\nw3\n/reset\nw3\n")
    assert code == 0  # EOF (Ctrl-D) leaves
    answers = _answers(out)
    assert len(answers) == 3 and "history cleared" in err
    # the second turn saw the first (history); after /reset the same message is a first turn again
    code, fresh, _ = run(capsys, monkeypatch, *args, stdin="w3\n")
    assert _answers(fresh) == [answers[2]]
    history = [{"role": "user", "content": "w1 w2"}, {"role": "assistant", "content": answers[0]},
               {"role": "user", "content": "w3"}]
    assert LLM(path).chat(history, SamplingParams(max_tokens=4))[0].text.lstrip() == answers[1]
    code, _, err = run(capsys, monkeypatch, *args, "--max-model-len", "16", stdin="w1 " * 20 + "\n")
    assert code == 0 and "tritium: error:" in err and "/reset starts over" in err


def test_chat_template_kwargs_flag(capsys, monkeypatch, tiny_models):
    """--chat-template-kwargs JSON reaches generate's and chat's template (the tiny template appends w0 when
    enable_thinking is false) and serve's default; anything but a JSON object of variable names is a usage
    error naming the flag, and --raw (no template) with it a one-line error."""
    path, _ = tiny_models["llama"]
    flag = ["--chat-template-kwargs", '{"enable_thinking": false}']
    common = ["--model", path, "--max-tokens", "6", "--no-stream", "--quiet"]
    messages = [{"role": "user", "content": "w1 w2"}]
    llm = LLM(path)
    want = llm.chat(messages, SamplingParams(max_tokens=6), chat_template_kwargs={"enable_thinking": False})[0]
    assert want.prompt_token_ids[-1] == llm.tokenizer.encode("w0")[-1]
    code, out, _ = run(capsys, monkeypatch, "generate", *common, *flag, "w1 w2")
    assert code == 0 and out == want.text.strip() + "\n"
    code, out, _ = run(capsys, monkeypatch, "chat", "--model", path, "--max-tokens", "6", *flag, stdin="w1 w2\n")
    assert code == 0 and _answers(out) == [want.text.strip()]
    assert _parser().parse_args(["serve", *flag]).chat_template_kwargs == {"enable_thinking": False}
    assert _parser().parse_args(["serve"]).chat_template_kwargs is None
    for bad, message in (("{enable", "not JSON"), ("[1]", "must be an object"),
                         ('{"bos_token": 1}', "'bos_token' is set by the server")):
        with pytest.raises(SystemExit) as e:
            _parser().parse_args(["generate", "--chat-template-kwargs", bad, "x"])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "--chat-template-kwargs" in err and message in err, err
    code, out, err = run(capsys, monkeypatch, "generate", "--model", path, "--raw", *flag, "w1")
    assert code == 2 and out == "" and "--chat-template-kwargs" in err and err.count("\n") == 1
    code, out, err = run(capsys, monkeypatch, "generate", "--model", path, "--raw", "--system", "w2", "w1")
    assert code == 2 and out == "" and err == "tritium: error: --system has no chat template to reach with --raw\n"


def test_sampling_flags():
    for command in (["generate", "x"], ["chat"]):
        params = _params(_parser().parse_args([command[0], "--min-p", "0.1", "--repetition-penalty", "1.2",
                                               *command[1:]]))
        assert (params.min_p, params.repetition_penalty) == (0.1, 1.2)
        params = _params(_parser().parse_args(command))
        assert (params.min_p, params.repetition_penalty, params.response_format) == (0.0, 1.0, None)
        assert _params(_parser().parse_args([command[0], "--json", *command[1:]])).response_format == "json_object"


def test_json_schema_flag(tmp_path):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    (tmp_path / "s.json").write_text(json.dumps(schema))
    (tmp_path / "bad.json").write_text("{")
    (tmp_path / "loose.json").write_text(json.dumps({"type": "object", "properties": {"a": {"format": "date"}}}))
    params = _params(_parser().parse_args(["generate", "--json-schema", str(tmp_path / "s.json"), "x"]))
    assert (params.response_format, params.json_schema) == ("json_schema", schema)
    for args, message in ((["--json-schema", str(tmp_path / "missing.json")], "cannot read"),
                          (["--json-schema", str(tmp_path / "bad.json")], "is not JSON"),
                          (["--json-schema", str(tmp_path / "loose.json")], "format is not supported"),
                          (["--json", "--json-schema", str(tmp_path / "s.json")], "exclude each other"),
                          (["--choice", "a", "--regex", "b"], "--choice and --regex exclude each other"),
                          (["--regex", "(a"], "an unclosed group")):
        with pytest.raises(ValueError, match=message):
            _params(_parser().parse_args(["generate", *args, "x"]))
    params = _params(_parser().parse_args(["generate", "--choice", "yes", "--choice", "no", "x"]))
    assert (params.response_format, params.choices) == ("choice", ["yes", "no"])
    params = _params(_parser().parse_args(["chat", "--regex", r"\d+"]))
    assert (params.response_format, params.regex) == ("regex", r"\d+")
    (tmp_path / "old.py").write_text("def f():\n    return 1\n")
    params = _params(_parser().parse_args(["generate", "--prediction", str(tmp_path / "old.py"), "x"]))
    assert params.prediction == "def f():\n    return 1\n"
    with pytest.raises(ValueError, match="--prediction: cannot read"):
        _params(_parser().parse_args(["chat", "--prediction", str(tmp_path / "missing.py")]))


class _Exited(Exception):
    pass


def test_run_leaves_by_os_exit_after_a_stuck_teardown(monkeypatch, capsys):
    """The tritium command exits with main's status; where a teardown was left stuck on its thread (a lost
    peer's NCCL abort), by os._exit after flushing (a normal exit aborts on that thread: status 134), with
    an exception's traceback printed first."""
    def fake_exit(code):
        raise _Exited(code)

    monkeypatch.setattr(cli.os, "_exit", fake_exit)
    monkeypatch.setattr("sys.argv", ["tritium", "generate", "--model", "/no/such/model", "w1"])
    with pytest.raises(SystemExit) as e:
        cli.run()
    assert e.value.code == 2
    release = threading.Event()
    monkeypatch.setattr(cli.parallel, "_left_behind", [])
    cli.parallel._bounded(release.wait, 0.05, "a stuck teardown")  # left behind, logged, no raise
    release.set()
    assert cli.parallel.teardown_left_behind()
    with pytest.raises(_Exited) as e:
        cli.run()
    assert e.value.args == (2,) and "tritium: error: model path" in capsys.readouterr().err

    def broken(args):
        raise RuntimeError("boom")

    monkeypatch.setitem(cli.COMMANDS, "generate", broken)
    with pytest.raises(_Exited) as e:
        cli.run()
    assert e.value.args == (1,) and "RuntimeError: boom" in capsys.readouterr().err


def test_serve_errors_are_one_line(capsys, monkeypatch, tmp_path):
    code, out, err = run(capsys, monkeypatch, "serve", "--model", str(tmp_path / "missing"), "--port", "0")
    assert code == 2 and out == "" and err.startswith("tritium: error: ") and err.count("\n") == 1
    # TLS files are checked before the model loads
    (tmp_path / "key.pem").write_text("x")
    for args, message in ((["--ssl-keyfile", str(tmp_path / "key.pem")], "--ssl-keyfile and --ssl-certfile go"),
                          (["--ssl-keyfile", str(tmp_path / "key.pem"), "--ssl-certfile", str(tmp_path / "c.pem")],
                           "--ssl-certfile: no file")):
        code, out, err = run(capsys, monkeypatch, "serve", "--model", str(tmp_path / "missing"), *args)
        assert code == 2 and message in err and err.count("\n") == 1, err
    # so is the serve extra (a machine without uvicorn: the error names the extra to install)
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    code, out, err = run(capsys, monkeypatch, "serve", "--model", str(tmp_path / "missing"), "--port", "0")
    assert code == 2 and "serving needs the 'serve' extra: pip install 'tritium[serve]'" in err, err
    # so is the directory of stored responses
    code, out, err = run(capsys, monkeypatch, "serve", "--model", str(tmp_path / "missing"), "--responses-dir",
                         str(tmp_path / "key.pem"))
    assert code == 2 and "--responses-dir: " in err and "cannot hold the stored responses" in err, err
    # and where to listen: a port in use, out of range, a host that does not resolve
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        for args, message in ((["--port", str(busy.getsockname()[1])], "cannot listen on 127.0.0.1:"),
                              (["--port", "70000"], "--port must be an int in [0, 65535]"),
                              (["--host", "no.such.host.invalid"], "--host 'no.such.host.invalid' does not resolve")):
            code, out, err = run(capsys, monkeypatch, "serve", "--model", str(tmp_path / "missing"), *args)
            assert code == 2 and message in err and err.count("\n") == 1, err
    args = _parser().parse_args(["serve", "--allowed-origins", "https://a.example", "--allowed-origins", "*"])
    assert args.allowed_origins == ["https://a.example", "*"]
    assert _parser().parse_args(["serve"]).allowed_origins is None


def test_errors_name_the_flags_and_files(capsys, monkeypatch, tmp_path, tiny_models):
    """A library error naming a keyword argument is printed with the flag that sets it; perplexity's file that
    cannot be read as text (a directory, not UTF-8) is one line naming it, not a traceback."""
    path, _ = tiny_models["llama"]
    for args, message in ((["serve", "--model", path, "--max-num-seqs", "0"], "--max-num-seqs must be"),
                          (["serve", "--model", path, "--max-stored-responses", "0"], "--max-stored-responses must"),
                          (["generate", "--model", path, "--temperature", "-1", "w1"], "--temperature must be"),
                          (["generate", "--model", path, "--tp", "0", "w1"], "--tensor-parallel-size must be >= 1"),
                          (["chat", "--model", path, "--cp", "0"], "--context-parallel-size must be >= 1"),
                          (["generate", "--model", path, "--regex", "(", "w1"], "error: --regex: pattern '(': an")):
        if args[0] == "serve" and importlib.util.find_spec("uvicorn") is None:
            continue  # (a machine without the serve extra: that error comes first, test_serve_errors_are_one_line)
        code, out, err = run(capsys, monkeypatch, *args)
        assert code == 2 and message in err and err.count("\n") == 1, err
    (tmp_path / "bytes.txt").write_bytes(b"\xff\xfe not text")
    for name in (str(tmp_path), str(tmp_path / "bytes.txt")):
        code, out, err = run(capsys, monkeypatch, "perplexity", name, "--model", path)
        assert code == 2 and f"cannot read {name} as UTF-8 text" in err and err.count("\n") == 1, err
    code, out, err = run(capsys, monkeypatch, "perplexity", "-", "--model", path, stdin="w1")
    assert code == 2 and "error: stdin: 1 token(s); perplexity needs at least 2\n" in err and err.count("\n") == 1, err
    for args, message in ((["--context", "1"], "--context must be >= 2"), (["--stride", "0"], "--stride must be >= 1"),
                          (["--context", "8", "--stride", "8"], "--stride must be in [1, --context - 1 = 7]")):
        # checked before the model loads (there is none to load here)
        code, out, err = run(capsys, monkeypatch, "perplexity", "-", "--model", str(tmp_path / "missing"), *args,
                             stdin="w1 w2 w3")
        assert code == 2 and message in err and err.count("\n") == 1, err


def test_usage_errors_are_one_line(capsys, monkeypatch):
    """A flag argparse refuses (a bad value, an unknown flag or command, a missing prompt) is one line as the library's
    errors are, pointing to --help, not the usage block."""
    for args, message in ((["generate", "--max-tokens", "abc", "x"], "argument --max-tokens: invalid int value: 'abc'"),
                          (["generate"], "the following arguments are required: prompt (see tritium generate --help)"),
                          (["bogus"], "argument command: invalid choice: 'bogus'"),
                          (["chat", "--seed", "1.5"], "argument --seed: invalid int value: '1.5'"),
                          (["generate", "x", "--no-such-flag"], "unrecognized arguments: --no-such-flag")):
        with pytest.raises(SystemExit) as e:
            main(args)
        out, err = capsys.readouterr()
        assert e.value.code == 2 and out == "" and err.startswith("tritium: error: ") and message in err, err
        assert err.count("\n") == 1, err


def test_model_without_a_tokenizer_is_one_line(capsys, monkeypatch, tiny_models, tmp_path):
    """A model directory without tokenizer files loads (LLM takes token ids), but every command reads or writes text:
    one line naming what is missing (generate --raw and perplexity raised AttributeError)."""
    path, _ = tiny_models["llama"]
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).symlink_to(f"{path}/{name}")
    for args, stdin in ((["generate", "--raw", "--max-tokens", "2", "w1"], None), (["generate", "w1"], None),
                        (["chat"], "w1\n"), (["perplexity", "-"], "w1 w2 w3")):
        code, out, err = run(capsys, monkeypatch, *args, "--model", str(tmp_path), "--quiet", stdin=stdin)
        assert code == 2 and out == "" and err.count("\n") == 1, err
        assert err == f"tritium: error: model {str(tmp_path)!r} has no tokenizer (tokenizer.json beside its " \
                      f"weights), which {args[0]} needs to turn text into tokens and back\n", err


def test_dtype_reaches_the_engine(capsys, monkeypatch, tiny_models):
    """--dtype on every command: auto leaves the engine's choice (None), the others name the torch dtype, which
    the tokens/s line reports; any other value is a usage error (status 2) listing the choices."""
    path, _ = tiny_models["llama"]
    code, _, err = run(capsys, monkeypatch, "generate", "--model", path, "--max-tokens", "2", "--raw", "--dtype",
                       "bfloat16", "w1")
    assert code == 0 and ", bfloat16, attention " in err, err
    for command in (["generate", "x"], ["chat"], ["serve"]):
        for name, dtype in (("auto", None), ("float32", torch.float32), ("float16", torch.float16),
                            ("bfloat16", torch.bfloat16)):
            args = _parser().parse_args([command[0], "--dtype", name, *command[1:]])
            assert _engine_kwargs(args)["dtype"] is dtype
        assert _engine_kwargs(_parser().parse_args(command))["dtype"] is None
    with pytest.raises(SystemExit) as e:
        _parser().parse_args(["generate", "--dtype", "float64", "x"])
    assert e.value.code == 2 and "invalid choice: 'float64'" in capsys.readouterr().err


def test_serve_flags_reach_the_engine(tiny_models):
    """serve's engine flags: --no-prefix-caching turns the prefix cache off (on by default); --decode-steps and
    --kv-cache-memory are passed only when given, so the engine's defaults stay its own; --linear-backend (every
    command) names the projections' backend, none leaves the engine's choice, anything else is a usage error."""
    path, _ = tiny_models["llama"]
    default = _serve_engine_kwargs(_parser().parse_args(["serve", "--model", path]))
    assert default["enable_prefix_caching"] is True and "decode_steps" not in default and "kv_cache_memory" not in default
    assert default["linear_backend"] is None  # the engine's choice: auto on a GPU, torch on the CPU
    assert default["linear_cache"] is True
    args = _parser().parse_args(["serve", "--model", path, "--no-prefix-caching", "--decode-steps", "1",
                                 "--kv-cache-memory", str(4 << 20), "--max-num-seqs", "3", "--linear-backend", "torch",
                                 "--no-linear-cache"])
    kwargs = _serve_engine_kwargs(args)
    assert (kwargs["enable_prefix_caching"], kwargs["decode_steps"], kwargs["kv_cache_memory"],
            kwargs["max_num_seqs"], kwargs["linear_backend"], kwargs["linear_cache"]) == (False, 1, 4 << 20, 3,
                                                                                        "torch", False)
    with LLMEngine(path, **kwargs) as engine:
        assert not engine.block_manager.enable_prefix_caching and engine.config.decode_steps == 1
        assert engine.config.linear_backend == "torch" and engine.config.linear_cache is False
    for command in (["generate", "x"], ["chat"]):
        kwargs = _engine_kwargs(_parser().parse_args([command[0], "--linear-backend", "triton", "--no-linear-cache",
                                                      *command[1:]]))
        assert (kwargs["linear_backend"], kwargs["linear_cache"]) == ("triton", False)
    with pytest.raises(SystemExit):
        _parser().parse_args(["serve", "--linear-backend", "cublas"])
    assert default["batch_invariant"] is False
    assert _parser().parse_args(["serve"]).tool_call_parser == "auto"  # recognised from the template
    assert _parser().parse_args(["serve", "--tool-call-parser", "llama3_json"]).tool_call_parser == "llama3_json"
    assert _parser().parse_args(["serve", "--tool-call-parser", "pythonic"]).tool_call_parser == "pythonic"
    with pytest.raises(SystemExit):
        _parser().parse_args(["serve", "--tool-call-parser", "xml"])
    assert _parser().parse_args(["serve"]).reasoning_parser is None
    assert _parser().parse_args(["serve", "--reasoning-parser", "think"]).reasoning_parser == "think"
    for command in (["serve"], ["generate", "x"], ["chat"]):
        kwargs = _engine_kwargs(_parser().parse_args([command[0], "--batch-invariant", *command[1:]]))
        assert kwargs["batch_invariant"] is True
        assert "op_backend" not in kwargs  # the interpreter's torch-ops shortcut would contradict it


@pytest.mark.parametrize("command", [["generate", "x"], ["chat"], ["serve"], ["perplexity", "-"]],
                         ids=lambda c: c[0])
def test_no_check_finite_flag(command):
    """Every command takes --no-check-finite (EngineConfig.check_finite=False; a flag that turns a default off, as
    --no-linear-cache); without it the engine scans the weights for NaN and infinities."""
    assert _engine_kwargs(_parser().parse_args(command))["check_finite"] is True
    args = _parser().parse_args([command[0], "--no-check-finite", *command[1:]])
    assert _engine_kwargs(args)["check_finite"] is False


def test_perplexity_windows():
    """Every token but the first is scored exactly once, after at least one token of its window."""
    for n in (2, 3, 17, 60):
        for context in (2, 5, 16, 64):
            for stride in {1, context // 2 or 1, context - 1}:
                spans = cli.windows(n, context, stride)
                scored = [t for b, e, first in spans for t in range(first, e)]
                assert scored == list(range(1, n)), (n, context, stride)
                assert all(e - b <= context and b < first < e for b, e, first in spans)
                assert [b for b, _, _ in spans] == [i * stride for i in range(len(spans))]
    assert cli.windows(17, 16, 15) == [(0, 16, 1), (15, 17, 16)]
    with pytest.raises(ValueError, match="--stride must be in"):
        cli.windows(10, 4, 4)
    with pytest.raises(ValueError, match="--context must be >= 2"):
        cli.windows(10, 1, 1)


@pytest.mark.parametrize("context,stride,max_len", [(16, None, 16), (16, 5, None), (None, None, None)])
def test_perplexity_matches_transformers(capsys, monkeypatch, tmp_path, tiny_models, context, stride, max_len):
    """``tritium perplexity``: the strided windows' negative log-likelihood as transformers' logits give it; a
    window may fill the context."""
    path, hf = tiny_models["llama"]
    text = " ".join(f"w{i}" for i in range(1, 60))
    file = tmp_path / "text.txt"
    file.write_text(text)
    # float32 as the reference (auto is bfloat16 on a GPU for this float32 checkpoint)
    args = ["perplexity", str(file), "--model", path, "--json", "--dtype", "float32"]
    args += [] if context is None else ["--context", str(context)]
    args += [] if stride is None else ["--stride", str(stride)]
    args += [] if max_len is None else ["--max-model-len", str(max_len)]
    code, out, err = run(capsys, monkeypatch, *args)
    assert code == 0, err
    got = json.loads(out)
    ids = Tokenizer.from_hf_dir(path).encode(text)
    total, count = 0.0, 0
    for b, e, first in cli.windows(len(ids), got["context"], got["stride"]):
        with torch.no_grad():
            lp = hf(torch.tensor([ids[b:e]])).logits[0].float().log_softmax(-1)
        for t in range(first, e):
            total -= lp[t - b - 1, ids[t]].item()
            count += 1
    assert got["tokens"] == count == len(ids) - 1
    assert got["mean_nll"] == pytest.approx(total / count, rel=1e-4)
    code, _, err = run(capsys, monkeypatch, "perplexity", str(file), "--model", path, "--context", "9999")
    assert code == 2 and "--context 9999 is longer than the model's context of" in err
    for flag, message in (("--stride", "--stride must be in [1, --context - 1 = 15]"),
                          ("--context", "--context must be >= 2")):  # 0 is not "unset"
        code, _, err = run(capsys, monkeypatch, "perplexity", str(file), "--model", path, "--context", "16", flag,
                           "0")
        assert code == 2 and message in err, err


def test_speculative_flags(capsys, monkeypatch, tiny_models):
    """--num-speculative-tokens and the lookup bounds reach the engine from every command (off by default); a bad
    value is one line naming the field (status 2); generate with drafts prints plain greedy decoding's answer."""
    path, _ = tiny_models["llama"]
    for command in (["generate", "x"], ["chat"], ["serve"]):
        kw = _engine_kwargs(_parser().parse_args([command[0], "--num-speculative-tokens", "3", "--prompt-lookup-max",
                                                  "5", "--prompt-lookup-min", "1", *command[1:]]))
        assert (kw["num_speculative_tokens"], kw["prompt_lookup_max"], kw["prompt_lookup_min"]) == (3, 5, 1)
        default = _engine_kwargs(_parser().parse_args(command))
        assert default["num_speculative_tokens"] == 0 and default["speculative_model"] is None
    code, out, err = run(capsys, monkeypatch, "generate", "--model", path, "--num-speculative-tokens", "-1", "x")
    assert code == 2 and out == "" and "--num-speculative-tokens must be" in err and err.count("\n") == 1, err
    prompt = "w1 w2 w3 w1 w2 w3 w1 w2"
    answers = []
    for extra in ([], ["--num-speculative-tokens", "4", "--prompt-lookup-min", "1"]):
        code, out, _ = run(capsys, monkeypatch, "generate", "--model", path, "--max-tokens", "24", "--raw",
                           "--dtype", "float32", "--no-stream", *extra, prompt)
        assert code == 0
        answers.append(out)
    assert answers[0] == answers[1] and answers[0].strip()
    # a draft model (the model itself): the same answer; without a draft length, one line naming both
    code, out, _ = run(capsys, monkeypatch, "generate", "--model", path, "--max-tokens", "24", "--raw", "--dtype",
                       "float32", "--no-stream", "--num-speculative-tokens", "3", "--speculative-model", path, prompt)
    assert code == 0 and out == answers[0]
    code, out, err = run(capsys, monkeypatch, "generate", "--model", path, "--speculative-model", path, "x")
    assert code == 2 and out == "" and "num_speculative_tokens" in err and err.count("\n") == 1, err


def test_kv_cache_flags_reach_the_engine(capsys):
    """--kv-cache-dtype and --kv-cache-scales on every command: auto by default; anything else is a usage error."""
    for command in (["generate", "x"], ["chat"], ["serve"]):
        default = _engine_kwargs(_parser().parse_args(command))
        assert (default["kv_cache_dtype"], default["kv_cache_scales"]) == ("auto", "auto")
        kwargs = _engine_kwargs(_parser().parse_args([command[0], "--kv-cache-dtype", "fp8", "--kv-cache-scales",
                                                      "checkpoint", *command[1:]]))
        assert (kwargs["kv_cache_dtype"], kwargs["kv_cache_scales"]) == ("fp8", "checkpoint")
    with pytest.raises(SystemExit) as e:
        _parser().parse_args(["serve", "--kv-cache-scales", "max"])
    assert e.value.code == 2 and "invalid choice: 'max'" in capsys.readouterr().err


def test_chat_template_flag(capsys, monkeypatch, tmp_path, tiny_models):
    """--chat-template (a Jinja file or its text, every command) replaces the model's template in the engine:
    generate's prompt is the new template's rendering; a file that is neither, or a template that does not parse,
    is a usage error naming the flag; LLM(chat_template=...) does the same offline, checked before loading."""
    path, _ = tiny_models["llama"]
    text = "{% for m in messages %}w7 {{ m['content'] }} {% endfor %}{% if add_generation_prompt %}w8{% endif %}"
    template = tmp_path / "template.jinja"
    template.write_text(text)
    for value in (str(template), text):
        for command in (["generate", "x"], ["chat"], ["serve"]):
            assert _engine_kwargs(_parser().parse_args([command[0], "--chat-template", value, *command[1:]]))[
                "chat_template"] == text
    assert _engine_kwargs(_parser().parse_args(["serve"]))["chat_template"] is None
    llm = LLM(path, chat_template=text)
    want = llm.chat([{"role": "user", "content": "w1 w2"}], SamplingParams(max_tokens=6))[0]
    assert want.prompt_token_ids == llm.tokenizer.encode("w7 w1 w2 w8", add_special_tokens=False)
    code, out, _ = run(capsys, monkeypatch, "generate", "--model", path, "--max-tokens", "6", "--no-stream", "--quiet",
                       "--chat-template", str(template), "w1 w2")
    assert code == 0 and out == want.text.strip() + "\n"
    for bad, message in ((str(tmp_path / "missing.jinja"), "no file"),
                         ("{% for m in messages %}", "TemplateSyntaxError: Unexpected end of template")):
        with pytest.raises(SystemExit) as e:
            _parser().parse_args(["generate", "--chat-template", bad, "x"])
        err = capsys.readouterr().err
        assert e.value.code == 2 and "--chat-template" in err and message in err, err
    with pytest.raises(ValueError, match="chat template: TemplateSyntaxError"):
        LLM(path, chat_template="{% if %}")
    with pytest.raises(ValueError, match="chat_template must be None or the Jinja text"):
        LLM(path, chat_template=" ")


def test_lora_flags(capsys, monkeypatch, tiny_models, tmp_path):
    """generate --lora DIR answers with the adapter (its rank sizes the slot); serve's --lora-modules and
    --allow-runtime-lora turn LoRA on with --max-loras / --max-lora-rank; a bad --lora is one line."""
    path, model = tiny_models["llama"]
    adapter = str(tmp_path / "ad")
    write_adapter(adapter, model, rank=32, alpha=64, seed=4)
    code, out, _ = run(capsys, monkeypatch, "generate", "--model", path, "--max-tokens", "6", "--raw", "--quiet",
                       "--dtype", "float32", "--lora", adapter, "w7 w8 w9")
    assert code == 0
    with LLM(path, dtype=torch.float32, enable_lora=True, max_lora_rank=32) as llm:
        want = llm.generate("w7 w8 w9", SamplingParams(max_tokens=6), lora_request=LoRARequest("ad", adapter))
        assert out.strip() == want[0].text.strip() != llm.generate("w7 w8 w9", SamplingParams(max_tokens=6))[0].text
    code, _, err = run(capsys, monkeypatch, "generate", "--model", path, "--lora", str(tmp_path), "x")
    assert code == 2 and "adapter_config.json" in err and len(err.strip().splitlines()) == 1
    kwargs = _serve_engine_kwargs(_parser().parse_args(["serve", "--lora-modules", f"a={adapter}", "--max-loras", "2",
                                                        "--max-lora-rank", "32"]))
    assert (kwargs["enable_lora"], kwargs["max_loras"], kwargs["max_lora_rank"]) == (True, 2, 32)
    assert _serve_engine_kwargs(_parser().parse_args(["serve", "--allow-runtime-lora"]))["enable_lora"] is True
    assert "enable_lora" not in _serve_engine_kwargs(_parser().parse_args(["serve"]))


def test_perplexity_stdin_not_utf8_is_named(capsys, monkeypatch, tmp_path, tiny_models):
    """Bytes on stdin that are not UTF-8 are one line naming stdin, as a file's are (the console decoder kept them
    as surrogates, which the tokenizer then refused as "a lone UTF-16 surrogate")."""
    path, _ = tiny_models["llama"]
    for errors in ("surrogateescape", "strict"):  # (a C locale's stdin; a UTF-8 one's)
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"w1 \xff w2 w3"), "utf-8", errors))
        code = main(["perplexity", "-", "--model", path])
        out, err = capsys.readouterr()
        assert code == 2 and "error: file: cannot read stdin as UTF-8 text: 'utf-8' codec can't decode byte 0xff" \
            in err and err.count("\n") == 1, err
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO("w1 w2 w3".encode()), "utf-8"))
    assert main(["perplexity", "-", "--model", path, "--json"]) == 0
    plain = json.loads(capsys.readouterr()[0])
    assert plain["tokens"] == 2
    # a UTF-8 byte-order mark (Windows editors write one) is not text: not scored, on stdin or in a file
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbfw1 w2 w3"), "utf-8"))
    assert main(["perplexity", "-", "--model", path, "--json"]) == 0
    assert json.loads(capsys.readouterr()[0]) == plain
    file = tmp_path / "bom.txt"
    file.write_bytes(b"\xef\xbb\xbfw1 w2 w3")
    assert main(["perplexity", str(file), "--model", path, "--json"]) == 0
    assert json.loads(capsys.readouterr()[0]) == plain
