"""One question's T2Mem loop as readable text (for `jobs.inspect`)."""

from __future__ import annotations

import textwrap
from typing import Any

from tmem_core.methods._context import Context

_WIDTH = 100


def render_trace(context: Context) -> str:
    """The initial retrieval, each step (action, arguments, repairs, memory update, tokens,
    latency), why the loop stopped, and the memory the answer stage receives."""
    trace = context.trace
    config = trace["config"]
    meta = trace["metadata"]
    flags = ([] if meta["complete"] else ["incomplete"]) + (
        [f"{meta['dropped']} dropped as invalid"] if meta.get("dropped") else [])
    lines = [
        f"{context.method} {context.qid}: {trace['question']}",
        f"  config: units={config['units']} read_raw={config['read_raw']} "
        f"rollout={config['rollout']} k={config['top_k']}/{config['search_top_k']} "
        f"Tmax={config['max_steps']} episodes={trace['episode_mode']}",
        f"  memory of {meta['episodes']} episodes, {meta['entries']} entries "
        f"(extracted by {', '.join([meta['backbone'], *flags])})",
        f"initial SearchMeta (k={config['top_k']}):",
        *_entries(trace["initial"]),
    ]
    for step in trace["steps"]:
        lines += _step(step)
    usage = trace["usage"]
    record = trace.get("step_record", {})
    lines += [
        f"stop: {trace['stop']} after {usage['calls']} step(s)"
        f"{' (answer forced at Tmax)' if record.get('forced') else ''}; "
        f"{usage['prompt_tokens']}+{usage['completion_tokens']} tokens, "
        f"{usage['latency_s']:.1f} s",
        f"memory for the answer ({context.tokens} tokens"
        f"{', fallback: the entries shown' if trace['fallback'] else ''}):",
        *_indent(context.text or "(empty)", "  "),
        f"context ids: {len(context.ids)} messages of episodes "
        f"{', '.join(_episodes(trace)) or '-'}",
    ]
    return "\n".join(lines)


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


def _entries(entries: list[dict[str, str]]) -> list[str]:
    return [line for e in entries
            for line in _indent(f"({e['id']}) [{e['episode']}] {e['kind']}: {e['text']}", "  ")]


def _episodes(trace: dict[str, Any]) -> list[str]:
    shown = [e["episode"] for e in trace["initial"]]
    for step in trace["steps"]:
        shown += [e["episode"] for e in step.get("found", [])]
    return list(dict.fromkeys(shown + trace["read"]))


def _indent(text: str, prefix: str) -> list[str]:
    """`text` wrapped line by line, the first line after `prefix`, the rest aligned with it."""
    lines: list[str] = []
    for line in text.splitlines() or [""]:
        first = prefix if not lines else " " * len(prefix)
        lines += textwrap.wrap(line, _WIDTH, initial_indent=first,
                               subsequent_indent=" " * len(prefix)) or [first.rstrip()]
    return lines
