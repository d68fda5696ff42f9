"""The records of a stage actor's questions, written in groups.

An actor holds many questions at once and each stage call writes its records before its
questions move on. Written one call at a time, a 745-question run left thousands of small
part files per store. Here one group is written at a time: a call that ends while a group is
being written joins the next one, written as one part per store as soon as the one before
is on disk (calls first: a record on disk always has its calls). Every call of a group
returns once the group is on disk, so a question still moves on only with its records
written, and a call that meets no other waits for nothing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tmem_core.pipeline._probe import Probe
from tmem_core.results._store import StageStore

Row = dict[str, Any]
Appends = list[tuple[StageStore, list[Row]]]


@dataclass
class Batch:
    """One stage call's records: its calls, then each store's rows."""

    calls: StageStore
    call_rows: list[Row]
    reached: list[tuple[str, str]]  # (stage, qid) of its records, for the probe
    records: Appends
    probe: Probe


@dataclass
class _Group:
    batches: list[Batch] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def write(self) -> None:
        try:
            _append_grouped([(b.calls, b.call_rows) for b in self.batches])
            for batch in self.batches:
                batch.probe.calls_written(batch.reached)
            _append_grouped([append for b in self.batches for append in b.records])
        except BaseException as exc:  # every caller of the group raises it
            self.error = exc
        finally:
            self.done.set()


def _append_grouped(appends: Appends) -> None:
    """One part per store (stores in order of first appearance)."""
    grouped: dict[Path, tuple[StageStore, list[Row]]] = {}
    for store, rows in appends:
        grouped.setdefault(store.directory, (store, []))[1].extend(rows)
    for store, rows in grouped.values():
        store.append(rows)


class RecordWriter:
    """Group commit of the records of a process's stage calls: one group written at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._writing = threading.Lock()  # held while a group is written
        self._open: _Group | None = None

    def write(self, batch: Batch) -> None:
        """`batch` on disk, with the group it joined; raises what writing the group raised."""
        with self._lock:
            group = self._open
            leader = group is None
            if group is None:
                group = self._open = _Group()
            group.batches.append(batch)
        if leader:
            with self._writing:  # the group before is on disk; others joined meanwhile
                with self._lock:
                    self._open = None
                group.write()
        else:
            group.done.wait()
        if group.error is not None:
            raise group.error


WRITER = RecordWriter()
"""The process's writer: every stage of every run in an actor writes through it."""
