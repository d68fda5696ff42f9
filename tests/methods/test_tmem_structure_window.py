"""Structuring may link a message to any earlier candidate of its topic: the earlier messages
it is shown are bounded by tokens, not by a message window, so a long-range UPDATE (paper
G.2) survives; selection's fallback batches are counted."""

from __future__ import annotations

import functools
from pathlib import Path

from test_tmem_fakes import ScriptedLLM, asked_ids, by_stage, label_all, message, shown_lines

from tests.hashed_embedder import HashEmbedder
from tmem_core.llm import ChatRequest, count_tokens
from tmem_core.methods import MethodEnv
from tmem_core.methods._registry import build_method
from tmem_core.methods.tmem._build import topic_chunks
from tmem_core.methods.tmem._payload import Built
from tmem_core.retrieval import Conversation, IndexStore
from tmem_core.schema import Message, Question

COUNT = functools.partial(count_tokens, "smollm2")
TOPIC = "Atlas LMS export"
FIRST = "Atlas export plan: a nightly LMS export of completions."
LATEST = "Atlas export plan changed: an append-only completion log replaces the LMS export."


def _conversation() -> list[Message]:
    fillers = [f"Atlas export note {k}: the LMS export job needs field {k} mapped."
               for k in range(2, 20)]
    return [message(k, text, topic=TOPIC)
            for k, text in enumerate([FIRST, *fillers, LATEST], start=1)]


def _links(request: ChatRequest) -> dict[str, object]:
    """The latest plan an UPDATE of the first one whenever both are shown; the rest ROOTs."""
    lines = shown_lines(request)
    first = next((i for i, line in lines.items() if FIRST in line), None)
    return {"links": {i: {"parent": first, "relation": "UPDATE"}
                      if first and LATEST in lines[i] else {"parent": "none", "relation": "ROOT"}
                      for i in asked_ids(request)}}


def test_an_update_links_messages_more_than_eight_topic_messages_apart(tmp_path: Path) -> None:
    msgs = _conversation()
    store = IndexStore({"c": Conversation("c", tuple(msgs))}, HashEmbedder(), tmp_path)
    question = Question("c", "q", "What is the Atlas export plan now?", "knowledge_update")
    method = build_method("tmem", MethodEnv(store.conversations, len(msgs), 8000, store))
    llm = ScriptedLLM(by_stage(select=label_all("KEY"), structure=_links))
    context = method.construct(question, method.retrieve(question), llm, COUNT)
    built = context.record
    assert isinstance(built, Built)
    nodes = {n.id: n for n in built.forest}
    assert {"c:1", "c:20"} <= nodes.keys()
    assert (nodes["c:20"].parent, nodes["c:20"].relation) == ("c:1", "UPDATE")
    apart = [m.msg_id for m in msgs].index("c:20") - [m.msg_id for m in msgs].index("c:1")
    assert apart > 8
    assert built.degradation.selection_fallback == 0


def test_earlier_messages_are_bounded_by_tokens_latest_first() -> None:
    msgs = _conversation()
    (first, second) = topic_chunks(msgs, 12, 10_000, COUNT)
    assert first.earlier == () and len(first.messages) == 12
    assert second.earlier == tuple(msgs[:12])  # every earlier message of the topic
    (_, tight) = topic_chunks(msgs, 12, 60, COUNT)  # room for a few lines only
    assert 0 < len(tight.earlier) < 12
    assert tight.earlier == tuple(msgs[12 - len(tight.earlier):12])  # the latest ones


def test_a_failed_selection_batch_counts_its_candidates_as_fallback(tmp_path: Path) -> None:
    msgs = _conversation()
    store = IndexStore({"c": Conversation("c", tuple(msgs))}, HashEmbedder(), tmp_path)
    question = Question("c", "q", "What is the Atlas export plan now?", "knowledge_update")
    method = build_method("tmem", MethodEnv(store.conversations, len(msgs), 8000, store))
    llm = ScriptedLLM(by_stage(select=lambda r: "truncated", structure=_links))
    context = method.construct(question, method.retrieve(question), llm, COUNT)
    built = context.record
    assert isinstance(built, Built)
    counts = built.degradation
    assert counts.selection_fallback == len(built.labels) == counts.selection_labelled_total
    assert counts.selection_fallback_batches == counts.selection_batches_total >= 1
