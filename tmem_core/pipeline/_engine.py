"""A backbone's engine replicas, shared by every stage and run through named Ray actors.

Each replica actor owns a backend (the embedded llama.cpp server, an in-process vLLM engine,
an HTTP client or a simulated engine) and the request cache; it is async, so requests from
many stage actors are in flight together and the engine batches them. Stage actors talk to
the replicas through `ReplicaRouter` (a conversation's requests go to the same replica where
its load allows, so its prefix cache hits; a request whose replica died is sent to another)
behind `EngineProxy`, which stamps every request with its stage, question and conversation
and keeps the call records. They read the request cache themselves first, so a cache hit
costs no trip to an engine (on a node that does not share the cache folder, the lookup
misses and a replica answers it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

import ray

from tmem_core.evaluation import ids_in
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
    run_sync,
)
from tmem_core.pipeline._config import import_plugins

ENGINE_PREFIX = "tmem-llm-"
MAX_IN_FLIGHT = 256
ROUTE_SLACK = 2
"""A conversation's preferred replica is skipped once it has this many more of the caller's
requests in flight than the least loaded replica."""
DOWN_S = 10.0  # a replica that failed a call is avoided this long (it is being restarted)
RETRY_WAIT_S = 1.0  # pause before resending when every replica has failed recently
UNREACHABLE = ("connection", "engine")
"""Error kinds that mean a replica's engine could not be reached (not the request's fault)."""


def replica_name(backbone: BackboneConfig, index: int) -> str:
    return f"{ENGINE_PREFIX}{backbone.name}-{index}"


class ReplicaEngine(SharedEngine):
    """A replica actor's body: the sweep's plugins first (a backend may be one of theirs)."""

    def __init__(self, backbone: BackboneConfig, replica: int = 0,
                 plugins: tuple[str, ...] = ()) -> None:
        import_plugins(plugins)
        super().__init__(backbone, replica)


def engine_handles(backbone: BackboneConfig, gpus: float = 0.0, plugins: tuple[str, ...] = ()
                   ) -> list[Any]:
    """The backbone's replica actors (`backbone.replicas` of them, each with `gpus` GPUs for a
    GPU backend, or its engine's shard count if that is more), created on first use and
    found by name afterwards; each imports the sweep's `plugins`. Ray restarts a replica
    that dies; its calls are not retried on it: the router resends them to another one."""
    return [ray.remote(ReplicaEngine).options(
        name=replica_name(backbone, index), get_if_exists=True,
        max_concurrency=MAX_IN_FLIGHT, num_cpus=0, num_gpus=replica_gpus(backbone, gpus),
        max_restarts=-1, max_task_retries=0).remote(backbone, index, plugins)
        for index in range(max(1, backbone.replicas))]


def replica_gpus(backbone: BackboneConfig, gpus: float) -> float:
    """GPUs of one replica: none for a CPU backend or a CPU sweep (`gpus` 0); else `gpus`, or
    all its shards' (tensor x pipeline parallel) if that is more, in one actor on one node."""
    if not get_backend(backbone.backend).uses_gpus or gpus <= 0:
        return 0.0
    return max(gpus, float(getattr(backbone.engine, "shards", 1)))


def _send(handle: Any, misses: list[ChatRequest]) -> Answered:
    return cast(Answered, ray.get(handle.generate.remote(misses)))


class ReplicaRouter:
    """Sends each batch of misses to one of the backbone's replicas.

    Replicas are ranked per conversation by rendezvous hashing; a batch goes to the first one
    whose in-flight count (this caller's) is within `ROUTE_SLACK` of the least loaded healthy
    replica. A replica that dies mid-call, or whose engine answers none of a batch for being
    unreachable (a fleet's server that is down), is avoided for `DOWN_S` and the batch is
    resent to another, at most `attempts` times in all: the failed call's answers are
    dropped, so nothing is recorded twice."""

    def __init__(self, backbone: BackboneConfig,
                 lookup: Callable[[str], Any] = ray.get_actor,
                 send: Callable[[Any, list[ChatRequest]], Answered] = _send) -> None:
        self.names = [replica_name(backbone, i) for i in range(max(1, backbone.replicas))]
        self.attempts = len(self.names) + 3
        self._lookup, self._send = lookup, send
        self._handles: dict[int, Any] = {}
        self._in_flight = [0] * len(self.names)
        self._down_until = [0.0] * len(self.names)
        self._lock = threading.Lock()

    def __call__(self, misses: list[ChatRequest]) -> Answered:
        key = misses[0].conv_id or misses[0].qid
        for attempt in range(1, self.attempts + 1):
            index = self._choose(key)
            try:
                answered = self._send(self._handle(index), misses)
                if attempt == self.attempts or not self._unreachable(answered):
                    return answered
                self._resend(index, "its engine did not answer", misses)
            except (ray.exceptions.RayActorError, ValueError) as exc:  # died, or gone by name
                if attempt == self.attempts:
                    raise
                self._resend(index, type(exc).__name__, misses)
            finally:
                with self._lock:
                    self._in_flight[index] -= 1
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _unreachable(self, answered: Answered) -> bool:
        """Every request failed to reach the replica's engine (a fleet server that is down),
        and another replica could answer them."""
        return len(self.names) > 1 and all(r.error_kind in UNREACHABLE for r in answered[0])

    def _resend(self, index: int, why: str, misses: list[ChatRequest]) -> None:
        print(f"[router] {self.names[index]} failed ({why}); resending {len(misses)} requests",
              flush=True)
        self._failed(index)

    def ranking(self, key: str) -> list[int]:
        """The replicas in the order `key` prefers them."""
        return sorted(range(len(self.names)), reverse=True, key=lambda i: hashlib.blake2b(
            f"{key}|{i}".encode(), digest_size=8).digest())

    def _choose(self, key: str) -> int:
        ranked = self.ranking(key)
        pause = 0.0
        with self._lock:
            now = time.monotonic()
            healthy = [i for i in ranked if self._down_until[i] <= now]
            if not healthy:  # all failed lately: the one back soonest, after a pause
                healthy, pause = [min(ranked, key=lambda i: self._down_until[i])], RETRY_WAIT_S
            least = min(self._in_flight[i] for i in healthy)
            index = next(i for i in healthy if self._in_flight[i] <= least + ROUTE_SLACK)
            self._in_flight[index] += 1
        time.sleep(pause)
        return index

    def _failed(self, index: int) -> None:
        with self._lock:
            self._down_until[index] = time.monotonic() + DOWN_S
            self._handles.pop(index, None)  # looked up again: it may have been replaced

    def _handle(self, index: int) -> Any:
        with self._lock:
            if index not in self._handles:
                self._handles[index] = self._lookup(self.names[index])
            return self._handles[index]


def ray_engine(backbone: BackboneConfig, cache: RequestCache | None) -> EngineCall:
    """The backbone's replicas behind `cache`."""
    # the replicas are looked up at the first miss: a run served from the cache needs none
    return cache_first(backbone, cache, ReplicaRouter(backbone))


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
                 conv_id: str = "", forbidden: tuple[str, ...] = ()) -> None:
        """`forbidden`: gold-derived ids no prompt of this question may contain (each call
        records those it finds as whole tokens, for the run's validator)."""
        self._call, self._backbone, self.stage, self.qid = call, backbone, stage, qid
        self.conv_id, self.forbidden = conv_id, forbidden
        self.records: list[CallRecord] = []

    @property
    def backbone(self) -> BackboneConfig:
        return self._backbone

    def for_stage(self, stage: str) -> EngineProxy:
        """The same engine, with calls attributed to another stage of the same question."""
        other = EngineProxy(self._call, self._backbone, stage, self.qid, self.conv_id,
                            self.forbidden)
        other.records = self.records
        return other

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        stamped = self.stamped(requests)
        responses, records = self._call(stamped)
        self.records.extend(dataclasses.replace(record, leaks=found) if (found := self._leaks(
            request)) else record for request, record in zip(stamped, records, strict=True))
        return list(responses)

    def stamped(self, requests: Sequence[ChatRequest]) -> list[ChatRequest]:
        """The requests marked with this proxy's stage, question and conversation."""
        return [dataclasses.replace(r, stage=self.stage, qid=self.qid, conv_id=self.conv_id)
                for r in requests]

    def _leaks(self, request: ChatRequest) -> tuple[str, ...]:
        return ids_in("\n".join(m.content for m in request.messages), self.forbidden)

