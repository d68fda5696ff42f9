"""What T-MEM passes between its stages, typed: discovery for construction (`Found`), and its
construct record (`Built`), which `jobs.inspect`, the run's checks and the viewer read."""

from __future__ import annotations

from dataclasses import dataclass, field

from tmem_core.methods._record import Degradation, Record
from tmem_core.methods.tmem._compress import Figures
from tmem_core.methods.tmem._config import DiscoveryConfig
from tmem_core.methods.tmem._discovery import Discovery, Interval
from tmem_core.methods.tmem._forest import Forest, Node, Repair
from tmem_core.methods.tmem._steps import StepStats


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
    interval (the selector's sections); the query, anchors (best first) and parameters in
    effect, for inspection (none in records written before they were kept)."""

    candidates: tuple[Scored, ...]
    intervals: tuple[Interval, ...]
    query: str = ""
    anchors: tuple[str, ...] = ()
    config: DiscoveryConfig | None = None

    @classmethod
    def of(cls, found: Discovery) -> Found:
        return cls(tuple(Scored(c.message.msg_id, c.relevance, c.support, c.anchor_rank)
                         for c in found.candidates), found.intervals, found.query,
                   found.anchors, found.config)


@dataclass(frozen=True)
class TMemDegradation(Degradation):
    """What fell back or was repaired on the way (`*_total`: the counts they are out of)."""

    selection_fallback_batches: int = 0
    selection_fallback: int = 0  # messages a failed selection batch kept as FALLBACK
    selection_labelled_total: int = 0
    selection_batches_total: int = 0
    structure_failed_batches: int = 0
    edges_repaired: int = 0
    edges_dropped: int = 0
    nodes_trimmed: int = 0
    dropped_before_structuring: int = 0
    admitted_total: int = 0


@dataclass(frozen=True, kw_only=True)
class Built(Record):
    """T-MEM's construct record: its forest (nodes in time order), the selection's labels and
    mode, the leaves trimmed to fit, the edges repaired, the batches that failed, the
    compression's figures (None without compression), the LLM usage per step."""

    forest: tuple[Node, ...]
    labels: dict[str, str]
    trimmed: tuple[str, ...]
    repairs: tuple[Repair, ...]
    failures: tuple[dict[str, str], ...]
    compression: Figures | None
    degradation: TMemDegradation = field(default_factory=TMemDegradation)
    selection: str = ""  # "llm", "heuristic", or "none: the anchors" (discovery off)
    llm: dict[str, StepStats] = field(default_factory=dict)

    def the_forest(self) -> Forest:
        return Forest.of(self.forest)
