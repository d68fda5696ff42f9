"""Fallbacks are counted, not hidden: a backbone that answers junk to T-MEM's selection and
T2Mem's steps shows up, exactly, in the degradation counters of the summary and the report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import ScriptedServer, Step, scripted_backbones
from tmem_core.pipeline import parse_sweep, run_sweep
from tmem_core.reports import read_sweep, summarise

SELECT = "You select evidence from a long multi-party conversation"
STEP = "You answer a question about a long conversation by building a memory"


def _distinct(server: ScriptedServer, marker: str) -> int:
    """Distinct prompts (resamples of one request count once) whose system text has `marker`."""
    return len({str(b["messages"]) for b in server.bodies
                if marker in b["messages"][0]["content"]})


def test_junk_output_is_counted_as_degradation(
        tmp_path: Path, scripted_server: Callable[..., ScriptedServer]) -> None:
    server = scripted_server([Step(content="not JSON, not a label, not an action")])
    backbones = scripted_backbones(tmp_path, server, "junk")
    config = parse_sweep({
        "name": "junk", "results_dir": str(tmp_path / "results"),
        "backbones_file": str(backbones),
        "benchmarks": [{"name": "synthetic", "size": 200, "limit": 3}],
        "grid": {"methods": ["tmem", "t2mem"], "backbones": ["junk"], "top_k": [8],
                 "budget": [512]},
        "methods": {"t2mem": {"episodes": "topic_window", "max_entries": 2}}})
    lines: list[str] = []
    summaries = {s.run_id.split("_")[1]: s for s in run_sweep(config, log=lines.append,
                                                              local=True)}
    tmem, t2mem = summaries["tmem"].degradation, summaries["t2mem"].degradation
    assert tmem["selection_fallback_batches"] == _distinct(server, SELECT) > 0
    assert tmem["selection_batches_total"] == tmem["selection_fallback_batches"]
    assert t2mem["malformed_steps"] == _distinct(server, STEP) == 3  # the first step each
    assert t2mem["fallback_context"] == 3 and t2mem["steps_total"] == 3
    assert all("DEGRADED" in line for line in lines if line.startswith("run "))
    table = summarise(read_sweep(tmp_path / "results" / "junk")).degradation
    by_run = {r["run_id"]: r for r in table.iter_rows(named=True)}
    assert by_run[summaries["tmem"].run_id]["selection_fallback_batches"] == \
        tmem["selection_fallback_batches"]
    assert by_run[summaries["t2mem"].run_id]["malformed_steps"] == 3
