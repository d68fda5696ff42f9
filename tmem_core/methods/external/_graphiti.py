"""Graphiti (graphiti-core): a temporal knowledge graph of the conversation, on embedded Kuzu.

Each episode is up to `episode_messages` consecutive messages of one session, added at its
first message's time (`reference_time`), so Graphiti dates its facts by the conversation's
clock. Search is Graphiti's hybrid (BM25 + cosine, reciprocal rank fusion) over facts, then
over episodes; it makes no LLM call. A fact Graphiti invalidated keeps its place in the
results, marked: `invalid_at` (the conversation time from which it no longer holds) as its
`valid_until`, `expired_at` (the wall-clock time Graphiti learnt it, never shown) as
`superseded`. Telemetry is off and every call goes to the endpoint.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tmem_core import EngineError, check_range
from tmem_core.llm._accounting_server import AccountingEndpoint
from tmem_core.methods._context import render_message
from tmem_core.methods.external._registry import memory_system
from tmem_core.methods.external._system import Recalled
from tmem_core.schema import Message

if TYPE_CHECKING:
    from graphiti_core import Graphiti
    from graphiti_core.edges import EntityEdge

T = TypeVar("T")
_EPISODES = "episodes.json"  # episode uuid -> its messages' ids and time


@dataclass(frozen=True)
class GraphitiParams:
    """`episode_messages`: consecutive messages of one session per episode; `max_tokens`:
    output tokens of each of Graphiti's LLM calls."""

    episode_messages: int = 8
    max_tokens: int = 1024

    def __post_init__(self) -> None:
        for name in ("episode_messages", "max_tokens"):
            check_range(name, getattr(self, name))


@dataclass(frozen=True)
class _Episode:
    msg_ids: tuple[str, ...]
    timestamp: datetime


class GraphitiMemory:
    """One conversation's graph in `directory` (a Kuzu database and the episode index)."""

    def __init__(self, graphiti: Graphiti, directory: Path, params: GraphitiParams) -> None:
        self.graphiti = graphiti
        self.params = params
        self._index = directory / _EPISODES
        self._episodes = {uuid: _Episode(tuple(e["msg_ids"]), datetime.fromisoformat(e["at"]))
                          for uuid, e in (json.loads(self._index.read_text()).items()
                                          if self._index.is_file() else ())}
        self._loop = asyncio.new_event_loop()
        self._lock = threading.Lock()  # one loop: one caller at a time

    def add(self, messages: Sequence[Message]) -> None:
        """Add the messages episode by episode; raise at the end if any episode failed."""
        errors = []
        chunks = episodes(messages, self.params.episode_messages)
        for chunk in chunks:
            try:
                self._add(chunk)
            except Exception as exc:  # an episode's invalid LLM output: the rest go on
                errors.append(f"{chunk[0].msg_id}: {type(exc).__name__}: {exc}")
        self._index.write_text(json.dumps({u: {"msg_ids": list(e.msg_ids),
                                               "at": e.timestamp.isoformat()}
                                           for u, e in self._episodes.items()}))
        if errors:
            raise EngineError(f"{len(errors)} of {len(chunks)} episodes failed; first: "
                                 f"{errors[0]}")

    def search(self, query: str, k: int) -> list[Recalled]:
        """The best facts (dated by the episodes they came from), then the best episodes."""
        from graphiti_core.search.search_config import SearchConfig
        from graphiti_core.search.search_config_recipes import (
            COMBINED_HYBRID_SEARCH_RRF,
            EDGE_HYBRID_SEARCH_RRF,
        )

        config = SearchConfig(edge_config=EDGE_HYBRID_SEARCH_RRF.edge_config,
                              episode_config=COMBINED_HYBRID_SEARCH_RRF.episode_config, limit=k)
        found = self._run(self.graphiti.search_(query, config=config))
        facts = [self._fact(e, s)
                 for e, s in zip(found.edges, found.edge_reranker_scores, strict=False)]
        raw = [self._episode(n.uuid, n.content, s)
               for n, s in zip(found.episodes, found.episode_reranker_scores, strict=False)]
        return [*facts, *raw][:k]

    def create_indexes(self) -> None:
        """The full-text indexes search needs (Kuzu's driver creates only the tables)."""
        from graphiti_core.driver.driver import GraphProvider
        from graphiti_core.graph_queries import get_fulltext_indices

        for query in get_fulltext_indices(GraphProvider.KUZU):
            self._run(self.graphiti.driver.execute_query(query))

    def _add(self, chunk: Sequence[Message]) -> None:
        from graphiti_core.nodes import EpisodeType

        at = _aware(chunk[0].timestamp)
        result = self._run(self.graphiti.add_episode(
            name=chunk[0].msg_id, episode_body="\n".join(render_message(m) for m in chunk),
            source_description=f"chat session {chunk[0].session_id or '-'}",
            reference_time=at, source=EpisodeType.message))
        self._episodes[result.episode.uuid] = _Episode(tuple(m.msg_id for m in chunk), at)

    def _fact(self, edge: EntityEdge, score: float) -> Recalled:
        """A fact dated by its episodes (else its `valid_at`), with its validity."""
        sources = [self._episodes[u] for u in edge.episodes if u in self._episodes]
        when = min((e.timestamp for e in sources), default=edge.valid_at)
        ids = tuple(dict.fromkeys(i for e in sources for i in e.msg_ids))
        until = _aware(edge.invalid_at) if edge.invalid_at else None
        return Recalled(edge.fact, when, ids, score, valid_until=until,
                        superseded=edge.expired_at is not None)

    def _episode(self, uuid: str, content: str, score: float) -> Recalled:
        known = self._episodes.get(uuid)
        ids = known.msg_ids if known else ()
        return Recalled(content, known.timestamp if known else None, ids, score)

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        with self._lock:
            return self._loop.run_until_complete(work)


def episodes(messages: Sequence[Message], size: int) -> list[list[Message]]:
    """Runs of at most `size` consecutive messages of the same session, in order."""
    chunks: list[list[Message]] = []
    for _, run in groupby(messages, key=lambda m: m.session_id):
        block = list(run)
        chunks.extend(block[i:i + size] for i in range(0, len(block), size))
    return chunks


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo else at.replace(tzinfo=UTC)


@memory_system("graphiti", config=GraphitiParams, extra="graphiti",
               imports=("graphiti_core", "kuzu"),
               description="Graphiti: a temporal knowledge graph (embedded Kuzu), hybrid search")
def open_graphiti(endpoint: AccountingEndpoint, directory: Path, params: GraphitiParams
                  ) -> GraphitiMemory:
    """Graphiti on a Kuzu database in `directory`, its LLM and embedder on `endpoint`."""
    os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"  # read when Graphiti is constructed
    from graphiti_core import Graphiti
    from graphiti_core.cross_encoder.openai_reranker_client import OpenAIRerankerClient
    from graphiti_core.driver.kuzu_driver import KuzuDriver
    from graphiti_core.embedder.openai import OpenAIEmbedder, OpenAIEmbedderConfig
    from graphiti_core.llm_client.config import LLMConfig
    from graphiti_core.llm_client.openai_generic_client import OpenAIGenericClient

    directory.mkdir(parents=True, exist_ok=True)
    database = directory / "graph.kuzu"
    new = not database.exists()
    # one database per conversation, so no group ids (Graphiti 0.31.2 with a group id on
    # Kuzu reads the driver's `_database`, which KuzuDriver never sets)
    driver = KuzuDriver(db=str(database))
    llm = LLMConfig(api_key=endpoint.api_key, base_url=endpoint.base_url, model="backbone",
                    small_model="backbone")
    embedder = OpenAIEmbedder(OpenAIEmbedderConfig(
        api_key=endpoint.api_key, base_url=endpoint.base_url,
        embedding_model=endpoint.embedder_id, embedding_dim=endpoint.dims))
    graphiti = Graphiti(graph_driver=driver, embedder=embedder,
                        llm_client=OpenAIGenericClient(llm, max_tokens=params.max_tokens),
                        cross_encoder=OpenAIRerankerClient(llm))  # unused: search is RRF
    memory = GraphitiMemory(graphiti, directory, params)
    if new:
        memory.create_indexes()
    return memory
