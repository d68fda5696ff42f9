"""Search-o1, the agentic-search baseline of T2Mem (paper §4, §5.3, §A.5), as its source runs
it (github.com/sunnynexus/Search-o1, `scripts/run_search_o1.py`, `evaluate.py`).

One reasoning chain per question. The model reads Search-o1's instruction and the question
(`search_o1/step`, its prompts verbatim) and writes; generation stops at
`<|end_search_query|>` (a stop string every backend receives). A query the model wrote is run
over the raw messages; Reason-in-Documents (`search_o1/reason`) reads the documents, the
query and the reasoning so far and writes free text whose "Final Information" is appended to
the chain between `<|begin_search_result|>` and `<|end_search_result|>`; the same chain
then continues (the next request is the previous prompt, the text generated and the result:
a continuation of the assistant's message, whose prefix the engine's cache holds). A
repeated query gets Search-o1's own notice instead; a query at the last turn is not run
(Search-o1's MAX_TURN; with one turn more than searches, its search-limit notice never
comes). The
prediction is the last `\\boxed{...}` of the chain (evaluate.py `extract_answer`).

Budgets equal T2Mem's (the paper compares them at equal steps, §A.5): at most `max_steps`
generation turns (T2Mem's Tmax; Search-o1's MAX_TURN) and `max_steps - 1` searches
(MAX_SEARCH_LIMIT). The first search takes the grid's `top_k` messages (every method's initial
retrieval depth, T2Mem's k for its first SearchMeta), later ones `search_top_k` (Search-o1's
QA setting: 10). Where the harness differs, it says so: the documents of one search are cut
to `doc_max_tokens` (the backbone's context), messages take the place of web pages, and the
variant `search_o1_answer_prompt` has the shared answer prompt read the chain instead of
taking its `\\boxed{}`.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tmem_core import check_range
from tmem_core.evaluation import question_block
from tmem_core.evaluation._basis import READ, Basis
from tmem_core.llm import BackboneConfig, ChatRequest, ChatResponse
from tmem_core.llm._tokens import TokenCounter, count_chat_tokens, counter_for
from tmem_core.llm._types import ChatMessage
from tmem_core.methods._base import Evidence, evidence
from tmem_core.methods._context import (
    LLM,
    Context,
    ContextKind,
    ContextMethod,
    render_message,
)
from tmem_core.methods._reasoning import CHAIN, ReasonedSteps, boxed_answer
from tmem_core.methods._record import Degradation, Record, Steps, Usage
from tmem_core.methods._registry import MethodEnv, method
from tmem_core.methods.t2mem import CONTEXT_MARGIN, fit_lines
from tmem_core.prompts import load_prompt
from tmem_core.retrieval import ConversationIndex, IndexStore, Kind
from tmem_core.schema import Message, Question

STAGE = "construct"
_WIDTH = 100
"""Stage of every Search-o1 call: reasoning and condensing happen per question."""

BEGIN_QUERY, END_QUERY = "<|begin_search_query|>", "<|end_search_query|>"
BEGIN_RESULT, END_RESULT = "<|begin_search_result|>", "<|end_search_result|>"
REPEATED = "You have searched this query. Please refer to previous results."
NO_INFORMATION = "No helpful information found."
MALFORMED = "malformed output"  # the stop reason of a call whose output is unusable
_FINAL, _MODIFIED = "\n**Final Information**", "\n**Modified Reasoning Steps**"
_QUERY = re.compile(re.escape(BEGIN_QUERY) + r"(.*?)" + re.escape(END_QUERY), re.S)

Prediction = Literal["boxed", "answer_prompt"]


@dataclass(frozen=True)
class SearchO1Params(ReasonedSteps):
    """At most `max_steps` generation turns and `max_steps - 1` searches; `search_top_k`
    messages per search after the first (the first takes the grid's `top_k`), ranked by
    `ranking`; `doc_max_tokens` caps the rendered documents of one search (less where the
    backbone's context is smaller); `step_max_tokens` (or the reasoning budget's N + 64)
    caps each call's output. `prediction`: "boxed" (the chain's last `\\boxed{}`, as
    Search-o1) or "answer_prompt" (the shared answer prompt reads the chain)."""

    max_steps: int = 5
    search_top_k: int = 10
    ranking: Kind = "hybrid"
    doc_max_tokens: int = 1536
    prediction: Prediction = "boxed"

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("max_steps", "search_top_k", "doc_max_tokens"):
            check_range(name, getattr(self, name))

    @property
    def searches(self) -> int:
        """Searches the model may run (Search-o1's MAX_SEARCH_LIMIT)."""
        return self.max_steps - 1


def final_information(reply: str) -> str:
    """Reason-in-Documents' condensed information (`extract_answer`, mode "infogen"; its
    `strip("```")` strips backticks, as `strip("`")` does)."""
    if _FINAL in reply:
        return reply.split(_FINAL)[-1].replace("\n", "").strip("`").strip()
    if _MODIFIED in reply:
        return reply.split(_MODIFIED)[-1].strip("`").strip()
    return NO_INFORMATION


def previous_reasoning(output: str) -> str:
    """The reasoning so far as Reason-in-Documents reads it: numbered lines, the first, the
    last four and those with a query or result kept, the others shown as "..."."""
    lines = output.replace("\n\n", "\n").split("\n")
    steps = "".join(f"Step {i + 1}: {line}\n\n" for i, line in enumerate(lines)).split("\n\n")
    if len(steps) <= 5:
        return "\n\n".join(steps).strip("\n")
    kept = ""
    for i, step in enumerate(steps):
        if i == 0 or i >= len(steps) - 4 or BEGIN_QUERY in step or BEGIN_RESULT in step:
            kept += step + "\n\n"
        elif not kept.endswith("\n\n...\n\n"):
            kept += "...\n\n"
    return kept.strip("\n")


def ranked(index: ConversationIndex, query: str, k: int, ranking: Kind) -> list[Message]:
    """The `k` best messages for `query`, as Search-o1's retriever returns them (seen or not)."""
    return [index.conversation.messages[p] for p in index.ranking(query, ranking, k)]


@dataclass(frozen=True)
class ChainDegradation(Degradation):  # see `Chain.degradation`
    malformed_calls: int = 0
    no_answer: int = 0
    calls_total: int = 0


@dataclass(frozen=True, kw_only=True)
class ChainSteps(Steps):
    answered: bool  # the chain holds a final answer


@dataclass(frozen=True, kw_only=True)
class ChainRecord(Record):
    """Search-o1's construct record: its calls, why the chain stopped, its queries, the
    information appended, the last `\\boxed{}` and the chain itself."""

    basis: Basis = READ
    degradation: ChainDegradation = field(default_factory=ChainDegradation)
    step_record: ChainSteps | None = None
    question: str
    config: SearchO1Params
    top_k: int
    calls: tuple[dict[str, Any], ...]
    stop: str
    queries: tuple[str, ...]
    information: tuple[str, ...]
    final_answer: str | None
    chain: str
    usage: Usage


@dataclass
class Chain:
    """One question's reasoning chain: the prompt, the text the model continues (its own
    output and the results appended), the messages Reason-in-Documents read, the calls."""

    question: Question
    index: ConversationIndex
    params: SearchO1Params
    top_k: int
    backbone: BackboneConfig
    count: TokenCounter
    output: str = ""
    shown: dict[str, Message] = field(default_factory=dict)
    queries: list[str] = field(default_factory=list)
    information: list[str] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    stop: str = ""

    @property
    def prompt(self) -> tuple[ChatMessage, ...]:
        """Search-o1's instruction and the question, with the reasoning budget's request."""
        question = question_block(self.question).removeprefix("Question: ")
        messages = load_prompt("search_o1/step").chat(max_searches=str(self.params.searches),
                                                      question=question)
        budget = self.params.reasoning
        return messages if budget is None else budget.ask(messages)

    def run(self, llm: LLM) -> None:
        for turn in range(1, self.params.max_steps + 1):
            self.steps = turn
            query = self._generate(llm)
            if query is None:
                return
            if turn == self.params.max_steps:
                self.stop = "max_steps"
                return
            if not self._respond(query, llm):
                return
        self.stop = "max_steps"

    @property
    def answer(self) -> str:
        return boxed_answer(self.output)

    @property
    def forced(self) -> bool:
        """The chain used its last turn (never with one turn)."""
        return (self.params.max_steps > 1 and self.steps == self.params.max_steps
                and not self.stop.startswith(MALFORMED))

    def step_record(self) -> ChainSteps:
        return ChainSteps(steps=self.steps, max_steps=self.params.max_steps,
                          forced=self.forced, tool_calls=len(self.queries),
                          searches=len(self.queries), answered=bool(self.answer))

    def degradation(self) -> ChainDegradation:
        """What failed (`calls_total`: the calls they are out of)."""
        return ChainDegradation(int(self.stop.startswith(MALFORMED)), int(not self.answer),
                                len(self.calls))

    def _generate(self, llm: LLM) -> str | None:
        """One turn: the chain continued up to a query (returned) or its end (None)."""
        messages = self.prompt + ((ChatMessage("assistant", self.output),) if self.output
                                  else ())
        response = self._call(llm, messages, "reason_step", self.params.step_tokens,
                              (END_QUERY,))
        if not response.ok:
            self.stop = f"{MALFORMED}: {response.error}"
            return None
        text = response.text
        if text.rfind(BEGIN_QUERY) > text.rfind(END_QUERY):
            text += END_QUERY  # the stop string ended it (engines return text before it)
        self.output += text
        self.calls[-1]["text"] = text
        queries = _QUERY.findall(text)
        if not queries or not queries[-1].strip() or not text.rstrip().endswith(END_QUERY):
            self.stop = "answer" if self.answer else "finished"
            return None
        return str(queries[-1]).strip()

    def _respond(self, query: str, llm: LLM) -> bool:
        """The query's result appended (its information, or Search-o1's notice); False when
        Reason-in-Documents failed (`stop`)."""
        if query in self.queries:
            self.output += f"\n{BEGIN_RESULT}\n{REPEATED}\n{END_RESULT}\n"
            return True
        depth = self.params.search_top_k if self.queries else self.top_k
        found = ranked(self.index, query, depth, self.params.ranking)
        lines = fit_lines([render_message(m) for m in found], self._doc_tokens(), self.count)
        docs = found[:len(lines)]
        self.shown.update((m.msg_id, m) for m in docs)
        self.queries.append(query)
        documents = "".join(f"**Web Page {i}:**\n{line}\n" for i, line in enumerate(lines, 1))
        messages = load_prompt("search_o1/reason").chat(
            prev_reasoning=previous_reasoning(self.output), search_query=query,
            document=documents)
        response = self._call(llm, messages, "reason_in_documents",
                              self.params.step_max_tokens, ())
        self.calls[-1].update(query=query, ids=[m.msg_id for m in docs])
        if not response.ok:
            self.stop = f"{MALFORMED}: {response.error}"
            return False
        info = final_information(response.text)
        self.calls[-1]["information"] = info
        self.information.append(f"[{query}] {info}")
        self.output += f"\n\n{BEGIN_RESULT}{info}{END_RESULT}\n\n"
        return True

    def _doc_tokens(self) -> int:
        """Tokens of one search's documents: at most `doc_max_tokens`, and at most a third of
        what the Reason-in-Documents prompt leaves of the backbone's context."""
        prompt = load_prompt("search_o1/reason")
        empty = prompt.chat(**dict.fromkeys(prompt.placeholders, ""))
        room = int((self.backbone.request_context - self.params.step_max_tokens)
                   * CONTEXT_MARGIN) - count_chat_tokens(self.backbone, empty)
        if room < 192:
            raise ValueError(f"backbone {self.backbone.name}: a context of "
                             f"{self.backbone.request_context} tokens leaves no room for "
                             f"Search-o1's documents")
        return min(self.params.doc_max_tokens, room // 3)

    def _call(self, llm: LLM, messages: tuple[ChatMessage, ...], kind: str, max_tokens: int,
              stop: tuple[str, ...]) -> ChatResponse:
        sampling = dataclasses.replace(llm.backbone.sampling, max_tokens=max_tokens)
        request = ChatRequest(messages, sampling, stage=STAGE, qid=self.question.qid,
                              stop=stop)
        (response,) = llm.generate([request])
        self.calls.append(_call_record(self.steps, kind, response))
        return response


@dataclass
class SearchO1:
    """Search-o1 as a context method. `Context.ids` are the messages Reason-in-Documents read
    (as cut to the documents' budget); `Context.text` is its final answer's box (when it
    has one: a cut never loses it), then the chain's newest lines (the model's output and
    the results) within the budget; the context's kind is `CHAIN` (the
    answer stage takes its last `\\boxed{}`), or "memory" under `prediction="answer_prompt"`.

    Version 3: Search-o1's own prompts; the model writes every query; generation stops at the
    end of a query and the same chain continues; free-text "Final Information"; the
    prediction is the last `\\boxed{}` (version 2 searched the question first, asked a new
    prompt per step and a JSON condensation, and answered with the shared prompt)."""

    store: IndexStore
    params: SearchO1Params = field(default_factory=SearchO1Params)
    name: str = "search_o1"
    top_k: int = 10  # the first search's depth: the grid's Top-k
    budget: int = 8192

    def retrieve(self, question: Question) -> Evidence:
        """Nothing before the model's first query: Search-o1 searches inside its reasoning."""
        return evidence(self.name, question, [], {"query": None, "ids": []})

    def construct(self, question: Question, evidence: Evidence, llm: LLM | None,
                  count_tokens: TokenCounter) -> Context:
        """The reasoning chain, then its newest lines within the token budget."""
        if llm is None:
            raise ValueError(f"{self.name} reasons with an LLM; none was given")
        chain = Chain(question, self.store.index(question.conv_id), self.params,
                             self.top_k, llm.backbone, counter_for(llm.backbone))
        chain.run(llm)
        head = [f"Final answer: \\boxed{{{chain.answer}}}"] if chain.answer else []
        room = self.budget - sum(count_tokens(line) + 1 for line in head)
        lines = [line for line in chain.output.splitlines() if line.strip()]
        text = "\n".join(head + fit_lines(lines[::-1], room, count_tokens)[::-1])
        kind: ContextKind = CHAIN if self.params.prediction == "boxed" else "memory"
        return Context(question.qid, self.name, kind, text, tuple(chain.shown),
                       count_tokens(text), self._record(question, chain))

    def _record(self, question: Question, chain: Chain) -> ChainRecord:
        return ChainRecord(
            degradation=chain.degradation(), step_record=chain.step_record(),
            question=question.question, config=self.params, top_k=self.top_k,
            calls=tuple(chain.calls), stop=chain.stop, queries=tuple(chain.queries),
            information=tuple(chain.information), final_answer=chain.answer or None,
            chain=chain.output, usage=Usage.of(chain.calls))


def show_chain(_evidence: Evidence, context: Context, _messages: Mapping[str, Message]) -> str:
    """Each call (its query, documents, continuation or information, tokens, latency), why
    the sequence stopped, the prediction and the context the answer stage receives."""
    record = context.record
    if not isinstance(record, ChainRecord) or record.step_record is None:
        raise TypeError(f"{context.qid}: not a Search-o1 record ({type(record).__name__})")
    config, steps, usage = record.config, record.step_record, record.usage
    lines = [f"{context.method} {context.qid}: {record.question}",
             f"  config: top_k={record.top_k} search_top_k={config.search_top_k} "
             f"max_steps={config.max_steps} ranking={config.ranking} "
             f"prediction={config.prediction}"]
    for call in record.calls:
        lines.append(f"step {call['step']} {call['call']}: {call['prompt_tokens']}+"
                     f"{call['completion_tokens']} tokens, {call['latency_s']:.1f} s"
                     f"{' (cached)' if call['cached'] else ''}")
        if "query" in call:
            lines.append(f"  query: {call['query']!r}")
        for key in ("error", "text", "information"):
            if call.get(key):
                lines += wrapped(f"  {key}: {call[key]}")
        if "ids" in call:
            lines.append(f"  documents: {' '.join(call['ids']) or '-'}")
    lines += [f"stop: {record.stop} after {steps.steps} of {steps.max_steps} steps, "
              f"{steps.searches} searches; {usage.prompt_tokens}+"
              f"{usage.completion_tokens} tokens, {usage.latency_s:.1f} s",
              f"final answer (last \\boxed{{}}): {record.final_answer or '(none)'}",
              f"context ({context.kind}, {context.tokens} tokens, {len(context.ids)} messages):",
              *wrapped(context.text or "(empty)", "  ")]
    return "\n".join(lines)


def wrapped(text: str, prefix: str = "") -> list[str]:
    return [line for part in text.splitlines() or [""]
            for line in textwrap.wrap(part, _WIDTH, initial_indent=prefix,
                                      subsequent_indent=prefix + "  ") or [prefix]]


@method("search_o1", config=SearchO1Params, show=show_chain, record=ChainRecord, version=3,
        axes={"reasoning_budget": "reasoning_budget", "steps": "max_steps"},
        prompts=("search_o1/step", "search_o1/reason"),
        variants={"search_o1_answer_prompt": {"prediction": "answer_prompt"}},
        additions=("search_o1_answer_prompt",),
        description="Search-o1: search queries inside one reasoning chain, each search's "
                    "documents condensed by Reason-in-Documents and appended; the last "
                    "\\boxed{} answers")
def _search_o1(env: MethodEnv, params: SearchO1Params, name: str) -> ContextMethod:
    return SearchO1(env.index_store, params, name=name, top_k=env.top_k, budget=env.budget)


def _call_record(step: int, kind: str, response: ChatResponse) -> dict[str, Any]:
    return {"step": step, "call": kind, "prompt_tokens": response.usage.prompt_tokens,
            "completion_tokens": response.usage.completion_tokens,
            "latency_s": round(response.latency_s, 3), "cached": response.cached,
            "error": response.error}
