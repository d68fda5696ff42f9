"""A retrieve record depends on the backbone only when the method's retrieval reads a memory
its LLM steps built: T-MEM's discovery is reused across backbones, T2Mem's memory is not."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tmem_core.llm import load_backbones
from tmem_core.methods import _registry, get_method
from tmem_core.pipeline import parse_sweep
from tmem_core.pipeline._data import prepare_benchmark
from tmem_core.pipeline._deps import run_dependencies
from tmem_core.pipeline._method_stages import RetrieveStage
from tmem_core.pipeline._planning import plan_run


def _deps(tmp_path: Path, methods: list[str]) -> dict[str, dict[str, dict[str, str]]]:
    config = parse_sweep({
        "name": "deps", "results_dir": str(tmp_path),
        "benchmarks": [{"name": "synthetic", "size": 200, "limit": 1}],
        "grid": {"methods": methods, "backbones": ["smollm2"]}})
    return {run.method: run_dependencies(run, load_backbones(None)) for run in config.runs()}


def test_only_a_method_with_an_llm_memory_retrieves_per_backbone(tmp_path: Path) -> None:
    deps = _deps(tmp_path, ["tmem", "search_o1", "bm25", "t2mem"])
    for name in ("tmem", "search_o1", "bm25"):
        assert not get_method(name).memory
        assert not any(k.startswith("backbone") for k in deps[name]["retrieve"]), name
        assert "backbone smollm2" in deps[name]["construct"]
    assert get_method("t2mem").memory and "backbone smollm2" in deps["t2mem"]["retrieve"]
    assert get_method("mem0").memory and get_method("graphiti").memory


def test_a_method_that_builds_a_memory_must_declare_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    undeclared = dataclasses.replace(get_method("t2mem"), memory=False)
    monkeypatch.setitem(_registry.METHODS._specs, "t2mem", undeclared)
    config = parse_sweep({
        "name": "undeclared", "results_dir": str(tmp_path),
        "benchmarks": [{"name": "synthetic", "size": 200, "limit": 1}],
        "grid": {"methods": ["t2mem"], "backbones": ["smollm2"]}})
    run = plan_run(config.runs()[0], prepare_benchmark(config.benchmarks[0], tmp_path / "data"),
                   load_backbones(None), tmp_path / "undeclared")
    stage = RetrieveStage(run)  # its warm-up meets the error and says so
    with pytest.raises(TypeError, match="registered with memory=True"):
        stage.method  # noqa: B018
