"""The cache-first path in front of a shared engine: hits replayed here, misses sent on."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from pathlib import Path
from typing import Any

from tmem_core.llm import (
    ChatRequest,
    LLMClient,
    RequestCache,
    Sampling,
    SimEngineConfig,
    Usage,
    get_backbone,
)
from tmem_core.llm._accounting import CallRecord
from tmem_core.llm._shared import Answered, SharedEngine, cache_first
from tmem_core.llm._types import error_response, output_response


def _asked(n: int) -> list[ChatRequest]:
    return [ChatRequest.from_prompt(f"q{i}", stage="answer", qid=f"q{i}") for i in range(n)]


def test_hits_are_replayed_and_only_misses_reach_the_engine(fake_backend: Any,
                                                             tmp_path: Path) -> None:
    backbone = get_backbone("smollm2")
    cache = RequestCache(tmp_path / "c.sqlite")
    asked = _asked(4)
    LLMClient(backbone, fake_backend(lambda r, c: "cached"), cache).generate(
        [asked[0], asked[2]])
    sent: list[list[ChatRequest]] = []

    def engine(misses: list[ChatRequest]) -> Answered:
        sent.append(misses)
        responses = [output_response(f"fresh {r.qid}", Usage(10, 5), 0.5, None) for r in misses]
        return responses, [CallRecord.of(backbone, r, x)
                           for r, x in zip(misses, responses, strict=True)]

    call = cache_first(backbone, cache, engine)
    responses, records = call(asked)
    assert sent == [[asked[1], asked[3]]]  # once, with the misses in order
    assert [r.text for r in responses] == ["cached", "fresh q1", "cached", "fresh q3"]
    assert [r.cached for r in responses] == [True, False, True, False]
    assert [(c.qid, c.cached) for c in records] == [
        ("q0", True), ("q1", False), ("q2", True), ("q3", False)]
    sent.clear()
    call([asked[0]])
    assert sent == []  # a batch the cache holds never reaches the engine
    call([asked[1], asked[3]])
    assert sent == []  # the engine's answers were stored by the caller
    assert [r.text for r in cache_first(backbone, None, engine)(asked[:1])[0]] == ["fresh q0"]


def test_failed_answers_are_not_stored_and_the_engine_keeps_no_cache(tmp_path: Path) -> None:
    """Only the caller writes the cache, and never an error: the same request is sent again.
    A shared engine (a replica) answers what reaches it and stores nothing itself."""
    backbone = get_backbone("smollm2")
    cache = RequestCache(tmp_path / "c.sqlite")
    sent: list[str] = []

    def engine(misses: list[ChatRequest]) -> Answered:
        sent.extend(r.qid for r in misses)
        responses = [error_response("timeout", "late") if r.qid == "q1" else
                     output_response(f"fresh {r.qid}", Usage(10, 5), 0.5, None) for r in misses]
        return responses, [CallRecord.of(backbone, r, x)
                           for r, x in zip(misses, responses, strict=True)]

    call = cache_first(backbone, cache, engine)
    asked = _asked(2)
    call(asked)
    call(asked)
    assert sent == ["q0", "q1", "q1"]
    assert len(cache) == 1
    assert SharedEngine(backbone).client.cache is None



def test_each_call_of_a_batch_ends_when_it_was_answered_not_with_its_batch() -> None:
    """A batch's short answer is on record as ending when it came back, its long one later:
    the utilisation report reads when each call held its replica from these times."""
    engine = SimEngineConfig(ttft_s=0.0, step_s=0.01, step_s_per_seq=0.0, step_s_per_ktok=0.0,
                             min_output_tokens=40, max_output_tokens=60)
    backbone = dataclasses.replace(get_backbone("sim"), engine=engine)
    shared = SharedEngine(backbone)
    words = f"{uuid.uuid4()} " + " ".join(f"word{i}" for i in range(100))  # a cache miss
    short = ChatRequest.from_prompt(words, sampling=Sampling(max_tokens=4), qid="short")
    long = ChatRequest.from_prompt(words + " again", qid="long")
    before = time.time()
    try:
        responses, records = asyncio.run(shared.generate([short, long]))
    finally:
        shared.close()
    after = time.time()
    assert [(r.ok, r.cached) for r in responses] == [(True, False), (True, False)]
    short_call, long_call = records
    assert short_call.finished_at is not None and long_call.finished_at is not None
    gap = long_call.latency_s - short_call.latency_s
    assert gap > 0.1  # at least ten more decode steps
    # both were sent when the batch was, each ended after its own latency
    for call in records:
        assert call.finished_at is not None
        assert before - 0.01 <= call.finished_at - call.latency_s <= before + 0.05
    assert abs((long_call.finished_at - short_call.finished_at) - gap) < 0.02
    assert long_call.finished_at <= after + 0.01
