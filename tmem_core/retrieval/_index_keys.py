"""Where indexes and embeddings are cached, and the content keys that name them (built once,
safely across processes, with `tmem_core._cache_dir.build_once`)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable
from pathlib import Path

from tmem_core._cache_dir import cache_root

# numpy parses every .npy/.npz header with `ast.literal_eval`; CPython 3.11.7 (this project's
# interpreter) raises "SystemError: AST constructor recursion depth mismatch" when two threads
# do that at once (a stage actor's question threads opening indexes). Every load holds this.
NUMPY_LOADS = threading.Lock()


def default_index_dir() -> Path:
    return cache_root() / "index"


def content_key(parts: Iterable[str]) -> str:
    """A stable hex digest of a sequence of strings (length-prefixed, so unambiguous)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode()
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()[:32]
