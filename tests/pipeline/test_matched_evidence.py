"""One evidence contract for every method of a run: over LoCoMo (the shared file) and the
synthetic chat, BM25, T-MEM (and its no-LLM variant) and T2Mem contexts all stay within the
run's one token budget, and the report shows each run's mean and max context tokens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Step, scripted_backbones
from tests.pipeline.test_memory_cost import AnsweringServer
from tmem_core.pipeline import parse_sweep, run_sweep
from tmem_core.reports import read_sweep, summarise, write_report
from tmem_core.results import stage_store

METHODS = ["bm25", "tmem_heuristic", "tmem", "t2mem"]
BUDGET = 384

pytestmark = pytest.mark.slow


def test_every_context_of_every_method_is_within_the_budget(tmp_path: Path,
                                                            locomo_path: Path) -> None:
    server = AnsweringServer([Step()])
    try:
        config = parse_sweep({
            "name": "matched", "results_dir": str(tmp_path / "results"),
            "backbones_file": str(scripted_backbones(tmp_path, server, "shaped")),
            "benchmarks": [{"name": "locomo", "source": str(locomo_path), "limit": 2},
                           {"name": "synthetic", "size": 200, "limit": 2}],
            "grid": {"methods": METHODS, "backbones": ["shaped"], "top_k": [12],
                     "budget": [BUDGET]},
            "methods": {"t2mem": {"episodes": "topic_window", "topic_gap_hours": 1440,
                                  "max_entries": 2}}})
        summaries = run_sweep(config, log=lambda _: None, local=True)
    finally:
        server.close()
    assert len(summaries) == 2 * len(METHODS)
    for summary in summaries:
        constructed = stage_store(summary.run_dir, "construct").latest().to_pylist()
        assert len(constructed) == 2 and all(0 < r["tokens"] <= BUDGET for r in constructed)
        contract = json.loads((summary.run_dir / "contract.json").read_text())
        assert contract["validators"]["budget"]["passed"], summary.run_id
    runs = summarise(read_sweep(tmp_path / "results" / "matched")).runs
    assert runs["context_tokens"].null_count() == 0
    assert (runs["context_tokens_max"] <= BUDGET).all()
    report = write_report(tmp_path / "results" / "matched").markdown.read_text()
    assert "context tokens (mean)" in report
