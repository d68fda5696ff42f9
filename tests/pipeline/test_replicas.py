"""Engine replicas on the local head: two simulated backbones of four replicas each, and a
replica killed mid-sweep."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import Step
from tests.pipeline.test_memory_cost import AnsweringServer
from tests.ray_head import (
    alive_actor_pid,
    run_sweep,
    start_sweep,
    sweep_config,
    wait_for,
)
from tmem_core.llm import get_backbone
from tmem_core.llm._http import OpenAIEngineConfig
from tmem_core.pipeline import STAGES
from tmem_core.pipeline._engine import ReplicaRouter
from tmem_core.results import calls_store

pytestmark = pytest.mark.slow


def _sim_backbones(tmp: Path, step_s: float, names: tuple[str, ...], replicas: int) -> Path:
    """Simulated backbones of `replicas` replicas each (a fresh seed: nothing cached)."""
    seed = uuid.uuid4().int % 10**6
    path = tmp / "backbones.toml"
    path.write_text("".join(
        f'[backbones.{name}]\nbackend = "sim"\nmodel = "sim"\nreplicas = {replicas}\n'
        f'engine = {{ seed = {seed}, step_s = {step_s}, max_output_tokens = 24 }}\n'
        for name in names))
    return path


def _runs(tmp: Path, sweep: str) -> list[Path]:
    runs = json.loads((tmp / "results" / sweep / "sweep.json").read_text())["runs"]
    return [tmp / "results" / sweep / r for r in runs]


def _assert_complete_once(run_dir: Path, questions: int) -> list[dict[str, object]]:
    """Every stage holds each question exactly once; the run's fresh calls, once each."""
    for stage in STAGES:
        keys = [r["key"] for r in stage.store_for(run_dir).read_all().to_pylist() if r["ok"]]
        assert len(keys) == len(set(keys)) == questions, stage.name
    calls = [c for c in calls_store(run_dir).read_all().to_pylist() if not c["cached"]]
    keys = [c["key"] for c in calls]
    assert len(keys) == len(set(keys))
    return calls


def test_two_backbones_of_four_replicas(ray_address: str, tmp_path: Path) -> None:
    names = ("sim-a", "sim-b")
    # slow enough that the six questions of the small synthetic chat (one conversation, so
    # one preferred replica) are in flight together however busy the machine, and spill
    backbones = _sim_backbones(tmp_path, 0.5, names, replicas=4)
    config = sweep_config(tmp_path, "replicas", limit=6, backbones='["sim-a", "sim-b"]',
                          extra=f'backbones_file = "{backbones}"')
    run_sweep(config, ray_address)
    for run_dir in _runs(tmp_path, "replicas"):
        calls = _assert_complete_once(run_dir, 6)
        by_backbone: dict[object, Counter[object]] = {}
        for call in calls:
            by_backbone.setdefault(call["backbone"], Counter())[call["replica"]] += 1
        # the run's answers on its backbone, the judgements on the first one; each spread
        for replicas in by_backbone.values():
            assert len(replicas) > 1 and set(replicas) <= {0, 1, 2, 3}


def test_a_killed_replica_loses_and_repeats_nothing(ray_address: str, tmp_path: Path) -> None:
    backbones = _sim_backbones(tmp_path, 0.2, ("sim-k",), replicas=2)
    config = sweep_config(tmp_path, "kill-replica", limit=6, backbones='["sim-k"]',
                          extra=f'backbones_file = "{backbones}"')
    # three questions in flight: when the first is done, the engines are busy with the rest
    config.write_text(config.read_text() + "questions_in_flight = 3\n")
    log = tmp_path / "driver.log"
    driver = start_sweep(config, ray_address, log)
    answers = tmp_path / "results" / "kill-replica"
    wait_for(lambda: any(answers.glob("*/answer/part-*.parquet")) or driver.poll() is not None,
             300, "first answers")
    os.kill(alive_actor_pid(ray_address, "tmem-llm-sim-k-0"), signal.SIGKILL)
    assert driver.wait(timeout=600) == 0, log.read_text()[-3000:]
    output = log.read_text()
    (run_dir,) = _runs(tmp_path, "kill-replica")
    calls = _assert_complete_once(run_dir, 6)
    assert {c["replica"] for c in calls} == {0, 1}
    assert "[router] tmem-llm-sim-k-0 failed" in output  # its calls were resent


def test_a_fleet_server_that_is_down_leaves_the_sweep_to_the_others(ray_address: str,
                                                                     tmp_path: Path) -> None:
    live = [AnsweringServer([Step()]) for _ in range(2)]
    down = AnsweringServer([Step()])
    down.close()  # a server of the fleet that is not there
    fleet = dataclasses.replace(get_backbone("sim"), backend="openai", replicas=3,
                                engine=OpenAIEngineConfig(base_urls=("a", "b", "c")))
    # the small synthetic chat is one conversation: its calls prefer one server, the down one
    preferred = ReplicaRouter(fleet).ranking("syn-0-0")[0]
    urls = [s.base_url for s in live]
    urls.insert(preferred, down.base_url)
    backbones = tmp_path / "backbones.toml"
    backbones.write_text(f'[backbones.fleet]\nbackend = "openai"\nmodel = "m-{uuid.uuid4().hex}"\n'
                         f'engine = {{ base_urls = {json.dumps(urls)}, max_attempts = 2, '
                         'backoff_base_s = 0.05 }\n')
    config = sweep_config(tmp_path, "fleet", limit=4, backbones='["fleet"]',
                          extra=f'backbones_file = "{backbones}"')
    try:
        done = run_sweep(config, ray_address)
    finally:
        for server in live:
            server.close()
    (run_dir,) = _runs(tmp_path, "fleet")
    calls = _assert_complete_once(run_dir, 4)
    assert all(c["ok"] for c in calls) and preferred not in {c["replica"] for c in calls}
    assert sum(s.calls for s in live) == len(calls)
    assert f"[router] tmem-llm-fleet-{preferred} failed" in done.stdout
