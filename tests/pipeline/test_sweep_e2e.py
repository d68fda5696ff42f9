"""End to end: `ray job submit` of a sweep to a head started by cluster/start-local.sh, which
takes jobs only from holders of its token."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.ray_head import (
    ROOT,
    TOKEN_PATH,
    free_ports,
    gcs,
    local_head,
    sweep_config,
    sweep_env,
)
from tmem_core.pipeline import STAGES
from tmem_core.results import calls_store

pytestmark = pytest.mark.slow


def test_ray_job_submit_runs_a_sweep(ray_address: str, tmp_path: Path) -> None:
    config = sweep_config(tmp_path, "e2e", methods='["bm25", "tmem_heuristic"]', limit=3)
    # a second head on this machine, started after the session's (as a second test worker's
    # may be): the job still joins the head it was submitted to
    with local_head(free_ports()):
        done = subprocess.run(
            ["ray", "job", "submit", "--working-dir", ".", "--", "python", "-m", "jobs.sweep",
             str(config)], cwd=ROOT, env=sweep_env(ray_address), capture_output=True,
            text=True, timeout=1200, check=False)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    assert f"Ray cluster at address: {gcs(ray_address)}" in log
    assert "sweep e2e done: 2 runs" in log and "[progress]" in log
    runs = json.loads((tmp_path / "results" / "e2e" / "sweep.json").read_text())["runs"]
    assert len(runs) == 2
    for run_id in runs:
        run_dir = tmp_path / "results" / "e2e" / run_id
        contract = json.loads((run_dir / "contract.json").read_text())
        assert contract["ended_at"] >= contract["started_at"]
        assert len(contract["config_sha256"]) == 64 and contract["packages"]["ray"]
        assert contract["prompts"]["judge/synthetic@v1"]
        assert contract["validators"]["question_counts"]["passed"]
        assert contract["validators"]["no_gold_in_prompts"]["passed"]
        assert contract["validators"]["budget"]["passed"]
        for stage in STAGES:
            table = stage.store_for(run_dir).read_all()
            assert set(table.column("qid").to_pylist()) and table.num_rows >= 3
        calls = calls_store(run_dir).read_all().to_pylist()
        assert {c["stage"] for c in calls} >= {"answer", "judge"}
        assert all(c["backbone"] == "smollm2" and c["prompt_tokens"] > 0 for c in calls)


def test_the_job_server_refuses_a_client_without_the_token(ray_address: str,
                                                           tmp_path: Path) -> None:
    for headers, status in (({}, 401), ({"Authorization": "Bearer not-the-token"}, 403)):
        request = urllib.request.Request(f"{ray_address}/api/jobs/", headers=headers)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == status
    marker = tmp_path / "ran"
    env = {**sweep_env(ray_address), "RAY_AUTH_TOKEN": "not-the-token"}
    env.pop("RAY_AUTH_TOKEN_PATH")
    done = subprocess.run(["ray", "job", "submit", "--", "touch", str(marker)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0 and "token is invalid" in done.stdout + done.stderr
    assert not marker.exists()
    assert stat.S_IMODE(TOKEN_PATH.stat().st_mode) == 0o600


def test_a_submitted_config_reads_its_data_and_writes_its_results_from_the_submitters_checkout(
        ray_address: str, tmp_path: Path) -> None:
    """A config whose data and results are relative to the checkout (the shared LoCoMo file
    beside it, results/): submitted with `--paths-from "$PWD"`, it reads the file and its
    results land in the checkout, not in Ray's copy of the working directory."""
    name = f"submitted-{tmp_path.name}"
    config = tmp_path / f"{name}.toml"
    config.write_text(
        f'name = "{name}"\n[[benchmarks]]\nname = "locomo"\n'
        f'source = "../shared/datasets/locomo/locomo10_dev.json"\nlimit = 2\n'
        f'[grid]\nmethods = ["bm25"]\nbackbones = ["sim"]\ntop_k = [8]\nbudget = [512]\n'
        f'[resources]\nretrieve_actors = 1\nllm_actors = 1\n')
    results = ROOT / "results" / name
    try:
        done = subprocess.run(
            ["ray", "job", "submit", "--working-dir", ".", "--", "python", "-m", "jobs.sweep",
             str(config), "--paths-from", str(ROOT)], cwd=ROOT, env=sweep_env(ray_address),
            capture_output=True, text=True, timeout=1200, check=False)
        log = done.stdout + done.stderr
        assert done.returncode == 0, log[-4000:]
        assert f"report: python -m jobs.report {results}" in log
        report = subprocess.run([sys.executable, "-m", "jobs.report", str(results)], cwd=ROOT,
                                capture_output=True, text=True, timeout=300, check=False)
        assert report.returncode == 0, report.stderr[-2000:]
        (run_id,) = json.loads((results / "sweep.json").read_text())["runs"]
        assert json.loads((results / run_id / "contract.json").read_text())["data"]
    finally:
        shutil.rmtree(results, ignore_errors=True)
