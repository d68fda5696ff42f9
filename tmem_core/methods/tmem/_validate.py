"""Validators of T-MEM contexts for the pipeline: pure functions returning problems.

Gold leakage into prompts is checked by `tmem_core.evaluation.gold_leaks`.
"""

from __future__ import annotations

from collections.abc import Sequence

from tmem_core.llm._tokens import TokenCounter
from tmem_core.methods._context import Context
from tmem_core.methods.tmem._forest import EDGE_RELATIONS, Forest
from tmem_core.methods.tmem._payload import Built

_UNTYPED = ("RELATED",)


def forest_problems(forest: Forest) -> list[str]:
    """Single parent, no cycle, parents earlier, consistent depth and children, valid relations."""
    problems = []
    listed: dict[str, list[str]] = {}
    for node in forest.nodes.values():
        for child in node.children:
            listed.setdefault(child, []).append(node.id)
    for node in forest.nodes.values():
        parent = forest.nodes.get(node.parent) if node.parent is not None else None
        expected = [node.parent] if node.parent is not None else []
        if listed.get(node.id, []) != expected:
            problems.append(f"{node.id}: listed as a child of {listed.get(node.id, [])}, "
                            f"parent is {node.parent}")
        if node.parent is None:
            if node.relation != "ROOT" or node.depth != 0:
                problems.append(f"{node.id}: a root with relation {node.relation}, depth "
                                f"{node.depth}")
            continue
        if parent is None:
            problems.append(f"{node.id}: parent {node.parent} is not in the forest")
            continue
        if node.relation not in (*EDGE_RELATIONS, *_UNTYPED):
            problems.append(f"{node.id}: invalid relation {node.relation}")
        if parent.order >= node.order:
            problems.append(f"{node.id}: parent {parent.id} is not earlier")
        if node.depth != parent.depth + 1:
            problems.append(f"{node.id}: depth {node.depth} under a parent of depth "
                            f"{parent.depth}")
    relations = {n.relation for n in forest.nodes.values()}
    if relations & set(EDGE_RELATIONS) and "RELATED" in relations:
        problems.append("typed and untyped relations mixed")
    problems += [f"{i}: on a cycle" for i in _cyclic(forest)]
    if set(forest.roots) != {i for i, n in forest.nodes.items() if n.parent is None}:
        problems.append("roots do not match the nodes without a parent")
    return problems


def order_problems(forest: Forest, order: Sequence[str]) -> list[str]:
    """Whether `order` lists trees by root time, each in chronological pre-order."""
    expected = [n.id for n in forest.preorder()]
    if list(order) == expected:
        return []
    at = next((k for k, (a, b) in enumerate(zip(order, expected, strict=False)) if a != b),
              min(len(order), len(expected)))
    return [f"linearised order differs from chronological pre-order at position {at}"]


def budget_problems(context: Context, budget: int,
                    count_tokens: TokenCounter | None = None) -> list[str]:
    """The context is within budget; with a counter, its recorded token count is exact."""
    problems = []
    if context.tokens > budget:
        problems.append(f"{context.qid}: {context.tokens} tokens over a budget of "
                        f"{budget}")
    if count_tokens is not None and count_tokens(context.text) != context.tokens:
        problems.append(f"{context.qid}: records {context.tokens} tokens, text has "
                        f"{count_tokens(context.text)}")
    return problems


def forest_structure(built: Built, ids: Sequence[str]) -> list[str]:
    """A T-MEM context's forest (parents, roots, time order) and the ids it presents in the
    forest's linearised order, from its record (a construct stage record has both)."""
    forest = built.the_forest()
    return [*forest_problems(forest), *order_problems(forest, ids)]


def context_problems(context: Context, budget: int,
                     count_tokens: TokenCounter | None = None) -> list[str]:
    """Every check of a T-MEM context."""
    if not isinstance(context.record, Built):
        return [f"{context.qid}: not a T-MEM context"]
    return [*forest_structure(context.record, context.ids),
            *budget_problems(context, budget, count_tokens)]


def _cyclic(forest: Forest) -> list[str]:
    """Nodes whose parent chain never reaches a root."""
    out = []
    for start in forest.nodes:
        seen = {start}
        node = forest.nodes[start]
        while node.parent is not None and node.parent in forest.nodes:
            if node.parent in seen:
                out.append(start)
                break
            seen.add(node.parent)
            node = forest.nodes[node.parent]
    return out
