"""Summary tables of hand-written sweeps, whose every figure is known in advance."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.reports.conftest import QUESTIONS, locomo_run, write_locomo_data, write_run
from tmem_core import DataError
from tmem_core.reports import Summary, read_sweep, summarise
from tmem_core.reports import _stats as stats
from tmem_core.reports._compare import compare, compare_sweeps


def _row(frame: pl.DataFrame, **where: object) -> dict[str, object]:
    rows = frame.filter(**where).to_dicts()
    assert len(rows) == 1, (where, rows)
    return rows[0]


@pytest.fixture
def summary(locomo_sweep: Path) -> Summary:
    return summarise(read_sweep(locomo_sweep))


def test_accuracy_excludes_separate_categories_and_failed_questions(summary: Summary) -> None:
    overall = _row(summary.accuracy, category="overall", judge="all")
    # repeat 0: q1, q2 right, q3 wrong -> 2/3; repeat 1: q1 right -> 1/3
    assert overall["accuracy"] == pytest.approx(0.5)
    assert overall["std"] == pytest.approx((2 * (1 / 6) ** 2) ** 0.5)
    assert overall["questions"] == 3 and overall["repeats"] == 2
    adversarial = _row(summary.accuracy, category="adversarial", judge="all")
    assert adversarial["separate"] and adversarial["accuracy"] == 1.0
    # q5 failed at answer: an error, not a wrong answer, so single-hop is q1 alone
    assert _row(summary.accuracy, category="single-hop", judge="j1")["accuracy"] == 1.0
    assert _row(summary.accuracy, category="single-hop", judge="all")["questions"] == 1


def test_failed_question_is_listed_as_an_error(summary: Summary) -> None:
    q5 = _row(summary.questions, qid="q5")
    assert (q5["status"], q5["failed_stage"], q5["error"]) == ("failed", "answer", "answer: boom")
    assert q5["judged"] == 0 and q5["score"] is None
    counts = {r["store"]: (r["failed_attempts"], r["unresolved"])
              for r in summary.error_counts.to_dicts()}
    assert counts == {"retrieve": (1, 0), "construct": (0, 0), "answer": (1, 1),
                      "judge": (0, 0), "calibration": (0, 0), "memory_quality": (0, 0),
                      "calls": (1, 1)}
    errors = summary.errors.select("store", "stage", "qid", "resolved", "error_kind").rows()
    assert sorted(errors, key=str) == sorted([("retrieve", "retrieve", "q1", True, None),
                                              ("answer", "answer", "q5", False, None),
                                              ("calls", "answer", "q5", False, "timeout")],
                                             key=str)
    run = summary.runs.row(0, named=True)
    assert (run["questions"], run["judged"], run["failed"], run["pending"]) == (5, 4, 1, 0)


def test_f1_and_recall(summary: Summary) -> None:
    assert _row(summary.f1, category="overall")["f1"] == pytest.approx((0.8 + 0.5) / 3)
    assert _row(summary.f1, category="adversarial")["separate"]
    # recall pools every scorable question with a context, adversarial included
    recall = _row(summary.recall, category="overall")
    assert recall["recall"] == pytest.approx((1 + 0.5 + 0 + 1 + 1) / 5)
    assert recall["questions"] == 5
    assert _row(summary.recall, category="multi-hop")["recall"] == 0.5


def test_tokens_cost_and_time(summary: Summary) -> None:
    by_stage = {r["stage"]: r["tokens"] for r in summary.tokens.to_dicts()}
    assert by_stage == {"memory": 1100, "retrieve": 0, "construct": 0, "answer": 4 * 110,
                        "judge": 8 * 55, "calibration": 0, "memory_quality": 0}
    run = summary.runs.row(0, named=True)
    assert run["tokens"] == 1980 and run["tokens_per_question"] == pytest.approx(1980 / 5)
    assert (run["tokens_memory"], run["tokens_answer_judge"]) == (1100, 880)
    # spent now: q5's answer call failed, and what it spent counts (its tokens, as if run, not)
    assert run["cost_usd"] == pytest.approx(0.01 + 8 * 0.0005 + 5 * 0.001)
    assert run["wall_s"] == 60.0
    timing = {r["stage"]: (r["records"], r["record_latency_s"]) for r in summary.timing.to_dicts()}
    assert timing["retrieve"] == (5, pytest.approx(0.5))
    assert timing["answer"] == (4, pytest.approx(4.0))
    assert timing["judge"] == (8, None)


def test_comparisons_across_budgets_backbones_and_sweeps(tmp_path: Path) -> None:
    root = tmp_path / "grid"
    write_locomo_data(root)
    worse = [dataclasses.replace(q, scores=(0.0, 0.0)) if q.qid == "q1" else q
             for q in QUESTIONS]
    write_run(root, locomo_run("grid"))
    write_run(root, locomo_run("grid", budget=1024), worse)
    write_run(root, locomo_run("grid", backbone="b2"), worse)
    runs = summarise(read_sweep(root)).runs
    by_budget = compare(runs, "budget")
    assert by_budget.get_column("budget").to_list() == [512, 1024]
    assert by_budget.get_column("accuracy_delta").to_list() == pytest.approx([0.0, -1 / 3])
    by_backbone = compare(runs, "backbone")
    assert _row(by_backbone, backbone="b2")["accuracy_delta"] == pytest.approx(-1 / 3)
    assert compare(runs, "top_k").is_empty()  # a single top_k: nothing to compare

    baseline = tmp_path / "base"
    write_locomo_data(baseline)
    write_run(baseline, locomo_run("base"), worse)
    versus = compare_sweeps(runs, summarise(read_sweep(baseline)).runs)
    assert versus.height == 1  # only the run whose config the baseline also ran
    assert _row(versus, budget=512)["accuracy_delta"] == pytest.approx(1 / 3)


def test_not_a_sweep_folder(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no runs"):
        read_sweep(tmp_path)


def _quantiles(draws: np.ndarray) -> tuple[float, float]:
    low, high = np.quantile(draws, [0.025, 0.975])
    return float(low), float(high)


def test_intervals_match_a_hand_computation_on_the_seed(summary: Summary) -> None:
    # overall accuracy: q1 (1, 1), q2 (1, 0), q3 (0, 0): one question of each type
    rng = np.random.default_rng(stats.SEED)
    copies = rng.multinomial(3, [1 / 3] * 3, stats.RESAMPLES)
    ones = rng.multinomial(copies[:, 1] * 2, [0.5, 0.5])[:, 1]  # q2's repeats drawn again
    overall = _row(summary.accuracy, category="overall", judge="all")
    assert (overall["ci_low"], overall["ci_high"]) == _quantiles((copies[:, 2] + ones / 2) / 3)
    assert (overall["ci_method"], overall["ci_seed"], overall["ci_resamples"]) == (
        "bootstrap", stats.SEED, stats.RESAMPLES)
    # recall: 0 (q3), 0.5 (q2), 1 (q1, q4, q5), one value each
    counts = np.random.default_rng(stats.SEED).multinomial(5, [0.2, 0.2, 0.6], stats.RESAMPLES)
    recall = _row(summary.recall, category="overall")
    assert (recall["ci_low"], recall["ci_high"]) == _quantiles(counts @ [0.0, 0.5, 1.0] / 5)
    run = summary.runs.row(0, named=True)
    assert (run["accuracy_low"], run["accuracy_high"]) == (overall["ci_low"],
                                                           overall["ci_high"])
    # adversarial: q4 alone, two repeats that agree: one question, no interval
    adversarial = _row(summary.accuracy, category="adversarial", judge="all")
    assert adversarial["ci_low"] is None and adversarial["ci_method"] is None


def test_recall_after_llm_selection_per_run(tmp_path: Path) -> None:
    """A T-MEM run records its evidence after selection; the report scores it over the
    scorable questions that have one (other methods have none and show no such row)."""
    from tmem_core.reports._markdown import Report

    root = tmp_path / "hand"
    write_locomo_data(root)
    selected = {"q1": ("m9", "m1"), "q2": ("m3",), "q3": (), "q4": ("m5",)}
    questions = [dataclasses.replace(q, selected=selected.get(q.qid)) for q in QUESTIONS]
    write_run(root, locomo_run("hand", method="tmem", top_k=36), questions)
    write_run(root, locomo_run("hand"))
    result = summarise(read_sweep(root))
    tmem = _row(result.runs, method="tmem")
    # q1 1, q2 1/2, q3 0, q4 1; q5 recorded none
    assert tmem["selection_recall_questions"] == 4
    assert tmem["selection_recall"] == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    assert _row(result.runs, method="bm25")["selection_recall_questions"] == 0
    text = Report(result, "t").render({}, [])
    assert "recall@k after selection" in text and "| 0.625 |" in text
