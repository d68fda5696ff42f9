"""A driver that Ray's job server (or a RayJob's submitter) started: the job's runtime env
already sets HF_HOME, HF_HUB_OFFLINE, TMEM_CACHE_DIR and TMEM_RESULTS_ROOT, and the driver adds
to its workers' env only what the job does not set (Ray refuses a driver runtime env that
names one of the job's variables, even with the same value)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.ray_head import ROOT, sweep_config
from tmem_core import ConfigError
from tmem_core.pipeline._paths import RESULTS_ENV, results_root
from tmem_core.pipeline._ray_start import JOB_CONFIG_ENV, worker_env

RAYJOB = ROOT / "cluster" / "kuberay" / "rayjob.yaml"


def _rayjob_runtime_env() -> dict[str, object]:
    (job,) = list(yaml.safe_load_all(RAYJOB.read_text()))[:1]
    runtime_env: dict[str, object] = yaml.safe_load(job["spec"]["runtimeEnvYAML"])
    return runtime_env


def test_the_driver_adds_only_what_the_job_does_not_set(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    job_env = _rayjob_runtime_env()["env_vars"]
    assert isinstance(job_env, dict)
    monkeypatch.setenv(JOB_CONFIG_ENV, json.dumps({"runtime_env": {"env_vars": job_env}}))
    for key, value in job_env.items():  # the job's variables are the driver's own too
        monkeypatch.setenv(key, value)
    assert worker_env({"TMEM_TOKENIZERS": "{}"}) == {"TMEM_TOKENIZERS": "{}"}
    with pytest.raises(ConfigError, match="runtime env sets HF_HOME"):
        worker_env({"HF_HOME": "/elsewhere"})
    monkeypatch.delenv(JOB_CONFIG_ENV)
    assert worker_env({})["HF_HOME"] == job_env["HF_HOME"]  # not a job: propagated as before


@pytest.mark.slow
def test_a_sweep_starts_under_the_rayjobs_runtime_env(tmp_path: Path) -> None:
    """The RayJob's runtimeEnvYAML as Ray's job server hands it to the driver (its working
    dir, /app in the image, is this checkout here)."""
    runtime_env = {**_rayjob_runtime_env(), "working_dir": str(ROOT)}
    env_vars = runtime_env["env_vars"]
    assert isinstance(env_vars, dict)
    config = sweep_config(tmp_path, "rayjob-env", limit=2, backbones='["sim"]')
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    env.update({**env_vars, "TMEM_CACHE_DIR": str(tmp_path / "cache"),
                JOB_CONFIG_ENV: json.dumps({"runtime_env": {
                    **runtime_env, "env_vars": {**env_vars,
                                                "TMEM_CACHE_DIR": str(tmp_path / "cache")}}})})
    done = subprocess.run([sys.executable, "-m", "jobs.sweep", str(config)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Failed to merge" not in done.stderr
    assert "sweep rayjob-env done: 1 runs, 0 error records" in done.stdout


def test_a_relative_results_dir_in_rays_copy_of_the_checkout_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray deletes its copy of a job's working directory with its session: results written
    there would be lost, so they go where TMEM_RESULTS_ROOT or --paths-from say, or nowhere."""
    copy = tmp_path / "session_1" / "runtime_resources" / "working_dir_files" / "_ray_pkg_ab"
    copy.mkdir(parents=True)
    monkeypatch.chdir(copy)
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    with pytest.raises(ConfigError, match=r"results_dir.*Ray's copy.*--paths-from"):
        results_root("results")
    assert results_root("/abs/results") == "/abs/results"
    monkeypatch.setenv(RESULTS_ENV, "/mnt/cache")
    assert results_root("results") == "/mnt/cache/results"


def test_a_submitted_sweep_without_a_results_location_is_one_error_line(tmp_path: Path
                                                                         ) -> None:
    copy = tmp_path / "runtime_resources" / "working_dir_files" / "_ray_pkg_cd"
    copy.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(RESULTS_ENV, None)
    done = subprocess.run([sys.executable, "-m", "jobs.sweep",
                           str(ROOT / "jobs" / "configs" / "quickstart.toml")], cwd=copy,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: config key 'results_dir': 'results' is relative") and (
        '--paths-from "$PWD"' in line)
    assert not (copy / "results").exists()
    with_paths = subprocess.run(
        [sys.executable, "-m", "jobs.sweep", str(ROOT / "jobs" / "configs" / "quickstart.toml"),
         "--paths-from", str(tmp_path / "nowhere")], cwd=copy, env=env, capture_output=True,
        text=True, timeout=300, check=False)
    assert with_paths.returncode == 2
    assert with_paths.stderr.strip() == (f"error: config key '--paths-from': no such folder "
                                         f"{tmp_path / 'nowhere'}")
