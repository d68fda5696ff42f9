"""Parameters of T-MEM's Temporal Evidence Discovery, with their defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scope = Literal["interval", "global"]


@dataclass(frozen=True)
class DiscoveryConfig:
    """Paper defaults (§C.1): 36 anchors, at most 100 candidates, 8,192 evidence tokens.

    Our defaults for the temporal steps (documented, not from the paper):
    - A cluster breaks where consecutive anchors of a group are more than `max_gap` messages
      (conversation positions) or `max_gap_seconds` apart.
    - Each cluster spans its group's messages from the first to the last anchor, padded by
      `padding` group messages on either side (only those chained within the gap limits), to
      take in confirmations, corrections and updates next to its anchors.
    - Density = seeds / (group messages in the padded span + `span_penalty`), where seeds are
      the anchors and the members matching the query lexically; the cluster becomes an
      interval when density >= `min_density`. With 3 and 0.3 a lone mention with no activity
      of its group nearby (1/4) never qualifies; an anchor amid matching group messages does,
      while a span where few members match (diffuse activity) does not.
    - Candidates (anchors and interval members) are cut to `max_candidates` by relevance.
    """

    anchors: int = 36
    anchors_follow_budget: bool = True  # Exp-2 protocol: anchors = the budget's message count
    max_candidates: int = 100
    evidence_tokens: int = 8192  # budget used when the caller sets no limit
    metadata: bool = True  # metadata-expanded indexes and query (asking user)
    scope: Scope = "interval"  # "global": whole anchor groups instead of intervals (ablation)
    max_gap: int = 8
    max_gap_seconds: float = 6 * 3600
    span_penalty: float = 3.0
    min_density: float = 0.3
    padding: int = 2
    lexical_weight: float = 1.0  # relevance = cosine + lexical_weight * BM25 / max BM25
    support_window: int = 2  # group neighbours on either side that lend support
    support_decay: float = 0.6  # weight of a neighbour at distance d: decay ** (d - 1)

    def anchor_depth(self, budget_messages: int | None) -> int:
        if self.anchors_follow_budget and budget_messages:
            return budget_messages
        return self.anchors
