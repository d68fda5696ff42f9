"""Linearisation (paper §4.4): trees by root time, nodes in chronological pre-order, each line
`<indent>- <RELATION> (depth d, parent [id]) <render_message>`. Trees are separated by a blank
line. A flat forest (the no-structuring ablation) renders as plain `render_message` lines in
selection rank order."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from tmem_core.methods._context import render_message
from tmem_core.methods.tmem._forest import Forest, Node
from tmem_core.schema import Message


def message_line(message: Message, text: str | None = None) -> str:
    """A message as every T-MEM step shows it: `render_message`, its text replaced by `text`
    when given (the forest's compressed text)."""
    return render_message(message if text is None else dataclasses.replace(message, text=text))


INDENT = "  "


@dataclass(frozen=True)
class Linearised:
    text: str
    order: tuple[str, ...]  # node ids as they appear


def node_line(node: Node, message: Message, text: str, flat: bool = False) -> str:
    """One node: structure (unless flat), then id, time, author and metadata, retained text."""
    body = message_line(message, text)
    if flat:
        return body
    parent = f"parent [{node.parent}]" if node.parent else "no parent"
    return f"{INDENT * node.depth}- {node.relation} (depth {node.depth}, {parent}) {body}"


def linearise(forest: Forest, messages: Mapping[str, Message], texts: Mapping[str, str],
              flat: bool = False) -> Linearised:
    """The forest as text; `texts` holds each node's retained text."""
    lines: list[str] = []
    order = forest.preorder()
    for node in order:
        if node.parent is None and lines and not flat:
            lines.append("")
        lines.append(node_line(node, messages[node.id], texts[node.id], flat))
    return Linearised("\n".join(lines), tuple(n.id for n in order))
