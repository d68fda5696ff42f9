"""Degradation: what a method did instead of its described behaviour, counted per run.

Each method's construct record carries its degradation counters (a `Degradation` subclass,
written to the construct stage's `degradation` column): T-MEM: selection batches that fell
back, structuring batches that failed, edges repaired or dropped, nodes trimmed, messages
dropped before structuring; T2Mem: malformed steps, repaired actions, contexts from the
fallback entries, a degraded memory. Keys ending in
`_total` are the counts the others are out of, never a degradation themselves.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable

TOTAL_SUFFIX = "_total"


def degradation_counts(values: Iterable[str | None]) -> dict[str, int]:
    """Counters summed over a run's construct records (their `degradation` JSON)."""
    counts: Counter[str] = Counter()
    for value in values:
        counts.update(json.loads(value) if value else {})
    return dict(sorted(counts.items()))


def degraded(counts: dict[str, int]) -> dict[str, int]:
    """The non-zero degradation counters (totals left out)."""
    return {k: v for k, v in counts.items() if v and not k.endswith(TOTAL_SUFFIX)}
