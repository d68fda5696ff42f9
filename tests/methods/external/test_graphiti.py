"""Graphiti on the seam: real graphiti-core on real Kuzu behind the accounting endpoint, with
an LLM that answers each of Graphiti's JSON schemas from the prompt (entities are the
speakers, one fact per speaker); no socket leaves 127.0.0.1."""

from __future__ import annotations

import gc
import json
import re
import socket
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.hashed_embedder import HashEmbedder
from tmem_core import EngineError
from tmem_core.llm import ChatRequest, ChatResponse, Usage, get_backbone
from tmem_core.llm._accounting_server import AccountingEndpoint
from tmem_core.methods import MethodEnv
from tmem_core.methods._registry import build_method
from tmem_core.methods.external._method import ExternalMemory
from tmem_core.methods.external._record import SystemRecord
from tmem_core.retrieval import Conversation, IndexStore, cl100k_tokens
from tmem_core.schema import Message, Question

pytest.importorskip("graphiti_core")
from tmem_core.methods.external._graphiti import (
    GraphitiMemory,
    GraphitiParams,
    episodes,
    open_graphiti,
)

_SPEAKER = re.compile(r"\] \d{4}-\d\d-\d\d \d\d:\d\d (\w+): (.*)")


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"network call to {address}")
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


def minimal(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """The smallest instance of a JSON schema (required fields only)."""
    if "$ref" in schema:
        return minimal(defs[schema["$ref"].split("/")[-1]], defs)
    if "anyOf" in schema:
        return minimal(schema["anyOf"][0], defs)
    kind = schema.get("type")
    if kind == "object":
        return {k: minimal(v, defs) for k, v in schema.get("properties", {}).items()
                if k in schema.get("required", [])}
    return {"array": [], "string": "", "integer": 0, "number": 0.0, "boolean": False,
            "null": None}.get(str(kind))


class SchemaLLM:
    """Entities: the speakers of the episode; edges: each speaker's line as a fact."""

    backbone = get_backbone("smollm2")

    def __init__(self, junk: bool = False) -> None:
        self.junk = junk
        self.schemas: list[str] = []

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return [self._answer(r) for r in requests]

    def _answer(self, request: ChatRequest) -> ChatResponse:
        schema = request.schema or {}
        title = str(schema.get("title", ""))
        self.schemas.append(title)
        prompt = request.messages[-1].content
        lines = _SPEAKER.findall(prompt)
        if self.junk:
            body: Any = "{not json"
        elif title == "ExtractedEntities":
            body = {"extracted_entities": [{"name": s, "entity_type_id": 0}
                                           for s in dict.fromkeys(s for s, _ in lines)]}
        elif title == "ExtractedEdges":
            names = list(dict.fromkeys(s for s, _ in lines))
            body = {"edges": [{"source_entity_name": s, "target_entity_name": names[-1],
                               "relation_type": "SAID", "fact": f"{s} said: {t}"}
                              for s, t in lines if len(names) > 1]}
        else:
            body = minimal(schema, schema.get("$defs", {}))
        text = body if isinstance(body, str) else json.dumps(body)
        return ChatResponse(text=text, usage=Usage(len(prompt) // 4, len(text) // 4))


def _messages() -> list[Message]:
    said = [("Caroline", "I went to the LGBTQ support group on Sunday."),
            ("Melanie", "I painted a sunrise over the lake."),
            ("Caroline", "I am researching adoption agencies."),
            ("Melanie", "My kids loved the camping trip to the beach.")]
    return [Message("conv-26", f"D{1 + i // 2}:{1 + i % 2}", i,
                    datetime(2023, 5, 8 + 20 * (i // 2), 13, 56 + i), text,
                    session_id=f"session_{1 + i // 2}", author=who)
            for i, (who, text) in enumerate(said)]


@pytest.fixture
def endpoint() -> Iterator[AccountingEndpoint]:
    vectors = np.random.default_rng(0).normal(size=(4096, 384)).astype(np.float32)

    def embed(texts: Sequence[str]) -> np.ndarray:  # a bag of hashed words, normalised
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row] += vectors[hash(word) % 4096]
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)

    server = AccountingEndpoint(embed, "hashed-words")
    yield server
    server.close()


def test_episodes_are_session_runs_in_order() -> None:
    chunks = episodes(_messages(), 1)
    assert [[m.msg_id for m in c] for c in chunks] == [["D1:1"], ["D1:2"], ["D2:1"], ["D2:2"]]
    assert [len(c) for c in episodes(_messages(), 8)] == [2, 2]


def test_add_then_search_recalls_facts_dated_by_the_conversation(
        endpoint: AccountingEndpoint, tmp_path: Path) -> None:
    llm = SchemaLLM()
    memory = open_graphiti(endpoint, tmp_path / "system", GraphitiParams(episode_messages=2))
    with endpoint.bind(llm) as binding:
        memory.add(_messages())
    assert {"ExtractedEntities", "ExtractedEdges"} <= set(llm.schemas)
    assert binding.stats.chat_calls == len(binding.records) > 0
    assert binding.stats.embedding_calls > 0
    recalled = memory.search("support group", 4)
    assert recalled, "nothing recalled"
    best = recalled[0]
    assert "support group" in best.text
    assert best.source_ids == ("D1:1", "D1:2")
    assert best.timestamp is not None and best.timestamp.date() == datetime(2023, 5, 8).date()
    assert all(r.timestamp is not None and r.timestamp.year == 2023 for r in recalled)
    # reopened (as another process does, once this one let go of the database), the memory
    # dates and sources its facts the same way
    del memory
    gc.collect()
    again = open_graphiti(endpoint, tmp_path / "system", GraphitiParams(episode_messages=2))
    assert again.search("support group", 4)[0] == best


def test_junk_output_fails_every_episode_on_record(endpoint: AccountingEndpoint,
                                                   tmp_path: Path) -> None:
    memory = open_graphiti(endpoint, tmp_path / "system", GraphitiParams(episode_messages=2))
    with endpoint.bind(SchemaLLM(junk=True)), pytest.raises(EngineError, match="1 of 1"):
        memory.add(_messages()[:2])  # one episode: Graphiti retries each call with backoff
    assert memory.search("support group", 4) == []


class Contradicting(SchemaLLM):
    """One fact per episode between its first and last speaker (what the first said, valid
    from the episode's time); a new fact contradicts every fact Graphiti offers against it."""

    def _answer(self, request: ChatRequest) -> ChatResponse:
        title = str((request.schema or {}).get("title", ""))
        prompt = request.messages[-1].content
        if title == "ExtractedEdges":
            current = prompt.split("<CURRENT_MESSAGE>")[1].split("</CURRENT_MESSAGE>")[0]
            lines = _SPEAKER.findall(current)
            day, clock = _WHEN.findall(current)[0]
            names = list(dict.fromkeys(s for s, _ in lines))
            body: Any = {"edges": [{"source_entity_name": names[0],
                                    "target_entity_name": names[-1], "relation_type": "PLANS",
                                    "fact": f"{names[0]} plans: {lines[0][1]}",
                                    "valid_at": f"{day}T{clock}:00Z", "invalid_at": None}]}
        elif title == "EdgeDuplicate":
            offered = re.findall(r"<(?:EXISTING FACTS|FACT INVALIDATION CANDIDATES)>(.*?)</",
                                 prompt, re.S)
            body = {"duplicate_facts": [], "contradicted_facts": [
                int(i) for block in offered for i in re.findall(r"'idx': (\d+)", block)]}
        else:
            return super()._answer(request)
        self.schemas.append(title)
        return ChatResponse(text=json.dumps(body), usage=Usage(10, 10))


_WHEN = re.compile(r"\] (\d{4}-\d\d-\d\d) (\d\d:\d\d)")
ASKED = Question("conv-26", "q1", "What does Caroline plan now?", "knowledge_update",
                 asking_user="Melanie")


def _graphiti(endpoint: AccountingEndpoint, tmp_path: Path) -> ExternalMemory:
    store = IndexStore({"conv-26": Conversation("conv-26", tuple(_messages()))},
                       HashEmbedder(), tmp_path)
    method = build_method("graphiti", MethodEnv(store.conversations, 4, 512, store),
                          {"episode_messages": 2})
    assert isinstance(method, ExternalMemory)
    method.cache = tmp_path / "memories"
    method.__dict__["endpoint"] = endpoint  # the test's hashed-word embedder
    return method


def test_a_superseded_fact_is_marked_and_the_query_names_the_asker(
        endpoint: AccountingEndpoint, tmp_path: Path) -> None:
    method, llm = _graphiti(endpoint, tmp_path), Contradicting()
    method.prepare("conv-26", llm)
    system = method._memories["conv-26"].system
    queries: list[str] = []
    search = system.search
    system.search = lambda query, k: queries.append(query) or search(query, k)  # type: ignore[method-assign]
    context = method.construct(ASKED, method.retrieve(ASKED), llm, cl100k_tokens)
    assert "EdgeDuplicate" in llm.schemas
    assert queries == ["Melanie: What does Caroline plan now?"]  # the one query rule
    old = "Caroline plans: I went to the LGBTQ support group on Sunday."
    new = "Caroline plans: I am researching adoption agencies."
    lines = context.text.splitlines()
    assert f"[memory] 2023-05-08 13:56 (superseded: no longer true from 2023-05-28 13:58): " \
           f"{old}" in lines  # kept, marked: Graphiti's invalid_at (conversation time)
    assert f"[memory] 2023-05-28 13:58: {new}" in lines  # the fact that replaced it, unmarked
    assert isinstance(context.record, SystemRecord)
    recalled = {r.text: r for r in context.record.recalled}
    until = recalled[old].valid_until
    assert recalled[old].superseded and until and until.isoformat().startswith("2023-05-28")
    assert not recalled[new].superseded and recalled[new].valid_until is None


def test_a_build_that_stopped_part_way_fails_its_questions(
        endpoint: AccountingEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    added = GraphitiMemory._add

    def first_episode_only(memory: GraphitiMemory, chunk: Sequence[Message]) -> None:
        if chunk[0].msg_id != "D1:1":  # Graphiti gave up on the second (its retries take 15 s+)
            raise RuntimeError("the graph store went away")
        added(memory, chunk)

    monkeypatch.setattr(GraphitiMemory, "_add", first_episode_only)
    method, llm = _graphiti(endpoint, tmp_path), SchemaLLM()
    build = method.prepare("conv-26", llm)
    assert "ExtractedEdges" in llm.schemas  # the first episode was built ...
    assert build.failed and "1 of 2 episodes failed" in build.failed[-1]
    with pytest.raises(EngineError, match="memory of conv-26 is incomplete"):
        method.construct(ASKED, method.retrieve(ASKED), llm, cl100k_tokens)  # ... unused
