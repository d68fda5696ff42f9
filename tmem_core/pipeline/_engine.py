"""A stage actor's way to a backbone's engine replicas (`_replicas`), shared by every stage
and run.

A replica actor is async, so requests from many stage actors are in flight together and the
engine batches them. Stage actors talk to the replicas through
`ReplicaRouter` (a conversation's requests go to the same replica where its load allows, so
its prefix cache hits; a request whose replica died is sent to another) behind
`EngineProxy`, which stamps every request with its stage, question and conversation and
keeps the call records. They read and write the request cache themselves (`cache_first`), so
a cache hit costs no trip to an engine and a replica never waits on the cache file (on a
node that does not share the cache folder, its stage actors keep a cache of their own).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import ray

from tmem_core import EngineError
from tmem_core.evaluation import ids_in
from tmem_core.llm import BackboneConfig, ChatRequest, ChatResponse, RequestCache
from tmem_core.llm._accounting import CallRecord
from tmem_core.llm._gating import defer_to_gating, gating_wait
from tmem_core.llm._shared import Answered, EngineCall, SharedEngine, cache_first
from tmem_core.llm._tokens import counter_for
from tmem_core.llm._types import run_sync
from tmem_core.pipeline._loads import Loads, SharedLoads
from tmem_core.pipeline._replicas import replica_name
from tmem_core.results import MEMORY_STAGE

BALANCE = 0.25
ROUTE_SLACK = 2
"""A question's preferred replica is skipped once it holds 1 + BALANCE times its share of the
calls in flight (of every router of the backbone, this one's call included), plus
ROUTE_SLACK: few calls in flight (a question's parallel batches) stay together."""
DOWN_S = 10.0
"""A replica that failed a call is avoided this long (Ray is restarting it; calls to it fail
with `ActorUnavailableError` meanwhile). When every replica is down, a batch waits for the
first one due back."""
SHORT_PROMPT_CHARS = 4096
"""A batch whose prompts are all at most this long (a judge's verdict, its calibration
controls: an official judge template runs to 1,700 characters before the answer it grades)
stays on its question's first replica, loads aside, while that replica has fewer calls in
flight than its engine's slots: it adds little to a replica's work, so moving it gains
little, and it shares its prefix with the question's other short calls (the judge's
instruction, the question, the gold answer)."""
SPREAD_MIN = 8
"""A memory build's batch is spread over the replicas in parts of at least this many requests."""
RETRY_WAIT_S = 1.0  # the shortest pause before resending when every replica is down
UNREACHABLE = ("connection", "engine")
"""Error kinds that mean a replica's engine could not be reached (not the request's fault)."""


def _send(handle: Any, misses: list[ChatRequest]) -> Answered:
    return cast(Answered, ray.get(handle.generate.remote(misses)))


class ReplicaRouter:
    """Sends each batch of misses to one of the backbone's replicas (a memory build's, spread
    over several).

    Replicas are ranked per question (its chain of calls shares prompt prefixes; a
    conversation's questions spread over every replica) by rendezvous hashing, and a batch
    goes to the first healthy one whose calls in flight stay under the bounded load
    `ceil((1 + BALANCE) x (all in flight + 1) / healthy replicas) + ROUTE_SLACK` (consistent
    hashing with bounded loads), counted over every router of the backbone (`loads`: the
    shared view; none: this router's own calls only); a batch of short prompts stays on the
    question's first replica while that has fewer calls in flight than its engine has slots
    (`SHORT_PROMPT_CHARS`). A replica
    that dies mid-call, or whose engine answers none of a batch for being unreachable (a
    fleet's server that is down, an engine that cannot start), is avoided for `down_s` and
    the batch is resent to another (or, when all are down, to the first one due back, which
    is how a lone replica's batch waits for Ray to restart it), at most `attempts` times in
    all: the failed call's answers are dropped, so nothing is recorded twice. A request the
    engine refused (`request` errors: too long, a bad schema) is the request's own and marks
    no replica down."""

    def __init__(self, backbone: BackboneConfig,
                 lookup: Callable[[str], Any] = ray.get_actor,
                 send: Callable[[Any, list[ChatRequest]], Answered] = _send,
                 loads: Loads | None = None) -> None:
        self.names = [replica_name(backbone, i) for i in range(max(1, backbone.replicas))]
        self.slots = backbone.slots
        self.loads = loads
        self.attempts = len(self.names) + 3
        self.down_s = DOWN_S
        self._lookup, self._send = lookup, send
        self._handles: dict[int, Any] = {}
        self._in_flight = [0] * len(self.names)
        self._down_until = [0.0] * len(self.names)
        self._lock = threading.Lock()

    def __call__(self, misses: list[ChatRequest]) -> Answered:
        key = misses[0].qid or misses[0].conv_id
        parts = self._spread(misses)
        if len(parts) == 1:
            return self._route(key, misses, short=all(_short(r) for r in misses))
        with ThreadPoolExecutor(len(parts)) as pool:  # part i prefers the key's i-th replica
            answered = list(pool.map(self._route, [key] * len(parts), parts, range(len(parts))))
        return ([r for responses, _ in answered for r in responses],
                [c for _, calls in answered for c in calls])

    def _spread(self, misses: list[ChatRequest]) -> list[list[ChatRequest]]:
        """A memory build's batch (one request per episode: no prefix shared beyond the
        instruction) in parts of at least SPREAD_MIN, one per replica at most; any other
        batch whole (a question's calls share its prompt's prefix)."""
        if len(self.names) == 1 or any(r.stage != MEMORY_STAGE for r in misses):
            return [misses]
        count = min(len(self.names), math.ceil(len(misses) / SPREAD_MIN))
        size = math.ceil(len(misses) / count)
        return [misses[i:i + size] for i in range(0, len(misses), size)]

    def _route(self, key: str, misses: list[ChatRequest], part: int = 0,
               short: bool = False) -> Answered:
        for attempt in range(1, self.attempts + 1):
            index = self._choose(key, part, short)
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
                    counts = list(self._in_flight)
                self._publish(counts)
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
        return list(_rendezvous(key, len(self.names)))

    def _choose(self, key: str, part: int = 0, short: bool = False) -> int:
        ranked = self.ranking(key)
        ranked = ranked[part:] + ranked[:part]
        pause = 0.0
        with self._lock:
            now = time.monotonic()
            healthy = [i for i in ranked if self._down_until[i] <= now]
            if not healthy:  # all failed lately: the one back soonest, once it is due back
                soonest = min(ranked, key=lambda i: self._down_until[i])
                healthy = [soonest]
                pause = max(RETRY_WAIT_S, self._down_until[soonest] - now)
            others = self.loads.others() if self.loads is not None else [0] * len(self.names)
            load = [own + other for own, other in zip(self._in_flight, others, strict=True)]
            if short and healthy[0] == ranked[0] and load[ranked[0]] < self.slots:
                index = ranked[0]  # stays home: see SHORT_PROMPT_CHARS
            else:
                share = (sum(load[i] for i in healthy) + 1) / len(healthy)
                bound = math.ceil((1 + BALANCE) * share) + ROUTE_SLACK
                index = next(i for i in healthy if load[i] < bound)  # the least is under it
            self._in_flight[index] += 1
            counts = list(self._in_flight)
        self._publish(counts)
        time.sleep(pause)
        return index

    def _publish(self, counts: list[int]) -> None:
        if self.loads is not None:
            self.loads.publish(counts)

    def _failed(self, index: int) -> None:
        with self._lock:
            self._down_until[index] = time.monotonic() + self.down_s
            self._handles.pop(index, None)  # looked up again: it may have been replaced

    def _handle(self, index: int) -> Any:
        with self._lock:
            if index not in self._handles:
                self._handles[index] = self._lookup(self.names[index])
            return self._handles[index]


def _short(request: ChatRequest) -> bool:
    return sum(len(m.content) for m in request.messages) <= SHORT_PROMPT_CHARS


@functools.lru_cache(maxsize=8192)
def _rendezvous(key: str, replicas: int) -> tuple[int, ...]:
    """Replica positions by rendezvous hashing of `key` (a question's calls rank alike)."""
    return tuple(sorted(range(replicas), reverse=True, key=lambda i: hashlib.blake2b(
        f"{key}|{i}".encode(), digest_size=8).digest()))


def ray_engine(backbone: BackboneConfig, cache: RequestCache | None) -> EngineCall:
    """The backbone's replicas behind `cache`, for a stage actor whose node resolves the
    backbone's tokenizer as the driver's does (`EngineError` otherwise)."""
    counter_for(backbone)
    # the replicas are looked up at the first miss: a run served from the cache needs none
    loads = SharedLoads(f"tmem-loads-{backbone.name}", max(1, backbone.replicas),
                        uuid.uuid4().hex)
    return cache_first(backbone, cache, ReplicaRouter(backbone, loads=loads))


_LOCAL: dict[str, SharedEngine] = {}


def local_engine(backbone: BackboneConfig, cache: RequestCache | None) -> EngineCall:
    """An engine in this process behind `cache` (the plain, Ray-free loop)."""
    if backbone.name not in _LOCAL:
        _LOCAL[backbone.name] = SharedEngine(backbone)
    engine = _LOCAL[backbone.name]
    return cache_first(backbone, cache, lambda misses: run_sync(engine.generate(misses)))


def check_local_engines() -> None:
    """`StartWatch.check` for the engines of this process (the plain loop)."""
    for engine in _LOCAL.values():
        if cause := engine.start_failure():
            raise EngineError(cause)


def close_local_engines() -> None:
    while _LOCAL:
        _LOCAL.popitem()[1].close()


class EngineProxy:
    """The `LLM` a method sees inside a stage actor: one question of one stage."""

    def __init__(self, call: EngineCall, backbone: BackboneConfig, stage: str, qid: str,
                 conv_id: str = "", forbidden: tuple[str, ...] = (), priority: int = 0
                 ) -> None:
        """`forbidden`: gold-derived ids no prompt of this question may contain (each call
        records those it finds as whole tokens, for the run's validator); `priority`: the
        question's (its place among the sweep's questions), which its requests wait by."""
        self._call, self._backbone, self.stage, self.qid = call, backbone, stage, qid
        self.conv_id, self.forbidden, self.priority = conv_id, forbidden, priority
        self.records: list[CallRecord] = []

    @property
    def backbone(self) -> BackboneConfig:
        return self._backbone

    def for_stage(self, stage: str) -> EngineProxy:
        """The same engine, with calls attributed to another stage of the same question."""
        other = EngineProxy(self._call, self._backbone, stage, self.qid, self.conv_id,
                            self.forbidden, self.priority)
        other.records = self.records
        return other

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        defer_to_gating()  # a memory build others wait for runs first
        stamped = self.stamped(requests)
        with gating_wait():
            responses, records = self._call(stamped)
        self.records.extend(dataclasses.replace(record, leaks=found) if (found := self._leaks(
            request)) else record for request, record in zip(stamped, records, strict=True))
        return list(responses)

    def stamped(self, requests: Sequence[ChatRequest]) -> list[ChatRequest]:
        """The requests marked with this proxy's stage, question and conversation, and the
        question's priority (added to a request's own; a negative one, a call that others
        wait for, is kept as it is)."""
        return [dataclasses.replace(
            r, stage=self.stage, qid=self.qid, conv_id=self.conv_id,
            priority=r.priority if r.priority < 0 else self.priority + r.priority)
            for r in requests]

    def _leaks(self, request: ChatRequest) -> tuple[str, ...]:
        return ids_in("\n".join(m.content for m in request.messages), self.forbidden)

