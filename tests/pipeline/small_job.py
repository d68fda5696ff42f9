"""A small run (BM25 on 4 questions of a 1,000-message synthetic benchmark, sim
backbone), for tests that build a stage directly."""

from __future__ import annotations

from pathlib import Path

from tmem_core.llm import load_backbones
from tmem_core.pipeline import parse_sweep
from tmem_core.pipeline._data import prepare_benchmark
from tmem_core.pipeline._planning import plan_run
from tmem_core.pipeline._run import Run


def small_job(tmp: Path, name: str) -> Run:
    config = parse_sweep({
        "name": name, "results_dir": str(tmp),
        "benchmarks": [{"name": "synthetic", "size": 1000, "limit": 4}],
        "grid": {"methods": ["bm25"], "backbones": ["sim"]}})
    bench_dir = prepare_benchmark(config.benchmarks[0], tmp / "data")
    return plan_run(config.runs()[0], bench_dir, load_backbones(None), tmp / name)
