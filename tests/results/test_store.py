from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tmem_core.results._layout import remove_leftovers
from tmem_core.results._store import JOURNAL, Merge, StageStore, in_force, part_level, stage_schema

SCHEMA = stage_schema(pa.field("value", pa.int64()))


def row(key: str, ok: bool = True, value: int = 0, deps: str | None = None
        ) -> dict[str, object]:
    return {"run_id": "r", "key": key, "qid": key.split("|")[0], "conv_id": "c", "ok": ok,
            "error": None if ok else "boom", "value": value, "deps": deps}


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


OLD, NEW = '{"backbone writer":"a"}', '{"backbone writer":"b"}'


def test_records_count_only_under_the_dependencies_in_force(tmp_path: Path) -> None:
    """Per key: a success under the deps in force is done; a failure under them is an error
    that no success under older deps hides; a key with records under older deps only is
    stale; without expected deps (an old contract) every record counts as before."""
    store = StageStore(tmp_path, "judge", SCHEMA)
    store.append([row("q1|j|0", value=1, deps=OLD), row("q2|j|0", value=2, deps=OLD),
                  row("q3|j|0", value=3, deps=OLD), row("q4|j|0", value=4)])
    store.append([row("q1|j|0", ok=False, deps=NEW), row("q2|j|0", value=20, deps=NEW)])
    store.append([row("q2|j|0", ok=False, deps=NEW)])  # after a success in force: still done
    expected = {q: NEW for q in ("q1", "q2", "q3", "q4")}

    forced = in_force(store.read_all(), expected)
    assert {r["key"]: r["value"] for r in forced.done.to_pylist()} == {"q2|j|0": 20}
    assert forced.failed.column("key").to_pylist() == ["q1|j|0"]
    assert {r["key"]: r["value"] for r in forced.stale.to_pylist()} == {
        "q3|j|0": 3, "q4|j|0": 4}  # q4's record carries no deps: never in force
    assert store.latest(expected).column("key").to_pylist() == ["q2|j|0"]
    assert store.failures(expected).column("key").to_pylist() == ["q1|j|0"]
    assert store.done_keys(expected) == {"q2|j|0"}

    anything = in_force(store.read_all())
    assert {r["key"]: r["value"] for r in anything.done.to_pylist()} == {
        "q1|j|0": 1, "q2|j|0": 20, "q3|j|0": 3, "q4|j|0": 4}
    assert anything.failed.num_rows == 0 and anything.stale.num_rows == 0

    back = in_force(store.read_all(), {q: OLD for q in expected})  # deps changed back
    assert {r["key"]: r["value"] for r in back.done.to_pylist()} == {
        "q1|j|0": 1, "q2|j|0": 2, "q3|j|0": 3}


def test_latest_and_failures_over_many_parts_match_the_history(tmp_path: Path) -> None:
    """Keys spread over many parts, each written again and again, some attempts failing:
    the newest success per key, and the newest failure of each key that never succeeded,
    both in key order."""
    store = StageStore(tmp_path, "answer", SCHEMA)
    rng = random.Random(7)
    history: list[tuple[str, bool, int]] = []
    for value in range(40):
        part = [(f"q{rng.randrange(25):02d}", rng.random() < 0.7, value * 10 + k)
                for k in range(rng.randrange(1, 6))]
        part = list({key: (key, ok, v) for key, ok, v in part}.values())  # a key once a part
        store.append([row(key, ok, v) for key, ok, v in part])
        history += part
    newest_ok = {key: v for key, ok, v in history if ok}
    newest_failed = {key: v for key, ok, v in history if not ok and key not in newest_ok}
    latest = store.latest()
    assert latest.column("key").to_pylist() == sorted(newest_ok)
    assert latest.column("value").to_pylist() == [newest_ok[k] for k in sorted(newest_ok)]
    failures = store.failures()
    assert failures.column("key").to_pylist() == sorted(newest_failed)
    assert failures.column("value").to_pylist() == [newest_failed[k]
                                                    for k in sorted(newest_failed)]


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


def test_parts_written_within_one_millisecond_list_oldest_first(tmp_path: Path) -> None:
    store = StageStore(tmp_path, "answer", SCHEMA)
    keys = [f"k{i}" for i in range(30)]
    for key in keys:
        store.append([row(key)])
    assert [pq.read_table(p).column("key")[0].as_py() for p in store.parts()] == keys


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


def _history(store: StageStore) -> list[tuple[object, ...]]:
    return sorted((r["key"], r["ok"], r["value"], r["attempt"], r["written_at"])
                  for r in store.read_all().to_pylist())


def _streamed(tmp_path: Path) -> StageStore:
    """A store as a streamed run leaves it: a part per call, a retried key among them."""
    store = StageStore(tmp_path, "answer", SCHEMA)
    store.append([row("q2", ok=False)])
    for index, key in enumerate(["q1", "q2", "q0"]):
        store.append([row(key, value=index)])
    return store


def test_compact_merges_every_part_into_one_with_the_same_rows(tmp_path: Path) -> None:
    store = _streamed(tmp_path)
    before, latest = _history(store), store.latest().to_pylist()
    store.compact()
    (part,) = store.parts()
    assert _history(store) == before  # every attempt kept, bookkeeping unchanged
    assert sorted(store.latest().to_pylist(), key=str) == sorted(latest, key=str)
    assert sorted(p.name for p in (tmp_path / "answer").iterdir()) == [part.name]
    store.append([row("q3", value=9)])  # a later write sorts after the merged part
    assert store.parts()[-1] != part and len(store.parts()) == 2


def test_a_merge_cut_short_after_its_part_landed_reads_each_row_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _streamed(tmp_path)
    before = _history(store)
    sources = store.parts()
    monkeypatch.setattr(Merge, "finish", lambda self: None)  # killed before removing
    store.compact()
    monkeypatch.undo()
    assert all(p.exists() for p in sources) and (tmp_path / "answer" / JOURNAL).exists()
    assert _history(store) == before  # the replaced parts are not read twice
    store.compact()  # the next merge removes what the cut-short one left
    assert len(store.parts()) == 1 and not any(p.exists() for p in sources)
    assert not (tmp_path / "answer" / JOURNAL).exists() and _history(store) == before


def test_a_merge_cut_short_before_its_part_landed_keeps_the_parts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _streamed(tmp_path)
    before = _history(store)

    replace = os.replace

    def killed(source: Path, target: Path) -> None:  # the journal lands, the merged part not
        if target.name != JOURNAL:
            raise KeyboardInterrupt
        replace(source, target)

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        store.compact()
    monkeypatch.undo()
    assert (tmp_path / "answer" / JOURNAL).exists()
    assert len(store.parts()) == 4 and _history(store) == before
    store.compact()
    assert len(store.parts()) == 1 and _history(store) == before


def test_a_store_with_a_damaged_part_is_not_merged(tmp_path: Path) -> None:
    store = _streamed(tmp_path)
    store.parts()[1].write_bytes(b"PAR1 damaged")
    store.compact()
    assert len(store.parts()) == 4


def test_a_streaming_run_keeps_few_parts_per_level_and_every_row(tmp_path: Path) -> None:
    store = StageStore(tmp_path, "answer", SCHEMA)
    written = []
    for index in range(70):  # questions streaming out, one part each
        store.append([row(f"q{index}", value=index)])
        written.append(index)
        store.merge_levels(fanout=4)
        levels = Counter(part_level(p) for p in store.parts())
        assert all(count < 4 for count in levels.values()), levels
        assert sorted(store.read_all().column("value").to_pylist()) == written
    assert max(levels) == 3  # 70 parts: 4 ** 3 <= 70 < 4 ** 4
    assert sum(levels.values()) < 4 * 3
    store.compact()
    (part,) = store.parts()
    assert part_level(part) == 4 and store.read_all().num_rows == 70


NEWEST_MEMORY = """
import json, sys
from pathlib import Path
import pyarrow as pa
from tests.results.test_store import SCHEMA_TEXT
from tmem_core.results._store import StageStore
store = StageStore(Path(sys.argv[1]), "construct", SCHEMA_TEXT)
latest, failures = store.latest(), store.failures()
peak = pa.default_memory_pool().max_memory()
history = store.read_all().nbytes
print(json.dumps({"peak": peak, "history": history, "latest": latest.num_rows,
                  "failures": failures.num_rows}))
"""
SCHEMA_TEXT = stage_schema(pa.field("context", pa.string()))


def test_newest_records_are_read_without_holding_the_history(tmp_path: Path) -> None:
    """A store resumed over many revisions (each attempt a ~4 KB context) keeps one record
    per key: the reader holds those and a few record groups, never the whole history (a
    stage actor read 43,000 contexts at once to keep 745 and was killed for memory)."""
    store = StageStore(tmp_path, "construct", SCHEMA_TEXT)
    rng = random.Random(3)
    for revision in range(40):
        store.append([{**row(f"q{k:03d}", ok=rng.random() < 0.9), "value": None,
                       "context": f"{revision} {k} " + rng.randbytes(2048).hex()}
                      for k in range(500)])
        if revision % 8 == 7:
            store.compact()  # merged parts, as a finished run leaves them
    done = subprocess.run([sys.executable, "-c", NEWEST_MEMORY, str(tmp_path)],
                          cwd=Path(__file__).parents[2], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"peak {found['peak'] / 2**20:.1f} MiB for a history of "
          f"{found['history'] / 2**20:.1f} MiB")
    assert found["latest"] == 500 and found["failures"] == 0
    assert found["peak"] < found["history"] / 4
