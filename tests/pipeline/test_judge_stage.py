"""The judge stage asks a question's verdicts in a batch per kind: the judge's on the
prediction in one, on the control answers in another; records in a fixed order."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.pipeline.small_job import small_job
from tmem_core.llm import ChatRequest, ChatResponse, Usage, load_backbones
from tmem_core.llm._accounting import CallRecord
from tmem_core.llm._types import error_response
from tmem_core.pipeline._engine import EngineProxy
from tmem_core.pipeline._judge_stage import JudgeStage
from tmem_core.pipeline._stage import Output
from tmem_core.results._layout import CALIBRATION_STAGE


class SlowJudge:
    """Says CORRECT after `delay_s`, counting the calls in flight at once."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s, self.in_flight, self.most = delay_s, 0, 0
        self.batches: list[int] = []
        self._lock = threading.Lock()

    def __call__(self, requests: list[ChatRequest]
                 ) -> tuple[list[ChatResponse], list[CallRecord]]:
        with self._lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.batches.append(len(requests))
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
    return JudgeStage(small_job(tmp_path, "judged"))


def test_a_question_s_verdicts_are_asked_in_a_batch_per_kind(
        stage: JudgeStage, monkeypatch: pytest.MonkeyPatch) -> None:
    judge = SlowJudge(0.3)
    monkeypatch.setattr(stage, "proxy", lambda backbone, qid, kind=None: EngineProxy(
        judge, backbone, kind or stage.name, qid))
    qid = next(q for q in stage.questions if len(stage.keys(q)) >= 3)
    row = {"qid": qid, "conv_id": stage.questions[qid].conv_id, "prediction": "an answer",
           "context": ""}
    started = time.perf_counter()
    output = stage.process(row, {})
    took = time.perf_counter() - started
    controls = len(stage.keys(qid)) - 1  # one judge, one repeat
    assert len(output.records) == 1 and len(output.controls) == controls >= 2
    assert sorted(judge.batches) == [1, controls]  # one route each
    assert took < 3 * judge.delay_s  # two rounds, not one per verdict
    assert [r["key"] for r in output.records + output.controls] == stage.keys(qid)
    assert all(r["score"] == 1.0 and r["ok"] for r in output.records + output.controls)
    assert sorted(c.stage for c in output.calls) == sorted(
        [stage.name] + [CALIBRATION_STAGE] * controls)


Engine = Callable[[list[ChatRequest]], tuple[list[ChatResponse], list[CallRecord]]]


def _answering(answer: Callable[[int, int], ChatResponse]) -> tuple[Engine, list[list[int]]]:
    """An engine answering request i of batch b with `answer(b, i)`, and the seeds asked,
    batch by batch."""
    asked: list[list[int]] = []

    def engine(requests: list[ChatRequest]) -> tuple[list[ChatResponse], list[CallRecord]]:
        asked.append([r.sampling.seed if r.sampling else -1 for r in requests])
        answers = [answer(len(asked) - 1, i) for i in range(len(requests))]
        return answers, [CallRecord.of(SlowJudge.backbone, r, a)
                         for r, a in zip(requests, answers, strict=True)]

    return engine, asked


def _controls_judged(stage: JudgeStage, monkeypatch: pytest.MonkeyPatch, engine: Engine
                     ) -> tuple[Output, int]:
    """A question's control verdicts from `engine`, and how many controls it has."""
    monkeypatch.setattr(stage, "proxy", lambda backbone, qid, kind=None: EngineProxy(
        engine, backbone, kind or stage.name, qid))
    qid = next(q for q in stage.questions if len(stage.keys(q)) >= 3)
    controls = stage._controls_of(qid, stage.job.judges[0])
    output = Output()
    stage._control(output, {"qid": qid, "conv_id": stage.questions[qid].conv_id},
                   stage.questions[qid], stage.gold[qid], stage.job.judges[0], controls)
    return output, len(controls)


def test_an_unparseable_verdict_alone_is_asked_again(
        stage: JudgeStage, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, asked = _answering(lambda batch, i: ChatResponse("maybe?") if batch == i == 0 else
                               ChatResponse('{"verdict": "WRONG"}', {"verdict": "WRONG"}))
    output, controls = _controls_judged(stage, monkeypatch, engine)
    assert asked == [[0] * controls, [1]]  # the first, again, at its second attempt
    assert [r["score"] for r in output.controls] == [0.0] * controls
    assert len(output.calls) == controls + 1 and not output.records


def test_a_failed_call_is_an_error_record_and_is_not_asked_again(
        stage: JudgeStage, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, asked = _answering(
        lambda _, i: error_response("timeout", "the judge timed out") if i == 0 else
        ChatResponse('{"verdict": "CORRECT"}', {"verdict": "CORRECT"}))
    output, controls = _controls_judged(stage, monkeypatch, engine)
    assert [len(batch) for batch in asked] == [controls]  # one batch, the failure not retried
    first, *rest = output.controls
    assert not first["ok"] and first["score"] is None and "timed out" in first["error"]
    assert all(r["ok"] and r["score"] == 1.0 for r in rest) and len(rest) == controls - 1
