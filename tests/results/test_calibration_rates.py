"""A judge's calibration rates count only the controls its LLM scored, each with its Wilson
interval; a kind needs `MIN_CONTROLS` of them, and is reliable only when its interval's
lower bound reaches the bar."""

from __future__ import annotations

import polars as pl
import pytest

from tmem_core.evaluation import KINDS
from tmem_core.results._calibration import (
    MIN_CONTROLS,
    NOT_CALIBRATED,
    RELIABLE,
    UNRELIABLE,
    KindRate,
    calibration,
    judges_status,
)

RUN = "locomo_tmem_qwen_k36_b4096_1a2b3c4d"


def _controls(kind: str, right: int, wrong: int, scored_by: str = "llm",
              judge: str = "gpt-4o-mini") -> list[dict[str, object]]:
    """`right` + `wrong` verdicts of one kind, numbered on from LoCoMo-style qids."""
    expected = KINDS[kind]
    return [{"run_id": RUN, "judge": judge, "control": kind, "scored_by": scored_by,
             "score": expected if i < right else 1 - expected,
             "qid": f"conv-26:q{i}"} for i in range(right + wrong)]


def _table(*rows: list[dict[str, object]], judges: str = "gpt-4o-mini") -> pl.DataFrame:
    frame = pl.DataFrame([r for part in rows for r in part])
    return calibration(frame, pl.DataFrame({"run_id": [RUN], "judges": [judges]}))


def _row(table: pl.DataFrame, kind: str) -> dict[str, object]:
    return table.filter(pl.col("control") == kind).row(0, named=True)


def test_controls_scored_by_rule_never_enter_the_llm_judges_rate() -> None:
    """As on three LoCoMo conversations: 134 of 639 gold controls scored 1.0 by the
    not-mentioned rule, the LLM right on 247 of the other 505; mixed, 0.60."""
    table = _table(_controls("gold", 247, 258), _controls("gold", 134, 0, "rule"))
    gold = _row(table, "gold")
    assert (gold["controls"], gold["rate"]) == (505, pytest.approx(247 / 505))
    assert (gold["rule_controls"], gold["rule_rate"]) == (134, 1.0)
    assert gold["status"] == UNRELIABLE
    assert round((247 + 134) / 639, 2) == 0.60  # what counting them together reported


def test_a_kind_scored_only_by_rule_is_not_calibrated_and_an_llm_can_fail_made_up() -> None:
    ruled = _row(_table(_controls("made_up", 40, 0, "rule")), "made_up")
    assert (ruled["status"], ruled["controls"], ruled["rule_controls"]) == (
        NOT_CALIBRATED, 0, 40)
    assert ruled["rate"] is None and ruled["ci_low"] is None
    asked = _row(_table(_controls("made_up", 10, 30)), "made_up")
    assert (asked["status"], asked["rate"]) == (UNRELIABLE, 0.25)


def test_fewer_than_the_minimum_controls_is_not_calibrated() -> None:
    assert MIN_CONTROLS == 16  # the fewest whose all-right lower bound reaches 0.8
    below = _row(_table(_controls("paraphrase", MIN_CONTROLS - 1, 0)), "paraphrase")
    assert (below["status"], below["rate"]) == (NOT_CALIBRATED, 1.0)
    at = _row(_table(_controls("paraphrase", MIN_CONTROLS, 0)), "paraphrase")
    assert at["status"] == RELIABLE and at["ci_low"] >= 0.8


@pytest.mark.parametrize(("right", "n", "status"), [
    (377, 505, UNRELIABLE),  # 0.747: the LLM TPR once reported as 0.80, reliable
    (83, 100, UNRELIABLE),  # 0.83 above the bar, its interval's lower bound (0.744) not
    (180, 200, RELIABLE),  # 0.90 of 200: lower bound 0.851
])
def test_the_lower_bound_decides(right: int, n: int, status: str) -> None:
    row = _row(_table(_controls("other", right, n - right)), "other")
    assert row["status"] == status
    assert row["ci_low"] < row["rate"] < row["ci_high"]


def test_a_judge_is_unreliable_on_its_own_kinds_only() -> None:
    table = _table(_controls("gold", 40, 0, judge="a"), _controls("other", 10, 30, judge="a"),
                   _controls("gold", 40, 0, judge="b"), _controls("other", 40, 0, judge="b"),
                   judges="a,b")
    (status,) = judges_status(table).to_dicts()
    assert status["judges_reliable"] is False and status["unreliable_judges"] == ["a"]
    assert "b:made_up" in status["uncalibrated"] and "b:gold" not in status["uncalibrated"]


def test_the_run_line_shows_the_interval_and_the_rule_scored_apart() -> None:
    kind = KindRate("gold", right=247, controls=505, rule_controls=134)
    assert kind.describe() == "gold TPR 0.49 [0.45, 0.53] of 505 (+134 by rule)"
