"""Append-only Parquet records per stage, and the one rule by which every reader (and every
stage deciding what to reuse) takes a key's record in force (`in_force`).

Every write is one new part file (written to a temporary name, then renamed), so a crash
never leaves a half-written record and nothing already written is ever rewritten. Questions
stream, so a run writes many small parts: while it runs, every `MERGE_FANOUT` parts of one
level are merged into one part of the next level (`merge_levels`: a written part is level 0),
so a store holds fewer than `MERGE_FANOUT` parts per level and each row is rewritten once
per level; when the run is done all are merged into one (`compact`), its rows unchanged, so
that later readers open one file per store. Failed
attempts are records too (`ok=False` with an `error`); a re-run retries them. A part that
cannot be read (damaged on disk) is reported by name and skipped: its records count as never
written, so a re-run does their questions again.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq


class _Stamps:
    """Part name stamps: milliseconds, rising with every part this process writes (two parts
    of one millisecond still sort oldest first)."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def __call__(self, now: float) -> int:
        with self._lock:
            self._last = max(int(now * 1000), self._last + 1)
            return self._last


_stamp = _Stamps()


RECORD_COLUMNS = [
    pa.field("run_id", pa.string(), nullable=False),
    pa.field("key", pa.string(), nullable=False),  # stable identity of the record in its stage
    pa.field("qid", pa.string(), nullable=False),
    pa.field("conv_id", pa.string()),
    pa.field("ok", pa.bool_(), nullable=False),
    pa.field("error", pa.string()),
    pa.field("written_at", pa.float64(), nullable=False),
    pa.field("attempt", pa.string(), nullable=False),  # id of the write that produced it
]


SELECTION_COLUMNS = ("key", "qid", "written_at", "ok", "attempt", "deps")
"""What choosing a key's record in force reads of every attempt (`StageStore.newest`)."""
PROVENANCE_COLUMNS = [
    pa.field("deps", pa.string()),  # JSON: each dependency of the record's stage -> its hash
    pa.field("code", pa.string()),  # the git commit of the driver that wrote it
]
"""What produced a stage record (`tmem_core.pipeline` compares `deps` before reusing it; a
record written before they were recorded reads null)."""


def stage_schema(*payload: pa.Field) -> pa.Schema:
    return pa.schema([*RECORD_COLUMNS, *PROVENANCE_COLUMNS, *payload])


class StageStore:
    """One stage's records of one run: `<run_dir>/<stage>/part-*.parquet`."""

    def __init__(self, run_dir: Path, stage: str, schema: pa.Schema) -> None:
        self.directory = run_dir / stage
        self.stage = stage
        self.schema = schema

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Write rows as one new part file (atomic); missing bookkeeping columns are filled."""
        if not rows:
            return
        attempt, now = uuid.uuid4().hex, time.time()
        filled = [{"written_at": now, "attempt": attempt, "error": None, **row} for row in rows]
        table = pa.Table.from_pylist(filled, schema=self.schema)
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / f"part-{_stamp(now):013d}-{attempt}.parquet"
        tmp = self.directory / f".{final.name}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, final)

    def parts(self) -> list[Path]:
        """The store's part files, oldest first (without those a landed merge replaced)."""
        if not self.directory.exists():
            return []
        replaced = self._merge().replaced
        return sorted(p for p in self.directory.glob("part-*.parquet") if p.name not in replaced)

    def compact(self) -> None:
        """Merge the store's parts into one part holding the same rows (sorted by question,
        in row groups a reader filtering by question can skip), if it has several and all
        are readable. Crash-safe: a journal names the merged part and the parts it replaces
        before the merged part lands; readers skip the replaced parts of a landed merge, and
        the next merge removes what a crash left. One process merges a store at a time (the
        run's driver); others may append meanwhile."""
        self._merge().finish()
        parts = self.parts()
        if len(parts) >= 2:
            self._merge_parts(parts, max(part_level(p) for p in parts) + 1)

    def merge_levels(self, fanout: int = 0) -> None:
        """While the run streams: merge every `fanout` (`MERGE_FANOUT`) parts of one level
        into one part of the next, lowest level first."""
        fanout = fanout or MERGE_FANOUT
        self._merge().finish()
        while True:
            levels: dict[int, list[Path]] = {}
            for part in self.parts():
                levels.setdefault(part_level(part), []).append(part)
            full = [(level, parts) for level, parts in sorted(levels.items())
                    if len(parts) >= fanout]
            if not full or not self._merge_parts(full[0][1], full[0][0] + 1):
                return

    def _merge_parts(self, parts: list[Path], level: int) -> bool:
        """`parts` as one part of `level` (False, and nothing changed, if one is damaged)."""
        try:
            table = _dataset(parts, self.schema).to_table()
        except (OSError, pa.ArrowException):  # a damaged part: leave the store as it is
            return False
        newest = max(p.name.split("-")[1] for p in parts)
        final = self.directory / f"part-{newest}-L{level}-{uuid.uuid4().hex}.parquet"
        tmp = self.directory / f".{final.name}.tmp"
        pq.write_table(table.sort_by([("qid", "ascending"), ("written_at", "ascending")]),
                       tmp, row_group_size=MERGED_ROW_GROUP)
        merge = Merge(self.directory, final.name, frozenset(p.name for p in parts))
        merge.record()
        os.replace(tmp, final)
        merge.finish()
        return True

    def read_all(self) -> pa.Table:
        """Every attempt ever written (the audit history); unreadable parts are skipped."""
        return read_parts(self.parts(), self.schema)

    def latest(self, expected: Expected = None) -> pa.Table:
        """The record in force per key that succeeded (`in_force`, `newest`)."""
        return self.newest(lambda history: in_force(history, expected).done)

    def done_keys(self, expected: Expected = None) -> set[str]:
        return set(self.newest(lambda history: in_force(history, expected).done,
                               columns=["key"]).column("key").to_pylist())

    def failures(self, expected: Expected = None) -> pa.Table:
        """The record in force per key that failed (`in_force`, `newest`)."""
        return self.newest(lambda history: in_force(history, expected).failed)

    def newest(self, select: Callable[[pa.Table], pa.Table],
               columns: Sequence[str] | None = None) -> pa.Table:
        """The records `select` (e.g. `in_force`'s done) keeps of the history, found on
        its key, question, time, outcome and dependency columns, then read whole (or their
        `columns`) and only they: a store resumed over many revisions holds every attempt,
        and a stage actor that read its history whole to keep one record per key held 2.6 GB
        at once for a history of 43,000 contexts (and was killed for memory beside three
        others)."""
        parts, kept = self.parts(), list(columns or self.schema.names)
        chosen = select(read_parts(parts, self.schema, columns=list(SELECTION_COLUMNS)))
        if chosen.num_rows == 0:
            return self.schema.empty_table().select(kept)
        # each chosen record by its key and write (a write holds a key once at most; should
        # it hold one twice, `select` keeps the same one of both)
        where = _identity(pc.field("key"), pc.field("attempt")).isin(
            _identity(chosen.column("key"), chosen.column("attempt")))
        wanted = list(dict.fromkeys([*kept, *SELECTION_COLUMNS]))
        return select(read_parts(parts, self.schema, where, wanted)).select(kept)


    def _merge(self) -> Merge:
        return Merge.read(self.directory)


MERGED_ROW_GROUP = 256
MERGE_FANOUT = 16
"""Parts of one level merged into one of the next while a run streams."""


def part_level(part: Path) -> int:
    """A part's merge level: 0 as written, n for a merge of level n - 1 parts (a merge
    named before levels were counts as 0)."""
    fields = part.name.split("-")
    if len(fields) > 3 and fields[2].startswith("L") and fields[2][1:].isdigit():
        return int(fields[2][1:])
    return 0
JOURNAL = "merge.json"


@dataclass(frozen=True)
class Merge:
    """A store's merge in progress (`<store>/merge.json`): the part it writes and the parts
    that part replaces once it has landed."""

    directory: Path
    merged: str = ""
    sources: frozenset[str] = frozenset()

    @classmethod
    def read(cls, directory: Path) -> Merge:
        journal = directory / JOURNAL
        if not journal.exists():
            return cls(directory)
        entry = json.loads(journal.read_text())
        return cls(directory, entry["merged"], frozenset(entry["sources"]))

    @property
    def replaced(self) -> frozenset[str]:
        """The parts no reader may read: those of a merge whose part landed."""
        return self.sources if self.merged and (self.directory / self.merged).exists() \
            else frozenset()

    def record(self) -> None:
        tmp = self.directory / f".{JOURNAL}.tmp"
        tmp.write_text(json.dumps({"merged": self.merged, "sources": sorted(self.sources)}))
        os.replace(tmp, self.directory / JOURNAL)

    def finish(self) -> None:
        """Remove the replaced parts of a landed merge, then the journal."""
        for name in self.replaced:
            (self.directory / name).unlink(missing_ok=True)
        (self.directory / JOURNAL).unlink(missing_ok=True)


def read_parts(parts: Sequence[Path], schema: pa.Schema, where: Any = None,
               columns: list[str] | None = None) -> pa.Table:
    """The rows of `parts` under `schema` (columns a part lacks read as null), those matching
    `where` (a pyarrow expression) if given, their `columns` if given. A part that cannot be
    read is reported and skipped."""
    empty = schema.empty_table().select(columns or schema.names)
    if not parts:
        return empty
    try:
        return _scan(parts, schema, where, columns)
    except (OSError, pa.ArrowException):  # some part is damaged: read them one by one
        tables = []
        for part in parts:
            try:
                tables.append(_scan([part], schema, where, columns))
            except (OSError, pa.ArrowException) as exc:
                report_unreadable(part, exc)
        return pa.concat_tables(tables) if tables else empty


FILTERED_SCAN = {"batch_size": MERGED_ROW_GROUP, "batch_readahead": 2}
"""A filtered read decodes a record group at a time, a few ahead, each read from disk when
it is decoded: a filter keeps few rows of each, and Arrow's defaults (batches of 131,072
rows, 16 ahead, a part's columns read whole first) held 160 MiB to keep 745 contexts of a
history of 46,000 (1 GB with the default batch size); so it holds 39 MiB."""


def _identity(key: Any, attempt: Any) -> Any:
    """A record's key and write as one string (of columns, or of fields in a filter)."""
    return pc.binary_join_element_wise(key, attempt, "\x1f")


def _scan(parts: Sequence[Path], schema: pa.Schema, where: Any, columns: list[str] | None
          ) -> pa.Table:
    if where is None:
        return _dataset(parts, schema).to_table(columns=columns)
    lean = pads.ParquetFileFormat(
        default_fragment_scan_options=pads.ParquetFragmentScanOptions(pre_buffer=False))
    return _dataset(parts, schema, lean).to_table(columns=columns, filter=where,
                                                  **FILTERED_SCAN)


def _dataset(parts: Sequence[Path], schema: pa.Schema,
             file_format: str | pads.FileFormat = "parquet") -> pads.Dataset:
    return pads.dataset([str(p) for p in parts], schema=schema, format=file_format)


_REPORTED: set[Path] = set()


def report_unreadable(part: Path, exc: Exception) -> None:
    """One warning per damaged part and process."""
    if part not in _REPORTED:
        _REPORTED.add(part)
        print(f"warning: unreadable record part {part} skipped ({type(exc).__name__}: "
              f"{exc}); its records are redone by the next run", file=sys.stderr, flush=True)


Expected = Mapping[str, str] | None
"""The dependencies in force of a store's records: per question, the `deps` a record must
carry to count (`tmem_core.results.expected_deps`); None: every record counts (a run whose
contract predates recorded dependencies)."""


@dataclass(frozen=True)
class InForce:
    """A store's history as every reader counts it, one record per key in one table at most:
    `done`, the newest success under the dependencies in force (counted and scored);
    `failed`, the newest failure under them where none succeeded (an error, whatever
    succeeded under other dependencies); `stale`, the newest record of a key with none under
    them (made under superseded dependencies: counted, never scored)."""

    done: pa.Table
    failed: pa.Table
    stale: pa.Table


def in_force(history: pa.Table, expected: Expected = None) -> InForce:
    """The records in force of a store's history (`StageStore.read_all`, or its
    `SELECTION_COLUMNS`): the rule a stage reuses records by, and the one every reader
    counts them by. A record is current when its `deps` equal `expected[qid]`."""
    if expected is None:
        current = pa.array([True] * history.num_rows, pa.bool_())
    else:
        pairs = zip(history.column("qid").to_pylist(), history.column("deps").to_pylist(),
                    strict=True)
        current = pa.array([d is not None and expected.get(q) == d for q, d in pairs],
                           pa.bool_())
    ok = history.column("ok")
    done = _newest_per_key(history.filter(pc.and_(ok, current)), exclude=set())
    settled = set(done.column("key").to_pylist())
    failed = _newest_per_key(history.filter(pc.and_(pc.invert(ok), current)), exclude=settled)
    settled |= set(failed.column("key").to_pylist())
    stale = _newest_per_key(history.filter(pc.invert(current)), exclude=settled)
    return InForce(done, failed, stale)


def _newest_per_key(table: pa.Table, exclude: set[str]) -> pa.Table:
    if table.num_rows == 0:
        return table
    order = table.sort_by([("key", "ascending"), ("written_at", "descending")])
    keys = order.column("key").to_pylist()
    keep = [i for i, k in enumerate(keys)
            if (i == 0 or keys[i - 1] != k) and k not in exclude]
    return order.take(pa.array(keep, type=pa.int64()))
