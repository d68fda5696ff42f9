"""T-MEM (paper §4): Temporal Evidence Discovery with a pluggable evidence selector."""

from tmem_core.methods.tmem._compress import (
    Compression,
    Item,
    QueryTerms,
    compress,
    mandatory_text,
    split_spans,
)
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
from tmem_core.methods.tmem._forest import (
    Constraints,
    Forest,
    Node,
    Proposal,
    Relation,
    Repair,
    build_forest,
    flat_forest,
    phase_order,
)
from tmem_core.methods.tmem._labels import LLMSelector, Selection, interval_batches
from tmem_core.methods.tmem._linearise import Linearised, linearise, node_line
from tmem_core.methods.tmem._method import TemporalDiscovery
from tmem_core.methods.tmem._payload import Built, Found
from tmem_core.methods.tmem._rerank import ContextReranker, Selector
from tmem_core.methods.tmem._show import describe, tree
from tmem_core.methods.tmem._structure import Proposals, Structurer, topic_chunks
from tmem_core.methods.tmem._timeline import GROUP_FIELDS, Timeline, group_key
from tmem_core.methods.tmem._tmem import TMem, TMemConfig, discovery_json
from tmem_core.methods.tmem._validate import (
    budget_problems,
    context_problems,
    forest_problems,
    forest_structure,
    order_problems,
)

__all__ = [
    "GROUP_FIELDS",
    "Built",
    "Candidate",
    "Compression",
    "Constraints",
    "ContextReranker",
    "Discovery",
    "DiscoveryConfig",
    "Forest",
    "Found",
    "Interval",
    "Item",
    "LLMSelector",
    "Linearised",
    "Node",
    "Proposal",
    "Proposals",
    "QueryTerms",
    "Relation",
    "Repair",
    "Scope",
    "Selection",
    "Selector",
    "Structurer",
    "TMem",
    "TMemConfig",
    "TemporalDiscovery",
    "Timeline",
    "budget_problems",
    "build_forest",
    "compress",
    "context_problems",
    "describe",
    "discover",
    "discovery_json",
    "find_interval",
    "flat_forest",
    "forest_problems",
    "forest_structure",
    "group_anchors",
    "group_key",
    "interval_batches",
    "interval_density",
    "linearise",
    "mandatory_text",
    "node_line",
    "order_problems",
    "padded_members",
    "phase_order",
    "query_relevance",
    "split_spans",
    "support",
    "temporal_clusters",
    "topic_chunks",
    "tree",
]
