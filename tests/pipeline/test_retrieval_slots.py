"""However many questions a stage actor holds, at most `resources.retrievals_per_actor` of
them retrieve at once (retrieval is the CPU-bound part and holds the most memory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipeline.counting import Counting
from tmem_core.llm import load_backbones
from tmem_core.pipeline import parse_sweep
from tmem_core.pipeline._actors import FLOW_SCHEMA
from tmem_core.pipeline._data import prepare_benchmark
from tmem_core.pipeline._method_stages import RetrieveStage
from tmem_core.pipeline._planning import plan_run

PLUGIN = "tests.pipeline.counting"


@pytest.mark.parametrize("slots", [1, 3])
def test_a_stage_actor_retrieves_at_most_its_slots_at_once(tmp_path: Path, slots: int) -> None:
    config = parse_sweep({
        "name": "slots", "results_dir": str(tmp_path), "plugins": [PLUGIN],
        "benchmarks": [{"name": "synthetic", "size": 1000, "limit": 16}],
        "grid": {"methods": ["counting_bm25"], "backbones": ["smollm2"]},
        "resources": {"retrievals_per_actor": slots}})
    run = plan_run(config.runs()[0], prepare_benchmark(config.benchmarks[0], tmp_path / "data"),
                   load_backbones(None), tmp_path / "slots", resources=config.resources)
    Counting.most = 0
    stage = RetrieveStage(run)
    empty = dict.fromkeys(FLOW_SCHEMA.names)
    rows = [{**empty, "run_id": run.run_id, "qid": q, "conv_id": c, "ok": True}
            for q, c in run.questions]
    out = stage(rows)  # all questions of the call at once, in the stage's threads
    assert len(out) == len(rows) >= 8 and all(r["ok"] and r["evidence_ids"] for r in out)
    assert Counting.most == slots


def test_retrievals_per_actor_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="retrievals_per_actor"):
        parse_sweep({"name": "x", "results_dir": str(tmp_path),
                     "benchmarks": [{"name": "synthetic", "size": 200}],
                     "grid": {"methods": ["bm25"], "backbones": ["smollm2"]},
                     "resources": {"retrievals_per_actor": 0}})
