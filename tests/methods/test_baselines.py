"""Baselines on the hand-built chat: full context, ranked retrieval, BM25 (Expand), naive RAG."""

from __future__ import annotations

import pytest

from tmem_core import ConfigError
from tmem_core.methods import MethodEnv, method_names
from tmem_core.methods._registry import build_method
from tmem_core.methods.baselines._naive_rag import NaiveRag, chunk_messages
from tmem_core.methods.baselines._ranked import Bm25Expand, RecentContext
from tmem_core.retrieval import Conversation, IndexStore, cl100k_tokens
from tmem_core.schema import Question

STRAY_Q = Question("c", "q", "Is anyone still blocked?", "x")


def test_recent_context_is_most_recent_first_within_the_budget(store: IndexStore,
                                                              chat: Conversation) -> None:
    ids = RecentContext(store, budget=40)(STRAY_Q, top_k=1).ids  # Top-k does not apply
    assert ids[:3] == ("c:39", "c:38", "c:37")
    newest_first = chat.messages[::-1]
    used = [cl100k_tokens(m.text) for m in newest_first]
    assert sum(used[:len(ids)]) <= 40 < sum(used[:len(ids) + 1])


def test_bm25_expand_adds_the_neighbours_of_each_anchor(store: IndexStore) -> None:
    # "blocked" occurs only in message 34: its block is 33, 34, 35, anchor first
    assert Bm25Expand(store)(STRAY_Q, 3).ids == ("c:34", "c:33", "c:35")
    assert Bm25Expand(store, window=2)(STRAY_Q, 5).ids == (
        "c:34", "c:32", "c:33", "c:35", "c:36")


def test_ranked_retrieval_respects_the_count(store: IndexStore) -> None:
    env = MethodEnv(store.conversations, 2, 512, store)
    for name in ("bm25", "dense", "hybrid", "hybrid_meta"):
        assert len(build_method(name, env).retrieve(STRAY_Q).ids) <= 2


def test_naive_rag_takes_whole_chunks_up_to_k_messages(store: IndexStore,
                                                       chat: Conversation) -> None:
    rag = NaiveRag(store, chunk_size=4)
    chunks = [[m.msg_id for m in c] for c in chunk_messages(chat, 4)]
    one = rag(STRAY_Q, 7).ids  # a second chunk would make 8 > 7
    assert list(one) == chunks[8]  # messages 32-35, the chunk holding "blocked"
    two = rag(STRAY_Q, 8).ids
    assert len(two) == 8 and set(one) <= set(two)
    assert rag(STRAY_Q, 3).ids == ()  # no whole chunk fits


SERVED = {"mcp": {"command": ["memory-server"]},  # systems configured by endpoint name it
          "http": {"ingest_url": "http://h/ingest", "query_url": "http://h/query"}}


def test_registry_knows_every_method(store: IndexStore) -> None:
    env = MethodEnv(store.conversations, 3, 512, store)
    for name in method_names():
        assert build_method(name, env, SERVED.get(name)).name == name
    with pytest.raises(ConfigError, match="unknown method 'nope'; allowed: a_mem, bm25, "):
        build_method("nope", env)
