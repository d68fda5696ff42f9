"""The construct record: what a method's construction did for one question, typed.

Every method returns one with its context (`Context.record`), of the type it registers with
`@method(record=...)`; the construct stage stores it as JSON (column `payload`) and writes the
`degradation` and `steps` columns from it; `jobs.inspect`, the viewer, the run's checks and
the evidence basis of recall read it back as that type. A method's record subclasses `Record`
(keyword-only fields) and narrows what it needs:

    @dataclass(frozen=True, kw_only=True)
    class MyRecord(Record):
        degradation: MyDegradation = field(default_factory=MyDegradation)
        notes: tuple[str, ...] = ()

The common fields:
- `basis`: how the context relates to messages: `shown` (their own text: `Context.ids`),
  `read` (the method wrote it after reading them; `linked_ids` adds those it names beyond
  `Context.ids`), `untraceable` (a memory that reached the answer model names no source);
- `degradation`: counters of what the method did instead of its described behaviour, one
  field each (a method's `Degradation` subclass; fields ending in `_total` are what the others
  are out of);
- `step_record`: a test-time loop's steps (None for a method without one).

An external memory system returns `SystemRecord` (methods/external): the items it recalled
(raw messages or memories with their sources) decide its basis.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from tmem_core import to_json
from tmem_core.evaluation._basis import SHOWN, Basis


@dataclass(frozen=True)
class Degradation:
    """What fell back or was repaired (a method's subclass adds one int field per counter)."""

    def counters(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, kw_only=True)
class Steps:
    """A test-time loop's per-question steps: `steps` taken of `max_steps`, `forced` (the
    answer came at the last step, where only an answer is allowed), `tool_calls` (searches and
    reads run), `searches` (a method's subclass adds its own counts)."""

    steps: int
    max_steps: int
    forced: bool
    tool_calls: int
    searches: int


@dataclass(frozen=True)
class Usage:
    """LLM usage of a loop's calls for one question."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float

    @classmethod
    def of(cls, calls: Sequence[Mapping[str, Any]]) -> Usage:
        """Summed over call records with `prompt_tokens`, `completion_tokens`, `latency_s`."""
        return cls(len(calls), sum(c["prompt_tokens"] for c in calls),
                   sum(c["completion_tokens"] for c in calls),
                   round(sum(c["latency_s"] for c in calls), 3))


@dataclass(frozen=True, kw_only=True)
class Record:
    """A method's construct record (the common part; a method without more returns it)."""

    basis: Basis = SHOWN
    linked_ids: tuple[str, ...] = ()
    degradation: Degradation = field(default_factory=Degradation)
    step_record: Steps | None = None


def record_columns(record: Record) -> dict[str, str | None]:
    """The construct stage's columns written from a record: the record itself (`payload`),
    its degradation counters and its step record (JSON, null without a loop)."""
    steps = record.step_record
    return {"payload": to_json(record),
            "degradation": json.dumps(record.degradation.counters(), sort_keys=True),
            "steps": None if steps is None else to_json(steps)}
