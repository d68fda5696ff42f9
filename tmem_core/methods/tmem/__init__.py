"""T-MEM (paper §4): Temporal Evidence Discovery with a pluggable evidence selector."""

from tmem_core.methods.tmem._build import build_forest
from tmem_core.methods.tmem._compress import Item, QueryTerms, compress
from tmem_core.methods.tmem._config import DiscoveryConfig
from tmem_core.methods.tmem._forest import Forest, Node, Proposal, Relation
from tmem_core.methods.tmem._linearise import linearise
from tmem_core.methods.tmem._method import TemporalDiscovery
from tmem_core.methods.tmem._payload import Built, Found
from tmem_core.methods.tmem._steps import keyed_schema, one_of
from tmem_core.methods.tmem._tmem import TMem, TMemConfig

__all__ = [
    "Built",
    "DiscoveryConfig",
    "Forest",
    "Found",
    "Item",
    "Node",
    "Proposal",
    "QueryTerms",
    "Relation",
    "TMem",
    "TMemConfig",
    "TemporalDiscovery",
    "build_forest",
    "compress",
    "keyed_schema",
    "linearise",
    "one_of",
]
