"""The T2Mem paper as bundled sweeps: `jobs.plan` accepts each (the GPU ones with the shared
LoCoMo file and the LongMemEval fixture standing in for the cluster's), each holds what its
part of the paper needs, every GPU config has a CPU twin, and the LongMemEval study's CI twin
runs on the fixture files (the `sim` engine answering: the harness's time, not a model's)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest

from tests.hub import stage_tokenizer
from tests.jobs.plans import plans_by_config
from tests.ray_head import ROOT
from tmem_core.llm import get_backbone
from tmem_core.methods import get_method, method_names
from tmem_core.pipeline import load_sweep, parse_sweep, run_sweep

PAPER = ROOT / "jobs" / "configs" / "t2mem_paper"
STUDIES = sorted(PAPER.glob("*.toml"))
LOCOMO = ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10_dev.json"
LONGMEMEVAL = ROOT / "tests" / "fixtures" / "longmemeval" / "longmemeval_s_real_naming.json"
ABLATIONS = {"t2mem", *(n for n in method_names() if get_method(n).variant_of == "t2mem")}
BASELINES = {"naive_rag", "search_o1", "bm25", "dense", "hybrid", "bm25_expand",
             "recent_context", "mem0", "graphiti", "tmem", "lazymem"}

pytestmark = pytest.mark.slow  # a minute of simulated engines per study


def _local(config: Path, tmp: Path) -> Path:
    """The study with the cluster's data and results folder replaced by this machine's."""
    text = config.read_text().replace("/mnt/cache/data/locomo10.json", str(LOCOMO)).replace(
        "/mnt/cache/data/longmemeval/longmemeval_s_cleaned.json", str(LONGMEMEVAL)).replace(
        "/mnt/cache/tmem-eval/results", str(tmp / "results"))
    if "results_dir" not in text:
        text = f'results_dir = "{tmp / "results"}"\n' + text
    copy = tmp / config.name
    copy.write_text(text)
    return copy


def _grid(name: str) -> dict[str, object]:
    raw = tomllib.loads((PAPER / f"{name}.toml").read_text())
    return {"benchmarks": sorted({b["name"] for b in raw["benchmarks"]}), **raw["grid"]}


def test_each_part_of_the_paper_is_a_config_with_a_cpu_twin() -> None:
    gpu = {p.stem for p in STUDIES if not p.stem.endswith("_cpu")}
    assert gpu == {"main_table", "ablations", "longmemeval_study", "budget_study",
                   "depth_study"}
    for name in gpu:
        paper, twin = _grid(name), _grid(f"{name}_cpu")
        assert set(twin["methods"]) == set(paper["methods"]), name  # type: ignore[arg-type]
        assert paper["backbones"] == ["qwen3.5-27b", "gemma4-31b"], name
        assert paper["top_k"] == twin["top_k"] == [5], name  # the paper's k (§4)
        for config in (name, f"{name}_cpu"):  # where the paper's judge belongs
            assert "Qwen3.5-Plus" in (PAPER / f"{config}.toml").read_text(), config
    main = _grid("main_table")
    assert main["benchmarks"] == ["locomo", "longmemeval"]
    assert set(main["methods"]) == {"t2mem", *BASELINES}  # type: ignore[arg-type]
    for name in ("ablations", "longmemeval_study"):
        assert set(_grid(name)["methods"]) == ABLATIONS  # type: ignore[arg-type]
    assert _grid("ablations")["benchmarks"] == ["locomo"]
    assert _grid("longmemeval_study")["benchmarks"] == _grid("longmemeval_study_cpu")[
        "benchmarks"] == ["longmemeval"]
    assert {"no_metadata", "no_raw", "no_rollout", "summary", "graph"} == {
        n.removeprefix("t2mem_") for n in ABLATIONS - {"t2mem"}}


def test_jobs_plan_accepts_each_study(tmp_path: Path) -> None:
    if not LOCOMO.exists():
        pytest.skip("the shared LoCoMo file is not on this machine")
    configs = [_local(study, tmp_path) for study in STUDIES]
    for config in configs:
        if "depth" in config.stem or "budget" in config.stem:
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


def test_the_longmemeval_studys_ci_twin_runs_on_the_fixture_files(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    monkeypatch.chdir(ROOT)  # the twin names the fixture files from the repository's root
    backbones = tmp_path / "backbones.toml"
    backbones.write_text(f'[backbones.sim]\nbackend = "sim"\nmodel = "sim"\nengine = {{ seed = '
                         f"{uuid.uuid4().int % 10**6}, ttft_s = 0.0, step_s = 0.00001, "
                         "step_s_per_seq = 0.0, step_s_per_ktok = 0.0, "
                         "prefill_tokens_per_s = 1e12, max_output_tokens = 16 }\n")
    raw = tomllib.loads((PAPER / "longmemeval_study_cpu.toml").read_text())
    raw["grid"] |= {"backbones": ["sim"], "judges": ["sim"]}
    config = parse_sweep({**raw, "results_dir": str(tmp_path / "results"),
                          "backbones_file": str(backbones)})
    sources = {Path(b.source).name for b in config.benchmarks}  # type: ignore[arg-type]
    assert sources == {"longmemeval_mini.json", "longmemeval_s_real_naming.json"}
    summaries = run_sweep(config, log=lambda _line: None, local=True)
    assert len(summaries) == 2 * len(ABLATIONS)
    for summary in summaries:
        assert summary.questions > 0 and not any(summary.stage_errors.values()), summary.run_id
        assert summary.judged == summary.questions, summary.run_id
