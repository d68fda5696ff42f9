"""The seam for external memory systems: one conversation's memory, and the system registry.

    @memory_system("mine", config=MyParams, extra="mine", imports=("mine",),
                   description="what it does")
    def open_mine(endpoint: AccountingEndpoint, directory: Path, params: MyParams
                  ) -> MemorySystem: ...

The factory opens (or creates) the system's memory of ONE conversation in `directory`, with
every LLM and embedding call pointed at `endpoint.base_url` (key `endpoint.api_key`). Each
registered system is a method of the same name (`ExternalMemory`), with `config` as its
parameters; `imports` are modules the factory needs, checked when the method is built, and
`extra` is the optional dependency group that installs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from tmem_core.llm._accounting_server import AccountingEndpoint
from tmem_core.schema import Message

P = TypeVar("P")


@dataclass(frozen=True)
class Recalled:
    """One item a system recalled: a raw message (`raw`: `text` is that message's own text,
    `source_ids` its id) or a memory derived from messages (`source_ids`: those messages,
    when the system knows them). `timestamp` is the conversation time the item refers to;
    `valid_until` the conversation time from which the system holds it no longer true, and
    `superseded` whether the system marked it replaced (Graphiti's `invalid_at` and
    `expired_at`)."""

    text: str
    timestamp: datetime | None
    source_ids: tuple[str, ...]
    score: float
    raw: bool = False
    valid_until: datetime | None = None
    superseded: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "timestamp": _iso(self.timestamp),
                "source_ids": list(self.source_ids), "score": self.score, "raw": self.raw,
                "valid_until": _iso(self.valid_until), "superseded": self.superseded}


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at else None


class MemorySystem(Protocol):
    """An external system's memory of one conversation."""

    def add(self, messages: Sequence[Message]) -> None:
        """Memorise the messages in conversation order, each at its own timestamp (the
        conversation's time, never the clock's), with its author and id."""
        ...

    def search(self, query: str, k: int) -> list[Recalled]:
        """The at most `k` items most relevant to `query`, best first."""
        ...


SystemFactory = Callable[[AccountingEndpoint, Path, P], MemorySystem]


@dataclass(frozen=True)
class SystemSpec(Generic[P]):
    """A registered system: its factory, parameter dataclass and what it needs installed."""

    name: str
    factory: SystemFactory[P]
    params: type[P]
    description: str
    extra: str | None = None
    imports: tuple[str, ...] = ()
