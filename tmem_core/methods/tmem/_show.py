"""A readable account of one T-MEM question: discovery, labels, the forest, the context."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from tmem_core.methods._base import Evidence
from tmem_core.methods._context import Context
from tmem_core.methods.tmem._compress import Figures
from tmem_core.methods.tmem._config import DiscoveryConfig
from tmem_core.methods.tmem._discovery import Interval
from tmem_core.methods.tmem._forest import Forest, Node
from tmem_core.methods.tmem._payload import Built, Found, Scored
from tmem_core.schema import Message

SNIPPET = 90


def describe(evidence: Evidence, context: Context, messages: Mapping[str, Message]) -> str:
    """Anchors, intervals, candidates with labels, the forest as a tree, the context."""
    found, built = _typed(evidence.payload, Found), _typed(context.record, Built)
    labels = built.labels
    return "\n".join([
        f"== discovery (query: {found.query!r})",
        f"anchors ({len(found.anchors)}): {' '.join(found.anchors)}",
        *(_intervals(found.intervals, found.config, messages) if found.config else []),
        f"-- candidates ({len(found.candidates)}, most relevant first)",
        *(_candidate(c, labels.get(c.id, "-"), messages) for c in found.candidates),
        *_selection(built),
        f"== forest ({len(built.forest)} nodes, {len(built.repairs)} repaired edges, trimmed "
        f"{list(built.trimmed) or 'none'})",
        *tree(built.the_forest(), messages),
        f"== context ({context.kind}, {context.tokens} tokens; compression "
        f"{_figures(built.compression)})",
        context.text,
        "== LLM " + "; ".join(f"{step}: {s.calls} calls ({s.cached} cached), "
                              f"{s.prompt_tokens} + {s.completion_tokens} tokens, "
                              f"{s.wall_s:.1f} s" for step, s in built.llm.items()),
    ])


def tree(forest: Forest, messages: Mapping[str, Message]) -> list[str]:
    """The forest drawn with box characters, one line per node."""
    lines: list[str] = []

    def draw(node: Node, prefix: str, last: bool) -> None:
        branch = "" if node.parent is None else ("└─ " if last else "├─ ")
        lines.append(f"{prefix}{branch}{node.relation} {node.id}  {_snippet(messages[node.id])}")
        inner = prefix + ("" if node.parent is None else ("   " if last else "│  "))
        for k, child in enumerate(node.children):
            draw(forest.nodes[child], inner, k == len(node.children) - 1)

    for root in forest.roots:
        draw(forest.nodes[root], "", True)
    return lines


def _intervals(intervals: Sequence[Interval], config: DiscoveryConfig,
               messages: Mapping[str, Message]) -> list[str]:
    """One line per cluster: its seeds, when, its rate against its group's background rate
    and the threshold between that and the episode rate, and the verdict."""
    kept = sum(iv.kept for iv in intervals)
    return [f"-- intervals ({kept} kept of {len(intervals)}): clusters split at gaps over "
            f"{config.max_gap:g} u; rate = seeds per unit of the interval (at least "
            f"{config.min_duration:g} u; u = the conversation's median interval between "
            f"messages); kept when above a threshold {config.threshold_position:g} of the way "
            f"from the group's background rate to the episode rate",
            *(f"  {'kept' if iv.kept else 'drop'} {iv.group}: "
              f"{_count(len(iv.anchors), 'seed')} "
              f"{_when(messages[iv.anchors[0]], messages[iv.anchors[-1]])} "
              f"({iv.span:.1f} u), {_test(iv)}, padded to {_count(iv.size, 'message')}"
              for iv in intervals)]


def _test(interval: Interval) -> str:
    """`rate 0.300/u > threshold 0.102/u (background 0.003/u, episode 0.200/u)`."""
    rates = f"background {interval.background:.3f}/u, episode {interval.episode:.3f}/u"
    if interval.threshold is None:
        return f"rate {interval.rate:.3f}/u, no threshold ({rates}: not separated)"
    sign = ">" if interval.kept else "<="
    return f"rate {interval.rate:.3f}/u {sign} threshold {interval.threshold:.3f}/u ({rates})"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _when(first: Message, last: Message) -> str:
    start, end = first.timestamp, last.timestamp
    if start == end:
        return f"at {start:%Y-%m-%d %H:%M}"
    end_format = "%H:%M" if start.date() == end.date() else "%Y-%m-%d %H:%M"
    return f"{start:%Y-%m-%d %H:%M} to {end:{end_format}}"


def _candidate(c: Scored, label: str, messages: Mapping[str, Message]) -> str:
    rank = "-" if c.anchor_rank is None else c.anchor_rank
    return (f"  {label:8} {c.id}  rel {c.relevance:.2f}  sup {c.support:.2f}  "
            f"anchor {rank}  {_snippet(messages[c.id])}")


def _selection(built: Built) -> list[str]:
    labels = built.labels.values()
    counts = {k: sum(v == k for v in labels) for k in ("KEY", "SUPPORT", "FALLBACK")}
    return [f"== selection ({built.selection}): "
            + ", ".join(f"{n} {k}" for k, n in counts.items())
            + f", {len(built.failures)} failed batches",
            *(f"  failed: {f['batch']}: {f['error']}" for f in built.failures)]


def _figures(compression: Figures | None) -> str:
    if compression is None:
        return "off"
    return (f"{compression.dropped} of {compression.spans} spans dropped, about "
            f"{compression.tokens} tokens{', over budget' if compression.over_budget else ''}")


_T = TypeVar("_T")


def _typed(value: object, kind: type[_T]) -> _T:
    if not isinstance(value, kind):
        raise TypeError(f"expected T-MEM's {kind.__name__}, got {type(value).__name__}")
    return value


def _snippet(message: Message) -> str:
    text = " ".join(message.text.split())
    return text if len(text) <= SNIPPET else text[:SNIPPET - 1] + "…"
