"""The report's tables with their 95% intervals: `_stats` applied to groups of questions, by
conversation where a group's questions share conversations (`ci_unit`)."""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from tmem_core.reports import _stats as stats
from tmem_core.results import SCOPE
from tmem_core.results._accuracy import judge_scopes

INTERVAL_SCHEMA = pl.Schema({"ci_low": pl.Float64, "ci_high": pl.Float64,
                             "ci_method": pl.String, "ci_seed": pl.Int64,
                             "ci_resamples": pl.Int64, "ci_unit": pl.String})
VALUES = "values"  # a group's per-question lists of values
CONVERSATIONS = "conversations"  # and each question's conversation, in the same order


def with_intervals(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with the interval of each row's `values` (a list of values per question) and
    `conversations` (each question's) in the INTERVAL_SCHEMA columns, both dropped: Wilson's
    for a proportion over questions of distinct conversations (decided and counted on the
    columns), else the bootstrap (the row's values read into Python)."""
    values = pl.col(VALUES)
    facts = frame.select(
        values.list.len().alias("n"),
        values.list.eval(pl.element().list.first()).list.sum().alias("successes"),
        (values.list.eval(pl.element().list.len() == 1).list.all()
         & values.list.eval(pl.element().list.first().is_in([0.0, 1.0])).list.all()
         ).alias("proportion"),
        pl.col(CONVERSATIONS).list.n_unique().alias("clusters"))
    column, clusters = frame.get_column(VALUES), frame.get_column(CONVERSATIONS)
    found = [replace(stats.wilson(int(successes), n), unit=stats.QUESTION)
             if proportion and not 2 <= distinct < n
             else stats.bootstrap_interval(column[i].to_list(), clusters[i].to_list())
             for i, (n, successes, proportion, distinct) in enumerate(facts.iter_rows())]
    columns = pl.DataFrame([(i.low, i.high, i.method, i.seed, i.resamples, i.unit)
                            for i in found], schema=INTERVAL_SCHEMA, orient="row")
    return frame.drop(VALUES, CONVERSATIONS).hstack(columns)


def interval_columns(ci: stats.Interval) -> dict[str, object]:
    """An interval as the INTERVAL_SCHEMA columns of a row."""
    return {"ci_low": ci.low, "ci_high": ci.high, "ci_method": ci.method, "ci_seed": ci.seed,
            "ci_resamples": ci.resamples, "ci_unit": ci.unit}


def per_question(column: str) -> pl.Expr:
    """A question's one value as its list of values (for `with_intervals`)."""
    return pl.concat_list(pl.col(column).cast(pl.Float64)).alias(VALUES)


def in_group(measured: pl.Expr | None = None) -> list[pl.Expr]:
    """The aggregations `with_intervals` reads, over a group's questions (those `measured`)."""
    values, conversations = pl.col(VALUES), pl.col("conv_id").alias(CONVERSATIONS)
    if measured is None:
        return [values, conversations]
    return [values.filter(measured), conversations.filter(measured)]


def score_intervals(scores: pl.DataFrame) -> pl.DataFrame:
    """The interval of every accuracy row (`SCOPE`) from its judge records (`run_id, qid,
    conv_id, judge, score, category, separate`): each question's scores in the scope are its
    values."""
    scoped = judge_scopes(scores.drop_nulls("score"))
    questions = scoped.group_by(*SCOPE, "qid").agg(pl.col("score").alias(VALUES),
                                                    pl.col("conv_id").first())
    return with_intervals(questions.group_by(SCOPE).agg(in_group()))
