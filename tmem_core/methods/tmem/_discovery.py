"""Temporal Evidence Discovery (paper §4.2): anchors -> groups -> dense intervals -> candidates."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tmem_core.methods.tmem._config import HOUR, DiscoveryConfig
from tmem_core.methods.tmem._timeline import Timeline
from tmem_core.retrieval import Conversation, ConversationIndex, query_text
from tmem_core.schema import Message, Question


@dataclass(frozen=True)
class Interval:
    """A temporal cluster of one group's seeds; `members` are its padded messages if kept."""

    group: str
    anchors: tuple[str, ...]  # its seeds, in time order
    span_seconds: float  # from the first seed to the last
    size: int  # group messages in the padded interval
    density: float  # seeds per hour of the span (floored)
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
    config: DiscoveryConfig  # the parameters in effect (the density test's among them)
    candidates: tuple[Candidate, ...]  # most relevant first
    selected: tuple[str, ...] = ()  # filled in by the method after selection


def discover(question: Question, index: ConversationIndex, timeline: Timeline,
             config: DiscoveryConfig, depth: int) -> Discovery:
    """Seed `depth` anchors, find their dense intervals and filter the candidates."""
    query = query_text(question)
    anchors = index.ranking(query, "hybrid", depth)
    relevance = query_relevance(index.dense_scores(query), index.bm25_scores(query),
                                config.lexical_weight)
    groups = group_anchors(anchors, timeline)
    ids = index.conversation.ids
    if config.scope == "global":
        intervals: list[Interval] = []
        region = {int(p) for key in groups for p in timeline.members[key]}
    else:
        intervals = [find_interval(c, index.conversation, timeline, config)
                     for positions in groups.values()
                     for c in temporal_clusters(positions, timeline, config)]
        region = {index.conversation.position[i] for iv in intervals for i in iv.members}
    pool = sorted(region | set(anchors), key=lambda p: -relevance[p])[:config.max_candidates]
    rank = {p: r for r, p in enumerate(anchors)}
    candidates = tuple(
        Candidate(index.conversation.messages[p], float(relevance[p]),
                  support(p, relevance, timeline, config), rank.get(p)) for p in pool)
    return Discovery(query, ids(anchors), {k: ids(v) for k, v in groups.items()},
                     tuple(intervals), config, candidates)


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
    """Split a group's seeds (ascending) wherever consecutive ones are more than
    `max_gap_seconds` apart."""
    clusters: list[list[int]] = []
    for p in positions:
        if clusters and timeline.within(clusters[-1][-1], p, config.max_gap_seconds):
            clusters[-1].append(p)
        else:
            clusters.append([p])
    return clusters


def interval_density(seeds: int, span_seconds: float, config: DiscoveryConfig) -> float:
    """Seeds per hour of the span, the span floored at `min_span_seconds`."""
    return seeds * HOUR / max(span_seconds, config.min_span_seconds)


def padded_members(cluster: Sequence[int], timeline: Timeline,
                   config: DiscoveryConfig) -> list[int]:
    """The group's messages from the first to the last seed, plus `padding` on either side
    (each within `max_gap_seconds` of its neighbour towards the interval)."""
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
                  config: DiscoveryConfig) -> Interval:
    """The cluster's density test; a kept cluster's padded interval."""
    span = timeline.span(cluster[0], cluster[-1])
    density = interval_density(len(cluster), span, config)
    kept = density >= config.min_density
    members = padded_members(cluster, timeline, config)
    ids = conversation.ids
    return Interval(timeline.keys[cluster[0]], ids(cluster), span, len(members), density, kept,
                    ids(members) if kept else ())


def support(position: int, relevance: np.ndarray, timeline: Timeline,
            config: DiscoveryConfig) -> float:
    """Decayed relevance of the nearest group neighbours within `max_gap_seconds`."""
    members = timeline.members[timeline.keys[position]]
    own = int(timeline.ordinal[position])
    total = 0.0
    for distance in range(1, config.support_window + 1):
        for o in (own - distance, own + distance):
            if (0 <= o < len(members)
                    and timeline.within(int(members[o]), position, config.max_gap_seconds)):
                total += config.support_decay ** (distance - 1) * float(relevance[members[o]])
    return total


def _chained(timeline: Timeline, positions: Sequence[int], config: DiscoveryConfig) -> bool:
    """Whether each consecutive pair of `positions` is within `max_gap_seconds`."""
    return all(timeline.within(a, b, config.max_gap_seconds)
               for a, b in itertools.pairwise(positions))
