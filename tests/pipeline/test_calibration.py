"""Judges are calibrated on the hard cases before their accuracy is believed: per judge and
control kind, a judge that says CORRECT to everything, or one that accepts an outdated
value, is flagged unreliable on exactly the kinds it gets wrong (run line, report, viewer);
a judge that compares with the gold is not; multiple-choice questions get their letters as
controls."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.conftest import FIXTURES, ScriptedServer, Step, scripted_backbones
from tmem_core.benchmarks import LoadRequest, build
from tmem_core.evaluation import KINDS, normalise, says_not_available
from tmem_core.evaluation import _controls as built
from tmem_core.evaluation._controls import Control
from tmem_core.evaluation._dates import dates
from tmem_core.pipeline import parse_sweep, run_sweep
from tmem_core.reports import write_report
from tmem_core.results import _calibration as rates
from tmem_core.results import calls_store
from tmem_core.results._calibration import NOT_CALIBRATED, RELIABLE, UNRELIABLE
from tmem_core.results._count import run_count
from tmem_core.results._layout import CALIBRATION_STAGE, calibration_store
from tmem_core.viewer._data import load_sweep
from tmem_core.viewer._views import sweep_view

GRADED = re.compile(r"Gold answer: (.*)\nResponse to grade: (.*)\n")
SYNTHETIC = {"name": "synthetic", "size": 200, "limit": 4}  # abstention, ku, multi_hop, temporal
_WORDS = {w: str(i) for i, w in enumerate(("zero", "one", "two", "three", "four", "five", "six",
                                           "seven", "eight", "nine", "ten", "eleven", "twelve"))}


def same_facts(gold: str, response: str) -> bool:
    """What a careful judge checks: the gold's dates, and every other word of the gold
    (numbers as digits), in the response; abstention only against abstention."""
    if says_not_available(gold) or says_not_available(response):
        return says_not_available(gold) and says_not_available(response)
    if {d.value for d in dates(gold)} - {d.value for d in dates(response)}:
        return False
    return _words(gold) <= _words(response)


def _words(text: str) -> set[str]:
    for d in reversed(dates(text)):
        text = text[:d.start] + " " + text[d.end:]
    return {_WORDS.get(w, w) for w in normalise(text).split()}


class GradingJudge(ScriptedServer):
    """Grades by `accepts(gold, response)`; answers every other call."""

    def __init__(self, accepts: Callable[[str, str], bool]) -> None:
        super().__init__([Step()])
        self.accepts = accepts

    def _next(self, body: dict[str, Any], authorization: str) -> Step:
        super()._next(body, authorization)
        graded = GRADED.search(body["messages"][-1]["content"])
        if graded is None:
            return Step(content="I do not know.")
        verdict = "CORRECT" if self.accepts(graded.group(1), graded.group(2)) else "WRONG"
        return Step(content=json.dumps({"verdict": verdict}))


def _sweep(tmp_path: Path, server: ScriptedServer, benchmark: dict[str, Any] = SYNTHETIC,
           name: str = "calibrated") -> tuple[Any, list[str], Path]:
    backbones = tmp_path / "backbones-judge.toml"  # one model name for the tmp's re-runs
    if not backbones.exists():
        scripted_backbones(tmp_path, server, "judge")
    config = parse_sweep({
        "name": name, "results_dir": str(tmp_path / "results"),
        "backbones_file": str(backbones),
        "benchmarks": [benchmark],
        "grid": {"methods": ["bm25"], "backbones": ["judge"], "top_k": [4], "budget": [256]}})
    lines: list[str] = []
    (summary,) = run_sweep(config, log=lines.append, local=True)
    return summary, lines, tmp_path / "results" / name


@pytest.fixture(autouse=True)
def few_controls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four questions give a kind at most four controls: these sweeps judge a kind from one
    control on, reliable when its Wilson lower bound reaches 0.2 (one right of one: 0.21;
    none right: 0), to test what the sweep records and shows; the real bar is tested on
    tables in tests/results/test_calibration_rates.py."""
    monkeypatch.setattr(rates, "MIN_CONTROLS", 1)
    monkeypatch.setattr(rates, "RELIABLE_RATE", 0.2)


def _status(summary: Any) -> dict[str, str]:
    (calibration,) = summary.calibrations
    return {k.control: k.status for k in calibration.kinds}


def test_a_yes_saying_judge_is_unreliable_on_every_negative_kind(
        tmp_path: Path, scripted_server: Callable[..., ScriptedServer]) -> None:
    server = scripted_server([Step(content='{"verdict": "CORRECT"}')])
    summary, lines, sweep = _sweep(tmp_path, server)
    assert _status(summary) == {
        "gold": RELIABLE, "paraphrase": RELIABLE, "choice_right": NOT_CALIBRATED,
        "other": UNRELIABLE, "superseded": UNRELIABLE, "shifted_date": UNRELIABLE,
        "made_up": UNRELIABLE, "choice_wrong": NOT_CALIBRATED}
    line = next(line for line in lines if line.startswith(f"run {summary.run_id}"))
    assert ("accuracy 1.000 UNRELIABLE (judge judge UNRELIABLE: other TNR 0.00 [0.00, 0.56] "
            "of 3, superseded TNR 0.00 [0.00, 0.79] of 1, shifted_date TNR 0.00 [0.00, 0.79] "
            "of 1, made_up TNR 0.00 [0.00, 0.79] of 1)") in line
    calls = calls_store(summary.run_dir).read_all()
    controls = [c for c in calls.to_pylist() if c["stage"] == CALIBRATION_STAGE]
    assert len(controls) == calibration_store(summary.run_dir).read_all().num_rows == 14
    # the method's tokens leave the controls out, which have their own count
    count = run_count(calls)
    assert summary.tokens == count.tokens == sum(
        c["prompt_tokens"] + c["completion_tokens"] for c in calls.to_pylist()
        if c["stage"] != CALIBRATION_STAGE)
    assert summary.calibration_tokens == sum(c["prompt_tokens"] + c["completion_tokens"]
                                             for c in controls) > 0
    report = write_report(sweep).markdown.read_text()
    assert "(unreliable judge: judge)" in report and "## Judge calibration" in report
    assert "**UNRELIABLE** 0 [0, 0.7935] (n=1)" in report and "not calibrated" in report
    (run,) = sweep_view(load_sweep(sweep), lambda name, _path: name).runs
    assert run.unreliable_judges == ["judge"]
    assert run.uncalibrated == ["judge:choice_right", "judge:choice_wrong"]
    table = next(t for t in sweep_view(load_sweep(sweep), lambda n, _p: n).tables
                 if t.name == "calibration")
    shown = {row[table.columns.index("status")] for row in table.rows}
    assert shown == {RELIABLE, UNRELIABLE, NOT_CALIBRATED}


def test_a_judge_that_accepts_outdated_values_is_unreliable_on_superseded_only(
        tmp_path: Path) -> None:
    prepared = build("synthetic", LoadRequest(size=200))
    outdated = {row["answer"]: json.loads(row["gold_meta"])["superseded_answers"]
                for row in prepared.questions.to_pylist() if row["gold_meta"]}
    assert outdated  # the generator states every knowledge-update chain's older values

    def lenient(gold: str, response: str) -> bool:  # "it was that value at some point"
        return same_facts(gold, response) or any(
            normalise(old) in normalise(response) for old in outdated.get(gold, []))

    server = GradingJudge(lenient)
    try:
        summary, lines, _ = _sweep(tmp_path, server)
    finally:
        server.close()
    status = _status(summary)
    assert status["superseded"] == UNRELIABLE
    assert {k for k, s in status.items() if s == UNRELIABLE} == {"superseded"}
    assert ("UNRELIABLE (judge judge UNRELIABLE: superseded TNR 0.00 [0.00, 0.79] of 1)"
            in "\n".join(lines))


def test_a_judge_that_compares_with_gold_is_reliable_and_asked_again_on_changed_controls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = GradingJudge(same_facts)
    try:
        summary, lines, _ = _sweep(tmp_path, server)
        status = _status(summary)
        assert {k for k, s in status.items() if s != NOT_CALIBRATED} == set(KINDS) - {
            "choice_right", "choice_wrong"}
        assert set(status.values()) == {RELIABLE, NOT_CALIBRATED}
        assert "UNRELIABLE" not in "\n".join(lines)
        controls = calibration_store(summary.run_dir).latest().to_pylist()
        others = [c for c in controls if c["control"] == "other"]
        assert len(others) == 3 and all(c["other_qid"] not in (None, c["qid"]) for c in others)
        assert all(c["prediction"] for c in controls)
        calls_before = server.calls
        again, _, _ = _sweep(tmp_path, server)  # a re-run: every control is on record
        assert server.calls == calls_before and again.calibrations == summary.calibrations
        # a builder that words its paraphrases otherwise: only those verdicts are asked again
        monkeypatch.setattr(built, "CARRIERS", ("Reworded: {}.",))
        _sweep(tmp_path, server)
        paraphrases = [c for c in controls if c["control"] == "paraphrase"]
        assert server.calls - calls_before == len(paraphrases) > 0
        now = calibration_store(summary.run_dir).latest().to_pylist()
        assert all(c["prediction"].startswith("Reworded: ") == (c["control"] == "paraphrase")
                   for c in now)
    finally:
        server.close()


def test_a_control_hash_changes_with_its_text_and_the_builder_version(
        monkeypatch: pytest.MonkeyPatch) -> None:
    control = Control("other", "Sweden", 0.0, "conv-26:q12")
    assert control.sha256 == Control("other", "Sweden", 0.0, "conv-26:q12").sha256
    assert control.sha256 != Control("other", "Sweden.", 0.0, "conv-26:q12").sha256
    before = control.sha256
    monkeypatch.setattr(built, "CONTROLS_VERSION", built.CONTROLS_VERSION + 1)
    assert control.sha256 != before


def test_multiple_choice_letters_are_controls_scored_by_rule_apart_from_the_judge(
        tmp_path: Path, scripted_server: Callable[..., ScriptedServer]) -> None:
    """EverMemBench scores choice questions by letter: its controls are recorded, and
    counted apart from the LLM judge's rates."""
    server = scripted_server([Step(content='{"verdict": "WRONG"}')])
    benchmark = {"name": "evermembench", "source": str(FIXTURES / "evermembench" / "eval")}
    summary, _, _ = _sweep(tmp_path, server, benchmark, name="choices")
    prepared = build("evermembench", LoadRequest(source=FIXTURES / "evermembench" / "eval"))
    letters = {r["qid"]: r["answer"] for r in prepared.questions.to_pylist()
               if r["answer_kind"] == "choice"}
    assert letters
    controls = pl.DataFrame(calibration_store(summary.run_dir).latest().to_pylist())
    choice = controls.filter(pl.col("control").str.starts_with("choice_"))
    assert set(choice["qid"]) == set(letters)
    for row in choice.iter_rows(named=True):
        right = row["control"] == "choice_right"
        assert (row["prediction"] == letters[row["qid"]]) == right
        assert row["score"] == row["expected"] == (1.0 if right else 0.0)
    assert set(choice["scored_by"]) == {"choice"}
    # the letters are scored by rule: counted apart, never the LLM judge's calibration
    (calibration,) = summary.calibrations
    kinds = {k.control: k for k in calibration.kinds}
    for kind in ("choice_right", "choice_wrong"):
        assert (kinds[kind].status, kinds[kind].controls) == (NOT_CALIBRATED, 0)
        assert kinds[kind].rule_controls == len(letters)
    assert kinds["gold"].status == UNRELIABLE  # the LLM judge says WRONG to every open one
    assert kinds["gold"].controls == controls.filter(
        (pl.col("control") == "gold") & (pl.col("scored_by") == "llm")).height > 0


def test_a_locomo_judge_is_rated_on_the_controls_its_llm_scored_only(
        tmp_path: Path, scripted_server: Callable[..., ScriptedServer], locomo_path: Path
        ) -> None:
    """LoCoMo scores an adversarial question by its not-mentioned rule: those controls (the
    abstention as gold, a made-up answer) are right whatever the judge says, and are counted
    apart; the LLM's rates hold its own verdicts."""
    # LoCoMo's official judge (mem0's): a reason, then the label, as a JSON object
    server = scripted_server([Step(content='{"reason": "Same topic.", "label": "CORRECT"}')])
    benchmark = {"name": "locomo", "source": str(locomo_path), "limit": 5}  # each category
    summary, lines, _ = _sweep(tmp_path, server, benchmark, name="locomo")
    controls = pl.DataFrame(calibration_store(summary.run_dir).latest().to_pylist())
    ruled = controls.filter(pl.col("scored_by") == "rule")
    assert set(ruled["control"]) == {"gold", "paraphrase", "made_up"}
    assert (ruled["score"] == ruled["expected"]).all()  # the rule is never wrong on them
    (calibration,) = summary.calibrations
    kinds = {k.control: k for k in calibration.kinds}
    llm = controls.filter(pl.col("scored_by") == "llm")
    for kind in ("gold", "paraphrase", "other"):
        asked = llm.filter(pl.col("control") == kind)
        assert (kinds[kind].controls, kinds[kind].right) == (
            asked.height, asked.filter(pl.col("score") == pl.col("expected")).height)
    assert kinds["gold"].rule_controls == ruled.filter(pl.col("control") == "gold").height > 0
    # a made-up answer only the rule scored: not calibrated, never reliable by rule alone
    made_up = kinds["made_up"]
    assert (made_up.controls, made_up.status, made_up.rule_controls) == (0, NOT_CALIBRATED, 1)
    assert kinds["other"].status == UNRELIABLE  # the LLM says CORRECT to another's gold
    assert "made_up" not in next(line for line in lines if "UNRELIABLE" in line)
