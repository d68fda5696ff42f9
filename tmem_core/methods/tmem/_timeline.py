"""Where a message sits in time and in its discovery group: the group key (topic, else channel,
session, conversation), the per-conversation timeline, and chronological order."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

from tmem_core.retrieval import Conversation
from tmem_core.schema import Message

# Group by topic; when it is null fall back to channel, then session, then the conversation.
GROUP_FIELDS = ("topic", "channel", "session_id")


def group_key(message: Message) -> str:
    for name in GROUP_FIELDS:
        if (value := getattr(message, name)) is not None:
            return f"{name}:{value}"
    return f"conversation:{message.conv_id}"


@dataclass(frozen=True)
class Timeline:
    """Per message: its group key, its index among the group's messages, its time (seconds)."""

    keys: tuple[str, ...]
    members: dict[str, np.ndarray]  # group key -> message positions, ascending
    ordinal: np.ndarray
    seconds: np.ndarray

    @classmethod
    def of(cls, conversation: Conversation) -> Timeline:
        keys = tuple(group_key(m) for m in conversation.messages)
        lists: dict[str, list[int]] = {}
        ordinal = np.zeros(len(keys), dtype=np.int64)
        for position, key in enumerate(keys):
            group = lists.setdefault(key, [])
            ordinal[position] = len(group)
            group.append(position)
        members = {k: np.asarray(v, dtype=np.int64) for k, v in lists.items()}
        seconds = np.asarray([m.timestamp.timestamp() for m in conversation.messages])
        return cls(keys, members, ordinal, seconds)

    def span(self, a: int, b: int) -> float:
        """Seconds between the messages at positions a and b."""
        return abs(float(self.seconds[b] - self.seconds[a]))

    def extent(self) -> float:
        """Seconds from the conversation's first message to its last."""
        return float(self.seconds[-1] - self.seconds[0]) if len(self.seconds) else 0.0

    def group_extent(self, key: str) -> float:
        """Seconds from the group's first message to its last."""
        members = self.members[key]
        return self.span(int(members[0]), int(members[-1]))

    def within(self, a: int, b: int, seconds: float) -> bool:
        """Whether the messages at positions a and b are at most `seconds` apart."""
        return self.span(a, b) <= seconds



def chronological(message: Message) -> tuple[datetime, int]:
    """Sort key of messages in time order (ties broken by conversation order)."""
    return message.timestamp, message.seq
