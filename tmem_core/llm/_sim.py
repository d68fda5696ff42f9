"""A simulated engine (`sim`): deterministic answers after the delay of a continuous-batching
model (`_batch_model`), for capacity planning and for running the pipeline at cluster scale on
a CPU box. The backend sleeps on an asyncio timer until the model's next completion (no CPU
while it waits); the planner (`jobs.plan`) runs the same model without sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import random
import re
import time
from collections.abc import Sequence
from typing import Any

from tmem_core import EngineError
from tmem_core.llm._backends import backend
from tmem_core.llm._batch_model import BatchModel, PrefixCache, Seq, SimCounters, SimEngineConfig
from tmem_core.llm._config import BackboneConfig
from tmem_core.llm._request_cache import request_hash
from tmem_core.llm._tokens import count_chat_tokens, count_tokens
from tmem_core.llm._types import (
    Backend,
    ChatRequest,
    ChatResponse,
    Usage,
    _background_loop,
    before_stop,
    output_response,
    run_sync,
)

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,}")
_FALLBACK_WORDS = ("the", "team", "decided", "on", "after", "review", "no", "information")


class SimBackend:
    """Deterministic answers (valid JSON for schema requests) after the model's delay.

    Answers depend on the request and `seed` only. Usage counts the prompt and the answer
    with the backbone's tokenizer, as a real engine reports them; `counters` tells what the
    engine did. The scheduler runs on the process's background event loop."""

    def __init__(self, backbone: BackboneConfig, config: SimEngineConfig) -> None:
        self.backbone, self.config = backbone, config
        self._cache = PrefixCache(config.prefix_cache_blocks)
        self._model = BatchModel(config, time.monotonic())
        self._loop = _background_loop()
        self._wake = asyncio.Event()
        self._serving: asyncio.Future[None] | None = None
        self._cpu_at_start: float | None = None  # the process's CPU time at the first request

    @property
    def counters(self) -> SimCounters:
        """What the engine did; its CPU time leaves out the process's start (imports, the
        tokenizer), which is no part of serving."""
        start = self._cpu_at_start
        cpu_s = 0.0 if start is None else time.process_time() - start
        return dataclasses.replace(self._model.counters, cpu_s=cpu_s)

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        if self._cpu_at_start is None:
            self._cpu_at_start = time.process_time()
        poison = self.config.crash_on
        if poison and any(poison in m.content for r in requests for m in r.messages):
            raise EngineError(f"EngineDeadError: the sim engine crashed on {poison!r}", dead=True)
        answers = [self._answer(r) for r in requests]
        future = asyncio.run_coroutine_threadsafe(self._delay(answers), self._loop)
        return await asyncio.wrap_future(future)

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return run_sync(self.agenerate(requests))

    def close(self) -> None:
        if self._serving is not None:
            self._loop.call_soon_threadsafe(self._serving.cancel)

    def _answer(self, request: ChatRequest) -> tuple[ChatResponse, Seq]:
        text, value = reply(request, self.backbone, self.config)
        sampling = request.sampling or self.backbone.sampling
        completion = count_tokens(self.backbone, text)
        if request.schema is None:
            completion = min(completion, sampling.max_tokens)
        usage = Usage(count_chat_tokens(self.backbone, request.messages), max(1, completion))
        prompt = "\n".join(m.content for m in request.messages)
        cached = int(usage.prompt_tokens * self._cache.cached_share(prompt))
        # A schema's instance is valid by construction: checking it again cost a quarter of
        # a replica's CPU (jsonschema), which the engines of a sim cluster share with the
        # pipeline they are measuring.
        response = (output_response(text, usage, 0.0, None) if request.schema is None
                    else ChatResponse(text=text, parsed=value, usage=usage))
        return response, Seq(usage.prompt_tokens, usage.completion_tokens, cached,
                             request.priority)

    async def _delay(self, answers: list[tuple[ChatResponse, Seq]]) -> list[ChatResponse]:
        """On the scheduler's loop: each answer once the model has finished its sequence."""
        started = time.monotonic()
        if self._serving is None:
            self._serving = asyncio.ensure_future(self._serve())
        await asyncio.sleep(self.config.ttft_s)
        futures = []
        for _, seq in answers:
            seq.tag = asyncio.get_running_loop().create_future()
            self._model.submit(seq, time.monotonic())
            futures.append(seq.tag)
        self._wake.set()
        await asyncio.gather(*futures)
        return [dataclasses.replace(response, latency_s=(seq.finished_at or started) - started)
                for response, seq in answers]

    async def _serve(self) -> None:
        while True:
            for seq in self._model.advance(time.monotonic()):
                seq.tag.set_result(None)
            wake_at = self._model.next_event()
            self._wake.clear()
            timeout = None if wake_at is None else max(0.0, wake_at - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)


def reply(request: ChatRequest, backbone: BackboneConfig, config: SimEngineConfig
          ) -> tuple[str, Any]:
    """The simulated answer's text and value: a JSON instance of the schema, or words of the
    last message and None (the same at every `revision`)."""
    unrevised = dataclasses.replace(backbone, engine=dataclasses.replace(config, revision=""))
    rng = random.Random(f"{config.seed}:{request_hash(unrevised, request)}")
    words = _WORD.findall(request.messages[-1].content)[:4000] or list(_FALLBACK_WORDS)
    if request.schema is not None:
        value = schema_instance(request.schema, rng, words)
        return json.dumps(value), value
    sampling = request.sampling or backbone.sampling
    top = max(config.min_output_tokens, min(config.max_output_tokens, sampling.max_tokens))
    count = max(1, rng.randint(config.min_output_tokens, top) * 3 // 4)
    text = " ".join(rng.choice(words) for _ in range(count)).capitalize() + "."
    return before_stop(text, request.stop), None


def schema_instance(schema: dict[str, Any], rng: random.Random, words: Sequence[str]) -> Any:
    """A value valid against `schema` (the subset the project's and the external systems'
    prompts use: pydantic's `$defs` and `$ref` included)."""
    return _instance(schema, schema, rng, words)


def _instance(schema: dict[str, Any], root: dict[str, Any], rng: random.Random,
              words: Sequence[str]) -> Any:
    def inner(sub: dict[str, Any]) -> Any:
        return _instance(sub, root, rng, words)

    if "$ref" in schema:
        return inner(_resolve(schema["$ref"], root))
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return inner(rng.choice(schema[key]))
    kind = schema.get("type", "object" if "properties" in schema else "string")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        return {k: inner(v) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        low = schema.get("minItems", 0)
        high = max(low, min(schema.get("maxItems", low + 3), low + 3))
        return [inner(schema.get("items", {}))
                for _ in range(rng.randint(max(low, min(1, high)), high))]
    if kind in ("integer", "number"):
        value = rng.randint(int(schema.get("minimum", 0)), int(schema.get("maximum", 10)))
        return value if kind == "integer" else float(value)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _string(schema, rng, words)


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    """The sub-schema a local `$ref` ("#/$defs/Name") points at."""
    if not ref.startswith("#/"):
        raise ValueError(f"sim backend: only local $ref is supported, not {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return dict(node)


def _string(schema: dict[str, Any], rng: random.Random, words: Sequence[str]) -> str:
    low, high = schema.get("minLength", 0), schema.get("maxLength", 120)
    target = rng.randint(min(max(low, 1), high), max(min(high, 60), low, 1))
    text = ""
    while len(text) < target:
        text = f"{text} {rng.choice(words)}".strip()
    return text[:high].strip().ljust(low, "x")


@backend("sim", engine=SimEngineConfig)
def _start_sim(backbone: BackboneConfig, engine: SimEngineConfig) -> Backend:
    return SimBackend(backbone, engine)
