"""Time of the harness's leak scan (`ids_in`) per prompt, against one pattern tried at every
position of the prompt (the scan before it), on real prompts' text and forbidden ids.

    python perf/bench_leak_scan.py [--locomo PATH] [--synthetic 120000] [--prompts 200]

Every LLM call of a guarded stage is scanned for the gold-derived ids of its conversation
(`tmem_core.evaluation.gold_strings`: 850 per conversation of the 120,000-message synthetic
set): a T2Mem memory build scans ~2,000 prompts, a T-MEM question ~10. Prompts here are
windows of a conversation's messages as a prompt renders them, with ids (`render_message`),
of about 4,000 characters, each also with one id planted as a whole token and another inside a
longer word. Both scans must find the same ids (asserted); the ratio is the baseline's time
over the scan's.
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tmem_core.benchmarks import LoadRequest, build
from tmem_core.evaluation import gold_strings, ids_in
from tmem_core.methods._context import render_message
from tmem_core.schema import gold_from_table, messages_from_table, questions_from_table

Scan = Callable[[str, tuple[str, ...]], tuple[str, ...]]
Cases = Sequence[tuple[str, tuple[str, ...]]]  # (prompt text, its forbidden ids)


def every_position(text: str, ids: tuple[str, ...]) -> tuple[str, ...]:
    """The baseline: any id as a whole token, tried at every position of `text`."""
    if not ids:
        return ()
    alternatives = "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))
    pattern = _compiled.setdefault(ids, re.compile(rf"(?=(?<!\w)({alternatives})(?!\w))"))
    return tuple(sorted({m.group(1) for m in pattern.finditer(text)}))


_compiled: dict[tuple[str, ...], re.Pattern[str]] = {}


def prompts(name: str, request: LoadRequest, count: int
            ) -> list[tuple[str, tuple[str, ...]]]:
    """(prompt text, its conversation's forbidden ids), windows of ~4,000 characters of one
    conversation's messages."""
    prepared = build(name, request)
    messages = messages_from_table(prepared.messages)
    gold = gold_from_table(prepared.questions)
    evidence = {e for g in gold.values() for e in g.evidence_ids}
    forbidden = gold_strings({m.msg_id: m for m in messages if m.msg_id in evidence},
                             questions_from_table(prepared.questions), gold)
    windows: list[tuple[str, tuple[str, ...]]] = []
    lines: list[str] = []
    size = 0  # characters of `lines`
    for message, after in itertools.zip_longest(messages, messages[1:]):
        lines.append(render_message(message))
        size += len(lines[-1])
        if size >= 4000 or after is None or after.conv_id != message.conv_id:
            windows.append(("\n".join(lines), forbidden.get(message.conv_id, ())))
            lines, size = [], 0
        if len(windows) == count:
            break
    return windows + [_planted(text, ids, i) for i, (text, ids) in enumerate(windows) if ids]


def _planted(text: str, ids: tuple[str, ...], i: int) -> tuple[str, tuple[str, ...]]:
    """`text` with one of `ids` in it as a whole token and another inside a longer word."""
    whole, inside = ids[i % len(ids)], ids[(7 * i + 3) % len(ids)]
    middle = len(text) // 2
    return f"{text[:middle]} ({whole}) x{inside}y {text[middle:]}", ids


def timed(scan: Scan, cases: Cases) -> tuple[float, list[tuple[str, ...]]]:
    """Median of 5 passes, microseconds per prompt (the first pass compiles, untimed)."""
    found = [scan(text, ids) for text, ids in cases]
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for text, ids in cases:
            scan(text, ids)
        runs.append((time.perf_counter() - start) / len(cases) * 1e6)
    return statistics.median(runs), found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--locomo", type=Path,
                        default=Path("../shared/datasets/locomo/locomo10_dev.json"))
    parser.add_argument("--synthetic", type=int, default=120_000, help="messages")
    parser.add_argument("--prompts", type=int, default=200)
    args = parser.parse_args()
    sets = {"locomo": ("locomo", LoadRequest(source=args.locomo)),
            "synthetic": ("synthetic", LoadRequest(size=args.synthetic))}
    for label, (name, request) in sets.items():
        cases = prompts(name, request, args.prompts)
        ids = statistics.mean(len(i) for _, i in cases)
        base, expected = timed(every_position, cases)
        scan, found = timed(ids_in, cases)
        assert found == expected, f"{label}: the scans disagree"
        hits = sum(bool(f) for f in found)
        print(f"{label}: {len(cases)} prompts of ~4,000 characters, {ids:.0f} forbidden ids "
              f"each, {hits} holding one: every position {base:.1f} us, ids_in {scan:.1f} us "
              f"per prompt, {base / scan:.1f}x", flush=True)


if __name__ == "__main__":
    main()
