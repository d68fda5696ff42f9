"""A construct backbone runs T-MEM's selection and structuring, the run's backbone answers and
judges: each call is on record under the backbone that made it, and the setting makes another
run; in the driver and through `jobs.sweep` on the shared Ray head."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import ray_head
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


def _table(tmp_path: Path, backbones: Path, construct: dict[str, str]) -> dict[str, Any]:
    return {
        "name": "split", "results_dir": str(tmp_path / "results"),
        "backbones_file": str(backbones),
        "benchmarks": [{"name": "synthetic", "size": 200, "limit": 2}],
        "grid": {"methods": ["tmem"], "backbones": ["answerer"], "top_k": [8],
                 "budget": [512]},
        "resources": ray_head.ONE_ACTOR,
        "construct_backbones": construct}


def _servers(tmp_path: Path) -> tuple[AnsweringServer, Selector, Path]:
    """The answering and the selecting server, and a backbones file naming both."""
    answerer, selector = AnsweringServer([Step()]), Selector([Step()])
    both = tmp_path / "backbones.toml"
    both.write_text(scripted_backbones(tmp_path, answerer, "answerer").read_text()
                    + scripted_backbones(tmp_path, selector, "selector").read_text())
    return answerer, selector, both


def _asked(server: ShapedServer) -> set[str]:
    """What the server was asked: T-MEM's selection, its structuring, or anything else."""
    return {next((p for p in (SELECT, STRUCTURE) if b["messages"][0]["content"].startswith(p)),
                 "other") for b in server.bodies}


def test_construction_runs_on_its_backbone_and_the_answer_on_the_runs(tmp_path: Path) -> None:
    answerer, selector, both = _servers(tmp_path)
    try:
        config = parse_sweep(_table(tmp_path, both, {"tmem": "selector"}))
        (summary,) = run_sweep(config, log=lambda _: None, local=True)
    finally:
        answerer.close()
        selector.close()
    assert summary.stage_errors == {s: 0 for s in summary.stage_errors}
    assert not summary.degradation.get("selection_fallback_batches")  # the selector's labels
    _assert_split(Path(summary.run_dir), answerer, selector)
    unset = parse_sweep(_table(tmp_path, both, {})).runs()[0]
    assert unset.run_id != summary.run_id and unset.construct_backbone is None


@pytest.mark.slow
def test_construct_backbone_through_jobs_sweep_on_ray(ray_address: str, tmp_path: Path) -> None:
    """The same split when the stages run as Ray actors (the engine clients are built in the
    actors from the pickled run, not in the driver)."""
    answerer, selector, both = _servers(tmp_path)
    config = tmp_path / "split.yaml"
    config.write_text(yaml.safe_dump(_table(tmp_path, both, {"tmem": "selector"})))
    try:
        done = ray_head.run_sweep(config, ray_address, timeout=900)
    finally:
        answerer.close()
        selector.close()
    assert "sweep split done: 1 runs" in done.stdout
    sweep = tmp_path / "results" / "split"
    (run_id,) = json.loads((sweep / "sweep.json").read_text())["runs"]
    _assert_split(sweep / run_id, answerer, selector)


def _assert_split(run_dir: Path, answerer: ShapedServer, selector: ShapedServer) -> None:
    """Each call is on record under the backbone that made it, each server was asked only its
    part, and the contract and the construct records name the construct backbone."""
    by_stage: dict[str, set[str]] = {}
    for call in calls_store(run_dir).latest().to_pylist():
        by_stage.setdefault(call["stage"], set()).add(call["backbone"])
    assert by_stage == {"construct": {"selector"}, "answer": {"answerer"},
                        "judge": {"answerer"}, "calibration": {"answerer"}}
    assert _asked(selector) == {SELECT, STRUCTURE} and _asked(answerer) == {"other"}
    contract = json.loads((run_dir / "contract.json").read_text())
    assert contract["config"]["construct_backbone"] == "selector"
    assert set(contract["generation"]) == {"answerer", "selector"}
    for record in stage_store(run_dir, "construct").latest().to_pylist():
        assert {"backbone answerer", "construct backbone selector"} <= set(
            json.loads(record["deps"]))
