"""A judge prompt file written as upstream writes it (Python `str.format` placeholders, a system
and a user part, a JSON label after a sentence of reasoning) judges a sweep: its calls carry
the filled prompt and room for the reason, its verdicts are read from the label, and the
file's hash is in the contract and on every verdict."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from tests.conftest import ScriptedServer, Step, scripted_backbones
from tmem_core.evaluation import normalise
from tmem_core.evaluation._verdict import FREE_VERDICT_TOKENS
from tmem_core.pipeline import parse_sweep, run_sweep
from tmem_core.results import stage_store
from tmem_core.results._layout import calibration_store

# the shape of EverMemBench's eval/config/prompts.yaml `llm_judge` (shortened, synthetic)
UPSTREAM = """\
# an official judge prompt, pasted under [system] / [user] as upstream keeps it
[system]
You are an expert grader that determines if answers to questions match a gold standard answer.
[user]
Your task is to label an answer to a question as 'CORRECT' or 'WRONG'.
Question: {question}
Gold answer: {golden_answer}
Generated answer: {generated_answer}
First, provide a short (one sentence) explanation of your reasoning, then finish with CORRECT
or WRONG. Return the label in JSON format with the key "label": {{"label": "CORRECT"}}
"""
GRADED = re.compile(r"Gold answer: (.*)\nGenerated answer: (.*)\nFirst,")


class UpstreamJudge(ScriptedServer):
    """Answers the upstream judge in its own format (a reason, then the JSON label): CORRECT
    when the generated answer is the gold answer; a fixed answer to every other call."""

    def _next(self, body: dict[str, Any], authorization: str) -> Step:
        super()._next(body, authorization)
        graded = GRADED.search(body["messages"][-1]["content"])
        if graded is None:
            return Step(content="Friday.")
        same = normalise(graded.group(1)) == normalise(graded.group(2))
        label = "CORRECT" if same else "WRONG"
        return Step(content=f'The generated answer {"matches" if same else "misses"} the '
                            f'gold one. {{"label": "{label}"}}')


def test_an_upstream_judge_file_judges_the_sweep(tmp_path: Path) -> None:
    official = tmp_path / "evermembench_judge.txt"
    official.write_text(UPSTREAM)
    server = UpstreamJudge([Step()])
    try:
        config = parse_sweep({
            "name": "official", "results_dir": str(tmp_path / "results"),
            "backbones_file": str(scripted_backbones(tmp_path, server, "judge")),
            "judge_prompts": {"judge/synthetic": str(official)},
            "benchmarks": [{"name": "synthetic", "size": 200, "limit": 2}],
            "grid": {"methods": ["bm25"], "backbones": ["judge"], "top_k": [4],
                     "budget": [256]}})
        [summary] = run_sweep(config, log=lambda _: None, local=True)
    finally:
        server.close()
    sha = hashlib.sha256(official.read_bytes()).hexdigest()
    judged = [b for b in server.bodies if GRADED.search(b["messages"][-1]["content"])]
    verdicts = stage_store(summary.run_dir, "judge").latest().to_pylist()
    assert len(verdicts) == 2 and judged
    for body in judged:
        system, user = (m["content"] for m in body["messages"])
        assert system.startswith("You are an expert grader")
        assert "{golden_answer}" not in user and '{"label": "CORRECT"}' in user  # {{ }} -> { }
        assert body["max_completion_tokens"] == FREE_VERDICT_TOKENS
        assert "response_format" not in body
    answers = {b["messages"][-1]["content"].split("Generated answer: ")[1].split("\n")[0]
               for b in judged}
    assert answers >= {"Friday."}  # the answers under grading, in upstream's slot
    assert {v["prompt_name"] for v in verdicts} == {str(official)}
    assert {v["prompt_sha256"] for v in verdicts} == {sha}
    assert {v["score"] for v in verdicts} <= {0.0, 1.0} and all(v["ok"] for v in verdicts)
    contract = json.loads((summary.run_dir / "contract.json").read_text())
    assert contract["prompts"][str(official)] == sha
    assert contract["config"]["judge_prompts"]["judge/synthetic"] == {"file": str(official),
                                                                      "sha256": sha}
    controls = [c for c in calibration_store(summary.run_dir).latest().to_pylist()
                if c["control"] == "gold"]
    assert controls and all(c["score"] == 1.0 for c in controls)  # gold: CORRECT, by label
