"""The project's BM25 baseline as a memory service of its own, for the systems configured by
endpoint (`mcp`, `http`): `ingest` keeps the messages in the memory's directory (so a later
process finds them) and, when given an LLM endpoint, asks it for one note per batch (a real
build cost, as a memory system's); `query` ranks the messages with the same BM25 index and
rule as the `bm25` method and returns them as raw items with their message ids.

Run as a module, it is an MCP server over stdio (`python -m tests.methods.external.bm25_service`,
memory directory and endpoint from `TMEM_MEMORY_DIR`, `OPENAI_BASE_URL`, `OPENAI_API_KEY`);
`http_service` serves the same over HTTP, one memory per `memory_id`, for the HTTP system.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import openai

from tmem_core.retrieval import Bm25Index

NOTE_PROMPT = "Write one sentence that records the facts of these messages."


@dataclass
class Bm25Memory:
    """One conversation's messages and their BM25 index, kept in `directory`."""

    directory: Path
    messages: list[dict[str, Any]] = field(default_factory=list)
    notes: int = 0

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / "messages.json"
        self.messages = json.loads(path.read_text()) if path.is_file() else []

    def ingest(self, messages: list[dict[str, Any]], llm: tuple[str, str] | None) -> int:
        self.messages += messages
        (self.directory / "messages.json").write_text(json.dumps(self.messages))
        if llm is not None:
            client = openai.OpenAI(base_url=llm[0], api_key=llm[1], max_retries=0)
            lines = "\n".join(f"{m['timestamp']} {m['author']}: {m['text']}" for m in messages)
            client.chat.completions.create(
                model="any", max_tokens=64, messages=[
                    {"role": "system", "content": NOTE_PROMPT},
                    {"role": "user", "content": lines}])
            self.notes += 1
        return len(self.messages)

    def query(self, query: str, k: int) -> dict[str, Any]:
        index, _ = Bm25Index.cached([m["text"] for m in self.messages],
                                    self.directory / "index")
        scores = index.scores(query)
        top = [int(p) for p in np.argsort(-scores, kind="stable")[:k] if scores[p] > 0]
        return {"results": [{"text": self.messages[p]["text"], "raw": True,
                             "source_ids": [self.messages[p]["id"]],
                             "timestamp": self.messages[p]["timestamp"],
                             "score": float(scores[p])} for p in top]}


def _endpoint() -> tuple[str, str] | None:
    base = os.environ.get("OPENAI_BASE_URL")
    return (base, os.environ["OPENAI_API_KEY"]) if base else None


def mcp_main() -> None:
    from mcp.server.mcpserver import MCPServer

    memory = Bm25Memory(Path(os.environ["TMEM_MEMORY_DIR"]))
    server = MCPServer("bm25-memory")

    @server.tool()
    def ingest(messages: list[dict[str, Any]]) -> dict[str, int]:
        """Memorise messages."""
        return {"messages": memory.ingest(messages, _endpoint())}

    @server.tool()
    def query(query: str, k: int) -> dict[str, Any]:
        """The k best messages for the query."""
        return memory.query(query, k)

    server.run("stdio")


class HttpService:
    """The BM25 memory over HTTP on 127.0.0.1: POST /ingest {memory_id, messages, llm_base_url,
    llm_api_key}, POST /query {memory_id, query, k}; memories under `root`."""

    def __init__(self, root: Path) -> None:
        self.root, self.memories, self.requests = root, {}, []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                service.requests.append((self.path, body))
                status, reply = service.handle(self.path, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        memory = self.memories.setdefault(body["memory_id"],
                                          Bm25Memory(self.root / body["memory_id"]))
        if path == "/ingest":
            llm = (body["llm_base_url"], body["llm_api_key"]) if "llm_base_url" in body else None
            return 200, {"messages": memory.ingest(body["messages"], llm)}
        if path == "/query":
            return 200, {"data": memory.query(body["query"], body["k"])}
        return 404, {"error": f"no route {path}"}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":
    mcp_main()
