"""One question's T2Mem loop as readable text (for `jobs.inspect`)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from tmem_core.methods._context import Context
from tmem_core.methods._record import Usage
from tmem_core.methods.t2mem._record import LoopRecord

_WIDTH = 100


def render_trace(context: Context) -> str:
    """The initial retrieval, each step (action, arguments, repairs, memory update, tokens,
    latency), why the loop stopped, and the memory the answer stage receives (from the
    context's record)."""
    record = context.record
    if not isinstance(record, LoopRecord):
        raise TypeError(f"{context.qid}: not a T2Mem record ({type(record).__name__})")
    lines = [f"{context.method} {context.qid}: {record.question}",
             *_setting(record),
             f"initial SearchMeta (k={_k(record)}):",
             *_entries(record.initial)]
    for step in record.steps:
        lines += _step(step)
    usage = record.usage or Usage.of(record.steps)
    forced = record.step_record is not None and record.step_record.forced
    lines += [
        f"stop: {record.stop} after {usage.calls} step(s)"
        f"{' (answer forced at Tmax)' if forced else ''}; "
        f"{usage.prompt_tokens}+{usage.completion_tokens} tokens, {usage.latency_s:.1f} s",
        f"memory for the answer ({context.tokens} tokens"
        f"{', fallback: the entries shown' if record.fallback else ''}):",
        *_indent(context.text or "(empty)", "  "),
        f"context ids: {len(context.ids)} messages of episodes "
        f"{', '.join(_episodes(record)) or '-'}",
    ]
    return "\n".join(lines)


def _k(record: LoopRecord) -> int:
    return record.top_k or len(record.initial)


def _setting(record: LoopRecord) -> list[str]:
    """The configuration and the memory read (records that kept them)."""
    config, meta = record.config, record.metadata
    lines = [] if config is None else [
        f"  config: units={config.units} read_raw={config.read_raw} "
        f"rollout={config.rollout} k={_k(record)}/{config.search_top_k} "
        f"Tmax={config.max_steps} episodes={record.episode_mode}"]
    if meta is not None:
        flags = ([] if meta.complete else ["incomplete"]) + (
            [f"{meta.dropped} dropped as invalid"] if meta.dropped else [])
        lines.append(f"  memory of {meta.episodes} episodes, {meta.entries} entries "
                     f"(extracted by {', '.join([meta.backbone, *flags])})")
    return lines


def _step(step: dict[str, Any]) -> list[str]:
    head = (f"step {step['step']} [{', '.join(step['allowed'])}] "
            f"{step['prompt_tokens']}+{step['completion_tokens']} tokens, "
            f"{step['latency_s']:.1f} s{' (cached)' if step['cached'] else ''}")
    if "action" not in step:
        return [head, f"  malformed: {step['error'] or 'no action'}"]
    lines = [head, f"  action: {step['action']}({step['argument']!r})"]
    if step.get("repair"):
        lines.append(f"  repaired: {step['repair']}")
    lines += _indent(step["reasoning"], "  reasoning: ")
    lines += _indent(step["memory"] or "(none)", "  memory +: ")
    if "found" in step:
        lines += _entries(step["found"]) or ["  found nothing unseen"]
    if "read" in step:
        read = step["read"]
        page = f" page {read['page']}/{read['pages']}" if read.get("pages", 1) > 1 else ""
        lines.append(f"  read {read['episode']}{page} ({read['source']}): {read['messages']} of "
                     f"{read['of']} messages, {read['tokens']} tokens")
    return lines


def _entries(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    return [line for e in entries
            for line in _indent(f"({e['id']}) [{e['episode']}] {e['kind']}: {e['text']}", "  ")]


def _episodes(record: LoopRecord) -> list[str]:
    shown = [e["episode"] for e in record.initial]
    for step in record.steps:
        shown += [e["episode"] for e in step.get("found", [])]
    return list(dict.fromkeys(shown + list(record.read)))


def _indent(text: str, prefix: str) -> list[str]:
    """`text` wrapped line by line, the first line after `prefix`, the rest aligned with it."""
    lines: list[str] = []
    for line in text.splitlines() or [""]:
        first = prefix if not lines else " " * len(prefix)
        lines += textwrap.wrap(line, _WIDTH, initial_indent=first,
                               subsequent_indent=" " * len(prefix)) or [first.rstrip()]
    return lines
