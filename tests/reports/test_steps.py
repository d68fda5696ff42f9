"""The report's test-time steps (forced answers per run, tool calls, parts read in full) from
the construct records' step records, and recall reported as not available for a run none of
whose questions has gold evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reports.conftest import QSpec, locomo_run, write_locomo_data, write_run
from tmem_core.reports import read_sweep, summarise, write_report
from tmem_core.results import stage_store

STEPS = {  # qid -> the step record T2Mem's loop wrote for it
    "q1": {"steps": 5, "max_steps": 5, "forced": True, "tool_calls": 4, "parts_read": 2,
           "parts_read_in_full": 1, "shown": {"E1": 1.0, "E2": 0.5}},
    "q2": {"steps": 2, "max_steps": 5, "forced": False, "tool_calls": 1, "parts_read": 1,
           "parts_read_in_full": 1, "shown": {"E3": 1.0}},
    "q3": {"steps": 5, "max_steps": 5, "forced": True, "tool_calls": 3, "parts_read": 0,
           "parts_read_in_full": 0, "shown": {}},
}
WITHOUT_EVIDENCE = (QSpec("q1", "single-hop", (), ("m1",), (1.0,)),
                    QSpec("q2", "multi-hop", (), ("m2",), (0.0,)))


def _with_step_records(run_dir: Path) -> None:
    """The run's construct records again, each with its step record (the newer one wins)."""
    store = stage_store(run_dir, "construct")
    store.append([{**{k: v for k, v in r.items() if k not in ("written_at", "attempt")},
                   "steps": json.dumps(STEPS[r["qid"]])}
                  for r in store.latest().to_pylist() if r["qid"] in STEPS])


def test_forced_answers_and_reads_are_counted_per_run(tmp_path: Path) -> None:
    root = tmp_path / "hand"
    write_locomo_data(root)
    _with_step_records(write_run(root, locomo_run("hand", method="t2mem")))
    write_run(root, locomo_run("hand"))  # bm25: no loop, no step record
    summary = summarise(read_sweep(root))
    (row,) = summary.steps.to_dicts()
    assert row["run_id"].startswith("locomo_t2mem_") and row["questions"] == 3
    assert (row["forced"], row["max_steps"]) == (2, 5)
    assert row["steps_mean"] == pytest.approx(4.0)
    assert row["tool_calls_per_question"] == pytest.approx(8 / 3)
    assert (row["parts_read"], row["parts_read_in_full"]) == (3, 2)
    assert row["read_in_full_share"] == pytest.approx(2 / 3)
    report = write_report(root).markdown.read_text()
    section = report.split("## Test-time steps", 1)[1].split("\n## ", 1)[0]
    assert "**forced**" in section and "| 2 |" in section


def test_recall_is_not_available_for_a_run_without_gold_evidence(tmp_path: Path) -> None:
    root = tmp_path / "hand"
    write_locomo_data(root, WITHOUT_EVIDENCE)
    write_run(root, locomo_run("hand"), WITHOUT_EVIDENCE)
    summary = summarise(read_sweep(root))
    assert summary.recall.is_empty() and summary.runs["recall"].to_list() == [None]
    assert summary.steps.is_empty()
    report = write_report(root).markdown.read_text()
    section = report.split("## Evidence recall@k", 1)[1].split("\n## ", 1)[0]
    assert "over the questions with gold evidence only" in section
    assert "Recall **not available** for" in section and "none of its 2 questions" in section
    assert "No run of a test-time method" in report
