"""Engines that cannot be placed or started end the sweep with one `error:` line saying what:
replica actors asking for GPUs the cluster does not have, and an engine whose every start
failed (tried a bounded number of times, not once per question)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.ray_head import ROOT, gcs, sweep_config, sweep_env

pytestmark = pytest.mark.slow


def _sweep_errors(config: Path, address: str, tmp: Path) -> tuple[str, list[str]]:
    """Run a sweep that must end with status 2; its output and `error:` lines."""
    done = subprocess.run([sys.executable, "-m", "jobs.sweep", str(config)], cwd=ROOT,
                          env=sweep_env(gcs(address), TMEM_CACHE_DIR=str(tmp / "cache")),
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout, [line for line in done.stderr.splitlines() if line.startswith("error:")]


def test_replicas_that_cannot_be_placed_end_the_sweep_naming_them(ray_address: str,
                                                                   tmp_path: Path) -> None:
    backbones = tmp_path / "backbones.toml"
    backbones.write_text('[backbones.big]\nbackend = "vllm"\nmodel = "Qwen/Qwen3.5-27B"\n'
                         'replicas = 2\nengine = { tensor_parallel_size = 2 }\n')
    config = sweep_config(tmp_path, "unplaced", limit=2, backbones='["big"]',
                          extra=f'backbones_file = "{backbones}"')
    config.write_text(config.read_text() + "placement_timeout_s = 3\n")
    _, errors = _sweep_errors(config, ray_address, tmp_path)
    assert len(errors) == 1, errors
    assert "not placed after 3 s: backbones.big: replicas 0, 1 (2 GPUs each, on one node)" in (
        errors[0])
    assert "have 0 GPUs" in errors[0]  # what the cluster has (the test head has no GPU)


def test_an_engine_that_never_starts_ends_the_sweep_after_its_attempts(ray_address: str,
                                                                       tmp_path: Path) -> None:
    backbones = tmp_path / "backbones.toml"
    backbones.write_text('[backbones.broken]\nbackend = "embedded"\nmodel = "SmolLM2"\n'
                         f'engine = {{ model_path = "{tmp_path / "missing.gguf"}" }}\n')
    config = sweep_config(tmp_path, "unstarted", limit=4, backbones='["broken"]',
                          extra=f'backbones_file = "{backbones}"')
    config.write_text(config.read_text()
                      + "engine_start_attempts = 2\nengine_start_backoff_s = 0.5\n")
    output, errors = _sweep_errors(config, ray_address, tmp_path)
    assert len(errors) == 1, errors
    assert errors[0].startswith("error: backbones.broken: its engine did not start (2 attempts)")
    assert "missing.gguf" in errors[0]
    # each attempt once, then the remaining questions failed at once (no reload per question)
    assert output.count("[engine] broken: start ") == 2
