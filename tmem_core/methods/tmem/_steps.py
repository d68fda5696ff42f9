"""T-MEM's evidence selection, and what its two LLM steps share (short local ids, list
schemas, batched calls with usage; structuring's LLM half is in `_build`).

Evidence selection (paper §4.2): each candidate labelled KEY, SUPPORT or DROP. Candidates are
grouped by interval (anchors outside every kept interval by their discovery group), in time
order; whole intervals are packed into requests of at most `batch_size` messages (a larger
interval is split), and every request goes out in one `generate` call. A request whose output
is unusable (an error, or labels for fewer than `min_coverage` of its messages) keeps all its
candidates, labelled FALLBACK, and its failure is recorded. The kept messages are ranked KEY
first, then SUPPORT and FALLBACK, each tier in the order of the project's reranker
(`ContextReranker`; the paper does not name its reranker).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tmem_core.evaluation import question_block
from tmem_core.llm import ChatRequest, ChatResponse
from tmem_core.llm._types import object_schema
from tmem_core.methods._context import LLM
from tmem_core.methods.tmem._discovery import Candidate, Interval
from tmem_core.methods.tmem._linearise import message_line
from tmem_core.methods.tmem._rerank import ContextReranker
from tmem_core.methods.tmem._timeline import chronological, group_key
from tmem_core.prompts import Prompt, load_prompt
from tmem_core.schema import Message, Question


def local_ids(messages: Iterable[Message]) -> dict[str, str]:
    """Message id -> short prompt id ("m1", "m2", ...) in time order."""
    ordered = sorted(messages, key=chronological)
    return {m.msg_id: f"m{k}" for k, m in enumerate(ordered, 1)}


def local_lines(messages: Sequence[Message], ids: Mapping[str, str]) -> str:
    """Messages as `render_message` shows them, under their local ids; a topic they all share
    is stated once above them instead of on every line."""
    topics = {m.topic for m in messages}
    shared = topics.pop() if len(topics) == 1 else None
    lines = [message_line(dataclasses.replace(m, msg_id=ids[m.msg_id],
                                              topic=None if shared else m.topic))
             for m in messages]
    return "\n".join([f"(topic: {shared})", *lines] if shared else lines)


def keyed_schema(key: str, entries: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """JSON schema of `{key: {local id: entry, ...}}` with every id required, in order.

    Grammar-constrained decoding then writes one entry per id and cannot skip one."""
    return object_schema({key: object_schema(entries)})


def one_of(values: Sequence[str]) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


def request(llm: LLM, messages: Sequence[Any], schema: dict[str, Any], max_tokens: int,
            stage: str, qid: str) -> ChatRequest:
    """A schema-constrained request with the backbone's sampling and room for `max_tokens`."""
    sampling = dataclasses.replace(llm.backbone.sampling, max_tokens=max_tokens)
    return ChatRequest(messages, sampling, schema, stage, qid)


@dataclass
class StepStats:
    """LLM usage of one step for one question."""

    calls: int = 0
    cached: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0


def generate(llm: LLM, requests: Sequence[ChatRequest]) -> tuple[list[ChatResponse], StepStats]:
    """All requests in one `generate` call, with their usage."""
    start = time.perf_counter()
    responses = llm.generate(requests) if requests else []
    stats = StepStats(calls=len(responses), wall_s=time.perf_counter() - start)
    for r in responses:
        stats.cached += r.cached
        stats.failed += not r.ok
        stats.prompt_tokens += r.usage.prompt_tokens
        stats.completion_tokens += r.usage.completion_tokens
    return responses, stats


def entries(response: ChatResponse, key: str) -> dict[str, Any] | None:
    """The parsed mapping under `key` (local id -> entry), or None when unusable."""
    if not response.ok or not isinstance(response.parsed, dict):
        return None
    value = response.parsed.get(key)
    return value if isinstance(value, dict) else None


def prompt_hashes(*prompts: Prompt) -> dict[str, str]:
    return {p.name: p.sha256 for p in prompts}


Label = Literal["KEY", "SUPPORT", "DROP", "FALLBACK"]
LABELS: tuple[Label, ...] = ("KEY", "SUPPORT", "DROP")
_LABEL_OF: dict[str, Label] = {label: label for label in LABELS}
TIER: dict[str, int] = {"KEY": 0, "SUPPORT": 1, "FALLBACK": 1}
SELECT_PROMPT = "tmem/select"
TOKENS_PER_LABEL = 14  # `\n    "m12": "SUPPORT",` (about 12) and some slack


@dataclass(frozen=True)
class Section:
    """Candidates of one interval (or one group), in time order."""

    name: str
    candidates: tuple[Candidate, ...]


@dataclass(frozen=True)
class Batch:
    """The sections of one request."""

    sections: tuple[Section, ...]

    @property
    def name(self) -> str:
        return "; ".join(s.name for s in self.sections)

    @property
    def candidates(self) -> list[Candidate]:
        return [c for s in self.sections for c in s.candidates]

    def lines(self, ids: dict[str, str]) -> str:
        return "\n\n".join(f"{s.name}:\n" + local_lines([c.message for c in s.candidates], ids)
                           for s in self.sections)


@dataclass(frozen=True)
class Selection:
    """Labels by message id, the kept ids best first, the batches that fell back."""

    labels: dict[str, Label]
    ranked: tuple[str, ...]
    failures: tuple[dict[str, str], ...] = ()
    stats: StepStats = field(default_factory=StepStats)


@dataclass(frozen=True)
class LLMSelector:
    """The query-conditioned LLM selector behind the `Selector` seam."""

    llm: LLM
    batch_size: int = 20
    min_coverage: float = 0.5
    reranker: ContextReranker = field(default_factory=ContextReranker)

    def select(self, question: Question, candidates: Sequence[Candidate],
               top_k: int | None) -> list[str]:
        return list(self.label(question, candidates).ranked[:top_k])

    def label(self, question: Question, candidates: Sequence[Candidate],
              intervals: Sequence[Interval] = ()) -> Selection:
        batches = interval_batches(candidates, intervals, self.batch_size)
        ids = local_ids(c.message for c in candidates)
        responses, stats = generate(self.llm, [self._request(question, b, ids) for b in batches])
        labels: dict[str, Label] = {}
        failures = []
        for batch, response in zip(batches, responses, strict=True):
            found, problem = self._parse(batch, entries(response, "labels"), ids)
            if problem:
                found = dict.fromkeys((c.message.msg_id for c in batch.candidates), "FALLBACK")
                failures.append({"batch": batch.name, "error": response.error or problem})
            labels.update(found)
        order = self.reranker.select(question, candidates, None)
        ranked = sorted((i for i in order if labels[i] in TIER), key=lambda i: TIER[labels[i]])
        return Selection(labels, tuple(ranked), tuple(failures), stats)

    def _request(self, question: Question, batch: Batch, ids: dict[str, str]) -> ChatRequest:
        chat = load_prompt(SELECT_PROMPT).chat(question_block=question_block(question),
                                               messages=batch.lines(ids))
        schema = keyed_schema("labels", {ids[c.message.msg_id]: one_of(LABELS)
                                         for c in batch.candidates})
        return request(self.llm, chat, schema, TOKENS_PER_LABEL * len(batch.candidates) + 16,
                       "tmem.select", question.qid)

    def _parse(self, batch: Batch, given: dict[str, Any] | None,
               ids: dict[str, str]) -> tuple[dict[str, Label], str]:
        """The batch's labels (unlabelled messages are DROP), or a problem when unusable."""
        if given is None:
            return {}, "no usable output"
        labels = {c.message.msg_id: _label(given.get(ids[c.message.msg_id]))
                  for c in batch.candidates}
        valid = sum(label is not None for label in labels.values())
        if valid < self.min_coverage * len(batch.candidates):
            return {}, f"labels for {valid} of {len(batch.candidates)} messages"
        return {m: label or "DROP" for m, label in labels.items()}, ""


def interval_batches(candidates: Iterable[Candidate], intervals: Sequence[Interval],
                     size: int) -> list[Batch]:
    """Sections by kept interval (else by group) in time order, packed `size` messages a batch."""
    batches: list[list[Section]] = [[]]
    for section in interval_sections(candidates, intervals, size):
        if sum(len(s.candidates) for s in batches[-1]) + len(section.candidates) > size:
            batches.append([])
        batches[-1].append(section)
    return [Batch(tuple(b)) for b in batches if b]


def interval_sections(candidates: Iterable[Candidate], intervals: Sequence[Interval],
                      size: int) -> list[Section]:
    """Candidates by kept interval (else by group), in time order, split to `size`."""
    owner: dict[str, str] = {}
    for n, interval in enumerate(intervals, 1):
        for msg_id in interval.members if interval.kept else ():
            owner.setdefault(msg_id, f"Interval {n} ({interval.group})")
    groups: dict[str, list[Candidate]] = {}
    for c in sorted(candidates, key=lambda c: chronological(c.message)):
        key = owner.get(c.message.msg_id) or f"Anchors of {group_key(c.message)}"
        groups.setdefault(key, []).append(c)
    return [Section(name if len(members) <= size else f"{name}, part {k // size + 1}",
                    tuple(members[k:k + size]))
            for name, members in groups.items() for k in range(0, len(members), size)]


def _label(value: object) -> Label | None:
    return _LABEL_OF.get(value) if isinstance(value, str) else None
