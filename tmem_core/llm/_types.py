"""Requests, responses and the backend protocol shared by every engine."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, Protocol, TypeVar

import jsonschema

Role = Literal["system", "user", "assistant"]

ErrorKind = Literal[
    "invalid_output",  # empty, not JSON, or not valid against the schema (retried by resampling)
    "timeout",
    "connection",
    "rate_limit",
    "server",  # 5xx or a malformed server answer
    "request",  # the request was refused (4xx other than 429)
    "engine",  # the engine is down or raised
    "engine_crash",  # in flight when the engine died: maybe what killed it, so never resent
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class Sampling:
    """Decoding settings of a request. `top_k` 0 keeps every token (vLLM's "disabled")."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    seed: int = 0
    top_k: int = 0

    def __post_init__(self) -> None:
        if self.top_k < 0:
            raise ValueError(f"top_k must be 0 (off) or positive, got {self.top_k}")


REASONING_END = "</think>"
"""Where a thinking block ends (Qwen3's template opens it in the prompt, so an answer in
thinking mode arrives as reasoning, this tag, then the answer)."""
THOUGHT_LABEL = "thought\n"
"""The bare channel label some Gemma 4 builds emit before an answer without thinking."""


def strip_reasoning(text: str) -> tuple[str, bool]:
    """Free text without a stray reasoning block or label, and whether one was there."""
    if REASONING_END in text:
        return text.rsplit(REASONING_END, 1)[1].lstrip(), True
    if text.startswith(THOUGHT_LABEL):
        return text[len(THOUGHT_LABEL):], True
    return text, False


def before_stop(text: str, stop: Sequence[str]) -> str:
    """`text` up to the first of the `stop` strings (exclusive), as an engine returns it."""
    ends = [i for s in stop if (i := text.find(s)) >= 0]
    return text[:min(ends)] if ends else text


def object_schema(properties: Mapping[str, Any]) -> dict[str, Any]:
    """JSON schema of an object with exactly `properties`, every one required, in order."""
    return {"type": "object", "properties": dict(properties), "required": list(properties),
            "additionalProperties": False}


def schema_validator(schema: dict[str, Any]) -> Any:
    """A validator for `schema`, which is checked against its meta-schema first
    (`check_schema`)."""
    check_schema(schema)
    return _validator(json.dumps(schema, sort_keys=True))


def check_schema(schema: dict[str, Any]) -> None:
    """Raise `jsonschema.SchemaError` if `schema` is not a valid JSON schema.

    Checking costs ~10 ms, and a method step's schemas differ per request only in their
    enum values and property names (the ids it may pick from), on which a schema's validity
    does not depend: the check is made once per skeleton (`schema_skeleton`), by one thread
    while others that meet the same skeleton wait for it, and a schema object checked lately
    is not walked again (a request's copies with another caller or sampling share it)."""
    if _CHECKED.get(id(schema)) is schema:
        return
    skeleton = json.dumps(schema_skeleton(schema), sort_keys=True)
    if skeleton not in _VALID_SKELETONS:
        with _SKELETON_LOCK:
            if skeleton not in _VALID_SKELETONS:
                _check_skeleton(skeleton)
                if len(_VALID_SKELETONS) >= _CHECKED_MAX:
                    _VALID_SKELETONS.clear()
                _VALID_SKELETONS.add(skeleton)
    with _CHECKED_LOCK:
        _CHECKED[id(schema)] = schema
        while len(_CHECKED) > _CHECKED_MAX:
            _CHECKED.popitem(last=False)


_CHECKED: OrderedDict[int, dict[str, Any]] = OrderedDict()
"""Schema objects checked lately, by identity (held, so that no other object takes the id)."""
_CHECKED_MAX = 1024
_CHECKED_LOCK = threading.Lock()
_VALID_SKELETONS: set[str] = set()
_SKELETON_LOCK = threading.Lock()


def schema_skeleton(node: Any) -> Any:
    """`node` with what no meta-schema constrains beyond its type made uniform: property
    names numbered, a `required` list of distinct names as many numbered names, an `enum`
    of distinct values a one-value enum (so a schema and its skeleton are valid together)."""
    if isinstance(node, list):
        return [schema_skeleton(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {f"p{i}": schema_skeleton(v) for i, v in enumerate(value.values())}
        elif key == "required" and _distinct_strings(value):
            out[key] = [f"p{i}" for i in range(len(value))]
        elif key == "enum" and _distinct_strings(value) and value:
            out[key] = ["e"]
        else:
            out[key] = schema_skeleton(value)
    return out


def _distinct_strings(value: Any) -> bool:
    return (isinstance(value, list) and all(isinstance(v, str) for v in value)
            and len(set(value)) == len(value))


def _check_skeleton(skeleton_json: str) -> None:
    skeleton = json.loads(skeleton_json)
    jsonschema.validators.validator_for(skeleton).check_schema(skeleton)


@lru_cache(maxsize=1024)
def _validator(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    return jsonschema.validators.validator_for(schema)(schema)


GATING_PRIORITY = -1
"""The priority of a call that other work waits for (a conversation's memory build)."""


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion. `sampling=None` takes the backbone's default sampling; `stage`,
    `qid` and `conv_id` say who asked (the conversation routes it to an engine replica);
    `priority`: lower goes first where requests wait (for a slot in the HTTP and embedded
    clients, in the queue of vLLM and the sim with their default "priority" scheduling;
    not part of the request's hash), `GATING_PRIORITY` for a call that other questions' calls
    wait for. The pipeline adds each question's place among the sweep's questions.

    `stop`: strings at which generation ends, each sent to the engine (the text returned
    ends before the stop string, as OpenAI-compatible servers return it). A request whose
    last message is the assistant's is a continuation: the engine extends that message
    (its text is the start of the reply, a prefix the engine's cache holds) instead of
    opening a new turn; the response's text is only what the engine added."""

    messages: Sequence[ChatMessage]
    sampling: Sampling | None = None
    schema: dict[str, Any] | None = None
    stage: str = ""
    qid: str = ""
    conv_id: str = ""
    priority: int = 0
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "stop", tuple(self.stop))
        if not self.messages:
            raise ValueError("a chat request needs at least one message")
        if any(not s for s in self.stop):
            raise ValueError("a stop string must not be empty")
        if self.continues and self.schema is not None:
            raise ValueError("a continuation of the assistant's message is free text: no schema")
        if self.schema is not None:
            check_schema(self.schema)

    @property
    def continues(self) -> bool:
        """The request extends the assistant's last message instead of opening a turn."""
        return self.messages[-1].role == "assistant"

    @classmethod
    def from_prompt(
        cls,
        prompt: str,
        *,
        system: str | None = None,
        sampling: Sampling | None = None,
        schema: dict[str, Any] | None = None,
        stage: str = "",
        qid: str = "",
    ) -> ChatRequest:
        head = [ChatMessage("system", system)] if system else []
        return cls((*head, ChatMessage("user", prompt)), sampling, schema, stage, qid)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True)
class ChatResponse:
    """The outcome of one request: never raised, an `error` is set instead.

    `usage` counts every attempt the request took; on a cache hit it is the usage of the
    original call while `cost_usd` is 0 and `cached` is true.
    """

    text: str = ""
    parsed: Any = None
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    cached: bool = False
    error: str | None = None
    error_kind: ErrorKind | None = None
    cost_usd: float = 0.0
    request_hash: str = ""
    reasoning_stripped: bool = False  # a stray reasoning block or label was cut off

    @property
    def ok(self) -> bool:
        return self.error is None


def error_response(kind: ErrorKind, message: str) -> ChatResponse:
    return ChatResponse(error=f"{kind}: {message}", error_kind=kind)


def output_response(
    text: str, usage: Usage, latency_s: float, schema: dict[str, Any] | None
) -> ChatResponse:
    """Build a response from raw model text, checking it against the schema if there is one
    (free text loses a stray reasoning block or label first: the answer is what follows)."""
    parsed: Any = None
    problem: str | None = None
    stripped = False
    if schema is None:
        text, stripped = strip_reasoning(text)
    if not text.strip():
        problem = "empty output"
    elif schema is not None:
        parsed, problem = _parse_json(text, schema)
    if problem is None:
        return ChatResponse(text=text, parsed=parsed, usage=usage, latency_s=latency_s,
                            reasoning_stripped=stripped)
    return ChatResponse(
        text=text,
        usage=usage,
        latency_s=latency_s,
        error=f"invalid_output: {problem}; output {text[:200]!r}",
        error_kind="invalid_output",
        reasoning_stripped=stripped,
    )


def _parse_json(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at char {exc.pos})"
    error = jsonschema.exceptions.best_match(schema_validator(schema).iter_errors(value))
    if error is not None:
        return None, f"violates the schema at {error.json_path}: {error.message}"
    return value, None


class Backend(Protocol):
    """An engine that answers batches of chat requests; per-request failures are records."""

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]: ...

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]: ...

    def close(self) -> None: ...


_LOOP_LOCK = threading.Lock()
_loop: tuple[int, asyncio.AbstractEventLoop] | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    """This process's event loop for synchronous callers, running in a daemon thread."""
    global _loop
    with _LOOP_LOCK:
        if _loop is None or _loop[0] != os.getpid():  # none yet, or inherited through fork
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="tmem-llm-loop", daemon=True).start()
            _loop = (os.getpid(), loop)
        return _loop[1]


def run_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine from synchronous code (not from inside a running event loop).

    Every synchronous caller of the process shares one long-lived loop, so HTTP clients and
    connections are reused across calls, and calls from several threads run concurrently.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run_coroutine_threadsafe(coro, _background_loop()).result()
    coro.close()
    raise RuntimeError("generate() called inside a running event loop; await agenerate() instead")
