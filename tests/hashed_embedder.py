"""A model-free embedder for tests: the `Embedder` interface of `tmem_core.retrieval`."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from tmem_core.retrieval import lexical_tokens


class HashEmbedder:
    """A deterministic bag-of-words embedder (signed feature hashing): no model, for tests."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.calls = 0  # texts encoded, to observe caching

    @property
    def model_id(self) -> str:
        return f"hash-{self.dim}"

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        self.calls += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in lexical_tokens(text):
                digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self.dim] += 1.0 if value >> 63 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.asarray(out / np.where(norms == 0, 1.0, norms), dtype=np.float32)
