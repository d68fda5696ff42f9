"""The ablations change only their part, through real indexes on the shared LoCoMo file
(MiniLM + faiss + BM25), with scripted LLM outputs that keep some messages and drop others."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_tmem_fakes import ScriptedLLM, asked_ids, by_stage

from tmem_core.benchmarks import LoadRequest, build
from tmem_core.llm import ChatRequest, count_tokens
from tmem_core.methods import MethodEnv
from tmem_core.methods._registry import build_method
from tmem_core.methods.tmem import Built
from tmem_core.retrieval import IndexStore, MiniLMEmbedder, conversations_from_table
from tmem_core.schema import Question, questions_from_table

COUNT = functools.partial(count_tokens, "smollm2")
LABELS = ("KEY", "SUPPORT", "DROP")


def _labels(request: ChatRequest) -> dict[str, object]:
    """KEY, SUPPORT or DROP by the local id's number: the same for the same candidates."""
    return {"labels": {i: LABELS[int(i[1:]) % 3] for i in asked_ids(request)}}


def _links(request: ChatRequest) -> dict[str, object]:
    """Each message an UPDATE of the one shown before it (the first a ROOT)."""
    asked = asked_ids(request)
    return {"links": {i: {"parent": asked[k - 1] if k else "none",
                          "relation": "UPDATE" if k else "ROOT"} for k, i in enumerate(asked)}}


@pytest.fixture(scope="module")
def locomo(locomo_path: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[IndexStore, list[Question]]:
    prepared = build("locomo", LoadRequest(source=locomo_path))
    conversations = {"conv-26": conversations_from_table(prepared.messages)["conv-26"]}
    store = IndexStore(conversations, MiniLMEmbedder(), tmp_path_factory.mktemp("locomo"))
    questions = [q for q in questions_from_table(prepared.questions) if q.conv_id == "conv-26"]
    return store, questions[::25]


@dataclass(frozen=True)
class Ran:
    built: Built
    ranked: tuple[str, ...]  # the selection, best first


def _run(store: IndexStore, name: str, question: Question, top_k: int, budget: int
         ) -> tuple[tuple[str, ...], dict[str, object], ScriptedLLM]:
    llm = ScriptedLLM(by_stage(select=_labels, structure=_links))
    method = build_method(name, MethodEnv(store.conversations, top_k, budget, store))
    context = method.construct(question, method.retrieve(question), llm, COUNT)
    assert isinstance(context.record, Built) and context.selected is not None
    return context.ids, Ran(context.record, context.selected), llm


@pytest.mark.parametrize("budget", [8192, 650])  # 650: fewer admitted than selected, none trimmed
def test_flat_ablation_lists_the_forests_messages_in_selection_rank(
        locomo: tuple[IndexStore, list[Question]], budget: int) -> None:
    store, questions = locomo
    for q in questions:
        forest_ids, forest, _ = _run(store, "tmem", q, 36, budget)
        flat_ids, flat, llm = _run(store, "tmem_wo_structuring", q, 36, budget)
        assert not forest.built.trimmed  # so the forest holds every admitted message
        assert set(flat_ids) == set(forest_ids)  # the same messages, not more ...
        ranked = forest.ranked
        assert list(flat_ids) == [i for i in ranked if i in set(forest_ids)]  # ... by rank
        assert (flat.ranked, flat.built.labels) == (forest.ranked, forest.built.labels)
        assert [b[0].stage for b in llm.batches] == ["tmem.select"]
    assert budget == 8192 or any(  # the small budget admits fewer than were selected
        len(_run(store, "tmem", q, 36, budget)[0]) < len(
            _run(store, "tmem", q, 36, budget)[1].ranked)
        for q in questions)


@pytest.mark.parametrize("top_k", [24, 36, 48])
def test_exp3_organises_exactly_bm25_expands_messages(
        locomo: tuple[IndexStore, list[Question]], top_k: int) -> None:
    store, questions = locomo
    env = MethodEnv(store.conversations, top_k, 8192, store)
    flat = build_method("bm25_expand", env)
    for q in questions:
        ids, ran, llm = _run(store, "tmem_bm25_expand_forest", q, top_k, 8192)
        expected = flat.retrieve(q).ids
        assert 0 < len(expected) <= top_k and set(ids) == set(expected)
        assert ran.ranked == tuple(expected)
        assert [b[0].stage for b in llm.batches] == ["tmem.structure"]  # no selection
        assert any(n.relation == "UPDATE" for n in ran.built.forest)
