"""The forest from the LLM's proposals (paper §4.3): constraints on its edges and the repair rule.

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

from tmem_core.methods.tmem._forest import PROPOSABLE, Forest, Node, Proposal, Relation, Repair
from tmem_core.methods.tmem._timeline import chronological, group_key
from tmem_core.methods.tmem._withheld import withheld
from tmem_core.retrieval import Conversation
from tmem_core.schema import Message

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
