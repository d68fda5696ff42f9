"""Persistent request cache: SQLite shared safely by many worker processes, in WAL mode on a
local disk and as one file per node on a network filesystem."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import socket
import sqlite3
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tmem_core._cache_dir import cache_root
from tmem_core.llm._config import BackboneConfig
from tmem_core.llm._types import ChatRequest, ChatResponse, Sampling, Usage

_KEY_VERSION = 1
_BUSY_TIMEOUT_MS = 60_000
_DDL = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    backbone TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    latency_s REAL NOT NULL,
    created REAL NOT NULL
)
"""


_HASHED_WHEN_SET = ("top_k",)
"""Sampling fields added after the key's version: hashed only when they differ from their
defaults, so the keys of requests that do not use them stay as they were."""
_SAMPLING_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Sampling)}


def request_hash(backbone: BackboneConfig, request: ChatRequest) -> str:
    """sha256 of (backbone name, model and served weights, messages, sampling, schema, the
    stop strings if any, and the backbone's chat-template arguments if it has any); stage and
    qid excluded.

    A request without sampling is hashed with the backbone's default sampling."""
    payload = {
        "v": _KEY_VERSION,
        "backbone": backbone.name,
        "model": backbone.model,
        "weights": backbone.engine.weights_identity(),
        "messages": [m.to_dict() for m in request.messages],
        "sampling": _sampling_key(request.sampling or backbone.sampling),
        "schema": request.schema,
    }
    if request.stop:  # hashed only when set: the keys of requests without one stay as they were
        payload["stop"] = list(request.stop)
    if backbone.chat_template_kwargs:  # they change the prompt the engine sees
        payload["chat_template"] = backbone.chat_template_kwargs
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _sampling_key(sampling: Sampling) -> dict[str, object]:
    fields = dataclasses.asdict(sampling)
    for name in _HASHED_WHEN_SET:
        if fields[name] == _SAMPLING_DEFAULTS[name]:
            del fields[name]
    return fields


@dataclass(frozen=True)
class CachedCall:
    text: str
    usage: Usage
    latency_s: float


NETWORK_ENV = "TMEM_REQUEST_CACHE_NETWORK"
"""`1`: the cache folder is on a network filesystem (per-node files); `0`: it is not; unset:
read from the mount table."""
NETWORK_FILESYSTEMS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs",
                                 "lustre", "gpfs", "beegfs", "9p", "afs", "virtiofs"})
_RELIST_S = 30.0  # how often the other nodes' files are listed again


def on_network_fs(path: Path, mounts: str | None = None) -> bool:
    """Whether `path` lives on a network filesystem (NFS, SMB, CephFS, a FUSE mount...), from
    the mount table (`mounts`: its text, default /proc/mounts), or as `NETWORK_ENV` says."""
    if os.environ.get(NETWORK_ENV) in ("0", "1"):
        return os.environ[NETWORK_ENV] == "1"
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:
            return False
    target = str(path.resolve())
    best, kind = "", ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        mount = fields[1].replace("\\040", " ")
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best, kind = mount, fields[2]
    return kind in NETWORK_FILESYSTEMS or kind.startswith("fuse.")


def node_name() -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", socket.gethostname()) or "node"


def default_path() -> Path:
    """The request cache's file under the cache root (`$TMEM_CACHE_DIR` as it is now)."""
    return cache_root() / "llm" / "requests.sqlite"


class RequestCache:
    """Successful responses by request hash. Picklable; each process opens its own connection.

    On a local disk: one SQLite file in WAL mode, shared by the machine's processes. On a
    network filesystem, where SQLite's WAL cannot work (its index lives in shared memory of
    one host) and byte-range locks may not hold across hosts: one file per node
    (`requests-<host>.sqlite`) in rollback-journal mode, written only by that node's
    processes (which also serialise on a lock file of the node's own /tmp), and read by the
    others read-only, a file that cannot be read counting as a miss.

    Reads have a connection of their own: on a local disk (WAL), a write waiting for another
    process's transaction never holds them up. With `write_behind`, `put_many` only queues
    its rows: a thread of the process writes what is queued in one transaction at a time,
    while this process's reads find the queued rows at once, and other processes once they
    are written. In a sweep
    on 16 sim replicas, the four stage actors' writes (each call's answer, at once) waited
    on each other for a median of 2.1 s per T2Mem step, and the reads behind them 1.6 s. A
    process killed loses the rows of the write under way (their requests are sent again);
    `flush` waits for the queue, and runs at the interpreter's exit; a failed write is
    raised at the next `put_many` or `flush`."""

    def __init__(self, path: str | Path | None = None, write_behind: bool = False) -> None:
        self.path = Path(path) if path else default_path()
        self.write_behind = write_behind
        self._lock = threading.Lock()  # the writing connection
        self._read_lock = threading.Lock()  # the reading one, and the other nodes' files
        self._conn: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._pid = 0
        self._network = False
        self._node_locks: dict[int, Any] = {}  # lock mode -> its own descriptor
        self._others: dict[Path, sqlite3.Connection] = {}
        self._listed_at = 0.0
        self._queue = threading.Condition()  # rows queued and the writer's state
        self._queued: dict[str, tuple[Any, ...]] = {}  # key -> row, not written yet
        self._puts = self._written = 0  # puts queued, and those written, since the start
        self._writer_pid = 0  # the process whose writer thread runs (none after a fork)
        self._failure: BaseException | None = None
        _LIVE.add(self)

    @property
    def own_path(self) -> Path:
        """The file this process writes (its node's own on a network filesystem)."""
        if not on_network_fs(self.path.parent):
            return self.path
        return self.path.with_name(f"{self.path.stem}-{node_name()}{self.path.suffix}")

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedCall]:
        wanted = list(dict.fromkeys(keys))
        with self._queue:  # rows leave the queue only once written
            found = {k: _cached(row) for k in wanted if (row := self._queued.get(k))}
        wanted = [k for k in wanted if k not in found]
        if not wanted:
            return found
        with self._read_lock:
            conn = self._reading()
            with self._node_lock(fcntl.LOCK_SH):
                found.update(_lookup(conn, wanted))
            for path, other in list(self._other_files().items()):
                missing = [k for k in wanted if k not in found]
                if not missing:
                    break
                try:
                    found.update(_lookup(other, missing))
                except sqlite3.DatabaseError:  # being written, or half-copied: a miss
                    other.close()
                    del self._others[path]
        return found

    def put_many(self, backbone: str, responses: Mapping[str, ChatResponse]) -> None:
        """Store the successful responses (errors are never cached) in one transaction."""
        now = time.time()
        rows: Sequence[tuple[object, ...]] = [
            (
                key,
                backbone,
                r.text,
                r.usage.prompt_tokens,
                r.usage.completion_tokens,
                r.latency_s,
                now,
            )
            for key, r in responses.items()
            if r.ok
        ]
        if not rows:
            return
        if not self.write_behind:
            self._write(rows)
            return
        with self._queue:
            self._raise_failure()
            self._queued.update((str(row[0]), row) for row in rows)
            self._puts += 1
            if self._writer_pid != os.getpid():
                self._writer_pid = os.getpid()
                threading.Thread(target=self._write_queued, name="request-cache-writer",
                                 daemon=True).start()
            self._queue.notify_all()

    def flush(self) -> None:
        """Wait until the rows queued so far are written (`write_behind`; not those queued
        meanwhile, which a busy process never stops adding)."""
        with self._queue:
            puts = self._puts
            self._queue.wait_for(lambda: self._written >= puts
                                 or self._writer_pid != os.getpid())
            self._raise_failure()

    def _write_queued(self) -> None:
        """The writer thread: what is queued, one transaction at a time."""
        while True:
            with self._queue:
                self._queue.wait_for(lambda: bool(self._queued))
                rows, puts = list(self._queued.values()), self._puts
            try:
                self._write(rows)
            except Exception as exc:  # raised to the next put_many or flush
                print(f"[request cache] writing {len(rows)} responses to {self.own_path} "
                      f"failed: {exc!r}", flush=True)
                with self._queue:
                    self._failure = exc
            with self._queue:
                for row in rows:
                    if self._queued.get(row[0]) is row:
                        del self._queued[row[0]]
                self._written = puts
                self._queue.notify_all()

    def _raise_failure(self) -> None:
        failure, self._failure = self._failure, None
        if failure is not None:
            raise RuntimeError(f"request cache {self.own_path}: a queued write failed: "
                               f"{failure!r}") from failure

    def _write(self, rows: Sequence[tuple[object, ...]]) -> None:
        with self._lock:
            conn = self._connection()
            with self._node_lock(fcntl.LOCK_EX):
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany("INSERT OR REPLACE INTO responses VALUES (?,?,?,?,?,?,?)",
                                     rows)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")

    def __len__(self) -> int:
        """Rows of this process's file, and of the other nodes' files (each counted)."""
        self.flush()
        with self._read_lock:
            conns = [self._reading(), *self._other_files().values()]
            return sum(int(c.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
                       for c in conns)

    def close(self) -> None:
        self.flush()
        with self._lock, self._read_lock:
            if self._pid == os.getpid():
                for conn in [self._conn, self._reader, *self._others.values()]:
                    if conn is not None:
                        conn.close()
                for lock_file in self._node_locks.values():
                    lock_file.close()
            self._conn, self._reader, self._others, self._node_locks = None, None, {}, {}

    def __reduce__(self) -> tuple[type[RequestCache], tuple[Path, bool]]:
        return (RequestCache, (self.path, self.write_behind))

    def _reading(self) -> sqlite3.Connection:
        """The reading connection (the file made first by the writing one)."""
        if self._reader is None or self._pid != os.getpid():
            with self._lock:
                self._connection()
            self._reader = sqlite3.connect(self.own_path, timeout=_BUSY_TIMEOUT_MS / 1000,
                                           isolation_level=None, check_same_thread=False)
            self._reader.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        return self._reader

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():  # new, or inherited through fork
            self._conn, self._reader, self._others, self._node_locks = None, None, {}, {}
            self._network = on_network_fs(self.path.parent)
            own = self.own_path
            own.parent.mkdir(parents=True, exist_ok=True)
            self._pid = os.getpid()
            with self._node_lock(fcntl.LOCK_EX):
                conn = sqlite3.connect(own, timeout=_BUSY_TIMEOUT_MS / 1000,
                                       isolation_level=None, check_same_thread=False)
                conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
                conn.execute(f"PRAGMA journal_mode={'DELETE' if self._network else 'WAL'}")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(_DDL)
            self._conn = conn
        return self._conn

    @contextmanager
    def _node_lock(self, mode: int) -> Iterator[None]:
        """On a network filesystem: this node's processes take turns at their file (a lock
        on the node's own disk, which holds where the shared one's may not)."""
        if not self._network:
            yield
            return
        if mode not in self._node_locks:  # shared for reads, exclusive for writes: a
            # descriptor each, so that the process's reader and writer take turns too
            digest = hashlib.sha256(str(self.own_path.resolve()).encode()).hexdigest()[:16]
            lock_path = Path(tempfile.gettempdir()) / f"tmem-request-cache-{digest}.lock"
            self._node_locks[mode] = lock_path.open("a")
        fcntl.flock(self._node_locks[mode], mode)
        try:
            yield
        finally:
            fcntl.flock(self._node_locks[mode], fcntl.LOCK_UN)

    def _other_files(self) -> dict[Path, sqlite3.Connection]:
        """The other nodes' files, open read-only (on a network filesystem only)."""
        if not self._network:
            return {}
        if time.monotonic() - self._listed_at > _RELIST_S:
            self._listed_at = time.monotonic()
            own = self.own_path
            for path in sorted(self.path.parent.glob(f"{self.path.stem}-*{self.path.suffix}")):
                if path != own and path not in self._others:
                    with contextlib.suppress(sqlite3.Error):
                        self._others[path] = sqlite3.connect(
                            f"{path.resolve().as_uri()}?mode=ro", uri=True,
                            timeout=_BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        return self._others


_LIVE: weakref.WeakSet[RequestCache] = weakref.WeakSet()


@atexit.register
def _flush_live() -> None:
    for cache in list(_LIVE):
        with contextlib.suppress(Exception):  # reported by the writer already
            cache.flush()


def _cached(row: tuple[Any, ...]) -> CachedCall:
    """A queued row (`put_many`'s) as a lookup returns it."""
    _, _, text, prompt, completion, latency, _ = row
    return CachedCall(text, Usage(prompt, completion), latency)


def _lookup(conn: sqlite3.Connection, wanted: list[str]) -> dict[str, CachedCall]:
    found: dict[str, CachedCall] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            "SELECT key, text, prompt_tokens, completion_tokens, latency_s"
            f" FROM responses WHERE key IN ({marks})",
            chunk,
        )
        for key, text, prompt, completion, latency in rows:
            found[key] = CachedCall(text, Usage(prompt, completion), latency)
    return found
