"""Search-o1 with a scripted LLM on the hand-built chat (and LongMemEval in its real naming):
queries written inside the reasoning are run and their condensed documents spliced back, the
final answer comes from the chain, the budgets equal T2Mem's, stops and degradation are
visible, and no gold reaches a prompt."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES
from tests.hashed_embedder import HashEmbedder
from tmem_core import from_json, to_json
from tmem_core.benchmarks import LoadRequest, build
from tmem_core.evaluation import gold_strings
from tmem_core.llm import BackboneConfig, ChatRequest, ChatResponse, Usage, get_backbone
from tmem_core.methods import Context, MethodEnv, get_method, render_message
from tmem_core.methods._registry import build_method
from tmem_core.methods.baselines._search_o1 import (
    REPEATED,
    ChainRecord,
    ChainSteps,
    SearchO1,
    SearchO1Params,
    continuation,
)
from tmem_core.methods.t2mem._config import T2MemConfig
from tmem_core.retrieval import IndexStore, cl100k_tokens, conversations_from_table
from tmem_core.schema import Question, gold_from_table, messages_from_table, questions_from_table

QUESTION = Question("c", "q1", "What is the checkout retry limit?", "knowledge_update",
                    asking_user="User_1")
FAILED = "server: scripted failure"



def chain(context: Context) -> ChainRecord:
    """The context's Search-o1 record."""
    assert isinstance(context.record, ChainRecord)
    return context.record

def query(text: str, before: str = "I need more. ") -> str:
    return f"{before}<|begin_search_query|>{text}<|end_search_query|>"


class ScriptedLLM:
    """Reasoning continuations (free text) and Reason-in-Documents replies (JSON) from two
    scripts, in order; the last item repeats once a script runs out; FAILED fails the call."""

    def __init__(self, steps: Sequence[str] = (), reasons: Sequence[str] = ()) -> None:
        self.backbone: BackboneConfig = get_backbone("smollm2")
        self.scripts = {"step": list(steps) or ["So the answer is \\boxed{5}."],
                        "reason": list(reasons) or ["noted"]}
        self.requests: list[ChatRequest] = []

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return [self._reply(r) for r in requests]

    def of(self, kind: str) -> list[str]:
        """The user prompts of one kind of call: "step" (reasoning), "reason" (RiD)."""
        return [r.messages[-1].content for r in self.requests if _kind(r) == kind]

    def _reply(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        assert request.stage == "construct"
        kind = _kind(request)
        script = self.scripts[kind]
        item = script[min(len(self.of(kind)), len(script)) - 1]
        if item == FAILED:
            return ChatResponse(usage=Usage(50, 3), error=item, error_kind="server")
        if kind == "step":
            return ChatResponse(item, None, Usage(200, 30), 0.25)
        parsed = {"information": item}
        return ChatResponse(json.dumps(parsed), parsed, Usage(200, 30), 0.25)


def _kind(request: ChatRequest) -> str:
    return "reason" if request.schema is not None else "step"


def run(store: IndexStore, llm: ScriptedLLM, budget: int = 4096, question: Question = QUESTION,
        **params: Any) -> Context:
    method = SearchO1(store, SearchO1Params(**params), budget=budget)
    return method.construct(question, method.retrieve(question), llm, cl100k_tokens)


def documents(prompt: str) -> list[str]:
    """Message ids in the documents of a Reason-in-Documents prompt."""
    block = prompt.split("Messages found:\n", 1)[1]
    return [line[1:].split("]", 1)[0] for line in block.splitlines() if line.startswith("[")]


def test_a_query_in_the_reasoning_is_run_and_its_condensed_documents_spliced_back(
        store: IndexStore) -> None:
    llm = ScriptedLLM([query("retry attempts correction", "Three were proposed; was it "
                             "changed? ") + "<|begin_search_result|>made up<|end_search_result|>",
                       "It was changed to 5, so the answer is \\boxed{5 attempts}."],
                      ["3 attempts proposed", "changed to 5"])
    context = run(store, llm, k=3)
    initial, second = llm.of("reason")
    assert "Search query: User_1: What is the checkout retry limit?" in initial
    assert "Search query: retry attempts correction" in second
    first_step, second_step = llm.of("step")
    assert "<|begin_search_query|>User_1: What is the checkout retry limit?" \
           "<|end_search_query|>\n<|begin_search_result|>3 attempts proposed" \
           "<|end_search_result|>" in first_step  # the initial search, in Search-o1's form
    assert "<|begin_search_result|>changed to 5<|end_search_result|>" in second_step
    assert "made up" not in second_step  # what the model wrote past its query is cut
    assert "Three were proposed; was it changed?" in second_step
    shown = [documents(p) for p in (initial, second)]
    assert len(shown[0]) == 5 and len(shown[1]) == 3  # k_initial, then k per search
    messages = {m.msg_id: m for m in store.conversations["c"].messages}
    assert all(render_message(messages[i]) in p for p, ids in zip((initial, second), shown,
                                                                  strict=True) for i in ids)
    assert context.ids == tuple(dict.fromkeys([*shown[0], *shown[1]]))
    trace = chain(context)
    assert from_json(ChainRecord, to_json(trace)) == trace  # as the construct stage stores it
    assert trace.stop == "answer" and trace.final_answer == "5 attempts"
    assert context.text.splitlines()[0] == "Final answer of the reasoning: 5 attempts"
    assert "Search: retry attempts correction" in context.text and "<|" not in context.text
    assert [c["call"] for c in trace.calls] == [
        "reason_in_documents", "reason_step", "reason_in_documents", "reason_step"]
    assert trace.step_record == ChainSteps(steps=2, max_steps=5, forced=False, tool_calls=1,
                                           searches=1, answered=True)
    assert trace.degradation.counters() == {"malformed_calls": 0, "repaired_queries": 0,
                                            "fallback_context": 0, "calls_total": 4}


def test_budgets_equal_t2mems_by_default(store: IndexStore) -> None:
    params, t2mem = SearchO1Params(), T2MemConfig()
    assert (params.k_initial, params.max_steps) == (t2mem.k_initial, t2mem.max_steps)
    found = SearchO1(store).retrieve(QUESTION)
    assert len(found.ids) == t2mem.k_initial


def test_a_model_that_never_stops_searching_answers_at_the_last_step(store: IndexStore
                                                                      ) -> None:
    llm = ScriptedLLM([query("retry limit"), query("lunch"), query("coffee")])
    context = run(store, llm, max_steps=3, k=2, ranking="dense")
    trace = chain(context)
    assert trace.stop == "max_steps" and trace.queries[1:] == ("retry limit", "lunch")
    assert len(llm.of("step")) == 3 and len(llm.of("reason")) == 3  # initial + 2 searches
    assert "Searches left: 2." in llm.of("step")[0]
    assert "No searches are left" in llm.of("step")[-1]
    assert "You may search at most 2 times" in llm.requests[1].messages[0].content
    assert trace.calls[-1]["repair"] == "a query after the last search: not run"
    assert trace.step_record is not None and trace.step_record.forced
    assert trace.step_record.searches == 2 and not trace.step_record.answered


def test_a_repeated_query_gets_search_o1s_reminder_not_a_search(store: IndexStore) -> None:
    llm = ScriptedLLM([query("retry limit"), query("retry limit", "Again. "), "\\boxed{3}"])
    context = run(store, llm)
    assert len(llm.of("reason")) == 2  # the initial search and the first one only
    assert f"<|begin_search_result|>{REPEATED}<|end_search_result|>" in llm.of("step")[2]
    assert chain(context).final_answer == "3"


@pytest.mark.parametrize(("text", "segment", "asked"), [
    ("Hmm. <|begin_search_query|> retry <|end_search_query|> <|begin_search_result|>x",
     "Hmm. <|begin_search_query|> retry <|end_search_query|>", "retry"),
    ("Done: \\boxed{5}", "Done: \\boxed{5}", None),
    ("<|begin_search_query|>unfinished", "<|begin_search_query|>unfinished", None),
    ("<|begin_search_query|> <|end_search_query|>", "<|begin_search_query|> <|end_search_query|>",
     None),
])
def test_a_continuation_ends_at_its_first_complete_query(text: str, segment: str,
                                                         asked: str | None) -> None:
    assert continuation(text) == (segment, asked)


def test_a_failed_continuation_ends_the_chain_visibly(store: IndexStore) -> None:
    context = run(store, ScriptedLLM([FAILED], ["3 attempts proposed"]))
    assert chain(context).stop == f"malformed output: {FAILED}"
    assert chain(context).degradation.malformed_calls == 1
    assert "Found: 3 attempts proposed" in context.text  # what was condensed still counts
    shown = get_method("search_o1").show(SearchO1(store).retrieve(QUESTION), context, {})
    assert "stop: malformed output" in shown and "final answer: (none)" in shown


def test_a_failed_reason_in_documents_falls_back_to_the_documents(store: IndexStore) -> None:
    llm = ScriptedLLM(reasons=[FAILED])
    context = run(store, llm, k_initial=3)
    trace = chain(context)
    assert trace.stop == f"malformed output: {FAILED}"
    assert trace.fallback and trace.degradation.fallback_context == 1
    assert llm.of("step") == []  # no reasoning step after the failed condensing
    messages = {m.msg_id: m for m in store.conversations["c"].messages}
    assert context.text == "\n".join(render_message(messages[i]) for i in context.ids)


def test_documents_chain_and_context_stay_within_their_budgets(store: IndexStore) -> None:
    long = "retry limit detail " * 30
    llm = ScriptedLLM([query("retry " * 60), query("limit"), "\\boxed{5}"], [long])
    context = run(store, llm, budget=60, k=5, doc_max_tokens=40)
    assert 0 < context.tokens <= 60 and context.tokens == cl100k_tokens(context.text)
    assert context.text.startswith("Final answer of the reasoning: 5")  # first: survives cuts
    for prompt, call in zip(llm.of("reason"), [c for c in chain(context).calls if "ids" in c],
                            strict=True):
        block = prompt.split("Messages found:\n", 1)[1]
        assert cl100k_tokens(block) <= 40 + len(call["ids"])
        assert documents(prompt) == call["ids"]


def test_the_registered_method_takes_its_own_ks_not_the_grids(store: IndexStore) -> None:
    env = MethodEnv(store.conversations, top_k=12, budget=1024, store=store)
    method = build_method("search_o1", env, {"k_initial": 2, "max_steps": 1})
    assert len(method.retrieve(QUESTION).ids) == 2
    with pytest.raises(ValueError, match="max_steps must be positive"):
        get_method("search_o1").parse({"max_steps": 0})
    assert get_method("search_o1").version == 2  # queries inside the reasoning


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
        llm = ScriptedLLM([query(question.question.split()[-1]), query("when"), "\\boxed{x}"])
        context = run(store, llm, question=question, k=2)
        assert len(llm.requests) >= 3 and context.ids
        prompts = "\n".join(m.content for r in llm.requests for m in r.messages)
        assert [s for s in forbidden[question.conv_id] if s in prompts] == []
