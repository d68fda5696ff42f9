"""An LLM backend added by a module of its own (a sweep's `plugins`): one decorated function.

It answers every judge `CORRECT` and every other request with the first message line (`[id]
...`) of its prompt. Its engine table is the simulated engine's (a bundled type), so an engine
replica that unpickles the backbone does not import this module by itself: it must import
the sweep's plugins to find the backend.
"""

from __future__ import annotations

from collections.abc import Sequence

from tmem_core.llm import (
    BackboneConfig,
    Backend,
    ChatRequest,
    ChatResponse,
    SimEngineConfig,
    Usage,
    backend,
    output_response,
)

TOY_BACKEND = "toy_echo"


class EchoBackend:
    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return self.generate(requests)

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return [self._answer(r) for r in requests]

    def close(self) -> None:
        pass

    def _answer(self, request: ChatRequest) -> ChatResponse:
        verdict = request.schema is not None and "verdict" in request.schema.get("properties", {})
        prompt = request.messages[-1].content
        lines = [line for line in prompt.splitlines() if line.startswith("[")]
        text = '{"verdict": "CORRECT"}' if verdict else (lines or ["(nothing)"])[0]
        return output_response(text, Usage(len(prompt.split()), len(text.split())), 0.0,
                               request.schema)


@backend(TOY_BACKEND, engine=SimEngineConfig)
def _start_echo(_backbone: BackboneConfig, _engine: SimEngineConfig) -> Backend:
    return EchoBackend()
