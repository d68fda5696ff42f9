"""BM25 over a list of texts (`bm25s`), cached on disk by content."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tmem_core._cache_dir import build_once
from tmem_core.retrieval._index_keys import NUMPY_LOADS, content_key
from tmem_core.retrieval._text import lexical_tokens

if TYPE_CHECKING:  # imported where used: only retrieval processes need it
    import bm25s


@dataclass(frozen=True)
class Bm25Params:
    k1: float = 1.5
    b: float = 0.75


class Bm25Index:
    """Lexical scores of every document for a query."""

    def __init__(self, retriever: bm25s.BM25, size: int) -> None:
        self._retriever, self.size = retriever, size

    @classmethod
    def cached(cls, texts: Sequence[str], root: Path,
               params: Bm25Params = Bm25Params()) -> tuple[Bm25Index, bool]:
        """Load the index of `texts` from `root`, building it first if absent; (index, built)."""
        import bm25s

        key = content_key(["bm25-v1", str(params.k1), str(params.b), *texts])
        target = root / "bm25" / key

        def build(tmp: Path) -> None:
            retriever = bm25s.BM25(k1=params.k1, b=params.b)
            retriever.index([lexical_tokens(t) for t in texts], show_progress=False)
            retriever.save(str(tmp), show_progress=False)

        built = build_once(target, build)
        with NUMPY_LOADS:
            retriever = bm25s.BM25.load(str(target), show_progress=False)
        return cls(retriever, len(texts)), built

    def scores(self, query: str) -> np.ndarray:
        tokens = [t for t in lexical_tokens(query) if t in self._retriever.vocab_dict]
        if not tokens or self.size == 0:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._retriever.get_scores(tokens), dtype=np.float32)
