"""Search-o1 and T2Mem in one sweep: by default their contracts record equal step budgets
(the grid's Top-k as the initial retrieval depth, the same number of steps and output tokens
per step), each with its version and every parameter in effect, defaults included; a Top-k
grid gives each two runs that differ."""

from __future__ import annotations

import json
from pathlib import Path

from tmem_core.llm import load_backbones
from tmem_core.methods import MethodEnv
from tmem_core.methods._registry import build_method
from tmem_core.methods.baselines._search_o1 import SearchO1
from tmem_core.methods.t2mem._method import T2Mem
from tmem_core.pipeline import parse_sweep
from tmem_core.pipeline._data import prepare_benchmark
from tmem_core.pipeline._planning import plan_run


def test_search_o1_and_t2mem_contracts_hold_equal_step_budgets(tmp_path: Path) -> None:
    config = parse_sweep({
        "name": "budgets", "results_dir": str(tmp_path),
        "benchmarks": [{"name": "synthetic", "size": 200, "limit": 1}],
        "grid": {"methods": ["t2mem", "search_o1"], "backbones": ["smollm2"]}})
    bench_dir = prepare_benchmark(config.benchmarks[0], tmp_path / "data")
    contracts = {}
    for run in config.runs():
        plan_run(run, bench_dir, load_backbones(None), tmp_path / "budgets")
        contract = json.loads((tmp_path / "budgets" / run.run_id / "contract.json").read_text())
        assert contract["config"]["params"] == {}  # the sweep set none ...
        contracts[run.method] = contract["method"]  # ... the contract has them all
    t2mem, search_o1 = contracts["t2mem"], contracts["search_o1"]
    assert (t2mem["version"], search_o1["version"]) == (3, 3)
    assert t2mem["params"]["max_steps"] == search_o1["params"]["max_steps"] == 5
    assert t2mem["params"]["step_max_tokens"] == search_o1["params"]["step_max_tokens"] == 1024
    assert t2mem["params"]["search_top_k"] == 1 and search_o1["params"]["search_top_k"] == 10
    assert "k_initial" not in t2mem["params"] and "k_initial" not in search_o1["params"]


def test_a_top_k_grid_gives_t2mem_and_search_o1_two_different_runs_each(tmp_path: Path) -> None:
    config = parse_sweep({
        "name": "topk", "results_dir": str(tmp_path),
        "benchmarks": [{"name": "synthetic", "size": 200, "limit": 1}],
        "grid": {"methods": ["t2mem", "search_o1"], "backbones": ["smollm2"],
                 "top_k": [3, 5]}}, sources=False)
    runs = config.runs()
    for name, method_class in (("t2mem", T2Mem), ("search_o1", SearchO1)):
        mine = [r for r in runs if r.method == name]
        assert len({r.run_id for r in mine}) == 2
        env = [MethodEnv({}, r.top_k, r.budget) for r in mine]
        built = [build_method(name, e, r.method_params) for e, r in zip(env, mine, strict=True)]
        assert all(isinstance(m, method_class) for m in built)
        assert sorted(m.top_k for m in built) == [3, 5]  # type: ignore[attr-defined]
