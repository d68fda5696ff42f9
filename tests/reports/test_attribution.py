"""Failure attribution and evidence basis on a hand-written sweep whose every question's cause
is planted: the counts, P(correct | gold in context) and recall must be what was planted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reports.conftest import QSpec, locomo_run, write_locomo_data, write_run
from tmem_core.methods import Record
from tmem_core.methods.external._record import MemoryUsed, SystemRecord, system_record
from tmem_core.methods.external._system import Recalled
from tmem_core.reports import Summary, read_sweep, summarise
from tmem_core.reports._markdown import Report
from tmem_core.reports._stats import wilson
from tmem_core.results._calibration import MIN_CONTROLS
from tmem_core.results._layout import calibration_store


def _external(*items: tuple[bool, tuple[str, ...]]) -> SystemRecord:
    """An external memory system's record of the items it recalled (raw or not, their
    sources), all shown."""
    recalled = [Recalled("a memory", None, ids, 1.0, raw) for raw, ids in items]
    return system_record("mem", "q", recalled, len(recalled), MemoryUsed("b1", "/m", True), ())


WRONG = (0.0, 0.0)
PLANTED = {  # qid -> (question, its cause)
    "q1": (QSpec("q1", "single-hop", ("m1",), ("m1",), (1.0, 1.0)), "correct"),
    "q2": (QSpec("q2", "single-hop", ("m2",), (), (1.0, 0.0, 0.0)), "judging"),
    "q3": (QSpec("q3", "multi-hop", ("m3",), (), WRONG,
                 degradation={"selection_fallback_batches": 1, "selection_batches_total": 3}),
           "degraded"),
    "q4": (QSpec("q4", "multi-hop", ("m4",), ("m4", "m1"), WRONG,
                 degradation={"selection_batches_total": 3}), "synthesis"),  # totals only
    "q5": (QSpec("q5", "temporal", (), ("m5",), WRONG), "unknown"),
    "q6": (QSpec("q6", "temporal", ("m6",), (), WRONG, kind="memory",
                 record=_external((True, ("m6",)), (False, ()))), "untraceable"),
    "q7": (QSpec("q7", "single-hop", ("m7", "m8"), ("m7",), WRONG), "retrieval"),
    "q8": (QSpec("q8", "single-hop", ("m8",), ("m1",), WRONG), "retrieval"),
    "q9": (QSpec("q9", "multi-hop", ("m9",), ("m9",), WRONG, kind="memory",
                 record=Record(basis="read")), "synthesis"),  # T2Mem-like: read
    "q10": (QSpec("q10", "temporal", ("m2",), (), (), fails_at="construct"), "error"),
    "q11": (QSpec("q11", "temporal", ("m5",), (), WRONG, kind="memory",
                  record=_external((False, ("m5",)))), "synthesis"),  # a memory with sources
}
QUESTIONS = [q for q, _ in PLANTED.values()]
RUN = locomo_run("planted", judge_repeats=3)
UNRELIABLE = locomo_run("planted", judge_repeats=3, budget=1024)


def write_planted(root: Path) -> None:
    """Two runs of the planted questions; the second one's judge fails its calibration."""
    write_locomo_data(root, QUESTIONS)
    write_run(root, RUN, QUESTIONS)
    run_dir = write_run(root, UNRELIABLE, QUESTIONS)
    calibration_store(run_dir).append([
        {"run_id": UNRELIABLE.run_id, "key": f"q1|j1|gold|{i}", "qid": "q1", "conv_id": "c1",
         "ok": True, "judge": "j1", "control": "gold", "score": 0.0, "expected": 1.0,
         "scored_by": "llm"} for i in range(MIN_CONTROLS)])


@pytest.fixture
def summary(tmp_path: Path) -> Summary:
    write_planted(tmp_path)
    return summarise(read_sweep(tmp_path))


def _counts(summary: Summary, run_id: str) -> dict[str, int]:
    rows = summary.attribution.filter(run_id=run_id)
    return {c: n for c, n in rows.select("cause", "questions").iter_rows() if n}


def test_each_question_gets_its_planted_cause(summary: Summary) -> None:
    causes = dict(summary.questions.filter(run_id=RUN.run_id).select("qid", "cause").iter_rows())
    assert causes == {qid: cause for qid, (_, cause) in PLANTED.items()}
    assert _counts(summary, RUN.run_id) == {"correct": 1, "judging": 1, "degraded": 1,
                                            "unknown": 1, "untraceable": 1, "retrieval": 2,
                                            "synthesis": 3, "error": 1}


def test_shares_are_of_judged_questions_and_errors_are_apart(summary: Summary) -> None:
    rows = {r["cause"]: r for r in summary.attribution.filter(run_id=RUN.run_id).to_dicts()}
    assert rows["synthesis"]["share"] == pytest.approx(3 / 10)
    assert rows["error"]["share"] is None and rows["pending"]["share"] is None
    assert sum(r["share"] or 0 for r in rows.values()) == pytest.approx(1.0)


def test_an_unreliable_judge_makes_every_loss_a_judging_one(summary: Summary) -> None:
    assert _counts(summary, UNRELIABLE.run_id) == {"correct": 1, "judging": 9, "error": 1}


def test_p_correct_given_gold_in_context(summary: Summary) -> None:
    rows = {r["in_context"]: r for r in summary.gold_context.filter(run_id=RUN.run_id).to_dicts()}
    # in context: q1 (correct), q4, q9 (read), q11 (read through its memory's sources)
    # not: q2, q3, q8 (none of it) and q7 (part of it); q5 has no gold, q6 is untraceable
    assert (rows[True]["correct"], rows[True]["questions"]) == (1, 4)
    assert (rows[False]["correct"], rows[False]["questions"]) == (0, 4)
    assert rows[True]["basis"] == "read+shown" and rows[False]["basis"] == "shown"
    expected = wilson(1, 4)
    assert (rows[True]["ci_low"], rows[True]["ci_high"]) == (expected.low, expected.high)
    assert rows[True]["ci_method"] == "wilson"


def test_untraceable_recall_is_not_measurable_never_zero(summary: Summary) -> None:
    q6 = summary.questions.filter(run_id=RUN.run_id, qid="q6").row(0, named=True)
    assert (q6["recall"], q6["evidence_basis"], q6["gold_in_context"]) == (
        None, "untraceable", None)
    overall = summary.recall.filter(run_id=RUN.run_id, category="overall").row(0, named=True)
    # q1 1, q2 0, q3 0, q4 1, q7 0.5, q8 0, q9 1, q11 1; q6 left out, counted as untraceable
    assert overall["recall"] == pytest.approx(4.5 / 8)
    assert (overall["questions"], overall["untraceable"]) == (8, 1)
    temporal = summary.recall.filter(run_id=RUN.run_id, category="temporal").row(0, named=True)
    assert (temporal["questions"], temporal["untraceable"]) == (1, 1)  # q11 measured, q6 not
    run = summary.runs.filter(run_id=RUN.run_id).row(0, named=True)
    assert (run["recall_untraceable"], run["recall_basis"]) == (1, "read+shown")


def test_an_untraceable_run_reads_not_measurable(tmp_path: Path) -> None:
    only = [QSpec("q1", "single-hop", ("m1",), (), WRONG, kind="memory",
                  record=_external((False, ())))]
    write_locomo_data(tmp_path, only)
    write_run(tmp_path, RUN, only)
    summary = summarise(read_sweep(tmp_path))
    run = summary.runs.row(0, named=True)
    assert run["recall"] is None and run["recall_untraceable"] == 1
    assert "| not measurable |" in "\n".join(Report(summary, "t").runs())


def test_the_report_shows_the_attribution(summary: Summary) -> None:
    text = Report(summary, "t").render({}, [])
    section = text.split("## Failure attribution")[1].split("\n## ")[0]
    assert "| correct | judging | degraded | unknown | untraceable | retrieval | synthesis |" \
           in section
    def cell(n: int) -> str:  # of ten judged questions, in one conversation: Wilson's
        ci = wilson(n, 10)
        return f"{n} ({n / 10:.0%} [{ci.low:.0%}, {ci.high:.0%}])"
    assert cell(3) == "3 (30% [11%, 60%])"
    planted = " | ".join(cell(n) for n in (1, 1, 1, 1, 1, 2, 3))
    assert f"| read+shown | {planted} | 1 | 0 |" in section
    assert f"| read+shown | {cell(1)} | {cell(9)} | 0 | 0 | 0 | 0 | 0 | 1 | 0 |" in section
    assert "0.25 [" in section and "(1/4)" in section and "(0/4)" in section


def test_judges_that_split_put_a_question_under_judging_not_correct(tmp_path: Path) -> None:
    """1/0 averages 0.5, which counts as correct in accuracy; the cause is the split."""
    split = [QSpec("q1", "single-hop", ("m1",), ("m1",), (1.0, 0.0)),
             QSpec("q2", "single-hop", ("m2",), ("m2",), (1.0, 1.0))]
    write_locomo_data(tmp_path, split)
    write_run(tmp_path, RUN, split)
    questions = summarise(read_sweep(tmp_path)).questions
    assert dict(questions.select("qid", "cause").iter_rows()) == {"q1": "judging",
                                                                 "q2": "correct"}
    assert questions.filter(qid="q1")["score"].item() == 0.5


def test_shares_carry_intervals_by_conversation_where_questions_share_one(
        tmp_path: Path) -> None:
    # LoCoMo-like: three conversations of four questions, all lost in one conversation
    right, wrong = (1.0, 1.0), WRONG
    questions = [QSpec(f"q{4 * c + i + 1}", "single-hop", ("m1",), ("m1",),
                       wrong if c == 0 else right, conv_id=f"conv-{26 + c}")
                 for c in range(3) for i in range(4)]
    write_locomo_data(tmp_path, questions)
    write_run(tmp_path, RUN, questions)
    summary = summarise(read_sweep(tmp_path))
    rows = {r["cause"]: r for r in summary.attribution.to_dicts()}
    assert rows["correct"]["share"] == pytest.approx(8 / 12)
    assert rows["correct"]["ci_unit"] == "conversation"
    assert rows["correct"]["ci_method"] == "cluster bootstrap"
    as_questions = wilson(8, 12)
    assert rows["correct"]["ci_high"] - rows["correct"]["ci_low"] > (
        as_questions.high - as_questions.low)  # type: ignore[operator]
    assert rows["error"]["share"] is None and rows["error"]["ci_low"] is None
    overall = summary.accuracy.filter(category="overall", judge="all").row(0, named=True)
    assert (overall["ci_unit"], overall["ci_method"]) == ("conversation", "cluster bootstrap")
