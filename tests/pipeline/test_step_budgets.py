"""Search-o1 and T2Mem in one sweep: by default their contracts record equal step budgets
(the same initial retrieval depth and the same number of steps after it), each with its
version and every parameter in effect, defaults included."""

from __future__ import annotations

import json
from pathlib import Path

from tmem_core.llm import load_backbones
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
    assert (t2mem["version"], search_o1["version"]) == (2, 2)
    assert t2mem["params"]["k_initial"] == search_o1["params"]["k_initial"] == 5
    assert t2mem["params"]["max_steps"] == search_o1["params"]["max_steps"] == 5
    assert t2mem["params"]["k_search"] == 1 and search_o1["params"]["k"] == 10  # own depths
