"""Fixtures of the report tests: one small real sweep on the embedded model (built once), and
hand-written results trees whose every figure is known in advance."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import sweep_on_own_ray, write_sweep
from tmem_core import to_json
from tmem_core.benchmarks import PreparedBenchmark, write_prepared
from tmem_core.methods import Record
from tmem_core.pipeline import BenchmarkConfig, Contract, RunSpec
from tmem_core.results import RECORD_STAGES, calls_store, stage_store
from tmem_core.schema import Gold, Message, Question, messages_to_table, questions_to_table

ROOT = Path(__file__).resolve().parents[2]
SWEEP = "reports-real"
DATA = "locomo-test"
T0 = 1_700_000_000.0


@pytest.fixture(scope="session")
def real_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two real runs (bm25, top_k 4 and 8) of 4 synthetic questions, 2 judge repeats."""
    tmp = tmp_path_factory.mktemp("real")
    config = write_sweep(tmp, SWEEP, [{"name": "synthetic", "size": 300, "limit": 4}],
                         {"methods": ["bm25"], "top_k": [4, 8], "budget": [512],
                          "judge_repeats": 2}, resources={"batch_size": 4})
    done = sweep_on_own_ray(config, timeout=1200)
    (tmp / "sweep.log").write_text(done.stdout)
    return tmp / "results" / SWEEP


@dataclass(frozen=True)
class QSpec:
    """One question of a hand-written run and what each stage recorded for it."""

    qid: str
    category: str
    evidence: tuple[str, ...]
    context: tuple[str, ...]
    scores: tuple[float | None, ...]  # judge j1, one per repeat; None: a failed judge record
    f1: float | None = None
    fails_at: str | None = None  # the stage whose only record failed (later stages: none)
    kind: str = "flat"  # the construct stage's context kind, construct record, degradation
    record: Record | None = None
    degradation: dict[str, int] | None = None
    selected: tuple[str, ...] | None = None  # the evidence after LLM selection (T-MEM)
    conv_id: str = "c1"  # the conversation its records name


QUESTIONS = (
    QSpec("q1", "single-hop", ("m1",), ("m1", "m9"), (1.0, 1.0), 0.8),
    QSpec("q2", "multi-hop", ("m2", "m3"), ("m2",), (1.0, 0.0), 0.5),
    QSpec("q3", "temporal", ("m4",), (), (0.0, 0.0), 0.0),
    QSpec("q4", "adversarial", ("m5",), ("m5",), (1.0, 1.0), 1.0),
    QSpec("q5", "single-hop", ("m6",), ("m6",), (), fails_at="answer"),
)
ANSWER_CALL = {"prompt_tokens": 100, "completion_tokens": 10, "cost_usd": 0.001}
JUDGE_CALL = {"prompt_tokens": 50, "completion_tokens": 5, "cost_usd": 0.0005}
MEMORY_CALL = {"prompt_tokens": 1000, "completion_tokens": 100, "cost_usd": 0.01}


def write_locomo_data(root: Path, questions: Sequence[QSpec] = QUESTIONS) -> Path:
    """A tiny prepared LoCoMo-shaped benchmark: one conversation, messages m1..m9."""
    when = datetime(2024, 1, 1, tzinfo=UTC)
    messages = [Message("c1", f"m{i}", i, when, f"message {i}") for i in range(1, 10)]
    items = [(Question("c1", q.qid, f"question {q.qid}?", q.category),
              Gold(q.qid, "an answer", q.evidence)) for q in questions]
    target = root / "data" / DATA
    write_prepared(PreparedBenchmark("locomo", messages_to_table(messages),
                                     questions_to_table(items), {"benchmark": "locomo"}), target)
    return target


def locomo_run(sweep: str, **changes: Any) -> RunSpec:
    values: dict[str, Any] = {"method": "bm25", "params": {}, "backbone": "b1",
                              "judges": ("j1",), "top_k": 5, "budget": 512,
                              "judge_repeats": 2, **changes}
    return RunSpec(sweep, BenchmarkConfig("locomo", limit=5), **values)


def write_run(root: Path, run: RunSpec, questions: Sequence[QSpec] = QUESTIONS) -> Path:
    """A run's contract and records, written with the pipeline's own stores."""
    run_dir = root / run.run_id
    Contract(run.run_id, run.identity(), "0" * 64, data={"dir": str(root / "data" / DATA)},
             started_at=T0, ended_at=T0 + 60.0).write(run_dir)
    stores = {stage: stage_store(run_dir, stage) for stage in RECORD_STAGES}
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in stores}
    calls: list[dict[str, Any]] = [_call(run, "memory", "q1", MEMORY_CALL)]
    for q in questions:
        _question_rows(run, q, rows, calls)
    stores["retrieve"].append([_record(run, "q1", ok=False, error="retrieve: transient")])
    for name, store in stores.items():
        store.append(rows[name])
    calls_store(run_dir).append(calls)
    return run_dir


def _question_rows(run: RunSpec, q: QSpec, rows: dict[str, list[dict[str, Any]]],
                   calls: list[dict[str, Any]]) -> None:
    payload: dict[str, dict[str, Any]] = {
        "retrieve": {"evidence_ids": list(q.context), "latency_s": 0.1},
        "construct": {"kind": q.kind, "context_ids": list(q.context), "tokens": 100,
                      "latency_s": 0.2, "payload": to_json(q.record) if q.record else None,
                      "degradation": json.dumps(q.degradation or {}),
                      "selected_ids": None if q.selected is None else list(q.selected)},
        "answer": {"prediction": "a prediction", "latency_s": 1.0},
    }
    for stage, values in payload.items():
        failed = q.fails_at == stage
        rows[stage].append(_record(run, q.qid, conv_id=q.conv_id, ok=not failed,
                                   error=f"{stage}: boom" if failed else None, **values))
        if stage == "answer":
            calls.append(_call(run, "answer", q.qid, ANSWER_CALL, failed))
        if failed:
            return
    for repeat, score in enumerate(q.scores):
        rows["judge"].append(_record(
            run, q.qid, key=f"{q.qid}|j1|{repeat}", conv_id=q.conv_id, ok=score is not None,
            error=None if score is not None else "unparseable verdict", judge="j1",
            repeat=repeat, category=q.category, answer_kind="text", score=score, f1=q.f1))
        calls.append(_call(run, "judge", q.qid, JUDGE_CALL, key=f"{repeat}"))


def _record(run: RunSpec, qid: str, key: str | None = None, conv_id: str = "c1",
            **values: Any) -> dict[str, Any]:
    return {"run_id": run.run_id, "key": key or qid, "qid": qid, "conv_id": conv_id, **values}


def _call(run: RunSpec, stage: str, qid: str, usage: dict[str, Any], failed: bool = False,
          key: str = "") -> dict[str, Any]:
    request = f"{stage}-{qid}-{key}"
    return {"run_id": run.run_id, "key": f"{stage}|{qid}|{request}", "qid": qid,
            "conv_id": None, "ok": not failed, "error": "timed out" if failed else None,
            "error_kind": "timeout" if failed else None, "backbone": run.backbone,
            "model": "m", "stage": stage, "request_hash": request, "latency_s": 0.5,
            "cached": False, **usage}


@pytest.fixture
def locomo_sweep(tmp_path: Path) -> Path:
    """A hand-written LoCoMo sweep: one run, every figure known (see QUESTIONS)."""
    root = tmp_path / "hand"
    write_locomo_data(root)
    write_run(root, locomo_run("hand"))
    return root
