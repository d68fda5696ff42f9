"""T-MEM (paper §4): Temporal Evidence Discovery with a pluggable evidence selector."""

from tmem_core.methods.tmem._config import DiscoveryConfig, Scope
from tmem_core.methods.tmem._discovery import (
    Candidate,
    Discovery,
    Interval,
    discover,
    find_interval,
    group_anchors,
    interval_density,
    padded_members,
    query_relevance,
    support,
    temporal_clusters,
)
from tmem_core.methods.tmem._method import TemporalDiscovery
from tmem_core.methods.tmem._select import ContextReranker, Selector
from tmem_core.methods.tmem._timeline import GROUP_FIELDS, Timeline, group_key

__all__ = [
    "GROUP_FIELDS",
    "Candidate",
    "ContextReranker",
    "Discovery",
    "DiscoveryConfig",
    "Interval",
    "Scope",
    "Selector",
    "TemporalDiscovery",
    "Timeline",
    "discover",
    "find_interval",
    "group_anchors",
    "group_key",
    "interval_density",
    "padded_members",
    "query_relevance",
    "support",
    "temporal_clusters",
]
