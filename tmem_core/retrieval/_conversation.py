"""A conversation's messages in order, with positions for index lookups."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from tmem_core.schema import Message, messages_from_table


@dataclass(frozen=True)
class Conversation:
    """The messages of one conversation, sorted by `seq`; a message is addressed by position."""

    conv_id: str
    messages: tuple[Message, ...]
    position: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.messages, key=lambda m: m.seq))
        object.__setattr__(self, "messages", ordered)
        object.__setattr__(self, "position", {m.msg_id: i for i, m in enumerate(ordered)})

    def __len__(self) -> int:
        return len(self.messages)

    def ids(self, positions: Iterable[int]) -> tuple[str, ...]:
        return tuple(self.messages[p].msg_id for p in positions)


def group_conversations(messages: Sequence[Message]) -> dict[str, Conversation]:
    by_conv: dict[str, list[Message]] = defaultdict(list)
    for m in messages:
        by_conv[m.conv_id].append(m)
    return {conv_id: Conversation(conv_id, tuple(ms)) for conv_id, ms in by_conv.items()}


def conversations_from_table(table: pa.Table) -> dict[str, Conversation]:
    """Conversations of a canonical messages table, keyed by `conv_id`."""
    return group_conversations(messages_from_table(table))
