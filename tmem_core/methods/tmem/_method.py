"""T-MEM evidence discovery as an evidence method (no structuring yet)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tmem_core.methods._base import Evidence, evidence
from tmem_core.methods._context import ContextMethod
from tmem_core.methods._flat import ranked
from tmem_core.methods._registry import MethodEnv, method
from tmem_core.methods.tmem._config import DiscoveryConfig
from tmem_core.methods.tmem._discovery import discover
from tmem_core.methods.tmem._forest import Timeline
from tmem_core.methods.tmem._rerank import ContextReranker, Selector
from tmem_core.retrieval import IndexStore
from tmem_core.schema import Question


@dataclass
class TemporalDiscovery:
    """`top_k` seeds, temporal evidence discovery, then a selector's `top_k` best (the Exp-2
    protocol: anchors and messages kept are both Top-k). Evidence ids come in time order;
    the `Discovery` is the trace.
    """

    store: IndexStore
    config: DiscoveryConfig = field(default_factory=DiscoveryConfig)
    selector: Selector = field(default_factory=ContextReranker)
    name: str = "tmem_reranked"
    _timelines: dict[str, Timeline] = field(default_factory=dict, repr=False)

    def __call__(self, question: Question, top_k: int) -> Evidence:
        index = self.store.index(question.conv_id, self.config.metadata)
        found = discover(question, index, self._timeline(question.conv_id), self.config, top_k)
        chosen = set(self.selector.select(question, found.candidates, top_k))
        ordered = sorted(chosen, key=index.conversation.position.__getitem__)
        return evidence(self.name, question, ordered, replace(found, selected=tuple(ordered)))

    def _timeline(self, conv_id: str) -> Timeline:
        if conv_id not in self._timelines:
            self._timelines[conv_id] = Timeline.of(self.store.conversations[conv_id])
        return self._timelines[conv_id]


@method("tmem_reranked", config=DiscoveryConfig, ranked=True, version=2, variants={
    "tmem_global": {"scope": "global"},
    "tmem_no_metadata": {"metadata": False},
}, description="T-MEM's temporal discovery with the no-LLM reranker, Top-k messages")
def _temporal_discovery(env: MethodEnv, config: DiscoveryConfig, name: str) -> ContextMethod:
    return ranked(TemporalDiscovery(env.index_store, config, name=name), env)
