"""A real ``tritium serve`` process per test module, on a free port, always stopped (SIGTERM, then kill).

``start_server(model, *args)`` launches ``python -m tritium.cli serve --model MODEL --port P ...`` with its
log in a temporary file, waits for ``GET /health`` (the log is shown if it never comes up) and returns a
:class:`Server` (``url``, ``base_url`` for the openai client, ``stop()``).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, args: list[str], env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = self.url + "/v1"
        self.log = tempfile.NamedTemporaryFile("w+", prefix="tritium-serve-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([sys.executable, "-m", "tritium.cli", "serve", "--port", str(self.port), *args],
                                     stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})

    def wait_ready(self, timeout: float = 120.0) -> "Server":
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}:\n{self.output()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the server did not answer /health in {timeout} s:\n{self.output()}")

    def output(self) -> str:
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; the exit status (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode

    def close(self) -> None:
        self.stop()
        self.log.close()
        os.unlink(self.log.name)

    # -- plain HTTP (no client library), for status codes and raw bodies -----------------------------------
    def request(self, method: str, path: str, body=None, headers: dict | None = None, raw: bytes | None = None):
        """(status, decoded JSON or text) of one request."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        try:
            return status, json.loads(text)
        except json.JSONDecodeError:
            return status, text

    def metrics(self) -> dict[str, float]:
        """Prometheus samples by name (labels dropped: one model per server)."""
        _, text = self.request("GET", "/metrics")
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name.split("{")[0]] = out.get(name.split("{")[0], 0.0) + float(value)
        return out


@pytest.fixture(scope="module")
def start_server():
    """``start_server(*cli_args) -> Server``, ready; every server of the module is stopped at its end."""
    servers = []

    def start(*args, env=None):
        server = Server(list(args), env)
        servers.append(server)
        return server.wait_ready()

    yield start
    for server in servers:
        server.close()
