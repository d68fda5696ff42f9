"""Sweep configuration: one TOML or YAML file expands into a grid of runs.

Every error names the key, the bad value and the allowed values, before anything starts.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import json
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from tmem_core import _typed
from tmem_core.benchmarks import benchmark_names
from tmem_core.llm import load_backbones
from tmem_core.methods import get_method, method_names
from tmem_core.prompts import PromptError, judge_prompt, load_prompt


class ConfigError(ValueError):
    """A sweep configuration problem, located by its key."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"config key {key!r}: {message}" if key else message)


@dataclass(frozen=True)
class BenchmarkConfig:
    name: str
    source: str | None = None  # native file/folder, prepared on the fly
    prepared: str | None = None  # a folder written by jobs.prepare
    size: int = 2000  # synthetic only
    seed: int = 0
    variant: str = "base"
    limit: int | None = None  # first N questions (by qid) per benchmark
    categories: tuple[str, ...] = ()  # keep only these categories (empty: all)


@dataclass(frozen=True)
class Resources:
    """Actors and resources of the stages. By default the stages are fused into one actor
    pool of max(retrieve_actors, llm_actors) actors of `cpus_per_actor` CPUs each; with
    `fuse_stages = false` each stage has its own pool (retrieval `retrieve_actors` actors of
    `cpus_per_actor` CPUs, the LLM stages `llm_actors` actors of 0.1 CPU). Every backbone
    runs `engine_replicas` engine replicas (of `gpus_per_engine` GPUs each, for GPU backends)
    unless its own `replicas` says otherwise."""

    fuse_stages: bool = True
    retrieve_actors: int = 1
    llm_actors: int = 1
    batch_size: int = 4
    cpus_per_actor: float = 0.5  # retrieve actors (and vLLM stage actors); others take 0.1
    gpus_per_engine: float = 0.0
    engine_replicas: int = 1

    def __post_init__(self) -> None:
        if self.engine_replicas < 1:
            raise ConfigError("resources.engine_replicas",
                              f"must be 1 or more, got {self.engine_replicas!r}")
    max_task_retries: int = 2


@dataclass(frozen=True)
class RunSpec:
    """One run of the grid: benchmark x method (+params) x backbone x judges x k x budget."""

    sweep: str
    benchmark: BenchmarkConfig
    method: str
    params: Mapping[str, Any]
    backbone: str
    judges: tuple[str, ...]
    top_k: int
    budget: int
    judge_repeats: int = 1
    judge_prompts: Mapping[str, str] = field(default_factory=dict)  # bundled name -> file
    plugins: tuple[str, ...] = ()  # modules that register methods or benchmarks

    @cached_property
    def run_id(self) -> str:
        digest = hashlib.sha256(json.dumps(self.identity(), sort_keys=True).encode()).hexdigest()
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{self.benchmark.name}_{self.method}_"
                                                   f"{self.backbone}_k{self.top_k}_b{self.budget}")
        return f"{slug}_{digest[:8]}"

    def identity(self) -> dict[str, Any]:
        """Everything that changes a run's results (and so its id): a method revised since
        its first definition adds its version, a judge prompt file its content's hash."""
        return {"benchmark": asdict(self.benchmark), "method": self.method,
                **method_version(self.method),
                "params": dict(self.params), "backbone": self.backbone,
                "judges": list(self.judges), "top_k": self.top_k, "budget": self.budget,
                "judge_repeats": self.judge_repeats,
                "judge_prompts": {name: prompt_file_identity(path)
                                  for name, path in self.judge_prompts.items()}}


def method_version(name: str) -> dict[str, int]:
    """`{"method_version": v}` for a method revised since its first definition (v >= 2);
    nothing for one never revised, so the ids of its runs stay what they were."""
    version = get_method(name).version if name in method_names() else 1
    return {"method_version": version} if version > 1 else {}


def prompt_file_identity(path: str) -> dict[str, str]:
    """A user prompt file as a run's identity holds it: its path and its content's hash."""
    return {"file": path, "sha256": load_prompt(path).sha256}


@dataclass(frozen=True)
class SweepConfig:
    name: str
    benchmarks: tuple[BenchmarkConfig, ...]
    methods: tuple[str, ...]
    backbones: tuple[str, ...]
    judges: tuple[str, ...]
    top_k: tuple[int, ...] = (36,)
    budgets: tuple[int, ...] = (8192,)
    judge_repeats: int = 1
    method_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    resources: Resources = field(default_factory=Resources)
    results_dir: str = "results"
    backbones_file: str | None = None
    judge_prompts: Mapping[str, str] = field(default_factory=dict)
    plugins: tuple[str, ...] = ()

    def runs(self) -> list[RunSpec]:
        return [
            RunSpec(self.name, bench, method, dict(self.method_params.get(method, {})),
                    backbone, self.judges, k, budget, self.judge_repeats,
                    dict(self.judge_prompts), self.plugins)
            for bench, method, backbone, k, budget in itertools.product(
                self.benchmarks, self.methods, self.backbones, self.top_k, self.budgets)
        ]


_TOP_KEYS = {"name", "benchmarks", "grid", "methods", "resources", "results_dir",
             "backbones_file", "judge_prompts", "plugins"}
_GRID_KEYS = {"methods", "backbones", "judges", "top_k", "budgets", "judge_repeats"}


@dataclass(frozen=True)
class Allowed:
    """The names a config may use, from the registries."""

    benchmarks: Iterable[str]
    methods: Iterable[str]
    backbones: Callable[[str | None], Iterable[str]]  # given the backbones_file


def registered() -> Allowed:
    """The names the registries know: benchmarks, methods and backbones."""
    return Allowed(benchmarks=benchmark_names(), methods=method_names(),
                   backbones=lambda path: load_backbones(path).keys())


def load_sweep(path: Path, allowed: Allowed | None = None) -> SweepConfig:
    raw = _read(path)
    return parse_sweep(raw, allowed, default_name=path.stem)  # plugins register first


def parse_sweep(raw: Mapping[str, Any], allowed: Allowed | None = None,
                default_name: str = "sweep") -> SweepConfig:
    _no_unknown("", raw, _TOP_KEYS)
    plugins = _plugins(raw.get("plugins", []))  # first: they add names to the registries
    allowed = allowed or registered()
    grid = _mapping(raw.get("grid", {}), "grid")
    _no_unknown("grid.", grid, _GRID_KEYS)
    backbones_file = raw.get("backbones_file")
    known_backbones = sorted(allowed.backbones(backbones_file))
    methods = _names(grid, "methods", sorted(allowed.methods), required=True)
    backbones = _names(grid, "backbones", known_backbones, required=True)
    judges = _names(grid, "judges", known_backbones) or backbones[:1]
    method_params = _mapping(raw.get("methods", {}), "methods")
    for name in method_params:
        if name not in methods:
            raise ConfigError(f"methods.{name}", f"parameters for a method not in grid.methods "
                                                 f"({', '.join(methods)})")
    for name in methods:
        _method_params(name, _mapping(method_params.get(name, {}), f"methods.{name}"))
    return SweepConfig(
        name=str(raw.get("name", default_name)),
        benchmarks=tuple(_benchmark(b, i, sorted(allowed.benchmarks))
                         for i, b in enumerate(_list(raw.get("benchmarks"), "benchmarks"))),
        methods=methods, backbones=backbones, judges=judges,
        top_k=_ints(grid, "top_k", (36,)), budgets=_ints(grid, "budgets", (8192,)),
        judge_repeats=_ints(grid, "judge_repeats", (1,), scalar=True)[0],
        method_params=method_params,
        resources=_dataclass(Resources, _mapping(raw.get("resources", {}), "resources"),
                             "resources"),
        results_dir=str(raw.get("results_dir", "results")),
        backbones_file=backbones_file,
        judge_prompts=_judge_prompts(raw.get("judge_prompts", {})),
        plugins=plugins,
    )


def import_plugins(modules: Iterable[str]) -> None:
    """Import the modules that register a sweep's own methods or benchmarks."""
    for module in modules:
        importlib.import_module(module)


def _plugins(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(m, str) for m in raw):
        raise ConfigError("plugins", "expected a list of module names, e.g. [\"my_methods\"]")
    for module in raw:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError("plugins", f"cannot import {module!r}: {exc}") from None
    return tuple(raw)


def _method_params(name: str, params: Mapping[str, Any]) -> None:
    """The method's parameters, checked by its registered config dataclass."""
    if name not in method_names():
        return  # a name the caller allowed without registering it (tests of the grid)
    try:
        get_method(name).parse(params)
    except _typed.ConfigError as exc:
        key, _, message = str(exc).partition(": ")  # "methods.<name>.<key>: <problem>"
        raise ConfigError(key, message) from None


def _judge_prompts(raw: Any) -> dict[str, str]:
    """`{bundled judge prompt: user prompt file}`, e.g. an official judge prompt."""
    overrides = _mapping(raw, "judge_prompts")
    for name, path in overrides.items():
        if not str(name).startswith("judge/"):
            raise ConfigError(f"judge_prompts.{name}", "names a bundled judge prompt, e.g. "
                                                       "judge/locomo")
        if not Path(str(path)).is_file():
            raise ConfigError(f"judge_prompts.{name}", f"no such prompt file {path!r}")
        try:
            judge_prompt(str(path))
        except PromptError as exc:
            raise ConfigError(f"judge_prompts.{name}", str(exc)) from None
    return {str(k): str(v) for k, v in overrides.items()}


def _read(path: Path) -> Mapping[str, Any]:
    if not path.exists():
        raise ConfigError("", f"no such file {path}")
    text = path.read_text()
    try:
        data = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ConfigError("", f"cannot parse {path}: {exc}") from None
    return _mapping(data, "")


def _benchmark(raw: Any, index: int, known: list[str]) -> BenchmarkConfig:
    where = f"benchmarks[{index}]"
    data = dict(_mapping(raw, where))
    if data.get("name") not in known:
        raise ConfigError(f"{where}.name", f"unknown benchmark {data.get('name')!r}; allowed: "
                                           f"{', '.join(known)}")
    if "categories" in data:
        data["categories"] = tuple(_list(data["categories"], f"{where}.categories"))
    config: BenchmarkConfig = _dataclass(BenchmarkConfig, data, where)
    return config


def _dataclass(cls: Any, data: Mapping[str, Any], where: str) -> Any:
    names = {f.name: f for f in fields(cls)}
    _no_unknown(f"{where}.", data, set(names))
    for key, value in data.items():
        expected = names[key].type
        if str(expected) == "bool" and not isinstance(value, bool):
            raise ConfigError(f"{where}.{key}", f"expected true or false, got {value!r}")
        if "int" in str(expected) and not isinstance(value, int | float | type(None)):
            raise ConfigError(f"{where}.{key}", f"expected a number, got {value!r}")
        if isinstance(value, int | float) and value < 0:
            raise ConfigError(f"{where}.{key}", f"must not be negative, got {value!r}")
    return cls(**data)


def _no_unknown(prefix: str, data: Mapping[str, Any], allowed: set[str]) -> None:
    for key in data:
        if key not in allowed:
            raise ConfigError(f"{prefix}{key}", f"unknown key; allowed: "
                                                f"{', '.join(sorted(allowed))}")


def _mapping(value: Any, key: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"expected a table/mapping, got {type(value).__name__}")
    return dict(value)


def _list(value: Any, key: str) -> list[Any]:
    if value is None:
        raise ConfigError(key, "missing")
    if not isinstance(value, list) or not value:
        raise ConfigError(key, "expected a non-empty list")
    return value


def _names(grid: Mapping[str, Any], key: str, known: list[str], required: bool = False
           ) -> tuple[str, ...]:
    if key not in grid:
        if required:
            raise ConfigError(f"grid.{key}", f"missing; allowed values: {', '.join(known)}")
        return ()
    values = grid[key] if isinstance(grid[key], list) else [grid[key]]
    for value in values:
        if value not in known:
            raise ConfigError(f"grid.{key}", f"unknown value {value!r}; allowed: "
                                             f"{', '.join(known)}")
    return tuple(values)


def _ints(grid: Mapping[str, Any], key: str, default: tuple[int, ...], scalar: bool = False
          ) -> tuple[int, ...]:
    if key not in grid:
        return default
    values = [grid[key]] if scalar or not isinstance(grid[key], list) else grid[key]
    for value in values:
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"grid.{key}", f"expected positive integers, got {value!r}")
    return tuple(values)
