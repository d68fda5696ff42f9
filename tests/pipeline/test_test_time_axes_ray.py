"""The reasoning-budget axis and the memory-quality judge on the shared Ray head with the
embedded SmolLM2: two budgets make two Naive RAG runs whose answer calls were cut at N + 64
tokens, and each question's memory has its five scores and its calls under their own stage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import write_sweep
from tests.ray_head import ONE_ACTOR, run_sweep
from tmem_core.results import calls_store
from tmem_core.results._layout import MEMORY_QUALITY_DIMENSIONS, memory_quality_store

pytestmark = pytest.mark.slow


def test_budgets_and_memory_quality_on_ray(ray_address: str, tmp_path: Path) -> None:
    config = write_sweep(tmp_path, "axes", [{"name": "synthetic", "size": 200, "limit": 2}],
                         {"methods": ["naive_rag"], "top_k": [8], "budget": [512],
                          "reasoning_budget": [32, 96], "memory_quality": True},
                         resources=ONE_ACTOR)
    done = run_sweep(config, ray_address, timeout=1200)
    assert "sweep axes done: 2 runs" in done.stdout
    sweep = tmp_path / "results" / "axes"
    for run_id in json.loads((sweep / "sweep.json").read_text())["runs"]:
        budget = json.loads((sweep / run_id / "contract.json").read_text())["config"][
            "reasoning_budget"]
        calls = calls_store(sweep / run_id).read_all().to_pylist()
        answers = [c for c in calls if c["stage"] == "answer"]
        assert len(answers) == 2 and all(c["completion_tokens"] <= budget + 64 for c in answers)
        assert sum(c["stage"] == "memory_quality" for c in calls) == 2
        scored = memory_quality_store(sweep / run_id).latest().to_pylist()
        assert len(scored) == 2
        for scores in scored:
            assert all(1 <= scores[d] <= 5 for d in MEMORY_QUALITY_DIMENSIONS)
