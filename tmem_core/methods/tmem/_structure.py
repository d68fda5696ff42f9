"""The LLM half of Temporal Memory Structuring: a parent and a relation proposed per message.

Messages are grouped by topic (one group when there are none), in time order, and chunked to
`batch_size` per request; each request also shows up to `context` earlier messages of the group
as possible parents. All requests go out in one `generate` call. A failed request leaves its
messages without proposals: `build_forest` repairs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tmem_core.evaluation import question_block
from tmem_core.llm import ChatRequest, object_schema
from tmem_core.methods._context import LLM
from tmem_core.methods.tmem._forest import PROPOSABLE, Proposal
from tmem_core.methods.tmem._steps import (
    StepStats,
    chronological,
    entries,
    generate,
    keyed_schema,
    local_ids,
    local_lines,
    one_of,
    request,
)
from tmem_core.prompts import load_prompt
from tmem_core.schema import Message, Question

STRUCTURE_PROMPT = "tmem/structure"
NO_PARENT = "none"
TOKENS_PER_LINK = 28  # `"m12": {"parent": "m9", "relation": "EXPAND"},` with line breaks


@dataclass(frozen=True)
class Chunk:
    earlier: tuple[Message, ...]
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class Proposals:
    edges: dict[str, Proposal]
    failures: tuple[dict[str, str], ...] = ()
    stats: StepStats = field(default_factory=StepStats)


@dataclass(frozen=True)
class Structurer:
    """Proposes each message's parent and relation, per topic, in one `generate` call."""

    llm: LLM
    batch_size: int = 12
    context: int = 8

    def propose(self, question: Question, messages: Sequence[Message]) -> Proposals:
        ids = local_ids(messages)
        chunks = topic_chunks(messages, self.batch_size, self.context)
        responses, stats = generate(self.llm, [self._request(question, c, ids) for c in chunks])
        back = {local: msg_id for msg_id, local in ids.items()}
        edges: dict[str, Proposal] = {}
        failures = []
        for chunk, response in zip(chunks, responses, strict=True):
            given = entries(response, "links")
            if given is None:
                failures.append({"first": chunk.messages[0].msg_id,
                                 "error": response.error or "no usable output"})
                continue
            for m in chunk.messages:
                if isinstance(link := given.get(ids[m.msg_id]), dict):
                    edges[m.msg_id] = Proposal(back.get(str(link.get("parent"))),
                                               str(link.get("relation")))
        return Proposals(edges, tuple(failures), stats)

    def _request(self, question: Question, chunk: Chunk, ids: dict[str, str]) -> ChatRequest:
        """Each message may name an earlier message of the request as its parent, or none."""
        shown = [ids[m.msg_id] for m in (*chunk.earlier, *chunk.messages)]
        first = len(chunk.earlier)
        links = {shown[k]: object_schema({"parent": one_of([*shown[:k], NO_PARENT]),
                                          "relation": one_of(PROPOSABLE)})
                 for k in range(first, len(shown))}
        chat = load_prompt(STRUCTURE_PROMPT).chat(
            question_block=question_block(question),
            earlier=local_lines(chunk.earlier, ids) or "(none)",
            messages=local_lines(chunk.messages, ids))
        return request(self.llm, chat, keyed_schema("links", links),
                       TOKENS_PER_LINK * len(links) + 16, "tmem.structure", question.qid)


def topic_chunks(messages: Sequence[Message], size: int, context: int) -> list[Chunk]:
    """Per topic, in time order: chunks of `size` with up to `context` earlier messages."""
    groups: dict[str | None, list[Message]] = {}
    for m in sorted(messages, key=chronological):
        groups.setdefault(m.topic, []).append(m)
    return [Chunk(tuple(members[max(0, k - context):k]), tuple(members[k:k + size]))
            for members in groups.values() for k in range(0, len(members), size)]
