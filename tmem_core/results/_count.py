"""A run's LLM tokens and cost: the one definition that the run summary line, the report and
the viewer share.

The calls store keeps every call ever written, attempts and repeats included: a memory that
several stage actors (or a later attempt) load records its original calls again, a question
redone after a crash records its calls again (cache hits), a failed call is retried under the
same identity. `counted_calls` reads that history once per call identity (`key`: stage |
question | request hash):

- **as if run**: the identity's latest successful row: `calls` (1), `prompt_tokens`,
  `completion_tokens`, `tokens`, `method_cost_usd` (priced as if run, cache hits and reused
  memories too), `cached`, `reused`, `llm_latency_s`; zeros for an identity that never
  succeeded. A memory counts once per run however many actors loaded it. Only calls made
  under the current dependencies count (`deps`, the hashes of what produced the stage record
  they belong to: per run, question and stage, those of its latest call, failed or not): a
  record redone after its backbone or prompt changed leaves the calls it replaced out, and
  so does one that failed under the changed dependencies;
- **spent now**: `cost_usd` summed over every row of the identity, failed attempts included
  (what reached an engine; cache hits and reused memories cost 0); `failed_attempts`.

Calls of stage `calibration` (the judges' controls) are never a method's or a question's
tokens: the totals keep them in their own columns (`calibration_*`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl
import pyarrow as pa

from tmem_core.results._layout import CALIBRATION_STAGE, MEMORY_QUALITY_STAGE

HISTORY_COLUMNS = ("run_id", "key", "stage", "qid", "ok", "written_at", "prompt_tokens",
                   "completion_tokens", "cached", "reused", "cost_usd", "method_cost_usd",
                   "latency_s", "deps")
"""The columns of the calls store that the count reads."""
AS_IF_RUN = ("calls", "cached", "reused", "prompt_tokens", "completion_tokens", "tokens",
             "method_cost_usd", "llm_latency_s")
SPENT_NOW = ("cost_usd", "failed_attempts")
SUMMED = (*AS_IF_RUN, *SPENT_NOW)


def counted_calls(history: pl.DataFrame) -> pl.DataFrame:
    """One row per run and call identity (`run_id, key, stage, qid`) with what it counts
    (`SUMMED`), from every call row a run wrote (`HISTORY_COLUMNS`)."""
    latest = (_current(history).sort("written_at", descending=True)
              .unique(["run_id", "key"], keep="first")
              .select("run_id", "key", pl.lit(1, pl.Int64).alias("calls"),
                      pl.col("cached").cast(pl.Int64),
                      pl.col("reused").fill_null(False).cast(pl.Int64), "prompt_tokens",
                      "completion_tokens",
                      (pl.col("prompt_tokens") + pl.col("completion_tokens")).alias("tokens"),
                      pl.col("method_cost_usd").fill_null(0.0),
                      pl.col("latency_s").alias("llm_latency_s")))
    spent = history.group_by("run_id", "key").agg(
        pl.col("stage").first(), pl.col("qid").first(), pl.col("cost_usd").sum(),
        (~pl.col("ok")).sum().cast(pl.Int64).alias("failed_attempts"))
    counted = spent.join(latest, on=["run_id", "key"], how="left")
    return counted.with_columns(pl.col(list(AS_IF_RUN)).fill_null(0)).sort("run_id", "key")


def _current(history: pl.DataFrame) -> pl.DataFrame:
    """The successful calls made under their question and stage's latest dependencies (those
    of its newest call, failed or not: a call that failed under changed dependencies leaves
    the calls of the record it replaced out, as `in_force` leaves their record)."""
    group = ["run_id", "qid", "stage"]
    current = (history.sort("written_at").group_by(group)
               .agg(pl.col("deps").last().alias("current_deps")))
    return (history.filter("ok").join(current, on=group, how="left", nulls_equal=True)
            .filter(pl.col("deps").eq_missing(pl.col("current_deps"))).drop("current_deps"))


def call_totals(counted: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """`counted_calls` summed per `by` (e.g. run, or run and question): the method's calls in
    `SUMMED`, the judges' controls apart in `calibration_tokens`, `calibration_cost_usd`
    (spent now) and `calibration_method_cost_usd` (as if run); the memory-quality judge's
    calls are in neither (the tokens table has them under their stage)."""
    method = ~pl.col("stage").is_in([CALIBRATION_STAGE, MEMORY_QUALITY_STAGE])
    controls = pl.col("stage") == CALIBRATION_STAGE
    return counted.group_by(*by).agg(
        *[pl.col(c).filter(method).sum() for c in SUMMED],
        pl.col("tokens").filter(controls).sum().alias("calibration_tokens"),
        pl.col("cost_usd").filter(controls).sum().alias("calibration_cost_usd"),
        pl.col("method_cost_usd").filter(controls).sum().alias("calibration_method_cost_usd"))


@dataclass(frozen=True)
class RunCount:
    """One run's totals (see the module docstring)."""

    tokens: int = 0  # the method's, as if run
    cost_usd: float = 0.0  # the method's, spent now
    method_cost_usd: float = 0.0  # the method's, as if run
    calibration_tokens: int = 0
    calibration_cost_usd: float = 0.0  # spent now


def run_count(calls: pa.Table) -> RunCount:
    """The totals of one run's calls store history (`StageStore.read_all`)."""
    history = pl.DataFrame(calls.select(list(HISTORY_COLUMNS)))
    rows = call_totals(counted_calls(history), ["run_id"]).to_dicts()
    if not rows:
        return RunCount()
    row = rows[0]
    return RunCount(row["tokens"], row["cost_usd"], row["method_cost_usd"],
                    row["calibration_tokens"], row["calibration_cost_usd"])
