"""The forest within the token budget: admission of the selected messages before structuring
(best first, by the estimated cost of what compression must keep of them), then compression
and linearisation, tightened and trimmed (lowest-ranked leaf first) until the text fits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tmem_core.llm._tokens import TokenCounter
from tmem_core.methods.tmem._compress import Compression, Item, QueryTerms, compress, mandatory_text
from tmem_core.methods.tmem._forest import Forest, Node
from tmem_core.methods.tmem._linearise import Linearised, linearise, node_line
from tmem_core.schema import Message, Question

ADMIT_SLACK = 2  # tokens per admitted node for line breaks and deeper indentation
MAX_CORRECTIONS = 3  # re-compressions with a tighter target when the estimate was short


@dataclass(frozen=True)
class Rendering:
    """How the forest becomes text: compressed or whole, as a forest or a flat list."""

    compression: bool
    flat: bool


@dataclass(frozen=True)
class Rendered:
    forest: Forest
    linearised: Linearised
    tokens: int
    compression: Compression | None
    trimmed: tuple[str, ...]


def admit(ranked: Sequence[Message], question: Question, budget: int, count: TokenCounter,
          how: Rendering) -> list[Message]:
    """Best first, each message whose estimated cost as a forest line still fits (others are
    skipped); a flat list admits the same messages as the forest, in rank order."""
    terms = QueryTerms.of(question)
    admitted, used = [], 0
    for m in ranked:
        text = mandatory_text(m.text, terms, count) if how.compression else m.text
        probe = Node(m.msg_id, m.msg_id, "EXPAND", 1, m.timestamp, m.seq)
        cost = count(node_line(probe, m, text)) + ADMIT_SLACK
        if used + cost <= budget:
            admitted.append(m)
            used += cost
    return admitted


def fit(forest: Forest, messages: Mapping[str, Message], rank: Mapping[str, int],
        question: Question, budget: int, count: TokenCounter, how: Rendering) -> Rendered:
    """Compress and linearise; tighten the target, then trim leaves, until within budget."""
    terms = QueryTerms.of(question)
    trimmed: list[str] = []
    target, corrections = budget, 0
    while True:
        texts, compression = _texts(forest, messages, terms, target, count, how)
        out = linearise(forest, messages, texts, flat=how.flat)
        tokens = count(out.text)
        if tokens <= budget or not forest.nodes:
            return Rendered(forest, out, tokens, compression, tuple(trimmed))
        if (compression is not None and not compression.over_budget
                and corrections < MAX_CORRECTIONS):
            target, corrections = target - (tokens - budget), corrections + 1
            continue
        leaf = max(forest.leaves(), key=rank.__getitem__)
        forest = forest.without(leaf)
        trimmed.append(leaf)
        target, corrections = budget, 0


def _texts(forest: Forest, messages: Mapping[str, Message], terms: QueryTerms, target: int,
           count: TokenCounter, how: Rendering) -> tuple[dict[str, str], Compression | None]:
    if not how.compression:
        return {i: messages[i].text for i in forest.nodes}, None
    items = [Item(n.id, messages[n.id].text, messages[n.parent].text if n.parent else "",
                  count(node_line(n, messages[n.id], "", how.flat)) + 1)
             for n in forest.nodes.values()]
    compression = compress(items, target, terms, count)
    return compression.texts, compression
