"""A local OpenAI-compatible endpoint that answers with the bound `LLM` and counts every token.

External memory systems (their own clients, prompts and retries) are pointed at
`AccountingEndpoint.base_url` with `api_key`. Chat completions become `ChatRequest`s for the
LLM bound with `bind(llm)` (the pipeline's proxy of the current stage, so every call is
recorded where the pipeline records calls); embeddings come from a local embedder. A binding
counts what passed through it (`EndpointStats`) and keeps a `CallRecord` per chat call.
An error of the bound LLM is answered as HTTP 5xx with a JSON error, so the external system
fails visibly; the binding keeps the error too (a system may swallow it).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol

import numpy as np

from tmem_core import DataError, EngineError
from tmem_core.llm._accounting import CallRecord
from tmem_core.llm._config import BackboneConfig
from tmem_core.llm._loopback import LoopbackServer
from tmem_core.llm._tokens import TokenCounter, tokenizer_counter
from tmem_core.llm._types import ChatMessage, ChatRequest, ChatResponse, Role, Sampling

Embed = Callable[[Sequence[str]], np.ndarray]
_ROLES: frozenset[str] = frozenset(("system", "user", "assistant"))
_STATUS = {"timeout": 504, "rate_limit": 503, "request": 502}  # any other error kind: 502


class BoundLLM(Protocol):
    """The `LLM` protocol of `tmem_core.methods` (kept here so this layer imports no method)."""

    @property
    def backbone(self) -> BackboneConfig: ...

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]: ...


@dataclass
class EndpointStats:
    """What passed through the endpoint (or one binding): chat calls and their usage as the
    bound LLM reported it, embedding calls and their tokens (cl100k-counted)."""

    chat_calls: int = 0
    chat_errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    embedding_calls: int = 0
    embedding_tokens: int = 0

    def add_chat(self, response: ChatResponse) -> None:
        self.chat_calls += 1
        self.chat_errors += int(not response.ok)
        self.prompt_tokens += response.usage.prompt_tokens
        self.completion_tokens += response.usage.completion_tokens

    def add_embedding(self, tokens: int) -> None:
        self.embedding_calls += 1
        self.embedding_tokens += tokens


@dataclass
class Binding:
    """The calls made while one LLM was bound: stats, call records, errors."""

    llm: BoundLLM
    stats: EndpointStats = field(default_factory=EndpointStats)
    records: list[CallRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class AccountingEndpoint:
    """The server on 127.0.0.1 (a random port, a random bearer key), in daemon threads.

    One LLM is bound at a time: `bind` holds a lock for its duration, so concurrent users of
    one endpoint take turns (each call is attributed to exactly one binding).
    """

    def __init__(self, embed: Embed, embedder_id: str) -> None:
        self._embed, self.embedder_id = embed, embedder_id
        self.api_key = secrets.token_urlsafe(24)
        self.stats = EndpointStats()  # every binding's, added up
        self._binding: Binding | None = None
        self._bind_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._count: TokenCounter = tokenizer_counter("cl100k")
        self._server = LoopbackServer(_handler(self), "tmem-accounting")

    @property
    def dims(self) -> int:
        """The embedder's vector size (384 for MiniLM, 1024 for BGE-M3)."""
        return int(self._embed(["dimensions"]).shape[1])

    @property
    def base_url(self) -> str:
        return self._server.base_url

    @contextmanager
    def bind(self, llm: BoundLLM) -> Iterator[Binding]:
        """Answer chat completions with `llm` until the block ends."""
        with self._bind_lock:
            self._binding = Binding(llm)
            try:
                yield self._binding
            finally:
                self._binding = None

    def close(self) -> None:
        self._server.close()

    def chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        binding = self._binding
        if binding is None:
            return 503, _error("no LLM is bound to this endpoint", "engine")
        request = chat_request(body, binding.llm.backbone.sampling)
        try:
            response = binding.llm.generate([request])[0]
        except Exception as exc:
            binding.errors.append(f"engine: {type(exc).__name__}: {exc}")
            raise EngineError(f"{type(exc).__name__}: {exc}") from exc
        with self._stats_lock:
            for stats in (self.stats, binding.stats):
                stats.add_chat(response)
            binding.records.append(CallRecord.of(binding.llm.backbone, request, response))
            if response.error is not None:
                binding.errors.append(response.error)
        if response.error is not None:
            return _STATUS.get(response.error_kind or "", 502), _error(
                response.error, response.error_kind or "server")
        return 200, completion_body(binding.llm.backbone.model, response)

    def embeddings(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise DataError("input must be a string or a list of strings")
        vectors = self._embed(texts) if texts else np.zeros((0, 0), dtype=np.float32)
        tokens = sum(self._count(t) for t in texts)
        with self._stats_lock:
            self.stats.add_embedding(tokens)
            if self._binding is not None:
                self._binding.stats.add_embedding(tokens)
        data = [{"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
                for i, v in enumerate(vectors)]
        return 200, {"object": "list", "data": data, "model": self.embedder_id,
                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def models(self) -> dict[str, Any]:
        binding = self._binding
        names = [self.embedder_id, *([binding.llm.backbone.model] if binding else [])]
        return {"object": "list",
                "data": [{"id": n, "object": "model", "owned_by": "tmem"} for n in names]}


def chat_request(body: dict[str, Any], default: Sampling) -> ChatRequest:
    """An OpenAI chat-completions body as a `ChatRequest` (the inverse of the HTTP backend's
    body); JSON response formats become the request's schema (`json_object`: any object)."""
    if body.get("tools") or body.get("functions"):
        raise DataError("tool calls are not served")
    messages = [ChatMessage(_role(m.get("role")), _content(m.get("content")))
                for m in body.get("messages") or ()]
    if not messages:
        raise DataError("messages must be a non-empty list")
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or default.max_tokens
    sampling = Sampling(
        temperature=float(_given(body.get("temperature"), default.temperature)),
        top_p=float(_given(body.get("top_p"), default.top_p)),
        max_tokens=int(max_tokens), seed=int(_given(body.get("seed"), default.seed)))
    stop = body.get("stop") or ()
    return ChatRequest(messages, sampling, _schema(body.get("response_format")),
                       stop=(stop,) if isinstance(stop, str) else tuple(map(str, stop)))


def completion_body(model: str, response: ChatResponse) -> dict[str, Any]:
    """A `ChatResponse` as an OpenAI chat completion, with its usage."""
    usage = response.usage
    return {
        "id": f"chatcmpl-{secrets.token_hex(8)}", "object": "chat.completion",
        "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": response.text}}],
        "usage": {"prompt_tokens": usage.prompt_tokens,
                  "completion_tokens": usage.completion_tokens,
                  "total_tokens": usage.prompt_tokens + usage.completion_tokens},
    }


def _schema(fmt: Any) -> dict[str, Any] | None:
    if not isinstance(fmt, dict) or fmt.get("type") in (None, "text"):
        return None
    if fmt.get("type") == "json_object":
        return {"type": "object"}
    schema = (fmt.get("json_schema") or {}).get("schema")
    if fmt.get("type") != "json_schema" or not isinstance(schema, dict):
        raise DataError(f"unsupported response_format {fmt!r}")
    return schema


def _role(role: Any) -> Role:
    if role == "developer":
        return "system"
    if role not in _ROLES:
        raise DataError(f"unsupported message role {role!r}")
    return role  # type: ignore[no-any-return]


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: only text ones are served
        return "".join(p.get("text", "") for p in content if isinstance(p, dict)
                       and p.get("type") == "text")
    raise DataError("message content must be text")


def _given(value: Any, default: float) -> Any:
    return default if value is None else value


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": kind}}


def _handler(endpoint: AccountingEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None

        def do_GET(self) -> None:
            if not self._authorised():
                return
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, endpoint.models())
            else:
                self._send(404, _error(f"no route {self.path}", "request"))

        def do_POST(self) -> None:
            if not self._authorised():
                return
            routes = {"/v1/chat/completions": endpoint.chat, "/v1/embeddings": endpoint.embeddings}
            route = routes.get(self.path.rstrip("/"))
            if route is None:
                self._send(404, _error(f"no route {self.path}", "request"))
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                self._send(*route(body))
            except EngineError as exc:  # the caller must see it fail
                self._send(500, _error(str(exc), "engine"))
            except (ValueError, TypeError, AttributeError) as exc:  # a malformed body
                self._send(400, _error(f"{type(exc).__name__}: {exc}", "request"))

        def _authorised(self) -> bool:
            if self.headers.get("Authorization") == f"Bearer {endpoint.api_key}":
                return True
            self._send(401, _error("wrong or missing bearer key", "request"))
            return False

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
