"""T2Mem episode segmentation: sessions, channel-days, topic windows, parts within a limit."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from tests.methods.conftest import T0, chat_messages
from tmem_core.methods._context import render_message
from tmem_core.methods.t2mem import fit_lines
from tmem_core.methods.t2mem._episodes import episode_mode, segment
from tmem_core.retrieval import Conversation, cl100k_tokens


def two_party() -> Conversation:
    messages = [replace(m, author=("A", "B")[m.seq % 2], session_id=f"S{m.seq // 10}")
                for m in chat_messages()]
    return Conversation("c", tuple(messages))


def test_auto_mode_picks_sessions_only_for_two_party_conversations(chat: Conversation) -> None:
    assert episode_mode(two_party(), "auto") == "session"
    assert episode_mode(chat, "auto") == "channel_day"  # three authors
    no_sessions = Conversation("c", tuple(replace(m, session_id=None)
                                          for m in two_party().messages))
    assert episode_mode(no_sessions, "auto") == "channel_day"
    assert episode_mode(chat, "topic_window") == "topic_window"


def test_sessions_and_channel_days(chat: Conversation) -> None:
    sessions = segment(two_party(), "session", 10_000, cl100k_tokens)
    assert [e.source for e in sessions] == ["S0", "S1", "S2", "S3"]
    assert [len(e.messages) for e in sessions] == [10, 10, 10, 10]
    days = segment(chat, "channel_day", 10_000, cl100k_tokens)
    assert [e.episode_id for e in days] == [f"E{i}" for i in range(1, 10)]
    assert days[1].ids == ("c:10", "c:11", "c:12", "c:13")
    assert days[1].header == "E2 (#eng, 2025-03-04)"
    assert days[1].lines[0] == render_message(chat.messages[10])


def test_topic_windows_break_at_long_gaps(chat: Conversation) -> None:
    windows = segment(chat, "topic_window", 10_000, cl100k_tokens, timedelta(hours=24))
    topic = [e for e in windows if e.source == "Atlas checkout retry limit"]
    # the episode (day 1) and the stray mention (day 20) are separate windows
    assert [e.ids for e in topic] == [("c:10", "c:11", "c:12", "c:13"), ("c:34",)]
    assert [e.episode_id for e in windows] == [f"E{i}" for i in range(1, len(windows) + 1)]
    assert [e.messages[0].seq for e in windows] == sorted(e.messages[0].seq for e in windows)


def test_long_episodes_are_cut_into_balanced_parts_within_the_limit(
        chat: Conversation) -> None:
    day0 = segment(chat, "channel_day", 10_000, cl100k_tokens)[0]
    cost = sum(cl100k_tokens(line) + 1 for line in day0.lines)
    parts = [e for e in segment(chat, "channel_day", cost // 2 + 5, cl100k_tokens)
             if e.start.date() == T0.date()]
    assert [e.source for e in parts] == ["#eng part 1/2", "#eng part 2/2"]
    assert sum((e.ids for e in parts), ()) == day0.ids
    assert all(sum(cl100k_tokens(line) + 1 for line in e.lines) <= cost // 2 + 5 for e in parts)


@pytest.mark.parametrize("budget", [0, 5, 30, 1000])
def test_fit_lines_keeps_a_prefix_within_the_budget(budget: int) -> None:
    lines = ["one two three four five six seven eight nine ten"] * 3
    kept = fit_lines(lines, budget, cl100k_tokens)
    assert sum(cl100k_tokens(line) + 1 for line in kept) <= max(budget, 0)
    if budget >= 12:
        assert kept == lines[: len(kept)] and kept
    elif budget > 1:
        assert len(kept) == 1 and lines[0].startswith(kept[0])  # clipped
