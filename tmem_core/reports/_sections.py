"""The report's sections on losses and differences: failure attribution, paired tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from tmem_core.reports._attribution import CAUSES, ERROR, PENDING
from tmem_core.reports._cells import fmt, markdown_table, with_ci
from tmem_core.reports._summary import Summary

ATTRIBUTION = (
    "One cause per question, the first that applies (`results/README.md` defines each): "
    "**correct**; **judging** (its judges disagree, or one failed calibration); **degraded** "
    "(the method fell back or repaired something on it); **unknown** (no gold evidence to look "
    "for); **untraceable** (its context names no source message); **synthesis** (all its "
    "gold evidence was in the context, the answer was still wrong); **retrieval** (part or "
    "none of it was). Judges that split (1/0) make a question **judging**, never "
    "**correct**. Shares are of judged questions [95% interval, by conversation where "
    "questions share one]; errors, stale questions (whose records were made under superseded "
    "dependencies: a changed backbone, prompt, method or data) and pending questions are "
    "counted apart, never scored. For a run whose evidence basis is `read`, *in the context* "
    "means read by the method while it built its context (not shown to the answer model).")
GOLD_CONTEXT = (
    "P(correct | gold in context): the share of judged questions answered correctly among "
    "those whose context held all their gold evidence, and among those whose context held "
    "part or none of it [95% interval: Wilson's, or by conversation where questions share "
    "one] (correct / questions).")
PAIRED = (
    "Runs over the same questions that differ in one grid dimension, compared on the "
    "questions both scored: Δ = b − a [paired bootstrap 95% interval, drawing the same "
    "conversations and questions for both runs; `unit` what was drawn], p two-sided over "
    "questions (exact McNemar on 0/1 scores, sign-flip permutation test on fractions). Runs "
    "over different question sets are never paired.")


def attribution_lines(summary: Summary,
                      with_run: Callable[[pl.DataFrame], pl.DataFrame]) -> list[str]:
    """The causes of each run's questions as counts and shares, then P(correct | gold)."""
    cells = summary.attribution.with_columns(pl.struct(
        "questions", "share", "ci_low", "ci_high").map_elements(_share_cell,
                                                              return_dtype=pl.String
                                                              ).alias("cell"))
    wide = cells.pivot(on="cause", index="run_id", values="cell")
    basis = summary.runs.select("run_id", pl.col("recall_basis").alias("evidence basis"))
    table = with_run(basis.join(wide, on="run_id", how="inner", maintain_order="left").select(
        "run_id", "evidence basis", *CAUSES).rename({ERROR: "errors (not scored)",
                                                    PENDING: "pending"}))
    return [ATTRIBUTION, "", *markdown_table(table), GOLD_CONTEXT, "",
            *markdown_table(with_run(_gold_context(summary)))]


def _share_cell(s: dict[str, Any]) -> str:
    """`n (share [low, high])` in percent; the count alone when there is no share."""
    if s["share"] is None or not s["questions"]:
        return str(s["questions"])
    if s["ci_low"] is None:
        return f"{s['questions']} ({s['share']:.0%})"
    return f"{s['questions']} ({s['share']:.0%} [{s['ci_low']:.0%}, {s['ci_high']:.0%}])"


def _gold_context(summary: Summary) -> pl.DataFrame:
    cells = summary.gold_context.with_columns(pl.struct(
        "p_correct", "ci_low", "ci_high", "correct", "questions").map_elements(
        lambda s: f"{with_ci(s['p_correct'], s['ci_low'], s['ci_high'])} "
                  f"({s['correct']}/{s['questions']})", return_dtype=pl.String).alias("cell"),
        pl.when("in_context").then(pl.lit("gold in context")).otherwise(
            pl.lit("gold not in context")).alias("where"))
    if cells.is_empty():
        return pl.DataFrame(schema={"run_id": pl.String})
    basis = cells.group_by("run_id").agg(pl.col("basis").unique().sort().str.join("+"))
    wide = cells.pivot(on="where", index="run_id", values="cell")
    columns = [c for c in ("gold in context", "gold not in context") if c in wide.columns]
    return basis.join(wide, on="run_id").select("run_id", "basis", *columns).sort("run_id")


def paired_lines(summary: Summary, labels: pl.DataFrame) -> list[str]:
    """One table per benchmark: each pair of runs and metric, Δ with interval and p."""
    paired = summary.paired
    if paired.is_empty():
        return ["No two runs ask the same questions and differ in exactly one grid dimension."]
    names = dict(labels.iter_rows())
    lines = [PAIRED, ""]
    for (benchmark,), rows in paired.group_by("benchmark", maintain_order=True):
        table = rows.select(
            pl.col("run_a").replace_strict(names).alias("a"),
            pl.col("run_b").replace_strict(names).alias("b"), "varied", "metric", "questions",
            pl.struct("diff", "ci_low", "ci_high").map_elements(
                lambda s: with_ci(s["diff"], s["ci_low"], s["ci_high"], sign=True),
                return_dtype=pl.String).alias("Δ = b − a [95%]"),
            pl.col("a").alias("mean a"), pl.col("b").alias("mean b"),
            pl.col("ci_unit").alias("unit"),
            pl.col("p_value").map_elements(fmt, return_dtype=pl.String).alias("p"), "test")
        lines += [f"### {benchmark}", "", *markdown_table(table)]
    return lines
