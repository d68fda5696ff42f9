"""Failure attribution: why each question of a run was lost, from what the run recorded.

Each question gets one `cause`, the first that applies:

- `error` (an unresolved failure), `stale` (its only records of a stage were made under
  superseded dependencies) and `pending` (no judge record yet): never scored;
- `judging`: its judge records do not all agree (judges split 1/0 reach CORRECT_AT on
  average, but whether the answer is right is the judges' disagreement, not a fact);
- `correct`: its judges agree and its mean judge score is at least CORRECT_AT;
- `judging` too: one of its judges failed calibration;
- `degraded`: the method fell back or repaired something on it (its construct record's
  degradation counters);
- `unknown`: no gold evidence to look for (none annotated, or an abstention question);
- `untraceable`: its context cannot be traced to messages (see `evidence_basis`);
- `synthesis`: all its gold evidence was in the context (shown, or read by the method), and
  the answer was still wrong;
- `retrieval`: part or none of its gold evidence was in the context.
"""

from __future__ import annotations

import json

import polars as pl

from tmem_core.evaluation._basis import UNTRACEABLE
from tmem_core.reports import _stats as stats
from tmem_core.reports._intervals import INTERVAL_SCHEMA, interval_columns
from tmem_core.reports._metrics import ALL_GOLD
from tmem_core.results._accuracy import CORRECT_AT
from tmem_core.results._calibration import UNRELIABLE
from tmem_core.results._degradation import degraded
from tmem_core.results._sweep import SweepResults

ERROR, STALE, PENDING, CORRECT = "error", "stale", "pending", "correct"
JUDGING, DEGRADED, UNKNOWN = "judging", "degraded", "unknown"
RETRIEVAL, SYNTHESIS = "retrieval", "synthesis"
SCORED_CAUSES = (CORRECT, JUDGING, DEGRADED, UNKNOWN, UNTRACEABLE, RETRIEVAL, SYNTHESIS)
CAUSES = (*SCORED_CAUSES, ERROR, STALE, PENDING)
_ID = ["run_id", "qid"]


def with_causes(questions: pl.DataFrame, results: SweepResults,
                calibration: pl.DataFrame) -> pl.DataFrame:
    """The question table with `unreliable_judge`, `degraded` and `cause`."""
    unreliable = calibration.filter(pl.col("status") == UNRELIABLE).select(
        "run_id", "judge").unique()
    flagged = results.records["judge"].join(unreliable, on=["run_id", "judge"]).select(
        _ID).unique().with_columns(pl.lit(True).alias("unreliable_judge"))
    construct = results.records["construct"]
    worse = construct.select(_ID).with_columns(pl.Series(
        "degraded", [bool(degraded(json.loads(d))) if d else False
                     for d in construct.get_column("degradation").to_list()], pl.Boolean))
    table = questions.join(flagged, on=_ID, how="left", maintain_order="left").join(
        worse, on=_ID, how="left", maintain_order="left").with_columns(
        pl.col("unreliable_judge").fill_null(False), pl.col("degraded").fill_null(False),
        pl.col("judge_disagreement").fill_null(False))
    return table.with_columns(_cause().alias("cause"))


def _cause() -> pl.Expr:
    status = pl.col("status")
    return (pl.when(status == "failed").then(pl.lit(ERROR))
            .when(status == "stale").then(pl.lit(STALE))
            .when(status == "pending").then(pl.lit(PENDING))
            .when(pl.col("judge_disagreement")).then(pl.lit(JUDGING))
            .when(pl.col("score") >= CORRECT_AT).then(pl.lit(CORRECT))
            .when(pl.col("unreliable_judge")).then(pl.lit(JUDGING))
            .when("degraded").then(pl.lit(DEGRADED))
            .when(~pl.col("scorable")).then(pl.lit(UNKNOWN))
            .when(pl.col("evidence_basis") == UNTRACEABLE).then(pl.lit(UNTRACEABLE))
            .when(pl.col("gold_in_context") == ALL_GOLD).then(pl.lit(SYNTHESIS))
            .otherwise(pl.lit(RETRIEVAL)))


def attribution(questions: pl.DataFrame) -> pl.DataFrame:
    """Per run x cause: `questions`, and `share` of the run's judged questions with its 95%
    interval (a proportion over questions, by conversation where they share conversations;
    null for errors, stale and pending ones, which are not scored)."""
    rows = []
    for (run_id,), run in questions.group_by("run_id", maintain_order=True):
        judged = run.filter(pl.col("cause").is_in(SCORED_CAUSES))
        causes, conversations = judged.get_column("cause"), judged.get_column("conv_id").to_list()
        for cause in CAUSES:
            count = int((run.get_column("cause") == cause).sum())
            scored = cause in SCORED_CAUSES and judged.height > 0
            values = [[float(c == cause)] for c in causes] if scored else []
            rows.append({"run_id": run_id, "cause": cause, "questions": count,
                         "share": sum(v[0] for v in values) / judged.height if scored else None,
                         **interval_columns(stats.interval(values, conversations))})
    return pl.DataFrame(rows, schema={"run_id": pl.String, "cause": pl.String,
                                      "questions": pl.Int64, "share": pl.Float64,
                                      **INTERVAL_SCHEMA}).sort("run_id", maintain_order=True)


def gold_context(questions: pl.DataFrame) -> pl.DataFrame:
    """Per run, P(correct | all gold evidence in context) and P(correct | not all of it)
    over its judged questions with gold evidence and a traceable context: `in_context`,
    `basis` (shown, read, or shown+read), `questions`, `correct`, `p_correct` and its
    interval (Wilson's, by conversation where they share conversations)."""
    known = questions.filter((pl.col("status") == "judged") & pl.col("gold_in_context")
                             .is_not_null())
    groups = known.group_by("run_id", (pl.col("gold_in_context") == ALL_GOLD).alias(
        "in_context")).agg(
        pl.col("evidence_basis").unique().sort().str.join("+").alias("basis"),
        pl.len().alias("questions"), (pl.col("score") >= CORRECT_AT).sum().alias("correct"),
        pl.col("score").alias("scores"), pl.col("conv_id").alias("conversations"))
    rows = []
    for row in groups.sort("run_id", "in_context", descending=[False, True]).iter_rows(
            named=True):
        values = [[1.0 if s >= CORRECT_AT else 0.0] for s in row.pop("scores")]
        ci = stats.interval(values, row.pop("conversations"))
        rows.append({**row, "p_correct": row["correct"] / row["questions"],
                     **interval_columns(ci)})
    return pl.DataFrame(rows, schema={"run_id": pl.String, "in_context": pl.Boolean,
                                      "basis": pl.String, "questions": pl.Int64,
                                      "correct": pl.Int64, "p_correct": pl.Float64,
                                      **INTERVAL_SCHEMA})
