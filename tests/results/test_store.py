from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from tmem_core.results import StageStore
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
