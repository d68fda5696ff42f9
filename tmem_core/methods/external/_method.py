"""An external memory system as a context method: built once per conversation, on disk.

`prepare(conv_id, llm)` opens the system's memory under `cache_root()/external/<system>/<key>`
(the key hashes the conversation's content, the backbone, the embedder and the system's
parameters) and, unless an earlier build finished there, adds the conversation to it with
`llm` bound to the accounting endpoint. A finished build writes `done.json` (its call records
and the endpoint's counters); later prepares, in any process or run, only open the memory and
return those calls as reused (no new spend). A failed build (the system raised, or a call of
the LLM failed) writes no marker: the next process builds again, and meanwhile each question
on that conversation is an error record (an `EngineError`), never answered from a part of
the memory.

Version 2 (`EXTERNAL_VERSION`, in every external method's run identity): the query names the
asking user (`query_text`, one rule for every method); superseded items are marked; a failed
build fails its questions (version 1 answered them from what was built, flagged).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from filelock import FileLock

from tmem_core import EngineError
from tmem_core.llm._accounting import CallRecord
from tmem_core.llm._accounting_server import AccountingEndpoint, EndpointStats
from tmem_core.llm._tokens import TokenCounter
from tmem_core.methods._base import Evidence, evidence, prepared
from tmem_core.methods._context import LLM, Context, render_message
from tmem_core.methods.external._record import MemoryUsed, SystemRecord, system_record
from tmem_core.methods.external._system import MemorySystem, Recalled, SystemSpec
from tmem_core.methods.t2mem import fit_lines
from tmem_core.retrieval import Conversation, IndexStore, cache_root, query_text
from tmem_core.schema import Message, Question

DONE = "done.json"
EXTERNAL_VERSION = 2  # of what an external method does; see the module docstring
_LAYOUT = 1  # bump when what a memory directory holds changes


@dataclass(frozen=True)
class MemoryBuild:
    """What `prepare` did for one conversation. `calls` ran now; `reused_calls` built the
    memory earlier (original tokens, no new spend); `failed` holds the build's errors."""

    conv_id: str
    directory: str
    built: bool
    calls: tuple[CallRecord, ...]
    reused_calls: tuple[CallRecord, ...]
    failed: tuple[str, ...]
    endpoint: EndpointStats
    seconds: float


@dataclass(frozen=True)
class _Memory:
    backbone: str
    system: MemorySystem
    build: MemoryBuild


@dataclass
class ExternalMemory:
    """A registered external system (`spec`) as a method: `retrieve` does nothing (CPU);
    `construct` searches the memory for the question's `top_k` best items (the grid's Top-k)
    and renders them with their times within `budget` tokens. `Context.ids` are the recalled
    raw messages; the messages a recalled memory came from are only `linked_ids` in its
    record."""

    spec: SystemSpec[Any]
    params: Any
    store: IndexStore
    top_k: int
    budget: int
    name: str
    cache: Path | None = None  # default: cache_root()/external/<system>
    _memories: dict[str, _Memory] = field(default_factory=dict, repr=False)

    @cached_property
    def endpoint(self) -> AccountingEndpoint:
        embeddings = self.store.embeddings
        return AccountingEndpoint(lambda texts: embeddings.embed(texts, persist=False),
                                  self.store.embedder.model_id)

    def prepare(self, conv_id: str, llm: LLM) -> MemoryBuild:
        """Open (building it first if no finished build exists) the conversation's memory."""
        tag = f"{llm.backbone.name}@{llm.backbone.model}"
        known = self._memories.get(conv_id)
        if known is not None and known.backbone == tag:
            return dataclasses.replace(known.build, built=False, calls=(), seconds=0.0,
                                       reused_calls=known.build.calls
                                       + known.build.reused_calls)
        start = time.perf_counter()
        conversation = self.store.conversations[conv_id]
        directory = self._directory(conversation, tag)
        directory.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(directory) + ".lock"):
            if (directory / DONE).is_file():
                system = self._open(directory)
                build = _reused(conv_id, directory, start)
            else:
                system, build = self._build(conversation, directory, llm, start)
        self._memories[conv_id] = _Memory(tag, system, build)
        return build

    def retrieve(self, question: Question) -> Evidence:
        """Nothing on the CPU: the system searches in `construct`."""
        return evidence(self.name, question, ())

    def construct(self, question: Question, evidence: Evidence, llm: LLM | None,
                  count_tokens: TokenCounter) -> Context:
        """The system's `top_k` best items for the question, rendered within the budget; the
        calls the system makes while searching run through `llm` (stage construct)."""
        if llm is None:
            raise ValueError(f"{self.name} answers its system's LLM calls with an LLM; none "
                             f"was given")
        memory = self._memory(question.conv_id)
        if memory.build.failed:
            raise EngineError(
                f"{self.name}: the memory of {question.conv_id} is incomplete "
                f"({len(memory.build.failed)} build errors; first: {memory.build.failed[0]}); "
                f"its questions are not answered from part of it")
        query = query_text(question)
        error = None
        with self.endpoint.bind(llm) as binding:
            try:
                recalled = memory.system.search(query, self.top_k)
            except Exception as exc:  # the system failed: an empty context, on record
                recalled, error = [], f"{type(exc).__name__}: {exc}"
        conversation = self.store.conversations[question.conv_id]
        lines = fit_lines([_render(r, conversation) for r in recalled], self.budget,
                          count_tokens)
        shown = recalled[:len(lines)]
        text = "\n".join(lines)
        ids = tuple(dict.fromkeys(i for r in shown if r.raw for i in r.source_ids))
        used = MemoryUsed(memory.backbone, memory.build.directory, memory.build.built)
        record = system_record(self.spec.name, query, recalled, len(shown), used,
                               [*binding.errors, *([error] if error else [])])
        return Context(question.qid, self.name, "memory", text, ids, count_tokens(text), record)

    def _directory(self, conversation: Conversation, tag: str) -> Path:
        key = {"layout": _LAYOUT, "messages": [_message_json(m) for m in conversation.messages],
               "backbone": tag, "embedder": self.store.embedder.model_id,
               "params": dataclasses.asdict(self.params)}
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
        return (self.cache or cache_root() / "external" / self.spec.name) / digest

    def _open(self, directory: Path) -> MemorySystem:
        return self.spec.factory(self.endpoint, directory / "system", self.params)

    def _build(self, conversation: Conversation, directory: Path, llm: LLM,
               start: float) -> tuple[MemorySystem, MemoryBuild]:
        shutil.rmtree(directory, ignore_errors=True)  # what a failed build left
        directory.mkdir(parents=True)
        system = self._open(directory)
        with self.endpoint.bind(llm) as binding:
            try:
                system.add(conversation.messages)
                failed = list(binding.errors)
            except Exception as exc:  # the system failed: a partial memory, on record
                failed = [*binding.errors, f"add: {type(exc).__name__}: {exc}"]
        build = MemoryBuild(conversation.conv_id, str(directory), True, tuple(binding.records),
                            (), tuple(failed), binding.stats, time.perf_counter() - start)
        if not failed:
            _write_done(directory, build)
        return system, build

    def _memory(self, conv_id: str) -> _Memory:
        return prepared(self._memories, self.name, conv_id)


def show_recalled(_evidence: Evidence, context: Context, _messages: Mapping[str, Message]
                  ) -> str:
    """The recalled items with their scores and sources, then the context."""
    record = context.record
    if not isinstance(record, SystemRecord):
        raise TypeError(f"{context.qid}: not an external system's record")
    items = [f"  {r.score:.3f} {'raw' if r.raw else 'memory'} "
             f"{','.join(r.source_ids) or '-'}: {r.text[:120]}" for r in record.recalled]
    degraded = {k: v for k, v in record.degradation.counters().items() if v}
    return "\n".join([f"-- recalled ({len(items)}; degradation: {degraded or 'none'})", *items,
                      f"-- context ({context.tokens} tokens, {len(context.ids)} raw messages)",
                      context.text])


def _render(item: Recalled, conversation: Conversation) -> str:
    """A raw message as `render_message` shows it; a memory with its time, and whether the
    system holds it superseded (kept, marked: a knowledge-update question needs both the old
    state and the new, and the mark says which one stands)."""
    if item.raw and len(item.source_ids) == 1 and item.source_ids[0] in conversation.position:
        return render_message(conversation.messages[conversation.position[item.source_ids[0]]])
    when = f"{item.timestamp:%Y-%m-%d %H:%M}" if item.timestamp else "(time unknown)"
    return f"[memory] {when}{_validity(item)}: {item.text}"


def _validity(item: Recalled) -> str:
    marks = ["superseded"] if item.superseded else []
    if item.valid_until is not None:
        marks.append(f"no longer true from {item.valid_until:%Y-%m-%d %H:%M}")
    return f" ({': '.join(marks)})" if marks else ""


def _message_json(message: Message) -> dict[str, Any]:
    return {k: str(v) if v is not None else None for k, v in dataclasses.asdict(message).items()}


def _write_done(directory: Path, build: MemoryBuild) -> None:
    payload = {"conv_id": build.conv_id, "seconds": build.seconds,
               "calls": [dataclasses.asdict(c) for c in build.calls],
               "endpoint": dataclasses.asdict(build.endpoint)}
    tmp = directory / f".{DONE}.tmp"
    tmp.write_text(json.dumps(payload))
    tmp.rename(directory / DONE)


def _reused(conv_id: str, directory: Path, start: float) -> MemoryBuild:
    stored = json.loads((directory / DONE).read_text())
    calls = tuple(dataclasses.replace(CallRecord(**{**c, "leaks": tuple(c["leaks"])}),
                                      reused=True, cached=True, cost_usd=0.0, replica=None)
                  for c in stored["calls"])
    return MemoryBuild(conv_id, str(directory), False, (), calls, (),
                       EndpointStats(**stored["endpoint"]), time.perf_counter() - start)
