"""Withheld metadata (paper Exp-6): a module that withholds a field reads every message with that
field set to null: in its indexes and groups (discovery), in its prompts (selection,
structuring) and in its code-level checks (structuring's same-topic and phase-order
constraints, its repair groups). The other modules, and the answer context, see the messages
unchanged."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from tmem_core.retrieval import Conversation
from tmem_core.schema import Message

WITHHOLDABLE = ("topic", "phase")


def check_withheld(fields: Sequence[str], where: str) -> None:
    unknown = sorted(set(fields) - set(WITHHOLDABLE))
    if unknown:
        raise ValueError(f"{where}: cannot withhold {unknown}; allowed: "
                         f"{', '.join(WITHHOLDABLE)}")


def withheld(messages: Iterable[Message], fields: Sequence[str]) -> list[Message]:
    """The messages with `fields` set to null (the same objects when there are none)."""
    if not fields:
        return list(messages)
    blank = dict.fromkeys(fields)
    return [dataclasses.replace(m, **blank) for m in messages]  # type: ignore[arg-type]


def withheld_conversation(conversation: Conversation, fields: Sequence[str]) -> Conversation:
    if not fields:
        return conversation
    return Conversation(conversation.conv_id, tuple(withheld(conversation.messages, fields)))
