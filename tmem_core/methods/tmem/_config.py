"""Parameters of T-MEM's Temporal Evidence Discovery, with their defaults."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from tmem_core import check_range

Scope = Literal["interval", "global"]


@dataclass(frozen=True)
class DiscoveryConfig:
    """Paper defaults (§C.1): at most 100 candidates (the 36 anchors and 8,192 evidence tokens
    are the grid's `top_k` and `budget`, the anchors seeded and the context's tokens).

    The density test (§4.2, appendix F.1). Time is read on the conversation's message clock
    (`_discovery.message_clock`): one unit is the conversation's median interval between
    consecutive messages, and a turn stamped with its session's time (LoCoMo) comes one unit
    after the turn before it; so the parameters below are in messages' worth of time, the
    same for a chat of messages seconds apart and one of messages days apart. Seeds (the
    seed-retrieval anchors) are grouped by topic (else channel, session, conversation); each
    group's seeds, on the group's own timeline, split into clusters wherever consecutive
    seeds are more than `max_gap` apart. A cluster's interval lasts from its first seed to
    its last, and at least `min_duration` (the minimum duration δ of F.1: an interval
    observed for less is taken as lasting δ); its rate is seeds per unit of that duration.
    It is kept when its rate exceeds a threshold strictly between two anchor rates:
    - the background rate, estimated per group from the data: the group's seeds outside the
      interval per unit of the group's time outside it (first to last message of the
      group); a group with less than δ of time outside the interval has no background of
      its own, and the conversation's is used alike;
    - the relevant-episode rate: `episode_rate` seeds per unit when `reference_anchors` are
      seeded, scaled by (anchors seeded / reference_anchors) ** `episode_exponent` (an
      episode holds few messages, so its seeds grow more slowly than the anchors);
    - the threshold lies `threshold_position` of the way from the background rate to the
      episode rate (0 < position < 1: strictly between them). When the background is not
      below the episode rate, no threshold lies between them and no interval of the group
      is kept.
    A lone seed passes only when one seed per δ exceeds the threshold; in a quiet group
    (background near zero) that needs position x episode rate x δ < 1, which the
    defaults rule out from 12 anchors up: a lone seed stays an anchor, unpadded.

    A kept interval spans its group's messages from the first to the last seed, padded by
    `padding` group messages on either side (each within `max_gap` of the previous
    one), to take in confirmations, corrections and updates next to its seeds. Candidates
    (anchors and interval members) are cut to `max_candidates` by relevance.

    The paper gives no values for δ, the rates' parameters, the gap or the padding; ours were
    chosen on a development split (`_development.py`; README, "T-MEM as run here") and are
    reported on the rest.
    """

    max_candidates: int = 100
    metadata: bool = True  # metadata-expanded message indexes (every query names the asker)
    scope: Scope = "interval"  # "global": whole anchor groups instead of intervals (ablation)
    max_gap: float = 30.0  # clock units (the conversation's typical message intervals)
    min_duration: float = 10.0  # clock units
    episode_rate: float = 0.3  # seeds per clock unit in a relevant episode, at reference_anchors
    reference_anchors: int = 36
    episode_exponent: float = 0.34
    threshold_position: float = 0.5
    padding: int = 1
    lexical_weight: float = 1.0  # relevance = cosine + lexical_weight * BM25 / max BM25
    support_window: int = 2  # group neighbours on either side that lend support
    support_decay: float = 0.6  # weight of a neighbour at distance d: decay ** (d - 1)

    def __post_init__(self) -> None:
        for name in ("min_duration", "reference_anchors"):
            check_range(name, getattr(self, name), 0, above=True)
        for name in ("max_gap", "episode_rate", "episode_exponent", "padding"):
            check_range(name, getattr(self, name), 0)

        if not 0 < self.threshold_position < 1:
            raise ValueError(f"DiscoveryConfig.threshold_position must lie strictly between 0 "
                             f"and 1, got {self.threshold_position}")

    def episode_rate_at(self, seeded: int) -> float:
        """The relevant-episode rate (seeds per clock unit) when `seeded` anchors are seeded."""
        return float(self.episode_rate * (seeded / self.reference_anchors)
                     ** self.episode_exponent)

    def without_intervals(self) -> DiscoveryConfig:
        """No interval can pass: an episode rate of zero is never above the background."""
        return replace(self, scope="interval", episode_rate=0.0)
