"""A small hand-built group chat: one topic episode, its correction, a far stray mention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.hashed_embedder import HashEmbedder
from tmem_core.retrieval import Conversation, IndexStore
from tmem_core.schema import Message

TOPIC = "Atlas checkout retry limit"
T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
NOISE = ("Anyone up for lunch?", "Coffee machine is broken again.", "Happy Friday everyone!",
         "VPN maintenance tonight.", "Nice demo yesterday.")


def _episode() -> list[tuple[str | None, str]]:
    return [
        (TOPIC, "Kicking off the Atlas checkout retry limit discussion."),  # 10
        (TOPIC, "For the checkout retry limit I propose 3 attempts."),  # 11
        (TOPIC, "Correction: make that 5, effective immediately."),  # 12 (no topic words)
        (TOPIC, "Agreed, sounds good to me."),  # 13
    ]


def chat_messages() -> list[Message]:
    """Positions 0-9 noise (day 0), 10-13 the episode (day 1), 14-33 noise, 34 a stray mention
    of the topic (day 20), 35-39 noise."""
    rows: list[tuple[datetime, str | None, str]] = []
    rows += [(T0 + timedelta(minutes=i), "social", NOISE[i % 5]) for i in range(10)]
    day1 = T0 + timedelta(days=1)
    rows += [(day1 + timedelta(minutes=2 * i), t, text) for i, (t, text) in enumerate(_episode())]
    rows += [(day1 + timedelta(days=1 + i // 4, minutes=i), "social", NOISE[i % 5])
             for i in range(20)]
    rows += [(T0 + timedelta(days=20), TOPIC, "Is Atlas still blocked on the retry limit?")]
    rows += [(T0 + timedelta(days=21, minutes=i), "social", NOISE[i % 5]) for i in range(5)]
    return [Message("c", f"c:{i}", i, when, text, author=f"User_{i % 3}", channel="#eng",
                    topic=topic, session_id=f"c:{when.date()}")
            for i, (when, topic, text) in enumerate(rows)]


@pytest.fixture
def chat() -> Conversation:
    return Conversation("c", tuple(chat_messages()))


@pytest.fixture
def store(chat: Conversation, tmp_path: Path) -> IndexStore:
    return IndexStore({"c": chat}, HashEmbedder(), tmp_path)
