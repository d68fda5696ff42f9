"""Search-o1 with a scripted LLM on the hand-built chat (and LongMemEval in its real naming):
searches feed Reason-in-Documents, only new messages are shown, the loop's stops, visible
degradation, the budget, evidence ids and no gold in any prompt."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES
from tests.hashed_embedder import HashEmbedder
from tmem_core.benchmarks import LoadRequest, build
from tmem_core.evaluation import gold_strings
from tmem_core.llm import BackboneConfig, ChatRequest, ChatResponse, Usage, get_backbone
from tmem_core.methods import Context, MethodEnv, get_method, render_message
from tmem_core.methods._registry import build_method
from tmem_core.methods.baselines._search_o1 import SearchO1, SearchO1Params
from tmem_core.retrieval import IndexStore, cl100k_tokens, conversations_from_table
from tmem_core.schema import Question, gold_from_table, messages_from_table, questions_from_table

QUESTION = Question("c", "q1", "What is the checkout retry limit?", "knowledge_update")
Reply = dict[str, str] | str  # a string: a failed call with that error


class ScriptedLLM:
    """Reasoning steps and Reason-in-Documents replies from two scripts, in order (the last
    reply repeats once a script runs out)."""

    def __init__(self, steps: Sequence[Reply] = (), reasons: Sequence[Reply] = ()) -> None:
        self.backbone: BackboneConfig = get_backbone("smollm2")
        self.scripts = {"action": list(steps) or [step("answer")],
                        "information": list(reasons) or [{"information": "noted"}]}
        self.requests: list[ChatRequest] = []

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return [self._reply(r) for r in requests]

    def of(self, kind: str) -> list[str]:
        """The user prompts of the calls of one kind ("action": steps, "information": RiD)."""
        return [r.messages[-1].content for r in self.requests
                if r.schema is not None and kind in r.schema["properties"]]

    def _reply(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        assert request.schema is not None and request.stage == "construct"
        kind = next(k for k in self.scripts if k in request.schema["properties"])
        script = self.scripts[kind]
        item = script[min(len(self.of(kind)), len(script)) - 1]
        if isinstance(item, str):
            return ChatResponse(text="{oops", usage=Usage(50, 3), error=item,
                                error_kind="invalid_output")
        return ChatResponse(json.dumps(item), item, Usage(200, 30), 0.25)


def step(action: str, query: str = "", reasoning: str = "thinking") -> dict[str, str]:
    return {"reasoning": reasoning, "action": action, "query": query}


def run(store: IndexStore, llm: ScriptedLLM, budget: int = 4096, question: Question = QUESTION,
        **params: Any) -> Context:
    method = SearchO1(store, SearchO1Params(**params), budget=budget)
    return method.construct(question, method.retrieve(question), llm, cl100k_tokens)


def documents(prompt: str) -> list[str]:
    """Message ids in the documents of a Reason-in-Documents prompt."""
    block = prompt.split("Messages found:\n", 1)[1]
    return [line[1:].split("]", 1)[0] for line in block.splitlines() if line.startswith("[")]


def test_each_search_feeds_new_messages_to_reason_in_documents(store: IndexStore) -> None:
    llm = ScriptedLLM([step("search", "retry attempts correction"), step("answer")],
                      [{"information": "3 attempts proposed"}, {"information": "changed to 5"}])
    context = run(store, llm, k=3)
    initial, second = llm.of("information")
    assert "Search query: What is the checkout retry limit?" in initial
    assert "Search query: retry attempts correction" in second
    assert "Found: 3 attempts proposed" in second  # the chain so far reaches the next call
    assert "Found: 3 attempts proposed" in llm.of("action")[0]
    shown = [documents(p) for p in (initial, second)]
    assert all(len(ids) == 3 for ids in shown) and not set(shown[0]) & set(shown[1])
    messages = {m.msg_id: m for m in store.conversations["c"].messages}
    assert all(render_message(messages[i]) in p for p, ids in zip((initial, second), shown,
                                                                  strict=True) for i in ids)
    assert context.ids == (*shown[0], *shown[1])
    assert context.kind == "memory" and context.trace["stop"] == "answer"
    assert "3 attempts proposed" in context.text and "changed to 5" in context.text
    assert [c["call"] for c in context.trace["steps"]] == [
        "reason_in_documents", "reason_step", "reason_in_documents", "reason_step"]
    assert context.trace["degradation"] == {"malformed_calls": 0, "repaired_queries": 0,
                                            "fallback_context": 0, "calls_total": 4}
    assert context.trace["usage"] == {"calls": 4, "prompt_tokens": 800,
                                      "completion_tokens": 120, "latency_s": 1.0}


def test_the_initial_search_is_the_question_and_keeps_its_ids(store: IndexStore) -> None:
    method = SearchO1(store, SearchO1Params(k=2, ranking="bm25"))
    found = method.retrieve(QUESTION)
    ranked = store.index("c").ranking(QUESTION.question, "bm25", 2)
    assert found.ids == store.conversations["c"].ids(ranked) and len(found.ids) == 2
    assert found.trace == {"query": QUESTION.question, "ids": list(found.ids)}


def test_it_stops_at_steps_and_searches_each_round(store: IndexStore) -> None:
    llm = ScriptedLLM([step("search", "retry limit"), step("search", "lunch"),
                       step("search", "coffee")])
    context = run(store, llm, steps=3, k=2, ranking="dense")
    assert context.trace["stop"] == "max_steps"
    assert len(llm.of("action")) == 3 and len(llm.of("information")) == 4
    assert len(context.ids) == len(set(context.ids)) == 8
    assert "Searches left: 1." in llm.of("action")[-1]


def test_it_stops_when_a_search_finds_nothing_new(store: IndexStore) -> None:
    llm = ScriptedLLM([step("search", "zeppelin aquarium")])
    context = run(store, llm, ranking="bm25")
    assert context.trace["stop"] == "nothing new for 'zeppelin aquarium'"
    assert len(llm.of("information")) == 1 and not context.trace["degradation"]["malformed_calls"]


@pytest.mark.parametrize("steps", [["no json"], [{"action": "fly", "query": "", "reasoning": ""}]])
def test_junk_from_a_reasoning_step_ends_the_loop_visibly(store: IndexStore,
                                                          steps: list[Reply]) -> None:
    llm = ScriptedLLM(steps, [{"information": "3 attempts proposed"}])
    context = run(store, llm)
    assert context.trace["stop"].startswith("malformed output")
    assert context.trace["degradation"]["malformed_calls"] == 1
    assert "3 attempts proposed" in context.text  # what was condensed before still counts
    shown = get_method("search_o1").show(SearchO1(store).retrieve(QUESTION), context, {})
    assert "stop: malformed output" in shown


def test_junk_from_reason_in_documents_falls_back_to_the_documents(store: IndexStore) -> None:
    llm = ScriptedLLM(reasons=["invalid_output: not JSON"])
    context = run(store, llm, k=3)
    trace = context.trace
    assert trace["stop"] == "malformed output: invalid_output: not JSON"
    assert trace["fallback"] and trace["degradation"]["fallback_context"] == 1
    assert llm.of("action") == []  # no reasoning step after the failed condensing
    messages = {m.msg_id: m for m in store.conversations["c"].messages}
    assert context.text == "\n".join(render_message(messages[i]) for i in context.ids)


def test_an_empty_query_searches_the_question_and_says_so(store: IndexStore) -> None:
    llm = ScriptedLLM([step("search", ""), step("answer")])
    context = run(store, llm)
    assert "Search query: What is the checkout retry limit?" in llm.of("information")[1]
    assert context.trace["degradation"]["repaired_queries"] == 1


def test_documents_and_context_stay_within_their_budgets(store: IndexStore) -> None:
    long = {"information": "retry limit detail " * 30}
    llm = ScriptedLLM([step("search", "retry"), step("search", "limit"), step("answer")],
                      [long])
    context = run(store, llm, budget=60, k=5, doc_max_tokens=40)
    assert 0 < context.tokens <= 60 and context.tokens == cl100k_tokens(context.text)
    for prompt, call in zip(llm.of("information"),
                            [c for c in context.trace["steps"] if "ids" in c], strict=True):
        block = prompt.split("Messages found:\n", 1)[1]
        assert cl100k_tokens(block) <= 40 + len(call["ids"])
        assert documents(prompt) == call["ids"]
    assert len(context.ids) < 15  # fewer than 3 searches of 5: the documents were cut


def test_the_registered_method_takes_its_own_k_not_the_grids(store: IndexStore) -> None:
    env = MethodEnv(store.conversations, top_k=12, budget=1024, store=store)
    method = build_method("search_o1", env, {"k": 2, "steps": 1})
    assert len(method.retrieve(QUESTION).ids) == 2
    with pytest.raises(ValueError, match="steps must be positive"):
        get_method("search_o1").parse({"steps": 0})


def test_no_prompt_holds_a_gold_derived_string(tmp_path: Path) -> None:
    """LongMemEval in its real naming (evidence sessions `answer_<hash>`, `<id>_abs`)."""
    prepared = build("longmemeval", LoadRequest(
        source=FIXTURES / "longmemeval" / "longmemeval_s_real_naming.json"))
    messages = messages_from_table(prepared.messages)
    questions = questions_from_table(prepared.questions)
    forbidden = gold_strings({m.msg_id: m for m in messages}, questions,
                             gold_from_table(prepared.questions))
    store = IndexStore(conversations_from_table(prepared.messages), HashEmbedder(), tmp_path)
    for question in questions:
        llm = ScriptedLLM([step("search", question.question.split()[-1]),
                           step("search", "when"), step("answer")])
        context = run(store, llm, question=question, k=2)
        assert len(llm.requests) >= 3 and context.ids
        prompts = "\n".join(m.content for r in llm.requests for m in r.messages)
        assert [s for s in forbidden[question.conv_id] if s in prompts] == []
