"""Test-time computation as grid axes, and the memory-quality judge, on a scripted engine: two
reasoning budgets x two step counts make four T2Mem runs whose step and answer requests carry
the asked prompt and `max_tokens` = N + 64 (read off the bodies the engine received); the
memory-quality judge's calls are recorded under their own stage and its scores reach the
report. A grid without the axes keeps its run ids; an axis a method lacks is refused."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Step, scripted_backbones
from tests.pipeline.shaped import ShapedServer, request_kind
from tests.ray_head import ROOT
from tmem_core import ConfigError
from tmem_core.pipeline import load_sweep, parse_sweep, run_sweep
from tmem_core.pipeline._config import RunSpec, method_version
from tmem_core.pipeline._judges import judge_prompt_identity
from tmem_core.reports import read_sweep, summarise
from tmem_core.reports._markdown import Report
from tmem_core.results import calls_store, stage_store
from tmem_core.results._layout import MEMORY_QUALITY_DIMENSIONS, memory_quality_store

SEARCH = {"reasoning": "Need more.", "memory": "cadence changed", "action": "search",
          "argument": "cadence"}
ASKED = re.compile(r"at most (\d+) tokens")


class SearchingServer(ShapedServer):
    """A loop step searches while it may (never answers early); the memory-quality judge
    scores 4 on temporal accuracy and 2 elsewhere."""

    def reply(self, kind: str, body: dict[str, Any]) -> str:
        if kind == "step":
            enum = body["response_format"]["json_schema"]["schema"]["properties"]["action"]
            action = "search" if "search" in enum["enum"] else "answer"
            return json.dumps({**SEARCH, "action": action})
        if kind == "quality":
            return json.dumps({d: 4 if d == "temporal_accuracy" else 2
                               for d in MEMORY_QUALITY_DIMENSIONS})
        return "Thinking it over.\nAnswer: It changed to daily."


def _grid(**axes: Any) -> dict[str, Any]:
    return {"methods": ["t2mem"], "backbones": ["scripted"], "top_k": [4], "budget": [512],
            **axes}


def _config(tmp_path: Path, backbones: Path, grid: dict[str, Any]) -> Any:
    return parse_sweep({
        "name": "axes", "results_dir": str(tmp_path / "results"),
        "backbones_file": str(backbones),
        "benchmarks": [{"name": "synthetic", "size": 200, "limit": 1}], "grid": grid,
        "methods": {"t2mem": {"episodes": "topic_window", "topic_gap_hours": 1440,
                              "max_entries": 2}}})


def test_two_budgets_by_two_step_counts_run_four_runs_as_asked(tmp_path: Path) -> None:
    server = SearchingServer([Step()])
    try:
        backbones = scripted_backbones(tmp_path, server, "scripted")
        config = _config(tmp_path, backbones, _grid(reasoning_budget=[96, 160], steps=[2, 3],
                                                    memory_quality=True))
        summaries = run_sweep(config, log=lambda _: None, local=True)
    finally:
        server.close()
    assert len(summaries) == 4 and all(sum(s.stage_errors.values()) == 0 for s in summaries)
    steps = [b for b in server.bodies if request_kind(b) == "step"]
    answers = [b for b in server.bodies if "Answer:" in b["messages"][-1]["content"]
               and request_kind(b) == "other"]
    asked = {(int(ASKED.findall(b["messages"][-1]["content"])[-1]), b["max_completion_tokens"])
             for b in steps + answers}
    assert asked == {(96, 160), (160, 224)}  # max_tokens = N + 64, prompt asks for N
    schema_limits = {b["max_completion_tokens"]: b["response_format"]["json_schema"]["schema"]
                     ["properties"]["reasoning"]["maxLength"] for b in steps}
    assert schema_limits[224] > schema_limits[160]  # the reasoning limit scales with N
    by_run = {(json.loads((s.run_dir / "contract.json").read_text())["method"]["params"]
               ["max_steps"], s.run_id) for s in summaries}
    assert {m for m, _ in by_run} == {2, 3}
    for summary in summaries:  # never answering early, each run takes all its steps
        contract = json.loads((summary.run_dir / "contract.json").read_text())
        [record] = [json.loads(r["steps"]) for r in
                    stage_store(summary.run_dir, "construct").latest().to_pylist()]
        assert record["steps"] == record["max_steps"] == \
            contract["method"]["params"]["max_steps"]
        assert record["forced"]
        stages = [c["stage"] for c in calls_store(summary.run_dir).read_all().to_pylist()]
        assert stages.count("memory_quality") == 1
        [scores] = memory_quality_store(summary.run_dir).latest().to_pylist()
        assert scores["temporal_accuracy"] == 4.0 and scores["completeness"] == 2.0
        assert scores["mean"] == pytest.approx(12 / 5)
    quality = [b for b in server.bodies if request_kind(b) == "quality"]
    # the runs' memories read alike here, so the request cache answers the repeats
    assert quality and all("Gold answer:" in b["messages"][-1]["content"] for b in quality)
    summary = summarise(read_sweep(tmp_path / "results" / "axes"))
    table = summary.memory_quality
    assert table.height == 4 and table["temporal_accuracy"].to_list() == [4.0] * 4
    text = Report(summary, "axes").render({}, [])
    assert "## Memory quality" in text and "2.4" in text
    assert set(summary.runs["reasoning_budget"].to_list()) == {96, 160}


def _main_run_id(run: RunSpec) -> str:
    """A run's id as defined before the test-time axes: the hash of these fields alone."""
    benchmark = {k: v for k, v in asdict(run.benchmark).items() if k != "spread"}  # added later
    identity = {"benchmark": benchmark, "method": run.method,
                **method_version(run.method), "params": dict(run.params),
                "backbone": run.backbone, "judges": list(run.judges), "top_k": run.top_k,
                "budget": run.budget, "judge_repeats": run.judge_repeats,
                "judge_prompts": judge_prompt_identity(run.benchmark.name, run.judge_prompts),
                **run.embedder.identity()}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return f"{run.benchmark.name}_{run.method}_{run.backbone}_k{run.top_k}_b{run.budget}_" \
           f"{digest[:8]}"


def test_a_grid_without_the_axes_keeps_its_run_ids() -> None:
    for path in (ROOT / "jobs" / "configs").glob("*.toml"):
        if path.name.startswith("backbones"):
            continue
        for run in load_sweep(path, sources=False).runs():
            assert run.axes == {} and not run.memory_quality
            assert run.run_id == _main_run_id(run), path.name


@pytest.mark.parametrize(("grid", "key"), [
    ({"methods": ["naive_rag"], "steps": [2, 3]}, "grid.steps"),
    ({"methods": ["bm25"], "reasoning_budget": [128]}, "grid.reasoning_budget"),
    ({"methods": ["t2mem_no_rollout"], "steps": [2]}, "grid.steps"),
])
def test_an_axis_a_method_lacks_is_refused(grid: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_sweep({"benchmarks": [{"name": "synthetic"}],
                     "grid": {"backbones": ["smollm2"], **grid}})
    assert caught.value.key == key and "does not apply" in caught.value.reason


def test_an_axis_and_its_parameter_together_are_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_sweep({"benchmarks": [{"name": "synthetic"}],
                     "grid": {"backbones": ["smollm2"], "methods": ["search_o1"],
                              "steps": [2]},
                     "methods": {"search_o1": {"max_steps": 4}}})
    assert caught.value.key == "methods.search_o1.max_steps"


def test_the_memory_quality_judge_is_outside_the_leak_guard_and_methods_stay_in() -> None:
    from tmem_core.evaluation import GUARDED_STAGES
    from tmem_core.results._layout import MEMORY_QUALITY_STAGE
    assert MEMORY_QUALITY_STAGE not in GUARDED_STAGES  # it must show the gold to grade
    assert {"memory", "retrieve", "construct", "answer"} <= GUARDED_STAGES
