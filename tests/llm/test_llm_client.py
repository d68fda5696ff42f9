"""LLMClient logic on a fake engine: cache, output retries, accounting, records."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import tmem_core.llm._client as client_module
from tmem_core.llm import (
    ChatRequest,
    LLMClient,
    RequestCache,
    Sampling,
    get_backbone,
    request_hash,
)
from tmem_core.llm._accounting import CALLS_SCHEMA, records_to_table
from tmem_core.llm._client import LazyBackend, cache_hits
from tmem_core.llm._config import Prices
from tmem_core.llm._types import run_sync

GOOD = '{"answer": "Paris", "confidence": 3}'


@pytest.fixture
def priced() -> Any:
    """smollm2 with a price table, so that costs are non-zero."""
    return dataclasses.replace(get_backbone("smollm2"), prices=Prices(2.0, 10.0))


def _requests(schema: dict[str, Any], n: int = 3) -> list[ChatRequest]:
    return [
        ChatRequest.from_prompt(f"question {i}", schema=schema, stage="answer", qid=f"q{i}")
        for i in range(n)
    ]


def test_second_identical_run_is_served_by_the_cache(
    fake_backend: Any, answer_schema: dict[str, Any], priced: Any, tmp_path: Path
) -> None:
    cache = RequestCache(tmp_path / "c.sqlite")
    engine = fake_backend(lambda request, call: GOOD)
    first = LLMClient(priced, engine, cache).generate(_requests(answer_schema))
    assert engine.calls == 3
    assert all(r.ok and not r.cached and r.parsed["answer"] == "Paris" for r in first)
    assert all(r.cost_usd == pytest.approx((10 * 2.0 + 5 * 10.0) / 1e6) for r in first)

    again = LLMClient(priced, engine, RequestCache(tmp_path / "c.sqlite"))
    second = again.generate(_requests(answer_schema))
    assert engine.calls == 3  # no engine call at all
    assert [r.cached for r in second] == [True] * 3
    assert [r.cost_usd for r in second] == [0.0] * 3
    assert [r.usage for r in second] == [r.usage for r in first]  # the original usage
    assert [r.parsed for r in second] == [r.parsed for r in first]
    assert [r.request_hash for r in second] == [r.request_hash for r in first]


def test_changed_sampling_or_schema_is_a_miss(
    fake_backend: Any, answer_schema: dict[str, Any], tmp_path: Path
) -> None:
    engine = fake_backend(lambda request, call: GOOD)
    client = LLMClient(get_backbone("smollm2"), engine, RequestCache(tmp_path / "c.sqlite"))
    base = ChatRequest.from_prompt("q", schema=answer_schema)
    client.generate([base])
    client.generate([dataclasses.replace(base, sampling=Sampling(max_tokens=17))])
    client.generate([dataclasses.replace(base, schema={"type": "object"})])
    client.generate([dataclasses.replace(base, stage="judge", qid="other")])  # not in the key
    assert engine.calls == 3


def test_junk_output_is_resampled_then_succeeds(
    fake_backend: Any, answer_schema: dict[str, Any], priced: Any, tmp_path: Path
) -> None:
    junk = {"q0": ["", "{not json", GOOD], "q1": [GOOD]}
    engine = fake_backend(lambda request, call: junk[request.qid].pop(0))
    cache = RequestCache(tmp_path / "c.sqlite")
    client = LLMClient(priced, engine, cache)
    requests = [ChatRequest.from_prompt(q, schema=answer_schema, qid=q) for q in ("q0", "q1")]
    retried, plain = client.generate(requests)
    assert retried.ok and retried.parsed == {"answer": "Paris", "confidence": 3}
    assert retried.usage.completion_tokens == 3 * 5  # every attempt is paid for
    assert retried.cost_usd == pytest.approx(priced.prices.cost(retried.usage))
    assert plain.ok and plain.usage.completion_tokens == 5
    resent = [r.sampling for r in engine.sent if r.qid == "q0"]
    assert [s.seed for s in resent] == [0, 1, 2]  # retries resample with new seeds
    assert min(s.temperature for s in resent[1:]) >= 0.7
    assert len(cache) == 2


def test_persistent_junk_ends_in_an_error_record_and_others_succeed(
    fake_backend: Any, answer_schema: dict[str, Any], tmp_path: Path
) -> None:
    answers = {"bad": '{"answer": 7}', "good": GOOD}
    engine = fake_backend(lambda request, call: answers[request.qid])
    cache = RequestCache(tmp_path / "c.sqlite")
    client = LLMClient(get_backbone("smollm2"), engine, cache, max_output_attempts=3)
    requests = [ChatRequest.from_prompt(q, schema=answer_schema, qid=q) for q in answers]
    bad, good = client.generate(requests)
    assert engine.calls == 3 + 1
    assert good.ok
    assert not bad.ok and bad.error_kind == "invalid_output"
    assert "violates the schema" in (bad.error or "")
    assert "after 3 attempts" in (bad.error or "")
    assert len(cache) == 1  # errors are never cached
    client.generate(requests)
    assert engine.calls == 4 + 3  # the failed request is tried again, the good one is not


def test_a_call_that_waited_for_the_engine_to_start_ends_when_it_was_answered(
    fake_backend: Any, answer_schema: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    start_s = 0.5

    def slow_start(backbone: Any) -> Any:
        time.sleep(start_s)
        return fake_backend(lambda request, call: GOOD)

    monkeypatch.setattr(client_module, "make_backend", slow_start)
    client = LLMClient(get_backbone("smollm2"), LazyBackend(get_backbone("smollm2")))
    requests = [ChatRequest.from_prompt(q, schema=answer_schema, qid=q) for q in ("a", "b")]
    sent = time.time()
    client.generate(requests)
    answered = time.time()
    first = client.records[-2:]
    assert all(r.finished_at is not None and r.finished_at >= sent + start_s for r in first)
    assert all(r.finished_at is not None and r.finished_at <= answered + 0.05 for r in first)
    assert all(r.latency_s >= start_s for r in first)
    client.generate([ChatRequest.from_prompt("c", schema=answer_schema, qid="c")])
    assert client.records[-1].latency_s < start_s  # started: nothing more to wait for


def test_duplicates_in_a_batch_reach_the_engine_once(
    fake_backend: Any, answer_schema: dict[str, Any]
) -> None:
    engine = fake_backend(lambda request, call: GOOD)
    client = LLMClient(get_backbone("smollm2"), engine, cache=None)
    request = ChatRequest.from_prompt("same", schema=answer_schema)
    first, duplicate = client.generate([request, request])
    assert engine.calls == 1
    assert not first.cached and duplicate.cached
    assert duplicate.parsed == first.parsed


def test_records_carry_stage_qid_and_write_to_parquet(
    fake_backend: Any, answer_schema: dict[str, Any], priced: Any, tmp_path: Path
) -> None:
    client = LLMClient(priced, fake_backend(lambda request, call: GOOD), cache=None)
    asyncio.run(client.agenerate(_requests(answer_schema, 2)))
    assert [(r.stage, r.qid) for r in client.records] == [("answer", "q0"), ("answer", "q1")]
    assert all(r.backbone == "smollm2" and r.prompt_tokens == 10 for r in client.records)
    pq.write_table(records_to_table(client.records), tmp_path / "calls.parquet")
    table = pq.read_table(tmp_path / "calls.parquet")
    assert table.schema.equals(CALLS_SCHEMA)
    assert table.column("cost_usd").to_pylist() == [r.cost_usd for r in client.records]


def test_fully_cached_run_never_starts_the_engine(
    fake_backend: Any, answer_schema: dict[str, Any], tmp_path: Path
) -> None:
    backbone = get_backbone("smollm2")
    cache = RequestCache(tmp_path / "c.sqlite")
    LLMClient(backbone, fake_backend(lambda r, c: GOOD), cache).generate(_requests(answer_schema))
    lazy = LazyBackend(backbone)  # would start a real server if it were asked anything
    responses = LLMClient(backbone, lazy, cache).generate(_requests(answer_schema))
    assert all(r.cached for r in responses)
    assert not lazy.started


def test_generate_inside_an_event_loop_says_to_await(
    fake_backend: Any, answer_schema: dict[str, Any]
) -> None:
    client = LLMClient(get_backbone("smollm2"), fake_backend(lambda r, c: GOOD))

    async def call_sync() -> None:
        client.generate(_requests(answer_schema, 1))

    with pytest.raises(RuntimeError, match="await agenerate"):
        asyncio.run(call_sync())


def test_invalid_schema_and_empty_messages_are_refused_early() -> None:
    with pytest.raises(Exception, match="is not valid"):
        ChatRequest.from_prompt("q", schema={"type": "no-such-type"})
    with pytest.raises(ValueError, match="at least one message"):
        ChatRequest(messages=[])


def test_cache_hits_replays_what_the_cache_holds_and_nothing_else(
    fake_backend: Any, answer_schema: dict[str, Any], priced: Any, tmp_path: Path
) -> None:
    cache = RequestCache(tmp_path / "c.sqlite")
    asked = _requests(answer_schema, 4)
    LLMClient(priced, fake_backend(lambda r, c: GOOD), cache).generate(asked[:2])
    keys, hits = cache_hits(priced, cache, asked)
    assert keys == [request_hash(priced, r) for r in asked]
    assert set(hits) == set(keys[:2])
    assert all(h.cached and h.cost_usd == 0.0 and h.parsed["answer"] == "Paris"
               for h in hits.values())
    assert [hits[k].request_hash for k in keys[:2]] == keys[:2]
    assert cache_hits(priced, None, asked) == (keys, {})


def test_synchronous_callers_share_one_long_lived_loop() -> None:
    async def current() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    first = run_sync(current())
    with ThreadPoolExecutor(max_workers=3) as pool:
        others = list(pool.map(lambda _: run_sync(current()), range(3)))
    assert all(loop is first for loop in others)
    assert first.is_running()  # kept for the next call: clients and connections are reused
