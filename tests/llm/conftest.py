"""Fixtures of the LLM-layer tests: a scripted fake engine, a scripted OpenAI-style HTTP server,
and one real embedded SmolLM2 server shared by the tests that generate for real."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tmem_core.llm import (
    BackboneConfig,
    ChatRequest,
    ChatResponse,
    EmbeddedBackend,
    Usage,
    get_backbone,
    make_backend,
)
from tmem_core.llm._types import output_response

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "maxLength": 60},
        "confidence": {"type": "integer", "minimum": 0, "maximum": 10},
    },
    "required": ["answer", "confidence"],
    "additionalProperties": False,
}

Answer = Callable[[ChatRequest, int], str]


class FakeBackend:
    """An engine whose output text is `answer(request, call_number)`; it counts its calls."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.calls = 0
        self.sent: list[ChatRequest] = []

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return self.generate(requests)

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        responses = []
        for request in requests:
            self.calls += 1
            self.sent.append(request)
            text = self.answer(request, self.calls)
            responses.append(output_response(text, Usage(10, 5), 0.01, request.schema))
        return responses

    def close(self) -> None:
        return None


@pytest.fixture
def fake_backend() -> type[FakeBackend]:
    return FakeBackend


@pytest.fixture
def answer_schema() -> dict[str, Any]:
    return ANSWER_SCHEMA


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
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

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


def small_embedded(**engine: Any) -> BackboneConfig:
    """The smollm2 backbone with a smaller server (4 slots) and test overrides."""
    backbone = get_backbone("smollm2")
    settings = {"n_parallel": 4, "n_ctx": 8192, **engine}
    return dataclasses.replace(backbone, engine=dataclasses.replace(backbone.engine, **settings))


@pytest.fixture
def embedded_backbone() -> Callable[..., BackboneConfig]:
    return small_embedded


@pytest.fixture(scope="session")
def embedded() -> Iterator[EmbeddedBackend]:
    """One real SmolLM2 server for the tests that only read from it."""
    backend = make_backend(small_embedded())
    assert isinstance(backend, EmbeddedBackend)
    yield backend
    backend.close()
