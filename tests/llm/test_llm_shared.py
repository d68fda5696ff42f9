"""The cache-first path in front of a shared engine: hits replayed here, misses sent on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tmem_core.llm import (
    Answered,
    CallRecord,
    ChatRequest,
    LLMClient,
    RequestCache,
    Usage,
    cache_first,
    get_backbone,
)
from tmem_core.llm._types import output_response


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
    assert [r.text for r in cache_first(backbone, None, engine)(asked[:1])[0]] == ["fresh q0"]

