"""A small external memory system (a sweep's `plugins`): it brings its own OpenAI client,
as an external system does, and talks to the accounting endpoint over HTTP only.

`add` asks the LLM for one JSON note per batch of messages (dated at the batch's last
message), embeds the notes and the raw messages through `/v1/embeddings` and keeps them in
`directory/notes.json`; `search` embeds the query and returns the nearest items. Every `add`
is counted in `ADDS` (by directory) so tests can see whether a memory was rebuilt.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import openai

from tmem_core.llm._accounting_server import AccountingEndpoint
from tmem_core.methods.external import memory_system
from tmem_core.methods.external._system import MemorySystem, Recalled
from tmem_core.schema import Message

ADDS: Counter[str] = Counter()
NOTE_PROMPT = "Write one JSON object {\"note\": \"...\"} that records the facts of these messages."


@dataclass(frozen=True)
class NotesParams:
    batch: int = 8  # messages per note


class Notes:
    def __init__(self, endpoint: AccountingEndpoint, directory: Path,
                 params: NotesParams) -> None:
        self.client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key,
                                    max_retries=0)
        self.path, self.params = directory / "notes.json", params
        self.items: list[dict[str, Any]] = (json.loads(self.path.read_text())
                                            if self.path.is_file() else [])

    def add(self, messages: Sequence[Message]) -> None:
        ADDS[str(self.path.parent)] += 1
        items = [{"text": m.text, "timestamp": m.timestamp.isoformat(), "ids": [m.msg_id],
                  "raw": True} for m in messages]
        for start in range(0, len(messages), self.params.batch):
            batch = messages[start:start + self.params.batch]
            lines = "\n".join(f"{m.timestamp:%Y-%m-%d} {m.author}: {m.text}" for m in batch)
            reply = self.client.chat.completions.create(
                model="any", messages=[{"role": "system", "content": NOTE_PROMPT},
                                       {"role": "user", "content": lines}],
                response_format={"type": "json_object"}, max_tokens=128)
            note = json.loads(reply.choices[0].message.content or "{}").get("note", "")
            items.append({"text": str(note), "timestamp": batch[-1].timestamp.isoformat(),
                          "ids": [m.msg_id for m in batch], "raw": False})
        vectors = self._embed([i["text"] for i in items])
        self.items = [{**i, "vector": v.tolist()} for i, v in zip(items, vectors, strict=True)]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.items))

    def search(self, query: str, k: int) -> list[Recalled]:
        if not self.items:
            return []
        scores = np.array([i["vector"] for i in self.items]) @ self._embed([query])[0]
        best = np.argsort(-scores)[:k]
        return [Recalled(self.items[b]["text"], datetime.fromisoformat(self.items[b]["timestamp"]),
                         tuple(self.items[b]["ids"]), float(scores[b]), self.items[b]["raw"])
                for b in best]

    def _embed(self, texts: list[str]) -> np.ndarray:
        data = self.client.embeddings.create(model="any", input=texts).data
        return np.array([d.embedding for d in data])


@memory_system("notes", config=NotesParams, description="Test system: LLM notes per batch")
def open_notes(endpoint: AccountingEndpoint, directory: Path, params: NotesParams
               ) -> MemorySystem:
    return Notes(endpoint, directory, params)
