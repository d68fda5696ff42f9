"""Dense vectors in a faiss inner-product index (cosine on normalised vectors), cached on disk."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import faiss
import numpy as np

from tmem_core._cache_dir import build_once

_FILE = "index.faiss"


class DenseIndex:
    """Exact inner-product search over L2-normalised vectors."""

    def __init__(self, index: faiss.Index) -> None:
        self._index = index
        self.vectors = index.reconstruct_n(0, index.ntotal) if index.ntotal else np.zeros((0, 0))

    @classmethod
    def cached(cls, key: str, vectors: Callable[[], np.ndarray],
               root: Path) -> tuple[DenseIndex, bool]:
        """Load the index stored under `key`; if absent, build it from `vectors()`."""
        target = root / "faiss" / key

        def build(tmp: Path) -> None:
            data = vectors()
            index = faiss.IndexFlatIP(data.shape[1])
            index.add(np.ascontiguousarray(data, dtype=np.float32))
            faiss.write_index(index, str(tmp / _FILE))

        built = build_once(target, build)
        return cls(faiss.read_index(str(target / _FILE))), built

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def search(self, query: np.ndarray, k: int) -> list[int]:
        """Positions of the `k` nearest vectors, best first."""
        if k <= 0 or len(self) == 0:
            return []
        _, found = self._index.search(query.reshape(1, -1).astype(np.float32), min(k, len(self)))
        return [int(p) for p in found[0] if p >= 0]

    def scores(self, query: np.ndarray) -> np.ndarray:
        """Cosine similarity of the query to every vector."""
        return np.asarray(self.vectors @ query.astype(np.float32), dtype=np.float32)
