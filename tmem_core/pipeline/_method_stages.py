"""The stages that run the method: retrieval (CPU) and construction (its LLM steps).

Retrieval passes construction the evidence ids and the method's typed evidence payload (the
type it registered as `evidence`, as JSON); construction stores the context with its construct
record (the type it registered as `record`: column `payload`, and the `degradation` and
`steps` columns written from it), which the run's checks, the viewer and the evidence basis
read."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar

import pyarrow.compute as pc

from tmem_core import from_json, to_json
from tmem_core.llm._accounting import CallRecord
from tmem_core.llm._tokens import counter_for
from tmem_core.methods import (
    ContextMethod,
    Evidence,
    MethodEnv,
    MethodSpec,
    get_method,
    record_columns,
)
from tmem_core.pipeline._run import Run
from tmem_core.pipeline._stage import Output, Row, Stage
from tmem_core.results import MEMORY_STAGE, calls_store, memory_qid
from tmem_core.results._layout import conversation_of
from tmem_core.retrieval import IndexStore, conversations_from_table, lexical_tokens
from tmem_core.schema import Question


def _accounted_memories(run_dir: Path) -> set[str]:
    """Conversations whose memory calls the run has on record (from an earlier attempt)."""
    calls = calls_store(run_dir).read_all()
    owners = calls.filter(pc.equal(calls.column("stage"), MEMORY_STAGE)).column("qid")
    return {conversation_of(q) for q in owners.to_pylist()}


K = TypeVar("K")
V = TypeVar("V")


class _Keyed(Generic[K, V]):
    """One `make(key)` per key, made once however many threads ask for it."""

    def __init__(self, make: Callable[[K], V]) -> None:
        self._make = make
        self._made: dict[K, V] = {}
        self._guard = threading.Lock()

    def of(self, key: K) -> V:
        with self._guard:
            if key not in self._made:
                self._made[key] = self._make(key)
            return self._made[key]


def _memory_locks() -> _Keyed[str, threading.Lock]:
    """A lock per conversation: its questions wait for its one memory build, while other
    conversations' builds run beside it."""
    return _Keyed(lambda _: threading.Lock())


_RETRIEVAL_SLOTS: _Keyed[int, threading.BoundedSemaphore] = _Keyed(threading.BoundedSemaphore)
"""The slots of this process's retrievals (`count` at once), shared by every run's stages in
the process: however many questions an actor holds, so many retrievals (the stage's CPU-bound
part, and its largest memory) run at once."""


class MethodStage(Stage):
    """Stages that hold the run's method (its indexes load lazily, once per actor).

    The method's LLM steps run on the run's construct backbone if it has one, else on its
    backbone; either way its context is counted in the tokens of the run's backbone (which
    answers from it). A method with offline memory (`prepare(conv_id, llm)`, e.g. T2Mem's
    metadata) builds it for a question's conversation first; it is cached on disk, so after
    the first stage that builds it, later stages and actors only load it. Its calls count as
    stage "memory".
    """

    def __init__(self, job: Run, shares: MethodStage | None = None) -> None:
        """`shares`: another stage of this process whose method (and memory locks) to use."""
        self._memory_locks: _Keyed[str, threading.Lock] = (
            shares._memory_locks if shares else _memory_locks())
        self._memory_accounted: set[str] = (  # conversations whose memory the run counted
            shares._memory_accounted if shares else _accounted_memories(Path(job.run_dir)))
        # built whole in this process and counted: its questions pass without the lock
        self._memory_ready: set[str] = shares._memory_ready if shares else set()
        if shares is not None:
            self.method = shares.method
        super().__init__(job)  # last: it warms up, which builds the method

    @cached_property
    def spec(self) -> MethodSpec[Any]:
        return get_method(self.job.spec.method)

    @cached_property
    def method(self) -> ContextMethod:
        run = self.job.spec
        conversations = conversations_from_table(self.prepared.messages)
        env = MethodEnv(conversations, run.top_k, run.budget,
                        IndexStore(conversations, run.embedder.create()))
        method = self.spec.create(env, run.method_params)
        if hasattr(method, "prepare") and not self.spec.memory:
            # its retrieve records would be reused after its memory's backbone changed
            raise TypeError(f"method {run.method!r} builds a memory (`prepare`) but is not "
                            "registered with memory=True")
        return method

    def warm_up(self) -> None:
        super().warm_up()
        self.method  # noqa: B018 (builds the method)
        # the stopword list of the methods' lexical steps imports bm25s (0.4 s alone): met
        # first by a question, it held every other question of the actor at the import lock
        lexical_tokens("")

    def prepare_memory(self, question: Question) -> list[CallRecord]:
        """Offline memory of the question's conversation, if the method has one (once it
        is built whole in this process, its questions pass at once: handed through the lock
        one by one, the ~190 questions of a stage actor took seconds to start)."""
        prepare: Callable[..., Any] | None = getattr(self.method, "prepare", None)
        if prepare is None or question.conv_id in self._memory_ready:
            return []
        llm = self.proxy(self.job.method_backbone, question.qid, stage=MEMORY_STAGE)
        with self._memory_locks.of(question.conv_id):  # one build per conversation at a time
            if question.conv_id in self._memory_ready:  # built while this one waited
                return []
            stats = prepare(question.conv_id, llm)
            first = question.conv_id not in self._memory_accounted
            self._memory_accounted.add(question.conv_id)
            if not getattr(stats, "failed", ()):  # a memory with failures is built again
                self._memory_ready.add(question.conv_id)
        owner = memory_qid(question.conv_id)  # the run's memory, not this question's
        # what an earlier build cost, once per run; the calls of this prepare always (they
        # are new: a retry of what failed before, under the failed call's key)
        reused = [dataclasses.replace(c, stage=MEMORY_STAGE) for c in
                  getattr(stats, "reused_calls", ())] if first else []
        return [dataclasses.replace(c, qid=owner) for c in [*llm.records, *reused]]


class RetrieveStage(MethodStage):
    name = "retrieve"
    writes = ("evidence_ids", "payload")

    def stored(self) -> dict[str, Row]:
        """Records of earlier attempts, but for those written before the method's evidence
        had its payload (retrieved again)."""
        needed = self.spec.evidence is not None
        return {k: r for k, r in super().stored().items()
                if r["payload"] is not None or not needed}

    def process(self, row: Row, stored: Mapping[str, Row]) -> Output:
        question = self.questions[row["qid"]]
        calls = self.prepare_memory(question)
        with _RETRIEVAL_SLOTS.of(self.job.retrievals):
            started = time.perf_counter()
            evidence = self.method.retrieve(question)
            latency_s = time.perf_counter() - started
        record = self.record(row, evidence_ids=list(evidence.ids), trace=None,
                             payload=_payload_json(evidence.payload), latency_s=latency_s)
        return Output([record], calls)


class ConstructStage(MethodStage):
    name = "construct"
    reads = ("evidence_ids", "payload")
    writes = ("kind", "context")

    def process(self, row: Row, stored: Mapping[str, Row]) -> Output:
        question = self.questions[row["qid"]]
        payload = (from_json(self.spec.evidence, row["payload"])
                   if self.spec.evidence is not None else None)
        evidence = Evidence(question.qid, self.job.spec.method, tuple(row["evidence_ids"]),
                            payload=payload)
        memory_calls = self.prepare_memory(question)
        llm = self.proxy(self.job.method_backbone, question.qid)
        started = time.perf_counter()
        context = self.method.construct(question, evidence, llm, counter_for(self.job.backbone))
        record = self.record(row, kind=context.kind, context=context.text,
                             context_ids=list(context.ids), tokens=context.tokens,
                             trace=None, **record_columns(context.record),
                             selected_ids=None if context.selected is None
                             else list(context.selected),
                             latency_s=time.perf_counter() - started)
        return Output([record], memory_calls + llm.records)


def _payload_json(payload: object | None) -> str | None:
    return None if payload is None else to_json(payload)
