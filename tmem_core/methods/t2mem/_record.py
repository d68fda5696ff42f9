"""T2Mem's construct record: the loop's steps and what they read, its degradation counters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tmem_core.evaluation._basis import READ, Basis
from tmem_core.methods._record import Degradation, Record, Steps, Usage
from tmem_core.methods.t2mem._config import T2MemConfig


@dataclass(frozen=True)
class LoopDegradation(Degradation):
    """Malformed steps, repaired actions, contexts from the entries shown, a memory with
    episodes unextracted or items dropped (`steps_total`: the steps they are out of)."""

    malformed_steps: int = 0
    repaired_actions: int = 0
    fallback_context: int = 0
    steps_total: int = 0
    degraded_memory: int = 0


@dataclass(frozen=True, kw_only=True)
class LoopSteps(Steps):
    """The loop's steps, with its ReadRaw reads: parts read, read in full, and per episode
    part the share of its messages shown."""

    reads: int
    parts_read: int
    parts_read_in_full: int
    shown: dict[str, float]
    notes_left_out: int = 0  # memory notes a step prompt left out for `memory_tokens`


@dataclass(frozen=True)
class MemoryStats:
    """The conversation's memory a question read: who extracted it, its size, whether every
    episode has its metadata, items dropped as invalid."""

    backbone: str
    episodes: int
    entries: int
    complete: bool
    dropped: int


@dataclass(frozen=True, kw_only=True)
class LoopRecord(Record):
    """T2Mem's construct record: the initial entries, each step, why the loop stopped, the
    memory written, whether the answer read the entries shown instead (`fallback`), the
    episodes read; the configuration, memory and usage (none in records written before)."""

    basis: Basis = READ
    degradation: LoopDegradation = field(default_factory=LoopDegradation)
    step_record: LoopSteps | None = None
    initial: tuple[dict[str, Any], ...]
    steps: tuple[dict[str, Any], ...]
    stop: str
    memory: tuple[str, ...]
    fallback: bool
    question: str = ""
    config: T2MemConfig | None = None
    top_k: int = 0  # the initial SearchMeta's k, the grid's Top-k (0: records written before)
    episode_mode: str = ""
    metadata: MemoryStats | None = None
    read: tuple[str, ...] = ()
    usage: Usage | None = None
