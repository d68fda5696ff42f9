"""One backbone's engine shared by many callers, and the cache-first path in front of it.

`SharedEngine` is the body of the pipeline's engine actor (and of its in-process twin for the
plain loop): it owns the backend and answers batches from many callers concurrently, so the
engine batches them. `cache_first` puts the request cache in front of any such engine, so a
caller replays hits itself and only misses travel to the engine.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from tmem_core import EngineError
from tmem_core.llm._accounting import CallRecord
from tmem_core.llm._client import (
    START_ATTEMPTS,
    START_BACKOFF_S,
    LazyBackend,
    LLMClient,
    cache_hits,
)
from tmem_core.llm._config import BackboneConfig
from tmem_core.llm._request_cache import RequestCache, request_hash
from tmem_core.llm._types import ChatRequest, ChatResponse, ErrorKind, error_response

Answered = tuple[list[ChatResponse], list[CallRecord]]
EngineCall = Callable[[list[ChatRequest]], Answered]
"""Answers a batch of requests: a response and a call record for each, in order."""


class SharedEngine:
    """A backbone's client whose backend starts at the first request that needs it; one of
    the backbone's `replica`s, which its call records name.

    An engine that cannot be started answers the batch with `engine` errors; one that died
    answers the batches it held with `engine_crash` errors (one of them may be what crashed
    it: they are error records of their questions, never resent to another engine), and is
    replaced at the next request (`engine_died` lets a subclass end its process instead)."""

    def __init__(self, backbone: BackboneConfig, replica: int = 0,
                 start_attempts: int = START_ATTEMPTS, start_backoff_s: float = START_BACKOFF_S
                 ) -> None:
        self.replica = replica
        self.backend = LazyBackend(backbone.for_replica(replica), start_attempts,
                                   start_backoff_s)
        # no request cache: its callers read and write it (`cache_first`), so a replica's
        # event loop never waits on the cache file's lock while its answers are due
        self.client = LLMClient(backbone, self.backend)

    async def generate(self, requests: Sequence[ChatRequest]) -> Answered:
        sent_at = time.time()
        try:
            responses = await self.client.agenerate(requests)
        except EngineError as exc:
            if exc.dead:  # any of the batches in flight may be what killed it
                self.engine_died(exc)
            responses = self._errors("engine_crash" if exc.dead else "engine", str(exc), requests)
        self.client.records.clear()  # the caller keeps its own records
        return responses, [CallRecord.of(self.client.backbone, q, r, self.replica, sent_at)
                           for q, r in zip(requests, responses, strict=True)]

    def _errors(self, kind: ErrorKind, message: str, requests: Sequence[ChatRequest]
                ) -> list[ChatResponse]:
        """The batch's error answers, each with its request's hash (its call's key)."""
        return [dataclasses.replace(error_response(kind, message),
                                    request_hash=request_hash(self.client.backbone, r))
                for r in requests]

    def engine_died(self, exc: EngineError) -> None:
        """Called when the engine died mid-batch (its backend is already dropped)."""
        print(f"[engine] {self.client.backbone.name} replica {self.replica}: {exc}; the next "
              "request starts a new engine", flush=True)

    def start_failure(self) -> str | None:
        """Why this replica's engine will not start (every attempt failed), else None."""
        return self.backend.start_failure

    def counters(self) -> Any:
        """The backend's own counters (e.g. `SimCounters`), None if it keeps none or has not
        started."""
        return getattr(self.backend.get(), "counters", None) if self.backend.started else None

    def close(self) -> None:
        self.client.backend.close()


def cache_first(backbone: BackboneConfig, cache: RequestCache | None, engine: EngineCall
                ) -> EngineCall:
    """`engine` behind the request cache: hits are replayed by the caller, misses go on and
    their successful answers are stored by the caller (the engine keeps no cache)."""

    def call(requests: list[ChatRequest]) -> Answered:
        keys, hits = cache_hits(backbone, cache, requests)
        misses = [(k, r) for k, r in zip(keys, requests, strict=True) if k not in hits]
        answered = engine([r for _, r in misses]) if misses else ([], [])
        if cache is not None:
            cache.put_many(backbone.name, {k: response for (k, _), response
                                           in zip(misses, answered[0], strict=True)})
        fresh = iter(zip(*answered, strict=True))
        pairs = [(hits[k], CallRecord.of(backbone, r, hits[k])) if k in hits else next(fresh)
                 for k, r in zip(keys, requests, strict=True)]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    return call
