"""Judges are calibrated on control answers before their accuracy is believed: a judge that
says CORRECT to everything is flagged unreliable in the run summary and the report; a judge
that compares with the gold answer is not."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import ScriptedServer, Step, scripted_backbones
from tmem_core.evaluation import normalise
from tmem_core.pipeline import parse_sweep, run_sweep
from tmem_core.reports import write_report
from tmem_core.results import CALIBRATION_STAGE, calibration_store, calls_store

GRADED = re.compile(r"Gold answer: (.*)\nResponse to grade: (.*)\n")


class GoldMatchingJudge(ScriptedServer):
    """CORRECT exactly when the response is the gold answer; answers every other call."""

    def _next(self, body: dict[str, Any], authorization: str) -> Step:
        super()._next(body, authorization)
        graded = GRADED.search(body["messages"][-1]["content"])
        if graded is None:
            return Step(content="I do not know.")
        same = normalise(graded.group(1)) == normalise(graded.group(2))
        return Step(content=json.dumps({"verdict": "CORRECT" if same else "WRONG"}))


def _sweep(tmp_path: Path, server: ScriptedServer) -> list[Any]:
    backbones = scripted_backbones(tmp_path, server, "judge")
    config = parse_sweep({
        "name": "calibrated", "results_dir": str(tmp_path / "results"),
        "backbones_file": str(backbones),
        "benchmarks": [{"name": "synthetic", "size": 200, "limit": 4}],
        "grid": {"methods": ["bm25"], "backbones": ["judge"], "top_k": [4], "budget": [256]}})
    lines: list[str] = []
    summaries = run_sweep(config, log=lines.append, local=True)
    return [summaries, lines, tmp_path / "results" / "calibrated"]


def test_a_yes_saying_judge_is_flagged_unreliable(
        tmp_path: Path, scripted_server: Callable[..., ScriptedServer]) -> None:
    server = scripted_server([Step(content='{"verdict": "CORRECT"}')])
    (summary,), lines, sweep = _sweep(tmp_path, server)
    (calibration,) = summary.calibrations
    assert calibration.tpr == 1.0 and calibration.tnr == 0.0 and not calibration.reliable
    assert calibration.positives == 4 and calibration.negatives == 4
    line = next(line for line in lines if line.startswith(f"run {summary.run_id}"))
    assert "accuracy 1.000 UNRELIABLE (judge judge UNRELIABLE: TPR 1.00 of 4, TNR 0.00 of 4)" \
        in line
    controls = calls_store(summary.run_dir).read_all().to_pylist()
    assert sum(c["stage"] == CALIBRATION_STAGE for c in controls) == 8
    # the method's tokens leave the controls out
    method_calls = [c for c in controls if c["stage"] != CALIBRATION_STAGE]
    assert summary.tokens == sum(c["prompt_tokens"] + c["completion_tokens"]
                                 for c in method_calls)
    report = write_report(sweep).markdown.read_text()
    assert "(unreliable judge: judge)" in report and "## Judge calibration" in report


def test_a_judge_that_compares_with_gold_is_reliable_and_not_asked_twice(
        tmp_path: Path, scripted_server: Callable[..., ScriptedServer]) -> None:
    server = GoldMatchingJudge([Step()])
    try:
        (summary,), lines, _ = _sweep(tmp_path, server)
        (calibration,) = summary.calibrations
        assert (calibration.tpr, calibration.tnr) == (1.0, 1.0) and calibration.reliable
        assert "UNRELIABLE" not in "\n".join(lines)
        controls = calibration_store(summary.run_dir).latest().to_pylist()
        others = [c for c in controls if c["control"] == "other"]
        assert len(others) == 4 and all(c["other_qid"] != c["qid"] for c in others)
        calls_before = server.calls
        (again,), _, _ = _sweep(tmp_path, server)  # a re-run: every control is on record
        assert server.calls == calls_before and again.calibrations == summary.calibrations
    finally:
        server.close()
