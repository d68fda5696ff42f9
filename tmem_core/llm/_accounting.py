"""Per-call records (one row per LLM call) and their Arrow schema for the calls table."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from tmem_core.llm._config import BackboneConfig
from tmem_core.llm._types import ChatRequest, ChatResponse, Usage

CALLS_SCHEMA = pa.schema(
    [
        pa.field("backbone", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("stage", pa.string(), nullable=False),
        pa.field("qid", pa.string(), nullable=False),
        pa.field("request_hash", pa.string(), nullable=False),
        pa.field("prompt_tokens", pa.int64(), nullable=False),
        pa.field("completion_tokens", pa.int64(), nullable=False),
        pa.field("latency_s", pa.float64(), nullable=False),
        pa.field("cached", pa.bool_(), nullable=False),
        pa.field("cost_usd", pa.float64(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("error_kind", pa.string()),
        pa.field("finished_at", pa.float64()),  # Unix time the response came back
        pa.field("leaks", pa.list_(pa.string())),  # gold-derived strings found in the prompt
        pa.field("reused", pa.bool_()),  # a memory built earlier: its original call, not rerun
        pa.field("method_cost_usd", pa.float64()),  # priced as if run, cache hit or not
        pa.field("replica", pa.int64()),  # engine replica that answered; null: cache hit
        pa.field("reasoning_stripped", pa.bool_()),  # a stray reasoning block was cut off
    ]
)


@dataclass(frozen=True)
class CallRecord:
    """One LLM call. Cached and reused calls keep the original token counts and cost 0 USD
    now (`cost_usd`); `method_cost_usd` prices every call as if it ran."""

    backbone: str
    model: str
    stage: str
    qid: str
    request_hash: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    cost_usd: float
    error: str | None
    error_kind: str | None
    finished_at: float | None = None
    leaks: tuple[str, ...] = ()
    reused: bool = False
    method_cost_usd: float = 0.0
    replica: int | None = None
    reasoning_stripped: bool = False

    @classmethod
    def of(
        cls, backbone: BackboneConfig, request: ChatRequest, response: ChatResponse,
        replica: int | None = None, sent_at: float | None = None,
    ) -> CallRecord:
        """The record of one call; `sent_at`: when its batch was sent (`time.time()`), so
        that a call answered before the rest of its batch ends when it did, not with them."""
        finished_at = time.time() if sent_at is None else sent_at + response.latency_s
        return cls(
            backbone=backbone.name,
            model=backbone.model,
            stage=request.stage,
            qid=request.qid,
            request_hash=response.request_hash,
            prompt_tokens=response.usage.prompt_tokens,
            completion_tokens=response.usage.completion_tokens,
            latency_s=response.latency_s,
            cached=response.cached,
            cost_usd=response.cost_usd,
            error=response.error,
            error_kind=response.error_kind,
            finished_at=finished_at,
            method_cost_usd=backbone.prices.cost(response.usage),
            replica=None if response.cached else replica,
            reasoning_stripped=response.reasoning_stripped,
        )

    @classmethod
    def reused_call(cls, backbone: BackboneConfig, request: ChatRequest, usage: Usage,
                    hashed: str) -> CallRecord:
        """A call that built a memory this run reuses: its original tokens, no new spend;
        `hashed`: the request's `request_hash` (its identity, as the build's call had it)."""
        record = cls.of(backbone, request, ChatResponse(usage=usage, cached=True))
        return dataclasses.replace(record, reused=True, request_hash=hashed)


def records_to_table(records: Iterable[CallRecord]) -> pa.Table:
    return pa.Table.from_pylist([dataclasses.asdict(r) for r in records], schema=CALLS_SCHEMA)
