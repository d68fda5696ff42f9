"""Temporal memory structuring (paper §4.3): the LLM's proposals, the constraints on the
forest's edges and the repair rule that build it from them.

Proposals: a parent and a relation per message. Messages are grouped by topic (one group when
there are none), in time order, and chunked to `batch_size` per request; each request also
shows the group's earlier messages as possible parents, newest first back to the first, as many
as fit `context_tokens` (as `message_line` renders them): any earlier candidate of the topic can
be a parent, so long-range UPDATE chains (paper G.2: Msg_3433 -> 5244 -> 6194) are not cut by a
message window. All requests go out in one `generate` call. A failed request leaves its
messages without proposals: the repair rule places them.

Edges. Constraints on an edge child -> parent: the parent is an earlier selected message (by
time, then conversation order), in the same topic when both have one, and not in a later
phase than the child when both have one. Phases run per topic (a project's or topic's own
stages), so their order is each discovery group's own: first appearance among the group's
messages (topic, else channel, session, conversation). Since every parent is strictly
earlier, no cycle can form.

Repair rule (deterministic): a message whose proposal is missing or breaks a constraint
becomes an EXPAND of the nearest earlier message of its discovery group (topic, else channel,
else session) that satisfies the constraints; with none, it is a ROOT. A proposed ROOT is kept
as a ROOT. In the untyped forest UPDATE and EXPAND both become RELATED after repair."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tmem_core.evaluation import question_block
from tmem_core.llm import ChatRequest
from tmem_core.llm._tokens import TokenCounter
from tmem_core.llm._types import object_schema
from tmem_core.methods._context import LLM
from tmem_core.methods.tmem._forest import PROPOSABLE, Forest, Node, Proposal, Relation, Repair
from tmem_core.methods.tmem._linearise import message_line
from tmem_core.methods.tmem._steps import (
    StepStats,
    entries,
    generate,
    keyed_schema,
    local_ids,
    local_lines,
    one_of,
    request,
)
from tmem_core.methods.tmem._timeline import chronological, group_key
from tmem_core.methods.tmem._withheld import withheld
from tmem_core.prompts import load_prompt
from tmem_core.retrieval import Conversation
from tmem_core.schema import Message, Question

_PROPOSED: dict[str, Relation] = {r: r for r in PROPOSABLE}
PhaseRanks = Mapping[str, Mapping[str, int]]  # group key -> phase -> rank in that group


@dataclass(frozen=True)
class Constraints:
    """Which earlier message may be a message's parent (phase ranks per discovery group)."""

    phase_rank: PhaseRanks = field(default_factory=dict)

    def problem(self, child: Message, parent: Message) -> str | None:
        if chronological(parent) >= chronological(child):
            return "parent is not earlier"
        if child.topic is not None and parent.topic is not None and child.topic != parent.topic:
            return "parent is in another topic"
        ranks = self.phase_rank.get(group_key(child), {})
        child_rank = ranks.get(child.phase) if child.phase is not None else None
        parent_rank = ranks.get(parent.phase) if parent.phase is not None else None
        if child_rank is not None and parent_rank is not None and parent_rank > child_rank:
            return "phase order goes backwards"
        return None


def phase_order(messages: Iterable[Message]) -> dict[str, dict[str, int]]:
    """Per discovery group: phase -> rank by first appearance among the group's messages
    (messages in conversation order)."""
    ranks: dict[str, dict[str, int]] = {}
    for m in messages:
        if m.phase is not None:
            group = ranks.setdefault(group_key(m), {})
            group.setdefault(m.phase, len(group))
    return ranks


def build_forest(messages: Sequence[Message], proposals: Mapping[str, Proposal],
                 constraints: Constraints | None = None,
                 typed: bool = True) -> tuple[Forest, list[Repair]]:
    """A valid forest from proposed edges, repairing each invalid one (see module doc)."""
    constraints = constraints or Constraints()
    ordered = sorted(messages, key=chronological)
    by_id = {m.msg_id: m for m in ordered}
    edges: dict[str, tuple[str | None, Relation]] = {}
    repairs = []
    for k, m in enumerate(ordered):
        proposal = proposals.get(m.msg_id)
        edge = _validated(m, proposal, by_id, constraints)
        if isinstance(edge, str):
            problem, edge = edge, _fallback(m, ordered[:k], constraints)
            repairs.append(Repair(m.msg_id, proposal, problem, *edge))
        edges[m.msg_id] = edge if typed or edge[1] == "ROOT" else (edge[0], "RELATED")
    return _assemble(ordered, edges), repairs


def flat_forest(messages: Sequence[Message]) -> Forest:
    """Every message a ROOT, in the order given (selection rank): the flat list of the
    no-structuring ablation."""
    return _assemble(messages, {m.msg_id: (None, "ROOT") for m in messages})


def _validated(message: Message, proposal: Proposal | None, by_id: Mapping[str, Message],
               constraints: Constraints) -> tuple[str | None, Relation] | str:
    """The proposed edge (parent, relation) when valid, else what is wrong with it."""
    if proposal is None:
        return "no proposal"
    relation = _PROPOSED.get(proposal.relation)
    if relation is None:
        return f"unknown relation {proposal.relation!r}"
    if relation == "ROOT":
        return None, relation
    parent = by_id.get(proposal.parent) if proposal.parent is not None else None
    if parent is None:
        return f"unknown parent {proposal.parent!r}"
    return constraints.problem(message, parent) or (parent.msg_id, relation)


def _fallback(message: Message, earlier: Sequence[Message],
              constraints: Constraints) -> tuple[str | None, Relation]:
    group = group_key(message)
    for candidate in reversed(earlier):
        if group_key(candidate) == group and constraints.problem(message, candidate) is None:
            return candidate.msg_id, "EXPAND"
    return None, "ROOT"


def _assemble(ordered: Sequence[Message], edges: Mapping[str, tuple[str | None, Relation]]
              ) -> Forest:
    children: dict[str, list[str]] = {m.msg_id: [] for m in ordered}
    depth: dict[str, int] = {}
    for m in ordered:  # parents come first in time order
        parent = edges[m.msg_id][0]
        depth[m.msg_id] = 0 if parent is None else depth[parent] + 1
        if parent is not None:
            children[parent].append(m.msg_id)
    nodes = {m.msg_id: Node(m.msg_id, edges[m.msg_id][0], edges[m.msg_id][1], depth[m.msg_id],
                            m.timestamp, m.seq, tuple(children[m.msg_id])) for m in ordered}
    return Forest(nodes, tuple(i for i, n in nodes.items() if n.parent is None))



def phase_constraints(conversation: Conversation, fields: Sequence[str],
                      cache: dict[str, PhaseRanks]) -> Constraints:
    """Phase ranks of the conversation as structuring sees it (`fields` withheld), kept in
    `cache` per conversation."""
    if conversation.conv_id not in cache:
        cache[conversation.conv_id] = phase_order(withheld(conversation.messages, fields))
    return Constraints(cache[conversation.conv_id])


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
    count: TokenCounter
    batch_size: int = 12
    context_tokens: int = 2048

    def propose(self, question: Question, messages: Sequence[Message]) -> Proposals:
        ids = local_ids(messages)
        chunks = topic_chunks(messages, self.batch_size, self.context_tokens, self.count)
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


def topic_chunks(messages: Sequence[Message], size: int, context_tokens: int,
                 count: TokenCounter) -> list[Chunk]:
    """Per topic, in time order: chunks of `size`, each with the topic's earlier messages
    that fit `context_tokens` (the latest ones kept)."""
    groups: dict[str | None, list[Message]] = {}
    for m in sorted(messages, key=chronological):
        groups.setdefault(m.topic, []).append(m)
    return [Chunk(earlier_within(members[:k], context_tokens, count), tuple(members[k:k + size]))
            for members in groups.values() for k in range(0, len(members), size)]


def earlier_within(earlier: Sequence[Message], tokens: int,
                   count: TokenCounter) -> tuple[Message, ...]:
    """The latest of `earlier` (in time order) whose lines fit `tokens` together."""
    kept: list[Message] = []
    for m in reversed(earlier):
        tokens -= count(message_line(m)) + 1
        if tokens < 0:
            break
        kept.append(m)
    return tuple(reversed(kept))


@dataclass(frozen=True)
class Structured:
    """The forest structuring built, the proposals it came from, the edges repaired."""

    forest: Forest
    proposals: Proposals
    repairs: tuple[Repair, ...] = ()


def structure(question: Question, seen: Sequence[Message], structurer: Structurer,
              constraints: Constraints, typed: bool) -> Structured:
    """The forest of `seen` (the messages as structuring reads them): proposals, then the
    repair of every invalid one."""
    proposals = structurer.propose(question, seen)
    forest, repairs = build_forest(seen, proposals.edges, constraints, typed)
    return Structured(forest, proposals, tuple(repairs))
