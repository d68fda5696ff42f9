"""OpenAI-compatible HTTP backend: async, bounded concurrency, timeouts, retries with backoff."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from tmem_core import ConfigError, EngineError
from tmem_core.llm._backends import backend
from tmem_core.llm._config import BackboneConfig, HttpConfig
from tmem_core.llm._slots import PrioritySlots
from tmem_core.llm._tokens import count_chat_tokens, count_tokens
from tmem_core.llm._types import (
    Backend,
    ChatRequest,
    ChatResponse,
    ErrorKind,
    Sampling,
    Usage,
    error_response,
    output_response,
    run_sync,
)

if TYPE_CHECKING:  # imported where used: stage processes load this module but never call it
    import openai
    from openai.types.chat import ChatCompletion


@dataclass(frozen=True)
class OpenAIEngineConfig(HttpConfig):
    """Any OpenAI-compatible endpoint: a vLLM or llama.cpp server, a hosted API.

    `base_urls` names a fleet of servers of the same model instead of one `base_url`: each is
    one of the backbone's replicas, so the pipeline routes among them as among its own
    engines (a conversation to the same server where load allows, a server that stops
    answering avoided and its requests resent to another).
    """

    base_url: str = "http://127.0.0.1:8000/v1"
    base_urls: tuple[str, ...] = ()
    api_key_env: str = ""  # name of the environment variable holding the key; "" = no key
    extra_body: dict[str, Any] = field(default_factory=dict)

    @property
    def fleet(self) -> int:
        """Servers the backbone has (0: one, `base_url`)."""
        return len(self.base_urls)

    def for_replica(self, index: int) -> OpenAIEngineConfig:
        """The config of the replica that talks to the fleet's `index`-th server."""
        if not self.base_urls:
            return self
        return dataclasses.replace(self, base_url=self.base_urls[index % len(self.base_urls)],
                                   base_urls=())

    def weights_identity(self) -> str:
        return ""  # the endpoint's model name (the backbone's `model`) is all we know




class Endpoint(Protocol):
    @property
    def base_url(self) -> str: ...

    def recover(self) -> None:
        """Called (in a worker thread) after a connection failure, before the retry."""


@dataclass(frozen=True)
class StaticEndpoint:
    """A server that someone else runs: nothing to recover."""

    base_url: str

    def recover(self) -> None:
        return None


class OpenAICompatBackend:
    """Chat completions over HTTP; JSON schemas go as `response_format` type `json_schema`.

    `echoes_prefill`: the server returns a continued assistant message whole (llama.cpp's
    server does), so the text it held already is cut off the response."""

    echoes_prefill = False

    def __init__(
        self,
        backbone: BackboneConfig,
        config: HttpConfig,
        endpoint: Endpoint,
        api_key: str,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.backbone, self.config, self.endpoint = backbone, config, endpoint
        self._api_key = api_key
        self._extra_body = extra_body or None
        self._slots: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, PrioritySlots
        ] = weakref.WeakKeyDictionary()
        self._clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, openai.AsyncOpenAI
        ] = weakref.WeakKeyDictionary()

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        client = self._client()
        return list(await asyncio.gather(*(self._one(client, r) for r in requests)))

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return run_sync(self.agenerate(requests))

    def close(self) -> None:
        """Close the HTTP clients (on their own loops; without waiting for them)."""
        for loop, client in list(self._clients.items()):
            if loop.is_running():
                asyncio.run_coroutine_threadsafe(client.close(), loop)
        self._clients.clear()

    def _client(self) -> openai.AsyncOpenAI:
        """One client (and connection pool) per event loop: making one costs ~40 ms of CPU."""
        import openai

        loop = asyncio.get_running_loop()
        if loop not in self._clients:
            self._clients[loop] = openai.AsyncOpenAI(
                api_key=self._api_key, base_url=self.endpoint.base_url, max_retries=0
            )
        return self._clients[loop]

    async def _one(self, client: openai.AsyncOpenAI, request: ChatRequest) -> ChatResponse:
        import openai

        start = time.perf_counter()
        for attempt in range(1, self.config.max_attempts + 1):
            try:
                async with self._slots_of_loop().slot(request.priority):
                    completion = await self._create(client, request)
            except openai.APIError as exc:
                failed = await self._after_failure(exc, attempt)
                if failed is None:
                    continue
                return dataclasses.replace(failed, latency_s=time.perf_counter() - start)
            return self._response(completion, request, time.perf_counter() - start)
        raise AssertionError("unreachable: the last attempt returns")

    async def _after_failure(self, exc: openai.APIError, attempt: int) -> ChatResponse | None:
        """The final error record, or None once it is time for the next attempt."""
        kind, retryable = _classify(exc)
        if not retryable or attempt == self.config.max_attempts:
            return error_response(kind, f"{exc} (attempt {attempt} of {self.config.max_attempts})")
        if kind in ("connection", "timeout"):
            try:
                await asyncio.to_thread(self.endpoint.recover)
            except EngineError as down:
                return error_response("engine", str(down))
        await asyncio.sleep(self._backoff(attempt))
        return None

    async def _create(self, client: openai.AsyncOpenAI, request: ChatRequest) -> ChatCompletion:
        import openai

        sampling = request.sampling or self.backbone.sampling
        fmt: Any = openai.NOT_GIVEN
        if request.schema is not None:
            fmt = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": request.schema, "strict": True},
            }
        return await client.chat.completions.create(
            model=self.backbone.model,
            messages=[m.to_dict() for m in request.messages],  # type: ignore[misc]
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_completion_tokens=sampling.max_tokens,
            seed=sampling.seed,
            response_format=fmt,
            stop=list(request.stop) if request.stop else openai.omit,
            timeout=self.config.request_timeout_s,
            extra_body=self._body_extras(sampling, request.continues),
        )

    def _body_extras(self, sampling: Sampling, continues: bool) -> dict[str, Any] | None:
        """vLLM's extensions of the OpenAI body, sent only when set (a hosted API refuses
        what it does not know): `top_k`, a continuation of the assistant's last message
        (`continue_final_message`; llama.cpp's server continues a final assistant message by
        itself) and the backbone's chat-template arguments, beside the engine's own
        `extra_body`."""
        extras = dict(self._extra_body or {})
        if sampling.top_k:
            extras["top_k"] = sampling.top_k
        if continues:
            extras |= {"continue_final_message": True, "add_generation_prompt": False}
        if self.backbone.chat_template_kwargs:
            extras["chat_template_kwargs"] = self.backbone.chat_template_kwargs
        return extras or None

    def _response(
        self, completion: ChatCompletion, request: ChatRequest, latency_s: float
    ) -> ChatResponse:
        text = (completion.choices[0].message.content if completion.choices else None) or ""
        if request.continues and self.echoes_prefill:
            text = text.removeprefix(request.messages[-1].content)
        if completion.usage is not None:
            usage = Usage(completion.usage.prompt_tokens, completion.usage.completion_tokens)
        else:  # the server reports no usage: count with the backbone's tokenizer
            usage = Usage(
                count_chat_tokens(self.backbone, request.messages),
                count_tokens(self.backbone, text),
            )
        return output_response(text, usage, latency_s, request.schema)

    def _slots_of_loop(self) -> PrioritySlots:
        """Slots per event loop bound the requests in flight from that loop (by priority)."""
        loop = asyncio.get_running_loop()
        if loop not in self._slots:
            self._slots[loop] = PrioritySlots(self.config.max_concurrency)
        return self._slots[loop]

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with equal jitter: half fixed, half random."""
        ceiling = min(self.config.backoff_max_s, self.config.backoff_base_s * 2.0 ** (attempt - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)


def _classify(exc: openai.APIError) -> tuple[ErrorKind, bool]:
    """The error kind, and whether another attempt may succeed."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return "timeout", True
    if isinstance(exc, openai.APIConnectionError):
        return "connection", True
    if isinstance(exc, openai.RateLimitError):
        return "rate_limit", True
    if isinstance(exc, openai.APIStatusError):
        return ("server", True) if exc.status_code >= 500 else ("request", False)
    return "server", True  # a malformed answer from the server


@backend("openai", engine=OpenAIEngineConfig)
def _start_openai(backbone: BackboneConfig, engine: OpenAIEngineConfig) -> Backend:
    endpoint = StaticEndpoint(engine.base_url)
    return OpenAICompatBackend(backbone, engine, endpoint, _api_key(backbone, engine),
                               engine.extra_body)


def check_api_key(backbone: BackboneConfig) -> None:
    """Refuse (`ConfigError`) a backbone of this backend whose API key is not in the
    environment."""
    if isinstance(backbone.engine, OpenAIEngineConfig):
        _api_key(backbone, backbone.engine)


def _api_key(backbone: BackboneConfig, engine: OpenAIEngineConfig) -> str:
    if not engine.api_key_env:
        return "EMPTY"  # local servers take any key
    key = os.environ.get(engine.api_key_env)
    if not key:
        raise ConfigError(f"backbones.{backbone.name}.engine.api_key_env",
                          f"environment variable {engine.api_key_env} is not set")
    return key
