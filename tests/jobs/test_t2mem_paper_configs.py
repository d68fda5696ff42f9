"""The T2Mem paper's test-time studies as bundled sweeps: `jobs.plan` accepts each (the GPU ones
with the shared LoCoMo file standing in for the cluster's), and each varies its axis."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.ray_head import ROOT
from tmem_core.pipeline import load_sweep

STUDIES = sorted((ROOT / "jobs" / "configs" / "t2mem_paper").glob("*.toml"))
LOCOMO = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10_dev.json"

pytestmark = pytest.mark.slow  # a minute of simulated engines per study


def _local(config: Path, tmp: Path) -> Path:
    """The study with the cluster's LoCoMo and results folder replaced by this machine's."""
    text = config.read_text().replace("/mnt/cache/data/locomo10.json", str(LOCOMO)).replace(
        "/mnt/cache/tmem-eval/results", str(tmp / "results"))
    if "results_dir" not in text:
        text = f'results_dir = "{tmp / "results"}"\n' + text
    copy = tmp / config.name
    copy.write_text(text)
    return copy


@pytest.mark.parametrize("study", STUDIES, ids=[s.stem for s in STUDIES])
def test_jobs_plan_accepts_each_study(study: Path, tmp_path: Path) -> None:
    if not LOCOMO.exists():
        pytest.skip("the shared LoCoMo file is not on this machine")
    config = _local(study, tmp_path)
    runs = load_sweep(config).runs()
    axis = "steps" if "depth" in study.stem else "reasoning_budget"
    assert len({getattr(r, axis) for r in runs}) > 1
    done = subprocess.run([sys.executable, "-m", "jobs.plan", str(config)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert all(f"run {r.run_id}:" in done.stdout for r in runs)
