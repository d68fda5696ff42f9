"""Request hashing and the SQLite cache under concurrent writers in several processes."""

from __future__ import annotations

import dataclasses
import fcntl
import multiprocessing
import pickle
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from tmem_core.llm import (
    ChatRequest,
    ChatResponse,
    RequestCache,
    Sampling,
    Usage,
    get_backbone,
    request_hash,
)
from tmem_core.llm import _request_cache as request_cache_module
from tmem_core.llm._request_cache import NETWORK_ENV, on_network_fs
from tmem_core.llm._types import ChatMessage, output_response

WRITERS = 4
PER_WRITER = 150


def test_hash_covers_backbone_model_weights_messages_sampling_schema_only() -> None:
    smol = get_backbone("smollm2")
    base = ChatRequest((ChatMessage("system", "s"), ChatMessage("user", "u")), Sampling(), None)
    key = request_hash(smol, base)
    assert len(key) == 64 and key == request_hash(smol, base)
    assert key == request_hash(smol, dataclasses.replace(base, stage="judge", qid="q9"))
    assert key == request_hash(smol, dataclasses.replace(base, sampling=None))  # = defaults
    variants = [
        dataclasses.replace(base, messages=[ChatMessage("user", "u")]),
        dataclasses.replace(base, sampling=Sampling(seed=1)),
        dataclasses.replace(base, sampling=Sampling(temperature=0.5)),
        dataclasses.replace(base, schema={"type": "object"}),
    ]
    keys = {request_hash(smol, v) for v in variants}
    keys.add(request_hash(dataclasses.replace(smol, name="other"), base))
    keys.add(request_hash(dataclasses.replace(smol, model="other"), base))
    as_shipped = dataclasses.replace(smol.engine, weights="keep")  # other weights, same model
    keys.add(request_hash(dataclasses.replace(smol, engine=as_shipped), base))
    assert key not in keys and len(keys) == 7


def _write(path: str, writer: int, write_behind: bool) -> None:
    cache = RequestCache(path, write_behind)
    for start in range(0, PER_WRITER, 10):  # many small transactions, interleaved with reads
        batch = {
            f"w{writer}-{i}": output_response(f"text {writer} {i}", Usage(i, writer), 0.5, None)
            for i in range(start, start + 10)
        }
        cache.put_many("smollm2", batch)
        assert set(cache.get_many(batch)) == set(batch)
    cache.close()


def _write_together(path: str, write_behind: bool = False) -> None:
    """`WRITERS` processes writing `PER_WRITER` responses each into the cache at `path`."""
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_write, args=(path, w, write_behind))
               for w in range(WRITERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [w.exitcode for w in workers] == [0] * WRITERS


@pytest.mark.parametrize("write_behind", [False, True])
def test_concurrent_writers_in_several_processes_lose_nothing(tmp_path: Path,
                                                               write_behind: bool) -> None:
    path = str(tmp_path / "shared.sqlite")
    _write_together(path, write_behind)
    cache = RequestCache(path)
    assert len(cache) == WRITERS * PER_WRITER
    found = cache.get_many(f"w{w}-{i}" for w in range(WRITERS) for i in range(PER_WRITER))
    assert len(found) == WRITERS * PER_WRITER
    assert found["w3-77"].text == "text 3 77"
    assert found["w3-77"].usage == Usage(77, 3)


def test_cache_pickles_by_path_and_skips_errors(tmp_path: Path) -> None:
    cache = RequestCache(tmp_path / "c.sqlite")
    failed = output_response("", Usage(), 0.0, None)
    assert not failed.ok
    cache.put_many("smollm2", {"ok": output_response("x", Usage(1, 1), 0.1, None), "bad": failed})
    clone = pickle.loads(pickle.dumps(cache))
    assert clone.path == cache.path
    assert set(clone.get_many(["ok", "bad"])) == {"ok"}


def _answer(text: str) -> ChatResponse:
    return output_response(text, Usage(1, 1), 0.1, None)


def test_written_behind_a_call_never_waits_for_another_process_write(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    other = RequestCache(path)
    other.put_many("smollm2", {"old": _answer("x")})
    cache = RequestCache(path, write_behind=True)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write under way: writers wait
    started = time.monotonic()
    cache.put_many("smollm2", {"new": _answer("y")})  # queued: its writer waits
    found = cache.get_many(["old", "new"])  # the queue, and the file's own reader
    assert time.monotonic() - started < 5
    assert {k: v.text for k, v in found.items()} == {"old": "x", "new": "y"}
    assert "new" not in other.get_many(["new"])  # not written yet
    holder.execute("COMMIT")
    holder.close()
    cache.flush()
    assert other.get_many(["new"])["new"].text == "y"


def test_a_failed_write_behind_is_raised_at_the_next_flush(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = RequestCache(tmp_path / "c.sqlite", write_behind=True)

    def fail(rows: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(cache, "_write", fail)
    cache.put_many("smollm2", {"k": _answer("x")})
    with pytest.raises(RuntimeError, match="disk I/O error"):
        cache.flush()
    monkeypatch.undo()
    cache.put_many("smollm2", {"k": _answer("x")})
    cache.flush()
    assert RequestCache(tmp_path / "c.sqlite").get_many(["k"])["k"].text == "x"


def test_on_a_network_filesystem_reads_wait_while_this_process_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The node's processes take turns at their file, and so do a process's reading and
    writing threads (each holds the node's lock on a descriptor of its own: one descriptor
    shared would turn the writer's exclusive lock into the reader's shared one)."""
    monkeypatch.setenv(NETWORK_ENV, "1")
    cache = RequestCache(tmp_path / "requests.sqlite")
    cache.put_many("smollm2", {"old": _answer("x")})
    read: list[float] = []
    with cache._node_lock(fcntl.LOCK_EX):  # the writer's turn, as `put_many` takes it
        reader = threading.Thread(target=lambda: read.append(
            len(cache.get_many(["old"])) and time.monotonic()))
        reader.start()
        reader.join(timeout=1.0)
        assert not read  # waiting for the writer's turn to end
        released = time.monotonic()
    reader.join(timeout=10)
    assert read and read[0] >= released


MOUNTS = """\
overlay / overlay rw,relatime 0 0
10.0.0.5:/export /mnt/cache nfs4 rw,relatime,vers=4.1 0 0
/dev/nvme0n1 /mnt/cache/local ext4 rw,relatime 0 0
juicefs:vol /mnt/jfs fuse.juicefs rw 0 0
//srv/share /mnt/my\\040share cifs rw 0 0
"""


def test_network_filesystems_are_told_from_the_mount_table(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NETWORK_ENV, raising=False)
    assert on_network_fs(Path("/mnt/cache/tmem-eval/llm"), MOUNTS)
    assert not on_network_fs(Path("/mnt/cache/local/llm"), MOUNTS)  # the longest mount wins
    assert on_network_fs(Path("/mnt/jfs/x"), MOUNTS) and on_network_fs(
        Path("/mnt/my share/x"), MOUNTS)
    assert not on_network_fs(Path("/mnt/cachex"), MOUNTS)  # a sibling, not inside
    assert not on_network_fs(Path("/home/me/.cache"), MOUNTS)
    monkeypatch.setenv(NETWORK_ENV, "1")
    assert on_network_fs(Path("/home/me/.cache"), MOUNTS)


def test_on_a_network_filesystem_each_node_writes_its_own_file_and_reads_all(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NETWORK_ENV, "1")  # inherited by the spawned writers
    path = tmp_path / "requests.sqlite"
    _write_together(str(path))  # this node's processes
    here = RequestCache(path)
    (own,) = tmp_path.glob("requests-*.sqlite")
    assert own == here.own_path and not list(tmp_path.glob("*-wal"))  # no WAL on the share
    with sqlite3.connect(own) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    (tmp_path / "requests-broken.sqlite").write_bytes(b"half a copy" * 100)
    monkeypatch.setattr(request_cache_module, "node_name", lambda: "other-node")
    there = RequestCache(path)
    assert there.own_path.name == "requests-other-node.sqlite"
    keys = [f"w{w}-{i}" for w in range(WRITERS) for i in range(PER_WRITER)]
    assert len(there.get_many(keys)) == WRITERS * PER_WRITER  # read from this node's file
    there.put_many("smollm2", {"mine": output_response("y", Usage(2, 2), 0.1, None)})
    assert "mine" in there.get_many(["mine"]) and "mine" in here.get_many(["mine"])
    with sqlite3.connect(own) as conn:  # each node wrote only its own file
        assert conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == len(keys)
