"""What the pages show of a hand-written sweep whose every figure is known in advance
(tests/reports/conftest.py: q1..q5, q5 failing at answer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reports.conftest import QSpec, locomo_run, write_locomo_data, write_run
from tmem_core.methods import Record
from tmem_core.methods.external._record import MemoryUsed, system_record
from tmem_core.methods.external._system import Recalled
from tmem_core.results import stage_store
from tmem_core.results._calibration import MIN_CONTROLS
from tmem_core.results._layout import calibration_store
from tmem_core.viewer._data import SweepData, load_sweep
from tmem_core.viewer._question import question_views
from tmem_core.viewer._views import run_view, sweep_view

RUN = locomo_run("hand")


@pytest.fixture
def data(tmp_path: Path) -> SweepData:
    write_locomo_data(tmp_path)
    write_run(tmp_path, RUN)
    return load_sweep(tmp_path)


def test_question_rows_carry_outcome_disagreement_and_errors(data: SweepData) -> None:
    view = run_view(data, RUN.run_id)
    assert view is not None
    rows = {q.qid: q for q in view.questions}
    # q2's two repeats scored 1 and 0: a mean of 0.5 counts as correct, and the judges disagree
    assert {q: r.outcome for q, r in rows.items()} == {
        "q1": "correct", "q2": "correct", "q3": "wrong", "q4": "correct", "q5": "failed"}
    assert [q for q, r in rows.items() if r.disagreement] == ["q2"]
    assert rows["q5"].error == "answer: boom" and rows["q5"].prediction is None
    assert (rows["q1"].question, rows["q1"].answer) == ("question q1?", "an answer")
    assert view.categories == ["adversarial", "multi-hop", "single-hop", "temporal"]


def test_run_row_headline(data: SweepData) -> None:
    (run,) = sweep_view(data, lambda name, _path: name).runs
    assert (run.questions, run.judged, run.failed, run.pending) == (5, 4, 1, 0)
    assert run.accuracy == pytest.approx(0.5) and not run.running
    assert (run.errors, run.failed_attempts) == (2, 3)  # q5's answer and call; q1's retry
    # spent now: q1's memory call, five answers (q5's timed out, and spent), eight judge calls
    assert run.cost_per_question == pytest.approx((0.01 + 0.001 * 5 + 0.0005 * 8) / 5)


def test_question_page_records(data: SweepData) -> None:
    views = question_views(data, RUN.run_id, ["q1", "q2", "nope"])
    assert set(views) == {"q1", "q2"}
    q1, q2 = views["q1"], views["q2"]
    assert [c.stage for c in q1.calls] == ["memory", "answer", "judge", "judge"]
    assert [c.prompt_tokens for c in q1.calls] == [1000, 100, 50, 50]
    assert [(f.store, f.error) for f in q1.failures] == [("retrieve", "retrieve: transient")]
    assert [(v.repeat, v.verdict) for v in q2.verdicts] == [(0, "correct"), (1, "wrong")]
    assert [(e.id, e.in_context) for e in q2.evidence] == [("m2", True), ("m3", False)]
    assert q1.context is not None and q1.context.forest is None and q1.context.timeline is None


def test_unknown_run(data: SweepData) -> None:
    assert run_view(data, "nope") is None
    assert question_views(data, "nope", ["q1"]) == {}


def test_run_row_flags_an_unreliable_judge_and_a_degraded_method(tmp_path: Path) -> None:
    write_locomo_data(tmp_path)
    run_dir = write_run(tmp_path, RUN)
    calibration_store(run_dir).append([  # a judge that calls the gold answer wrong
        {"run_id": RUN.run_id, "key": f"q{i}|{judge}|gold", "qid": f"q{i}", "conv_id": "c",
         "ok": True, "judge": judge, "control": "gold", "score": 0.0, "expected": 1.0,
         "scored_by": "llm"} for judge in RUN.judges for i in range(MIN_CONTROLS)])
    stage_store(run_dir, "construct").append([
        {"run_id": RUN.run_id, "key": "q1", "qid": "q1", "conv_id": "c", "ok": True,
         "kind": "flat", "context_ids": [], "tokens": 10,
         "degradation": '{"selection_fallback_batches": 2, "admitted_total": 5}'}])
    (run,) = sweep_view(load_sweep(tmp_path), lambda name, _path: name).runs
    assert run.unreliable_judges == sorted(RUN.judges)
    assert run.degraded == {"selection_fallback_batches": 2}


def test_run_row_has_intervals_and_causes(data: SweepData) -> None:
    (run,) = sweep_view(data, lambda name, _path: name).runs
    overall = data.summary.accuracy.filter(category="overall", judge="all").row(0, named=True)
    assert run.accuracy_ci == [overall["ci_low"], overall["ci_high"]]
    assert run.accuracy_ci[0] < 0.5 < run.accuracy_ci[1]
    assert run.recall_basis == "shown" and run.recall_untraceable == 0
    assert {c: n for c, n in run.causes.items() if n} == {
        "correct": 2, "judging": 1, "retrieval": 1, "error": 1}  # q2's judges split 1/0
    assert [(g.in_context, g.correct, g.questions) for g in run.gold_context] == [
        (True, 2, 2), (False, 1, 2)]  # q1, q4 | q2 (half its gold, still correct), q3
    view = run_view(data, RUN.run_id)
    assert view is not None
    assert {q.qid: q.cause for q in view.questions}["q3"] == "retrieval"


def test_the_sweep_page_has_the_paired_differences(tmp_path: Path) -> None:
    write_locomo_data(tmp_path)
    write_run(tmp_path, RUN)
    other = locomo_run("hand", top_k=10)
    write_run(tmp_path, other)
    pairs = sweep_view(load_sweep(tmp_path), lambda name, _path: name).pairs
    assert {(p.varied, p.metric) for p in pairs} == {("top_k", "accuracy"), ("top_k", "f1"),
                                                     ("top_k", "recall")}
    assert all(p.diff == 0.0 and p.p_value == 1.0 for p in pairs)


def test_gold_of_an_untraceable_context_is_not_measurable(tmp_path: Path) -> None:
    memory = system_record("mem", "q", [Recalled("a rewritten fact", None, (), 1.0)], 1,
                           MemoryUsed("b1", "/m", True), ())
    questions = [QSpec("q1", "single-hop", ("m1",), (), (0.0, 0.0), kind="memory",
                       record=memory)]
    write_locomo_data(tmp_path, questions)
    write_run(tmp_path, RUN, questions)
    q1 = question_views(load_sweep(tmp_path), RUN.run_id, ["q1"])["q1"]
    assert q1.evidence_basis == "untraceable"
    assert [(e.id, e.in_context) for e in q1.evidence] == [("m1", None)]
    assert (q1.row.cause, q1.row.recall) == ("untraceable", None)


def test_a_search_o1_question_page_has_no_t2mem_timeline(tmp_path: Path) -> None:
    questions = [QSpec("q1", "single-hop", ("m1",), ("m1",), (1.0, 1.0), kind="memory",
                       record=Record(basis="read"))]
    write_locomo_data(tmp_path, questions)
    write_run(tmp_path, RUN, questions)
    q1 = question_views(load_sweep(tmp_path), RUN.run_id, ["q1"])["q1"]
    assert q1.context is not None and q1.context.timeline is None
    assert q1.evidence_basis == "read" and [e.in_context for e in q1.evidence] == [True]
