"""A sweep's engines against the GPU cluster its config states: replicas packed onto nodes,
a replica's shards on one node, a vLLM engine never without a GPU, `jobs.plan` refusing a
plan that does not fit with one line."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import bundled_sweep
from tests.ray_head import ROOT
from tmem_core import ConfigError
from tmem_core.llm import BackboneConfig, get_backbone
from tmem_core.llm._config import parse_backbones
from tmem_core.pipeline import load_sweep
from tmem_core.pipeline._capacity import (
    check_gpus,
    check_sweep_gpus,
    engine_asks,
    questions_in_flight,
    with_replicas,
)
from tmem_core.pipeline._config import Resources

GPU_SWEEP = ROOT / "jobs" / "configs" / "gpu_sweep.toml"
CLUSTER = Resources(cluster_gpus=16, gpus_per_node=8)


def _sharded(name: str, tensor: int, replicas: int) -> BackboneConfig:
    qwen = get_backbone("qwen3.5-27b")
    return dataclasses.replace(qwen, name=name, replicas=replicas, engine=dataclasses.replace(
        qwen.engine, tensor_parallel_size=tensor))


def test_the_gpu_sweep_fits_its_cluster_at_four_replicas_and_not_at_eight(tmp_path: Path
                                                                          ) -> None:
    config = load_sweep(bundled_sweep(GPU_SWEEP, tmp_path))
    check_sweep_gpus(config)
    check_sweep_gpus(config, replicas=4)
    with pytest.raises(ConfigError, match=r"need 32 GPUs .*qwen3.5-27b 8 x 2, gemma4-31b 8 x 2"):
        check_sweep_gpus(config, replicas=8)


def test_replicas_are_packed_onto_nodes_not_just_counted() -> None:
    # 5 x 3 = 15 GPUs of 16, but an 8-GPU node holds two 3-GPU replicas: 4 fit
    with pytest.raises(ConfigError, match="hold 4 of the 5 replicas"):
        check_gpus([_sharded("t3", 3, 5)], CLUSTER)
    check_gpus([_sharded("t3", 3, 4), _sharded("t2", 2, 2)], CLUSTER)  # 3+3+2 on each node


def test_a_replica_must_fit_one_node() -> None:
    with pytest.raises(ConfigError, match=r"needs 16 GPUs on one node.*gpus_per_node is 8"):
        check_gpus([_sharded("t16", 16, 1)], Resources(cluster_gpus=32, gpus_per_node=8))


def test_a_vllm_engine_gets_a_gpu_on_a_gpu_sweep() -> None:
    assert [a.gpus for a in engine_asks([_sharded("q", 1, 1)], Resources())] == [1.0]
    with pytest.raises(ConfigError, match="without a GPU"):
        check_gpus([get_backbone("smollm2-vllm-cpu")], CLUSTER)
    check_gpus([get_backbone("smollm2-vllm-cpu")], Resources())  # a CPU sweep: no check


def test_a_serve_backbone_counts_at_its_most_replicas() -> None:
    serve = parse_backbones({"q-serve": {
        "backend": "serve", "model": "Qwen/Qwen3.5-27B",
        "engine": {"tensor_parallel_size": 2, "min_replicas": 2, "max_replicas": 5}}})["q-serve"]
    (ask,) = engine_asks([serve], CLUSTER)
    assert (ask.replicas, ask.gpus) == (5, 2.0)
    with pytest.raises(ConfigError, match="need 18 GPUs"):
        check_gpus([serve, _sharded("q", 2, 4)], CLUSTER)


@pytest.mark.parametrize("data", ["on the cluster", "nowhere here"])
def test_jobs_plan_refuses_a_plan_that_does_not_fit_with_one_line(tmp_path: Path,
                                                                   data: str) -> None:
    """Refused on the engines' fit whether or not this machine has the sweep's data."""
    config = bundled_sweep(GPU_SWEEP, tmp_path) if data == "on the cluster" else GPU_SWEEP
    done = subprocess.run([sys.executable, "-m", "jobs.plan", str(config), "--replicas", "8"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: ") and "resources.cluster_gpus" in line and "16" in line


def test_jobs_plan_over_several_configs_names_each_one_it_refuses(tmp_path: Path) -> None:
    typo = tmp_path / "typo.toml"
    typo.write_text(GPU_SWEEP.read_text().replace("[resources]", "[resources]\nllm_actor = 2"))
    missing = tmp_path / "missing.toml"
    done = subprocess.run([sys.executable, "-m", "jobs.plan", str(typo), str(missing)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2
    assert done.stdout.splitlines() == [f"== {typo}", f"== {missing}"]
    typo_line, missing_line = done.stderr.splitlines()
    assert typo_line.startswith(f"error: {typo}: ") and "llm_actor" in typo_line
    assert missing_line.startswith(f"error: {missing}: ")


def test_every_bundled_sweep_passes_its_own_check(tmp_path: Path) -> None:
    for config in sorted((ROOT / "jobs" / "configs").glob("*.toml")):
        if config.name.startswith("backbones"):
            continue
        check_sweep_gpus(load_sweep(bundled_sweep(config, tmp_path)))


def test_questions_in_flight_hold_every_replica_at_its_slots() -> None:
    resources = Resources(engine_replicas=4)  # the GPU example sweep's two backbones
    backbones = [with_replicas(get_backbone(name), resources)
                 for name in ("qwen3.5-27b", "gemma4-31b")]
    assert {b.slots for b in backbones} == {128} and {b.replicas for b in backbones} == {4}
    assert questions_in_flight(backbones, resources, 10_000) == 2 * 4 * 128
    assert questions_in_flight(backbones, resources, 745) == 745  # never more than asked
    judged_twice = [*backbones, backbones[0]]  # a judge that is also a grid backbone: once
    assert questions_in_flight(judged_twice, resources, 10_000) == 1024
    stated = dataclasses.replace(resources, questions_in_flight=96)
    assert questions_in_flight(backbones, stated, 10_000) == 96
    embedded = get_backbone("smollm2")  # llama.cpp's slots, one replica unless resolved
    assert embedded.slots == embedded.engine.n_parallel == 8
    assert questions_in_flight([embedded], Resources(), 100) == 8
    serve = dataclasses.replace(get_backbone("smollm2-serve"), replicas=1)
    scaled = dataclasses.replace(serve, engine=dataclasses.replace(serve.engine, max_replicas=3))
    assert questions_in_flight([scaled], Resources(), 10_000) == 3 * scaled.engine.max_num_seqs
