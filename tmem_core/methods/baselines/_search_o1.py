"""Search-o1, the agentic-search baseline of T2Mem (paper §4, §5.3, §A.5).

A reasoning model searches the raw messages mid-reasoning; each search's documents go
through Reason-in-Documents, which condenses them into the reasoning chain. `retrieve` (CPU)
is the initial search for the question; `construct` condenses its documents, then runs up to
`steps` rounds of one reasoning call (search or answer) and, after a search, one
Reason-in-Documents call over the `k` best messages not shown yet. The loop ends on answer,
at `steps`, when a search finds nothing new, or on malformed output (or an LLM error); `stop`
says which.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tmem_core.evaluation import question_block
from tmem_core.llm import (
    BackboneConfig,
    ChatRequest,
    ChatResponse,
    TokenCounter,
    count_chat_tokens,
    counter_for,
    object_schema,
)
from tmem_core.methods._base import Evidence, evidence
from tmem_core.methods._context import LLM, Context, ContextMethod, render_message
from tmem_core.methods._registry import MethodEnv, method
from tmem_core.methods.t2mem import CONTEXT_MARGIN, fit_lines
from tmem_core.prompts import load_prompt
from tmem_core.retrieval import ConversationIndex, IndexStore, Kind, query_text
from tmem_core.schema import Message, Question

STAGE = "construct"
"""Stage of every Search-o1 call: reasoning and condensing happen per question."""

MALFORMED = "malformed output"  # the stop reason of a call whose output is unusable
_LIMITS = {"reasoning": 300, "query": 100, "information": 600}  # characters
_WIDTH = 100


@dataclass(frozen=True)
class SearchO1Params:
    """`steps` reasoning rounds (each may search), `k` new messages per search, ranked by
    `ranking`; `step_max_tokens` caps the output of every call, `doc_max_tokens` the rendered
    documents of one search (less where the backbone's request context is smaller)."""

    steps: int = 3
    k: int = 5
    ranking: Kind = "hybrid"
    step_max_tokens: int = 384
    doc_max_tokens: int = 1536

    def __post_init__(self) -> None:
        for name in ("steps", "k", "step_max_tokens", "doc_max_tokens"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


def step_schema() -> dict[str, Any]:
    """Reasoning, then the action and its query."""
    return object_schema({"reasoning": _text("reasoning"),
                          "action": {"enum": ["search", "answer"]}, "query": _text("query")})


def reason_schema() -> dict[str, Any]:
    """Reason-in-Documents: the condensed information of one search."""
    return object_schema({"information": _text("information")})


def unseen(index: ConversationIndex, query: str, params: SearchO1Params,
           shown: Mapping[str, Message]) -> list[Message]:
    """The `k` best messages for `query` (by `params.ranking`) that are not in `shown`."""
    ranked = index.ranking(query, params.ranking, params.k + len(shown))
    messages = [index.conversation.messages[p] for p in ranked]
    return [m for m in messages if m.msg_id not in shown][:params.k]


def doc_budget(params: SearchO1Params, question: Question, backbone: BackboneConfig) -> int:
    """Tokens of one search's documents such that a Reason-in-Documents prompt (instructions,
    question, the longest reasoning chain) and its output fit the backbone's context."""
    prompt = load_prompt("search_o1/reason")
    empty = dict.fromkeys(prompt.placeholders, "") | {"question": question_block(question)}
    overhead = count_chat_tokens(backbone, prompt.chat(**empty))
    chain = (params.steps * (_LIMITS["reasoning"] + _LIMITS["query"])
             + (params.steps + 1) * (_LIMITS["information"] + _LIMITS["query"])) // 3
    room = int((backbone.request_context - params.step_max_tokens) * CONTEXT_MARGIN) \
        - overhead - chain
    if room < 64:
        raise ValueError(f"backbone {backbone.name}: a context of {backbone.request_context} "
                         f"tokens leaves no room for the documents of {params.steps} searches")
    return min(params.doc_max_tokens, room)


@dataclass
class Search:
    """One question's reasoning chain: messages shown, condensed information, call trace."""

    question: Question
    index: ConversationIndex
    params: SearchO1Params
    doc_tokens: int
    count: TokenCounter
    shown: dict[str, Message] = field(default_factory=dict)  # messages Reason-in-Documents read
    chain: list[str] = field(default_factory=list)
    information: list[str] = field(default_factory=list)
    notes: str = ""  # the reasoning of the last round
    calls: list[dict[str, Any]] = field(default_factory=list)
    stop: str = ""

    def run(self, initial: Sequence[Message], llm: LLM) -> None:
        if not self._reason(0, self.question.question, initial, llm):
            return
        for step in range(1, self.params.steps + 1):
            query = self._think(step, llm)
            if query is None:
                return
            found = unseen(self.index, query, self.params, self.shown)
            if not found:
                self.stop = f"nothing new for {query!r}"
                return
            if not self._reason(step, query, found, llm):
                return
        self.stop = "max_steps"

    def degradation(self) -> dict[str, int]:
        """What fell back or was repaired (`calls_total`: the calls they are out of)."""
        return {"malformed_calls": int(self.stop.startswith(MALFORMED)),
                "repaired_queries": sum("repair" in c for c in self.calls),
                "fallback_context": int(not self.information),
                "calls_total": len(self.calls)}

    def units(self) -> list[str]:
        """What the answer model reads: the condensed information and the last reasoning;
        the documents shown when nothing was condensed."""
        if not self.information:
            return [render_message(m) for m in self.shown.values()]
        return self.information + ([f"Reasoning: {self.notes}"] if self.notes else [])

    def _think(self, step: int, llm: LLM) -> str | None:
        """One reasoning round: the query it searches, or None when the loop ends."""
        prompt = load_prompt("search_o1/step").chat(
            question=question_block(self.question), reasoning=self._chain(),
            searches_left=str(self.params.steps - step + 1))
        record, parsed = self._call(llm, step, "reason_step", prompt, step_schema(), "action")
        if parsed is None:
            return None
        action = parsed.get("action", "").lower()
        if action not in ("search", "answer"):
            self.stop = f"{MALFORMED}: action {action!r}"
            return None
        self.notes = parsed.get("reasoning", "")
        if self.notes:
            self.chain.append(f"Thought: {self.notes}")
        record.update(reasoning=self.notes, action=action, query=parsed.get("query", ""))
        if action == "answer":
            self.stop = "answer"
            return None
        if not record["query"]:
            record.update(query=self.question.question,
                          repair="empty query: searched the question")
        query: str = record["query"]
        self.chain.append(f"Search: {query}")
        return query

    def _reason(self, step: int, query: str, found: Sequence[Message], llm: LLM) -> bool:
        """Reason-in-Documents over `found` (cut to `doc_tokens`); False ends the loop."""
        lines = fit_lines([render_message(m) for m in found], self.doc_tokens, self.count)
        docs = found[:len(lines)]
        self.shown.update((m.msg_id, m) for m in docs)
        prompt = load_prompt("search_o1/reason").chat(
            question=question_block(self.question), reasoning=self._chain(), query=query,
            documents="\n".join(lines))
        record, parsed = self._call(llm, step, "reason_in_documents", prompt, reason_schema(),
                                    "information")
        record.update(query=query, ids=[m.msg_id for m in docs])
        if parsed is None:
            return False
        info = parsed.get("information", "")
        record["information"] = info
        if info:
            self.information.append(f"[{query}] {info}")
            self.chain.append(f"Found: {info}")
        return True

    def _call(self, llm: LLM, step: int, kind: str, prompt: Sequence[Any],
              schema: dict[str, Any], required: str
              ) -> tuple[dict[str, Any], dict[str, str] | None]:
        """One LLM call, recorded; its parsed fields, or None (and `stop`) when unusable."""
        sampling = dataclasses.replace(llm.backbone.sampling,
                                       max_tokens=self.params.step_max_tokens)
        request = ChatRequest(prompt, sampling, schema, stage=STAGE, qid=self.question.qid)
        (response,) = llm.generate([request])
        record = _call_record(step, kind, response)
        self.calls.append(record)
        parsed = _fields(response, required)
        if isinstance(parsed, str):
            self.stop = f"{MALFORMED}: {parsed}"
            return record, None
        return record, parsed

    def _chain(self) -> str:
        return "\n".join(self.chain) or "(nothing yet)"


@dataclass
class SearchO1:
    """Search-o1 as a context method; the grid's Top-k does not apply (its own `k`).

    `Context.ids` are the messages Reason-in-Documents read (as cut to the documents'
    budget); `Context.text` is the condensed information and the last reasoning, cut to the
    budget, or the documents shown when nothing was condensed (the trace says `fallback`).
    """

    store: IndexStore
    params: SearchO1Params = field(default_factory=SearchO1Params)
    name: str = "search_o1"

    def retrieve(self, question: Question) -> Evidence:
        """The initial search: the `k` best messages for the question."""
        query = query_text(question)
        found = unseen(self.store.index(question.conv_id), query, self.params, {})
        ids = [m.msg_id for m in found]
        return evidence(self.name, question, ids, {"query": query, "ids": ids})

    def construct(self, question: Question, evidence: Evidence, llm: LLM | None,
                  budget_tokens: int, count_tokens: TokenCounter) -> Context:
        """Reason-in-Documents over the initial search, the search rounds, then the
        condensed chain within `budget_tokens`."""
        if llm is None:
            raise ValueError(f"{self.name} reasons with an LLM; none was given")
        index = self.store.index(question.conv_id)
        search = Search(question, index, self.params,
                        doc_budget(self.params, question, llm.backbone),
                        counter_for(llm.backbone))
        conversation = index.conversation
        search.run([conversation.messages[conversation.position[i]] for i in evidence.ids], llm)
        text = "\n".join(fit_lines(search.units(), budget_tokens, count_tokens))
        return Context(question.qid, self.name, "memory", text, tuple(search.shown),
                       count_tokens(text), self._trace(question, search))

    def _trace(self, question: Question, search: Search) -> dict[str, Any]:
        calls = search.calls
        return {
            "method": self.name, "question": question.question,
            "config": dataclasses.asdict(self.params), "doc_tokens": search.doc_tokens,
            "steps": calls, "stop": search.stop, "information": search.information,
            "fallback": not search.information, "degradation": search.degradation(),
            "usage": {"calls": len(calls),
                      "prompt_tokens": sum(c["prompt_tokens"] for c in calls),
                      "completion_tokens": sum(c["completion_tokens"] for c in calls),
                      "latency_s": round(sum(c["latency_s"] for c in calls), 3)},
        }


def show_trace(_evidence: Evidence, context: Context, _messages: Mapping[str, Message]) -> str:
    """Each call (its query, documents, reasoning or condensed information, tokens, latency),
    why the loop stopped, and the context the answer stage receives."""
    trace = context.trace
    config = trace["config"]
    lines = [f"{context.method} {context.qid}: {trace['question']}",
             f"  config: steps={config['steps']} k={config['k']} ranking={config['ranking']} "
             f"documents<={trace['doc_tokens']} tokens per search"]
    for call in trace["steps"]:
        lines.append(f"step {call['step']} {call['call']}: {call['prompt_tokens']}+"
                     f"{call['completion_tokens']} tokens, {call['latency_s']:.1f} s"
                     f"{' (cached)' if call['cached'] else ''}")
        if "query" in call:
            lines.append(f"  query: {call['query']!r}")
        for key in ("error", "repair", "action", "reasoning", "information"):
            if call.get(key):
                lines += _wrapped(f"  {key}: {call[key]}")
        if "ids" in call:
            lines.append(f"  documents: {' '.join(call['ids']) or '-'}")
    usage = trace["usage"]
    lines += [f"stop: {trace['stop']} after {usage['calls']} call(s); "
              f"{usage['prompt_tokens']}+{usage['completion_tokens']} tokens, "
              f"{usage['latency_s']:.1f} s",
              f"context for the answer ({context.tokens} tokens, {len(context.ids)} messages"
              f"{', fallback: the documents shown' if trace['fallback'] else ''}):",
              *_wrapped(context.text or "(empty)", "  ")]
    return "\n".join(lines)


@method("search_o1", config=SearchO1Params, show=show_trace,
        description="Search-o1: searches raw messages while reasoning, each search's documents "
                    "condensed by Reason-in-Documents")
def _search_o1(env: MethodEnv, params: SearchO1Params, name: str) -> ContextMethod:
    return SearchO1(env.index_store, params, name=name)


def _text(name: str) -> dict[str, Any]:
    return {"type": "string", "maxLength": _LIMITS[name]}


def _call_record(step: int, kind: str, response: ChatResponse) -> dict[str, Any]:
    return {"step": step, "call": kind, "prompt_tokens": response.usage.prompt_tokens,
            "completion_tokens": response.usage.completion_tokens,
            "latency_s": round(response.latency_s, 3), "cached": response.cached,
            "error": response.error}


def _fields(response: ChatResponse, required: str) -> dict[str, str] | str:
    """The reply's fields as stripped strings, or why there are none."""
    if not response.ok:
        return response.error or "error"
    parsed = response.parsed
    if not isinstance(parsed, dict) or not isinstance(parsed.get(required), str):
        return f"no {required} in {response.text[:160]!r}"
    return {str(k): str(v or "").strip() for k, v in parsed.items()}


def _wrapped(text: str, prefix: str = "") -> list[str]:
    return [wrapped for line in text.splitlines() or [""]
            for wrapped in textwrap.wrap(line, _WIDTH, initial_indent=prefix,
                                         subsequent_indent=prefix + "  ") or [prefix]]
