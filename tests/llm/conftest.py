"""Fixtures of the LLM-layer tests: a scripted fake engine and one real embedded SmolLM2
server shared by the tests that generate for real (the scripted HTTP server is in the root
conftest)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from tmem_core.llm import (
    BackboneConfig,
    ChatRequest,
    ChatResponse,
    EmbeddedBackend,
    Usage,
    get_backbone,
    make_backend,
)
from tmem_core.llm._types import output_response

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "maxLength": 60},
        "confidence": {"type": "integer", "minimum": 0, "maximum": 10},
    },
    "required": ["answer", "confidence"],
    "additionalProperties": False,
}

Answer = Callable[[ChatRequest, int], str]


class FakeBackend:
    """An engine whose output text is `answer(request, call_number)`; it counts its calls."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.calls = 0
        self.sent: list[ChatRequest] = []

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return self.generate(requests)

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        responses = []
        for request in requests:
            self.calls += 1
            self.sent.append(request)
            text = self.answer(request, self.calls)
            responses.append(output_response(text, Usage(10, 5), 0.01, request.schema))
        return responses

    def close(self) -> None:
        return None


@pytest.fixture
def fake_backend() -> type[FakeBackend]:
    return FakeBackend


@pytest.fixture
def answer_schema() -> dict[str, Any]:
    return ANSWER_SCHEMA


def small_embedded(**engine: Any) -> BackboneConfig:
    """The smollm2 backbone with a smaller server (4 slots) and test overrides."""
    backbone = get_backbone("smollm2")
    settings = {"n_parallel": 4, "n_ctx": 8192, **engine}
    return dataclasses.replace(backbone, engine=dataclasses.replace(backbone.engine, **settings))


@pytest.fixture
def embedded_backbone() -> Callable[..., BackboneConfig]:
    return small_embedded


@pytest.fixture(scope="session")
def embedded() -> Iterator[EmbeddedBackend]:
    """One real SmolLM2 server for the tests that only read from it."""
    backend = make_backend(small_embedded())
    assert isinstance(backend, EmbeddedBackend)
    yield backend
    backend.close()
