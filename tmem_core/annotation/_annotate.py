"""Exp-2's evidence annotation (paper A.4): reverse retrieval from each non-abstention
question's gold answer, then an LLM filter for direct support.

Reverse retrieval ranks the conversation's messages for the query "<question> <gold answer>"
(no metadata) and keeps the first `depth` (20 by default). Its retriever is "pooled" by
default: BM25's and the dense retriever's rankings taken in turn (the first of each, then the
second of each, ...; a message once), as TREC pools runs, so the candidates are not any
compared method's own ranking (T-MEM's anchors come from their rank fusion, `hybrid`, which
stays selectable, as do `bm25` and `dense`; `jobs.annotate --coverage --retrieval` measures
each against a benchmark's own evidence). The filter
labels each candidate ANSWER, BRIDGE or NONE for the known answer, `batch` candidates per
request, all requests in one batch; a request whose output is unusable leaves its candidates
FAILED (low confidence, audited). This reads gold answers by design: it is evaluation-side
and feeds no method.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

from tmem_core import check_range
from tmem_core.annotation._units import Label, Unit, judged
from tmem_core.llm import ChatRequest, ChatResponse
from tmem_core.llm._types import object_schema
from tmem_core.prompts import load_prompt
from tmem_core.retrieval import ConversationIndex, IndexStore, lexical_tokens
from tmem_core.schema import Gold, Message, Question

SUPPORT_PROMPT = "annotate/support"
LABELS: tuple[Label, ...] = ("ANSWER", "BRIDGE", "NONE")
MAX_ERRORS = 5  # distinct error messages kept in the settings
Retriever = Literal["pooled", "hybrid", "bm25", "dense"]
RETRIEVERS: tuple[Retriever, ...] = ("pooled", "hybrid", "bm25", "dense")


@dataclass(frozen=True)
class AnnotateConfig:
    depth: int = 20
    batch: int = 10
    retrieval: Retriever = "pooled"
    max_groups: int = 4  # evidence groups a question requires at most (`_groups.py`)

    def __post_init__(self) -> None:
        for name in ("depth", "batch", "max_groups"):
            check_range(name, getattr(self, name))
        if self.retrieval not in RETRIEVERS:
            raise ValueError(f"unknown reverse retriever {self.retrieval!r}; known: "
                             f"{', '.join(RETRIEVERS)}")


class Generator(Protocol):
    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]: ...


@dataclass(frozen=True)
class Batch:
    question: Question
    answer: str
    candidates: tuple[tuple[int, Message], ...]  # (rank, message)


@dataclass(frozen=True)
class Annotation:
    """Every unit, and what the filter cost."""

    units: tuple[Unit, ...]
    stats: dict[str, Any]


def annotatable(questions: Sequence[Question], gold: dict[str, Gold]) -> list[Question]:
    """The non-abstention questions with a gold answer."""
    return [q for q in questions
            if gold[q.qid].answer_kind != "abstention" and (gold[q.qid].answer or "").strip()]


def reverse_query(question: Question, answer: str) -> str:
    return f"{question.question} {answer}"


def reverse_retrieval(store: IndexStore, question: Question, answer: str, depth: int,
                      kind: Retriever = "pooled") -> list[Message]:
    """The `depth` messages ranked first for the question and its gold answer."""
    index = store.index(question.conv_id, False)
    return [index.conversation.messages[p]
            for p in _ranking(index, reverse_query(question, answer), kind, depth)]


def _ranking(index: ConversationIndex, query: str, kind: Retriever, depth: int) -> list[int]:
    if kind != "pooled":
        return index.ranking(query, kind, depth)
    runs = [index.ranking(query, "bm25", depth), index.ranking(query, "dense", depth)]
    pooled = dict.fromkeys(p for pair in itertools.zip_longest(*runs) for p in pair
                           if p is not None)
    return list(pooled)[:depth]


def annotate(store: IndexStore, questions: Sequence[Question], gold: dict[str, Gold],
             llm: Generator, config: AnnotateConfig | None = None) -> Annotation:
    """Reverse retrieval and the filter for every question; the units with their labels."""
    config = config or AnnotateConfig()
    batches = [Batch(q, gold[q.qid].answer or "", tuple(chunk))
               for q in questions
               for chunk in _chunks(list(enumerate(reverse_retrieval(
                   store, q, gold[q.qid].answer or "", config.depth, config.retrieval))),
                   config.batch)]
    responses = llm.generate([_request(b) for b in batches]) if batches else []
    units, failed = [], 0
    for batch, response in zip(batches, responses, strict=True):
        labels = _labels(response, len(batch.candidates))
        failed += labels is None
        for k, (rank, m) in enumerate(batch.candidates):
            label: Label = labels[k] if labels is not None else "FAILED"
            reference = batch.question.question if label == "BRIDGE" else batch.answer
            units.append(judged(batch.question.qid, batch.question.conv_id,
                                batch.question.question, batch.answer, m.msg_id, m.text, rank,
                                label, content_overlap(reference, m.text)))
    prompt = load_prompt(SUPPORT_PROMPT)
    errors = sorted({r.error for r in responses if r.error})
    stats = {"questions": len(questions), "calls": len(responses), "failed_calls": failed,
             "errors": errors[:MAX_ERRORS],
             "cached_calls": sum(r.cached for r in responses),
             "prompt_tokens": sum(r.usage.prompt_tokens for r in responses),
             "completion_tokens": sum(r.usage.completion_tokens for r in responses),
             "prompt": prompt.name, "prompt_sha256": prompt.sha256,
             **dataclasses.asdict(config), "query": "question + gold answer"}
    return Annotation(tuple(units), stats)


def content_overlap(reference: str, text: str) -> float:
    """The share of the reference's content words (stopwords removed) found in `text`."""
    wanted = set(lexical_tokens(reference))
    return len(wanted & set(lexical_tokens(text))) / len(wanted) if wanted else 0.0


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[k:k + size] for k in range(0, len(items), size)]


def _request(batch: Batch) -> ChatRequest:
    ids = [f"m{k}" for k in range(1, len(batch.candidates) + 1)]
    lines = "\n".join(f"[{i}] {m.timestamp:%Y-%m-%d %H:%M} {m.author or 'unknown'}: {m.text}"
                      for i, (_, m) in zip(ids, batch.candidates, strict=True))
    chat = load_prompt(SUPPORT_PROMPT).chat(question=batch.question.question,
                                            answer=batch.answer, messages=lines)
    schema = object_schema({"labels": object_schema(
        {i: {"type": "string", "enum": list(LABELS)} for i in ids})})
    return ChatRequest(chat, None, schema, "annotate.filter", batch.question.qid,
                       batch.question.conv_id)


def _labels(response: ChatResponse, count: int) -> list[Label] | None:
    """The labels m1..m<count> in order, or None when the output is unusable."""
    parsed = response.parsed
    given = parsed.get("labels") if response.ok and isinstance(parsed, dict) else None
    if not isinstance(given, dict):
        return None
    labels = [given.get(f"m{k}") for k in range(1, count + 1)]
    if not all(label in LABELS for label in labels):
        return None
    return cast(list[Label], labels)
