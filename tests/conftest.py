"""Shared fixtures: the real LoCoMo file (from ../shared), the synthetic fixtures, and a
scripted OpenAI-style HTTP server."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
import tomllib
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml

from tests.ray_head import ray_address  # noqa: F401  (the session's Ray head, for every test)
from tmem_core.benchmarks import PreparedBenchmark
from tmem_core.llm import LoopbackServer
from tmem_core.llm._accounting_server import AccountingEndpoint
from tmem_core.retrieval import MiniLMEmbedder

ROOT = Path(__file__).resolve().parents[1]

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LOCOMO = Path(os.environ.get(
    "TMEM_LOCOMO_PATH", ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10_dev.json"))


def bundled_sweep(config: Path, tmp: Path) -> Path:
    """A copy of a bundled sweep file in `tmp`, where `tmp` stands in for every data source
    that is not on this machine (a cluster's data folder)."""
    text = config.read_text()
    for bench in tomllib.loads(text)["benchmarks"]:
        if "source" in bench and not Path(bench["source"]).exists():
            text = text.replace(f'"{bench["source"]}"', f'"{tmp}"')
    copy = tmp / config.name
    copy.write_text(text)
    return copy


def write_sweep(tmp: Path, name: str, benchmarks: list[dict[str, Any]],
                grid: dict[str, Any], **sections: dict[str, Any]) -> Path:
    """A sweep config `tmp/<name>.yaml` with its results under `tmp/results`: `benchmarks`,
    `grid` (on the embedded SmolLM2 unless it names backbones) and other sections
    (`methods`, `resources`)."""
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name, "results_dir": str(tmp / "results"), "benchmarks": benchmarks,
        "grid": {"backbones": ["smollm2"], **grid}, **sections}))
    return path


def sweep_on_own_ray(config: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """`python -m jobs.sweep config` on a Ray of its own, as `make run` does (with no
    RAY_ADDRESS, ray.init() would join any Ray already on the machine); it must succeed."""
    done = subprocess.run([sys.executable, "-m", "jobs.sweep", str(config)], cwd=ROOT,
                          env={**os.environ, "RAY_ADDRESS": "local"}, capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def endpoint() -> Iterator[AccountingEndpoint]:
    """The accounting endpoint with the local MiniLM embedder, for a module's tests."""
    embedder = MiniLMEmbedder()
    served = AccountingEndpoint(embedder.encode, embedder.model_id)
    yield served
    served.close()


@pytest.fixture(scope="session")
def locomo_path() -> Path:
    if not LOCOMO.exists():
        pytest.fail(f"LoCoMo data missing at {LOCOMO}: tests need ../shared beside the checkout")
    return LOCOMO


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES


@dataclasses.dataclass
class Step:
    """What the scripted HTTP server does for one call: wait, then answer `status`/`content`."""

    status: int = 200
    content: str = '{"answer": "ok", "confidence": 1}'
    delay_s: float = 0.0


class ScriptedServer:
    """An OpenAI-style chat server on 127.0.0.1 playing `steps` in order (the last repeats);
    a request whose last message is a key of `by_prompt` gets that step instead."""

    def __init__(self, steps: list[Step], by_prompt: dict[str, Step] | None = None) -> None:
        self.steps = steps
        self.by_prompt = by_prompt or {}
        self.calls = 0
        self.bodies: list[dict[str, Any]] = []
        self.keys: list[str] = []
        self._lock = threading.Lock()
        self._server = LoopbackServer(self._handler())

    @property
    def base_url(self) -> str:
        return self._server.base_url

    def close(self) -> None:
        self._server.close()

    def _next(self, body: dict[str, Any], authorization: str) -> Step:
        with self._lock:
            self.bodies.append(body)
            self.keys.append(authorization.removeprefix("Bearer "))
            self.calls += 1
            fallback = self.steps[min(self.calls, len(self.steps)) - 1]
            return self.by_prompt.get(body["messages"][-1]["content"], fallback)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                step = server._next(body, self.headers.get("Authorization", ""))
                time.sleep(step.delay_s)
                payload = _completion(step.content) if step.status == 200 else _failure(step)
                data = json.dumps(payload).encode()
                try:
                    self.send_response(step.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return Handler


def _completion(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def _failure(step: Step) -> dict[str, Any]:
    return {"error": {"message": f"scripted {step.status}", "type": "test", "code": step.status}}


def source_named(prepared: PreparedBenchmark) -> PreparedBenchmark:
    """`prepared` with its messages, sessions, replies and gold evidence under their source
    ids again (kept in each message's meta), for tests of what an adapter read."""
    meta = [json.loads(m or "{}") for m in prepared.messages.column("meta").to_pylist()]
    source = dict(zip(prepared.messages.column("msg_id").to_pylist(),
                      (m["source_id"] for m in meta), strict=True))
    messages = prepared.messages.to_pylist()
    for row, m in zip(messages, meta, strict=True):
        row.update(msg_id=m.pop("source_id"), session_id=m.pop("source_session", None),
                   reply_to=source.get(row["reply_to"]) if row["reply_to"] else None,
                   meta=json.dumps(m, sort_keys=True) if m else None)
    questions = prepared.questions.to_pylist()
    for row in questions:
        row["evidence_ids"] = [source[e] for e in row["evidence_ids"]]
    return dataclasses.replace(
        prepared, messages=pa.Table.from_pylist(messages, schema=prepared.messages.schema),
        questions=pa.Table.from_pylist(questions, schema=prepared.questions.schema))


def scripted_backbones(tmp: Path, server: ScriptedServer, name: str) -> Path:
    """A backbones file naming `server` backbone `name`, under a fresh model name (so no
    request-cache entry of an earlier test answers for it)."""
    path = tmp / f"backbones-{name}.toml"
    path.write_text(f'[backbones.{name}]\nbackend = "openai"\n'
                    f'model = "{name}-{uuid.uuid4().hex[:8]}"\n'
                    f'engine = {{ base_url = "{server.base_url}" }}\n')
    return path


@pytest.fixture
def scripted_server() -> Iterator[Callable[..., ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(steps: list[Step], by_prompt: dict[str, Step] | None = None) -> ScriptedServer:
        servers.append(ScriptedServer(steps, by_prompt))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def step() -> type[Step]:
    return Step


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Test files heaviest first (tests/costs.json, measured by perf/test_costs.py), so that
    the workers of `--dist loadfile` finish together; a file not measured yet goes after."""
    costs = json.loads((Path(__file__).parent / "costs.json").read_text())

    def heaviest_first(item: pytest.Item) -> tuple[float, bool]:
        measured = float(costs.get(item.path.relative_to(ROOT).as_posix(), 0.0))
        return -measured, item.get_closest_marker("slow") is None  # then files marked slow

    items.sort(key=heaviest_first)  # stable: a file's tests keep their order
