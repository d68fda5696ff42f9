"""A-Mem (`agentic_memory` from the `a-mem` release) as an isolated memory system's worker.

Each message is one memory note (`add_note`, id = the message's id, time = its timestamp as
A-Mem's YYYYMMDDHHMM): A-Mem's LLM analysis (keywords, context, tags) and its memory evolution
(links and neighbour updates) run per note, through its OpenAI controller pointed at the
accounting endpoint. Its ChromaDB retriever embeds in-process with sentence-transformers, on
the model folder the parent names (the sweep's all-MiniLM-L6-v2 weights). `search` is A-Mem's
`search`; each note comes back with its context, keywords and tags.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # comparators/_worker.py
from _worker import serve

PACKAGES = ("a-mem", "chromadb", "sentence-transformers", "openai", "litellm", "torch")


class AMem:
    def __init__(self, config: dict[str, Any]) -> None:
        from agentic_memory.memory_system import AgenticMemorySystem

        directory = Path(config["directory"])
        directory.mkdir(parents=True, exist_ok=True)
        self.memory = AgenticMemorySystem(
            model_name=config["embedder_path"], llm_backend="openai", llm_model="backbone",
            evo_threshold=config["params"]["evo_threshold"], api_key=config["api_key"],
            storage_path=str(directory / "chroma"))

    def add(self, messages: list[dict[str, Any]]) -> None:
        for m in messages:
            at = datetime.fromisoformat(m["timestamp"])
            self.memory.add_note(m["rendered"], time=f"{at:%Y%m%d%H%M}", id=m["msg_id"])

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        found = []
        for hit in self.memory.search(query, k):
            note = self.memory.read(hit["id"])
            if note is None:
                continue
            at = datetime.strptime(str(note.timestamp), "%Y%m%d%H%M")
            text = (f"{note.content} (context: {note.context}; keywords: "
                    f"{', '.join(note.keywords)}; tags: {', '.join(note.tags)})")
            found.append({"text": text, "timestamp": at.isoformat(), "source_ids": [note.id],
                          "score": 1.0 - float(hit["score"]), "raw": False})
        return found


if __name__ == "__main__":
    serve(AMem, PACKAGES)
