"""`LLMClient`: a backend plus the request cache, output retries and cost accounting."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tmem_core import EngineError
from tmem_core.llm._accounting import CallRecord
from tmem_core.llm._backends import get_backend
from tmem_core.llm._config import (
    BackboneConfig,
    get_backbone,
)
from tmem_core.llm._http import check_api_key
from tmem_core.llm._request_cache import CachedCall, RequestCache, request_hash
from tmem_core.llm._types import Backend, ChatRequest, ChatResponse, output_response, run_sync

RETRY_TEMPERATURE = 0.7
"""Temperature floor of a retry after invalid output, so that greedy decoding can produce
something else; each retry also gets a new seed."""


class LLMClient:
    """Answers requests from the cache where it can, from the backend otherwise.

    A request whose output is empty or invalid against its schema is sent again (at most
    `max_output_attempts` times in all) before it becomes an error record; the tokens of every
    attempt are counted. Only successful responses are cached. Identical requests of one batch
    go to the engine once. Every call is appended to `records`.
    """

    def __init__(
        self,
        backbone: BackboneConfig,
        backend: Backend,
        cache: RequestCache | None = None,
        *,
        max_output_attempts: int = 3,
    ) -> None:
        self.backbone, self.backend, self.cache = backbone, backend, cache
        self.max_output_attempts = max_output_attempts
        self.records: list[CallRecord] = []

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        sent_at = time.time()
        requests = [self._with_sampling(r) for r in requests]
        keys, hits = cache_hits(self.backbone, self.cache, requests)
        todo = {k: r for k, r in zip(keys, requests, strict=True) if k not in hits}
        fresh = await self._fresh(todo)
        if self.cache is not None:
            self.cache.put_many(self.backbone.name, fresh)
        first = {key: i for i, key in reversed(list(enumerate(keys)))}
        responses = [
            self._assemble(key, hits, fresh, first=first[key] == i) for i, key in enumerate(keys)
        ]
        self.records.extend(
            CallRecord.of(self.backbone, r, x, sent_at=sent_at)
            for r, x in zip(requests, responses, strict=True)
        )
        return responses

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return run_sync(self.agenerate(requests))

    async def _fresh(self, todo: dict[str, ChatRequest]) -> dict[str, ChatResponse]:
        """Engine answers, resending requests whose output was invalid."""
        done: dict[str, ChatResponse] = {}
        pending = todo
        for attempt in range(self.max_output_attempts):
            if not pending:
                break
            keys = list(pending)
            outputs = await self.backend.agenerate([_variant(pending[k], attempt) for k in keys])
            for key, out in zip(keys, outputs, strict=True):
                done[key] = _accumulate(done.get(key), out)
            pending = {k: pending[k] for k in keys if done[k].error_kind == "invalid_output"}
        for key in pending:
            done[key] = dataclasses.replace(
                done[key], error=f"{done[key].error} (after {self.max_output_attempts} attempts)"
            )
        return done

    def _assemble(
        self,
        key: str,
        hits: dict[str, ChatResponse],
        fresh: dict[str, ChatResponse],
        *,
        first: bool,
    ) -> ChatResponse:
        """The response to one request: a cache hit, an engine answer, or a duplicate's."""
        if key in hits:
            return hits[key]
        if first:
            response = dataclasses.replace(
                fresh[key], cost_usd=self.backbone.prices.cost(fresh[key].usage)
            )
        else:  # a duplicate within the batch, answered by its first occurrence
            response = dataclasses.replace(fresh[key], cached=True, latency_s=0.0)
        return dataclasses.replace(response, request_hash=key)

    def _with_sampling(self, request: ChatRequest) -> ChatRequest:
        if request.sampling is not None:
            return request
        return dataclasses.replace(request, sampling=self.backbone.sampling)


START_ATTEMPTS = 3
START_BACKOFF_S = 30.0


class LazyBackend:
    """Starts the real backend at the first request: a fully cached re-run never starts it.

    A start that fails is remembered: the next request waits out a back-off (`backoff_s`,
    doubling) and tries again, `attempts` starts in all; after the last one every request
    fails at once with `EngineError` naming the cause (weights are not reloaded for
    each question). An engine that died (`EngineError` with `dead`) is dropped: the next
    request starts a new one.
    """

    def __init__(self, backbone: BackboneConfig, attempts: int = START_ATTEMPTS,
                 backoff_s: float = START_BACKOFF_S) -> None:
        self.backbone, self.attempts, self.backoff_s = backbone, attempts, backoff_s
        self._backend: Backend | None = None
        self._lock = threading.Lock()
        self._failed = 0
        self._cause = ""
        self._retry_at = 0.0

    @property
    def started(self) -> bool:
        return self._backend is not None

    @property
    def start_failure(self) -> str | None:
        """Why the engine will not start, once its last attempt failed; None otherwise."""
        return self._gave_up() if self._failed >= self.attempts else None

    def get(self) -> Backend:
        with self._lock:
            if self._backend is None:
                self._backend = self._start()
            return self._backend

    def _start(self) -> Backend:
        if self._failed >= self.attempts:
            raise EngineError(self._gave_up())
        time.sleep(max(0.0, self._retry_at - time.monotonic()))
        try:
            backend = make_backend(self.backbone)
        except Exception as exc:
            self._failed += 1
            self._cause = f"{type(exc).__name__}: {exc}".strip()[-2000:]
            self._retry_at = time.monotonic() + self.backoff_s * 2 ** (self._failed - 1)
            print(f"[engine] {self.backbone.name}: start {self._failed} of {self.attempts} "
                  f"failed: {self._cause}", flush=True)
            raise EngineError(self._gave_up() if self._failed >= self.attempts
                                    else f"backbones.{self.backbone.name}: its engine did not "
                                         f"start: {self._cause}") from exc
        self._failed = 0
        return backend

    def _gave_up(self) -> str:
        return (f"backbones.{self.backbone.name}: its engine did not start "
                f"({self.attempts} attempts): {self._cause}")

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        """The backend's answers; a call that waited for the engine to start has the wait in
        its latency (a call's record ends at its send time plus its latency)."""
        backend, waited = self._backend, 0.0
        if backend is None:  # a start blocks: off this event loop
            start = time.perf_counter()
            backend = await asyncio.to_thread(self.get)
            waited = time.perf_counter() - start
        try:
            responses = await backend.agenerate(requests)
        except EngineError as exc:
            if exc.dead:
                self._drop(backend)
            raise
        if not waited:
            return responses
        return [dataclasses.replace(r, latency_s=r.latency_s + waited) for r in responses]

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return run_sync(self.agenerate(requests))

    def _drop(self, backend: Backend) -> None:
        """Forget a dead engine (once, whichever of its callers gets here first)."""
        with self._lock:
            if self._backend is not backend:
                return
            self._backend = None
        try:
            backend.close()
        except Exception as exc:  # a dead engine may not close cleanly
            print(f"[engine] {self.backbone.name}: closing the dead engine: {exc}", flush=True)

    def close(self) -> None:
        with self._lock:
            if self._backend is not None:
                self._backend.close()
            self._backend = None


def make_backend(backbone: BackboneConfig) -> Backend:
    """Start the backbone's engine (a server or an in-process engine)."""
    return get_backend(backbone.backend).start(backbone, backbone.engine)


@contextmanager
def open_backend(backbone: BackboneConfig | str) -> Iterator[Backend]:
    """The backbone's engine, started now and stopped on exit."""
    backend = make_backend(_resolve(backbone))
    try:
        yield backend
    finally:
        backend.close()


@contextmanager
def open_client(
    backbone: BackboneConfig | str,
    *,
    use_cache: bool = True,
    cache_path: str | Path | None = None,
    max_output_attempts: int = 3,
) -> Iterator[LLMClient]:
    """An `LLMClient` whose engine starts at the first cache miss and stops on exit; a
    backbone whose API key is not in the environment is refused at once (`ConfigError`)."""
    resolved = _resolve(backbone)
    check_api_key(resolved)
    backend = LazyBackend(resolved)
    cache = RequestCache(cache_path) if use_cache else None
    try:
        yield LLMClient(resolved, backend, cache, max_output_attempts=max_output_attempts)
    finally:
        backend.close()
        if cache is not None:
            cache.close()


def _resolve(backbone: BackboneConfig | str) -> BackboneConfig:
    return get_backbone(backbone) if isinstance(backbone, str) else backbone


def _variant(request: ChatRequest, attempt: int) -> ChatRequest:
    """The request as sent on `attempt` (0 = as asked)."""
    if attempt == 0 or request.sampling is None:
        return request
    sampling = dataclasses.replace(
        request.sampling,
        temperature=max(request.sampling.temperature, RETRY_TEMPERATURE),
        seed=request.sampling.seed + attempt,
    )
    return dataclasses.replace(request, sampling=sampling)


def _accumulate(previous: ChatResponse | None, latest: ChatResponse) -> ChatResponse:
    """The latest attempt, charged with the tokens and time of the earlier ones."""
    if previous is None:
        return latest
    return dataclasses.replace(
        latest,
        usage=previous.usage + latest.usage,
        latency_s=previous.latency_s + latest.latency_s,
    )


def cache_hits(
    backbone: BackboneConfig, cache: RequestCache | None, requests: Sequence[ChatRequest]
) -> tuple[list[str], dict[str, ChatResponse]]:
    """The requests' hashes, and the responses the cache already holds, by hash (replayed:
    marked cached, 0 USD, the lookup's time as latency)."""
    keys = [request_hash(backbone, r) for r in requests]
    if cache is None:
        return keys, {}
    start = time.perf_counter()
    found = cache.get_many(keys)
    lookup_s = (time.perf_counter() - start) / max(len(keys), 1)
    hits = {}
    for key, request in zip(keys, requests, strict=True):
        if key in found and key not in hits:
            hits[key] = _replay(found[key], request, lookup_s, key)
    return keys, hits


def _replay(hit: CachedCall, request: ChatRequest, lookup_s: float, key: str) -> ChatResponse:
    response = output_response(hit.text, hit.usage, lookup_s, request.schema)
    return dataclasses.replace(response, cached=True, request_hash=key)
