"""Engine utilisation from the calls table: hand-computed intervals, and a real sweep's calls."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from tmem_core.reports import read_sweep, summarise, write_report
from tmem_core.reports._utilisation import covered, utilisation


def _calls(rows: list[tuple[str, int | None, float, float]]) -> pl.DataFrame:
    """(backbone, replica, sent, answered) as the calls table records them."""
    return pl.DataFrame([{"backbone": b, "replica": r, "finished_at": end, "latency_s": end - s}
                         for b, r, s, end in rows],
                        schema={"backbone": pl.String, "replica": pl.Int64,
                                "finished_at": pl.Float64, "latency_s": pl.Float64})


def test_busy_fractions_are_over_the_time_the_backbone_was_active() -> None:
    table = utilisation(_calls([
        ("q", 0, 0.0, 10.0), ("q", 0, 5.0, 15.0),  # replica 0: busy 0-15, two at once 5-10
        ("q", 1, 20.0, 25.0),                       # replica 1: busy 20-25
        ("q", None, 30.0, 30.0),                    # a cache hit: no replica
        ("g", 0, 100.0, 104.0),                     # another backbone, on its own
    ]))
    rows = {(r["backbone"], r["replica"]): r for r in table.to_dicts()}
    assert set(rows) == {("q", 0), ("q", 1), ("g", 0)}
    q0, q1, g0 = rows["q", 0], rows["q", 1], rows["g", 0]
    assert q0["active_s"] == q1["active_s"] == pytest.approx(20.0)  # 0-15 and 20-25
    assert (q0["busy_fraction"], q1["busy_fraction"]) == pytest.approx((0.75, 0.25))
    assert (q0["mean_in_flight"], q1["mean_in_flight"]) == pytest.approx((1.0, 0.25))
    assert (q0["max_in_flight"], q1["max_in_flight"], q0["calls"]) == (2, 1, 2)
    assert g0["busy_fraction"] == pytest.approx(1.0) and g0["active_s"] == pytest.approx(4.0)


def test_an_answer_and_a_send_at_one_instant_do_not_overlap() -> None:
    table = utilisation(_calls([("q", 0, 0.0, 1.0), ("q", 0, 1.0, 2.0)]))
    assert table.row(0, named=True)["max_in_flight"] == 1
    assert covered([0.0, 1.0, 2.0], [1.0, 3.0, 4.0]) == pytest.approx(4.0)  # one stretch
    assert covered([5.0, 0.0], [7.0, 1.0]) == pytest.approx(3.0)  # two, in any order


def test_a_real_sweeps_utilisation_matches_its_raw_calls(real_sweep: Path) -> None:
    """Every latest successful call that an engine replica answered, and only those (a warm
    request cache answers them all itself: then the table is empty and the report says so)."""
    summary = summarise(read_sweep(real_sweep))
    latest: dict[tuple[str, str], dict[str, object]] = {}
    for part in sorted(real_sweep.glob("*/calls/part-*.parquet")):
        for row in pq.read_table(part).to_pylist():
            key = (part.parent.parent.name, row["key"])
            if row["ok"] and row["written_at"] >= latest.get(key, {}).get("written_at", 0):
                latest[key] = row
    answered = [r for r in latest.values() if r["replica"] is not None]
    table = summary.utilisation
    assert set(zip(table["backbone"], table["replica"], strict=True)) == {
        (r["backbone"], r["replica"]) for r in answered}
    assert sum(table["calls"]) == summary.engine_calls.height == len(answered)
    assert all(0.0 < f <= 1.0 + 1e-9 for f in table["busy_fraction"])
    files = write_report(real_sweep, real_sweep.parent / "utilisation-report")
    section = files.markdown.read_text().split("## Engine utilisation")[1].split("## ")[0]
    assert ("No call reached an engine replica" in section) == (not answered)
    assert files.figures["requests_in_flight"].exists()
