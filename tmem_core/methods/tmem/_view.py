"""A T-MEM context as the results viewer draws it: the forest as a tree, each node's text
split into the spans the context kept and those compression trimmed, gold evidence marked
(for the reader only)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from tmem_core.methods._context import MESSAGE_ID, render_message
from tmem_core.methods.tmem._compress import Figures, split_spans
from tmem_core.methods.tmem._forest import Forest, Node, Repair
from tmem_core.methods.tmem._payload import Built
from tmem_core.schema import Message


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
    compression: Figures | None


def forest_view(built: Built, context: str, messages: Mapping[str, Message],
                gold: Collection[str]) -> ForestView:
    """T-MEM's forest from its context's payload; each node's text split into the spans the
    context kept and those compression trimmed."""
    forest = built.the_forest()
    labels = built.labels
    kept = _retained_texts(context, forest, messages)

    def node(n: Node) -> TreeNode:
        m = messages[n.id]
        meta = ", ".join(f"{k}: {v}" for k, v in (("role", m.role), ("channel", m.channel),
                                                 ("topic", m.topic), ("phase", m.phase)) if v)
        return TreeNode(n.id, n.relation, n.parent, n.depth, n.at.isoformat(), m.author, meta,
                        labels.get(n.id), n.id in gold, _spans(m.text, kept.get(n.id)),
                        [node(forest.nodes[c]) for c in n.children])

    return ForestView([node(forest.nodes[r]) for r in forest.roots], list(built.trimmed),
                      [_repair(r) for r in built.repairs], [str(f) for f in built.failures],
                      built.compression)


def _repair(r: Repair) -> str:
    made = r.relation + (f" of {r.parent}" if r.parent else "")
    return f"{r.id}: {r.problem}; made {made}"


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


