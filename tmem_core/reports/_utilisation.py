"""How busy each engine replica was, from the calls table's answer times and latencies.

A call occupied its replica from `finished_at - latency_s` to `finished_at`. A backbone is
active while any of its replicas holds a call; a replica's busy fraction is the time it held
at least one call over the time its backbone was active, so a sweep resumed a day later is not
counted idle in between, and a replica that idles while the others have work shows below 1.
Cache hits and reused memories reached no replica and are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

UTILISATION_SCHEMA = {"backbone": pl.String, "replica": pl.Int64, "calls": pl.UInt32,
                      "busy_s": pl.Float64, "active_s": pl.Float64,
                      "busy_fraction": pl.Float64, "mean_in_flight": pl.Float64,
                      "max_in_flight": pl.Int64}


def engine_calls(calls: pl.DataFrame) -> pl.DataFrame:
    """The calls that an engine replica answered, with when each was sent and answered."""
    needed = {"backbone", "replica", "finished_at", "latency_s"}
    if not needed <= set(calls.columns):
        return pl.DataFrame(schema={"backbone": pl.String, "replica": pl.Int64,
                                    "start": pl.Float64, "end": pl.Float64})
    return (calls.filter(pl.col("replica").is_not_null() & pl.col("finished_at").is_not_null())
            .select("backbone", "replica",
                    (pl.col("finished_at") - pl.col("latency_s")).alias("start"),
                    pl.col("finished_at").alias("end")))


def covered(starts: Sequence[float], ends: Sequence[float]) -> float:
    """Seconds covered by the union of the intervals [start, end]."""
    total, reach = 0.0, -np.inf
    for start, end in sorted(zip(starts, ends, strict=True)):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def in_flight(starts: Sequence[float], ends: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Requests in flight over time: the times at which the count changes, and the count
    from each of those times on."""
    times = np.concatenate([np.asarray(starts, float), np.asarray(ends, float)])
    steps = np.concatenate([np.ones(len(starts)), -np.ones(len(ends))])
    order = np.lexsort((steps, times))  # an answer before a send at the same instant
    return times[order], np.cumsum(steps[order]).astype(int)


def utilisation(calls: pl.DataFrame) -> pl.DataFrame:
    """One row per backbone and replica (`UTILISATION_SCHEMA`)."""
    engine = engine_calls(calls)
    rows = []
    for (backbone,), own in engine.group_by("backbone", maintain_order=True):
        active = covered(own["start"].to_list(), own["end"].to_list())
        for (replica,), one in own.sort("replica").group_by("replica", maintain_order=True):
            starts, ends = one["start"].to_list(), one["end"].to_list()
            busy = covered(starts, ends)
            _, counts = in_flight(starts, ends)
            rows.append({"backbone": backbone, "replica": replica, "calls": one.height,
                         "busy_s": busy, "active_s": active,
                         "busy_fraction": busy / active if active > 0 else None,
                         "mean_in_flight": (sum(ends) - sum(starts)) / active
                         if active > 0 else None,
                         "max_in_flight": int(counts.max()) if counts.size else 0})
    return pl.DataFrame(rows, schema=UTILISATION_SCHEMA).sort("backbone", "replica")
