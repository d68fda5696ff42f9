"""Persistent request cache: SQLite shared safely by many worker processes, in WAL mode on a
local disk and as one file per node on a network filesystem."""

from __future__ import annotations

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
    """sha256 of (backbone name, model and served weights, messages, sampling, schema, and the
    backbone's chat-template arguments if it has any); stage and qid excluded.

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


class RequestCache:
    """Successful responses by request hash. Picklable; each process opens its own connection.

    On a local disk: one SQLite file in WAL mode, shared by the machine's processes. On a
    network filesystem, where SQLite's WAL cannot work (its index lives in shared memory of
    one host) and byte-range locks may not hold across hosts: one file per node
    (`requests-<host>.sqlite`) in rollback-journal mode, written only by that node's
    processes (which also serialise on a lock file of the node's own /tmp), and read by the
    others read-only, a file that cannot be read counting as a miss."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else cache_root() / "llm" / "requests.sqlite"
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._network = False
        self._node_lock_file: Any = None
        self._others: dict[Path, sqlite3.Connection] = {}
        self._listed_at = 0.0

    @property
    def own_path(self) -> Path:
        """The file this process writes (its node's own on a network filesystem)."""
        if not on_network_fs(self.path.parent):
            return self.path
        return self.path.with_name(f"{self.path.stem}-{node_name()}{self.path.suffix}")

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedCall]:
        wanted = list(dict.fromkeys(keys))
        with self._lock:
            conn = self._connection()
            with self._node_lock(fcntl.LOCK_SH):
                found = _lookup(conn, wanted)
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
        with self._lock:
            conns = [self._connection(), *self._other_files().values()]
            return sum(int(c.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
                       for c in conns)

    def close(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                for conn in [self._conn, *self._others.values()]:
                    if conn is not None:
                        conn.close()
                if self._node_lock_file is not None:
                    self._node_lock_file.close()
            self._conn, self._others, self._node_lock_file = None, {}, None

    def __reduce__(self) -> tuple[type[RequestCache], tuple[Path]]:
        return (RequestCache, (self.path,))

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():  # new, or inherited through fork
            self._conn, self._others, self._node_lock_file = None, {}, None
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
        if self._node_lock_file is None:
            digest = hashlib.sha256(str(self.own_path.resolve()).encode()).hexdigest()[:16]
            lock_path = Path(tempfile.gettempdir()) / f"tmem-request-cache-{digest}.lock"
            self._node_lock_file = lock_path.open("a")
        fcntl.flock(self._node_lock_file, mode)
        try:
            yield
        finally:
            fcntl.flock(self._node_lock_file, fcntl.LOCK_UN)

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
