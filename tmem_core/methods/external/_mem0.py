"""Mem0 (`mem0ai`, optional extra `mem0`) as an external memory system, fully local.

Mem0's LLM and embedder are its OpenAI providers pointed at the accounting endpoint (MiniLM,
384 dimensions); its vector store is FAISS and its history SQLite, both in the memory's
directory; telemetry is off before mem0 is imported. `add` gives Mem0 the messages in
batches within a session, each message as `[time] author: text`, the batch's date as custom
instructions, and `created_at` (the batch's last time) and the source msg ids as metadata, so
memories carry the conversation's time and their sources. Mem0 logs some failures (an
extraction it cannot parse) and goes on; `add` collects those and raises once every batch
has been tried, so a build with any failed batch is on record as failed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from pathlib import Path
from typing import Any

from tmem_core import EngineError
from tmem_core.llm._accounting_server import AccountingEndpoint
from tmem_core.methods.external._registry import memory_system
from tmem_core.methods.external._system import MemorySystem, Recalled
from tmem_core.prompts import load_prompt
from tmem_core.retrieval import cache_root
from tmem_core.schema import Message

SCOPE = "conversation"  # Mem0 scopes memories by user id: one directory is one conversation


@dataclass(frozen=True)
class Mem0Params:
    batch: int = 8  # messages per Memory.add, within one session
    max_tokens: int = 1024  # completion tokens Mem0 asks for per extraction
    threshold: float = 0.1  # Mem0's search score floor


class Mem0:
    """One conversation's Mem0 memory in `directory`."""

    def __init__(self, endpoint: AccountingEndpoint, directory: Path, params: Mem0Params
                 ) -> None:
        memory_class = _import_memory()
        directory.mkdir(parents=True, exist_ok=True)
        self.params = params
        self.memory = memory_class.from_config(_config(endpoint, directory, params))
        for part in (self.memory.llm, self.memory.embedding_model):  # one call per failure
            part.client = part.client.with_options(max_retries=0)
            if str(part.client.base_url).rstrip("/") != endpoint.base_url:  # e.g. OpenRouter's
                raise RuntimeError(f"Mem0's {type(part).__name__} talks to "
                                   f"{part.client.base_url}, not the accounting endpoint")

    def add(self, messages: Sequence[Message]) -> None:
        failures = []
        batches = _batches(messages, self.params.batch)
        for batch in batches:
            with _logged_errors() as logged:
                try:
                    self._add(batch)
                except Exception as exc:
                    logged.append(f"{type(exc).__name__}: {exc}")
            failures += [f"batch at {batch[0].msg_id}: {e}" for e in logged]
        if failures:
            raise EngineError(f"{len(failures)} Mem0 errors over {len(batches)} batches: "
                             + "; ".join(failures[:5]))

    def search(self, query: str, k: int) -> list[Recalled]:
        found = self.memory.search(query, top_k=k, filters={"user_id": SCOPE},
                                   threshold=self.params.threshold)
        return [_recalled(item) for item in found["results"]]

    def _add(self, batch: Sequence[Message]) -> None:
        [instructions] = load_prompt("mem0/observation").render(
            date=f"{batch[-1].timestamp:%Y-%m-%d}")
        self.memory.add([_message(m) for m in batch], user_id=SCOPE, prompt=instructions["content"],
                        metadata={"created_at": batch[-1].timestamp.isoformat(),
                                  "msg_ids": [m.msg_id for m in batch]})


@memory_system("mem0", config=Mem0Params, extra="mem0", imports=("mem0",),
               prompts=("mem0/observation",),
               description="Mem0: LLM-extracted facts in a local vector store")
def open_mem0(endpoint: AccountingEndpoint, directory: Path, params: Mem0Params
              ) -> MemorySystem:
    return Mem0(endpoint, directory, params)


def _import_memory() -> Any:
    """`mem0.Memory`, imported with telemetry (PostHog, remote notices) off and Mem0's own
    directory under the cache instead of the home directory."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("MEM0_DIR", str(cache_root() / "external" / "mem0-home"))
    from mem0 import Memory
    from mem0.memory import telemetry

    if telemetry.MEM0_TELEMETRY:
        raise RuntimeError("mem0 was imported with telemetry on before this module could "
                           "turn it off; set MEM0_TELEMETRY=False in the environment")
    return Memory


def _config(endpoint: AccountingEndpoint, directory: Path, params: Mem0Params
            ) -> dict[str, Any]:
    served = {"api_key": endpoint.api_key, "openai_base_url": endpoint.base_url}
    return {
        "llm": {"provider": "openai",
                "config": {**served, "model": "bound", "max_tokens": params.max_tokens}},
        "embedder": {"provider": "openai",
                     "config": {**served, "model": endpoint.embedder_id,
                                "embedding_dims": endpoint.dims}},
        "vector_store": {"provider": "faiss",
                         "config": {"path": str(directory / "faiss"), "collection_name": "mem0",
                                    "embedding_model_dims": endpoint.dims,
                                    "distance_strategy": "cosine"}},
        "history_db_path": str(directory / "history.db"),
    }


def _batches(messages: Sequence[Message], size: int) -> list[list[Message]]:
    """Consecutive messages of one session, at most `size` at a time."""
    out = []
    for _, session in groupby(messages, key=lambda m: m.session_id):
        run = list(session)
        out += [run[i:i + size] for i in range(0, len(run), size)]
    return out


def _message(message: Message) -> dict[str, str]:
    author = message.author or message.role or "someone"
    return {"role": "user", "name": author,
            "content": f"[{message.timestamp:%Y-%m-%d %H:%M}] {author}: {message.text}"}


def _recalled(item: dict[str, Any]) -> Recalled:
    created = item.get("created_at")
    ids = (item.get("metadata") or {}).get("msg_ids") or ()
    return Recalled(str(item["memory"]), datetime.fromisoformat(created) if created else None,
                    tuple(str(i) for i in ids), float(item.get("score") or 0.0))


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.ERROR)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


@contextmanager
def _logged_errors() -> Iterator[list[str]]:
    """The errors Mem0 logs inside the block."""
    errors: list[str] = []
    handler, logger = _Collect(errors), logging.getLogger("mem0")
    logger.addHandler(handler)
    try:
        yield errors
    finally:
        logger.removeHandler(handler)
