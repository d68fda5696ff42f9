"""The evidence forest (paper §4.3-4.4): its nodes (a message, its parent and relation, its
depth), the edges the LLM proposes and the repairs that replaced invalid ones. How it is
built: `_build`; fitted to the budget: `_fit`; drawn as text: `_linearise`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

Relation = Literal["ROOT", "UPDATE", "EXPAND", "RELATED"]
EDGE_RELATIONS: tuple[Relation, ...] = ("UPDATE", "EXPAND")
PROPOSABLE: tuple[Relation, ...] = ("UPDATE", "EXPAND", "ROOT")


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


@dataclass(frozen=True)
class Forest:
    """Nodes by id in time order; `roots` in time order (a flat forest's: in rank order)."""

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

    @classmethod
    def of(cls, nodes: Iterable[Node]) -> Forest:
        """The forest of `nodes` in time order (as a record keeps them)."""
        by_id = {n.id: n for n in nodes}
        return cls(by_id, tuple(i for i, n in by_id.items() if n.parent is None))


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

