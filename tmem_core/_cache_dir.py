"""The on-disk cache shared by every layer: its root, and artifacts built once across processes.

Indexes and embeddings (retrieval), request cache and model conversions (llm) all live under
`cache_root()`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

CACHE_ENV = "TMEM_CACHE_DIR"


def cache_root() -> Path:
    """`$TMEM_CACHE_DIR`, else `~/.cache/tmem-eval`."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "tmem-eval"


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
