"""Each question's calls wait by its place among the sweep's questions (runs in grid order),
so questions finish in order; a call other questions wait for keeps its own priority."""

from __future__ import annotations

from pathlib import Path

from tmem_core.llm import ChatRequest, ChatResponse, get_backbone, load_backbones
from tmem_core.llm._accounting import CallRecord
from tmem_core.llm._gating import gating_threads, gating_work
from tmem_core.llm._types import GATING_PRIORITY
from tmem_core.pipeline import parse_sweep
from tmem_core.pipeline._data import prepare_benchmark
from tmem_core.pipeline._engine import EngineProxy
from tmem_core.pipeline._planning import in_order, plan_run
from tmem_core.results import MEMORY_STAGE


def test_a_question_s_requests_carry_its_place_and_a_gating_call_keeps_its_own() -> None:
    proxy = EngineProxy(lambda _: ([], []), get_backbone("sim"), "construct", "q7", "c1",
                        priority=41)
    asked = [ChatRequest.from_prompt("a"), ChatRequest.from_prompt("b"),
             ChatRequest((ChatRequest.from_prompt("c").messages[0],),
                         priority=GATING_PRIORITY)]
    assert [r.priority for r in proxy.stamped(asked)] == [41, 41, GATING_PRIORITY]
    assert [r.priority for r in proxy.for_stage("answer").stamped(asked[:1])] == [41]


def test_the_sweep_s_questions_are_numbered_in_grid_order(tmp_path: Path) -> None:
    config = parse_sweep({
        "name": "order", "results_dir": str(tmp_path),
        "benchmarks": [{"name": "synthetic", "size": 1000, "limit": 5}],
        "grid": {"methods": ["bm25", "tmem"], "backbones": ["smollm2"]}})
    bench_dir = prepare_benchmark(config.benchmarks[0], tmp_path / "data")
    runs = in_order([plan_run(run, bench_dir, load_backbones(None), tmp_path / "order")
                      for run in config.runs()])
    first, second = ([r.order[q] for q, _ in r.questions] for r in runs)
    assert first == list(range(5)) and second == list(range(5, 10))


def test_a_memory_build_s_engine_calls_let_the_other_questions_run() -> None:
    during: list[int] = []

    def engine(requests: list[ChatRequest]) -> tuple[list[ChatResponse], list[CallRecord]]:
        during.append(gating_threads())
        answers = [ChatResponse("{}") for _ in requests]
        return answers, [CallRecord.of(get_backbone("sim"), r, a)
                         for r, a in zip(requests, answers, strict=True)]

    proxy = EngineProxy(engine, get_backbone("sim"), MEMORY_STAGE, "c1", "c1")
    with gating_work():  # the build's CPU work: the others pause at their calls
        assert gating_threads() == 1
        proxy.generate([ChatRequest.from_prompt("extract")])  # its wait: they run
        assert gating_threads() == 1
    assert during == [0]
