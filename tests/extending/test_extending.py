"""Adding a method and a benchmark takes one decorated function each, here in a test module:
both run through `run_sweep(local=True)`, and the method's parameters are checked at load."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tmem_core.benchmarks import (
    LoadedBenchmark,
    LoadRequest,
    benchmark,
    benchmark_names,
    get_benchmark,
)
from tmem_core.evaluation import Protocol, one_judge
from tmem_core.methods import ContextMethod, MethodEnv, method, method_names, ranked
from tmem_core.methods.baselines import FullContext
from tmem_core.pipeline import ConfigError, parse_sweep, run_sweep
from tmem_core.prompts import load_prompt
from tmem_core.results import calls_store, stage_store
from tmem_core.schema import Gold, Message, Question

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class LatestParams:
    """How many of the newest messages to keep, at most."""

    keep: int = 3


@method("toy_latest", config=LatestParams, description="the newest messages (test method)")
def _toy_latest(env: MethodEnv, params: LatestParams, name: str) -> ContextMethod:
    return ranked(FullContext(env.index_store, name=name), MethodEnv(
        env.conversations, min(params.keep, env.top_k), env.budget_tokens, env.index_store))


@benchmark("toy_chat", needs_source=False, description="a two-person chat (test benchmark)",
           protocol=Protocol(one_judge("judge/synthetic"), ("judge/synthetic",),
                             abstention_phrase="No information available."))
def _toy_chat(request: LoadRequest) -> LoadedBenchmark:
    lines = ["I moved the launch to Friday.", "Noted, Friday it is.", "The venue is Hall B."]
    messages = [Message("toy", f"toy:{i}", i, T0 + timedelta(minutes=i), text, "s1",
                        ("ana", "ben")[i % 2]) for i, text in enumerate(lines)]
    asked = T0 + timedelta(days=1)
    questions = [(Question("toy", "toy:q0", "When is the launch?", "temporal", "ana", asked),
                  Gold("toy:q0", "Friday", ("toy:0",))),
                 (Question("toy", "toy:q1", "Where is the venue?", "single_hop", "ben", asked),
                  Gold("toy:q1", "Hall B", ("toy:2",)))]
    return LoadedBenchmark(messages, questions)


def _config(tmp_path: Path, backbones: Path, params: dict[str, Any]) -> dict[str, Any]:
    return {"name": "toy", "results_dir": str(tmp_path / "results"),
            "backbones_file": str(backbones),
            "benchmarks": [{"name": "toy_chat"}],
            "grid": {"methods": ["toy_latest"], "backbones": ["scripted"], "top_k": [2],
                     "budgets": [256]},
            "methods": {"toy_latest": params}}


def test_a_toy_method_and_benchmark_run_through_the_sweep(
        tmp_path: Path, scripted_server: Callable[..., Any], step: Callable[..., Any]) -> None:
    assert "toy_latest" in method_names() and "toy_chat" in benchmark_names()
    server = scripted_server([step(content='{"verdict": "CORRECT"}')])
    backbones = tmp_path / "backbones.toml"
    backbones.write_text(f'[backbones.scripted]\nbackend = "openai"\n'
                         f'model = "toy-{uuid.uuid4().hex[:8]}"\n'
                         f'engine = {{ base_url = "{server.base_url}" }}\n')
    with pytest.raises(ConfigError, match="unknown key 'kep'; allowed: keep"):
        parse_sweep(_config(tmp_path, backbones, {"kep": 1}))
    config = parse_sweep(_config(tmp_path, backbones, {"keep": 1}))
    (summary,) = run_sweep(config, log=lambda _line: None, local=True)
    assert summary.questions == 2 and not any(summary.stage_errors.values())
    retrieved = {r["qid"]: r["evidence_ids"]
                 for r in stage_store(summary.run_dir, "retrieve").read_all().to_pylist()}
    assert retrieved == {"toy:q0": ["toy:2"], "toy:q1": ["toy:2"]}  # keep = 1: the newest
    judged = pq.read_table(next(summary.run_dir.glob("judge/*.parquet"))).to_pylist()
    assert {r["qid"] for r in judged} == {"toy:q0", "toy:q1"}
    assert {c["stage"] for c in calls_store(summary.run_dir).read_all().to_pylist()} == {
        "answer", "judge"}


def test_every_registered_benchmark_has_a_protocol_whose_prompts_exist() -> None:
    for name in benchmark_names():
        protocol = get_benchmark(name).protocol
        assert protocol.judge_prompts, name
        for prompt in protocol.judge_prompts:
            assert load_prompt(prompt).labels, (name, prompt)  # a judge: it has verdicts
