"""On-disk cache of indexes and embeddings: content-keyed, built once, safe across processes."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from filelock import FileLock

CACHE_ENV = "TMEM_CACHE_DIR"


def cache_root() -> Path:
    """`$TMEM_CACHE_DIR`, else `~/.cache/tmem-eval`."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "tmem-eval"


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


def build_once(target: Path, build: Callable[[Path], None]) -> bool:
    """Make the directory `target` exist, calling `build(tmp_dir)` at most once across processes.

    The builder writes into a private temporary sibling that is renamed into place, so a
    reader never sees a half-written artifact. Returns True when this call built it.
    """
    if target.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if target.exists():
            return False
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            build(tmp)
            os.rename(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return True
