"""Scripted stand-ins for the LLM in T-MEM tests, and a check of the fakes themselves.

A script maps each request to its parsed JSON output (a dict) or to an error message (a str).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tmem_core.llm import BackboneConfig, ChatRequest, ChatResponse, Usage, get_backbone
from tmem_core.schema import Message

Script = Callable[[ChatRequest], dict[str, Any] | str]
_LINE = re.compile(r"^\[(m\d+)\] (.*)$", re.M)
T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)


@dataclass
class ScriptedLLM:
    """An `LLM` whose every response comes from `script`; it records each `generate` batch."""

    script: Script
    backbone: BackboneConfig = field(default_factory=lambda: get_backbone("smollm2"))
    batches: list[list[ChatRequest]] = field(default_factory=list)

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        self.batches.append(list(requests))
        return [_response(self.script(r)) for r in requests]

    @property
    def requests(self) -> list[ChatRequest]:
        return [r for batch in self.batches for r in batch]


def _response(value: dict[str, Any] | str) -> ChatResponse:
    if isinstance(value, str):
        return ChatResponse(text="oops", usage=Usage(10, 3), error=f"invalid_output: {value}",
                            error_kind="invalid_output")
    return ChatResponse(text=json.dumps(value), parsed=value, usage=Usage(10, 5))


def asked_ids(request: ChatRequest) -> list[str]:
    """The local ids a request's schema asks an entry for, in order."""
    assert request.schema is not None
    (key,) = request.schema["properties"]
    return list(request.schema["properties"][key]["properties"])


def shown_lines(request: ChatRequest) -> dict[str, str]:
    """Local id -> the rest of its message line, for every message a request shows."""
    return dict(_LINE.findall(request.messages[-1].content))


def label_all(label: str) -> Script:
    return lambda r: {"labels": dict.fromkeys(asked_ids(r), label)}


def link_all(parent: str, relation: str) -> Script:
    return lambda r: {"links": {i: {"parent": parent, "relation": relation}
                                for i in asked_ids(r)}}


def by_stage(**scripts: Script) -> Script:
    """Dispatch on the request's stage ("tmem.select" -> `select`, ...)."""
    return lambda r: scripts[r.stage.removeprefix("tmem.")](r)


def message(k: int, text: str, topic: str | None = "A", phase: str | None = None,
            minutes: int | None = None, channel: str | None = "#eng") -> Message:
    """Message `k` of conversation "c", `minutes` (default k) after T0."""
    when = T0 + timedelta(minutes=k if minutes is None else minutes)
    return Message("c", f"c:{k}", k, when, text, author=f"User_{k % 3}", channel=channel,
                   topic=topic, phase=phase, session_id="c:s1")


def test_scripted_llm_answers_each_request_and_records_batches() -> None:
    llm = ScriptedLLM(lambda r: "bad" if "fail" in r.messages[-1].content else {"ok": 1})
    out = llm.generate([ChatRequest.from_prompt("fine"), ChatRequest.from_prompt("fail")])
    assert out[0].parsed == {"ok": 1} and out[1].error_kind == "invalid_output"
    assert len(llm.batches) == 1 and len(llm.requests) == 2
