"""Temporal Evidence Discovery, step by step, on a hand-built group chat."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

import numpy as np

from tmem_core.methods import MethodEnv, build_method
from tmem_core.methods.tmem import (
    Candidate,
    Discovery,
    DiscoveryConfig,
    TemporalDiscovery,
    Timeline,
    find_interval,
    group_anchors,
    group_key,
    padded_members,
    temporal_clusters,
)
from tmem_core.retrieval import Budget, Conversation, IndexStore
from tmem_core.schema import Message, Question

T0 = datetime(2025, 3, 3, tzinfo=UTC)
CONFIG = DiscoveryConfig()
EPISODE, CORRECTION, STRAY = [10, 11, 13], 12, 34
QUESTION = Question("c", "q1", "What is the current retry limit for Atlas checkout?", "ku")


def _intervals(chat: Conversation, anchors: list[int], matched: np.ndarray | None = None,
               config: DiscoveryConfig = CONFIG) -> list[tuple[tuple[str, ...], bool]]:
    timeline = Timeline.of(chat)
    flags = np.zeros(len(chat), bool) if matched is None else matched
    out = []
    for positions in group_anchors(anchors, timeline).values():
        for cluster in temporal_clusters(positions, timeline, config):
            iv = find_interval(cluster, chat, timeline, flags, config)
            out.append((iv.anchors, iv.kept))
    return out


def test_a_dense_episode_is_found_and_a_lone_distant_anchor_is_not(chat: Conversation) -> None:
    found = _intervals(chat, [*EPISODE, STRAY])
    assert (("c:10", "c:11", "c:13"), True) in found
    assert (("c:34",), False) in found


def test_gap_splits_a_group_into_temporal_clusters(chat: Conversation) -> None:
    timeline = Timeline.of(chat)
    assert temporal_clusters([10, 11, 13, 34], timeline, CONFIG) == [[10, 11, 13], [34]]
    tight = replace(CONFIG, max_gap_seconds=60)  # episode messages are 2 minutes apart
    assert temporal_clusters([10, 11], timeline, tight) == [[10], [11]]


def test_diffuse_span_fails_the_density_threshold(chat: Conversation) -> None:
    wide = replace(CONFIG, padding=0, max_gap=100, max_gap_seconds=1e9)
    # 10 and 34 chain under huge gap limits, but only they are seeds among 5 group messages
    assert _intervals(chat, [10, 34], config=wide) == [(("c:10", "c:34"), False)]
    matched = np.zeros(len(chat), bool)
    matched[[11, 12, 13]] = True  # every member matches the query: a dense span
    assert _intervals(chat, [10, 34], matched, config=wide) == [(("c:10", "c:34"), True)]


def test_padding_takes_in_the_correction_right_after_an_anchor(chat: Conversation) -> None:
    members = padded_members([10, 11], Timeline.of(chat), CONFIG)
    assert CORRECTION in members and 13 in members
    assert STRAY not in members  # the next group message is beyond the gap limits
    assert padded_members([10, 11], Timeline.of(chat), replace(CONFIG, padding=0)) == [10, 11]


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


def test_reranked_tmem_recovers_the_wordless_correction(store: IndexStore) -> None:
    plain = build_method("bm25", MethodEnv(store.conversations, 3, 512, store)).retrieve(QUESTION)
    assert "c:12" not in plain.ids
    found = TemporalDiscovery(store)(QUESTION, Budget.top_k(3))
    assert "c:12" in found.ids
    trace = found.trace
    assert isinstance(trace, Discovery) and trace.selected == found.ids
    assert any(iv.kept and "c:12" in iv.members for iv in trace.intervals)
    assert not any(iv.kept and "c:34" in iv.anchors for iv in trace.intervals)
    assert len(trace.anchors) == 3  # anchors follow the Top-k budget by default
    assert list(found.ids) == sorted(found.ids, key=lambda i: int(i.split(":")[1]))


def test_fixed_anchor_depth_and_candidate_cap(store: IndexStore) -> None:
    config = DiscoveryConfig(anchors=6, anchors_follow_budget=False, max_candidates=4)
    found = TemporalDiscovery(store, config)(QUESTION, Budget.top_k(2))
    assert isinstance(found.trace, Discovery)
    assert len(found.trace.anchors) == 6 and len(found.trace.candidates) == 4
    assert len(found.ids) == 2


def test_global_ablation_searches_the_whole_topic(store: IndexStore) -> None:
    found = build_method("tmem_global", MethodEnv(store.conversations, 3, 512, store)
                         ).retrieve(QUESTION)
    assert isinstance(found.trace, Discovery)
    assert found.trace.intervals == ()
    pool = {c.message.msg_id for c in found.trace.candidates}
    assert {"c:10", "c:11", "c:12", "c:13", "c:34"} <= pool


class _Latest:
    """A stand-in selector (where an LLM will go): the most recent candidate only."""

    def select(self, question: Question, candidates: Sequence[Candidate],
               budget: Budget) -> list[str]:
        return [max(candidates, key=lambda c: c.message.seq).message.msg_id]


def test_selector_is_pluggable(store: IndexStore) -> None:
    found = TemporalDiscovery(store, selector=_Latest())(QUESTION, Budget.top_k(5))
    assert isinstance(found.trace, Discovery)
    latest = max(c.message.seq for c in found.trace.candidates)
    assert found.ids == (f"c:{latest}",)


def test_unlimited_budget_falls_back_to_the_token_budget(store: IndexStore) -> None:
    config = DiscoveryConfig(evidence_tokens=12)
    found = TemporalDiscovery(store, config)(QUESTION, Budget(count_tokens=lambda t: 5))
    assert len(found.ids) == 2  # 2 x 5 tokens fit in 12, a third would not
