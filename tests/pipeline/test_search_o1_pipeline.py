"""Search-o1 through the Ray pipeline on the embedded SmolLM2: a LoCoMo question (the shared
file) and a synthetic one land in every stage, its reasoning and Reason-in-Documents calls are
in the calls table under stage construct, as many per question as its trace says, and the
prediction is the chain's last \\boxed{} without an answer call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import write_sweep
from tests.ray_head import ONE_ACTOR, locomo_and_synthetic, run_sweep
from tmem_core import from_json
from tmem_core.methods import CHAIN, boxed_answer
from tmem_core.methods.baselines._search_o1 import ChainRecord
from tmem_core.pipeline import STAGES
from tmem_core.results import calls_store, stage_store

pytestmark = pytest.mark.slow  # a few minutes on 2 busy cores


def test_search_o1_runs_every_stage_on_smollm2(ray_address: str, tmp_path: Path,
                                                locomo_path: Path) -> None:
    config = write_sweep(tmp_path, "so1", locomo_and_synthetic(locomo_path, 1),
                         {"methods": ["search_o1"], "top_k": [3], "budget": [512]},
                         methods={"search_o1": {"max_steps": 2, "step_max_tokens": 96,
                                                "doc_max_tokens": 384}}, resources=ONE_ACTOR)
    done = run_sweep(config, ray_address, timeout=1500)
    assert "sweep so1 done: 2 runs, 0 error records" in done.stdout
    sweep = tmp_path / "results" / "so1"
    runs = json.loads((sweep / "sweep.json").read_text())["runs"]
    assert len(runs) == 2
    for run_id in runs:
        run_dir = sweep / run_id
        for stage in STAGES:
            assert len(set(stage.store_for(run_dir).latest().column("qid").to_pylist())) == 1
        contexts = stage_store(run_dir, "construct").latest().to_pylist()
        calls = calls_store(run_dir).read_all().to_pylist()
        constructed = [c for c in calls if c["stage"] == "construct"]
        for record in contexts:
            chain = from_json(ChainRecord, record["payload"])
            mine = [c for c in constructed if c["qid"] == record["qid"]]
            assert len(mine) == chain.usage.calls >= 1 and chain.stop
            assert all(c["backbone"] == "smollm2" for c in mine)
            # a call the engine failed (a timeout on a busy machine) is on record without usage
            assert all(c["prompt_tokens"] > 0 for c in mine if c["ok"]) and any(
                c["ok"] for c in mine)
            shown = {i for s in chain.calls for i in s.get("ids", [])}
            assert set(record["context_ids"]) == shown
            assert shown or not chain.queries  # documents read whenever it searched
            assert 0 < record["tokens"] <= 512 and record["kind"] == CHAIN
        answers = {r["qid"]: r for r in stage_store(run_dir, "answer").latest().to_pylist()}
        assert all(answers[r["qid"]]["prediction"] == boxed_answer(r["context"])
                   for r in contexts)
        stages = {c["stage"] for c in calls}
        assert "construct" in stages and not {"memory", "answer"} & stages
        # a verdict by rule (LoCoMo's not-mentioned questions) or by letter calls no judge
        verdicts = stage_store(run_dir, "judge").latest().column("scored_by").to_pylist()
        assert ("judge" in stages) == ("llm" in verdicts)
        contract = json.loads((run_dir / "contract.json").read_text())
        assert contract["validators"]["no_gold_in_prompts"]["passed"]
        assert contract["validators"]["budget"]["passed"]
