"""The comparators in one sweep, planned and run on the `sim` engine through Ray to its
report: BM25, T-MEM, T2Mem, LazyMem and a memory system configured by endpoint only (the
project's BM25 served over MCP, started per conversation by the stage actor)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write_sweep
from tests.ray_head import ONE_ACTOR, ROOT, run_sweep
from tmem_core.pipeline import STAGES
from tmem_core.reports import write_report
from tmem_core.results import MEMORY_STAGE, calls_store, stage_store

pytestmark = pytest.mark.slow  # about a minute or two: five runs on the shared cores

METHODS = ["bm25", "tmem", "t2mem", "lazymem", "mcp"]
MCP = {"command": [sys.executable, "-m", "tests.methods.external.bm25_service"],
       "env": {"PYTHONPATH": str(ROOT)}, "batch": 100}


def _config(tmp: Path) -> Path:
    return write_sweep(tmp, "comparators", [{"name": "synthetic", "size": 200, "seed": 0,
                                             "limit": 2}],
                       {"methods": METHODS, "backbones": ["sim"], "top_k": [8],
                        "budget": [512]},
                       methods={"mcp": MCP}, resources=ONE_ACTOR)


def test_the_comparators_are_planned_run_and_reported_side_by_side(
        ray_address: str, tmp_path: Path) -> None:
    config = _config(tmp_path)
    plan = subprocess.run([sys.executable, "-m", "jobs.plan", str(config), "--sample", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert all(m in plan.stdout for m in METHODS), plan.stdout
    run_sweep(config, ray_address, timeout=1800)
    sweep = tmp_path / "results" / "comparators"
    runs = json.loads((sweep / "sweep.json").read_text())["runs"]
    assert sorted(r.split("_")[1] for r in runs) == sorted(METHODS)
    for run_id in runs:
        run_dir = sweep / run_id
        qids = set(stage_store(run_dir, "retrieve").latest().column("qid").to_pylist())
        assert len(qids) == 2, run_id
        for stage in STAGES:
            assert set(stage.store_for(run_dir).latest().column("qid").to_pylist()) == qids
    [mcp] = [sweep / r for r in runs if r.split("_")[1] == "mcp"]
    memory = [c for c in calls_store(mcp).read_all().to_pylist() if c["stage"] == MEMORY_STAGE]
    assert memory and all(c["ok"] and c["prompt_tokens"] > 0 for c in memory)
    assert all(r["context_ids"] for r in stage_store(mcp, "construct").latest().to_pylist())
    report = write_report(sweep).markdown.read_text()
    assert all(m in report for m in METHODS)
    assert "lazymem (project addition)" in report
