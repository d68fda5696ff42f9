"""T-MEM's evidence discovery ranked without an LLM, as evidence methods (project additions:
the paper's T-Mem Reranked and Global Evidence Retrieval select with the LLM, see `_tmem.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tmem_core.methods._base import Evidence, evidence
from tmem_core.methods._context import ContextMethod
from tmem_core.methods._flat import ranked
from tmem_core.methods._registry import MethodEnv, method
from tmem_core.methods.tmem._config import DiscoveryConfig
from tmem_core.methods.tmem._discovery import discover
from tmem_core.methods.tmem._rerank import ContextReranker, Selector, SimilarityFilter
from tmem_core.methods.tmem._timeline import Timeline
from tmem_core.retrieval import IndexStore
from tmem_core.schema import Question


@dataclass
class TemporalDiscovery:
    """`top_k` seeds, temporal evidence discovery, then a selector's `top_k` best (the Exp-2
    protocol: anchors and messages kept are both Top-k). Evidence ids come best first (the
    flat answer prompt's "most relevant first"); the `Discovery` is their detail.
    """

    store: IndexStore
    config: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    selector: Selector = field(default_factory=ContextReranker)
    name: str = "tmem_heuristic"
    _timelines: dict[str, Timeline] = field(default_factory=dict, repr=False)

    def __call__(self, question: Question, top_k: int) -> Evidence:
        index = self.store.index(question.conv_id, self.config.metadata)
        found = discover(question, index, self._timeline(question.conv_id), self.config, top_k)
        chosen = tuple(self.selector.select(question, found.candidates, top_k))
        return evidence(self.name, question, chosen, detail=replace(found, selected=chosen))

    def _timeline(self, conv_id: str) -> Timeline:
        if conv_id not in self._timelines:
            self._timelines[conv_id] = Timeline.of(self.store.conversations[conv_id])
        return self._timelines[conv_id]


@method("tmem_heuristic", config=DiscoveryConfig, ranked=True, version=4, additions=(
    "tmem_heuristic", "tmem_heuristic_global", "tmem_heuristic_no_metadata"), variants={
    "tmem_heuristic_global": {"scope": "global"},
    "tmem_heuristic_no_metadata": {"metadata": False},
}, description="project addition: T-MEM's temporal discovery ranked by the no-LLM reranker "
               "(relevance + 0.5 x neighbour support), Top-k messages, most relevant first")
def _temporal_discovery(env: MethodEnv, config: DiscoveryConfig, name: str) -> ContextMethod:
    return ranked(TemporalDiscovery(env.index_store, config, name=name), env)


@method("tmem_candidates", config=DiscoveryConfig, ranked=True, version=2,
        description="T-MEM's candidate pool as discovery hands it to selection, ranked by its "
                    "similarity filter, Top-k messages (recall reference; no selection)")
def _candidates(env: MethodEnv, config: DiscoveryConfig, name: str) -> ContextMethod:
    return ranked(TemporalDiscovery(env.index_store, config, SimilarityFilter(), name), env)
