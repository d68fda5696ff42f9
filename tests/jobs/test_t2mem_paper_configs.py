"""The T2Mem paper's test-time studies as bundled sweeps: `jobs.plan` accepts each (the GPU ones
with the shared LoCoMo file standing in for the cluster's), and each varies its axis."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hub import stage_tokenizer
from tests.jobs.plans import plans_by_config
from tests.ray_head import ROOT
from tmem_core.llm import get_backbone
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


def test_jobs_plan_accepts_each_study(tmp_path: Path) -> None:
    if not LOCOMO.exists():
        pytest.skip("the shared LoCoMo file is not on this machine")
    configs = [_local(study, tmp_path) for study in STUDIES]
    for config in configs:
        axis = "steps" if "depth" in config.stem else "reasoning_budget"
        assert len({getattr(r, axis) for r in load_sweep(config).runs()}) > 1, config.name
    hf_home = tmp_path / "hf"  # the GPU studies' Gemma counts with its own tokenizer
    stage_tokenizer(hf_home, get_backbone("gemma4-31b").model, ["the", "launch"])
    done = subprocess.run([sys.executable, "-m", "jobs.plan", *map(str, configs)], cwd=ROOT,
                          capture_output=True, text=True, timeout=1800, check=False,
                          env={**os.environ, "HF_HOME": str(hf_home)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    plans = plans_by_config(done.stdout)
    for config in configs:
        plan = "\n".join(plans[str(config)])
        assert all(f"run {r.run_id}:" in plan for r in load_sweep(config).runs()), config.name
