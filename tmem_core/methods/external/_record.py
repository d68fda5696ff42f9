"""An external system's construct record: what it recalled, how much of it the answer model
read, and how that traces to messages (the basis of evidence recall).

A new system only returns `Recalled` items from its `search`; `ExternalMemory` builds this
record from them (see `system_record`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tmem_core.evaluation._basis import READ, SHOWN, UNTRACEABLE, Basis
from tmem_core.methods._record import Degradation, Record
from tmem_core.methods.external._system import Recalled


@dataclass(frozen=True)
class MemoryUsed:
    """The memory a search read: its extraction backbone, its directory, whether this
    process built it."""

    backbone: str
    directory: str
    built_here: bool


@dataclass(frozen=True)
class SystemDegradation(Degradation):
    """The search failed (an empty context); it recalled nothing."""

    search_failed: int = 0
    nothing_recalled: int = 0


@dataclass(frozen=True, kw_only=True)
class SystemRecord(Record):
    """What the system recalled (best first) and how many items reached the answer model
    (`shown`); the query; the memory searched (its extraction backbone, its directory, whether
    this process built it); the search's errors."""

    degradation: SystemDegradation = field(default_factory=SystemDegradation)
    system: str
    query: str
    recalled: tuple[Recalled, ...]
    shown: int
    backbone: str
    directory: str
    built_here: bool
    errors: tuple[str, ...] = ()


def system_record(system: str, query: str, recalled: Sequence[Recalled], shown: int,
                  memory: MemoryUsed, errors: Sequence[str]) -> SystemRecord:
    """The record of one search: its basis from the items shown (raw messages are `shown`;
    memories are `read` from the messages they name, `untraceable` when one names none)."""
    basis, linked = _basis(recalled[:shown])
    return SystemRecord(basis=basis, linked_ids=linked,
                        degradation=SystemDegradation(int(bool(errors)), int(not recalled)),
                        system=system, query=query, recalled=tuple(recalled), shown=shown,
                        backbone=memory.backbone, directory=memory.directory,
                        built_here=memory.built_here, errors=tuple(errors))


def _basis(shown: Sequence[Recalled]) -> tuple[Basis, tuple[str, ...]]:
    derived = [item for item in shown if not item.raw]
    if any(not item.source_ids for item in derived):
        return UNTRACEABLE, ()
    if not derived:
        return SHOWN, ()
    return READ, tuple(dict.fromkeys(i for item in derived for i in item.source_ids))
