"""Per-conversation indexes: BM25, dense, hybrid and metadata expansion (hash embedder)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.hashed_embedder import HashEmbedder
from tmem_core.retrieval import (
    Conversation,
    IndexStore,
    document_text,
    lexical_tokens,
    query_text,
)
from tmem_core.schema import Message, Question

T0 = datetime(2025, 1, 1, tzinfo=UTC)
ROWS = [  # (author, topic, text)
    ("Ann", "Atlas checkout retry limit", "New plan: five attempts, effective immediately."),
    ("Bob", None, "Anyone up for lunch at the ramen place?"),
    ("Cid", "Atlas billing timeout", "The billing timeout should be thirty seconds."),
    ("Bob", None, "Coffee machine is broken again."),
]


@pytest.fixture
def store(tmp_path: Path) -> IndexStore:
    messages = tuple(Message("c", f"c:{i}", i, T0 + timedelta(minutes=i), text, author=a,
                             topic=t) for i, (a, t, text) in enumerate(ROWS))
    return IndexStore({"c": Conversation("c", messages)}, HashEmbedder(), tmp_path)


def test_bm25_ranks_the_lexical_match_first(store: IndexStore) -> None:
    assert store.index("c").ranking("billing timeout", "bm25", 4) == [2]


def test_metadata_expansion_finds_a_message_by_its_topic(store: IndexStore) -> None:
    query = "current retry limit for Atlas checkout"
    assert store.index("c", metadata=False).ranking(query, "bm25", 4) == []
    assert store.index("c", metadata=True).ranking(query, "bm25", 4)[0] == 0


def test_every_query_names_the_asking_user_when_the_question_has_one(store: IndexStore
                                                                     ) -> None:
    q = Question("c", "q", "What did I say about lunch?", "x", asking_user="Bob")
    assert query_text(q) == "Bob: What did I say about lunch?"
    assert query_text(Question("c", "q", "Who said lunch?", "x")) == "Who said lunch?"
    ranked = store.index("c", metadata=True).ranking(query_text(q), "bm25", 4)
    assert set(ranked[:2]) == {1, 3}  # Bob's messages, through the metadata expansion


def test_dense_and_hybrid_return_every_position_once(store: IndexStore) -> None:
    index = store.index("c", metadata=True)
    for kind in ("dense", "hybrid"):
        ranked = index.ranking("billing timeout thirty seconds", kind, 4)  # type: ignore[arg-type]
        assert sorted(ranked) == [0, 1, 2, 3] and ranked[0] == 2


def test_document_text_and_tokens() -> None:
    m = Message("c", "m", 0, T0, "Hello there", author="Ann", role="PM", topic="Atlas")
    assert document_text(m, metadata=False) == "Hello there"
    assert document_text(m, metadata=True) == "Ann | PM | Atlas: Hello there"
    assert lexical_tokens("The retry-limit is 5 attempts") == ["retry", "limit", "attempts"]
