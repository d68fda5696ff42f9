"""What T-MEM's LLM steps share: short local ids, list schemas, batched calls with usage."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tmem_core.llm import ChatRequest, ChatResponse, object_schema
from tmem_core.methods._context import LLM, render_message
from tmem_core.prompts import Prompt
from tmem_core.schema import Message


def chronological(message: Message) -> tuple[datetime, int]:
    """Sort key of messages in time order (ties broken by conversation order)."""
    return message.timestamp, message.seq


def local_ids(messages: Iterable[Message]) -> dict[str, str]:
    """Message id -> short prompt id ("m1", "m2", ...) in time order."""
    ordered = sorted(messages, key=chronological)
    return {m.msg_id: f"m{k}" for k, m in enumerate(ordered, 1)}


def message_line(message: Message, text: str | None = None) -> str:
    """A message as every T-MEM step shows it: `render_message`, its text replaced by `text`
    when given (the forest's compressed text)."""
    return render_message(message if text is None else dataclasses.replace(message, text=text))


def local_lines(messages: Sequence[Message], ids: Mapping[str, str]) -> str:
    """Messages as `render_message` shows them, under their local ids; a topic they all share
    is stated once above them instead of on every line."""
    topics = {m.topic for m in messages}
    shared = topics.pop() if len(topics) == 1 else None
    lines = [message_line(dataclasses.replace(m, msg_id=ids[m.msg_id],
                                              topic=None if shared else m.topic))
             for m in messages]
    return "\n".join([f"(topic: {shared})", *lines] if shared else lines)


def keyed_schema(key: str, entries: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """JSON schema of `{key: {local id: entry, ...}}` with every id required, in order.

    Grammar-constrained decoding then writes one entry per id and cannot skip one."""
    return object_schema({key: object_schema(entries)})


def one_of(values: Sequence[str]) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


def request(llm: LLM, messages: Sequence[Any], schema: dict[str, Any], max_tokens: int,
            stage: str, qid: str) -> ChatRequest:
    """A schema-constrained request with the backbone's sampling and room for `max_tokens`."""
    sampling = dataclasses.replace(llm.backbone.sampling, max_tokens=max_tokens)
    return ChatRequest(messages, sampling, schema, stage, qid)


@dataclass
class StepStats:
    """LLM usage of one step for one question."""

    calls: int = 0
    cached: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def generate(llm: LLM, requests: Sequence[ChatRequest]) -> tuple[list[ChatResponse], StepStats]:
    """All requests in one `generate` call, with their usage."""
    start = time.perf_counter()
    responses = llm.generate(requests) if requests else []
    stats = StepStats(calls=len(responses), wall_s=time.perf_counter() - start)
    for r in responses:
        stats.cached += r.cached
        stats.failed += not r.ok
        stats.prompt_tokens += r.usage.prompt_tokens
        stats.completion_tokens += r.usage.completion_tokens
    return responses, stats


def entries(response: ChatResponse, key: str) -> dict[str, Any] | None:
    """The parsed mapping under `key` (local id -> entry), or None when unusable."""
    if not response.ok or not isinstance(response.parsed, dict):
        return None
    value = response.parsed.get(key)
    return value if isinstance(value, dict) else None


def prompt_hashes(*prompts: Prompt) -> dict[str, str]:
    return {p.name: p.sha256 for p in prompts}
