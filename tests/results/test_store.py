from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from tmem_core.results import StageStore, remove_leftovers
from tmem_core.results._store import stage_schema

SCHEMA = stage_schema(pa.field("value", pa.int64()))


def row(key: str, ok: bool = True, value: int = 0) -> dict[str, object]:
    return {"run_id": "r", "key": key, "qid": key, "conv_id": "c", "ok": ok,
            "error": None if ok else "boom", "value": value}


def test_latest_success_per_key_and_failures(tmp_path: Path) -> None:
    store = StageStore(tmp_path, "answer", SCHEMA)
    store.append([row("a", value=1), row("b", ok=False)])
    store.append([row("a", value=2), row("c", ok=False)])
    store.append([row("c", value=3)])
    latest = {r["key"]: r["value"] for r in store.latest().to_pylist()}
    assert latest == {"a": 2, "c": 3}
    assert store.failures().column("key").to_pylist() == ["b"]
    assert store.read_all().num_rows == 5  # the audit history keeps every attempt
    assert sorted(p.name.startswith("part-") for p in (tmp_path / "answer").iterdir()) == [
        True] * 3


def test_empty_store(tmp_path: Path) -> None:
    store = StageStore(tmp_path, "judge", SCHEMA)
    assert store.latest().num_rows == 0 and store.failures().num_rows == 0
    assert store.done_keys() == set()
    store.append([])
    assert not (tmp_path / "judge").exists()


def test_a_damaged_part_is_reported_by_name_and_skipped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = StageStore(tmp_path, "answer", SCHEMA)
    store.append([row("a", value=1)])
    store.append([row("b", value=2)])
    damaged = store.parts()[0]
    damaged.write_bytes(b"PAR1 not a parquet file")
    assert {r["key"]: r["value"] for r in store.latest().to_pylist()} == {"b": 2}
    assert store.read_all().num_rows == 1
    reported = capsys.readouterr().err
    assert reported.count(f"warning: unreadable record part {damaged} skipped") == 1


def test_leftover_temporaries_older_than_the_lease_are_removed(tmp_path: Path) -> None:
    run = tmp_path / "run_a"
    store = StageStore(run, "answer", SCHEMA)
    store.append([row("a")])
    old = [run / "answer" / ".part-1-x.parquet.tmp", run / ".contract.json.tmp",
           tmp_path / ".sweep.json.tmp", tmp_path / "data" / ".synthetic-1.abc"]
    for path in old:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir() if path.parent.name == "data" else path.write_text("half")
        os.utime(path, (1000.0, 1000.0))
    young = run / "answer" / ".part-2-y.parquet.tmp"  # a write under way since the lease
    young.write_text("half")
    removed = remove_leftovers(tmp_path, before=2000.0)
    assert sorted(removed) == sorted(old)
    assert not any(p.exists() for p in old) and young.exists()
    assert store.latest().num_rows == 1
