"""What T-MEM passes between its stages, typed: discovery for construction, and what a
context's checks and viewer read of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tmem_core.methods.tmem._discovery import Discovery, Interval
from tmem_core.methods.tmem._forest import Forest, Node, Repair


@dataclass(frozen=True)
class Scored:
    """A discovery candidate as construction needs it: its id and signals."""

    id: str
    relevance: float
    support: float
    anchor_rank: int | None


@dataclass(frozen=True)
class Found:
    """What construction needs of discovery: the candidates (most relevant first) and every
    interval (the selector's sections)."""

    candidates: tuple[Scored, ...]
    intervals: tuple[Interval, ...]

    @classmethod
    def of(cls, found: Discovery) -> Found:
        return cls(tuple(Scored(c.message.msg_id, c.relevance, c.support, c.anchor_rank)
                         for c in found.candidates), found.intervals)


@dataclass(frozen=True)
class Built:
    """What the checks and the viewer read of a T-MEM context: its forest (nodes in time
    order), the selection's labels, the leaves trimmed to fit, the edges repaired, the
    batches that failed, and the compression's figures (None without compression)."""

    forest: tuple[Node, ...]
    labels: dict[str, str]
    trimmed: tuple[str, ...]
    repairs: tuple[Repair, ...]
    failures: tuple[dict[str, str], ...]
    compression: dict[str, Any] | None

    def the_forest(self) -> Forest:
        nodes = {n.id: n for n in self.forest}
        return Forest(nodes, tuple(i for i, n in nodes.items() if n.parent is None))
