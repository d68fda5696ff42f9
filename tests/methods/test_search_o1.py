"""Search-o1 as its source runs it, with a scripted LLM on the hand-built chat (and LongMemEval
in its real naming), and against a scripted HTTP server: the model writes every query, each
turn stops at the end of a query, the documents' "Final Information" is appended and the same
sequence continues, the prediction is the last `\\boxed{}`, and no gold reaches a prompt."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES
from tests.hashed_embedder import HashEmbedder
from tmem_core import ConfigError, from_json, to_json
from tmem_core.benchmarks import LoadRequest, build
from tmem_core.evaluation import gold_strings
from tmem_core.llm import (
    BackboneConfig,
    ChatRequest,
    ChatResponse,
    HttpConfig,
    OpenAICompatBackend,
    StaticEndpoint,
    Usage,
    get_backbone,
)
from tmem_core.methods import CHAIN, Context, MethodEnv, boxed_answer, get_method
from tmem_core.methods._registry import build_method
from tmem_core.methods.baselines._search_o1 import (
    BEGIN_RESULT,
    END_QUERY,
    END_RESULT,
    REPEATED,
    ChainRecord,
    ChainSteps,
    SearchO1,
    SearchO1Params,
    final_information,
    previous_reasoning,
)
from tmem_core.methods.t2mem._config import T2MemConfig
from tmem_core.retrieval import IndexStore, cl100k_tokens, conversations_from_table
from tmem_core.schema import Question, gold_from_table, messages_from_table, questions_from_table

QUESTION = Question("c", "q1", "What is the checkout retry limit?", "knowledge_update",
                    asking_user="User_1")
FAILED = "server: scripted failure"


def query(text: str, before: str = "I need more. ") -> str:
    """A turn as an engine returns it when the stop string ended it (without the string)."""
    return f"{before}<|begin_search_query|>{text}"


def info(text: str) -> str:
    return f"The pages say this.\n\n**Final Information**\n\n{text}"


class ScriptedLLM:
    """Reasoning turns and Reason-in-Documents replies (free text) from two scripts, in
    order; the last item repeats once a script runs out; FAILED fails the call."""

    def __init__(self, steps: Sequence[str] = (), reasons: Sequence[str] = ()) -> None:
        self.backbone: BackboneConfig = get_backbone("smollm2")
        self.scripts = {"step": list(steps) or ["So the answer is \\boxed{5}."],
                        "reason": list(reasons) or [info("noted")]}
        self.requests: list[ChatRequest] = []

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return [self._reply(r) for r in requests]

    def of(self, kind: str) -> list[ChatRequest]:
        return [r for r in self.requests if _kind(r) == kind]

    def _reply(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        assert request.stage == "construct" and request.schema is None
        kind = _kind(request)
        script = self.scripts[kind]
        item = script[min(len(self.of(kind)), len(script)) - 1]
        if item == FAILED:
            return ChatResponse(usage=Usage(50, 3), error=item, error_kind="server")
        return ChatResponse(item, None, Usage(200, 30), 0.25)


def _kind(request: ChatRequest) -> str:
    return "reason" if "**Searched Web Pages:**" in request.messages[0].content else "step"


def run(store: IndexStore, llm: Any, budget: int = 4096, question: Question = QUESTION,
        top_k: int = 5, **params: Any) -> Context:
    method = SearchO1(store, SearchO1Params(**params), top_k=top_k, budget=budget)
    return method.construct(question, method.retrieve(question), llm, cl100k_tokens)


def documents(request: ChatRequest) -> list[str]:
    """Message ids in the documents of a Reason-in-Documents prompt."""
    block = request.messages[0].content.split("**Searched Web Pages:**", 1)[1]
    return [line[1:].split("]", 1)[0] for line in block.splitlines() if line.startswith("[")]


def test_the_model_writes_every_query_and_the_same_sequence_continues(
        store: IndexStore) -> None:
    first = query("checkout retry limit", "I should look it up. ")
    second = query("retry attempts correction", "Three; was it changed? ")
    llm = ScriptedLLM([first, second, "It was changed to 5, so \\boxed{5 attempts}."],
                      [info("3 attempts proposed"), info("changed to 5")])
    context = run(store, llm, top_k=4, search_top_k=2)
    steps, reasons = llm.of("step"), llm.of("reason")
    assert len(steps) == 3 and len(reasons) == 2
    assert all(r.stop == (END_QUERY,) for r in steps) and all(not r.stop for r in reasons)
    prompt = steps[0].messages
    assert len(prompt) == 1 and prompt[0].role == "user"  # Search-o1's one user message
    assert "Question:\nWhat is the checkout retry limit?" in prompt[0].content
    assert "limited to 4" in prompt[0].content  # max_steps - 1 searches
    expected = (f"{first}{END_QUERY}\n\n{BEGIN_RESULT}3 attempts proposed{END_RESULT}\n\n"
                f"{second}{END_QUERY}\n\n{BEGIN_RESULT}changed to 5{END_RESULT}\n\n")
    assert steps[1].messages[:-1] == prompt and steps[2].messages[:-1] == prompt
    assert steps[2].messages[-1].role == "assistant" and steps[2].continues
    assert steps[2].messages[-1].content == expected  # the previous one, continued
    assert steps[2].messages[-1].content.startswith(steps[1].messages[-1].content)
    assert [len(documents(r)) for r in reasons] == [4, 2]  # the grid's top_k, then per step
    assert 'current search query "retry attempts correction"' in reasons[1].messages[0].content
    assert context.kind == CHAIN and boxed_answer(context.text) == "5 attempts"
    assert context.ids == tuple(dict.fromkeys([*documents(reasons[0]), *documents(reasons[1])]))
    record = chain_record(context)
    assert from_json(ChainRecord, to_json(record)) == record  # as the construct stage stores it
    assert record.stop == "answer" and record.final_answer == "5 attempts"
    assert record.queries == ("checkout retry limit", "retry attempts correction")
    assert record.step_record == ChainSteps(steps=3, max_steps=5, forced=False, tool_calls=2,
                                            searches=2, answered=True)
    assert record.degradation.counters() == {"malformed_calls": 0, "no_answer": 0,
                                             "calls_total": 5}


def test_against_a_scripted_server_the_request_stops_continues_and_the_box_answers(
        store: IndexStore, scripted_server: Any, step: Any) -> None:
    server = scripted_server([step(content=query("retry limit")),
                              step(content=info("The limit became 5.")),
                              step(content=" So the limit is \\boxed{5}.")])
    backend = OpenAICompatBackend(get_backbone("smollm2"), HttpConfig(max_attempts=1),
                                  StaticEndpoint(server.base_url), "EMPTY")
    context = run(store, backend)
    first, reason, second = server.bodies
    assert first["stop"] == second["stop"] == [END_QUERY] and "stop" not in reason
    assert second["messages"][0] == first["messages"][0]
    continued = second["messages"][-1]
    assert continued["role"] == "assistant" and second["continue_final_message"] is True
    assert continued["content"].startswith(query("retry limit") + END_QUERY)
    assert f"{BEGIN_RESULT}The limit became 5.{END_RESULT}" in continued["content"]
    assert boxed_answer(context.text) == "5" and context.kind == CHAIN


def test_budgets_equal_t2mems_by_default(store: IndexStore) -> None:
    params, t2mem = SearchO1Params(), T2MemConfig()
    assert (params.max_steps, params.step_max_tokens) == (t2mem.max_steps,
                                                          t2mem.step_max_tokens) == (5, 1024)
    found = SearchO1(store).retrieve(QUESTION)
    assert found.ids == ()  # nothing is searched before the model's first query


def test_a_query_at_the_last_turn_is_not_run_and_the_chain_has_no_answer(
        store: IndexStore) -> None:
    llm = ScriptedLLM([query("retry limit"), query("lunch"), query("coffee")])
    context = run(store, llm, max_steps=3, ranking="dense")
    record = chain_record(context)
    assert record.stop == "max_steps" and record.queries == ("retry limit", "lunch")
    assert len(llm.of("step")) == 3 and len(llm.of("reason")) == 2
    assert record.step_record is not None
    assert record.step_record.forced and not record.step_record.answered
    assert boxed_answer(context.text) == "" and record.degradation.no_answer == 1
    answered = ScriptedLLM([query("retry limit"), query("more"), "\\boxed{3}"])
    context = run(store, answered, max_steps=3, search_top_k=1)  # two searches, three turns
    record = chain_record(context)
    assert len(answered.of("reason")) == 2 and record.stop == "answer"
    assert record.step_record is not None and record.step_record.forced  # at its last turn


def test_a_repeated_query_gets_search_o1s_reminder_not_a_search(store: IndexStore) -> None:
    llm = ScriptedLLM([query("retry limit"), query("retry limit", "Again. "), "\\boxed{3}"])
    context = run(store, llm)
    assert len(llm.of("reason")) == 1
    assert f"{BEGIN_RESULT}\n{REPEATED}\n{END_RESULT}" in llm.of("step")[2].messages[-1].content
    assert chain_record(context).final_answer == "3"


@pytest.mark.parametrize(("reply", "information"), [
    ("Reading.\n**Final Information**\n\nThe limit\nis 5.\n```", "The limitis 5."),
    ("Nothing here.", "No helpful information found."),
    ("x\n**Modified Reasoning Steps**\nStep 1: y", "Step 1: y"),
])
def test_final_information_is_read_as_search_o1_reads_it(reply: str, information: str) -> None:
    assert final_information(reply) == information


@pytest.mark.parametrize(("text", "answer"), [
    ("a \\boxed{3} then \\boxed{5 attempts}.", "5 attempts"),
    ("\\boxed{\\text{(five)}}", "five"),
    ("no box", ""),
    ("\\boxed{x} then \\boxed{unclosed", "x"),
])
def test_the_prediction_is_the_last_box(text: str, answer: str) -> None:
    assert boxed_answer(text) == answer


def test_the_reasoning_so_far_is_shortened_as_search_o1_shortens_it() -> None:
    output = "\n".join(f"line {i}" for i in range(10)) + "\n<|begin_search_query|>q"
    shortened = previous_reasoning(output)
    assert shortened.startswith("Step 1: line 0\n\n...")
    assert "Step 11: <|begin_search_query|>q" in shortened and "line 3" not in shortened
    assert previous_reasoning("a\nb") == "Step 1: a\n\nStep 2: b"


def test_a_failed_call_ends_the_chain_visibly(store: IndexStore) -> None:
    context = run(store, ScriptedLLM([query("retry limit")], [FAILED]))
    assert chain_record(context).stop == f"malformed output: {FAILED}"
    assert chain_record(context).degradation.malformed_calls == 1
    shown = get_method("search_o1").show(SearchO1(store).retrieve(QUESTION), context, {})
    assert "stop: malformed output" in shown and "(none)" in shown


def test_documents_and_context_stay_within_their_budgets(store: IndexStore) -> None:
    llm = ScriptedLLM([query("retry " * 60), query("limit"), "Long. " * 80 + "\\boxed{5}"],
                      [info("retry limit detail " * 30)])
    context = run(store, llm, budget=60, doc_max_tokens=40)
    assert 0 < context.tokens <= 60 and context.tokens == cl100k_tokens(context.text)
    assert boxed_answer(context.text) == "5"  # the newest lines: the answer survives cuts
    for request, call in zip(llm.of("reason"),
                             [c for c in chain_record(context).calls if "ids" in c], strict=True):
        block = request.messages[0].content.split("**Searched Web Pages:**", 1)[1]
        pages = block.split("Now you should analyze")[0]
        assert cl100k_tokens(pages) <= 40 + 12 * len(call["ids"])
        assert documents(request) == call["ids"]


def test_the_registered_method_takes_the_grids_top_k_and_one_budget_name(
        store: IndexStore) -> None:
    env = MethodEnv(store.conversations, top_k=3, budget=1024, store=store)
    method = build_method("search_o1", env, {"max_steps": 2})
    llm = ScriptedLLM([query("retry limit"), "\\boxed{5}"])
    method.construct(QUESTION, method.retrieve(QUESTION), llm, cl100k_tokens)
    assert len(documents(llm.of("reason")[0])) == 3
    spec = get_method("search_o1")
    assert spec.version == 3 and spec.axes["reasoning_budget"] == "reasoning_budget"
    for old in ("k_initial", "k", "reasoning_tokens"):
        with pytest.raises(ConfigError, match=old):
            spec.parse({old: 2})
    with pytest.raises(ValueError, match="max_steps must be 1 or more"):
        spec.parse({"max_steps": 0})
    assert not hasattr(spec.parse({}), "budget")
    assert spec.parse({"reasoning_budget": 96}).step_tokens == 96 + 64
    prompted = get_method("search_o1_answer_prompt")
    assert prompted.addition and prompted.parse({}).prediction == "answer_prompt"


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
        context = run(store, llm, question=question, top_k=2)
        assert len(llm.requests) >= 3 and context.ids
        prompts = "\n".join(m.content for r in llm.requests for m in r.messages)
        assert [s for s in forbidden[question.conv_id] if s in prompts] == []


def chain_record(context: Context) -> ChainRecord:
    assert isinstance(context.record, ChainRecord)
    return context.record
