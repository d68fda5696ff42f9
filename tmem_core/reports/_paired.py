"""Paired differences: runs that ask the same questions and differ in one grid dimension,
compared question by question (see `_stats.paired`).

Two runs are paired when their benchmark config (hence question set), judges and judge
repeats are the same and exactly one of method, backbone, top_k and budget differs (the
method's parameters go with it; runs of one method with other parameters are not paired).
Each metric is compared over the questions both runs scored (by conversation where they share
conversations, `_stats.paired`): accuracy on the judge records
(every judge and repeat) of non-separate categories, F1 and exact match on the non-separate
questions that have one, recall on every question whose context is traceable (as the
`overall` rows define them). The difference is the later run (b) minus the earlier (a), in
the runs table's order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import polars as pl

from tmem_core.reports import _stats as stats
from tmem_core.reports._intervals import (
    INTERVAL_SCHEMA,
    VALUES,
    interval_columns,
    per_question,
)
from tmem_core.results._sweep import SweepResults

GRID = ("method", "backbone", "top_k", "budget")
ALIKE = ("benchmark", "question_set", "judges", "judge_repeats")
METRICS = ("accuracy", "f1", "exact_match", "recall")
PAIRED_SCHEMA = pl.Schema([
    ("benchmark", pl.String), ("varied", pl.String), ("run_a", pl.String),
    ("run_b", pl.String), ("metric", pl.String), ("questions", pl.Int64), ("only_a", pl.Int64),
    ("only_b", pl.Int64), ("a", pl.Float64), ("b", pl.Float64), ("diff", pl.Float64),
    *INTERVAL_SCHEMA.items(), ("p_value", pl.Float64), ("test", pl.String)])
_ID = ["run_id", "qid"]


def run_pairs(runs: pl.DataFrame) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(the dimension that differs, run a, run b) for every pair of `runs`, in their order."""
    rows = runs.to_dicts()
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            varied = [f for f in GRID if a[f] != b[f]]
            if (all(a[f] == b[f] for f in ALIKE) and len(varied) == 1
                    and (varied == ["method"] or a["params"] == b["params"])):
                yield varied[0], a, b


def paired_differences(results: SweepResults, runs: pl.DataFrame,
                       questions: pl.DataFrame) -> pl.DataFrame:
    """One row per pair of runs and metric with questions both scored."""
    values = {metric: _by_run(frame) for metric, frame in metric_values(results,
                                                                        questions).items()}
    empty = pl.DataFrame(schema={"qid": pl.String, "conv_id": pl.String,
                                 VALUES: pl.List(pl.Float64)})
    rows = []
    for varied, a, b in run_pairs(runs):
        for metric, by_run in values.items():
            found_a, found_b = (by_run.get(r["run_id"], empty) for r in (a, b))
            shared = found_a.join(found_b.drop("conv_id"), on="qid", suffix="_b")
            if shared.is_empty():
                continue
            result = stats.paired(shared.get_column(VALUES).to_list(),
                                  shared.get_column(f"{VALUES}_b").to_list(),
                                  shared.get_column("conv_id").to_list())
            rows.append({"benchmark": a["benchmark"], "varied": varied, "run_a": a["run_id"],
                         "run_b": b["run_id"], "metric": metric, "questions": result.questions,
                         "only_a": found_a.height - shared.height,
                         "only_b": found_b.height - shared.height, "a": result.a,
                         "b": result.b, "diff": result.diff,
                         **interval_columns(result.interval), "p_value": result.p_value,
                         "test": result.test})
    return pl.DataFrame(rows, schema=PAIRED_SCHEMA)


def metric_values(results: SweepResults, questions: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """metric -> `run_id, qid, conv_id, values` (a question's judge scores; its one F1, EM,
    recall)."""
    counted = questions.filter(~pl.col("separate"))
    scores = results.records["judge"].drop_nulls("score").join(
        counted.select(*_ID, "conv_id"), on=_ID).group_by(*_ID, "conv_id").agg(
        pl.col("score").cast(pl.Float64).alias(VALUES))
    found = {"accuracy": scores}
    for metric in ("f1", "exact_match", "recall"):
        scope = questions if metric == "recall" else counted
        found[metric] = scope.filter(pl.col(metric).is_not_null()).select(
            *_ID, "conv_id", per_question(metric))
    return found


def _by_run(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    return {str(run_id): part.drop("run_id")
            for (run_id,), part in frame.partition_by("run_id", as_dict=True).items()}
