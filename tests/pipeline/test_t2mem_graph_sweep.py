"""T2Mem's graph ablation through the Ray pipeline on the embedded SmolLM2: over the synthetic
chat (one LoCoMo conversation's extraction alone costs SmolLM2 minutes of CPU), every stage
records each question, the extraction of triples is in the calls table under stage `memory`,
and the loop searched triple entries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import write_sweep
from tests.ray_head import ONE_ACTOR, run_sweep
from tmem_core import from_json
from tmem_core.methods.t2mem._record import LoopRecord
from tmem_core.pipeline import STAGES
from tmem_core.results import calls_store, stage_store
from tmem_core.results._layout import conversation_of

pytestmark = pytest.mark.slow  # a minute or two: SmolLM2 extracts every episode of the chat


def _config(tmp: Path) -> Path:
    graph = {"episodes": "topic_window", "topic_gap_hours": 1440, "max_triples": 4,
             "max_steps": 2, "extract_max_tokens": 256, "step_max_tokens": 128}
    return write_sweep(tmp, "graph", [{"name": "synthetic", "size": 200, "seed": 0, "limit": 2}],
                       {"methods": ["t2mem_graph"], "top_k": [8], "budget": [512]},
                       methods={"t2mem_graph": graph}, resources=ONE_ACTOR)


def test_graph_variant_runs_every_stage_and_accounts_its_extraction(
        ray_address: str, tmp_path: Path) -> None:
    run_sweep(_config(tmp_path), ray_address, timeout=1800)
    runs = json.loads((tmp_path / "results" / "graph" / "sweep.json").read_text())["runs"]
    assert len(runs) == 1 and all("t2mem_graph" in r for r in runs)
    for run_id in runs:
        run_dir = tmp_path / "results" / "graph" / run_id
        retrieved = stage_store(run_dir, "retrieve").latest()
        qids = set(retrieved.column("qid").to_pylist())
        assert len(qids) == 2, run_id
        for stage in STAGES:
            assert set(stage.store_for(run_dir).latest().column("qid").to_pylist()) == qids
        calls = calls_store(run_dir).read_all().to_pylist()
        memory = [c for c in calls if c["stage"] == "memory"]
        convs = set(retrieved.column("conv_id").to_pylist())
        assert {conversation_of(c["qid"]) for c in memory} == convs and memory
        assert all(c["backbone"] == "smollm2" for c in memory)
        # a call the engine failed (a timeout on a busy machine) is on record without usage
        assert all(c["prompt_tokens"] > 0 for c in memory if c["ok"])
        assert any(c["ok"] for c in memory)
        for record in stage_store(run_dir, "construct").latest().to_pylist():
            loop = from_json(LoopRecord, record["payload"])
            assert loop.config is not None and loop.config.units == "graph"
            assert loop.metadata is not None and loop.metadata.entries > 0
            assert {e["kind"] for e in loop.initial} == {"triple"}
            assert all(e["text"].count(" — ") == 2 for e in loop.initial)
