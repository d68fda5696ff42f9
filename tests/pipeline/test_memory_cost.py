"""A method's tokens and cost do not depend on what ran before: a sweep run again, on warm
caches and with T2Mem memories another sweep built, reports the same tokens per question per
stage for every run, and spends nothing new."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from tests.conftest import Step, scripted_backbones
from tests.pipeline.shaped import ShapedServer
from tmem_core.llm._accounting import CallRecord
from tmem_core.pipeline import parse_sweep, run_sweep
from tmem_core.pipeline._stage import Output, StageResult, call_rows
from tmem_core.reports import read_sweep, summarise
from tmem_core.results import MEMORY_STAGE, calls_store, memory_qid
from tmem_core.results._count import run_count

STEP = {"reasoning": "The notes suffice.", "memory": "cadence changed", "action": "answer",
        "argument": ""}


class AnsweringServer(ShapedServer):
    """A loop step answers at once; an answer says the cadence changed."""

    def reply(self, kind: str, body: dict[str, Any]) -> str:
        return json.dumps(STEP) if kind == "step" else "It changed to daily."


def _sweep(tmp_path: Path, name: str, backbones: Path) -> dict[str, Any]:
    config = parse_sweep({
        "name": name, "results_dir": str(tmp_path / name), "backbones_file": str(backbones),
        "benchmarks": [{"name": "synthetic", "size": 200, "limit": 2}],
        "grid": {"methods": ["t2mem", "bm25"], "backbones": ["priced"], "top_k": [4],
                 "budget": [512]},
        "methods": {"t2mem": {"episodes": "topic_window", "topic_gap_hours": 1440,
                              "max_entries": 2}}})
    summaries = {s.run_id.split("_")[1]: s for s in run_sweep(config, log=lambda _: None,
                                                              local=True)}
    tokens = summarise(read_sweep(tmp_path / name / name)).tokens
    return {"summaries": summaries, "tokens": tokens}


def _per_stage(tokens: pl.DataFrame, run_id: str) -> dict[str, float]:
    rows = tokens.filter(pl.col("run_id") == run_id).select("stage", "tokens_per_question")
    return dict(rows.iter_rows())


def test_warm_caches_and_reused_memories_report_the_same_tokens(tmp_path: Path) -> None:
    server = AnsweringServer([Step()])
    try:
        backbones = scripted_backbones(tmp_path, server, "priced")
        backbones.write_text(backbones.read_text()
                             + "prices = { input_per_mtok = 1.0, output_per_mtok = 2.0 }\n")
        first = _sweep(tmp_path, "first", backbones)
        calls_after_first = server.calls
        second = _sweep(tmp_path, "second", backbones)  # another sweep: its memory is reused
    finally:
        server.close()
    assert server.calls == calls_after_first  # nothing new reached the engine
    for method in ("t2mem", "bm25"):
        a, b = first["summaries"][method], second["summaries"][method]
        assert _per_stage(first["tokens"], a.run_id) == _per_stage(second["tokens"], b.run_id)
        assert a.tokens == b.tokens and a.method_cost_usd == b.method_cost_usd > 0
        assert a.cost_usd > 0 and b.cost_usd == 0  # spent now: only the first time
    memory = _per_stage(first["tokens"], first["summaries"]["t2mem"].run_id)["memory"]
    assert memory > 0  # the memory's extraction is part of T2Mem's tokens, both times


class FlakyExtraction(AnsweringServer):
    """Refuses the first `failures` extraction requests (a server error), then answers."""

    def __init__(self, failures: int) -> None:
        super().__init__([Step()])
        self.failures, self.extractions = failures, 0

    def _next(self, body: dict[str, Any], authorization: str) -> Step:
        step = super()._next(body, authorization)
        if body["messages"][0]["content"].startswith("You write light metadata"):
            self.extractions += 1
            if self.extractions <= self.failures:
                return Step(status=500)
        return step


def test_a_build_retried_within_a_run_records_the_calls_of_the_retry(tmp_path: Path) -> None:
    server = FlakyExtraction(failures=1)
    try:
        backbones = scripted_backbones(tmp_path, server, "flaky")
        backbones.write_text(backbones.read_text().replace(
            "engine = {", "engine = { max_attempts = 1,"))
        config = parse_sweep({
            "name": "flaky", "results_dir": str(tmp_path / "flaky"),
            "backbones_file": str(backbones),
            "benchmarks": [{"name": "synthetic", "size": 200, "limit": 2}],
            "grid": {"methods": ["t2mem"], "backbones": ["flaky"], "top_k": [4],
                     "budget": [512]},
            "methods": {"t2mem": {"episodes": "topic_window", "topic_gap_hours": 1440,
                                  "max_entries": 2}}})
        (summary,) = run_sweep(config, log=lambda _: None, local=True)
    finally:
        server.close()
    calls = calls_store(Path(summary.run_dir)).latest().to_pylist()
    memory = [c for c in calls if c["stage"] == "memory"]
    # the failed extraction was retried by a later prepare of the same run: on record, ok
    assert server.extractions > server.failures
    assert len(memory) == server.extractions - server.failures and all(c["ok"] for c in memory)


def _call(qid: str, request_hash: str) -> CallRecord:
    return CallRecord("priced", "sim-a", MEMORY_STAGE if qid.startswith("memory:") else
                      "retrieve", qid, request_hash, 100, 10, 0.1, False, 0.001, None, None)


def test_a_memorys_calls_count_whichever_question_recorded_them() -> None:
    """A conversation's memory built for one question, one of its calls retried for
    another: every call of the memory counts, under the stage's dependencies (a question's
    own calls under its own, with its data)."""
    memory = memory_qid("conv-26")
    first = StageResult({"qid": "conv-26:q0"}, Output(calls=[
        _call(memory, "a"), _call(memory, "b"), _call("conv-26:q0", "c")]))
    retried = StageResult({"qid": "conv-26:q7"}, Output(calls=[_call(memory, "b")]))
    deps = {"conv-26:q0": '{"data question":"0"}', "conv-26:q7": '{"data question":"7"}'}
    rows = [{**row, "written_at": float(i), "code": None} for i, row in enumerate(call_rows(
        "r", [first, retried], lambda qid: deps.get(qid, '{"backbone priced":"x"}')))]
    assert [r["deps"] for r in rows if r["qid"] == memory] == ['{"backbone priced":"x"}'] * 3
    count = run_count(pa.Table.from_pylist(rows, schema=calls_store(Path(".")).schema))
    assert count.tokens == 3 * 110  # memory calls a and b, and q0's own call
