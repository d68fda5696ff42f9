"""Episode segmentation: sessions, channel-days or topic windows, cut to fit a token limit."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Literal

from tmem_core.llm._tokens import TokenCounter
from tmem_core.methods._context import render_message
from tmem_core.methods.t2mem._config import EpisodeMode
from tmem_core.retrieval import Conversation, document_text
from tmem_core.schema import Message

Mode = Literal["session", "channel_day", "topic_window"]


@dataclass(frozen=True)
class Episode:
    """Messages that metadata entries link back to, rendered as the LLM reads them.

    `episode_id` is short ("E3", numbered in conversation order) so that the LLM can name it
    in ReadRaw; `source` says what it is (a session id, a channel, a topic), with `part i/n`
    when a long episode was cut; `header` adds the date of its first message.
    """

    episode_id: str
    source: str
    messages: tuple[Message, ...]
    lines: tuple[str, ...]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(m.msg_id for m in self.messages)

    @property
    def start(self) -> datetime:
        return self.messages[0].timestamp

    @property
    def header(self) -> str:
        return f"{self.episode_id} ({self.source}, {self.start:%Y-%m-%d})"

    def transcript(self) -> list[str]:
        """Compact lines for extraction: the date whenever it changes, then `metadata: text`
        per message (ids, times and repeated metadata left out)."""
        lines: list[str] = []
        day = None
        for message in self.messages:
            if message.timestamp.date() != day:
                day = message.timestamp.date()
                lines.append(f"[{message.timestamp:%d %B %Y}]")
            lines.append(document_text(message, metadata=True))
        return lines


def episode_mode(conversation: Conversation, mode: EpisodeMode) -> Mode:
    """`auto`: sessions for two-party conversations with session ids, else channel-days."""
    if mode != "auto":
        return mode
    messages = conversation.messages
    two_party = len({m.author for m in messages}) <= 2
    return "session" if two_party and all(m.session_id for m in messages) else "channel_day"


def segment(conversation: Conversation, mode: Mode, limit: int, count: TokenCounter,
            topic_gap: timedelta = timedelta(hours=24)) -> tuple[Episode, ...]:
    """Episodes in order of their first message; none renders to more than `limit` tokens
    unless it is a single message."""
    lines = {m.msg_id: render_message(m) for m in conversation.messages}
    parts = [part for source, group in _groups(conversation.messages, mode, topic_gap)
             for part in _cut(source, group, limit, [count(lines[m.msg_id]) + 1 for m in group])]
    parts.sort(key=lambda p: p[1][0].seq)
    return tuple(Episode(f"E{i}", source, tuple(ms), tuple(lines[m.msg_id] for m in ms))
                 for i, (source, ms) in enumerate(parts, 1))


def fit_lines(lines: Sequence[str], budget: int, count: TokenCounter) -> list[str]:
    """The longest prefix of `lines` within `budget` tokens (a line break costs one); a first
    line too long on its own is clipped instead."""
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = count(line) + 1
        if used + cost > budget:
            if not kept:
                kept.append(clip(line, budget - 1, count))
            break
        kept.append(line)
        used += cost
    return [line for line in kept if line]


def clip(text: str, budget: int, count: TokenCounter) -> str:
    """`text` shortened (at the end) to at most `budget` tokens."""
    while text and (tokens := count(text)) > budget:
        text = text[: min(len(text) - 1, len(text) * budget // tokens)]
    return text


_Group = tuple[str, list[Message]]


def _groups(messages: Sequence[Message], mode: Mode, topic_gap: timedelta) -> list[_Group]:
    """(label, messages) per group; a group's key adds the day to a channel's label."""
    keys: dict[Mode, Callable[[Message], tuple[str, str]]] = {
        "session": lambda m: (m.session_id or f"{m.timestamp:%Y-%m-%d}",) * 2,
        "channel_day": lambda m: (f"{m.channel} {m.timestamp:%Y-%m-%d}", m.channel or "chat"),
        "topic_window": lambda m: (m.topic or m.channel or "chat",) * 2,
    }
    grouped: dict[tuple[str, str], list[Message]] = defaultdict(list)
    for message in messages:
        grouped[keys[mode](message)].append(message)
    groups = [(label, group) for (_, label), group in grouped.items()]
    if mode != "topic_window":
        return groups
    return [window for label, group in groups for window in _windows(label, group, topic_gap)]


def _windows(label: str, group: list[Message], gap: timedelta) -> list[_Group]:
    windows: list[list[Message]] = []
    for message in group:
        if windows and message.timestamp - windows[-1][-1].timestamp <= gap:
            windows[-1].append(message)
        else:
            windows.append([message])
    return [(label, w) for w in windows]


def _cut(source: str, group: list[Message], limit: int, costs: list[int]) -> list[_Group]:
    """Balanced parts of about equal size, none above `limit` tokens (but a single message),
    a message costing its `costs` (its line's tokens and a line break)."""
    pieces = math.ceil(sum(costs) / limit)
    if pieces <= 1:
        return [(source, group)]
    target = sum(costs) / pieces
    bounds = [0]
    used = 0
    for i, cost in enumerate(costs):
        if i > bounds[-1] and (used + cost > limit or used >= target):
            bounds.append(i)
            used = 0
        used += cost
    bounds.append(len(group))
    n = len(bounds) - 1
    return [(f"{source} part {i}/{n}", group[a:b])
            for i, (a, b) in enumerate(pairwise(bounds), 1)]
