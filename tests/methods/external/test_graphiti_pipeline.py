"""Graphiti end to end through the Ray pipeline on the embedded SmolLM2: two LoCoMo and two
synthetic questions land in every stage, Graphiti's calls are on record under stage
`memory`, and whatever SmolLM2's output did to the build shows in the traces."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pyarrow.compute as pc
import pytest

from tests.pipeline.conftest import run_sweep
from tmem_core.results import MEMORY_STAGE, calls_store, stage_store

pytest.importorskip("graphiti_core")
pytestmark = pytest.mark.slow


def test_graphiti_sweep_records_every_stage_and_its_memory_calls(
        tmp_path: Path, ray_address: str, locomo_path: Path) -> None:
    config = tmp_path / "graphiti.yaml"  # YAML reads JSON
    config.write_text(json.dumps({
        "name": "graphiti", "results_dir": str(tmp_path / "results"),
        "benchmarks": [{"name": "locomo", "source": str(locomo_path), "limit": 2},
                       {"name": "synthetic", "size": 200, "seed": 0, "limit": 2}],
        "grid": {"methods": ["graphiti"], "backbones": ["smollm2"], "judges": ["smollm2"],
                 "top_k": [8], "budgets": [512]},
        "methods": {"graphiti": {"episode_messages": 16, "max_tokens": 256}},
        "resources": {"retrieve_actors": 1, "llm_actors": 1, "batch_size": 2}}))
    run_sweep(config, ray_address, timeout=3600)
    runs = [d for d in (tmp_path / "results" / "graphiti").iterdir()
            if (d / "contract.json").is_file()]
    assert len(runs) == 2  # one per benchmark
    for run_dir in runs:
        for stage in ("retrieve", "construct", "answer", "judge"):
            assert stage_store(run_dir, stage).latest().num_rows == 2, (run_dir, stage)
        calls = calls_store(run_dir).latest()
        memory = calls.filter(pc.equal(calls.column("stage"), MEMORY_STAGE))
        assert memory.num_rows > 0
        traces = [json.loads(t) for t in
                  stage_store(run_dir, "construct").latest().column("trace").to_pylist()]
        for trace in traces:
            failed = trace["memory"]["failed"]
            assert trace["degradation"]["memory_failed"] == int(bool(failed))
            assert trace["degradation"]["nothing_recalled"] == int(not trace["recalled"])
            today = date.today().isoformat()  # items are dated by the conversation
            assert not any((r["timestamp"] or "").startswith(today) for r in trace["recalled"])
