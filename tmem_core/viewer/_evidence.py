"""A context as the answer model read it, with gold evidence marked (for the reader only):
its lines, T-MEM's forest as a tree, T2Mem's steps as a timeline."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from tmem_core.methods._context import render_message
from tmem_core.methods.tmem import Forest, Node, split_spans
from tmem_core.schema import Message

# a message as render_message writes it: "[<id>] YYYY-MM-DD HH:MM ..." (not "parent [<id>]")
MESSAGE_ID = re.compile(r"\[([^\[\]]+)\] \d{4}-\d{2}-\d{2} \d{2}:\d{2}")


@dataclass(frozen=True)
class ContextLine:
    text: str
    ids: list[str]  # the messages the line presents
    gold: bool


@dataclass(frozen=True)
class Span:
    text: str
    trimmed: bool  # dropped by compression


@dataclass(frozen=True)
class TreeNode:
    id: str
    relation: str
    parent: str | None
    depth: int
    at: str
    author: str | None
    meta: str  # role, channel, topic, phase
    label: str | None  # the selection's KEY / SUPPORT
    gold: bool
    spans: list[Span]
    children: list[TreeNode]


@dataclass(frozen=True)
class ForestView:
    roots: list[TreeNode]
    trimmed: list[str]  # whole nodes dropped to fit the budget
    repairs: list[str]  # edges the code repaired, and why
    failures: list[str]  # selection and structuring batches that failed
    compression: dict[str, Any] | None


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


def context_lines(text: str, gold: Collection[str]) -> list[ContextLine]:
    lines = []
    for line in text.splitlines():
        ids = MESSAGE_ID.findall(line)
        lines.append(ContextLine(line, ids, any(i in gold for i in ids)))
    return lines


def forest_view(trace: Mapping[str, Any], context: str, messages: Mapping[str, Message],
                gold: Collection[str]) -> ForestView:
    """T-MEM's forest from its construct trace; each node's text split into the spans the
    context kept and those compression trimmed."""
    forest = Forest.from_json(trace["forest"])
    labels: Mapping[str, str] = trace["selection"]["labels"]
    kept = _retained_texts(context, forest, messages)

    def node(n: Node) -> TreeNode:
        m = messages[n.id]
        meta = ", ".join(f"{k}: {v}" for k, v in (("role", m.role), ("channel", m.channel),
                                                 ("topic", m.topic), ("phase", m.phase)) if v)
        return TreeNode(n.id, n.relation, n.parent, n.depth, n.at.isoformat(), m.author, meta,
                        labels.get(n.id), n.id in gold, _spans(m.text, kept.get(n.id)),
                        [node(forest.nodes[c]) for c in n.children])

    structure = trace["structure"]
    return ForestView(
        [node(forest.nodes[r]) for r in forest.roots], list(trace["trimmed"]),
        [_repair(r) for r in structure["repairs"]],
        [str(f) for f in [*trace["selection"]["failures"], *structure["failures"]]],
        trace["compression"])


def _repair(r: Mapping[str, Any]) -> str:
    made = r["relation"] + (f" of {r['parent']}" if r["parent"] else "")
    return f"{r['id']}: {r['problem']}; made {made}"


def _retained_texts(context: str, forest: Forest, messages: Mapping[str, Message]
                    ) -> dict[str, str]:
    """Each node's text as the context holds it (after its rendered metadata)."""
    out = {}
    for line in context.splitlines():
        for found in MESSAGE_ID.findall(line)[:1]:
            if found in forest.nodes:
                head = render_message(dataclasses.replace(messages[found], text=""))
                at = line.find(head)
                out[found] = line[at + len(head):] if at >= 0 else line
    return out


def _spans(text: str, kept: str | None) -> list[Span]:
    """The message's spans in order, each marked trimmed when the kept text lacks it."""
    if kept is None:
        return [Span(text, False)]
    spans, cursor = [], 0
    for span in split_spans(text):
        at = kept.find(span, cursor)
        spans.append(Span(span, at < 0))
        cursor = cursor if at < 0 else at + len(span)
    return spans


def timeline(trace: Mapping[str, Any]) -> Timeline:
    """T2Mem's loop from its construct trace: each action, what it read, what it wrote."""
    return Timeline([_entry(e) for e in trace["initial"]], [_step(s) for s in trace["steps"]],
                    trace["stop"], list(trace["memory"]), bool(trace["fallback"]))


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
