"""The whole T-MEM chain on the hand-built group chat, with scripted LLM outputs."""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

import pytest
from test_tmem_fakes import ScriptedLLM, by_stage, label_all, link_all, message

from tests.hashed_embedder import HashEmbedder
from tmem_core import ConfigError, from_json, to_json
from tmem_core.llm import count_tokens
from tmem_core.methods import Evidence, MethodEnv, get_method, method_names
from tmem_core.methods._context import Context
from tmem_core.methods._registry import build_method
from tmem_core.methods.tmem import Built, DiscoveryConfig, TMem, TMemConfig
from tmem_core.methods.tmem._payload import Found
from tmem_core.methods.tmem._validate import context_problems, forest_structure
from tmem_core.retrieval import Conversation, IndexStore
from tmem_core.schema import Question

COUNT = functools.partial(count_tokens, "smollm2")
QUESTION = Question("c", "q1", "What is the current retry limit for Atlas checkout?", "ku")
CONFIG = TMemConfig(DiscoveryConfig(max_candidates=12))
TOP_K = 8
KEEP_AND_CHAIN = by_stage(select=label_all("KEY"), structure=link_all("none", "ROOT"))


def _run(store: IndexStore, config: TMemConfig = CONFIG, budget: int = 2000,
         llm: ScriptedLLM | None = None) -> tuple[Evidence, Context, ScriptedLLM]:
    llm = llm or ScriptedLLM(KEEP_AND_CHAIN)
    method = TMem(store, config, top_k=TOP_K, budget=budget)
    found = method.retrieve(QUESTION)
    return found, method.construct(QUESTION, found, llm, COUNT), llm


def test_full_chain_builds_a_valid_forest_with_a_typed_record(store: IndexStore) -> None:
    found, context, llm = _run(store)
    assert isinstance(found.payload, Found) and found.payload.candidates
    assert from_json(Found, to_json(found.payload)) == found.payload  # as retrieval passes it
    assert context.kind == "forest" and context.method == "tmem"
    assert context_problems(context, 2000, COUNT) == []
    assert set(context.ids) == set(found.ids)  # everything labelled KEY fits
    assert [b[0].stage for b in llm.batches] == ["tmem.select", "tmem.structure"]
    record = context.record
    assert isinstance(record, Built) and record.selection == "llm"
    assert record.llm["select"].calls == 1 and record.compression is not None
    assert record.compression.dropped == 0
    assert record.degradation.admitted_total == len(context.ids)
    assert record.degradation.selection_fallback_batches == 0
    assert "c:12" in context.text and "UPDATE" not in context.text
    stored = from_json(Built, to_json(record))  # as a pipeline record holds it
    assert stored == record and forest_structure(stored, list(context.ids)) == []


def _built(context: Context) -> Built:
    assert isinstance(context.record, Built)
    return context.record


def test_no_real_message_id_reaches_a_prompt(store: IndexStore) -> None:
    _, context, llm = _run(store)
    for request in llm.requests:
        prompt = " ".join(m.content for m in request.messages)
        assert not any(f"[{i}]" in prompt for i in context.ids)


def test_short_budget_compresses_then_trims_and_stays_valid(store: IndexStore) -> None:
    for budget in (400, 150, 60, 0):
        _, context, _ = _run(store, budget=budget)
        assert context.tokens <= budget
        assert context_problems(context, budget, COUNT) == []


def test_failed_structuring_is_repaired_into_a_chain_of_the_topic(store: IndexStore) -> None:
    llm = ScriptedLLM(by_stage(select=label_all("KEY"), structure=lambda r: "junk"))
    _, context, _ = _run(store, llm=llm)
    record = _built(context)
    assert record.failures and context_problems(context, 2000, COUNT) == []
    assert record.degradation.structure_failed_batches == record.llm["structure"].calls
    assert record.degradation.edges_repaired + record.degradation.edges_dropped == len(
        record.forest)
    relations = {n.relation for n in record.forest}
    assert relations <= {"ROOT", "EXPAND"}


def test_ablation_switches(store: IndexStore) -> None:
    _, flat, llm = _run(store, replace(CONFIG, structuring=False))
    assert flat.kind == "flat" and not flat.text.startswith("- ")
    assert [b[0].stage for b in llm.batches] == ["tmem.select"]
    assert context_problems(flat, 2000, COUNT) == []

    typed_llm = ScriptedLLM(by_stage(select=label_all("KEY"),
                                     structure=link_all("m1", "UPDATE")))
    _, untyped, _ = _run(store, replace(CONFIG, typed_relations=False), llm=typed_llm)
    assert "RELATED" in untyped.text and "UPDATE" not in untyped.text

    _, whole, _ = _run(store, replace(CONFIG, compression=False), budget=150)
    assert _built(whole).compression is None and whole.tokens <= 150
    assert context_problems(whole, 150, COUNT) == []

    _, heuristic, llm = _run(store, replace(CONFIG, selection="heuristic"))
    assert [b[0].stage for b in llm.batches] == ["tmem.structure"]
    assert _built(heuristic).labels == {} and _built(heuristic).selection == "heuristic"
    no_llm = TMem(store, replace(CONFIG, selection="heuristic", structuring=False),
                  top_k=TOP_K, budget=500)
    assert no_llm.construct(QUESTION, no_llm.retrieve(QUESTION), None, COUNT).ids


def test_without_discovery_the_anchors_go_straight_to_structuring(store: IndexStore) -> None:
    """No interval is kept, nothing is filtered or labelled: the Top-k anchors, in seed rank,
    are what structuring gets; the contract's `removed` says so."""
    config = replace(CONFIG, discovery=False)
    seeds, context, llm = _run(store, config)
    found = seeds.payload
    assert isinstance(found, Found) and not any(iv.kept for iv in found.intervals)
    assert [b[0].stage for b in llm.batches] == ["tmem.structure"]
    assert context.selected == found.anchors
    assert set(context.ids) == set(found.anchors)
    assert _built(context).selection == "none: the anchors"
    assert config.removed() == [
        "temporal evidence discovery (interval search, similarity filter, LLM selection): "
        "the Top-k anchors go to structuring"]


def test_variants_registry_and_missing_llm(store: IndexStore) -> None:
    env = MethodEnv(store.conversations, 8, 500, store)
    untyped = build_method("tmem_untyped", env)
    assert isinstance(untyped, TMem) and untyped.config.typed_relations is False
    forest = build_method("tmem_global_forest", env, {"discovery_config": {"padding": 1}})
    assert isinstance(forest, TMem) and forest.name == "tmem_global_forest"
    assert forest.config.discovery_config.scope == "global"  # the variant's change ...
    assert forest.config.discovery_config.padding == 1  # ... on top of the config's
    assert (forest.top_k, forest.budget) == (8, 500)  # the grid's, reaching the method once
    variants = [n for n in method_names() if get_method(n).variant_of == "tmem"]
    assert len(variants) == 13
    reranked = build_method("tmem_reranked", env)
    assert isinstance(reranked, TMem) and reranked.config.cut
    with pytest.raises(ConfigError, match="replaces discovery"):
        build_method("tmem", env, {"retrieval": "bm25_expand"})
    with pytest.raises(ConfigError, match="unknown method 'tmem_nope'"):
        build_method("tmem_nope", env)
    method = TMem(store, CONFIG, top_k=TOP_K, budget=500)
    with pytest.raises(ValueError, match="needs an LLM"):
        method.construct(QUESTION, method.retrieve(QUESTION), None, COUNT)
    with pytest.raises(ValueError, match="no T-MEM discovery"):
        method.construct(QUESTION, Evidence("q1", "tmem", ()), None, COUNT)


def _long_store(tmp_path: Path) -> IndexStore:
    filler = "Lunch is at noon near the office. Bring the slides for the offsite."
    msgs = [message(k, f"Checkout retry limit note {k} is {k} attempts. {filler}",
                    topic="Atlas checkout retry limit") for k in range(12)]
    return IndexStore({"c": Conversation("c", tuple(msgs))}, HashEmbedder(), tmp_path)


def test_spans_are_dropped_before_any_node(tmp_path: Path) -> None:
    store = _long_store(tmp_path)
    _, full, _ = _run(store, budget=5000)
    _, context, _ = _run(store, budget=full.tokens - 40)
    figures = _built(context).compression
    assert figures is not None and figures.dropped > 0 and not _built(context).trimmed
    assert set(context.ids) == set(full.ids) and "attempts" in context.text
    assert context_problems(context, full.tokens - 40, COUNT) == []


def test_a_counter_that_is_not_additive_ends_in_trimmed_leaves(tmp_path: Path) -> None:
    def lumpy(text: str) -> int:  # line breaks are dear: per-line estimates fall short
        return len(text.split()) + 8 * text.count("\n")

    method = TMem(_long_store(tmp_path), CONFIG, top_k=TOP_K, budget=200)
    found = method.retrieve(QUESTION)
    context = method.construct(QUESTION, found, ScriptedLLM(KEEP_AND_CHAIN), lumpy)
    assert _built(context).trimmed and context.tokens <= 200
    assert _built(context).degradation.nodes_trimmed == len(_built(context).trimmed)
    assert context_problems(context, 200, lumpy) == []
