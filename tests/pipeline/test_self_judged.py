"""The paper's judging protocol as configuration: under `judges = "self"` each run's answers
(and the controls that calibrate its judge) are judged by its own backbone only, in calls of
their own, and the report's paper comparison uses those runs; official judge prompts are
sent and read as their sources do, end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import ScriptedServer, Step, scripted_backbones
from tests.evaluation.upstream_judges import LONGMEMEVAL
from tmem_core.benchmarks import get_protocol
from tmem_core.pipeline import parse_sweep, run_sweep
from tmem_core.prompts import load_prompt
from tmem_core.reports import read_sweep, summarise
from tmem_core.results import calls_store, stage_store
from tmem_core.results._layout import calibration_store

JUDGE_STAGES = ("judge", "calibration")


def _sim_twins(tmp: Path) -> Path:
    """The paper's two answer models as simulated engines, under their own names."""
    path = tmp / "backbones.toml"
    path.write_text("".join(
        f'[backbones."{name}"]\nbackend = "sim"\nmodel = "sim-{name}"\n'
        f"engine = {{ seed = {seed}, ttft_s = 0.0, step_s = 0.00001, step_s_per_seq = 0.0, "
        "step_s_per_ktok = 0.0, prefill_tokens_per_s = 1e12, max_output_tokens = 16 }\n"
        for seed, name in enumerate(("gpt-5.5", "deepseek-v4-flash"))))
    return path


def test_self_judged_runs_call_only_their_own_backbone(tmp_path: Path, fixtures: Path) -> None:
    config = parse_sweep({
        "name": "selfjudged", "results_dir": str(tmp_path / "results"),
        "backbones_file": str(_sim_twins(tmp_path)),
        "benchmarks": [{"name": "groupmembench", "source": str(fixtures / "groupmembench"),
                        "limit": 3}],
        "grid": {"methods": ["tmem", "bm25"], "backbones": ["gpt-5.5", "deepseek-v4-flash"],
                 "judges": "self", "top_k": [36], "budget": [8192]}})
    summaries = run_sweep(config, log=lambda _: None, local=True)
    assert len(summaries) == 4
    for summary in summaries:
        backbone = json.loads((summary.run_dir / "contract.json").read_text())["config"][
            "backbone"]
        judging = [c for c in calls_store(summary.run_dir).latest().to_pylist()
                   if c["stage"] in JUDGE_STAGES]
        assert judging and {c["backbone"] for c in judging} == {backbone}  # its own alone
        verdicts = stage_store(summary.run_dir, "judge").latest().to_pylist()
        assert verdicts and {v["judge"] for v in verdicts} == {backbone}
        controls = calibration_store(summary.run_dir).latest().to_pylist()
        assert controls and {c["judge"] for c in controls} == {backbone}
        contract = json.loads((summary.run_dir / "contract.json").read_text())
        assert contract["judging"]["judged_by"] == "self"
        assert contract["judging"]["notes"]  # GroupMemBench's official judge: said missing
    report = summarise(read_sweep(Path(config.results_dir) / config.name))
    assert set(report.runs["judged_by"]) == {"self"}
    margins = report.paper.filter(experiment="Exp-1").to_dicts()
    tmem_runs = set(report.runs.filter(method="tmem")["run_id"])
    assert {m["run_id"] for m in margins} == tmem_runs  # both answer models, exactly
    # over BM25 alone, the only one of the paper's comparator set the sweep ran
    assert all(m["match"] == "loose: compared against bm25" and m["ours"] is not None
               for m in margins)


class OfficialJudge(ScriptedServer):
    """Answers LongMemEval's official judge as a model does ("Yes." or "No, ..."), and every
    other call with a fixed answer."""

    def _next(self, body: dict[str, Any], authorization: str) -> Step:
        super()._next(body, authorization)
        asked = body["messages"][-1]["content"]
        if not asked.startswith("I will give you"):
            return Step(content="Paris.")
        response = asked.split("Model Response: ")[1].split("\n\n")[0]
        return Step(content="Yes." if response == "Paris." else "No, it differs.")


def test_the_official_longmemeval_judge_is_sent_and_read_as_upstream(
        tmp_path: Path, fixtures: Path) -> None:
    server = OfficialJudge([Step()])
    try:
        config = parse_sweep({
            "name": "official", "results_dir": str(tmp_path / "results"),
            "backbones_file": str(scripted_backbones(tmp_path, server, "judge")),
            "benchmarks": [{"name": "longmemeval",
                            "source": str(fixtures / "longmemeval" / "longmemeval_mini.json"),
                            "limit": 3}],
            "grid": {"methods": ["bm25"], "backbones": ["judge"], "judges": "self",
                     "top_k": [4], "budget": [256]}})
        [summary] = run_sweep(config, log=lambda _: None, local=True)
    finally:
        server.close()
    judged = [b for b in server.bodies
              if b["messages"][-1]["content"].startswith("I will give you")]
    assert judged
    templates = {t.split("{}")[0] for t in LONGMEMEVAL.values()}
    for body in judged:
        assert [m["role"] for m in body["messages"]] == ["user"]
        assert (body["temperature"], body["max_completion_tokens"]) == (0.0, 10)
        assert "response_format" not in body
        assert any(body["messages"][0]["content"].startswith(t) for t in templates)
    verdicts = stage_store(summary.run_dir, "judge").latest().to_pylist()
    assert verdicts and all(v["ok"] and v["scored_by"] == "llm" for v in verdicts)
    assert {v["score"] for v in verdicts} == {1.0} and {v["raw"] for v in verdicts} == {"Yes."}
    assert all(v["prompt_sha256"] == load_prompt(v["prompt_name"]).sha256
               and v["prompt_name"].endswith("@v2") for v in verdicts)
    controls = calibration_store(summary.run_dir).latest().to_pylist()
    scored = [c for c in controls if c["scored_by"] == "llm"]
    assert scored and all(c["score"] == (1.0 if c["prediction"] == "Paris." else 0.0)
                          for c in scored)
    identity = json.loads((summary.run_dir / "contract.json").read_text())["config"]
    assert set(identity["judge_prompts"]) == set(get_protocol("longmemeval").judge_prompts)
