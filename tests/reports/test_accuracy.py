"""Accuracy from judge records: per (judge, repeat), then pooled."""

from __future__ import annotations

import polars as pl
import pytest

from tmem_core.results._accuracy import ALL_JUDGES, OVERALL, score_accuracy


def _scores(*attempts: tuple[str, int, list[float]]) -> pl.DataFrame:
    rows = [{"run_id": "r", "qid": f"q{i}", "judge": judge, "repeat": repeat, "score": score,
             "category": "single-hop", "separate": False}
            for judge, repeat, scores in attempts for i, score in enumerate(scores)]
    rows.append({"run_id": "r", "qid": "q9", "judge": "a", "repeat": 0, "score": 0.0,
                 "category": "adversarial", "separate": True})
    return pl.DataFrame(rows)


def _row(table: pl.DataFrame, judge: str, category: str = OVERALL) -> dict[str, object]:
    (row,) = table.filter((pl.col("judge") == judge) & (pl.col("category") == category)
                          ).to_dicts()
    return row


def test_every_judge_repeat_is_one_attempt_and_all_pools_them() -> None:
    table = score_accuracy(_scores(("a", 0, [1.0, 1.0]), ("b", 0, [0.0, 0.0]),
                                   ("b", 1, [0.0, 0.0])))
    pooled = _row(table, ALL_JUDGES)
    assert pooled["repeats"] == 3 and pooled["questions"] == 2  # (a,0), (b,0), (b,1)
    assert pooled["accuracy"] == pytest.approx(1 / 3)
    assert _row(table, "b")["repeats"] == 2 and _row(table, "b")["accuracy"] == 0.0
    assert _row(table, "a")["accuracy"] == 1.0  # the separate category stays out of overall
    assert _row(table, "a", "adversarial")["accuracy"] == 0.0
