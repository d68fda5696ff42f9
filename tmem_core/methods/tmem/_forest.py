"""The evidence forest (paper §4.3): edges proposed by the LLM, validated and repaired in code.

Constraints on an edge child -> parent: the parent is an earlier selected message (by time,
then conversation order), in the same topic when both have one, and not in a later phase than
the child when both have one. Phases run per topic (a project's or topic's own stages), so
their order is each discovery group's own: first appearance among the group's messages
(topic, else channel, session, conversation). Since every parent is strictly earlier, no cycle
can form.

Repair rule (deterministic): a message whose proposal is missing or breaks a constraint
becomes an EXPAND of the nearest earlier message of its discovery group (topic, else channel,
else session) that satisfies the constraints; with none, it is a ROOT. A proposed ROOT is kept
as a ROOT. In the untyped forest UPDATE and EXPAND both become RELATED after repair.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from tmem_core.methods.tmem._steps import chronological
from tmem_core.methods.tmem._timeline import group_key
from tmem_core.schema import Message

Relation = Literal["ROOT", "UPDATE", "EXPAND", "RELATED"]
EDGE_RELATIONS: tuple[Relation, ...] = ("UPDATE", "EXPAND")
PROPOSABLE: tuple[Relation, ...] = ("UPDATE", "EXPAND", "ROOT")
_PROPOSED: dict[str, Relation] = {r: r for r in PROPOSABLE}


@dataclass(frozen=True)
class Node:
    id: str
    parent: str | None
    relation: Relation
    depth: int
    at: datetime
    seq: int
    children: tuple[str, ...] = ()

    @property
    def order(self) -> tuple[datetime, int]:
        return self.at, self.seq

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "parent": self.parent, "relation": self.relation,
                "depth": self.depth, "at": self.at.isoformat(), "seq": self.seq,
                "children": list(self.children)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Node:
        return cls(data["id"], data["parent"], data["relation"], data["depth"],
                   datetime.fromisoformat(data["at"]), data["seq"], tuple(data["children"]))


@dataclass(frozen=True)
class Forest:
    """Nodes by id in time order; `roots` in time order."""

    nodes: dict[str, Node]
    roots: tuple[str, ...]

    def preorder(self) -> list[Node]:
        """Trees by root time, each in chronological pre-order (children oldest first)."""
        out: list[Node] = []
        stack = [self.nodes[r] for r in reversed(self.roots)]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(self.nodes[c] for c in reversed(node.children))
        return out

    def leaves(self) -> list[str]:
        return [i for i, n in self.nodes.items() if not n.children]

    def without(self, leaf: str) -> Forest:
        """The forest minus one leaf; every other node and edge is unchanged."""
        node = self.nodes[leaf]
        if node.children:
            raise ValueError(f"{leaf} is not a leaf")
        nodes = {i: n for i, n in self.nodes.items() if i != leaf}
        if node.parent is not None:
            parent = nodes[node.parent]
            nodes[parent.id] = replace(parent, children=tuple(
                c for c in parent.children if c != leaf))
        return Forest(nodes, tuple(r for r in self.roots if r != leaf))

    def to_json(self) -> list[dict[str, Any]]:
        return [n.to_json() for n in self.nodes.values()]

    @classmethod
    def from_json(cls, data: Iterable[Mapping[str, Any]]) -> Forest:
        nodes = {n.id: n for n in map(Node.from_json, data)}
        return cls(nodes, tuple(i for i, n in nodes.items() if n.parent is None))


@dataclass(frozen=True)
class Proposal:
    """An edge as the LLM proposed it (parent None: ROOT); not yet validated."""

    parent: str | None
    relation: str


@dataclass(frozen=True)
class Repair:
    id: str
    proposed: Proposal | None
    problem: str
    parent: str | None
    relation: Relation

    def to_json(self) -> dict[str, Any]:
        proposed = None if self.proposed is None else {"parent": self.proposed.parent,
                                                       "relation": self.proposed.relation}
        return {"id": self.id, "proposed": proposed, "problem": self.problem,
                "parent": self.parent, "relation": self.relation}


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
    """Every message a ROOT: the flat list of the no-structuring ablation."""
    ordered = sorted(messages, key=chronological)
    return _assemble(ordered, {m.msg_id: (None, "ROOT") for m in ordered})


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
