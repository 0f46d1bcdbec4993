"""Serving benchmark: the OpenAI-compatible server under load, against the offline engine in the same run.

    python -m tritium.bench serve [--out FILE] [--plot FILE] [--shape llama3-8b|tiny | --model PATH]
        [--tokenizer PATH] [--prompt-len 512] [--output-len 256] [--concurrency 1,8,32,64,128] [--poisson RATE]

A server process builds the model (the ``engine`` suite's Llama-3-8B shape with random bf16 weights, or a
checkpoint; the tokenizer of the default model unless ``--tokenizer``), measures the offline engine on it
first (``LLM.generate`` over the very engine it then serves): the prefill time of one prompt (one token
generated), the batch-1 decode step ((time of N tokens - time of 1) / (N - 1), as the engine suite) and
output tokens/s of one batch of each concurrency (prompts and lengths as below, prefill included); then it
serves that engine with ``tritium.server`` on a free local port.

This process is the load generator (asyncio, raw HTTP/1.1, no client library): each request is
``POST /v1/completions`` with ``--prompt-len`` random token ids, ``max_tokens`` = ``--output-len``,
``ignore_eos`` (fixed lengths), greedy, streamed with ``continuous_usage_stats`` so each chunk says how many
tokens it carries. At each concurrency c, c clients send requests back to back until ``max(2c, 8)`` are done
(two waves at large c); ``--poisson RATE`` adds a run with Poisson arrivals at RATE requests/s.

Per level: TTFT (send to the first chunk with a token), inter-token latency (ITL: each chunk's gap since
the previous chunk, spread over the tokens it carries; the engine hands out greedy decode windows of up to
8 tokens at once, so ``chunk_gap`` is reported too), time per output token (TPOT: (last - first) / (n - 1)
per request), p50 / p99 over all of them, output tokens/s and requests/s (from the first send to the last
finish). Targets (issue 14): tok/s at c=64 >= 0.9x the offline batch of 64; TTFT p50 at c=1 <= offline
prefill + 10 ms; ITL p50 at c=1 <= 1.1x the offline batch-1 decode step.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

import torch

from tritium.bench.args import UsageError, int_list, integer, output_file, positive
from tritium.bench.common import header, print_table
from tritium.bench.engine_common import SHAPES, Bench, batch1_step_ms, check_shape, engine_generate, timed
from tritium.engine import LLM, default_model_path
from tritium.engine.tokenizer import Tokenizer
from tritium.models import weights as weights_io
from tritium.server import serve

LEVELS = (1, 8, 32, 64, 128)


def add_arguments(parser) -> None:
    parser.add_argument("--shape", choices=sorted(SHAPES), default="llama3-8b",
                        help="random-weight model shape (default llama3-8b)")
    parser.add_argument("--model", default=None, help="a checkpoint instead: Hugging Face directory or .gguf file")
    parser.add_argument("--tokenizer", default=None,
                        help="tokenizer for random weights: a directory with tokenizer.json or a .gguf file "
                             "(default: the default model's)")
    parser.add_argument("--prompt-len", type=integer(1), default=512)
    # (a decode step is timed as (N new tokens - 1) / (N - 1))
    parser.add_argument("--output-len", type=integer(2), default=256)
    parser.add_argument("--concurrency", type=int_list(1), default=",".join(map(str, LEVELS)),
                        help="comma-separated levels")
    parser.add_argument("--requests", type=integer(1), default=None, help="requests per level (default max(2c, 8))")
    parser.add_argument("--poisson", type=positive, default=None, help="also a run with Poisson arrivals at RATE req/s")
    parser.add_argument("--poisson-requests", type=integer(1), default=64)
    parser.add_argument("--kv-cache-gib", type=positive, default=16.0)
    parser.add_argument("--decode-steps", type=integer(1), default=None,
                        help="engine decode_steps (default: the engine's)")
    parser.add_argument("--repeats", type=integer(1), default=3, help="offline batch-1 and prefill runs (median)")
    parser.add_argument("--plot", type=output_file, default=None,
                        help="PNG of latency and throughput vs concurrency (default: --out with .png; needs "
                             "matplotlib)")
    parser.add_argument("--server-timeout", type=positive, default=420.0,
                        help="seconds to wait for the server process to build, measure and listen")


# -- the server process --------------------------------------------------------------------------------------
def _load_tokenizer(path: str | None) -> Tokenizer:
    path = path or default_model_path()
    if weights_io.is_gguf(path):
        _, meta = weights_io.read_gguf(path)
        return Tokenizer.from_gguf_metadata(meta)
    tokenizer = Tokenizer.from_hf_dir(path)
    if tokenizer is None:
        raise SystemExit(f"--tokenizer: no tokenizer.json in {path}")
    return tokenizer


def _server_main(config: dict) -> None:
    """Build the model, measure it offline, write the results to ``config["offline_out"]``, serve it."""
    args = argparse.Namespace(**config["args"])
    levels = config["levels"]
    args.new_tokens, args.max_model_len = args.output_len, None
    bench = Bench(args)
    # random weights: text comes from the default model's tokenizer (or --tokenizer)
    tokenizer = None if args.model else _load_tokenizer(args.tokenizer)
    start = time.perf_counter()
    llm = bench.llm("triton" if bench.device.type == "cuda" else "torch", max(levels), tokenizer,
                    **({"decode_steps": args.decode_steps} if args.decode_steps is not None else {}))
    engine = llm.engine
    build_s = time.perf_counter() - start
    print(f"[server] engine built in {build_s:.1f} s", flush=True)
    offline = _offline(bench, llm, levels, args)
    offline["build_seconds"] = build_s
    offline["prompt_vocab"] = min(engine.model_config.vocab_size, engine.tokenizer.vocab_size if engine.tokenizer
                                  else engine.model_config.vocab_size)
    offline["engine"] = {k: str(v) for k, v in vars(engine.config).items()}
    with open(config["offline_out"], "w") as f:
        json.dump(offline, f)
    serve(engine, host="127.0.0.1", port=config["port"], model_name="bench", log_level="warning")


def _offline(bench: Bench, llm: LLM, levels: list[int], args) -> dict:
    """Offline figures on the engine about to be served: prefill, batch-1 step, batch throughput per level."""
    device = bench.device
    generate = engine_generate(llm)
    steps = batch1_step_ms(bench, generate, args.repeats)
    prefill = sorted(timed(lambda r=r: generate(bench.prompts(1, 500 + r), 1), device) * 1e3
                     for r in range(max(args.repeats, 5)))
    out = {"prefill_ms": prefill[len(prefill) // 2], "prefill_ms_all": prefill,
           "batch1_decode_ms": steps[len(steps) // 2], "batch1_decode_ms_all": steps, "batch": {}}
    for b in levels:
        generate(bench.prompts(b, 3000 + b), 2)  # warm-up at this batch (prefill shapes, graph bucket)
        seconds = timed(lambda: generate(bench.prompts(b, 4000 + b), args.output_len), device)
        out["batch"][str(b)] = {"seconds": seconds, "tokens_per_s": b * args.output_len / seconds}
        print(f"[server] offline batch {b}: {b * args.output_len / seconds:.0f} tok/s", flush=True)
    return out


# -- the load generator --------------------------------------------------------------------------------------
class _Request:
    """Timings of one streamed request."""

    def __init__(self):
        self.sent = 0.0
        self.chunks: list[tuple[float, int]] = []  # (arrival, tokens in the chunk)
        self.error: str | None = None

    @property
    def tokens(self) -> int:
        return sum(k for _, k in self.chunks)


async def _stream_request(port: int, body: bytes) -> _Request:
    rec = _Request()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        rec.sent = time.perf_counter()
        writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        await writer.drain()
        status = await reader.readline()
        if b" 200 " not in status:
            rec.error = (status + await reader.read()).decode(errors="replace")[:300]
            return rec
        while (await reader.readline()) not in (b"\r\n", b""):  # headers
            pass
        buf, done = b"", 0
        while True:
            size_line = await reader.readline()
            if not size_line:
                break
            size = int(size_line.strip() or b"0", 16)
            if size == 0:
                break
            buf += await reader.readexactly(size)
            await reader.readexactly(2)
            now = time.perf_counter()
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                if not event.startswith(b"data: ") or event == b"data: [DONE]":
                    continue
                data = json.loads(event[6:])
                if "error" in data:
                    rec.error = data["error"]["message"]
                    continue
                usage = data.get("usage") or {}
                total = usage.get("completion_tokens", done)
                if total > done:
                    rec.chunks.append((now, total - done))
                    done = total
    finally:
        writer.close()
    return rec


def _body(prompt: list[int], output_len: int) -> bytes:
    return json.dumps({"model": "bench", "prompt": prompt, "max_tokens": output_len, "temperature": 0,
                       "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True, "continuous_usage_stats": True}}).encode()


async def _fixed_concurrency(port: int, prompts: list[list[int]], output_len: int, concurrency: int) -> list[_Request]:
    queue = list(reversed(prompts))
    results = []

    async def client():
        while queue:
            results.append(await _stream_request(port, _body(queue.pop(), output_len)))

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return results


async def _poisson(port: int, prompts: list[list[int]], output_len: int, rate: float, seed: int = 0) -> list[_Request]:
    rng = random.Random(seed)
    tasks = []
    for prompt in prompts:
        tasks.append(asyncio.ensure_future(_stream_request(port, _body(prompt, output_len))))
        await asyncio.sleep(rng.expovariate(rate))
    return list(await asyncio.gather(*tasks))


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def summarize(records: list[_Request], output_len: int) -> dict:
    """Latency percentiles (ms) and throughput of one level's requests."""
    errors = [r.error for r in records if r.error]
    ok = [r for r in records if not r.error and r.chunks]
    ttft, itl, gaps, tpot, sizes = [], [], [], [], []
    for r in ok:
        ttft.append((r.chunks[0][0] - r.sent) * 1e3)
        for (t0, _), (t1, k) in zip(r.chunks, r.chunks[1:]):
            gaps.append((t1 - t0) * 1e3)
            itl.extend([(t1 - t0) * 1e3 / k] * k)
        sizes.extend(k for _, k in r.chunks)
        if r.tokens > 1:
            tpot.append((r.chunks[-1][0] - r.chunks[0][0]) * 1e3 / (r.tokens - 1))
    wall = (max(r.chunks[-1][0] for r in ok) - min(r.sent for r in ok)) if ok else float("nan")
    tokens = sum(r.tokens for r in ok)
    return {"requests": len(records), "errors": len(errors), "first_error": errors[0] if errors else None,
            "complete": sum(r.tokens == output_len for r in ok),
            "ttft_p50_ms": _pct(ttft, 50), "ttft_p99_ms": _pct(ttft, 99),
            "itl_p50_ms": _pct(itl, 50), "itl_p99_ms": _pct(itl, 99),
            "chunk_gap_p50_ms": _pct(gaps, 50), "chunk_gap_p99_ms": _pct(gaps, 99),
            "tokens_per_chunk_mean": sum(sizes) / len(sizes) if sizes else None,
            "tpot_p50_ms": _pct(tpot, 50), "tpot_p99_ms": _pct(tpot, 99),
            "output_tokens_per_s": tokens / wall, "requests_per_s": len(ok) / wall, "seconds": wall}


def _wait_ready(proc: subprocess.Popen, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout

    async def probe() -> bool:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return False
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        line = await reader.readline()
        writer.close()
        return b" 200 " in line

    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server process exited with {proc.returncode}")
        if asyncio.run(probe()):
            return
        time.sleep(0.5)
    raise SystemExit(f"the server did not come up in {timeout} s")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args) -> dict:
    levels = args.concurrency
    if args.model is None:  # (the server process builds the model: refused here, before it starts)
        check_shape(args.shape)
    if args.tokenizer is not None and not os.path.exists(args.tokenizer):
        raise UsageError(f"--tokenizer: {args.tokenizer} does not exist")
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        config = {"args": vars(args), "levels": levels, "port": port, "offline_out": os.path.join(tmp, "offline.json")}
        proc = subprocess.Popen([sys.executable, "-m", "tritium.bench.serve", json.dumps(config)])
        try:
            _wait_ready(proc, port, args.server_timeout)
            with open(config["offline_out"]) as f:
                offline = json.load(f)
            result = _load(args, levels, port, offline)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    _report(result)
    plot = args.plot or (os.path.splitext(args.out)[0] + ".png" if args.out else None)
    if plot:
        _plot(result, plot)
    return result


def _load(args, levels: list[int], port: int, offline: dict) -> dict:
    # prompt token ids: ones the tokenizer knows (the random model's vocabulary may be larger: 128k vs 49k)
    high = offline["prompt_vocab"]
    g = torch.Generator().manual_seed(1234)

    def prompts(n):
        return torch.randint(0, high, (n, args.prompt_len), generator=g).tolist()

    asyncio.run(_fixed_concurrency(port, prompts(2), 4, 2))  # warm-up
    runs = {}
    for c in levels:
        n = args.requests or max(2 * c, 8)
        records = asyncio.run(_fixed_concurrency(port, prompts(n), args.output_len, c))
        runs[str(c)] = summarize(records, args.output_len)
        s = runs[str(c)]
        print(f"concurrency {c}: {s['output_tokens_per_s']:.0f} tok/s, TTFT p50 {s['ttft_p50_ms']:.1f} ms, "
              f"ITL p50 {s['itl_p50_ms']:.2f} ms, errors {s['errors']}", flush=True)
    poisson = None
    if args.poisson:
        records = asyncio.run(_poisson(port, prompts(args.poisson_requests), args.output_len, args.poisson))
        poisson = dict(summarize(records, args.output_len), rate=args.poisson)
    dev = torch.device("cuda") if torch.cuda.is_available() else None
    return {"header": header(dev), "suite": "serve", "shape": args.shape if args.model is None else args.model,
            "prompt_len": args.prompt_len, "output_len": args.output_len, "levels": levels, "offline": offline,
            "http": runs, "poisson": poisson}


def _report(result: dict) -> None:
    off = result["offline"]
    rows = []
    for c, s in result["http"].items():
        batch = off["batch"].get(c)
        rows.append({"c": int(c), "tok/s": s["output_tokens_per_s"],
                     "offline tok/s": batch["tokens_per_s"] if batch else None,
                     "ratio": s["output_tokens_per_s"] / batch["tokens_per_s"] if batch else None,
                     "req/s": s["requests_per_s"], "TTFT p50": s["ttft_p50_ms"], "TTFT p99": s["ttft_p99_ms"],
                     "ITL p50": s["itl_p50_ms"], "ITL p99": s["itl_p99_ms"], "gap p50": s["chunk_gap_p50_ms"],
                     "TPOT p50": s["tpot_p50_ms"], "errors": s["errors"]})
    h = result["header"]
    print_table(rows, list(rows[0]), title=(
        f"serve: {result['shape']}, prompt {result['prompt_len']}, output {result['output_len']} | "
        f"{h.get('gpu') or 'cpu'}, torch {h['torch']}, triton {h['triton']}, {h['date']}\n"
        f"offline: prefill {off['prefill_ms']:.2f} ms, batch-1 decode step {off['batch1_decode_ms']:.3f} ms (ms below)"))
    if result["poisson"]:
        p = result["poisson"]
        print(f"poisson {p['rate']} req/s: {p['output_tokens_per_s']:.0f} tok/s, TTFT p50/p99 {p['ttft_p50_ms']:.1f}/"
              f"{p['ttft_p99_ms']:.1f} ms, ITL p50/p99 {p['itl_p50_ms']:.2f}/{p['itl_p99_ms']:.2f} ms")
    targets = {}
    http, batch = result["http"], off["batch"]
    if "64" in http and "64" in batch:
        ratio = http["64"]["output_tokens_per_s"] / batch["64"]["tokens_per_s"]
        targets["throughput_c64_vs_offline_b64"] = {"value": ratio, "target": ">= 0.9", "met": ratio >= 0.9}
    if "1" in http:
        ttft, limit = http["1"]["ttft_p50_ms"], off["prefill_ms"] + 10
        targets["ttft_p50_c1_ms"] = {"value": ttft, "target": f"<= {limit:.2f} (prefill + 10)", "met": ttft <= limit}
        itl, limit = http["1"]["itl_p50_ms"], 1.1 * off["batch1_decode_ms"]
        targets["itl_p50_c1_ms"] = {"value": itl, "target": f"<= {limit:.3f} (1.1x decode step)", "met": itl <= limit}
        tpot = http["1"]["tpot_p50_ms"]
        targets["tpot_p50_c1_ms"] = {"value": tpot, "target": f"<= {limit:.3f} (1.1x decode step)", "met": tpot <= limit}
    result["targets"] = targets
    for name, t in targets.items():
        print(f"target {name}: {t['value']:.3f} (target {t['target']}): {'met' if t['met'] else 'NOT met'}")


def _plot(result: dict, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: no plot ({path})")
        return
    levels = [int(c) for c in result["http"]]
    runs = [result["http"][str(c)] for c in levels]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for key, label in (("ttft_p50_ms", "TTFT p50"), ("ttft_p99_ms", "TTFT p99")):
        axes[0].plot(levels, [r[key] for r in runs], marker="o", label=label)
    axes[0].axhline(result["offline"]["prefill_ms"], color="gray", ls="--", label="offline prefill (1 prompt)")
    for key, label in (("itl_p50_ms", "ITL p50"), ("itl_p99_ms", "ITL p99"), ("tpot_p50_ms", "TPOT p50")):
        axes[1].plot(levels, [r[key] for r in runs], marker="o", label=label)
    axes[1].axhline(result["offline"]["batch1_decode_ms"], color="gray", ls="--", label="offline batch-1 step")
    axes[2].plot(levels, [r["output_tokens_per_s"] for r in runs], marker="o", label="HTTP")
    axes[2].plot(levels, [result["offline"]["batch"][str(c)]["tokens_per_s"] for c in levels], marker="s",
                 ls="--", label="offline, same batch")
    for ax, title, unit in zip(axes, ("time to first token", "inter-token latency", "output throughput"),
                               ("ms", "ms", "tokens/s")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    h = result["header"]
    fig.suptitle(f"tritium serve: {result['shape']}, prompt {result['prompt_len']}, output {result['output_len']} "
                 f"({h.get('gpu') or 'cpu'})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":  # the server process of run()
    _server_main(json.loads(sys.argv[1]))
