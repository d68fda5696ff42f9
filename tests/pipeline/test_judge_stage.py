"""The judge stage asks a question's verdicts at once: the judge's on the prediction and on
each control answer, each with its own calls, in a fixed order."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from tmem_core.llm import CallRecord, ChatRequest, ChatResponse, Usage, load_backbones
from tmem_core.pipeline import parse_sweep
from tmem_core.pipeline._engine import EngineProxy
from tmem_core.pipeline._judge_stage import JudgeStage
from tmem_core.pipeline._runner import plan_run, prepare_benchmark
from tmem_core.results import CALIBRATION_STAGE


class SlowJudge:
    """Says CORRECT after `delay_s`, counting the calls in flight at once."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s, self.in_flight, self.most = delay_s, 0, 0
        self._lock = threading.Lock()

    def __call__(self, requests: list[ChatRequest]
                 ) -> tuple[list[ChatResponse], list[CallRecord]]:
        with self._lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        time.sleep(self.delay_s)
        with self._lock:
            self.in_flight -= 1
        parsed = {"verdict": "CORRECT"}
        answers = [ChatResponse(json.dumps(parsed), parsed, Usage(10, 2), self.delay_s)
                   for _ in requests]
        return answers, [CallRecord.of(self.backbone, r, a)
                         for r, a in zip(requests, answers, strict=True)]

    backbone = load_backbones(None)["sim"]


@pytest.fixture
def stage(tmp_path: Path) -> JudgeStage:
    config = parse_sweep({
        "name": "judged", "results_dir": str(tmp_path),
        "benchmarks": [{"name": "synthetic", "size": 1000, "limit": 4}],
        "grid": {"methods": ["bm25"], "backbones": ["sim"]}})
    bench_dir = prepare_benchmark(config.benchmarks[0], tmp_path / "data")
    plan = plan_run(config.runs()[0], bench_dir, load_backbones(None), tmp_path / "judged")
    return JudgeStage(plan.job)


def test_a_question_s_verdicts_are_asked_at_once(stage: JudgeStage,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    judge = SlowJudge(0.3)
    monkeypatch.setattr(stage, "proxy", lambda backbone, qid, kind=None: EngineProxy(
        judge, backbone, kind or stage.name, qid))
    qid = next(q for q in stage.questions if len(stage.keys(q)) >= 3)
    row = {"qid": qid, "conv_id": stage.questions[qid].conv_id, "prediction": "an answer",
           "context": ""}
    started = time.perf_counter()
    output = stage.process(row, {})
    took = time.perf_counter() - started
    asked = len(output.records) + len(output.controls)
    assert asked == len(stage.keys(qid)) >= 3
    assert judge.most == asked and took < 2 * judge.delay_s  # at once, not one by one
    assert [r["key"] for r in output.records + output.controls] == stage.keys(qid)
    assert [c.stage for c in output.calls] == (
        [stage.name] * len(output.records) + [CALIBRATION_STAGE] * len(output.controls))
