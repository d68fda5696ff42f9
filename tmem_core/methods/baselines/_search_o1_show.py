"""How `jobs.inspect` prints a Search-o1 context: each call, why the sequence stopped, the
prediction and the context the answer stage receives."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

from tmem_core.methods._base import Evidence
from tmem_core.methods._context import STEP_RECORD, Context
from tmem_core.schema import Message

_WIDTH = 100


def show_trace(_evidence: Evidence, context: Context, _messages: Mapping[str, Message]) -> str:
    """Each call (its query, documents, continuation or information, tokens, latency), why
    the sequence stopped, and the context the answer stage receives."""
    trace = context.trace
    config = trace["config"]
    record = trace[STEP_RECORD]
    lines = [f"{context.method} {context.qid}: {trace['question']}",
             f"  config: top_k={config['top_k']} search_top_k={config['search_top_k']} "
             f"max_steps={config['max_steps']} ranking={config['ranking']} "
             f"prediction={config['prediction']}"]
    for call in trace["steps"]:
        lines.append(f"step {call['step']} {call['call']}: {call['prompt_tokens']}+"
                     f"{call['completion_tokens']} tokens, {call['latency_s']:.1f} s"
                     f"{' (cached)' if call['cached'] else ''}")
        if "query" in call:
            lines.append(f"  query: {call['query']!r}")
        for key in ("error", "text", "information"):
            if call.get(key):
                lines += _wrapped(f"  {key}: {call[key]}")
        if "ids" in call:
            lines.append(f"  documents: {' '.join(call['ids']) or '-'}")
    usage = trace["usage"]
    lines += [f"stop: {trace['stop']} after {record['steps']} of {record['max_steps']} steps, "
              f"{record['searches']} searches; {usage['prompt_tokens']}+"
              f"{usage['completion_tokens']} tokens, {usage['latency_s']:.1f} s",
              f"final answer (last \\boxed{{}}): {trace['final_answer'] or '(none)'}",
              f"context ({context.kind}, {context.tokens} tokens, {len(context.ids)} messages):",
              *_wrapped(context.text or "(empty)", "  ")]
    return "\n".join(lines)


def _wrapped(text: str, prefix: str = "") -> list[str]:
    return [wrapped for line in text.splitlines() or [""]
            for wrapped in textwrap.wrap(line, _WIDTH, initial_indent=prefix,
                                         subsequent_indent=prefix + "  ") or [prefix]]
