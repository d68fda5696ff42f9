"""A sweep's summary tables, and their Parquet files."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import polars as pl

from tmem_core.reports import _metrics as m
from tmem_core.reports._attribution import attribution, gold_context, with_causes
from tmem_core.reports._chains import revision_chains
from tmem_core.reports._paired import paired_differences
from tmem_core.reports._paper import paper_table, run_intervals
from tmem_core.reports._utilisation import engine_calls, utilisation
from tmem_core.results._accuracy import ALL_JUDGES, OVERALL, judged_by
from tmem_core.results._calibration import calibration, judges_status
from tmem_core.results._count import call_totals
from tmem_core.results._layout import CALIBRATION, CALLS
from tmem_core.results._sweep import SweepResults


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
    memory_quality: pl.DataFrame
    recall: pl.DataFrame
    attribution: pl.DataFrame
    gold_context: pl.DataFrame
    paired: pl.DataFrame
    tokens: pl.DataFrame
    timing: pl.DataFrame
    error_counts: pl.DataFrame
    errors: pl.DataFrame
    validators: pl.DataFrame
    paper: pl.DataFrame  # the paper's figures beside the runs that match them
    revision_chains: pl.DataFrame  # Exp-5: complete-chain recovery, revision-only contexts
    utilisation: pl.DataFrame  # per backbone and replica: busy fraction, requests in flight
    engine_calls: pl.DataFrame  # every call an engine replica answered: sent, answered
    attempts: pl.DataFrame  # per run: drivers' passes, their commits, what they differ in

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
    judge_calibration = calibration(results.records[CALIBRATION], results.runs)
    questions = with_causes(m.question_table(results), results, judge_calibration)
    accuracy = m.accuracy(results)
    f1, recall = m.f1(questions), m.recall(questions)
    exact_match = m.exact_match(questions)
    tokens = m.tokens(results, questions)
    error_counts = m.error_counts(results)
    runs = _runs(results.runs, questions, accuracy, f1, exact_match, judge_calibration, recall,
                 _token_totals(results, tokens))
    return Summary(
        runs=runs, questions=questions, accuracy=accuracy, f1=f1, exact_match=exact_match,
        calibration=judge_calibration, agreement=m.agreement(results),
        degradation=m.degradation(results), steps=m.step_records(results),
        memory_quality=m.memory_quality(results), recall=recall,
        attribution=attribution(questions), gold_context=gold_context(questions),
        paired=paired_differences(results, runs, questions), tokens=tokens,
        timing=m.timing(results, tokens), error_counts=error_counts,
        errors=results.failures.sort("run_id", "store", "written_at"),
        validators=results.validators, paper=paper_table(runs, run_intervals(runs)),
        revision_chains=revision_chains(results), attempts=results.attempts,
        utilisation=utilisation(results.records[CALLS]),
        engine_calls=engine_calls(results.records[CALLS]))


def _runs(runs: pl.DataFrame, questions: pl.DataFrame, accuracy: pl.DataFrame,
          f1: pl.DataFrame, exact_match: pl.DataFrame, judge_calibration: pl.DataFrame,
          recall: pl.DataFrame, token_totals: pl.DataFrame) -> pl.DataFrame:
    """One row per run: its config and headline figures."""
    overall = pl.col("category") == OVERALL
    outcome = questions.group_by("run_id").agg(
        pl.len().alias("questions"),
        *[(pl.col("status") == s).sum().alias(s)
          for s in ("judged", "failed", "stale", "pending")],
        pl.col("context_tokens").mean(),
        pl.col("context_tokens").max().alias("context_tokens_max"),
        pl.col("selection_recall").mean(),
        pl.col("selection_recall").is_not_null().sum().alias("selection_recall_questions"))
    headline = [
        accuracy.filter(overall & (pl.col("judge") == ALL_JUDGES)).select(
            "run_id", pl.col("questions").alias("scored"), "accuracy",
            pl.col("std").alias("accuracy_std"), *_bounds("accuracy"),
            pl.col("ci_unit").alias("accuracy_unit")),
        f1.filter(overall).select("run_id", "f1", *_bounds("f1")),
        exact_match.filter(overall).select("run_id", "exact_match", *_bounds("exact_match")),
        judges_status(judge_calibration),
        recall.filter(overall).select(
            "run_id", "recall", *_bounds("recall"),
            pl.col("questions").alias("recall_questions"),
            pl.col("untraceable").alias("recall_untraceable"),
            pl.col("basis").alias("recall_basis")),
        token_totals,
    ]
    table = runs.with_columns(judged_by_column())
    for frame in (outcome, *headline):
        table = m.left_join(table, frame, "run_id")
    return table.sort("benchmark", "method", "backbone", "top_k", "budget")


def judged_by_column() -> pl.Expr:
    """`judged_by`: who judged the run's accuracy (`results.judged_by`: "self", a judge, or
    "pooled: a, b" when it averages several judges)."""
    return pl.struct("judges", "backbone").map_elements(
        lambda s: judged_by(s["judges"].split(","), s["backbone"]),
        return_dtype=pl.String).alias("judged_by")


def _bounds(metric: str) -> list[pl.Expr]:
    """The interval of a headline figure as `<metric>_low` and `<metric>_high`."""
    return [pl.col("ci_low").alias(f"{metric}_low"), pl.col("ci_high").alias(f"{metric}_high")]


def _token_totals(results: SweepResults, tokens: pl.DataFrame) -> pl.DataFrame:
    """Per run: tokens in total (`call_totals`), per question and per phase, and USD."""
    phases = tokens.pivot(on="phase", index="run_id", values="tokens", aggregate_function="sum")
    totals = call_totals(results.calls, ["run_id"]).select(
        "run_id", "tokens", "cost_usd", "method_cost_usd", "calibration_tokens",
        "calibration_cost_usd")
    questions = tokens.group_by("run_id").agg(pl.col("questions").first())
    totals = m.left_join(results.runs.select("run_id"), totals, "run_id").fill_null(0).join(
        questions, on="run_id").with_columns(
        (pl.col("tokens") / pl.col("questions")).alias("tokens_per_question")).drop("questions")
    return totals.join(phases.select(
        "run_id", pl.col(m.MEMORY_PROCESSING).alias("tokens_memory"),
        pl.col(m.ANSWER_JUDGE).alias("tokens_answer_judge")), on="run_id")
