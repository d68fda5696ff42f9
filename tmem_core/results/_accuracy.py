"""Judge accuracy as the run summaries and the reports both define it."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Final, cast

import polars as pl
import pyarrow as pa

OVERALL = "overall"  # the category row that pools every category not reported separately
ALL_JUDGES = "all"  # the judge row that pools every judge's repeats
SCOPE = ("run_id", "category", "separate", "judge")  # the rows of an accuracy table
CORRECT_AT = 0.5  # a question whose mean judge score reaches this counts as correct
SELF: Final = "self"  # a run judged by its own backbone alone (`grid.judges = "self"`)
POOLED = "pooled"  # an accuracy averaged over several judges' verdicts


def judged_by(judges: Sequence[str], backbone: str) -> str:
    """How a run's accuracy was judged, as every table that shows it says: "self" (its own
    backbone alone), the one judge's name, or "pooled: a, b" (several judges averaged)."""
    if list(judges) == [backbone]:
        return SELF
    return judges[0] if len(judges) == 1 else f"{POOLED}: {', '.join(judges)}"


def with_overall(frame: pl.DataFrame, exclude_separate: bool = True) -> pl.DataFrame:
    """Each row under its category, and again under OVERALL (separate categories left out
    unless `exclude_separate` is False)."""
    pooled = frame.filter(~pl.col("separate")) if exclude_separate else frame
    return pl.concat([frame, pooled.with_columns(category=pl.lit(OVERALL),
                                                 separate=pl.lit(False))])


def judge_scopes(scores: pl.DataFrame) -> pl.DataFrame:
    """Judge records under every scope they count in (`SCOPE`): their category and OVERALL,
    their judge and ALL_JUDGES."""
    scoped = with_overall(scores)
    return pl.concat([scoped, scoped.with_columns(judge=pl.lit(ALL_JUDGES))])


def score_accuracy(scores: pl.DataFrame) -> pl.DataFrame:
    """Judge score per run x category x judge from successful judge records (`run_id, qid,
    judge, repeat, score, category, separate`): for each (judge, repeat) the mean score;
    their mean and std across repeats; judge `all` pools every (judge, repeat)."""
    scoped = judge_scopes(scores.with_columns(attempt=pl.struct("judge", "repeat")))
    keys = list(SCOPE)
    per_attempt = scoped.group_by(*keys, "attempt").agg(pl.col("score").mean().alias("acc"),
                                                        pl.col("qid"))
    return per_attempt.group_by(keys).agg(
        pl.col("qid").explode().n_unique().alias("questions"),
        pl.len().alias("repeats"), pl.col("acc").mean().alias("accuracy"),
        pl.col("acc").std().alias("std"),
    ).sort("run_id", "judge", "separate", "category")


def mean_exact_match(judged: pa.Table) -> float | None:
    """Exact match over a run's questions where it is defined (text answers), one value per
    question whatever the judges and repeats."""
    frame = pl.DataFrame(judged.select(["qid", "exact_match"])).drop_nulls("exact_match")
    per_question = frame.unique("qid")
    mean = per_question["exact_match"].cast(pl.Float64).mean()
    return None if mean is None else float(cast(float, mean))


def overall_accuracy(judged: pa.Table, separate: Collection[str]) -> tuple[float | None, int]:
    """The `overall`, judge `all` accuracy of one run's latest successful judge records (as
    `StageStore.latest` gives them), and how many questions it scores."""
    frame = pl.DataFrame(judged.select(["run_id", "qid", "judge", "repeat", "score",
                                        "category"]))
    rows = score_accuracy(frame.with_columns(separate=pl.col("category").is_in(list(separate)))
                          ).filter((pl.col("category") == OVERALL)
                                   & (pl.col("judge") == ALL_JUDGES)).to_dicts()
    return (rows[0]["accuracy"], rows[0]["questions"]) if rows else (None, 0)
