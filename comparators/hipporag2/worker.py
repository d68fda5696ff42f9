"""HippoRAG 2 (the `hipporag` release) as an isolated memory system's worker.

Each message is one passage (its rendered line, as the parent sends it); `add` indexes them
all (OpenIE per passage, the knowledge graph, passage/entity/fact embeddings), `search` is
HippoRAG 2's `retrieve` (fact scoring, recognition-memory filter, dense passage scores and
Personalized PageRank) and returns the passages with their message ids. The LLM and the
embedder are HippoRAG's OpenAI clients pointed at the accounting endpoint.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # comparators/_worker.py
from _worker import serve

PACKAGES = ("hipporag", "openai", "transformers", "torch", "python-igraph", "litellm")
_PASSAGES = "passages.json"  # passage text -> its messages' ids and time


class HippoRAG2:
    def __init__(self, config: dict[str, Any]) -> None:
        os.environ["OPENAI_API_KEY"] = config["api_key"]
        from hipporag import HippoRAG
        from hipporag.utils.config_utils import BaseConfig

        self.directory = Path(config["directory"])
        self.directory.mkdir(parents=True, exist_ok=True)
        params = config["params"]
        # the embedding model's name only picks HippoRAG's OpenAI embedding client
        # ("text-embedding" in it); the endpoint serves the sweep's embedder whatever it is
        settings = BaseConfig(
            save_dir=str(self.directory), llm_name="backbone",
            llm_base_url=config["base_url"], embedding_base_url=config["base_url"],
            embedding_model_name=f"text-embedding-{config['embedder_id']}".replace("/", "_"),
            openie_mode="online", max_retry_attempts=0,
            max_new_tokens=params["max_new_tokens"], linking_top_k=params["linking_top_k"],
            damping=params["damping"], passage_node_weight=params["passage_node_weight"])
        self.rag = HippoRAG(global_config=settings)
        self._path = self.directory / _PASSAGES
        self.passages: dict[str, dict[str, Any]] = (
            json.loads(self._path.read_text()) if self._path.is_file() else {})

    def add(self, messages: list[dict[str, Any]]) -> None:
        for m in messages:
            entry = self.passages.setdefault(m["rendered"], {"ids": [], "at": m["timestamp"]})
            entry["ids"].append(m["msg_id"])
        self._path.write_text(json.dumps(self.passages))
        self.rag.index(list(self.passages))

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        if not self.passages:
            return []
        [solution] = self.rag.retrieve([query], num_to_retrieve=k)
        scores = [float(s) for s in solution.doc_scores]
        return [{"text": doc, "timestamp": self.passages[doc]["at"],
                 "source_ids": self.passages[doc]["ids"], "score": score, "raw": True}
                for doc, score in zip(solution.docs, scores, strict=True)
                if doc in self.passages]


if __name__ == "__main__":
    serve(HippoRAG2, PACKAGES)
