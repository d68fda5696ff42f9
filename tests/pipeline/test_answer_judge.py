"""Answer and judge stages on real LoCoMo and synthetic questions, embedded model, no Ray: one
sweep, a run per benchmark."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.ray_head import ROOT
from tmem_core.prompts import load_prompt
from tmem_core.results import stage_store

pytestmark = pytest.mark.slow


def test_answers_and_judgements_are_recorded(tmp_path: Path, locomo_path: Path) -> None:
    config = tmp_path / "aj.toml"
    config.write_text(textwrap.dedent(f"""\
        name = "aj"
        results_dir = "{tmp_path / 'results'}"
        [[benchmarks]]
        name = "locomo"
        source = "{locomo_path}"
        limit = 5
        [[benchmarks]]
        name = "synthetic"
        size = 300
        limit = 5
        [grid]
        methods = ["bm25"]
        backbones = ["smollm2"]
        top_k = [5]
        budget = [512]
        """))
    done = subprocess.run([sys.executable, "-m", "jobs.sweep", "--local", str(config)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    run_dirs = {p.parent.name.split("_")[0]: p.parent
                for p in (tmp_path / "results" / "aj").glob("*/contract.json")}
    assert sorted(run_dirs) == ["locomo", "synthetic"]
    for bench, run_dir in run_dirs.items():
        answers = stage_store(run_dir, "answer").latest().to_pylist()
        assert len(answers) == 5
        assert all(a["prompt_sha256"] == load_prompt("answer/flat").sha256 for a in answers)
        judged = stage_store(run_dir, "judge").read_all().to_pylist()
        assert {j["qid"] for j in judged} == {a["qid"] for a in answers}
        for j in judged:
            assert j["judge"] == "smollm2"
            assert j["ok"] == (j["score"] is not None)  # never silently wrong
            if j["scored_by"] == "llm":
                assert j["prompt_sha256"] == load_prompt(j["prompt_name"]).sha256
        if bench == "locomo":
            assert {j["category"] for j in judged} >= {"adversarial", "single-hop"}
            assert all(j["scored_by"] == "rule" for j in judged
                       if j["category"] == "adversarial")
            assert all(j["f1"] is not None for j in judged if j["ok"])
        contract = json.loads((run_dir / "contract.json").read_text())
        assert contract["validators"]["no_gold_in_prompts"]["passed"]
        assert contract["validators"]["no_gold_in_prompts"]["checked"] == 5
