"""Parameters of T-MEM's Temporal Evidence Discovery, with their defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scope = Literal["interval", "global"]
HOUR = 3600.0


@dataclass(frozen=True)
class DiscoveryConfig:
    """Paper defaults (§C.1): at most 100 candidates (the 36 anchors and 8,192 evidence tokens
    are the grid's `top_k` and `budget`, the anchors seeded and the context's tokens).

    The density test (§4.2, appendix F.1); the paper gives no values, ours are chosen on the
    LoCoMo development file and the synthetic set (interleaved and not):
    - Seeds are the seed-retrieval anchors. They are grouped by topic (else channel, session,
      conversation), and each group's seeds, on the group's own timeline, split into clusters
      wherever consecutive seeds are more than `max_gap_seconds` apart (time only: messages
      of other groups in between do not count).
    - A cluster's density is its seeds per hour of its span in time (first to last seed), the
      span floored at `min_span_seconds` so that a burst is not infinitely dense: the same
      seeds spread over a longer span score lower (the span penalises diffuse activity). The
      cluster becomes an interval when density >= `min_density` seeds per hour, a threshold
      between the background rate of seeds (about 0.02 per hour of the conversation outside
      the episodes that hold evidence, at 36 anchors) and their rate in a relevant episode (a
      median of three per hour). With 1 per hour and a 1-hour floor, one seed in a burst
      qualifies and a cluster needs a seed per hour of its span; at 2 per hour lone seeds
      fail, and with them a tenth to a half of the clusters that hold evidence (the fewer
      the anchors, the more).
    - A kept interval spans its group's messages from the first to the last seed, padded by
      `padding` group messages on either side (each within `max_gap_seconds` of the previous
      one), to take in confirmations, corrections and updates next to its seeds.
    - Candidates (anchors and interval members) are cut to `max_candidates` by relevance.
    """

    max_candidates: int = 100
    metadata: bool = True  # metadata-expanded message indexes (every query names the asker)
    scope: Scope = "interval"  # "global": whole anchor groups instead of intervals (ablation)
    max_gap_seconds: float = 2 * HOUR
    min_span_seconds: float = HOUR
    min_density: float = 1.0  # seeds per hour
    padding: int = 2
    lexical_weight: float = 1.0  # relevance = cosine + lexical_weight * BM25 / max BM25
    support_window: int = 2  # group neighbours on either side that lend support
    support_decay: float = 0.6  # weight of a neighbour at distance d: decay ** (d - 1)

    def __post_init__(self) -> None:
        if self.min_span_seconds <= 0:
            raise ValueError(f"DiscoveryConfig.min_span_seconds must be positive, got "
                             f"{self.min_span_seconds}")
        for name in ("max_gap_seconds", "min_density", "padding"):
            if getattr(self, name) < 0:
                raise ValueError(f"DiscoveryConfig.{name} must not be negative, got "
                                 f"{getattr(self, name)}")
