"""A sweep's summary tables, and their Parquet files."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import polars as pl

from tmem_core.reports import _metrics as m
from tmem_core.results import ALL_JUDGES, CALIBRATION, OVERALL, SweepResults, calibration


@dataclass(frozen=True)
class Summary:
    """Every table of a report; `results/README.md` documents each column."""

    runs: pl.DataFrame
    questions: pl.DataFrame
    accuracy: pl.DataFrame
    f1: pl.DataFrame
    exact_match: pl.DataFrame
    calibration: pl.DataFrame
    agreement: pl.DataFrame
    degradation: pl.DataFrame
    steps: pl.DataFrame
    recall: pl.DataFrame
    tokens: pl.DataFrame
    timing: pl.DataFrame
    error_counts: pl.DataFrame
    errors: pl.DataFrame
    validators: pl.DataFrame

    def tables(self) -> dict[str, pl.DataFrame]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def write_parquet(self, out: Path) -> dict[str, Path]:
        """One `<table>.parquet` per table in `out`."""
        out.mkdir(parents=True, exist_ok=True)
        paths = {name: out / f"{name}.parquet" for name in self.tables()}
        for name, frame in self.tables().items():
            frame.write_parquet(paths[name])
        return paths


def summarise(results: SweepResults) -> Summary:
    questions = m.question_table(results)
    accuracy = m.accuracy(results)
    f1, recall = m.f1(questions), m.recall(questions)
    exact_match = m.exact_match(questions)
    judge_calibration = calibration(results.records[CALIBRATION])
    tokens = m.tokens(results, questions)
    error_counts = m.error_counts(results)
    return Summary(
        runs=_runs(results.runs, questions, accuracy, f1, exact_match, judge_calibration,
                   recall, tokens),
        questions=questions, accuracy=accuracy, f1=f1, exact_match=exact_match,
        calibration=judge_calibration, agreement=m.agreement(results),
        degradation=m.degradation(results), steps=m.step_records(results), recall=recall,
        tokens=tokens,
        timing=m.timing(results, tokens), error_counts=error_counts,
        errors=results.failures.sort("run_id", "store", "written_at"),
        validators=results.validators)


def _runs(runs: pl.DataFrame, questions: pl.DataFrame, accuracy: pl.DataFrame,
          f1: pl.DataFrame, exact_match: pl.DataFrame, judge_calibration: pl.DataFrame,
          recall: pl.DataFrame, tokens: pl.DataFrame) -> pl.DataFrame:
    """One row per run: its config and headline figures."""
    overall = pl.col("category") == OVERALL
    outcome = questions.group_by("run_id").agg(
        pl.len().alias("questions"),
        *[(pl.col("status") == s).sum().alias(s) for s in ("judged", "failed", "pending")],
        pl.col("context_tokens").mean(),
        pl.col("context_tokens").max().alias("context_tokens_max"))
    headline = [
        accuracy.filter(overall & (pl.col("judge") == ALL_JUDGES)).select(
            "run_id", pl.col("questions").alias("scored"), "accuracy",
            pl.col("std").alias("accuracy_std")),
        f1.filter(overall).select("run_id", "f1"),
        exact_match.filter(overall).select("run_id", "exact_match"),
        judge_calibration.group_by("run_id").agg(
            pl.col("reliable").all().alias("judges_reliable"),
            pl.col("judge").filter(~pl.col("reliable")).alias("unreliable_judges")),
        recall.filter(overall).select("run_id", "recall",
                                      pl.col("questions").alias("recall_questions")),
        _token_totals(tokens),
    ]
    table = runs
    for frame in (outcome, *headline):
        table = m.left_join(table, frame, "run_id")
    return table.sort("benchmark", "method", "backbone", "top_k", "budget")


def _token_totals(tokens: pl.DataFrame) -> pl.DataFrame:
    """Per run: tokens in total, per question and per phase, and USD."""
    phases = tokens.pivot(on="phase", index="run_id", values="tokens", aggregate_function="sum")
    totals = tokens.group_by("run_id").agg(
        pl.col("tokens").sum(), pl.col("tokens_per_question").sum(), pl.col("cost_usd").sum(),
        pl.col("method_cost_usd").sum())
    return totals.join(phases.rename({m.MEMORY_PROCESSING: "tokens_memory",
                                      m.ANSWER_JUDGE: "tokens_answer_judge"}), on="run_id")
