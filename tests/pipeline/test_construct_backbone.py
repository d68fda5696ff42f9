"""A construct backbone runs T-MEM's selection and structuring, the run's backbone answers and
judges: each call is on record under the backbone that made it, and the setting makes another
run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.conftest import Step, scripted_backbones
from tests.pipeline.shaped import ShapedServer
from tests.pipeline.test_memory_cost import AnsweringServer
from tmem_core.pipeline import parse_sweep, run_sweep
from tmem_core.results import calls_store, stage_store

SELECT = "You select evidence from a long multi-party conversation"
STRUCTURE = "You organise evidence messages from a multi-party conversation"


class Selector(ShapedServer):
    """Labels every message KEY and makes every message to link a root."""

    def reply(self, kind: str, body: dict[str, Any]) -> str:
        system, user = (m["content"] for m in body["messages"][:2])
        if system.startswith(SELECT):
            return json.dumps({"labels": dict.fromkeys(_ids(user), "KEY")})
        linked = _ids(user.rsplit("Link these messages:", 1)[-1])
        root = {"parent": "none", "relation": "ROOT"}
        return json.dumps({"links": {message: root for message in linked}})


def _ids(text: str) -> list[str]:
    return list(dict.fromkeys(re.findall(r"\bm\d+\b", text)))


def _sweep(tmp_path: Path, backbones: Path, construct: dict[str, str]) -> Any:
    return parse_sweep({
        "name": "split", "results_dir": str(tmp_path / "results"),
        "backbones_file": str(backbones),
        "benchmarks": [{"name": "synthetic", "size": 200, "limit": 2}],
        "grid": {"methods": ["tmem"], "backbones": ["answerer"], "top_k": [8],
                 "budget": [512]},
        "construct_backbones": construct})


def _asked(server: ShapedServer) -> set[str]:
    """What the server was asked: T-MEM's selection, its structuring, or anything else."""
    return {next((p for p in (SELECT, STRUCTURE) if b["messages"][0]["content"].startswith(p)),
                 "other") for b in server.bodies}


def test_construction_runs_on_its_backbone_and_the_answer_on_the_runs(tmp_path: Path) -> None:
    answerer, selector = AnsweringServer([Step()]), Selector([Step()])
    try:
        both = tmp_path / "backbones.toml"
        both.write_text(scripted_backbones(tmp_path, answerer, "answerer").read_text()
                        + scripted_backbones(tmp_path, selector, "selector").read_text())
        config = _sweep(tmp_path, both, {"tmem": "selector"})
        (summary,) = run_sweep(config, log=lambda _: None, local=True)
    finally:
        answerer.close()
        selector.close()
    calls = calls_store(Path(summary.run_dir)).latest().to_pylist()
    by_stage: dict[str, set[str]] = {}
    for call in calls:
        by_stage.setdefault(call["stage"], set()).add(call["backbone"])
    assert by_stage == {"construct": {"selector"}, "answer": {"answerer"},
                        "judge": {"answerer"}, "calibration": {"answerer"}}
    assert summary.stage_errors == {s: 0 for s in summary.stage_errors}
    assert not summary.degradation.get("selection_fallback_batches")  # the selector's labels
    # what each server was asked: selection and structuring, or answers and verdicts
    assert _asked(selector) == {SELECT, STRUCTURE} and _asked(answerer) == {"other"}
    contract = json.loads((Path(summary.run_dir) / "contract.json").read_text())
    assert contract["config"]["construct_backbone"] == "selector"
    assert set(contract["generation"]) == {"answerer", "selector"}
    (deps,) = {r["deps"] for r in stage_store(Path(summary.run_dir), "construct").latest()
               .to_pylist()}
    assert {"backbone answerer", "construct backbone selector"} <= set(json.loads(deps))
    unset = _sweep(tmp_path, both, {}).runs()[0]
    assert unset.run_id != summary.run_id and unset.construct_backbone is None
