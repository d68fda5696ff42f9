"""Exp-6's conditions withhold exactly their fields from exactly their module: asserted on
the prompts T-MEM sends (real MiniLM + BM25 indexes on the synthetic set) and on
structuring's code-level checks."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_tmem_fakes import ScriptedLLM, asked_ids, by_stage, label_all, link_all, message

from tests.hashed_embedder import HashEmbedder
from tmem_core.benchmarks import LoadRequest, build
from tmem_core.llm import ChatRequest, count_tokens
from tmem_core.methods import MethodEnv
from tmem_core.methods._context import Context
from tmem_core.methods._registry import build_method
from tmem_core.methods.tmem import Built, TMem
from tmem_core.methods.tmem._discovery import Discovery
from tmem_core.retrieval import Conversation, IndexStore, MiniLMEmbedder
from tmem_core.retrieval import conversations_from_table as conversations
from tmem_core.schema import Question, questions_from_table

COUNT = functools.partial(count_tokens, "smollm2")
MARKS = {"topic": ("(topic: ", "topic: "), "phase": ("phase: ",)}
WITHHELD = {  # variant -> (fields withheld from discovery, from structuring)
    "tmem": ((), ()),
    "tmem_wo_topic_in_discovery": (("topic",), ()),
    "tmem_wo_meta_in_structuring": ((), ("topic", "phase")),
    "tmem_wo_meta_in_both": (("topic", "phase"), ("topic", "phase")),
}


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[IndexStore, list[Question]]:
    prepared = build("synthetic", LoadRequest(size=400, seed=3))
    store = IndexStore(conversations(prepared.messages), MiniLMEmbedder(),
                       tmp_path_factory.mktemp("exp6"))
    questions = [q for q in questions_from_table(prepared.questions)
                 if q.category in ("knowledge_update", "multi_hop")][:2]
    return store, questions


def _shown(requests: Sequence[ChatRequest]) -> str:
    return "\n".join(r.messages[-1].content for r in requests)


def _fields_in(text: str) -> set[str]:
    return {name for name, marks in MARKS.items() if any(m in text for m in marks)}


def _run(method: TMem, question: Question) -> tuple[Context, ScriptedLLM]:
    llm = ScriptedLLM(by_stage(select=label_all("KEY"), structure=link_all("m1", "UPDATE")))
    return method.construct(question, method.retrieve(question), llm, COUNT), llm


@pytest.mark.parametrize("variant", sorted(WITHHELD))
def test_each_condition_withholds_its_fields_from_its_module_only(
        synthetic: tuple[IndexStore, list[Question]], variant: str) -> None:
    store, questions = synthetic
    from_discovery, from_structuring = WITHHELD[variant]
    method = build_method(variant, MethodEnv(store.conversations, 12, 4000, store))
    assert isinstance(method, TMem)
    for question in questions:
        context, llm = _run(method, question)
        select = [r for r in llm.requests if r.stage == "tmem.select"]
        structure = [r for r in llm.requests if r.stage == "tmem.structure"]
        assert select and structure
        assert _fields_in(_shown(select)) == {"topic", "phase"} - set(from_discovery)
        assert _fields_in(_shown(structure)) == {"topic", "phase"} - set(from_structuring)
        assert _fields_in(context.text) == {"topic", "phase"}  # the answer context keeps both
        found = method.retrieve(question).detail
        assert isinstance(found, Discovery) and isinstance(context.record, Built)
        assert all(g.startswith("topic:") != ("topic" in from_discovery) for g in found.groups)
        problems = {r.problem for r in context.record.repairs}
        # every proposal names the earliest candidate (m1) as parent: across topics, the
        # same-topic check repairs it unless structuring withholds the topic
        assert ("parent is in another topic" in problems) == ("topic" not in from_structuring)
        assert method.config.discovery_withheld == from_discovery


def _previous(request: ChatRequest) -> dict[str, object]:
    """Each message's proposed parent: the message just before it (an UPDATE)."""
    ids = asked_ids(request)
    return {"links": {i: {"parent": f"m{int(i[1:]) - 1}" if i != "m1" else "none",
                          "relation": "UPDATE" if i != "m1" else "ROOT"} for i in ids}}


def test_withholding_the_phase_lifts_the_phase_order_check(tmp_path: Path) -> None:
    """One topic at launch, back in design, then at launch again: the UPDATE from design to
    launch goes backwards in the topic's phase order (launch first), and the check repairs it
    unless structuring withholds the phase."""
    texts = ["Checkout retry limit: 3 attempts.", "Checkout retry limit back to design: 5.",
             "Checkout retry limit is 5 attempts at launch."]
    msgs = [message(k, text, topic="Atlas checkout retry limit", phase=phase)
            for k, (text, phase) in enumerate(zip(texts, ("launch", "design", "launch"),
                                                  strict=True))]
    store = IndexStore({"c": Conversation("c", tuple(msgs))}, HashEmbedder(), tmp_path)
    question = Question("c", "q", "What is the checkout retry limit?", "knowledge_update")
    env = MethodEnv(store.conversations, 3, 4000, store)
    for variant, problems in (("tmem", ["phase order goes backwards"]),
                              ("tmem_wo_meta_in_structuring", [])):
        method = build_method(variant, env)
        assert isinstance(method, TMem)
        llm = ScriptedLLM(by_stage(select=label_all("KEY"), structure=_previous))
        context = method.construct(question, method.retrieve(question), llm, COUNT)
        assert isinstance(context.record, Built)
        assert [r.problem for r in context.record.repairs] == problems
        assert _fields_in(_shown([r for r in llm.requests if r.stage == "tmem.structure"])
                          ) == ({"topic", "phase"} if problems else set())
