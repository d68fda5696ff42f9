"""T-MEM as a context method: discovery, then selection -> structuring -> compression ->
linearisation under the token budget, with the paper's ablations as switches.

Between selection and structuring, the kept messages are admitted best first while the
estimated cost of what compression must keep of them fits the budget (their whole text without
compression). Should the rendered context still exceed the budget (estimates are not exact),
the lowest-ranked leaf is trimmed and the forest rendered again; trims are recorded.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tmem_core.llm import TokenCounter
from tmem_core.methods._base import Evidence, evidence
from tmem_core.methods._context import LLM, Context, ContextKind, ContextMethod
from tmem_core.methods._registry import MethodEnv, View, method
from tmem_core.methods.tmem._config import DiscoveryConfig
from tmem_core.methods.tmem._discovery import Candidate, Discovery, Interval, discover
from tmem_core.methods.tmem._forest import (
    Forest,
    PhaseRanks,
    QueryTerms,
    Rendered,
    Rendering,
    Repair,
    Timeline,
    admit,
    build_forest,
    check_withheld,
    fit,
    flat_forest,
    phase_constraints,
    withheld,
    withheld_conversation,
)
from tmem_core.methods.tmem._payload import Built, Found
from tmem_core.methods.tmem._rerank import ContextReranker
from tmem_core.methods.tmem._show import describe
from tmem_core.methods.tmem._steps import (
    SELECT_PROMPT,
    STRUCTURE_PROMPT,
    LLMSelector,
    Proposals,
    Selection,
    Structurer,
    prompt_hashes,
)
from tmem_core.methods.tmem._validate import forest_structure
from tmem_core.methods.tmem._view import forest_view
from tmem_core.prompts import load_prompt
from tmem_core.retrieval import Conversation, IndexStore
from tmem_core.schema import Message, Question

SelectionMode = Literal["llm", "reranked"]
STEPS = ("select", "structure", "render")  # timed in the trace


@dataclass(frozen=True)
class TMemConfig:
    """Discovery parameters plus the ablation switches (all on: full T-MEM).

    - `discovery` off: the hybrid seeds go straight to selection (no interval is kept);
    - `selection`: "llm" (KEY/SUPPORT labels) or "reranked" (the no-LLM reranker);
    - `structuring` off: a flat chronological list; `typed_relations` off: RELATED edges;
    - `compression` off: no span is dropped, whole messages are admitted within the budget;
    - metadata expansion and global scope are `discovery_config.metadata` / `.scope`;
    - `discovery_withheld` / `structuring_withheld`: metadata fields ("topic", "phase") that
      discovery (indexes, groups, the selection prompt) or structuring (its prompt, its
      same-topic and phase-order checks, its repair groups) read as null (Exp-6); the
      answer context keeps them.
    """

    discovery_config: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    discovery: bool = True
    selection: SelectionMode = "llm"
    structuring: bool = True
    typed_relations: bool = True
    compression: bool = True
    discovery_withheld: tuple[str, ...] = ()
    structuring_withheld: tuple[str, ...] = ()
    select_batch: int = 20
    min_coverage: float = 0.5
    link_batch: int = 12
    link_context: int = 8

    def __post_init__(self) -> None:
        check_withheld(self.discovery_withheld, "TMemConfig.discovery_withheld")
        check_withheld(self.structuring_withheld, "TMemConfig.structuring_withheld")

    def switches(self) -> dict[str, Any]:
        return {"discovery": self.discovery, "selection": self.selection,
                "structuring": self.structuring, "typed_relations": self.typed_relations,
                "compression": self.compression, "metadata": self.discovery_config.metadata,
                "scope": self.discovery_config.scope,
                "discovery_withheld": list(self.discovery_withheld),
                "structuring_withheld": list(self.structuring_withheld)}

    def search(self) -> DiscoveryConfig:
        """The discovery parameters in effect (no interval passes without discovery)."""
        if self.discovery:
            return self.discovery_config
        return self.discovery_config.without_intervals()


@dataclass(frozen=True)
class Structured:
    forest: Forest
    proposals: Proposals
    repairs: tuple[Repair, ...] = ()


@dataclass
class TMem:
    """T-MEM (paper §4): `retrieve` runs discovery from `top_k` anchors (paper §5.3),
    `construct` the LLM steps and rendering within `budget` tokens."""

    store: IndexStore
    config: TMemConfig = field(default_factory=TMemConfig)
    name: str = "tmem"
    top_k: int = 36
    budget: int = 8192
    _timelines: dict[str, Timeline] = field(default_factory=dict, repr=False)
    _phases: dict[str, PhaseRanks] = field(default_factory=dict, repr=False)
    _discovery_store: IndexStore | None = field(default=None, repr=False)

    def retrieve(self, question: Question) -> Evidence:
        search = self.config.search()
        index = self._seen_by_discovery().index(question.conv_id, search.metadata)
        if question.conv_id not in self._timelines:
            self._timelines[question.conv_id] = Timeline.of(index.conversation)
        found = discover(question, index, self._timelines[question.conv_id], search, self.top_k)
        return evidence(self.name, question, [c.message.msg_id for c in found.candidates],
                        {"discovery": discovery_json(found)}, Found.of(found))

    def construct(self, question: Question, evidence: Evidence, llm: LLM | None,
                  count_tokens: TokenCounter) -> Context:
        if not isinstance(evidence.payload, Found):
            raise ValueError(f"{evidence.qid}: evidence has no T-MEM discovery")
        conversation = self.store.conversations[question.conv_id]
        seen = self._seen_by_discovery().conversations[question.conv_id]
        candidates = [Candidate(seen.messages[seen.position[c.id]], c.relevance, c.support,
                                c.anchor_rank) for c in evidence.payload.candidates]
        marks = [time.perf_counter()]
        selection = self._select(question, candidates, evidence.payload.intervals, llm)
        marks.append(time.perf_counter())
        terms = QueryTerms.of(question)
        by_id = {c.message.msg_id: conversation.messages[conversation.position[c.message.msg_id]]
                 for c in candidates}
        admitted = admit([by_id[i] for i in selection.ranked], terms, self.budget, count_tokens,
                         self._rendering())
        structured = self._structure(question, admitted, llm, conversation)
        marks.append(time.perf_counter())
        rank = {i: k for k, i in enumerate(selection.ranked)}
        rendered = fit(structured.forest, by_id, rank, terms, self.budget, count_tokens,
                       self._rendering())
        marks.append(time.perf_counter())
        trace = {"config": self.config.switches(), "prompts": self._prompts(),
                 **_trace(selection, admitted, structured, rendered),
                 "timing": {f"{step}_s": b - a for step, (a, b)
                            in zip(STEPS, itertools.pairwise(marks), strict=True)}}
        kind: ContextKind = "forest" if self.config.structuring else "flat"
        built = Built(tuple(rendered.forest.nodes.values()), dict(selection.labels),
                      rendered.trimmed, structured.repairs,
                      (*selection.failures, *structured.proposals.failures),
                      rendered.compression.to_json() if rendered.compression else None)
        return Context(question.qid, self.name, kind, rendered.linearised.text,
                       rendered.linearised.order, rendered.tokens, trace, built)

    def _select(self, question: Question, candidates: Sequence[Candidate],
                intervals: Sequence[Interval], llm: LLM | None) -> Selection:
        if self.config.selection == "reranked":
            ranked = ContextReranker().select(question, candidates, None)
            return Selection({}, tuple(ranked))
        selector = LLMSelector(_need(llm), self.config.select_batch, self.config.min_coverage)
        return selector.label(question, candidates, intervals)

    def _structure(self, question: Question, admitted: Sequence[Message], llm: LLM | None,
                   conversation: Conversation) -> Structured:
        if not self.config.structuring:
            return Structured(flat_forest(admitted), Proposals({}))
        structurer = Structurer(_need(llm), self.config.link_batch, self.config.link_context)
        seen = withheld(admitted, self.config.structuring_withheld)
        proposals = structurer.propose(question, seen)
        constraints = phase_constraints(conversation, self.config.structuring_withheld,
                                        self._phases)
        forest, repairs = build_forest(seen, proposals.edges, constraints,
                                       self.config.typed_relations)
        return Structured(forest, proposals, tuple(repairs))

    def _rendering(self) -> Rendering:
        return Rendering(self.config.compression, flat=not self.config.structuring)

    def _seen_by_discovery(self) -> IndexStore:
        """The indexes discovery searches: the run's own, or (with withheld fields) indexes of
        the conversations with those fields null, built beside them."""
        fields = self.config.discovery_withheld
        if not fields:
            return self.store
        if self._discovery_store is None:
            self._discovery_store = IndexStore(
                {k: withheld_conversation(c, fields) for k, c in self.store.conversations.items()},
                self.store.embedder, self.store.root, self.store.config, self.store.stats)
        return self._discovery_store

    def _prompts(self) -> dict[str, str]:
        used = [SELECT_PROMPT] * (self.config.selection == "llm")
        used += [STRUCTURE_PROMPT] * self.config.structuring
        return prompt_hashes(*map(load_prompt, used))


@method("tmem", config=TMemConfig, show=describe, evidence=Found, context=Built,
        checks={"forest_structure": forest_structure}, view=View("forest", forest_view),
        version=2, prompts=(SELECT_PROMPT, STRUCTURE_PROMPT), variants={
    "tmem_wo_discovery": {"discovery": False},
    "tmem_wo_structuring": {"structuring": False},
    "tmem_wo_metadata": {"discovery_config": {"metadata": False}},
    "tmem_wo_compression": {"compression": False},
    "tmem_untyped": {"typed_relations": False},
    "tmem_global_forest": {"discovery_config": {"scope": "global"}},
    "tmem_reranked_forest": {"selection": "reranked"},
    # Exp-6 (robustness to metadata availability): what each module reads as null
    "tmem_wo_topic_in_discovery": {"discovery_withheld": ("topic",)},
    "tmem_wo_meta_in_structuring": {"structuring_withheld": ("topic", "phase")},
    "tmem_wo_meta_in_both": {"discovery_withheld": ("topic", "phase"),
                             "structuring_withheld": ("topic", "phase")},
}, description="T-MEM: temporal discovery, KEY/SUPPORT selection, evidence forest")
def _tmem(env: MethodEnv, config: TMemConfig, name: str) -> ContextMethod:
    return TMem(env.index_store, config, name, env.top_k, env.budget)


def discovery_json(found: Discovery) -> dict[str, Any]:
    """The discovery trace as JSON-able data (candidates by id, most relevant first)."""
    return {
        "query": found.query,
        "anchors": list(found.anchors),
        "groups": {k: list(v) for k, v in found.groups.items()},
        "intervals": [{**dataclasses.asdict(iv), "anchors": list(iv.anchors),
                       "members": list(iv.members)} for iv in found.intervals],
        "config": dataclasses.asdict(found.config),
        "candidates": [{"id": c.message.msg_id, "relevance": c.relevance, "support": c.support,
                        "anchor_rank": c.anchor_rank} for c in found.candidates],
    }


def _trace(selection: Selection, admitted: Sequence[Message], structured: Structured,
           rendered: Rendered) -> dict[str, Any]:
    proposals = structured.proposals
    return {
        "selection": {"labels": selection.labels, "failures": list(selection.failures)},
        "admitted": [m.msg_id for m in admitted],
        "structure": {"proposals": {i: dataclasses.asdict(p) for i, p in proposals.edges.items()},
                      "repairs": [r.to_json() for r in structured.repairs],
                      "failures": list(proposals.failures)},
        "forest": rendered.forest.to_json(),
        "compression": rendered.compression.to_json() if rendered.compression else None,
        "trimmed": list(rendered.trimmed),
        "llm": {"select": selection.stats.to_json(), "structure": proposals.stats.to_json()},
        "degradation": _degradation(selection, admitted, structured, rendered),
    }


def _degradation(selection: Selection, admitted: Sequence[Message], structured: Structured,
                 rendered: Rendered) -> dict[str, int]:
    """What fell back or was repaired on the way (`*_total`: the counts they are out of)."""
    repairs = structured.repairs
    return {
        "selection_fallback_batches": len(selection.failures),
        "selection_batches_total": selection.stats.calls,
        "structure_failed_batches": len(structured.proposals.failures),
        "edges_repaired": sum(r.parent is not None for r in repairs),
        "edges_dropped": sum(r.parent is None for r in repairs),
        "nodes_trimmed": len(rendered.trimmed),
        "dropped_before_structuring": len(selection.ranked) - len(admitted),
        "admitted_total": len(admitted),
    }


def _need(llm: LLM | None) -> LLM:
    if llm is None:
        raise ValueError("this T-MEM configuration needs an LLM (selection or structuring)")
    return llm
