"""Adding a method, a benchmark or an LLM backend takes one decorated function each, in a module
of their own (`toy_plugin`, `toy_backend`) that a sweep names in `plugins`: the method and the
benchmark run through `run_sweep(local=True)` (the method's parameters checked when the config
loads), all three through a sweep on Ray."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import scripted_backbones
from tests.extending.toy_backend import TOY_BACKEND
from tests.ray_head import run_sweep as run_sweep_on
from tmem_core import ConfigError
from tmem_core.benchmarks import (
    benchmark_names,
    get_benchmark,
)
from tmem_core.methods import method_names
from tmem_core.pipeline import parse_sweep, run_sweep
from tmem_core.prompts import load_prompt
from tmem_core.results import calls_store, stage_store


def _config(tmp_path: Path, backbones: Path, params: dict[str, Any]) -> dict[str, Any]:
    return {"name": "toy", "results_dir": str(tmp_path / "results"),
            "plugins": ["tests.extending.toy_plugin"],
            "backbones_file": str(backbones),
            "benchmarks": [{"name": "toy_chat"}],
            "grid": {"methods": ["toy_latest"], "backbones": ["scripted"], "top_k": [2],
                     "budget": [256]},
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
            judge = load_prompt(prompt)  # a judge: its verdicts, or how its reply is read
            assert judge.labels or judge.header("reply"), (name, prompt)


def test_a_plugin_that_cannot_be_imported_is_a_config_error(tmp_path: Path) -> None:
    raw = {**_config(tmp_path, tmp_path / "none.toml", {}), "plugins": ["no_such_plugin"]}
    with pytest.raises(ConfigError, match="cannot import 'no_such_plugin'") as err:
        parse_sweep(raw)
    assert err.value.key == "plugins"


@pytest.mark.slow
def test_a_plugin_backend_answers_a_sweep_on_ray(ray_address: str, tmp_path: Path) -> None:
    """The toy backend, method and benchmark on the session's Ray head: the stage actors and
    the backbone's engine replica import the sweep's plugins."""
    backbones = tmp_path / "backbones.toml"
    backbones.write_text(f'[backbones.echo]\nbackend = "{TOY_BACKEND}"\n'
                         f'model = "echo-{uuid.uuid4().hex[:8]}"\n')  # nothing cached
    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump({
        **_config(tmp_path, backbones, {"keep": 1}),
        "plugins": ["tests.extending.toy_plugin", "tests.extending.toy_backend"],
        "grid": {"methods": ["toy_latest"], "backbones": ["echo"], "top_k": [2],
                 "budget": [256]}}))
    run_sweep_on(config, ray_address)
    (run_dir,) = (tmp_path / "results" / "toy").glob("toy_chat_*")
    answers = stage_store(run_dir, "answer").latest().to_pylist()
    # the echo of the context's one message (keep = 1: the newest)
    assert [r["prediction"].split(": ", 1)[1] for r in answers] == ["The venue is Hall B."] * 2
    judged = stage_store(run_dir, "judge").latest().to_pylist()
    assert [r["score"] for r in judged] == [1.0, 1.0]
    calls = calls_store(run_dir).read_all().to_pylist()
    assert {(c["backbone"], c["replica"], c["cached"]) for c in calls} == {("echo", 0, False)}
