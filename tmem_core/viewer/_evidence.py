"""A context as the answer model read it, with gold evidence marked (for the reader only):
its lines, and the panel its method's registered view draws (T-MEM's forest as a tree,
T2Mem's steps as a timeline)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from tmem_core.methods import MESSAGE_ID, get_method, method_names
from tmem_core.schema import Message


@dataclass(frozen=True)
class ContextLine:
    text: str
    ids: list[str]  # the messages the line presents
    gold: bool


def context_lines(text: str, gold: Collection[str]) -> list[ContextLine]:
    lines = []
    for line in text.splitlines():
        ids = MESSAGE_ID.findall(line)
        lines.append(ContextLine(line, ids, any(i in gold for i in ids)))
    return lines


def panels(method: str, payload: str | None, context: str, messages: Mapping[str, Message],
           gold: Collection[str]) -> dict[str, Any]:
    """The viewer panel the method registered (`View.panel`) drawn from its stored construct
    record; none for a method without a view (or not registered here), or a stage record
    without a construct record."""
    spec = get_method(method) if method in method_names() else None
    record = spec.stored_record(payload) if spec is not None and spec.view else None
    if spec is None or spec.view is None or record is None:
        return {}
    return {spec.view.panel: spec.view.render(record, context, messages, gold)}
