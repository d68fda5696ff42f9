"""Evidence methods by name, as the jobs refer to them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tmem_core.methods._base import EvidenceMethod
from tmem_core.methods.baselines import Bm25Expand, FullContext, NaiveRag, RankedRetrieval
from tmem_core.methods.tmem import DiscoveryConfig, TemporalDiscovery
from tmem_core.retrieval import IndexStore
from tmem_core.schema import DataError

Factory = Callable[[IndexStore, DiscoveryConfig], EvidenceMethod]

_FACTORIES: dict[str, Factory] = {
    "full_context": lambda s, _: FullContext(s),
    "bm25": lambda s, _: RankedRetrieval(s, "bm25"),
    "dense": lambda s, _: RankedRetrieval(s, "dense"),
    "hybrid": lambda s, _: RankedRetrieval(s, "hybrid"),
    "bm25_meta": lambda s, _: RankedRetrieval(s, "bm25", metadata=True),
    "dense_meta": lambda s, _: RankedRetrieval(s, "dense", metadata=True),
    "hybrid_meta": lambda s, _: RankedRetrieval(s, "hybrid", metadata=True),
    "bm25_expand": lambda s, _: Bm25Expand(s),
    "naive_rag": lambda s, _: NaiveRag(s),
    "tmem_reranked": lambda s, c: TemporalDiscovery(s, c),
    "tmem_global": lambda s, c: TemporalDiscovery(s, replace(c, scope="global"),
                                                  name="tmem_global"),
    "tmem_no_metadata": lambda s, c: TemporalDiscovery(s, replace(c, metadata=False),
                                                       name="tmem_no_metadata"),
}

METHOD_NAMES = tuple(_FACTORIES)


def make_method(name: str, store: IndexStore,
                config: DiscoveryConfig | None = None) -> EvidenceMethod:
    """The method registered as `name`; T-MEM variants start from `config`."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise DataError(f"unknown method {name!r}; known: {', '.join(METHOD_NAMES)}") from None
    return factory(store, config or DiscoveryConfig())
