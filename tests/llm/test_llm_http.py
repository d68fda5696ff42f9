"""The OpenAI-compatible backend against a scripted local server: retries, timeouts, errors."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import pytest

from tmem_core.llm import (
    ChatRequest,
    HttpConfig,
    OpenAICompatBackend,
    Sampling,
    StaticEndpoint,
    get_backbone,
    open_backend,
)
from tmem_core.llm._config import parse_backbones
from tmem_core.llm._types import GATING_PRIORITY

FAST = HttpConfig(timeout_s=5.0, max_attempts=3, backoff_base_s=0.05, backoff_max_s=0.2)


def _backend(url: str, config: HttpConfig = FAST) -> OpenAICompatBackend:
    return OpenAICompatBackend(get_backbone("smollm2"), config, StaticEndpoint(url), "EMPTY")


def test_schema_goes_as_response_format_and_sampling_is_sent(
    scripted_server: Any, step: Any, answer_schema: dict[str, Any]
) -> None:
    server = scripted_server([step()])
    request = ChatRequest.from_prompt("q", schema=answer_schema, sampling=Sampling(0.3, 0.9, 9, 4))
    (response,) = _backend(server.base_url).generate([request])
    assert response.ok and response.parsed == {"answer": "ok", "confidence": 1}
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (11, 7)
    body = server.bodies[0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == answer_schema
    assert (body["temperature"], body["top_p"], body["max_completion_tokens"], body["seed"]) == (
        0.3,
        0.9,
        9,
        4,
    )


def test_5xx_and_429_are_retried_with_backoff(scripted_server: Any, step: Any) -> None:
    server = scripted_server([step(status=503), step(status=429), step()])
    started = time.perf_counter()
    (response,) = _backend(server.base_url).generate([ChatRequest.from_prompt("q")])
    assert response.ok and server.calls == 3
    assert time.perf_counter() - started >= 0.025 + 0.05  # two backoffs (half is fixed)


def test_retries_are_bounded_then_an_error_record(scripted_server: Any, step: Any) -> None:
    server = scripted_server([step(status=500)])
    (response,) = _backend(server.base_url).generate([ChatRequest.from_prompt("q")])
    assert server.calls == 3
    assert response.error_kind == "server" and "attempt 3 of 3" in (response.error or "")


def test_client_errors_are_not_retried(scripted_server: Any, step: Any) -> None:
    server = scripted_server([step(status=400)])
    (response,) = _backend(server.base_url).generate([ChatRequest.from_prompt("q")])
    assert server.calls == 1 and response.error_kind == "request"


def test_timeout_is_retried_then_an_error_record_while_others_succeed(
    scripted_server: Any, step: Any
) -> None:
    server = scripted_server([step()], by_prompt={"slow": step(delay_s=2.0)})
    config = dataclasses.replace(FAST, timeout_s=0.3, max_attempts=2)
    started = time.perf_counter()
    slow, fast = _backend(server.base_url, config).generate(
        [ChatRequest.from_prompt("slow"), ChatRequest.from_prompt("fast")]
    )
    assert fast.ok
    assert slow.error_kind == "timeout" and "attempt 2 of 2" in (slow.error or "")
    assert sorted(b["messages"][-1]["content"] for b in server.bodies) == ["fast", "slow", "slow"]
    assert time.perf_counter() - started < 1.5  # two timeouts, not two full waits


def test_connection_refused_is_an_error_record() -> None:
    (response,) = _backend("http://127.0.0.1:9/v1").generate([ChatRequest.from_prompt("q")])
    assert response.error_kind == "connection"


def test_junk_and_empty_output_are_flagged_invalid(
    scripted_server: Any, step: Any, answer_schema: dict[str, Any]
) -> None:
    server = scripted_server([step(content="Sure! {"), step(content="  ")])
    junk, empty = _backend(server.base_url, dataclasses.replace(FAST, max_concurrency=1)).generate(
        [ChatRequest.from_prompt("a", schema=answer_schema), ChatRequest.from_prompt("b")]
    )
    assert junk.error_kind == "invalid_output" and "not JSON" in (junk.error or "")
    assert empty.error_kind == "invalid_output" and "empty output" in (empty.error or "")
    assert json.loads(json.dumps(junk.text)) == "Sure! {"


def test_openai_backbone_from_config_sends_key_model_and_extra_body(
    scripted_server: Any, step: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = scripted_server([step(content="plain text")])
    monkeypatch.setenv("TEST_LLM_KEY", "sk-test")
    entry = {
        "backend": "openai",
        "model": "served-model",
        "engine": {
            "base_url": server.base_url,
            "api_key_env": "TEST_LLM_KEY",
            "extra_body": {"top_k": 5},
        },
    }
    backbone = parse_backbones({"remote": entry})["remote"]
    with open_backend(backbone) as backend:
        (response,) = backend.generate([ChatRequest.from_prompt("q")])
    assert response.ok and response.text == "plain text" and response.parsed is None
    assert server.keys == ["sk-test"]
    assert server.bodies[0]["model"] == "served-model" and server.bodies[0]["top_k"] == 5


def test_a_gating_call_waiting_for_a_slot_goes_before_calls_that_came_first(
    scripted_server: Any, step: Any
) -> None:
    """With the one slot busy, three question calls and then a memory-build call wait: the
    memory call (`GATING_PRIORITY`) is sent next, the others after it in arrival order."""
    server = scripted_server([step()], by_prompt={"busy": step(delay_s=0.3)})
    config = dataclasses.replace(FAST, max_concurrency=1)
    asked = [ChatRequest.from_prompt(p) for p in ("busy", "a", "b")]
    memory = dataclasses.replace(ChatRequest.from_prompt("memory"), priority=GATING_PRIORITY)
    responses = _backend(server.base_url, config).generate([*asked, memory])
    assert all(r.ok for r in responses)
    assert [b["messages"][-1]["content"] for b in server.bodies] == ["busy", "memory", "a", "b"]
