"""LazyMem as re-implemented from T2Mem's description: one retrieval pass fixes the evidence
(the grid's Top-k, the same ranking as the retriever's own method), one construction call
reads exactly that evidence in time order and writes the memory the answer model reads; a
failed call shows the evidence instead, flagged. It registers as a project addition."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tests.hashed_embedder import HashEmbedder
from tests.methods.conftest import chat_messages
from tmem_core import from_json, to_json
from tmem_core.evaluation._basis import READ, SHOWN
from tmem_core.llm import BackboneConfig, ChatRequest, ChatResponse, Usage, get_backbone
from tmem_core.methods import MethodEnv, get_method, method_label
from tmem_core.methods.baselines._lazymem import LazyRecord
from tmem_core.retrieval import Conversation, IndexStore, cl100k_tokens
from tmem_core.schema import Question

QUESTION = Question("c", "q1", "What is the checkout retry limit?", "knowledge_update",
                    asking_user="User_1")
MEMORY = "- The checkout retry limit was raised from 3 to 5 [c:12]."


class OneCallLLM:
    """Answers every request with `reply` (None: a failed call)."""

    def __init__(self, reply: str | None) -> None:
        self.backbone: BackboneConfig = get_backbone("smollm2")
        self.reply, self.requests = reply, list[ChatRequest]()

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        self.requests += requests
        if self.reply is None:
            return [ChatResponse(usage=Usage(40, 0), error="server: down", error_kind="server")
                    for _ in requests]
        return [ChatResponse(self.reply, None, Usage(300, 25), 0.5) for _ in requests]


def env(tmp: Path, top_k: int = 4) -> MethodEnv:
    conversation = Conversation("c", tuple(chat_messages()))
    store = IndexStore({"c": conversation}, HashEmbedder(), tmp)
    return MethodEnv({"c": conversation}, top_k, 4096, store)


def test_one_pass_fixes_the_evidence_and_one_call_builds_the_memory_from_it(
        tmp_path: Path) -> None:
    run_env = env(tmp_path)
    lazy = get_method("lazymem").create(run_env)
    evidence = lazy.retrieve(QUESTION)
    assert evidence.ids == get_method("dense").create(run_env).retrieve(QUESTION).ids
    assert len(evidence.ids) == 4
    llm = OneCallLLM(MEMORY)
    context = lazy.construct(QUESTION, evidence, llm, cl100k_tokens)
    [request] = llm.requests  # nothing retrieved after the first pass
    assert request.stage == "construct"
    prompt = request.messages[-1].content
    positions = [prompt.index(f"[{i}] ") for i in sorted(evidence.ids, key=_seq)]
    assert positions == sorted(positions)  # every retrieved message, oldest first
    assert "User_1" in prompt and QUESTION.question in prompt
    assert context.kind == "memory" and context.text == MEMORY
    assert set(context.ids) == set(evidence.ids)
    record = from_json(LazyRecord, to_json(context.record))
    assert record.basis == READ and record.memory == MEMORY
    assert record.degradation.fallback == 0 and record.usage is not None
    assert record.usage.prompt_tokens == 300


def test_a_failed_construction_shows_the_evidence_and_says_so(tmp_path: Path) -> None:
    lazy = get_method("lazymem").create(env(tmp_path))
    evidence = lazy.retrieve(QUESTION)
    context = lazy.construct(QUESTION, evidence, OneCallLLM(None), cl100k_tokens)
    assert all(f"[{i}] " in context.text for i in evidence.ids)
    assert isinstance(context.record, LazyRecord)
    assert context.record.degradation.fallback == 1 and context.record.error
    assert context.record.basis == SHOWN


def test_the_top_k_is_the_grids_and_the_method_is_labelled_a_project_addition(
        tmp_path: Path) -> None:
    assert len(get_method("lazymem").create(env(tmp_path, 7)).retrieve(QUESTION).ids) == 7
    assert method_label("lazymem") == "lazymem (project addition)"
    assert "re-implemented" in get_method("lazymem").description


def _seq(msg_id: str) -> int:
    return int(msg_id.split(":")[1])
