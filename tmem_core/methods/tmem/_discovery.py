"""Temporal Evidence Discovery (paper §4.2): anchors -> groups -> dense intervals -> candidates."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tmem_core.methods.tmem._config import DiscoveryConfig
from tmem_core.methods.tmem._timeline import Timeline
from tmem_core.retrieval import Conversation, ConversationIndex, query_text
from tmem_core.schema import Message, Question


@dataclass(frozen=True)
class Interval:
    """A temporal cluster of one group's anchors; `members` are its padded messages if kept."""

    group: str
    anchors: tuple[str, ...]
    span: int  # group messages in the padded interval
    density: float
    kept: bool
    members: tuple[str, ...]


@dataclass(frozen=True)
class Candidate:
    """A message offered to the selector, with the discovery signals a reranker may use."""

    message: Message
    relevance: float  # similarity to the query: cosine + weighted normalised BM25
    support: float  # relevance of its nearby group neighbours (temporal locality)
    anchor_rank: int | None  # 0 = best seed; None when found by discovery only


@dataclass(frozen=True)
class Discovery:
    """Everything discovery did for one question, for selection and inspection."""

    query: str
    anchors: tuple[str, ...]  # seed ids, best first
    groups: dict[str, tuple[str, ...]]  # group key -> its anchor ids, in time order
    intervals: tuple[Interval, ...]  # every cluster, kept or not
    candidates: tuple[Candidate, ...]  # most relevant first
    selected: tuple[str, ...] = ()  # filled in by the method after selection


def discover(question: Question, index: ConversationIndex, timeline: Timeline,
             config: DiscoveryConfig, depth: int) -> Discovery:
    """Seed `depth` anchors, find their dense intervals and filter the candidates."""
    query = query_text(question, config.metadata)
    anchors = index.ranking(query, "hybrid", depth)
    lexical = index.bm25_scores(query)
    relevance = query_relevance(index.dense_scores(query), lexical, config.lexical_weight)
    groups = group_anchors(anchors, timeline)
    ids = index.conversation.ids
    if config.scope == "global":
        intervals: list[Interval] = []
        region = {int(p) for key in groups for p in timeline.members[key]}
    else:
        intervals = [find_interval(c, index.conversation, timeline, lexical > 0, config)
                     for positions in groups.values()
                     for c in temporal_clusters(positions, timeline, config)]
        region = {index.conversation.position[i] for iv in intervals for i in iv.members}
    pool = sorted(region | set(anchors), key=lambda p: -relevance[p])[:config.max_candidates]
    rank = {p: r for r, p in enumerate(anchors)}
    candidates = tuple(
        Candidate(index.conversation.messages[p], float(relevance[p]),
                  support(p, relevance, timeline, config), rank.get(p)) for p in pool)
    return Discovery(query, ids(anchors), {k: ids(v) for k, v in groups.items()},
                     tuple(intervals), candidates)


def query_relevance(dense: np.ndarray, lexical: np.ndarray, lexical_weight: float) -> np.ndarray:
    """Cosine similarity plus `lexical_weight` times BM25 scaled to [0, 1], per message."""
    top = float(lexical.max()) if len(lexical) else 0.0
    scaled = lexical / top if top > 0 else lexical
    return np.asarray(dense + lexical_weight * scaled, dtype=np.float64)


def group_anchors(anchors: Sequence[int], timeline: Timeline) -> dict[str, list[int]]:
    """Anchor positions by group key (topic, else channel, session, conversation), in time order."""
    groups: dict[str, list[int]] = {}
    for p in sorted(anchors):
        groups.setdefault(timeline.keys[p], []).append(p)
    return groups


def temporal_clusters(positions: Sequence[int], timeline: Timeline,
                      config: DiscoveryConfig) -> list[list[int]]:
    """Split a group's anchors (ascending) wherever consecutive ones are beyond the gap limits."""
    clusters: list[list[int]] = []
    for p in positions:
        if clusters and timeline.near(clusters[-1][-1], p, config.max_gap,
                                      config.max_gap_seconds):
            clusters[-1].append(p)
        else:
            clusters.append([p])
    return clusters


def interval_density(members: Sequence[int], anchors: Sequence[int], matched: np.ndarray,
                     config: DiscoveryConfig) -> float:
    """Seeds per group message of the padded interval, with the span penalty.

    Seeds are the anchors and every other member that matches the query lexically (with
    metadata expansion: shares its topic, author or words). A lone mention far from any
    activity of its group spans one message and never reaches the threshold; an anchor inside
    a burst of its topic does.
    """
    seeds = set(anchors) | {p for p in members if matched[p]}
    return len(seeds) / (len(members) + config.span_penalty)


def padded_members(cluster: Sequence[int], timeline: Timeline,
                   config: DiscoveryConfig) -> list[int]:
    """The group's messages from the first to the last anchor, plus `padding` on either side
    (only those within the gap limits of the interval's ends)."""
    first, last = cluster[0], cluster[-1]
    members = timeline.members[timeline.keys[first]]
    lo, hi = int(timeline.ordinal[first]), int(timeline.ordinal[last])
    before = [int(p) for p in members[max(0, lo - config.padding):lo]]
    after = [int(p) for p in members[hi + 1:hi + 1 + config.padding]]
    return ([p for i, p in enumerate(before) if _chained(timeline, [*before[i:], first], config)]
            + [int(p) for p in members[lo:hi + 1]]
            + [p for i, p in enumerate(after) if _chained(timeline, [last, *after[:i + 1]],
                                                          config)])


def find_interval(cluster: Sequence[int], conversation: Conversation, timeline: Timeline,
                  matched: np.ndarray, config: DiscoveryConfig) -> Interval:
    """The padded interval of a cluster, kept when its seed density passes the threshold."""
    members = padded_members(cluster, timeline, config)
    density = interval_density(members, cluster, matched, config)
    kept = density >= config.min_density
    ids = conversation.ids
    return Interval(timeline.keys[cluster[0]], ids(cluster), len(members), density, kept,
                    ids(members) if kept else ())


def support(position: int, relevance: np.ndarray, timeline: Timeline,
            config: DiscoveryConfig) -> float:
    """Decayed relevance of the nearest group neighbours within the gap limits."""
    members = timeline.members[timeline.keys[position]]
    own = int(timeline.ordinal[position])
    total = 0.0
    for distance in range(1, config.support_window + 1):
        for o in (own - distance, own + distance):
            if 0 <= o < len(members) and _near(timeline, int(members[o]), position, config):
                total += config.support_decay ** (distance - 1) * float(relevance[members[o]])
    return total


def _near(timeline: Timeline, a: int, b: int, config: DiscoveryConfig) -> bool:
    return timeline.near(a, b, config.max_gap, config.max_gap_seconds)


def _chained(timeline: Timeline, positions: Sequence[int], config: DiscoveryConfig) -> bool:
    """Whether each consecutive pair of `positions` is within the gap limits."""
    return all(_near(timeline, a, b, config) for a, b in itertools.pairwise(positions))
