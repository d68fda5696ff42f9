"""One LLM engine per backbone, shared by every stage and run through a named Ray actor.

The actor owns the backend (the embedded llama.cpp server, an in-process vLLM engine or an
HTTP client) and the request cache; it is async, so requests from many stage actors are in
flight together and the engine batches them. Stage actors talk to it through `EngineProxy`,
which stamps every request with its stage and question and keeps the call records. They read
the request cache themselves first, so a cache hit costs no trip to the engine actor (on a
node that does not share the cache folder, the lookup misses and the actor answers it).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any, cast

import ray

from tmem_core.llm import (
    Answered,
    BackboneConfig,
    CallRecord,
    ChatRequest,
    ChatResponse,
    EngineCall,
    RequestCache,
    SharedEngine,
    cache_first,
    get_backend,
)
from tmem_core.llm._types import error_response, run_sync

ENGINE_PREFIX = "tmem-llm-"
MAX_IN_FLIGHT = 256


def engine_handle(backbone: BackboneConfig, gpus: float = 0.0) -> Any:
    """The backbone's engine actor, created on first use and found by name afterwards."""
    needs_gpu = get_backend(backbone.backend).uses_gpus and gpus > 0
    actor = ray.remote(SharedEngine).options(
        name=f"{ENGINE_PREFIX}{backbone.name}", get_if_exists=True,
        max_concurrency=MAX_IN_FLIGHT, num_cpus=0, num_gpus=gpus if needs_gpu else 0,
        max_restarts=2, max_task_retries=2)
    return actor.remote(backbone)


def ray_engine(backbone: BackboneConfig, cache: RequestCache | None) -> EngineCall:
    """The backbone's named engine actor behind `cache`."""
    # looked up at the first miss: a run served from the cache never needs the engine actor
    handle = functools.cache(lambda: ray.get_actor(f"{ENGINE_PREFIX}{backbone.name}"))
    return cache_first(backbone, cache, lambda misses: cast(
        Answered, ray.get(handle().generate.remote(misses))))


_LOCAL: dict[str, SharedEngine] = {}


def local_engine(backbone: BackboneConfig, cache: RequestCache | None) -> EngineCall:
    """An engine in this process behind `cache` (the plain, Ray-free loop)."""
    if backbone.name not in _LOCAL:
        _LOCAL[backbone.name] = SharedEngine(backbone)
    engine = _LOCAL[backbone.name]
    return cache_first(backbone, cache, lambda misses: run_sync(engine.generate(misses)))


def close_local_engines() -> None:
    while _LOCAL:
        _LOCAL.popitem()[1].close()


class EngineProxy:
    """The `LLM` a method sees inside a stage actor: one question of one stage."""

    def __init__(self, call: EngineCall, backbone: BackboneConfig, stage: str, qid: str,
                 forbidden: tuple[str, ...] = ()) -> None:
        """`forbidden`: gold-derived strings no prompt of this question may contain (each
        call records those it finds, for the run's validator)."""
        self._call, self._backbone, self.stage, self.qid = call, backbone, stage, qid
        self.forbidden = forbidden
        self.records: list[CallRecord] = []

    @property
    def backbone(self) -> BackboneConfig:
        return self._backbone

    def for_stage(self, stage: str) -> EngineProxy:
        """The same engine, with calls attributed to another stage of the same question."""
        other = EngineProxy(self._call, self._backbone, stage, self.qid, self.forbidden)
        other.records = self.records
        return other

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        stamped = [dataclasses.replace(r, stage=self.stage, qid=self.qid) for r in requests]
        responses, records = self._call(stamped)
        self.records.extend(dataclasses.replace(record, leaks=found) if (found := self._leaks(
            request)) else record for request, record in zip(stamped, records, strict=True))
        return list(responses)

    def _leaks(self, request: ChatRequest) -> tuple[str, ...]:
        text = "\n".join(m.content for m in request.messages)
        return tuple(s for s in self.forbidden if s in text)


class FailingProxy(EngineProxy):
    """A proxy whose every call fails like a dead engine (test fault injection)."""

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        responses = [error_response("engine", "injected fault") for _ in requests]
        self.records.extend(CallRecord.of(self.backbone, dataclasses.replace(
            r, stage=self.stage, qid=self.qid), x) for r, x in zip(requests, responses,
                                                                  strict=True))
        return responses
