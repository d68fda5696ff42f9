"""Paired differences on hand-written sweeps: which runs are paired, and each difference with
its interval and test computed by hand on the recorded seed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from tests.reports.conftest import QUESTIONS, locomo_run, write_locomo_data, write_run
from tmem_core.pipeline import BenchmarkConfig
from tmem_core.reports import _stats as stats
from tmem_core.reports import read_sweep, summarise
from tmem_core.reports._markdown import Report

BASE = locomo_run("grid")
SAME = locomo_run("grid", budget=1024)  # the same answers and verdicts as BASE
WORSE = locomo_run("grid", top_k=10)  # q1 judged wrong twice
DENSE = locomo_run("grid", method="dense")
TWO_FIELDS = locomo_run("grid", backbone="b2", budget=2048)
FEWER = dataclasses.replace(BASE, benchmark=BenchmarkConfig("locomo", limit=4))
WORSE_Q1 = [dataclasses.replace(q, scores=(0.0, 0.0)) if q.qid == "q1" else q
            for q in QUESTIONS]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("paired")
    write_locomo_data(root)
    for run in (BASE, SAME, DENSE, TWO_FIELDS, FEWER):
        write_run(root, run)
    write_run(root, WORSE, WORSE_Q1)
    return root


def test_only_runs_over_one_question_set_differing_in_one_dimension_are_paired(
        sweep: Path) -> None:
    paired = summarise(read_sweep(sweep)).paired.filter(metric="accuracy")
    pairs = {(r["varied"], frozenset((r["run_a"], r["run_b"]))) for r in paired.to_dicts()}
    assert pairs == {("budget", frozenset((BASE.run_id, SAME.run_id))),
                     ("top_k", frozenset((BASE.run_id, WORSE.run_id))),
                     ("method", frozenset((BASE.run_id, DENSE.run_id)))}
    paired_runs = {i for _, p in pairs for i in p}
    assert FEWER.run_id not in paired_runs  # the same config but another question set
    assert TWO_FIELDS.run_id not in paired_runs  # backbone and budget both differ


def test_identical_runs_differ_by_zero_with_an_interval_around_it(sweep: Path) -> None:
    paired = summarise(read_sweep(sweep)).paired.filter(run_b=SAME.run_id)
    assert set(paired["metric"]) == {"accuracy", "f1", "recall"}  # no text gold: no EM
    for row in paired.to_dicts():
        assert row["diff"] == 0.0 and row["p_value"] == 1.0, row
        assert row["ci_low"] <= 0.0 <= row["ci_high"]
    recall = paired.filter(metric="recall").row(0, named=True)
    assert recall["questions"] == 5 and recall["test"] == stats.SIGN_FLIP  # recall 0.5 on q2
    accuracy = paired.filter(metric="accuracy").row(0, named=True)
    assert accuracy["questions"] == 3  # q4 reported separately, q5 failed: neither scored


def test_a_difference_matches_a_hand_computation(sweep: Path) -> None:
    row = summarise(read_sweep(sweep)).paired.filter(
        metric="accuracy", run_b=WORSE.run_id).row(0, named=True)
    assert (row["run_a"], row["varied"]) == (BASE.run_id, "top_k")
    assert (row["a"], row["b"]) == pytest.approx((1.5 / 3, 0.5 / 3))
    assert row["diff"] == pytest.approx(-1 / 3)
    # pair types in sorted order: q3 ((0,0),(0,0)), q2 ((0,1),(0,1)), q1 ((1,1),(0,0))
    rng = np.random.default_rng(stats.SEED)
    copies = rng.multinomial(3, [1 / 3] * 3, stats.RESAMPLES)
    ones_a = rng.multinomial(copies[:, 1] * 2, [0.5, 0.5])[:, 1]  # run a's draws within q2
    ones_b = rng.multinomial(copies[:, 1] * 2, [0.5, 0.5])[:, 1]  # then run b's
    diffs = ((ones_b / 2) - (copies[:, 2] + ones_a / 2)) / 3
    assert (row["ci_low"], row["ci_high"]) == tuple(np.quantile(diffs, [0.025, 0.975]))
    assert (row["ci_method"], row["ci_seed"]) == (stats.PAIRED_BOOTSTRAP, stats.SEED)
    # one question differs (by 1): both sign patterns reach it
    assert (row["test"], row["p_value"]) == (stats.SIGN_FLIP, 1.0)


def test_the_report_has_a_table_per_benchmark(sweep: Path) -> None:
    text = Report(summarise(read_sweep(sweep)), "t").render({}, [])
    section = text.split("## Paired differences")[1].split("\n## ")[0]
    assert "### locomo" in section
    assert "| top_k | accuracy | 3 | -0.3333 [" in section
    assert section.count("| budget |") == 3  # accuracy, F1 and recall of BASE and SAME
