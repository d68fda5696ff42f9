"""What the answer model reads, and the interface of methods that build it (with an LLM).

A `ContextMethod` works in two steps so that the pipeline can run them as separate stages:
`retrieve` (CPU only: indexes, discovery, initial search) and `construct` (the method's LLM
steps, then rendering under the token budget). Both are plain Python on one question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from tmem_core.llm import BackboneConfig, ChatRequest, ChatResponse
from tmem_core.llm._tokens import TokenCounter
from tmem_core.methods._base import Evidence
from tmem_core.methods._record import Record
from tmem_core.schema import Message, Question

ContextKind = Literal["flat", "forest", "memory", "chain"]  # chain: holds its own answer


@dataclass(frozen=True)
class Context:
    """Evidence rendered for the answer prompt.

    `ids` are the messages whose own text reached the answer model (evidence recall; for
    T2Mem, the lines its ReadRaw steps showed, never whole linked episodes); `record` is
    what construction did (of the type the method registered as `record`, e.g. T-MEM's
    forest, see `_record`): what `jobs.inspect`, the run's checks, the viewer, the evidence
    basis and the degradation and steps columns read; `selected`: the evidence after the
    method's LLM selection, best first (T-MEM; None for methods without one), what recall@k
    of the selection scores.
    """

    qid: str
    method: str
    kind: ContextKind
    text: str
    ids: tuple[str, ...]
    tokens: int
    record: Record = field(default_factory=Record)
    selected: tuple[str, ...] | None = None


class LLM(Protocol):
    """What a method needs of the LLM layer (an `LLMClient`, or the pipeline's engine proxy)."""

    @property
    def backbone(self) -> BackboneConfig: ...

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]: ...


class ContextMethod(Protocol):
    @property
    def name(self) -> str: ...

    def retrieve(self, question: Question) -> Evidence:
        """CPU step: candidate evidence (ids, and what construction needs of it)."""
        ...

    def construct(self, question: Question, evidence: Evidence, llm: LLM | None,
                  count_tokens: TokenCounter) -> Context:
        """LLM step(s), then the context within the method's token budget (`MethodEnv.budget`,
        given when it was built)."""
        ...


@runtime_checkable
class SelectsEvidence(Protocol):
    """A context method whose construction first selects evidence with an LLM (T-MEM):
    `selected_ids` gives that evidence best first, what its recall@k scores."""

    def selected_ids(self, question: Question, evidence: Evidence,
                     llm: LLM | None) -> tuple[str, ...]: ...


MESSAGE_ID = re.compile(r"\[([^\[\]]+)\] \d{4}-\d{2}-\d{2} \d{2}:\d{2}")
"""A message as `render_message` writes it: "[<id>] YYYY-MM-DD HH:MM ..." (not "parent [id]")."""


def render_message(message: Message) -> str:
    """One message as the answer model sees it: id, time, author and metadata, text."""
    meta = [f"{k}: {v}" for k, v in (("role", message.role), ("channel", message.channel),
                                     ("topic", message.topic), ("phase", message.phase)) if v]
    author = message.author or "unknown"
    if meta:
        author = f"{author} ({', '.join(meta)})"
    return f"[{message.msg_id}] {message.timestamp:%Y-%m-%d %H:%M} {author}: {message.text}"


def render_flat(question: Question, method: str, messages: Sequence[Message], budget: int,
                count_tokens: TokenCounter) -> Context:
    """A ranked list, cut at the first message that would exceed the token `budget`."""
    lines: list[str] = []
    ids: list[str] = []
    used = 0
    for message in messages:
        line = render_message(message)
        cost = count_tokens(line) + 1
        if used + cost > budget:
            break
        lines.append(line)
        ids.append(message.msg_id)
        used += cost
    return Context(question.qid, method, "flat", "\n".join(lines), tuple(ids), used)
