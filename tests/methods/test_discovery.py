"""Temporal Evidence Discovery: the density test on a hand-built chat, then through real
MiniLM + BM25 indexes on the LoCoMo development file and on the interleaved synthetic set."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from tmem_core.benchmarks import LoadRequest, PreparedBenchmark, build
from tmem_core.evaluation import evidence_recall, recall_scorable
from tmem_core.methods import MethodEnv
from tmem_core.methods._registry import build_method
from tmem_core.methods.tmem import DiscoveryConfig, TemporalDiscovery
from tmem_core.methods.tmem._discovery import (
    Candidate,
    Discovery,
    Interval,
    Seeds,
    background_rate,
    density_threshold,
    discover,
    find_interval,
    group_anchors,
    interval_duration,
    interval_rate,
    message_clock,
    on_message_clock,
    padded_members,
    temporal_clusters,
)
from tmem_core.methods.tmem._timeline import Timeline, group_key
from tmem_core.retrieval import Conversation, IndexStore, MiniLMEmbedder
from tmem_core.retrieval import conversations_from_table as conversations
from tmem_core.schema import Gold, Message, Question, gold_from_table, questions_from_table

T0 = datetime(2025, 3, 3, tzinfo=UTC)
CONFIG = DiscoveryConfig()
DEPTH = 36  # the grid's default Top-k: the anchors seeded
EPISODE, CORRECTION, STRAY = [10, 11, 13], 12, 34
QUESTION = Question("c", "q1", "What is the current retry limit for Atlas checkout?", "ku")
POSITION_GAP = 8  # the former limit: conversation positions between neighbouring group messages


def _interval(chat: Conversation, cluster: list[int], config: DiscoveryConfig = CONFIG,
              group_seeds: int | None = None) -> Interval:
    """The cluster's test at the default depth (36 anchors seeded)."""
    seeds = Seeds(len(cluster) if group_seeds is None else group_seeds, DEPTH)
    return find_interval(cluster, seeds, chat, clock(chat), config)


def clock(chat: Conversation) -> Timeline:
    return on_message_clock(Timeline.of(chat))


# -- the message clock ----------------------------------------------------------------------

def test_the_clock_counts_typical_intervals_whatever_the_time_scale() -> None:
    gaps = [60.0, 60.0, 120.0, 60.0, 86400.0, 60.0]  # one night of silence
    seconds = [0.0, *(sum(gaps[:i + 1]) for i in range(len(gaps)))]
    ticks = message_clock(np.asarray(seconds))
    assert list(ticks[:5]) == [0.0, 1.0, 2.0, 4.0, 5.0]  # the median gap is the unit
    assert ticks[5] - ticks[4] == 1440.0  # the silence, in minutes' worth: no stretched unit
    for scale in (1 / 60, 1000.0):  # messages seconds or weeks apart: the same clock
        assert np.allclose(message_clock(np.asarray(seconds) * scale), ticks)


def test_session_stamped_turns_follow_in_turn_order() -> None:
    """LoCoMo: every turn of a session at the session's time."""
    sessions = [(T0, 6), (T0 + timedelta(days=10), 6)]
    msgs = [Message("c", f"c:{s}{k}", 6 * s + k, when, "hi", session_id=f"s{s}")
            for s, (when, n) in enumerate(sessions) for k in range(n)]
    timeline = clock(Conversation("c", tuple(msgs)))
    assert list(timeline.seconds) == list(range(12))  # one unit per turn, one to the next
    assert timeline.group_extent("session_id:s0") == 5.0  # a session has time of its own


# -- the test itself, on the hand-built chat (conftest) -----------------------------------

def test_rate_is_seeds_per_unit_of_at_least_the_minimum_duration() -> None:
    short = CONFIG.min_duration / 2
    assert interval_rate(3, 0.0, CONFIG) == 3 / CONFIG.min_duration  # a burst lasts δ
    assert interval_rate(3, short, CONFIG) == 3 / CONFIG.min_duration
    assert interval_rate(3, 4 * CONFIG.min_duration, CONFIG) == pytest.approx(
        interval_rate(3, 0.0, CONFIG) / 4)  # the same seeds, spread: diluted


def test_the_threshold_lies_strictly_between_background_and_episode_rates() -> None:
    assert density_threshold(0.1, 2.1, 0.5) == pytest.approx(1.1)
    assert density_threshold(0.1, 2.1, 0.25) == pytest.approx(0.6)
    assert density_threshold(2.0, 2.0, 0.5) is None  # not separated: nothing can pass
    assert density_threshold(3.0, 2.0, 0.5) is None
    assert CONFIG.episode_rate_at(36) == CONFIG.episode_rate
    assert CONFIG.episode_rate_at(9) == pytest.approx(
        CONFIG.episode_rate / 4 ** CONFIG.episode_exponent)
    for position in (0.0, 1.0):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            DiscoveryConfig(threshold_position=position)


def test_background_is_the_groups_rate_outside_the_interval(chat: Conversation) -> None:
    timeline = clock(chat)
    duration = interval_duration(timeline.span(EPISODE[0], EPISODE[-1]), CONFIG)
    outside = timeline.group_extent(timeline.keys[10]) - duration  # the topic's other time
    assert background_rate(EPISODE, Seeds(4, 36), timeline, CONFIG) == pytest.approx(
        1 / outside)  # the stray seed, 19 days later
    assert background_rate(EPISODE, Seeds(3, 36), timeline, CONFIG) == 0.0


def test_a_burst_is_kept_and_a_lone_seed_in_a_quiet_group_is_not(chat: Conversation) -> None:
    burst = _interval(chat, EPISODE)  # 3 seeds within 6 minutes, nothing else in the topic
    assert burst.background == 0.0 and burst.threshold is not None
    assert burst.rate == 3 / burst.duration > burst.threshold and burst.kept
    assert f"c:{CORRECTION}" in burst.members
    lone = _interval(chat, [STRAY], group_seeds=4)
    assert lone.rate == 1 / CONFIG.min_duration < lone.threshold  # type: ignore[operator]
    assert not lone.kept and lone.members == ()  # it stays an anchor, unpadded
    wide = replace(CONFIG, max_gap=1e9)  # 10 and 34, 19 days apart, chain
    spread = _interval(chat, [10, STRAY], wide)
    assert spread.rate < 0.01 and not spread.kept and spread.members == ()


def test_lone_seeds_fail_in_quiet_groups_from_twelve_anchors_up() -> None:
    for depth in (12, 24, 36, 48, 100):
        threshold = density_threshold(0.0, CONFIG.episode_rate_at(depth),
                                      CONFIG.threshold_position)
        assert threshold is not None and interval_rate(1, 0.0, CONFIG) <= threshold
        if depth <= 48:  # three seeds at once are an episode
            assert interval_rate(3, 0.0, CONFIG) > threshold


def test_clusters_split_by_clock_time_not_by_conversation_positions(chat: Conversation
                                                                     ) -> None:
    timeline = clock(chat)
    assert temporal_clusters([10, 11, 13, STRAY], timeline, CONFIG) == [EPISODE, [STRAY]]
    tight = replace(CONFIG, max_gap=1.0)  # episode messages are 2 minutes (units) apart
    assert temporal_clusters([10, 11], timeline, tight) == [[10], [11]]
    crowded = _crowded(chat, between=POSITION_GAP + 1)
    episode = [p for p, m in enumerate(crowded.messages) if m.topic == chat.messages[10].topic]
    assert min(b - a for a, b in pairwise(episode)) > POSITION_GAP
    assert CONFIG.max_gap >= POSITION_GAP + 2  # neighbours are that many minutes (units) apart
    clusters = temporal_clusters(episode[:-1], clock(crowded), CONFIG)  # not the stray
    assert clusters == [episode[:-1]]


def _crowded(chat: Conversation, between: int) -> Conversation:
    """The chat with `between` messages of another channel after each episode message, a
    minute apart (the chat's own pace), the episode's messages `between` + 1 minutes apart:
    the episode's neighbours are far apart in the conversation, near on its clock."""
    rows: list[Message] = []
    for m in chat.messages:
        if m.topic != chat.messages[10].topic or m.seq >= STRAY:
            rows.append(m)
            continue
        start = chat.messages[10].timestamp + timedelta(minutes=(between + 1) * (m.seq - 10))
        rows.append(replace(m, timestamp=start))
        rows += [replace(m, msg_id=f"{m.msg_id}x{k}", text="Lunch at noon?", topic="social",
                         channel="#random", timestamp=start + timedelta(minutes=k + 1))
                 for k in range(between)]
    return Conversation("c", tuple(replace(m, seq=n) for n, m in enumerate(rows)))


def test_padding_takes_in_the_correction_right_after_an_anchor(chat: Conversation) -> None:
    members = padded_members([10, 11], clock(chat), CONFIG)
    assert CORRECTION in members and members == [10, 11, *range(12, 12 + CONFIG.padding)]
    assert STRAY not in members  # the next group message is beyond the gap
    assert padded_members([10, 11], clock(chat), replace(CONFIG, padding=0)) == [10, 11]
    assert padded_members([STRAY], clock(chat), CONFIG) == [STRAY]  # none within the gap
    assert padded_members([10], clock(chat), CONFIG) == [10, *range(11, 11 + CONFIG.padding)]


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="min_duration must be positive"):
        DiscoveryConfig(min_duration=0)
    with pytest.raises(ValueError, match="episode_rate must be 0 or more"):
        DiscoveryConfig(episode_rate=-1)
    with pytest.raises(ValueError, match="max_gap must be 0 or more"):
        DiscoveryConfig(max_gap=-1)


def test_topic_falls_back_to_channel_session_and_conversation() -> None:
    base = Message("c", "m", 0, T0, "x", topic="T", channel="#eng", session_id="s1")
    assert group_key(base) == "topic:T"
    assert group_key(replace(base, topic=None)) == "channel:#eng"
    assert group_key(replace(base, topic=None, channel=None)) == "session_id:s1"
    assert group_key(replace(base, topic=None, channel=None, session_id=None)) == "conversation:c"


def test_null_topics_group_by_channel_in_discovery(chat: Conversation) -> None:
    untopical = Conversation("c", tuple(replace(m, topic=None, channel="#ops" if m.seq >= 10
                                                else "#eng") for m in chat.messages))
    groups = group_anchors([3, 11, 34], Timeline.of(untopical))
    assert groups == {"channel:#eng": [3], "channel:#ops": [11, 34]}


# -- the method on the hand-built chat (hashed embeddings) ---------------------------------

def test_heuristic_tmem_recovers_the_wordless_correction(store: IndexStore) -> None:
    plain = build_method("bm25", MethodEnv(store.conversations, 3, 512, store)).retrieve(QUESTION)
    assert "c:12" not in plain.ids
    found = TemporalDiscovery(store)(QUESTION, 3)
    assert "c:12" in found.ids
    trace = found.detail
    assert isinstance(trace, Discovery) and trace.selected == found.ids
    assert any(iv.kept and "c:12" in iv.members for iv in trace.intervals)
    assert all(iv.members in ((), ("c:34",)) for iv in trace.intervals if "c:34" in iv.anchors)
    assert len(trace.anchors) == 3  # the anchors are Top-k, as the messages kept
    score = {c.message.msg_id: c.relevance + 0.5 * c.support for c in trace.candidates}
    assert list(found.ids) == sorted(found.ids, key=lambda i: -score[i])  # best first


def test_top_k_anchors_and_the_candidate_cap(store: IndexStore) -> None:
    config = DiscoveryConfig(max_candidates=4)
    found = TemporalDiscovery(store, config)(QUESTION, 6)
    assert isinstance(found.detail, Discovery)
    assert len(found.detail.anchors) == 6 and len(found.detail.candidates) == 4
    assert len(found.ids) == 4


def test_global_ablation_searches_the_whole_topic(store: IndexStore) -> None:
    found = build_method("tmem_heuristic_global", MethodEnv(store.conversations, 3, 512, store)
                         ).retrieve(QUESTION)
    assert isinstance(found.detail, Discovery)
    assert found.detail.intervals == ()
    pool = {c.message.msg_id for c in found.detail.candidates}
    assert {"c:10", "c:11", "c:12", "c:13", "c:34"} <= pool


class _Latest:
    """A stand-in selector (where an LLM will go): the most recent candidate only."""

    def select(self, question: Question, candidates: Sequence[Candidate],
               top_k: int | None) -> list[str]:
        return [max(candidates, key=lambda c: c.message.seq).message.msg_id]


def test_selector_is_pluggable(store: IndexStore) -> None:
    found = TemporalDiscovery(store, selector=_Latest())(QUESTION, 5)
    assert isinstance(found.detail, Discovery)
    latest = max(c.message.seq for c in found.detail.candidates)
    assert found.ids == (f"c:{latest}",)


# -- through real indexes on real text -----------------------------------------------------

@dataclass(frozen=True)
class Bench:
    store: IndexStore
    questions: list[Question]
    gold: dict[str, Gold]

    def discover(self, question: Question, depth: int,
                 config: DiscoveryConfig = CONFIG) -> Discovery:
        index = self.store.index(question.conv_id, config.metadata)
        return discover(question, index, Timeline.of(index.conversation), config, depth)

    def recall(self, method: TemporalDiscovery, k: int) -> float:
        return statistics.mean(evidence_recall(method(q, k).ids, self.gold[q.qid])
                               for q in self.questions)


def _bench(prepared: PreparedBenchmark, root: Path, conv_id: str) -> Bench:
    store = IndexStore({conv_id: conversations(prepared.messages)[conv_id]}, MiniLMEmbedder(),
                       root)
    gold = gold_from_table(prepared.questions)
    return Bench(store, [q for q in questions_from_table(prepared.questions)
                         if q.conv_id == conv_id and recall_scorable(gold[q.qid])], gold)


@pytest.fixture(scope="module")
def locomo(locomo_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Bench:
    prepared = build("locomo", LoadRequest(source=locomo_path))
    return _bench(prepared, tmp_path_factory.mktemp("locomo"), "conv-26")


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Bench]:
    root = tmp_path_factory.mktemp("synthetic")
    return {v: _bench(build("synthetic", LoadRequest(size=2000, variant=v)), root, "syn-0-0")
            for v in ("base", "interleaved")}


def _check_density_test(found: Discovery, conversation: Conversation,
                        config: DiscoveryConfig) -> None:
    """Every interval against the definition, recomputed from the messages' clock times."""
    timeline = Timeline.of(conversation)
    ticks = message_clock(timeline.seconds)
    assert sorted(s for iv in found.intervals for s in iv.anchors) == sorted(found.anchors)
    by_group: dict[str, list[list[float]]] = defaultdict(list)
    seeded = len(found.anchors)
    for iv in found.intervals:
        seeds = [conversation.position[i] for i in iv.anchors]
        assert {timeline.keys[p] for p in seeds} == {iv.group}
        times = [float(ticks[p]) for p in seeds]
        assert all(0 <= b - a <= config.max_gap for a, b in pairwise(times))
        span = times[-1] - times[0]
        duration = max(span, config.min_duration)
        assert (iv.span, iv.duration) == pytest.approx((span, duration))
        assert iv.rate == pytest.approx(len(seeds) / duration)
        assert iv.background == pytest.approx(_background(iv, found, ticks, timeline, config))
        episode = config.episode_rate * (seeded / config.reference_anchors) ** \
            config.episode_exponent
        assert iv.episode == pytest.approx(episode)
        if iv.background < episode:
            assert iv.threshold is not None and iv.background < iv.threshold < episode
        else:
            assert iv.threshold is None
        assert iv.kept == (iv.threshold is not None and iv.rate > iv.threshold) == bool(
            iv.members)
        by_group[iv.group].append(times)
    for clusters in by_group.values():  # one group's clusters: apart by more than the gap
        assert all(b[0] - a[-1] > config.max_gap for a, b in pairwise(clusters))


def _background(iv: Interval, found: Discovery, ticks: np.ndarray, timeline: Timeline,
                config: DiscoveryConfig) -> float:
    """Seeds per unit outside the interval: in its group, else in the conversation."""
    group = timeline.members[iv.group]
    scopes = [(len(found.groups[iv.group]), float(ticks[group[-1]] - ticks[group[0]])),
              (len(found.anchors), float(ticks[-1] - ticks[0]))]
    for seeds, extent in scopes:
        outside = extent - iv.duration
        if outside >= config.min_duration:
            return (seeds - len(iv.anchors)) / outside
    return 0.0


def _quiet_lone_and_bursts(found: Discovery) -> tuple[list[Interval], list[Interval]]:
    """Lone seeds of quiet groups (background under a tenth of the episode rate), and bursts
    there (three seeds or more within the minimum duration)."""
    quiet = [iv for iv in found.intervals if iv.background < iv.episode / 10]
    return ([iv for iv in quiet if len(iv.anchors) == 1],
            [iv for iv in quiet if len(iv.anchors) >= 3
             and iv.span <= found.config.min_duration])


def test_density_test_on_locomo_sessions(locomo: Bench) -> None:
    conversation = locomo.store.conversations["conv-26"]
    lone, bursts = 0, 0
    for q in locomo.questions[::3]:
        found = locomo.discover(q, 36)
        _check_density_test(found, conversation, CONFIG)
        # a session's turns share its date, read in turn order: each cluster's span counts
        # the turns from its first seed to its last
        for iv in found.intervals:
            first, last = (conversation.position[iv.anchors[i]] for i in (0, -1))
            assert iv.span == pytest.approx(last - first)
        quiet_lone, quiet_bursts = _quiet_lone_and_bursts(found)
        assert all(not iv.kept and iv.members == () for iv in quiet_lone)
        assert all(iv.kept and len(iv.members) > len(iv.anchors) for iv in quiet_bursts)
        lone, bursts = lone + len(quiet_lone), bursts + len(quiet_bursts)
    assert lone > 10 and bursts > 10  # both happen often on LoCoMo


def test_discovery_beats_its_own_seeds_on_locomo(locomo: Bench) -> None:
    full, off = TemporalDiscovery(locomo.store), TemporalDiscovery(
        locomo.store, CONFIG.without_intervals())
    hybrid = build_method("hybrid_meta", MethodEnv(locomo.store.conversations, 10, 8192,
                                                   locomo.store))
    for q in locomo.questions[::5]:  # without discovery, the seeds are the evidence
        assert set(off(q, 10).ids) == set(hybrid.retrieve(q).ids)
    for k in (10, 36):
        assert locomo.recall(full, k) > locomo.recall(off, k) + 0.05


def test_density_test_on_the_interleaved_synthetic(synthetic: dict[str, Bench]) -> None:
    bench = synthetic["interleaved"]
    lone, bursts = 0, 0
    for q in bench.questions:
        for depth in (12, 36):
            found = bench.discover(q, depth)
            _check_density_test(found, bench.store.conversations["syn-0-0"], CONFIG)
            quiet_lone, quiet_bursts = _quiet_lone_and_bursts(found)
            assert all(not iv.kept and iv.members == () for iv in quiet_lone)
            assert all(iv.kept for iv in quiet_bursts)
            lone, bursts = lone + len(quiet_lone), bursts + len(quiet_bursts)
    assert lone > 10 and bursts > 10
    full, off = TemporalDiscovery(bench.store), TemporalDiscovery(
        bench.store, CONFIG.without_intervals())
    for k in (12, 36):
        assert bench.recall(full, k) > bench.recall(off, k) + 0.2


def _out_of_position_reach(bench: Bench, depth: int) -> list[tuple[bool, bool, bool]]:
    """Evidence that is no seed and that no seed of its episode reaches through neighbouring
    group messages at most POSITION_GAP conversation positions apart (what clustering and
    padding by positions needed): (within its time cluster's padded interval, kept or not; in
    a kept interval; selected) for each."""
    conversation = bench.store.conversations["syn-0-0"]
    timeline = Timeline.of(conversation)
    clocked = on_message_clock(timeline)
    method = TemporalDiscovery(bench.store)
    out = []
    for q in bench.questions:
        evidence = method(q, depth)
        found = evidence.detail
        assert isinstance(found, Discovery)
        seeds = {conversation.position[a] for a in found.anchors}
        for gold_id in bench.gold[q.qid].evidence_ids:
            target = conversation.position[gold_id]
            members = [int(p) for p in timeline.members[timeline.keys[target]]]
            episode = [s for s in seeds if timeline.keys[s] == timeline.keys[target]
                       and clocked.within(s, target, CONFIG.max_gap)]
            if target in seeds or not episode:
                continue
            if all(_steps_apart(members, s, target) > POSITION_GAP for s in episode):
                padded = any(target in padded_members([conversation.position[a]
                                                       for a in iv.anchors], clocked, CONFIG)
                             for iv in found.intervals)
                out.append((padded, any(iv.kept and gold_id in iv.members
                                        for iv in found.intervals), gold_id in evidence.ids))
    return out


def _steps_apart(members: list[int], a: int, b: int) -> int:
    """The widest step, in conversation positions, between group neighbours from a to b."""
    lo, hi = sorted((members.index(a), members.index(b)))
    return max(y - x for x, y in pairwise(members[lo:hi + 1]))


def test_interleaving_breaks_position_gaps_and_time_clusters_recover_the_episode(
        synthetic: dict[str, Bench]) -> None:
    assert _out_of_position_reach(synthetic["base"], 10) == []
    stranded = _out_of_position_reach(synthetic["interleaved"], 10)
    assert len(stranded) >= 3  # interleaving puts other channels between an episode's turns
    assert all(padded for padded, _, _ in stranded)  # each within its episode's time cluster
    kept = [selected for _, kept, selected in stranded if kept]
    assert kept and sum(kept) * 2 >= len(kept)
