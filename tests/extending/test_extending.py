"""Adding a method and a benchmark takes one decorated function each, in a module of their
own (`toy_plugin`) that a sweep names in `plugins`: both run through `run_sweep(local=True)`,
and the method's parameters are checked when the config loads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import scripted_backbones
from tmem_core.benchmarks import (
    benchmark_names,
    get_benchmark,
)
from tmem_core.methods import method_names
from tmem_core.pipeline import ConfigError, parse_sweep, run_sweep
from tmem_core.prompts import load_prompt
from tmem_core.results import calls_store, stage_store


def _config(tmp_path: Path, backbones: Path, params: dict[str, Any]) -> dict[str, Any]:
    return {"name": "toy", "results_dir": str(tmp_path / "results"),
            "plugins": ["tests.extending.toy_plugin"],
            "backbones_file": str(backbones),
            "benchmarks": [{"name": "toy_chat"}],
            "grid": {"methods": ["toy_latest"], "backbones": ["scripted"], "top_k": [2],
                     "budgets": [256]},
            "methods": {"toy_latest": params}}


def test_a_toy_method_and_benchmark_run_through_the_sweep(
        tmp_path: Path, scripted_server: Callable[..., Any], step: Callable[..., Any]) -> None:
    server = scripted_server([step(content='{"verdict": "CORRECT"}')])
    backbones = scripted_backbones(tmp_path, server, "scripted")
    with pytest.raises(ConfigError, match="unknown key 'kep'; allowed: keep"):
        parse_sweep(_config(tmp_path, backbones, {"kep": 1}))
    config = parse_sweep(_config(tmp_path, backbones, {"keep": 1}))
    assert "toy_latest" in method_names() and "toy_chat" in benchmark_names()
    (summary,) = run_sweep(config, log=lambda _line: None, local=True)
    assert summary.questions == 2 and not any(summary.stage_errors.values())
    retrieved = {r["qid"]: r["evidence_ids"]
                 for r in stage_store(summary.run_dir, "retrieve").read_all().to_pylist()}
    assert retrieved == {"toy:q0": ["m2"], "toy:q1": ["m2"]}  # keep = 1: the newest (harness ids)
    judged = pq.read_table(next(summary.run_dir.glob("judge/*.parquet"))).to_pylist()
    assert {r["qid"] for r in judged} == {"toy:q0", "toy:q1"}
    assert {c["stage"] for c in calls_store(summary.run_dir).read_all().to_pylist()} == {
        "answer", "judge", "calibration"}


def test_every_registered_benchmark_has_a_protocol_whose_prompts_exist() -> None:
    for name in benchmark_names():
        protocol = get_benchmark(name).protocol
        assert protocol.judge_prompts, name
        for prompt in protocol.judge_prompts:
            assert load_prompt(prompt).labels, (name, prompt)  # a judge: it has verdicts


def test_a_plugin_that_cannot_be_imported_is_a_config_error(tmp_path: Path) -> None:
    raw = {**_config(tmp_path, tmp_path / "none.toml", {}), "plugins": ["no_such_plugin"]}
    with pytest.raises(ConfigError, match="cannot import 'no_such_plugin'") as err:
        parse_sweep(raw)
    assert err.value.key == "plugins"
