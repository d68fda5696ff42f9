"""T-MEM (paper §4): Temporal Evidence Discovery with a pluggable evidence selector."""

from tmem_core.methods.tmem._build import build_forest
from tmem_core.methods.tmem._compress import Item, QueryTerms, compress
from tmem_core.methods.tmem._config import DiscoveryConfig
from tmem_core.methods.tmem._forest import Proposal
from tmem_core.methods.tmem._linearise import linearise
from tmem_core.methods.tmem._method import TemporalDiscovery
from tmem_core.methods.tmem._payload import Built
from tmem_core.methods.tmem._tmem import TMem, TMemConfig

__all__ = [
    "Built",
    "DiscoveryConfig",
    "Item",
    "Proposal",
    "QueryTerms",
    "TMem",
    "TMemConfig",
    "TemporalDiscovery",
    "build_forest",
    "compress",
    "linearise",
]
