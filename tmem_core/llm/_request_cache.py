"""Persistent request cache: SQLite in WAL mode, shared safely by many worker processes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tmem_core._cache_dir import cache_root
from tmem_core.llm._config import BackboneConfig
from tmem_core.llm._types import ChatRequest, ChatResponse, Usage

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


def request_hash(backbone: BackboneConfig, request: ChatRequest) -> str:
    """sha256 of (backbone name, model and served weights, messages, sampling, schema); stage
    and qid excluded.

    A request without sampling is hashed with the backbone's default sampling."""
    payload = {
        "v": _KEY_VERSION,
        "backbone": backbone.name,
        "model": backbone.model,
        "weights": backbone.engine.weights_identity(),
        "messages": [m.to_dict() for m in request.messages],
        "sampling": dataclasses.asdict(request.sampling or backbone.sampling),
        "schema": request.schema,
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class CachedCall:
    text: str
    usage: Usage
    latency_s: float


class RequestCache:
    """Successful responses by request hash. Picklable; each process opens its own connection."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else cache_root() / "llm" / "requests.sqlite"
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedCall]:
        wanted = list(dict.fromkeys(keys))
        found: dict[str, CachedCall] = {}
        with self._lock:
            conn = self._connection()
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
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("INSERT OR REPLACE INTO responses VALUES (?,?,?,?,?,?,?)", rows)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def __len__(self) -> int:
        with self._lock:
            (count,) = self._connection().execute("SELECT COUNT(*) FROM responses").fetchone()
        return int(count)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __reduce__(self) -> tuple[type[RequestCache], tuple[Path]]:
        return (RequestCache, (self.path,))

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():  # new, or inherited through fork
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path,
                timeout=_BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(_DDL)
            self._conn, self._pid = conn, os.getpid()
        return self._conn
