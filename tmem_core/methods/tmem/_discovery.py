"""Temporal Evidence Discovery (paper §4.2): anchors -> groups -> dense intervals -> candidates.

The density test reads time on the conversation's own message clock (`message_clock`), so
that its parameters hold across conversations whose messages come seconds or days apart.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from tmem_core.methods.tmem._config import DiscoveryConfig
from tmem_core.methods.tmem._timeline import Timeline
from tmem_core.retrieval import Conversation, ConversationIndex, query_text
from tmem_core.schema import Message, Question


@dataclass(frozen=True)
class Interval:
    """A temporal cluster of one group's seeds and its density test (see `DiscoveryConfig`);
    `members` are its padded messages if kept."""

    group: str
    anchors: tuple[str, ...]  # its seeds, in time order
    span: float  # from the first seed to the last, in clock units (`message_clock`)
    duration: float  # the span, at least the minimum duration
    size: int  # group messages in the padded interval
    rate: float  # seeds per clock unit of the duration
    background: float  # the group's background rate (seeds per clock unit)
    episode: float  # the relevant-episode rate at this many anchors (seeds per clock unit)
    threshold: float | None  # between background and episode; None: they are not separated
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


@dataclass(frozen=True)
class Seeding:
    """A question's seed retrieval: its query, anchor positions (best first), and the
    relevance of every message of the conversation to the query."""

    query: str
    anchors: tuple[int, ...]
    relevance: np.ndarray

    def top(self, depth: int) -> Seeding:
        """The same seeding with the best `depth` anchors (the hybrid ranking's prefix)."""
        return Seeding(self.query, self.anchors[:depth], self.relevance)


def seed(question: Question, index: ConversationIndex, config: DiscoveryConfig,
         depth: int) -> Seeding:
    query = query_text(question)
    return Seeding(query, tuple(index.ranking(query, "hybrid", depth)),
                   query_relevance(index.dense_scores(query), index.bm25_scores(query),
                                   config.lexical_weight))


def discover(question: Question, index: ConversationIndex, timeline: Timeline,
             config: DiscoveryConfig, depth: int) -> Discovery:
    """Seed `depth` anchors, find their dense intervals and filter the candidates."""
    return search(seed(question, index, config, depth), index.conversation, timeline, config)


def search(seeding: Seeding, conversation: Conversation, timeline: Timeline,
           config: DiscoveryConfig) -> Discovery:
    """The seeds' groups, clusters and density tests (on `timeline` read on the message
    clock), then the candidate pool."""
    anchors, relevance = seeding.anchors, seeding.relevance
    timeline = on_message_clock(timeline)
    groups = group_anchors(anchors, timeline)
    if config.scope == "global":
        intervals: list[Interval] = []
        region = {int(p) for key in groups for p in timeline.members[key]}
    else:
        intervals = [find_interval(c, Seeds(len(positions), len(anchors)), conversation,
                                   timeline, config)
                     for positions in groups.values()
                     for c in temporal_clusters(positions, timeline, config)]
        region = {conversation.position[i] for iv in intervals for i in iv.members}
    pool = sorted(region | set(anchors), key=lambda p: -relevance[p])[:config.max_candidates]
    rank = {p: r for r, p in enumerate(anchors)}
    candidates = tuple(
        Candidate(conversation.messages[p], float(relevance[p]),
                  support(p, relevance, timeline, config), rank.get(p)) for p in pool)
    ids = conversation.ids
    return Discovery(seeding.query, ids(anchors), {k: ids(v) for k, v in groups.items()},
                     tuple(intervals), config, candidates)


def message_clock(seconds: np.ndarray) -> np.ndarray:
    """Each message's time (in conversation order) in units of the conversation's typical
    interval between messages: the median of its positive gaps between consecutive messages.
    A message stamped no later than the one before it (LoCoMo stamps every turn of a session
    with the session's time) comes one unit after it: turn order within a session.

    The median, not the mean, so that silences (nights, LoCoMo's days between sessions) do
    not stretch the unit; positions alone would count a busy parallel channel's messages as
    time between one topic's messages."""
    if len(seconds) < 2:
        return np.zeros(len(seconds))
    gaps = np.diff(seconds)
    positive = gaps[gaps > 0]
    unit = float(np.median(positive)) if len(positive) else 1.0
    steps = np.where(gaps > 0, gaps / unit, 1.0)
    return np.concatenate([[0.0], np.cumsum(steps)])


def on_message_clock(timeline: Timeline) -> Timeline:
    """`timeline` with its times in message-clock units (`message_clock`)."""
    return replace(timeline, seconds=message_clock(timeline.seconds))


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
    """Split a group's seeds (ascending) wherever consecutive ones are more than `max_gap`
    apart."""
    clusters: list[list[int]] = []
    for p in positions:
        if clusters and timeline.within(clusters[-1][-1], p, config.max_gap):
            clusters[-1].append(p)
        else:
            clusters.append([p])
    return clusters


@dataclass(frozen=True)
class Seeds:
    """How many seeds fell in a cluster's group, and in the whole conversation."""

    group: int
    seeded: int


def interval_duration(span: float, config: DiscoveryConfig) -> float:
    return max(span, config.min_duration)


def interval_rate(seeds: int, span: float, config: DiscoveryConfig) -> float:
    """Seeds per clock unit of the interval's duration (its span, at least the minimum)."""
    return seeds / interval_duration(span, config)


def background_rate(cluster: Sequence[int], seeds: Seeds, timeline: Timeline,
                    config: DiscoveryConfig) -> float:
    """Seeds per clock unit outside the interval: the group's, else (with less than the
    minimum duration of the group's time outside it) the conversation's; zero with neither."""
    duration = interval_duration(timeline.span(cluster[0], cluster[-1]), config)
    for count, extent in ((seeds.group, timeline.group_extent(timeline.keys[cluster[0]])),
                          (seeds.seeded, timeline.extent())):
        outside = extent - duration
        if outside >= config.min_duration:
            return (count - len(cluster)) / outside
    return 0.0


def density_threshold(background: float, episode: float, position: float) -> float | None:
    """The rate `position` (0 < position < 1) of the way from the background rate to the
    episode rate, strictly between them; None when the background is not below the episode
    rate (no threshold separates them)."""
    return background + position * (episode - background) if background < episode else None


def padded_members(cluster: Sequence[int], timeline: Timeline,
                   config: DiscoveryConfig) -> list[int]:
    """The group's messages from the first to the last seed, plus `padding` on either side
    (each within `max_gap` of its neighbour towards the interval)."""
    first, last = cluster[0], cluster[-1]
    members = timeline.members[timeline.keys[first]]
    lo, hi = int(timeline.ordinal[first]), int(timeline.ordinal[last])
    before = [int(p) for p in members[max(0, lo - config.padding):lo]]
    after = [int(p) for p in members[hi + 1:hi + 1 + config.padding]]
    return ([p for i, p in enumerate(before) if _chained(timeline, [*before[i:], first], config)]
            + [int(p) for p in members[lo:hi + 1]]
            + [p for i, p in enumerate(after) if _chained(timeline, [last, *after[:i + 1]],
                                                          config)])


def find_interval(cluster: Sequence[int], seeds: Seeds, conversation: Conversation,
                  timeline: Timeline, config: DiscoveryConfig) -> Interval:
    """The cluster's density test; a kept cluster's padded interval."""
    span = timeline.span(cluster[0], cluster[-1])
    rate = interval_rate(len(cluster), span, config)
    background = background_rate(cluster, seeds, timeline, config)
    episode = config.episode_rate_at(seeds.seeded)
    threshold = density_threshold(background, episode, config.threshold_position)
    kept = threshold is not None and rate > threshold
    members = padded_members(cluster, timeline, config)
    ids = conversation.ids
    return Interval(timeline.keys[cluster[0]], ids(cluster), span,
                    interval_duration(span, config), len(members), rate, background, episode,
                    threshold, kept, ids(members) if kept else ())


def support(position: int, relevance: np.ndarray, timeline: Timeline,
            config: DiscoveryConfig) -> float:
    """Decayed relevance of the nearest group neighbours within `max_gap`."""
    members = timeline.members[timeline.keys[position]]
    own = int(timeline.ordinal[position])
    total = 0.0
    for distance in range(1, config.support_window + 1):
        for o in (own - distance, own + distance):
            if (0 <= o < len(members)
                    and timeline.within(int(members[o]), position, config.max_gap)):
                total += config.support_decay ** (distance - 1) * float(relevance[members[o]])
    return total


def _chained(timeline: Timeline, positions: Sequence[int], config: DiscoveryConfig) -> bool:
    """Whether each consecutive pair of `positions` is within `max_gap`."""
    return all(timeline.within(a, b, config.max_gap)
               for a, b in itertools.pairwise(positions))
