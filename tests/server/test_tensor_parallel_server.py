"""``tritium serve --tp 2`` (CPU, gloo): answers equal the offline single-rank engine's, streamed and not; a bad
request gets its 4xx and the ranks keep serving; SIGTERM stops the server and its worker process, leaving
no shared memory."""

import os
import signal

import psutil
import pytest
import torch

from engine.conftest import PROMPTS, make_tiny_model
from tritium import LLM, SamplingParams

pytest.importorskip("fastapi", reason="needs the serve extra: pip install 'tritium[serve]'")
openai = pytest.importorskip("openai")
pytestmark = pytest.mark.timeout(180)

MAX_LEN = 128


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("serve-tp-llama"))
    make_tiny_model(path, "llama")
    return path


def test_serve_tp2(start_server, model_dir):
    if torch.cuda.is_available() and torch.cuda.device_count() < 2:
        pytest.skip("a GPU machine needs 2 GPUs for --tp 2 (without a GPU the ranks run on the CPU, over gloo)")
    with LLM(model_dir, dtype=torch.float32, max_model_len=MAX_LEN) as llm:
        expected = [o.text for o in llm.generate(PROMPTS, SamplingParams(max_tokens=8))]
    segments = {n for n in os.listdir("/dev/shm") if n.startswith("tritium")}
    server = start_server("--model", model_dir, "--tp", "2", "--comm", "torch", "--max-model-len", str(MAX_LEN),
                          "--served-model-name", "tiny", "--dtype", "float32")  # as the offline engine
    workers = psutil.Process(server.proc.pid).children(recursive=True)
    assert workers, "the server should have started a worker rank"
    client = openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=60)
    for prompt, text in zip(PROMPTS, expected):
        out = client.completions.create(model="tiny", prompt=prompt, max_tokens=8, temperature=0)
        assert out.choices[0].text == text
    stream = client.completions.create(model="tiny", prompt=PROMPTS[1], max_tokens=8, temperature=0, stream=True)
    assert "".join(chunk.choices[0].text for chunk in stream) == expected[1]
    status, body = server.request("POST", "/v1/completions", {"model": "tiny", "prompt": "w1", "max_tokens": -1})
    assert status == 400 and body["error"]["param"] == "max_tokens"
    assert client.completions.create(model="tiny", prompt=PROMPTS[0], max_tokens=8,
                                     temperature=0).choices[0].text == expected[0]
    server.proc.send_signal(signal.SIGTERM)
    assert server.stop(timeout=30) in (0, -signal.SIGTERM), server.output()
    psutil.wait_procs(workers, timeout=15)
    assert not [w for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]
    assert {n for n in os.listdir("/dev/shm") if n.startswith("tritium")} <= segments
