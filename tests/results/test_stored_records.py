"""Construct records stored before the typed construct record keep their meaning: the
run's checks, the viewer, the evidence basis and the degradation and steps sections read them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tmem_core.methods import get_method
from tmem_core.methods.t2mem._record import LoopDegradation, LoopRecord, LoopSteps
from tmem_core.methods.tmem import Built
from tmem_core.methods.tmem._payload import TMemDegradation
from tmem_core.methods.tmem._validate import forest_structure
from tmem_core.results._degradation import degradation_counts
from tmem_core.results._evidence import basis_columns
from tmem_core.viewer._evidence import panels

BEFORE = Path(__file__).parents[1] / "fixtures" / "records" / "construct_before_record.json"


@pytest.fixture(scope="module")
def before() -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = json.loads(BEFORE.read_text())
    return rows


def test_a_tmem_record_reads_back_as_its_record_type(before: dict[str, dict[str, Any]]) -> None:
    row = before["tmem"]
    built = get_method("tmem").stored_record(row["payload"])
    assert isinstance(built, Built) and len(built.forest) == len(row["context_ids"])
    assert forest_structure(built, row["context_ids"]) == []
    assert built.compression is not None and built.compression.spans > 0
    assert len(built.repairs) == json.loads(row["degradation"])["edges_repaired"] + json.loads(
        row["degradation"])["edges_dropped"]


def test_a_t2mem_record_reads_back_and_the_viewer_draws_it(
        before: dict[str, dict[str, Any]]) -> None:
    row = before["t2mem"]
    loop = get_method("t2mem").stored_record(row["payload"])
    assert isinstance(loop, LoopRecord) and loop.steps and loop.stop
    assert loop.config is None and loop.step_record is None  # not kept then: the columns hold
    drawn = panels("t2mem", row["payload"], row["context"], {}, set())
    assert len(drawn["timeline"].steps) == len(loop.steps)


def test_the_degradation_and_steps_columns_keep_their_counters(
        before: dict[str, dict[str, Any]]) -> None:
    """The columns are written from the record now: the same counters, under the same names
    (T-MEM's record adds its FALLBACK selections since)."""
    added = {"selection_fallback", "selection_labelled_total"}
    counters = set(TMemDegradation().counters())
    assert set(json.loads(before["tmem"]["degradation"])) == counters - added
    assert set(json.loads(before["t2mem"]["degradation"])) == set(LoopDegradation().counters())
    steps = json.loads(before["t2mem"]["steps"])
    assert LoopSteps(**steps).steps == steps["steps"]
    counts = degradation_counts(r["degradation"] for r in before.values())
    assert counts["repaired_actions"] == 3 and counts["admitted_total"] == 15


def test_the_evidence_basis_of_records_written_before(before: dict[str, dict[str, Any]]) -> None:
    names = ["bm25", "tmem", "t2mem", "mem0"]
    table = pa.Table.from_pylist([{k: before[n][k] for k in ("kind", "payload", "trace")}
                                  for n in names])
    found = {k: v.to_pylist() for k, v in basis_columns(table).items()}
    assert found["evidence_basis"] == ["shown", "shown", "read", "read"]
    assert found["linked_ids"] == [[], [], [], ["m3", "m4"]]  # the memory's sources, shown
