"""Search-o1, the agentic-search baseline of T2Mem (paper §4, §5.3, §A.5), in Search-o1's own
scheme: the model searches while it reasons.

Each step is one continuation of the reasoning chain. The model writes a search query inside
it, between `<|begin_search_query|>` and `<|end_search_query|>`; the harness cuts the
continuation after that marker (where Search-o1 stops generation), runs the search over the raw
messages, has Reason-in-Documents condense the `k` best messages for the query and the
reasoning so far, and splices the condensed information back into the chain between
`<|begin_search_result|>` and `<|end_search_result|>`. A continuation without a query ends the
reasoning; its final answer is the last `\\boxed{...}` of the chain. A query asked before gets
Search-o1's reminder to use the earlier results instead of a search.

Budgets equal T2Mem's by default (the paper compares them at equal steps, §A.5): the
question's initial search takes `k_initial` messages (T2Mem's k for its first SearchMeta),
then at most `max_steps` steps (T2Mem's Tmax), the last of which may only answer: at most
`max_steps - 1` searches. Each method's per-step depth is its source's: T2Mem one metadata
entry per SearchMeta and a page of an episode per ReadRaw; Search-o1 its QA setting's top-10
documents per search, condensed by Reason-in-Documents. The answer stage reads the chain,
its final answer first, under the shared answer prompt and judge.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tmem_core.evaluation import question_block
from tmem_core.llm import (
    BackboneConfig,
    ChatMessage,
    ChatRequest,
    ChatResponse,
    TokenCounter,
    count_chat_tokens,
    counter_for,
    object_schema,
)
from tmem_core.methods._base import Evidence, evidence
from tmem_core.methods._context import (
    LLM,
    Context,
    ContextMethod,
    render_message,
)
from tmem_core.methods._reasoning import ReasoningBudget, reasoning_budget
from tmem_core.methods._record import READ, Basis, Degradation, Record, Steps, Usage
from tmem_core.methods._registry import MethodEnv, method
from tmem_core.methods.t2mem import CONTEXT_MARGIN, fit_lines
from tmem_core.prompts import load_prompt
from tmem_core.retrieval import ConversationIndex, IndexStore, Kind, query_text
from tmem_core.schema import Message, Question

STAGE = "construct"
"""Stage of every Search-o1 call: reasoning and condensing happen per question."""

BEGIN_QUERY, END_QUERY = "<|begin_search_query|>", "<|end_search_query|>"
BEGIN_RESULT, END_RESULT = "<|begin_search_result|>", "<|end_search_result|>"
REPEATED = "You have searched this query. Please refer to previous results."
MALFORMED = "malformed output"  # the stop reason of a call whose output is unusable
_INFORMATION = 600  # characters of one search's condensed information
_BOXED = re.compile(r"\\boxed\{(.*?)\}", re.S)
_WIDTH = 100


@dataclass(frozen=True)
class SearchO1Params:
    """`k_initial` messages for the question's initial search, at most `max_steps` reasoning
    steps (the last may only answer), the `k` best messages per search ranked by `ranking`;
    `step_max_tokens` caps the output of every call, `doc_max_tokens` the rendered documents
    of one search (less where the backbone's request context is smaller).

    `reasoning_tokens` N (the grid's `reasoning_budget`, paper A.3): each reasoning step's
    prompt asks for at most N reasoning tokens and its output is cut at N + 64 tokens;
    Reason-in-Documents, a condensation rather than the chain's reasoning, keeps
    `step_max_tokens`. None: no budget asked."""

    k_initial: int = 5
    max_steps: int = 5
    k: int = 10
    ranking: Kind = "hybrid"
    step_max_tokens: int = 512
    doc_max_tokens: int = 1536
    reasoning_tokens: int | None = None

    def __post_init__(self) -> None:
        reasoning_budget(self.reasoning_tokens)  # positive when given
        for name in ("k_initial", "max_steps", "k", "step_max_tokens", "doc_max_tokens"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    @property
    def budget(self) -> ReasoningBudget | None:
        return reasoning_budget(self.reasoning_tokens)

    @property
    def step_tokens(self) -> int:
        """`max_tokens` of a reasoning step: N + 64 under a budget, else `step_max_tokens`."""
        return self.step_max_tokens if self.budget is None else self.budget.max_tokens

    @property
    def searches(self) -> int:
        """Searches the model may issue after the initial one."""
        return self.max_steps - 1


def reason_schema() -> dict[str, Any]:
    """Reason-in-Documents: the condensed information of one search."""
    return object_schema({"information": {"type": "string", "maxLength": _INFORMATION}})


def ranked(index: ConversationIndex, query: str, k: int, ranking: Kind) -> list[Message]:
    """The `k` best messages for `query`, as Search-o1's retriever returns them (seen or not)."""
    return [index.conversation.messages[p] for p in index.ranking(query, ranking, k)]


def doc_budget(params: SearchO1Params, question: Question, backbone: BackboneConfig) -> int:
    """Tokens of one search's documents: at most `doc_max_tokens`, and at most a third of
    what a Reason-in-Documents prompt leaves of the backbone's context (the rest is for the
    reasoning so far, which `Search` cuts to fit)."""
    room = _room(backbone, "search_o1/reason", question, params)
    if room < 192:
        raise ValueError(f"backbone {backbone.name}: a context of {backbone.request_context} "
                         f"tokens leaves no room for Search-o1's documents and reasoning")
    return min(params.doc_max_tokens, room // 3)


@dataclass(frozen=True)
class ChainDegradation(Degradation):  # see `Search.degradation`
    malformed_calls: int = 0
    repaired_queries: int = 0
    fallback_context: int = 0
    calls_total: int = 0


@dataclass(frozen=True, kw_only=True)
class ChainSteps(Steps):
    answered: bool  # the chain holds a final answer


@dataclass(frozen=True, kw_only=True)
class ChainRecord(Record):
    """Search-o1's construct record: its calls, chain and answer; `fallback`: the answer
    read the documents shown instead."""

    basis: Basis = READ
    degradation: ChainDegradation = field(default_factory=ChainDegradation)
    step_record: ChainSteps | None = None
    question: str
    config: SearchO1Params
    doc_tokens: int
    calls: tuple[dict[str, Any], ...]
    stop: str
    queries: tuple[str, ...]
    information: tuple[str, ...]
    final_answer: str | None
    chain: tuple[str, ...]
    fallback: bool
    usage: Usage


@dataclass
class Search:
    """One question's reasoning chain: its segments (the model's continuations and the
    harness's search results), the messages Reason-in-Documents read, and its calls."""

    question: Question
    index: ConversationIndex
    params: SearchO1Params
    backbone: BackboneConfig
    doc_tokens: int
    count: TokenCounter
    chain: list[str] = field(default_factory=list)
    shown: dict[str, Message] = field(default_factory=dict)  # messages Reason-in-Documents read
    queries: list[str] = field(default_factory=list)  # searched, the initial one first
    information: list[str] = field(default_factory=list)  # condensed, one per search
    calls: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0
    stop: str = ""

    def run(self, initial: Sequence[Message], query: str, llm: LLM) -> None:
        if not self._search(0, query, initial, llm):
            return
        for step in range(1, self.params.max_steps + 1):
            last = step == self.params.max_steps
            text = self._think(step, last, llm)
            if text is None:
                return
            segment, query_asked = continuation(text)
            self.chain.append(segment)
            if query_asked is None:
                self.stop = "answer" if self.final_answer is not None else "finished"
                return
            if last:
                self.calls[-1]["repair"] = "a query after the last search: not run"
                self.stop = "max_steps"
                return
            if query_asked in self.queries:
                self.chain.append(f"{BEGIN_RESULT}{REPEATED}{END_RESULT}")
                continue
            found = ranked(self.index, query_asked, self.params.k, self.params.ranking)
            if not self._search(step, query_asked, found, llm):
                return
        self.stop = "max_steps"

    @property
    def final_answer(self) -> str | None:
        """The last `\\boxed{...}` the model wrote (its final answer), if any."""
        answers = [a.strip() for segment in self.chain for a in _BOXED.findall(segment)]
        return answers[-1] if answers else None

    @property
    def forced(self) -> bool:
        """The chain reached its last step, where no search is left (never with one step)."""
        return (self.params.max_steps > 1 and self.steps == self.params.max_steps
                and not self.stop.startswith(MALFORMED))

    def step_record(self) -> dict[str, Any]:
        searches = len(self.queries) - 1  # after the initial one
        return {"steps": self.steps, "max_steps": self.params.max_steps,
                "forced": self.forced, "tool_calls": searches, "searches": searches,
                "answered": self.final_answer is not None}

    def degradation(self) -> ChainDegradation:
        """What fell back or was repaired (`calls_total`: the calls they are out of)."""
        return ChainDegradation(int(self.stop.startswith(MALFORMED)),
                                sum("repair" in c for c in self.calls),
                                int(not self.information and self.final_answer is None),
                                len(self.calls))

    def units(self) -> list[str]:
        """What the answer model reads: the final answer, then the chain with its markers
        as words; the documents shown when the chain holds nothing (`fallback_context`)."""
        if not self.information and self.final_answer is None:
            return [render_message(m) for m in self.shown.values()]
        head = [f"Final answer of the reasoning: {self.final_answer}"] \
            if self.final_answer is not None else []
        return head + [_readable(s) for s in self.chain if s]

    def _think(self, step: int, last: bool, llm: LLM) -> str | None:
        """One continuation of the chain (None when the call failed: `stop`)."""
        self.steps = step
        left = ("No searches are left: do not search again; finish the reasoning and give "
                "your final answer as \\boxed{YOUR ANSWER}." if last else
                f"Searches left: {self.params.max_steps - step}.")
        prompt = load_prompt("search_o1/step")
        values = {"question": question_block(self.question), "searches_left": left,
                  "max_searches": str(self.params.searches)}
        chain = self._fit(self._asked(prompt.chat(**values, reasoning="")),
                          self.params.step_tokens)
        response = self._call(llm, self._asked(prompt.chat(**values, reasoning=chain)), None,
                              step, "reason_step", self.params.step_tokens)
        if not response.ok or not response.text.strip():
            self.stop = f"{MALFORMED}: {response.error or 'empty continuation'}"
            return None
        self.calls[-1]["text"] = response.text
        return response.text

    def _search(self, step: int, query: str, found: Sequence[Message], llm: LLM) -> bool:
        """Reason-in-Documents over `found` (cut to `doc_tokens`), its information spliced
        into the chain; False when its call failed (`stop`)."""
        lines = fit_lines([render_message(m) for m in found], self.doc_tokens, self.count)
        docs = found[:len(lines)]
        self.shown.update((m.msg_id, m) for m in docs)
        self.queries.append(query)
        prompt = load_prompt("search_o1/reason")
        values = {"question": question_block(self.question), "query": query,
                  "documents": "\n".join(lines)}
        chain = self._fit(prompt.chat(**values, reasoning=""), self.params.step_max_tokens)
        response = self._call(llm, prompt.chat(**values, reasoning=chain), reason_schema(),
                              step, "reason_in_documents", self.params.step_max_tokens)
        self.calls[-1].update(query=query, ids=[m.msg_id for m in docs])
        parsed = response.parsed if response.ok else None
        if not isinstance(parsed, dict) or not isinstance(parsed.get("information"), str):
            self.stop = f"{MALFORMED}: {response.error or 'no information'}"
            return False
        info = parsed["information"].strip() or "No helpful information found."
        self.calls[-1]["information"] = info
        self.information.append(f"[{query}] {info}")
        if step == 0:  # the harness's initial search, written as the model would have
            self.chain.append(f"{BEGIN_QUERY}{query}{END_QUERY}")
        self.chain.append(f"{BEGIN_RESULT}{info}{END_RESULT}")
        return True

    def _asked(self, messages: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
        """A reasoning step's messages, with the budget's instruction when there is one."""
        budget = self.params.budget
        return messages if budget is None else budget.ask(messages)

    def _fit(self, empty: Sequence[Any], output_tokens: int) -> str:
        """The chain as a prompt shows it: its newest segments within what the prompt
        (`empty`: without the chain) leaves of the context after `output_tokens`, after a
        note when older segments are left out (as Search-o1 shortens earlier reasoning)."""
        room = int((self.backbone.request_context - output_tokens)
                   * CONTEXT_MARGIN) - count_chat_tokens(self.backbone, empty)
        kept: list[str] = []
        for segment in reversed(self.chain):
            if sum(self.count(s) + 1 for s in [segment, *kept]) > room - 16:
                break
            kept.insert(0, segment)
        dropped = len(self.chain) - len(kept)
        return "\n".join(([f"(... {dropped} earlier parts left out ...)"] if dropped else [])
                         + kept) or "(nothing yet)"

    def _call(self, llm: LLM, messages: Sequence[Any], schema: dict[str, Any] | None,
              step: int, kind: str, max_tokens: int) -> ChatResponse:
        sampling = dataclasses.replace(llm.backbone.sampling, max_tokens=max_tokens)
        request = ChatRequest(messages, sampling, schema, stage=STAGE, qid=self.question.qid)
        (response,) = llm.generate([request])
        self.calls.append(_call_record(step, kind, response))
        return response


def continuation(text: str) -> tuple[str, str | None]:
    """A step's text up to and including its first complete search query (what follows, a
    stop string would have cut), and that query; the whole text and None when it asks none."""
    end = text.find(END_QUERY)
    begin = text.rfind(BEGIN_QUERY, 0, end) if end >= 0 else -1
    if begin < 0:
        return text.strip(), None
    query = text[begin + len(BEGIN_QUERY):end].strip()
    return text[:end + len(END_QUERY)].strip(), query or None


@dataclass
class SearchO1:
    """Search-o1 as a context method; the grid's Top-k does not apply (its own `k`s), its
    `budget` cuts the chain.

    `Context.ids` are the messages Reason-in-Documents read (as cut to the documents'
    budget); `Context.text` is the chain, its final answer first, cut to the budget, or the
    documents shown when the chain holds no information and no answer (the record says
    `fallback`). Version 2: queries inside the reasoning, equal budgets with T2Mem (version 1
    asked a JSON action per round, 3 rounds after the initial search).
    """

    store: IndexStore
    params: SearchO1Params = field(default_factory=SearchO1Params)
    name: str = "search_o1"
    budget: int = 8192

    def retrieve(self, question: Question) -> Evidence:
        """The initial search: the `k_initial` best messages for the query."""
        query = query_text(question)
        found = ranked(self.store.index(question.conv_id), query, self.params.k_initial,
                       self.params.ranking)
        ids = [m.msg_id for m in found]
        return evidence(self.name, question, ids)

    def construct(self, question: Question, evidence: Evidence, llm: LLM | None,
                  count_tokens: TokenCounter) -> Context:
        """The reasoning chain from the initial search, within the token budget."""
        if llm is None:
            raise ValueError(f"{self.name} reasons with an LLM; none was given")
        index = self.store.index(question.conv_id)
        search = Search(question, index, self.params, llm.backbone,
                        doc_budget(self.params, question, llm.backbone),
                        counter_for(llm.backbone))
        conversation = index.conversation
        search.run([conversation.messages[conversation.position[i]] for i in evidence.ids],
                   query_text(question), llm)
        text = "\n".join(fit_lines(search.units(), self.budget, count_tokens))
        return Context(question.qid, self.name, "memory", text, tuple(search.shown),
                       count_tokens(text), self._record(question, search))

    def _record(self, question: Question, search: Search) -> ChainRecord:
        return ChainRecord(
            degradation=search.degradation(),
            step_record=ChainSteps(**search.step_record()), question=question.question,
            config=self.params, doc_tokens=search.doc_tokens, calls=tuple(search.calls),
            stop=search.stop, queries=tuple(search.queries),
            information=tuple(search.information), final_answer=search.final_answer,
            chain=tuple(search.chain), fallback=bool(search.degradation().fallback_context),
            usage=Usage.of(search.calls))


def show_trace(_evidence: Evidence, context: Context, _messages: Mapping[str, Message]) -> str:
    """Each call (its query, documents, continuation or condensed information, tokens,
    latency), why the chain stopped, and the context the answer stage receives."""
    record = context.record
    if not isinstance(record, ChainRecord) or record.step_record is None:
        raise TypeError(f"{context.qid}: not a Search-o1 record ({type(record).__name__})")
    config, steps, usage = record.config, record.step_record, record.usage
    lines = [f"{context.method} {context.qid}: {record.question}",
             f"  config: k_initial={config.k_initial} max_steps={config.max_steps} "
             f"k={config.k} ranking={config.ranking} "
             f"documents<={record.doc_tokens} tokens per search"]
    for call in record.calls:
        lines.append(f"step {call['step']} {call['call']}: {call['prompt_tokens']}+"
                     f"{call['completion_tokens']} tokens, {call['latency_s']:.1f} s"
                     f"{' (cached)' if call['cached'] else ''}")
        if "query" in call:
            lines.append(f"  query: {call['query']!r}")
        for key in ("error", "repair", "text", "information"):
            if call.get(key):
                lines += _wrapped(f"  {key}: {call[key]}")
        if "ids" in call:
            lines.append(f"  documents: {' '.join(call['ids']) or '-'}")
    lines += [f"stop: {record.stop} after {steps.steps} of {steps.max_steps} steps"
              f"{' (answer forced at the last step)' if steps.forced else ''}, "
              f"{steps.searches} searches; {usage.prompt_tokens}+"
              f"{usage.completion_tokens} tokens, {usage.latency_s:.1f} s",
              f"final answer: {record.final_answer or '(none)'}",
              f"context for the answer ({context.tokens} tokens, {len(context.ids)} messages"
              f"{', fallback: the documents shown' if record.fallback else ''}):",
              *_wrapped(context.text or "(empty)", "  ")]
    return "\n".join(lines)


@method("search_o1", config=SearchO1Params, show=show_trace, record=ChainRecord, version=2,
        axes={"reasoning_budget": "reasoning_tokens", "steps": "max_steps"},
        prompts=("search_o1/step", "search_o1/reason"),
        description="Search-o1: search queries inside the reasoning, each search's documents "
                    "condensed by Reason-in-Documents and spliced back")
def _search_o1(env: MethodEnv, params: SearchO1Params, name: str) -> ContextMethod:
    return SearchO1(env.index_store, params, name=name, budget=env.budget)


def _room(backbone: BackboneConfig, prompt_name: str, question: Question,
          params: SearchO1Params) -> int:
    """Tokens a prompt with its placeholders empty (the question filled) leaves of the
    backbone's request context after the output."""
    prompt = load_prompt(prompt_name)
    empty = dict.fromkeys(prompt.placeholders, "") | {"question": question_block(question)}
    overhead = count_chat_tokens(backbone, prompt.chat(**empty))
    return int((backbone.request_context - params.step_max_tokens) * CONTEXT_MARGIN) - overhead


def _readable(segment: str) -> str:
    """A chain segment with its markers as words, for the answer model."""
    for marker, word in ((BEGIN_QUERY, "Search: "), (END_QUERY, ""),
                         (BEGIN_RESULT, "Found: "), (END_RESULT, "")):
        segment = segment.replace(marker, word)
    return segment.strip()


def _call_record(step: int, kind: str, response: ChatResponse) -> dict[str, Any]:
    return {"step": step, "call": kind, "prompt_tokens": response.usage.prompt_tokens,
            "completion_tokens": response.usage.completion_tokens,
            "latency_s": round(response.latency_s, 3), "cached": response.cached,
            "error": response.error}


def _wrapped(text: str, prefix: str = "") -> list[str]:
    return [wrapped for line in text.splitlines() or [""]
            for wrapped in textwrap.wrap(line, _WIDTH, initial_indent=prefix,
                                         subsequent_indent=prefix + "  ") or [prefix]]
