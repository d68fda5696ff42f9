"""T-MEM as a context method: discovery, then selection -> structuring -> compression ->
linearisation under the token budget, with the paper's ablations as switches.

Between selection and structuring, the kept messages are admitted best first while the
estimated cost of what compression must keep of them, as forest lines, fits the budget (their
whole text without compression). The flat list of the no-structuring ablation admits the same
way, so it holds the forest's messages, not more. Should the rendered context still exceed the
budget (estimates are not exact), the lowest-ranked leaf is trimmed and the forest rendered
again; trims are recorded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tmem_core.llm._tokens import TokenCounter
from tmem_core.methods._base import Evidence, evidence
from tmem_core.methods._context import LLM, Context, ContextKind, ContextMethod
from tmem_core.methods._registry import MethodEnv, View, method
from tmem_core.methods.baselines._ranked import Bm25Expand
from tmem_core.methods.tmem._build import (
    STRUCTURE_PROMPT,
    Constraints,
    Proposals,
    Structured,
    Structurer,
    flat_forest,
    phase_order,
    structure,
)
from tmem_core.methods.tmem._config import DiscoveryConfig
from tmem_core.methods.tmem._discovery import (
    Candidate,
    Interval,
    Seeding,
    search,
    seed,
)
from tmem_core.methods.tmem._fit import Rendered, Rendering, admit, fit
from tmem_core.methods.tmem._payload import Built, Found, TMemDegradation
from tmem_core.methods.tmem._rerank import ContextReranker
from tmem_core.methods.tmem._show import describe
from tmem_core.methods.tmem._steps import (
    SELECT_PROMPT,
    LLMSelector,
    Selection,
)
from tmem_core.methods.tmem._timeline import Timeline
from tmem_core.methods.tmem._validate import forest_structure
from tmem_core.methods.tmem._view import forest_view
from tmem_core.methods.tmem._withheld import check_withheld, withheld_conversation
from tmem_core.retrieval import Conversation, ConversationIndex, IndexStore
from tmem_core.schema import Message, Question

SelectionMode = Literal["llm", "heuristic"]
Retrieval = Literal["discovery", "bm25_expand"]


@dataclass(frozen=True)
class TMemConfig:
    """Discovery parameters plus the ablation switches (all on: full T-MEM).

    - `discovery` off (Table 2's w/o Temporal Evidence Discovery): the Top-k anchors go
      straight to structuring in their seed rank: no interval search, no similarity filter,
      no LLM selection;
    - `retrieval`: "bm25_expand" takes BM25 (Expand)'s Top-k messages as those anchors (Exp-3's
      organised condition; only with discovery off);
    - `selection`: "llm" (KEY/SUPPORT labels, ties by the project's reranker) or "heuristic"
      (the project's no-LLM reranker alone, a project addition);
    - `cut`: the selection cut to its Top-k (`top_k`) messages (E.2's T-Mem Reranked);
    - `structuring` off: the forest's messages as a flat list in selection rank order;
      `typed_relations` off: RELATED edges;
    - `compression` off: no span is dropped, whole messages are admitted within the budget;
    - metadata expansion and global scope are `discovery_config.metadata` / `.scope`;
    - `discovery_withheld` / `structuring_withheld`: metadata fields ("topic", "phase") that
      discovery (indexes, groups, the selection prompt) or structuring (its prompt, its
      same-topic and phase-order checks, its repair groups) read as null (Exp-6); the
      answer context keeps them.
    """

    discovery_config: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    discovery: bool = True
    retrieval: Retrieval = "discovery"
    selection: SelectionMode = "llm"
    cut: bool = False
    structuring: bool = True
    typed_relations: bool = True
    compression: bool = True
    discovery_withheld: tuple[str, ...] = ()
    structuring_withheld: tuple[str, ...] = ()
    select_batch: int = 20
    min_coverage: float = 0.5
    link_batch: int = 12
    link_context_tokens: int = 2048  # earlier messages of the topic shown to structuring

    def __post_init__(self) -> None:
        check_withheld(self.discovery_withheld, "TMemConfig.discovery_withheld")
        check_withheld(self.structuring_withheld, "TMemConfig.structuring_withheld")
        if self.retrieval != "discovery" and self.discovery:
            raise ValueError(f"TMemConfig.retrieval {self.retrieval!r} replaces discovery: "
                             f"set discovery = false")

    def removed(self) -> list[str]:
        """What this configuration removes from, or changes in, full T-MEM."""
        search = self.discovery_config
        changes = [
            (not self.discovery, "temporal evidence discovery (interval search, similarity "
                                 "filter, LLM selection): the Top-k anchors go to structuring"),
            (self.retrieval == "bm25_expand", "seed retrieval: BM25 (Expand)'s Top-k messages"),
            (self.discovery and self.selection == "heuristic",
             "LLM evidence selection: the project's no-LLM reranker"),
            (self.cut, "messages past the selection's Top-k"),
            (not self.structuring, "temporal memory structuring: the forest's messages as a "
                                   "flat list in selection rank order"),
            (not self.typed_relations, "relation types: RELATED edges"),
            (not self.compression, "span compression"),
            (not search.metadata, "metadata expansion of the indexes"),
            (search.scope == "global", "temporal localisation: the anchors' whole groups"),
            (bool(self.discovery_withheld),
             f"{'/'.join(self.discovery_withheld)} from discovery"),
            (bool(self.structuring_withheld),
             f"{'/'.join(self.structuring_withheld)} from structuring"),
        ]
        return [what for on, what in changes if on]

    def switches(self) -> dict[str, Any]:
        return {"discovery": self.discovery, "retrieval": self.retrieval,
                "selection": self.selection, "cut": self.cut, "removed": self.removed(),
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
    _structuring: dict[str, tuple[Conversation, Constraints]] = field(default_factory=dict,
                                                                      repr=False)
    _discovery_store: IndexStore | None = field(default=None, repr=False)

    def retrieve(self, question: Question) -> Evidence:
        config = self.config.search()
        index = self._seen_by_discovery().index(question.conv_id, config.metadata)
        if question.conv_id not in self._timelines:
            self._timelines[question.conv_id] = Timeline.of(index.conversation)
        seeding = self._seeding(question, index, config)
        found = search(seeding, index.conversation, self._timelines[question.conv_id], config)
        return evidence(self.name, question, [c.message.msg_id for c in found.candidates],
                        Found.of(found), found)

    def selected(self, question: Question, evidence: Evidence, llm: LLM | None) -> Selection:
        """The evidence after selection (cut to Top-k with `cut`), best first: what recall@k
        of this configuration scores."""
        found = _found(evidence)
        seen = self._seen_by_discovery().conversations[question.conv_id]
        candidates = [Candidate(seen.messages[seen.position[c.id]], c.relevance, c.support,
                                c.anchor_rank) for c in found.candidates]
        selection = self._select(question, candidates, found.intervals, llm)
        if self.config.cut:
            return dataclasses.replace(selection, ranked=selection.ranked[:self.top_k])
        return selection

    def selected_ids(self, question: Question, evidence: Evidence,
                     llm: LLM | None) -> tuple[str, ...]:
        return self.selected(question, evidence, llm).ranked

    def construct(self, question: Question, evidence: Evidence, llm: LLM | None,
                  count_tokens: TokenCounter) -> Context:
        conversation = self.store.conversations[question.conv_id]
        selection = self.selected(question, evidence, llm)
        by_id = {c.id: conversation.messages[conversation.position[c.id]]
                 for c in _found(evidence).candidates}
        admitted = admit([by_id[i] for i in selection.ranked], question, self.budget, count_tokens,
                         self._rendering())
        structured = self._structure(question, admitted, llm, conversation, count_tokens)
        rank = {i: k for k, i in enumerate(selection.ranked)}
        rendered = fit(structured.forest, by_id, rank, question, self.budget, count_tokens,
                       self._rendering())
        kind: ContextKind = "forest" if self.config.structuring else "flat"
        return Context(question.qid, self.name, kind, rendered.linearised.text,
                       rendered.linearised.order, rendered.tokens,
                       self._record(selection, admitted, structured, rendered), selection.ranked)

    def _seeding(self, question: Question, index: ConversationIndex,
                 config: DiscoveryConfig) -> Seeding:
        """The Top-k anchors: the hybrid seeds, or BM25 (Expand)'s messages in its order."""
        seeding = seed(question, index, config, self.top_k)
        if self.config.retrieval == "discovery":
            return seeding
        ids = Bm25Expand(self.store)(question, self.top_k).ids
        return dataclasses.replace(seeding, anchors=tuple(
            index.conversation.position[i] for i in ids))

    def _select(self, question: Question, candidates: Sequence[Candidate],
                intervals: Sequence[Interval], llm: LLM | None) -> Selection:
        if not self.config.discovery:  # the anchors in seed rank order, none dropped
            anchors = sorted((c for c in candidates if c.anchor_rank is not None),
                             key=lambda c: c.anchor_rank or 0)
            return Selection({}, tuple(c.message.msg_id for c in anchors))
        if self.config.selection == "heuristic":
            ranked = ContextReranker().select(question, candidates, None)
            return Selection({}, tuple(ranked))
        selector = LLMSelector(_need(llm), self.config.select_batch, self.config.min_coverage)
        return selector.label(question, candidates, intervals)

    def _structure(self, question: Question, admitted: Sequence[Message], llm: LLM | None,
                   conversation: Conversation, count_tokens: TokenCounter) -> Structured:
        if not self.config.structuring:
            return Structured(flat_forest(admitted), Proposals({}))  # admitted: rank order
        structurer = Structurer(_need(llm), count_tokens, self.config.link_batch,
                                self.config.link_context_tokens)
        seen_conversation, constraints = self._seen_by_structuring(conversation)
        seen = [seen_conversation.messages[conversation.position[m.msg_id]] for m in admitted]
        return structure(question, seen, structurer, constraints, self.config.typed_relations)

    def _seen_by_structuring(self, conversation: Conversation
                             ) -> tuple[Conversation, Constraints]:
        """The conversation as structuring reads it (its withheld fields null) and the phase
        constraints of its edges, once per conversation."""
        if conversation.conv_id not in self._structuring:
            seen = withheld_conversation(conversation, self.config.structuring_withheld)
            self._structuring[conversation.conv_id] = (seen,
                                                       Constraints(phase_order(seen.messages)))
        return self._structuring[conversation.conv_id]

    def _record(self, selection: Selection, admitted: Sequence[Message],
                structured: Structured, rendered: Rendered) -> Built:
        compression = rendered.compression
        return Built(forest=tuple(rendered.forest.nodes.values()),
                     labels=dict(selection.labels), trimmed=rendered.trimmed,
                     repairs=structured.repairs,
                     failures=(*selection.failures, *structured.proposals.failures),
                     compression=compression.figures() if compression else None,
                     degradation=_degradation(selection, admitted, structured, rendered),
                     selection=self._selection_mode(),
                     llm={"select": selection.stats, "structure": structured.proposals.stats})

    def _selection_mode(self) -> str:
        return self.config.selection if self.config.discovery else "none: the anchors"

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


@method("tmem", config=TMemConfig, show=describe, evidence=Found, record=Built,
        checks={"forest_structure": forest_structure}, view=View("forest", forest_view),
        version=4, prompts=(SELECT_PROMPT, STRUCTURE_PROMPT),
        additions=("tmem_global_forest", "tmem_heuristic_forest"), variants={
    # Table 2 (Exp-4): each removes its module only
    "tmem_wo_discovery": {"discovery": False},
    "tmem_wo_structuring": {"structuring": False},
    "tmem_wo_metadata": {"discovery_config": {"metadata": False}},
    "tmem_wo_compression": {"compression": False},
    # E.3 (relation semantics)
    "tmem_untyped": {"typed_relations": False},
    # E.2 (evidence discovery): the same seeds, LLM selection and reranker, cut to Top-k;
    # only the search region differs (temporally localised intervals vs the whole topic)
    "tmem_reranked": {"cut": True},
    "tmem_global": {"cut": True, "discovery_config": {"scope": "global"}},
    # Exp-3 (memory organisation): BM25 (Expand)'s Top-k organised into T-MEM's forest
    "tmem_bm25_expand_forest": {"discovery": False, "retrieval": "bm25_expand"},
    # project additions (not in the paper): no cut over the whole topic; no-LLM selection
    "tmem_global_forest": {"discovery_config": {"scope": "global"}},
    "tmem_heuristic_forest": {"selection": "heuristic"},
    # Exp-6 (robustness to metadata availability): what each module reads as null
    "tmem_wo_topic_in_discovery": {"discovery_withheld": ("topic",)},
    "tmem_wo_meta_in_structuring": {"structuring_withheld": ("topic", "phase")},
    "tmem_wo_meta_in_both": {"discovery_withheld": ("topic", "phase"),
                             "structuring_withheld": ("topic", "phase")},
}, description="T-MEM: temporal discovery, KEY/SUPPORT selection, evidence forest")
def _tmem(env: MethodEnv, config: TMemConfig, name: str) -> ContextMethod:
    return TMem(env.index_store, config, name, env.top_k, env.budget)


def _degradation(selection: Selection, admitted: Sequence[Message], structured: Structured,
                 rendered: Rendered) -> TMemDegradation:
    """What fell back or was repaired on the way (`*_total`: the counts they are out of)."""
    repairs = structured.repairs
    return TMemDegradation(
        selection_fallback_batches=len(selection.failures),
        selection_fallback=sum(label == "FALLBACK" for label in selection.labels.values()),
        selection_labelled_total=len(selection.labels),
        selection_batches_total=selection.stats.calls,
        structure_failed_batches=len(structured.proposals.failures),
        edges_repaired=sum(r.parent is not None for r in repairs),
        edges_dropped=sum(r.parent is None for r in repairs),
        nodes_trimmed=len(rendered.trimmed),
        dropped_before_structuring=len(selection.ranked) - len(admitted),
        admitted_total=len(admitted),
    )


def _found(evidence: Evidence) -> Found:
    if not isinstance(evidence.payload, Found):
        raise ValueError(f"{evidence.qid}: evidence has no T-MEM discovery")
    return evidence.payload


def _need(llm: LLM | None) -> LLM:
    if llm is None:
        raise ValueError("this T-MEM configuration needs an LLM (selection or structuring)")
    return llm
