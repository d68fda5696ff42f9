"""T2Mem as a context method: `prepare` (offline), `retrieve` (CPU), `construct` (LLM loop)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from tmem_core.llm import BackboneConfig
from tmem_core.llm._gating import gating_work
from tmem_core.llm._tokens import TokenCounter, counter_for
from tmem_core.methods._base import Evidence, evidence, prepared
from tmem_core.methods._context import LLM, Context, ContextMethod
from tmem_core.methods._record import Usage
from tmem_core.methods._registry import MethodEnv, View, method
from tmem_core.methods.t2mem._config import T2MemConfig
from tmem_core.methods.t2mem._episodes import Mode, episode_mode, fit_lines, segment
from tmem_core.methods.t2mem._extract import (
    ConstructionStats,
    Extraction,
    extract,
    extraction_limit,
    message_entries,
    metadata_entries,
)
from tmem_core.methods.t2mem._index import MemoryIndex
from tmem_core.methods.t2mem._loop import Loop, describe, raw_budget
from tmem_core.methods.t2mem._record import LoopDegradation, LoopRecord, LoopSteps, MemoryStats
from tmem_core.methods.t2mem._render import render_trace
from tmem_core.methods.t2mem._view import timeline
from tmem_core.retrieval import IndexStore, cache_root, query_text
from tmem_core.schema import Message, Question


@dataclass(frozen=True)
class Initial:
    """What construction needs of retrieval: the initial SearchMeta's entries, best first."""

    entries: tuple[str, ...]


@dataclass(frozen=True)
class _Memory:
    backbone: str
    mode: Mode
    index: MemoryIndex
    complete: bool  # every episode has its metadata
    dropped: int  # extracted items left out as invalid


@dataclass
class T2Mem:
    """Test-time memory construction (paper §3), one instance per extraction backbone.

    `prepare(conv_id, llm)` segments the conversation into episodes, extracts their metadata
    (cached on disk under `cache`) and indexes the entries; it must run, in each process,
    before `retrieve` or `construct` touch that conversation, and costs no LLM call once the
    extraction cache holds the episodes. `retrieve` is the initial SearchMeta (`top_k`, CPU
    only); `construct` runs the loop and returns the memory as a `Context(kind="memory")`.

    A memory with episodes left unextracted or items dropped as invalid is counted in the
    record's degradation (`degraded_memory`), per question that uses it.

    `Context.ids` (evidence recall) are the messages whose own text the loop saw: the lines of
    the ReadRaw pages it read, and raw-message entries (the no-metadata ablation); an episode
    merely linked by a metadata entry counts for none of its messages. The record's
    `step_record` is the loop's (`Loop.step_record`): steps, a forced answer, tool calls, the
    share of each part read.

    Version 2: ReadRaw pages through a whole episode part (version 1 showed the part's first
    `raw_tokens` only), the step record, the query rule of every method. Version 3: the
    paper's settings (steps of 1,024 output tokens; no character limits on a step's text
    fields or on extracted entries; the first SearchMeta's k is the grid's `top_k`; a step
    prompt shows the newest memory notes within `memory_tokens`).
    `Context.text` is the
    accumulated memory caches, cut to the budget; when the LLM wrote none (malformed first
    step, LLM error) it is the entries shown instead, and the record says `fallback`.
    """

    store: IndexStore
    config: T2MemConfig = field(default_factory=T2MemConfig)
    name: str = "t2mem"
    top_k: int = 5  # entries of the initial SearchMeta: the grid's Top-k
    budget: int = 8192  # tokens of the memory the answer reads
    cache: Path = field(default_factory=lambda: cache_root() / "t2mem")
    _memories: dict[str, _Memory] = field(default_factory=dict, repr=False)

    def prepare(self, conv_id: str, llm: LLM) -> ConstructionStats:
        """Build the memory of a conversation once; idempotent. The build is gating work
        (`tmem_core.llm.gating_work`): every question of the conversation waits for it."""
        start = time.perf_counter()
        tag = _tag(llm.backbone)
        done = self._memories.get(conv_id)
        if done is not None and done.complete and done.backbone == tag:
            reused = 0 if self.config.units == "raw" else len(done.index.episodes)
            return _stats(conv_id, done, Extraction({}, (), reused, ()), start)
        with gating_work():
            memory, extraction = self._build(conv_id, llm, tag)
        return _stats(conv_id, memory, extraction, start)

    def _build(self, conv_id: str, llm: LLM, tag: str) -> tuple[_Memory, Extraction]:
        conversation = self.store.conversations[conv_id]
        mode = episode_mode(conversation, self.config.episodes)
        limit = extraction_limit(self.config, llm.backbone)
        count = counter_for(llm.backbone)
        episodes = segment(conversation, mode, limit, count,
                           timedelta(hours=self.config.topic_gap_hours))
        if self.config.units == "raw":
            extraction, entries, dropped = Extraction({}, (), 0, ()), message_entries(episodes), 0
        else:
            extraction = extract(episodes, llm, self.config, self.cache, limit, count)
            entries, dropped = metadata_entries(episodes, extraction.outputs, self.config)
        index = MemoryIndex(episodes, entries, self.store.embeddings, self.store.root)
        memory = _Memory(tag, mode, index, not extraction.failed, dropped)
        self._memories[conv_id] = memory
        return memory, extraction

    def retrieve(self, question: Question) -> Evidence:
        """The initial SearchMeta: the `top_k` entries nearest to the question."""
        index = self._memory(question.conv_id).index
        query = query_text(question)
        found = index.search(query, self.top_k)
        ids = index.linked_ids([e.episode_id for e in found])
        entries = [e.entry_id for e in found]
        return evidence(self.name, question, ids, Initial(tuple(entries)))

    def construct(self, question: Question, evidence: Evidence, llm: LLM | None,
                  count_tokens: TokenCounter) -> Context:
        """The loop from the retrieved entries, then the memory within the token budget."""
        if llm is None:
            raise ValueError(f"{self.name} builds its memory with an LLM; none was given")
        memory = self._memory(question.conv_id)
        initial = [memory.index.by_entry[i] for i in _initial_ids(evidence)]
        loop = Loop(question, memory.index, self.config, raw_budget(self.config, llm.backbone),
                    counter_for(llm.backbone))
        loop.run(initial, llm)
        units = loop.memory or [describe(e, memory.index) for e in loop.seen.values()]
        text = "\n".join(fit_lines(units, self.budget, count_tokens))
        return Context(question.qid, self.name, "memory", text, loop.shown_ids(),
                       count_tokens(text), self._record(question, evidence, loop, memory))

    def _memory(self, conv_id: str) -> _Memory:
        return prepared(self._memories, self.name, conv_id)

    def _record(self, question: Question, evidence: Evidence, loop: Loop,
                memory: _Memory) -> LoopRecord:
        index = memory.index
        degraded = int(not memory.complete or memory.dropped > 0)
        return LoopRecord(
            degradation=LoopDegradation(**loop.degradation(), degraded_memory=degraded),
            step_record=LoopSteps(**loop.step_record()),
            initial=tuple(index.by_entry[i].to_json() for i in _initial_ids(evidence)),
            steps=tuple(loop.steps), stop=loop.stop, memory=tuple(loop.memory),
            fallback=not loop.memory, question=question.question, config=self.config,
            top_k=self.top_k,
            episode_mode=memory.mode,
            metadata=MemoryStats(memory.backbone, len(index.episodes), len(index.entries),
                                 memory.complete, memory.dropped),
            read=tuple(loop.read), usage=Usage.of(loop.steps))


def show_trace(_evidence: Evidence, context: Context, _messages: Mapping[str, Message]) -> str:
    return render_trace(context)


@method("t2mem", config=T2MemConfig, show=show_trace, evidence=Initial, record=LoopRecord,
        view=View("timeline", timeline), version=3, memory=True,
        axes={"reasoning_budget": "reasoning_budget", "steps": "max_steps"},
        prompts=("t2mem/extract", "t2mem/summarize", "t2mem/graph", "t2mem/step"),
        variant_axes={"t2mem_no_rollout": ("reasoning_budget",)}, variants={
    "t2mem_no_metadata": {"units": "raw"},
    "t2mem_no_raw": {"read_raw": False},
    "t2mem_no_rollout": {"rollout": False},
    "t2mem_summary": {"units": "summary"},
    "t2mem_graph": {"units": "graph"},
}, description="T2Mem: episode metadata offline, SearchMeta/ReadRaw/Answer loop at test time")
def _t2mem(env: MethodEnv, config: T2MemConfig, name: str) -> ContextMethod:
    """The grid's Top-k for the first SearchMeta (the paper's k = 5), `search_top_k` after."""
    return T2Mem(env.index_store, config, name=name, top_k=env.top_k, budget=env.budget)


def _initial_ids(evidence: Evidence) -> tuple[str, ...]:
    if not isinstance(evidence.payload, Initial):
        raise ValueError(f"evidence of {evidence.qid} does not come from T2Mem.retrieve")
    return evidence.payload.entries


def _stats(conv_id: str, memory: _Memory, extraction: Extraction,
           start: float) -> ConstructionStats:
    index = memory.index
    return ConstructionStats(conv_id, memory.mode, len(index.episodes), len(index.entries),
                             len(extraction.calls), extraction.reused, extraction.failed,
                             extraction.calls, time.perf_counter() - start,
                             extraction.reused_calls, memory.dropped)


def _tag(backbone: BackboneConfig) -> str:
    return f"{backbone.name}@{backbone.model}"

