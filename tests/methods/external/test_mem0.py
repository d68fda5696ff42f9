"""Mem0 on the external-memory seam, fully local: its calls reach only the accounting
endpoint, its memories carry the conversation's time and source messages, junk extractions
fail the build visibly, and a sweep records and reuses its memory."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Sequence
from datetime import datetime, timedelta
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from tests.conftest import scripted_backbones
from tests.hashed_embedder import HashEmbedder
from tests.methods.external.conftest import SystemServer, external_sweep
from tmem_core import EngineError, from_json
from tmem_core.llm import BackboneConfig, ChatRequest, ChatResponse, Usage, get_backbone
from tmem_core.llm._accounting_server import AccountingEndpoint
from tmem_core.methods import MethodEnv
from tmem_core.methods._registry import build_method
from tmem_core.methods.external._mem0 import Mem0, Mem0Params
from tmem_core.methods.external._method import DONE, ExternalMemory
from tmem_core.methods.external._record import SystemRecord
from tmem_core.pipeline._summary import RunSummary
from tmem_core.results import MEMORY_STAGE, calls_store, stage_store
from tmem_core.retrieval import Conversation, IndexStore, cl100k_tokens
from tmem_core.schema import Message, Question

# find_spec, not importorskip: mem0 must first be imported by the adapter (telemetry off)
pytestmark = pytest.mark.skipif(find_spec("mem0") is None,
                                reason="mem0ai is not installed (pip install -e '.[mem0]')")

_NEW = re.compile(r"## New Messages\n(.*?)\n\n## Observation Date", re.S)


def extraction(prompt: str) -> str:
    """Mem0's extraction answer: one memory per new message, its text restated."""
    lines = _NEW.search(prompt)
    assert lines, "Mem0's extraction prompt changed shape"
    facts = [line.split("] ", 1)[1] for line in lines.group(1).splitlines() if "] " in line]
    return json.dumps({"memory": [{"id": str(i), "text": f"Noted that {f}"}
                                  for i, f in enumerate(facts)]})


class MemoryExtractor:
    """A bound LLM answering Mem0's extraction prompts (or with `junk`)."""

    def __init__(self, junk: str | None = None) -> None:
        self.junk, self.prompts = junk, list[str]()

    @property
    def backbone(self) -> BackboneConfig:
        return get_backbone("smollm2")

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        self.prompts += [r.messages[-1].content for r in requests]
        return [ChatResponse(text=self.junk or extraction(r.messages[-1].content),
                             usage=Usage(100, 20)) for r in requests]


def conversation() -> list[Message]:
    start = datetime(2023, 5, 8, 13, 56)
    texts = [("Caroline", "I went to an LGBTQ support group yesterday."),
             ("Melanie", "That sounds powerful. I am painting a sunrise this week."),
             ("Caroline", "I am researching adoption agencies."),
             ("Melanie", "I ran a charity race for mental health last Saturday.")]
    return [Message("conv-26", f"D{1 + i // 2}:{1 + i % 2}", i,
                    start + timedelta(days=30 * (i // 2), minutes=i), text,
                    session_id=f"session_{1 + i // 2}", author=author)
            for i, (author, text) in enumerate(texts)]


@pytest.fixture
def local_only(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every address a socket connects to (or a name looked up); anything not on
    127.0.0.1 raises."""
    seen: list[Any] = []
    connect, lookup = socket.socket.connect, socket.getaddrinfo

    def guarded_connect(self: socket.socket, address: Any) -> None:
        seen.append(address)
        if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] != "127.0.0.1":
            raise AssertionError(f"connection outside 127.0.0.1: {address}")
        connect(self, address)

    def guarded_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(host)
        if host not in ("127.0.0.1", "localhost"):
            raise AssertionError(f"name lookup outside 127.0.0.1: {host}")
        return lookup(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_lookup)
    return seen


def test_memories_carry_the_conversations_time_and_sources_and_stay_local(
        endpoint: AccountingEndpoint, tmp_path: Path, local_only: list[Any]) -> None:
    messages, llm = conversation(), MemoryExtractor()
    memory = Mem0(endpoint, tmp_path / "system", Mem0Params(batch=2))
    with endpoint.bind(llm) as binding:
        memory.add(messages)
        found = memory.search("What is Caroline researching?", 4)
    assert local_only and binding.stats.chat_calls == len(llm.prompts) == 2  # one per session
    assert binding.stats.embedding_calls > 0 and not binding.errors
    assert all("Observation Date of these messages is 2023-" in p for p in llm.prompts)
    assert "[2023-05-08 13:56] Caroline: I went to" in llm.prompts[0]
    assert found and "adoption agencies" in found[0].text
    by_id = {m.msg_id: m for m in messages}
    for item in found:
        sources = [by_id[i] for i in item.source_ids]
        assert sources and item.timestamp == max(m.timestamp for m in sources)
        assert item.timestamp.year == 2023 and not item.raw
    reopened = Mem0(endpoint, tmp_path / "system", Mem0Params(batch=2))
    with endpoint.bind(llm):
        assert [r.text for r in reopened.search("What is Caroline researching?", 4)] == [
            r.text for r in found]


def test_a_junk_extraction_fails_the_add_after_every_batch_was_tried(
        endpoint: AccountingEndpoint, tmp_path: Path) -> None:
    llm = MemoryExtractor(junk="Sure! Here are the memories: none")
    memory = Mem0(endpoint, tmp_path / "system", Mem0Params(batch=2))
    with endpoint.bind(llm), pytest.raises(EngineError, match="2 Mem0 errors over 2 batches"):
        memory.add(conversation())
    assert len(llm.prompts) == 2


def mem0_server() -> SystemServer:
    """Mem0's extractions answered from the messages they show."""
    return SystemServer(lambda system, user: extraction(user)
                        if "You are a Memory Extractor" in system else None)


def _sweep(tmp_path: Path, name: str, backbones: Path) -> RunSummary:
    return external_sweep(tmp_path, name, backbones, "mem0", {"batch": 20})


def _records(summary: RunSummary, stage: str) -> list[dict[str, Any]]:
    return stage_store(summary.run_dir, stage).latest().to_pylist()


def test_a_sweep_records_mem0s_calls_in_every_stage_and_reuses_its_memory(
        tmp_path: Path) -> None:
    server = mem0_server()
    try:
        backbones = scripted_backbones(tmp_path, server, "scripted")
        first = _sweep(tmp_path, "first", backbones)
        engine_calls = server.calls
        second = _sweep(tmp_path, "second", backbones)
    finally:
        server.close()
    assert not any(first.stage_errors.values()) and not any(second.stage_errors.values())
    for stage in ("retrieve", "construct", "answer", "judge"):
        assert len(_records(first, stage)) == 2, stage
    traces = [from_json(SystemRecord, r["payload"]) for r in _records(first, "construct")]
    assert any(t.built_here for t in traces)
    assert all(not any(t.degradation.counters().values()) for t in traces)
    directories = {t.directory for t in traces}
    built = [json.loads((Path(d) / DONE).read_text())["endpoint"] for d in directories]
    calls = calls_store(first.run_dir).latest()
    memory = calls.filter(pc.equal(calls.column("stage"), MEMORY_STAGE)).to_pylist()
    assert memory and len(memory) == sum(b["chat_calls"] for b in built)
    assert all(b["embedding_calls"] > 0 and b["embedding_tokens"] > 0 for b in built)
    assert sum(c["prompt_tokens"] for c in memory) == sum(b["prompt_tokens"] for b in built)
    assert sum(c["completion_tokens"] for c in memory) == sum(
        b["completion_tokens"] for b in built)
    recalled = [r for t in traces for r in t.recalled]
    assert recalled and all(r.source_ids and r.timestamp for r in recalled)
    assert all(r.timestamp and r.timestamp.year != datetime.now().year for r in recalled)
    again = [from_json(SystemRecord, r["payload"]) for r in _records(second, "construct")]
    assert {t.directory for t in again} == directories
    assert not any(t.built_here for t in again)
    assert server.calls - engine_calls <= 2 * 2  # answers and judgements only, at most


class HalfJunk(MemoryExtractor):
    """Mem0's first extraction answered, every later one junk."""

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        self.junk = "Sure, no JSON here" if self.prompts else None
        return super().generate(requests)


ASKED = Question("conv-26", "q1", "What is Caroline researching?", "single_hop",
                 asking_user="Melanie")


def _mem0(endpoint: AccountingEndpoint, tmp_path: Path) -> ExternalMemory:
    store = IndexStore({"conv-26": Conversation("conv-26", tuple(conversation()))},
                       HashEmbedder(), tmp_path)
    method = build_method("mem0", MethodEnv(store.conversations, 4, 512, store), {"batch": 2})
    assert isinstance(method, ExternalMemory)
    method.cache = tmp_path / "memories"
    method.__dict__["endpoint"] = endpoint  # the module's MiniLM endpoint
    return method


def test_mem0_is_searched_with_the_query_every_method_uses(endpoint: AccountingEndpoint,
                                                            tmp_path: Path) -> None:
    method, llm = _mem0(endpoint, tmp_path), MemoryExtractor()
    assert not method.prepare("conv-26", llm).failed
    system = method._memories["conv-26"].system
    queries: list[str] = []
    search = system.search
    system.search = lambda query, k: queries.append(query) or search(query, k)  # type: ignore[method-assign]
    context = method.construct(ASKED, method.retrieve(ASKED), llm, cl100k_tokens)
    assert queries == ["Melanie: What is Caroline researching?"]
    assert isinstance(context.record, SystemRecord) and context.record.query == queries[0]
    assert "adoption agencies" in context.text


def test_a_mem0_build_that_failed_half_way_fails_its_questions(endpoint: AccountingEndpoint,
                                                               tmp_path: Path) -> None:
    method, llm = _mem0(endpoint, tmp_path), HalfJunk()
    build = method.prepare("conv-26", llm)
    assert len(llm.prompts) == 2 and build.failed  # the first session went in, not the second
    assert not (Path(build.directory) / DONE).exists()
    with pytest.raises(EngineError, match="memory of conv-26 is incomplete"):
        method.construct(ASKED, method.retrieve(ASKED), llm, cl100k_tokens)
