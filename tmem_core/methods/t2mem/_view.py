"""A T2Mem context as the results viewer draws it: the loop as a timeline of its steps (the
action, what it read or found, the memory note it wrote)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tmem_core.schema import Message

if TYPE_CHECKING:
    from tmem_core.methods.t2mem._record import LoopRecord


@dataclass(frozen=True)
class Step:
    step: int
    action: str
    argument: str
    reasoning: str
    memory: str  # the memory note it wrote
    read: str | None  # the raw episode it read
    found: list[str]  # the metadata entries its search returned
    repair: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    error: str | None


@dataclass(frozen=True)
class Timeline:
    initial: list[str]
    steps: list[Step]
    stop: str
    memory: list[str]
    fallback: bool  # the memory was empty: the answer read the entries shown instead


def timeline(loop: LoopRecord, _context: str, _messages: Mapping[str, Message],
             _gold: Collection[str]) -> Timeline:
    """T2Mem's loop from its context's payload: each action, what it read, what it wrote."""
    return Timeline([_entry(e) for e in loop.initial], [_step(s) for s in loop.steps],
                    loop.stop, list(loop.memory), loop.fallback)


def _step(s: Mapping[str, Any]) -> Step:
    read = s.get("read")
    return Step(
        s["step"], s.get("action", "-"), s.get("argument", ""), s.get("reasoning", ""),
        s.get("memory", ""),
        None if read is None else (f"{read['episode']} ({read['source']}): {read['messages']}"
                                   f" of {read['of']} messages, {read['tokens']} tokens"),
        [_entry(e) for e in s.get("found", [])], s.get("repair"), s["prompt_tokens"],
        s["completion_tokens"], s["latency_s"], bool(s["cached"]), s["error"])


def _entry(e: Mapping[str, Any]) -> str:
    return f"({e['id']}) [{e['episode']}] {e['kind']}: {e['text']}"
