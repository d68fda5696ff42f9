"""The report's tables with their 95% intervals: `_stats` applied to groups of questions."""

from __future__ import annotations

import polars as pl

from tmem_core.reports import _stats as stats
from tmem_core.results import SCOPE, judge_scopes

INTERVAL_SCHEMA = pl.Schema({"ci_low": pl.Float64, "ci_high": pl.Float64,
                             "ci_method": pl.String, "ci_seed": pl.Int64,
                             "ci_resamples": pl.Int64})
VALUES = "values"  # a group's per-question lists of values


def with_intervals(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with the interval of each row's `values` (a list of values per question) in
    the INTERVAL_SCHEMA columns, `values` dropped: Wilson's for a proportion (decided and
    counted on the columns), else the bootstrap (the row's values read into Python)."""
    values = pl.col(VALUES)
    facts = frame.select(
        values.list.len().alias("n"),
        values.list.eval(pl.element().list.first()).list.sum().alias("successes"),
        (values.list.eval(pl.element().list.len() == 1).list.all()
         & values.list.eval(pl.element().list.first().is_in([0.0, 1.0])).list.all()
         ).alias("proportion"))
    column = frame.get_column(VALUES)
    found = [stats.wilson(int(successes), n) if proportion
             else stats.bootstrap_interval(column[i].to_list())
             for i, (n, successes, proportion) in enumerate(facts.iter_rows())]
    columns = pl.DataFrame([(i.low, i.high, i.method, i.seed, i.resamples) for i in found],
                           schema=INTERVAL_SCHEMA, orient="row")
    return frame.drop(VALUES).hstack(columns)


def per_question(column: str) -> pl.Expr:
    """A question's one value as its list of values (for `with_intervals`)."""
    return pl.concat_list(pl.col(column).cast(pl.Float64)).alias(VALUES)


def score_intervals(scores: pl.DataFrame) -> pl.DataFrame:
    """The interval of every accuracy row (`SCOPE`) from its judge records (`run_id, qid,
    judge, score, category, separate`): each question's scores in the scope are its values."""
    scoped = judge_scopes(scores.drop_nulls("score"))
    questions = scoped.group_by(*SCOPE, "qid").agg(pl.col("score").alias(VALUES))
    return with_intervals(questions.group_by(SCOPE).agg(pl.col(VALUES)))
