"""A conversation's T2Mem memory: episodes, their entries, and a faiss index over the entries."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tmem_core.methods.t2mem._episodes import Episode
from tmem_core.methods.t2mem._extract import Entry
from tmem_core.retrieval import DenseIndex, EmbeddingStore, content_key

_NUMBER = re.compile(r"\d+")


@dataclass
class MemoryIndex:
    """Entries searchable by meaning (MiniLM or the store's embedder), each linked to an episode.

    The faiss index is cached on disk under `root`, keyed by the embedder and entry texts.
    """

    episodes: tuple[Episode, ...]
    entries: tuple[Entry, ...]
    store: EmbeddingStore
    root: Path
    by_episode: dict[str, Episode] = field(init=False, repr=False)
    by_entry: dict[str, Entry] = field(init=False, repr=False)
    dense: DenseIndex | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.by_episode = {e.episode_id: e for e in self.episodes}
        self.by_entry = {e.entry_id: e for e in self.entries}
        texts = [e.search_text for e in self.entries]
        self.dense = None
        if texts:
            key = content_key(["t2mem-entries-v1", self.store.embedder.model_id, *texts])
            self.dense, _ = DenseIndex.cached(key, lambda: self.store.embed(texts), self.root)

    def search(self, query: str, k: int, seen: Collection[str] = ()) -> list[Entry]:
        """The `k` entries nearest to `query` that are not in `seen`, best first."""
        if self.dense is None or not query.strip():
            return []
        vector = np.asarray(self.store.embed([query], persist=False)[0], dtype=np.float32)
        ranked = self.dense.search(vector, k + len(seen))
        return [e for e in (self.entries[p] for p in ranked) if e.entry_id not in seen][:k]

    def find_episode(self, name: str) -> Episode | None:
        """The episode `name` refers to: its id in any case (`e3`, `[E3]`, `3`) or its source."""
        cleaned = name.strip().strip("[]()").strip()
        for episode in self.episodes:
            if cleaned.upper() == episode.episode_id or cleaned == episode.source:
                return episode
        number = _NUMBER.fullmatch(cleaned.upper().removeprefix("E").strip())
        return self.by_episode.get(f"E{number.group()}") if number else None

    def linked_ids(self, episode_ids: Sequence[str]) -> tuple[str, ...]:
        """Message ids of these episodes, episode by episode, without repeats."""
        ids = (i for eid in dict.fromkeys(episode_ids) for i in self.by_episode[eid].ids)
        return tuple(dict.fromkeys(ids))
