"""Derived figures of a sweep; results/README.md defines each one and its denominator."""

from __future__ import annotations

import json
from statistics import fmean

import polars as pl

from tmem_core.evaluation import evidence_recall
from tmem_core.evaluation._basis import UNTRACEABLE
from tmem_core.reports._intervals import in_group, per_question, score_intervals, with_intervals
from tmem_core.results import MEMORY_STAGE, RECORD_STAGES, SCOPE, with_overall
from tmem_core.results._accuracy import CORRECT_AT, score_accuracy
from tmem_core.results._count import SUMMED, call_totals
from tmem_core.results._degradation import degradation_counts
from tmem_core.results._layout import (
    CALIBRATION_STAGE,
    MEMORY_QUALITY,
    MEMORY_QUALITY_DIMENSIONS,
    MEMORY_QUALITY_STAGE,
    STORES,
)
from tmem_core.results._sweep import SweepResults

LLM_STAGES = (MEMORY_STAGE, *RECORD_STAGES)  # `calls.stage` values of a method's calls
COUNTED_STAGES = (*LLM_STAGES, CALIBRATION_STAGE, MEMORY_QUALITY_STAGE)  # and the judges'
# controls and memory-quality scores
MEMORY_PROCESSING, ANSWER_JUDGE = "memory processing", "answer+judge"
PHASE = {MEMORY_STAGE: MEMORY_PROCESSING, "retrieve": MEMORY_PROCESSING,
         "construct": MEMORY_PROCESSING, "answer": ANSWER_JUDGE, "judge": ANSWER_JUDGE,
         CALIBRATION_STAGE: CALIBRATION_STAGE, MEMORY_QUALITY_STAGE: MEMORY_QUALITY_STAGE}
ALL_GOLD, PART_GOLD, NO_GOLD = "all", "partial", "none"  # of the gold evidence in a context
_ID = ["run_id", "qid"]


def left_join(frame: pl.DataFrame, other: pl.DataFrame, on: str | list[str]) -> pl.DataFrame:
    """`frame` with `other`'s columns, in `frame`'s row order."""
    return frame.join(other, on=on, how="left", maintain_order="left")


def accuracy(results: SweepResults) -> pl.DataFrame:
    """Judge score per run x category x judge (see `score_accuracy`), with its interval."""
    scores = results.records["judge"].select(*_ID, "judge", "repeat", "score").join(
        results.questions.select(*_ID, "conv_id", "category", "separate"), on=_ID)
    return left_join(score_accuracy(scores), score_intervals(scores), list(SCOPE))


def question_table(results: SweepResults) -> pl.DataFrame:
    """One row per run x question: outcome, first unresolved error, first stage whose record
    was made under superseded dependencies, scores, recall, tokens. `status`: `failed`,
    `judged` (a judge record in force), `stale` (none, but one under superseded
    dependencies: never scored), else `pending`."""
    judge = results.records["judge"].group_by(_ID).agg(
        pl.len().alias("judged"), pl.col("score").mean(), pl.col("f1").drop_nulls().first(),
        pl.col("exact_match").drop_nulls().first().cast(pl.Float64),
        (pl.col("score").drop_nulls().n_unique() > 1).alias("judge_disagreement"))
    context = results.records["construct"].select(*_ID, pl.col("tokens").alias(
        "context_tokens"), "evidence_basis")
    calls = call_totals(results.calls, _ID).select(
        *_ID, pl.col("tokens").alias("llm_tokens"), "cost_usd", "calibration_tokens",
        "calibration_cost_usd")
    table = results.questions
    for facts in (_first_failure(results), _first_stale(results), judge, _recall(results),
                  _selection_recall(results), context, calls):
        table = left_join(table, facts, _ID)
    status = (pl.when(pl.col("failed_stage").is_not_null()).then(pl.lit("failed"))
              .when(pl.col("judged").is_not_null()).then(pl.lit("judged"))
              .when(pl.col("stale_stage").is_not_null()).then(pl.lit("stale"))
              .otherwise(pl.lit("pending")))
    return table.with_columns(status.alias("status"), pl.col("judged").fill_null(0),
                              pl.col("llm_tokens", "calibration_tokens").fill_null(0),
                              pl.col("cost_usd", "calibration_cost_usd").fill_null(0.0))


def _first_failure(results: SweepResults) -> pl.DataFrame:
    """Per question, the first stage (pipeline order) with an unresolved failure."""
    order = {stage: i for i, stage in enumerate(RECORD_STAGES)}
    failed = results.failures.filter(~pl.col("resolved") & pl.col("store").is_in(RECORD_STAGES))
    return (failed.sort("written_at", descending=True)
            .with_columns(pl.col("store").replace_strict(order).alias("order"))
            .sort("order", maintain_order=True).group_by(_ID, maintain_order=True).first()
            .select(*_ID, pl.col("store").alias("failed_stage"), "error"))


def _first_stale(results: SweepResults) -> pl.DataFrame:
    """Per question, the first stage (pipeline order) whose record is stale (`in_force`)."""
    order = {stage: i for i, stage in enumerate(RECORD_STAGES)}
    return (results.stale.filter(pl.col("store").is_in(RECORD_STAGES))
            .with_columns(pl.col("store").replace_strict(order).alias("order"))
            .sort("order").group_by(_ID, maintain_order=True).first()
            .select(*_ID, pl.col("store").alias("stale_stage")))


def _recall(results: SweepResults) -> pl.DataFrame:
    """Evidence recall of each scorable question's constructed context over the messages it
    is traced to (null where untraceable), and whether it holds all, part or none of the
    gold evidence (`gold_in_context`)."""
    rows = results.records["construct"].select(
        *_ID, pl.concat_list("context_ids", "linked_ids"), "evidence_basis").join(
        results.questions.filter("scorable").select(_ID), on=_ID)
    values = [None if basis == UNTRACEABLE else evidence_recall(ids, results.gold[run][qid])
              for run, qid, ids, basis in rows.iter_rows()]
    recall = pl.Series("recall", values, pl.Float64)
    held = (pl.when(recall == 1).then(pl.lit(ALL_GOLD)).when(recall == 0).then(pl.lit(NO_GOLD))
            .when(recall.is_not_null()).then(pl.lit(PART_GOLD)).otherwise(None))
    return rows.select(_ID).with_columns(recall, held.alias("gold_in_context"))


def _selection_recall(results: SweepResults) -> pl.DataFrame:
    """Evidence recall of each scorable question's evidence after its method's LLM selection
    (T-MEM's `selected_ids`, at the run's top_k anchors; null for methods without one)."""
    construct = results.records["construct"]
    if "selected_ids" not in construct.columns:
        return construct.select(_ID).with_columns(pl.lit(None, pl.Float64).alias(
            "selection_recall"))
    rows = construct.select(*_ID, "selected_ids").join(
        results.questions.filter("scorable").select(_ID), on=_ID)
    values = [None if ids is None else evidence_recall(ids, results.gold[run][qid])
              for run, qid, ids in rows.iter_rows()]
    return rows.select(_ID).with_columns(pl.Series("selection_recall", values, pl.Float64))


def f1(questions: pl.DataFrame) -> pl.DataFrame:
    """Mean LoCoMo F1 per run x category over questions with an F1 (LoCoMo only)."""
    return _mean_by_category(questions.filter(pl.col("f1").is_not_null()), "f1")


def degradation(results: SweepResults) -> pl.DataFrame:
    """Per run: its constructed questions and every degradation counter summed over them."""
    rows = []
    for (run_id,), group in results.records["construct"].group_by("run_id",
                                                                  maintain_order=True):
        rows.append({"run_id": run_id, "questions": group.height,
                     **degradation_counts(group["degradation"].to_list())})
    if not rows:
        return pl.DataFrame(schema={"run_id": pl.String, "questions": pl.Int64})
    return pl.DataFrame(rows).fill_null(0).sort("run_id")


STEP_SCHEMA = pl.Schema({"run_id": pl.String, "questions": pl.Int64, "max_steps": pl.Int64,
                         "steps_mean": pl.Float64, "forced": pl.Int64,
                         "tool_calls_per_question": pl.Float64, "parts_read": pl.Int64,
                         "parts_read_in_full": pl.Int64, "read_in_full_share": pl.Float64})


def step_records(results: SweepResults) -> pl.DataFrame:
    """Per run of a test-time method (T2Mem, Search-o1): its questions with a step record,
    the step budget, steps taken (mean), answers forced at the last step, tool calls per
    question, episode parts read and read in full (T2Mem's ReadRaw; null when none)."""
    construct = results.records["construct"]
    if "steps" not in construct.columns:
        return pl.DataFrame(schema=STEP_SCHEMA)
    rows = []
    for (run_id,), group in construct.drop_nulls("steps").group_by("run_id",
                                                                    maintain_order=True):
        records = [json.loads(v) for v in group["steps"]]
        read = sum(r.get("parts_read", 0) for r in records)
        full = sum(r.get("parts_read_in_full", 0) for r in records)
        rows.append({"run_id": run_id, "questions": len(records),
                     "max_steps": max(r["max_steps"] for r in records),
                     "steps_mean": fmean(r["steps"] for r in records),
                     "forced": sum(bool(r["forced"]) for r in records),
                     "tool_calls_per_question": fmean(r["tool_calls"] for r in records),
                     "parts_read": read, "parts_read_in_full": full,
                     "read_in_full_share": full / read if read else None})
    return pl.DataFrame(rows, schema=STEP_SCHEMA).sort("run_id")


def exact_match(questions: pl.DataFrame) -> pl.DataFrame:
    """Mean exact match per run x category over questions with a text gold answer."""
    return _mean_by_category(questions.filter(pl.col("exact_match").is_not_null()),
                             "exact_match")


def agreement(results: SweepResults) -> pl.DataFrame:
    """Cohen's kappa of every pair of judges of a run on its answers (first repeat, verdict
    score >= CORRECT_AT as correct), over the questions both scored."""
    verdicts = results.records["judge"].filter((pl.col("repeat") == 0)
                                               & pl.col("score").is_not_null())
    verdicts = verdicts.select("run_id", "qid", "judge",
                               (pl.col("score") >= CORRECT_AT).alias("ok"))
    pairs = verdicts.join(verdicts, on=["run_id", "qid"], suffix="_b").filter(
        pl.col("judge") < pl.col("judge_b"))
    rows = [{"run_id": run_id, "judge_a": a, "judge_b": b, "questions": group.height,
             "agreement": sum(x == y for x, y in zip(group["ok"], group["ok_b"], strict=True))
                          / group.height,
             "kappa": cohen_kappa(group["ok"].to_list(), group["ok_b"].to_list())}
            for (run_id, a, b), group in pairs.group_by("run_id", "judge", "judge_b",
                                                         maintain_order=True)]
    return pl.DataFrame(rows, schema={"run_id": pl.String, "judge_a": pl.String,
                                      "judge_b": pl.String, "questions": pl.Int64,
                                      "agreement": pl.Float64, "kappa": pl.Float64})


def cohen_kappa(a: list[bool], b: list[bool]) -> float | None:
    """Agreement beyond chance of two raters' binary verdicts (None when chance is 1)."""
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    pa_, pb = sum(a) / n, sum(b) / n
    chance = pa_ * pb + (1 - pa_) * (1 - pb)
    return None if chance == 1 else (observed - chance) / (1 - chance)


def recall(questions: pl.DataFrame) -> pl.DataFrame:
    """Mean evidence recall per run x category over scorable questions with a traceable
    context; `untraceable`: scorable questions whose context is not; `basis`: shown, read or
    both (`shown+read`)."""
    constructed = questions.filter(pl.col("scorable") & pl.col("evidence_basis").is_not_null())
    untraceable = pl.col("evidence_basis") == UNTRACEABLE
    extra = [untraceable.sum().alias("untraceable"),
             pl.col("evidence_basis").filter(~untraceable).unique().sort().str.join("+")
             .alias("basis")]
    return _mean_by_category(constructed, "recall", exclude_separate=False, extra=extra)


def _mean_by_category(questions: pl.DataFrame, column: str, exclude_separate: bool = True,
                      extra: tuple[pl.Expr, ...] | list[pl.Expr] = ()) -> pl.DataFrame:
    """Mean of `column` per run x category over the questions that have one, with its
    interval (`questions`: how many)."""
    measured = pl.col(column).is_not_null()
    table = (with_overall(questions.with_columns(per_question(column)), exclude_separate)
             .group_by("run_id", "category", "separate")
             .agg(measured.sum().alias("questions"), pl.col(column).mean(),
                  *in_group(measured), *extra))
    return with_intervals(table).sort("run_id", "separate", "category")


def _grid(runs: pl.DataFrame, column: str, values: tuple[str, ...], *frames: pl.DataFrame
          ) -> pl.DataFrame:
    """Every run x value with the columns of `frames`, so that absent combinations are rows
    with nulls rather than missing rows."""
    grid = runs.select("run_id").join(pl.DataFrame({column: list(values)}), how="cross")
    for frame in frames:
        grid = left_join(grid, frame, ["run_id", column])
    return grid


def tokens(results: SweepResults, questions: pl.DataFrame) -> pl.DataFrame:
    """LLM calls per run x stage (the judges' controls apart, as stage `calibration`):
    counts, tokens, USD, latency as `counted_calls` counts them; per question of the run."""
    sums = results.calls.group_by("run_id", "stage").agg(pl.col(list(SUMMED)).sum())
    per_run = questions.group_by("run_id").agg(pl.len().alias("questions"))
    table = left_join(_grid(results.runs, "stage", COUNTED_STAGES, sums).fill_null(0),
                      per_run, "run_id")
    return table.with_columns(pl.col("stage").replace_strict(PHASE).alias("phase"),
                              (pl.col("tokens") / pl.col("questions")).alias(
                                  "tokens_per_question"))


def timing(results: SweepResults, token_table: pl.DataFrame) -> pl.DataFrame:
    """Per run x stage: stage records and their summed latency_s, LLM calls and latency."""
    sums = pl.concat([
        results.records[stage].group_by("run_id").agg(
            pl.lit(stage).alias("stage"), pl.len().alias("records"),
            pl.col("latency_s").sum().alias("record_latency_s") if stage != "judge"
            else pl.lit(None, pl.Float64).alias("record_latency_s"))
        for stage in RECORD_STAGES])
    llm = token_table.select("run_id", "stage", "calls", "llm_latency_s")
    return _grid(results.runs, "stage", LLM_STAGES, sums, llm).with_columns(
        pl.col("records").fill_null(0))


def error_counts(results: SweepResults) -> pl.DataFrame:
    """Per run x store: failed attempts, unresolved keys, questions left failed."""
    unresolved = ~pl.col("resolved")
    counts = results.failures.group_by("run_id", "store").agg(
        pl.len().alias("failed_attempts"), unresolved.sum().alias("unresolved"),
        pl.col("qid").filter(unresolved).n_unique().alias("questions"))
    return _grid(results.runs, "store", STORES, counts).fill_null(0)


def memory_quality(results: SweepResults) -> pl.DataFrame:
    """Per run (its method) and judge: questions scored, the mean of each memory-quality
    dimension (1-5, the project's rubric) and of their mean."""
    scores = results.records[MEMORY_QUALITY]
    if scores.is_empty():
        return pl.DataFrame(schema=MEMORY_QUALITY_TABLE)
    return scores.group_by("run_id", "method", "judge", maintain_order=True).agg(
        pl.len().alias("questions"),
        *[pl.col(d).mean() for d in (*MEMORY_QUALITY_DIMENSIONS, "mean")]).sort(
        "method", "run_id").select(list(MEMORY_QUALITY_TABLE))


MEMORY_QUALITY_TABLE = pl.Schema({"run_id": pl.String, "method": pl.String, "judge": pl.String,
                                  "questions": pl.UInt32,
                                  **dict.fromkeys((*MEMORY_QUALITY_DIMENSIONS, "mean"),
                                                  pl.Float64)})
