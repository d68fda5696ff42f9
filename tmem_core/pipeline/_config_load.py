"""Reading a sweep file: each table typed (`tmem_core._typed.build_config`), then the names
looked up in the registries and the files it names checked; every problem is one `ConfigError`
naming the key, the bad value and the allowed values, before anything starts or is written."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tmem_core import ConfigError
from tmem_core._typed import build_config, read_config
from tmem_core.benchmarks import benchmark_names, get_benchmark
from tmem_core.llm import load_backbones
from tmem_core.methods import check_params, get_method, method_names, refuse_renamed
from tmem_core.pipeline._config import AXES, BenchmarkConfig, SweepConfig
from tmem_core.pipeline._paths import missing_source_hint, results_root
from tmem_core.prompts import judge_prompt


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


def load_sweep(path: Path, allowed: Allowed | None = None, sources: bool = True
               ) -> SweepConfig:
    return parse_sweep(read_config(path), allowed, default_name=path.stem, sources=sources)


def parse_sweep(raw: Mapping[str, Any], allowed: Allowed | None = None,
                default_name: str = "sweep", sources: bool = True) -> SweepConfig:
    """The sweep of a config mapping, every table typed and every name and file checked;
    `sources=False` leaves the benchmarks' data to `check_sources` (a check of the engines'
    fit needs none)."""
    import_plugins(_plugins(raw.get("plugins", [])))  # first: they add names to registries
    config = build_config(SweepConfig, {"name": default_name, **raw}, "")
    config = replace(config, results_dir=results_root(config.results_dir))
    allowed = allowed or registered()
    refuse_renamed(config.grid.methods, "grid.methods")
    _known("grid.methods", config.grid.methods, allowed.methods)
    backbones = list(_backbones(allowed, config.backbones_file))
    _known("grid.backbones", (*config.grid.backbones, *config.judges), backbones)
    check_construct_backbones(config, backbones)
    for index, bench in enumerate(config.benchmarks):
        _known(f"benchmarks[{index}].name", [bench.name], allowed.benchmarks)
    if sources:
        check_sources(config)
    check_params(config.methods, config.grid.methods)
    check_axes(config)
    for name, path in config.judge_prompts.items():
        _check_judge_prompt(name, path)
    _check_results_dir(Path(config.results_dir))
    return config


def check_construct_backbones(config: SweepConfig, backbones: Iterable[str]) -> None:
    """Each construct backbone is a known backbone, given to a method of the grid whose
    construction calls an LLM (`ConfigError` naming the key)."""
    for name, backbone in config.construct_backbones.items():
        key = f"construct_backbones.{name}"
        if name not in config.grid.methods:
            raise ConfigError(key, f"a method not in grid.methods "
                                   f"({', '.join(config.grid.methods)})")
        _known(key, [backbone], backbones)
        if name in method_names() and get_method(name).llm_free:
            raise ConfigError(key, f"method {name!r} calls no LLM in its memory or "
                                   f"construction: a construct backbone would change nothing")


def check_axes(config: SweepConfig) -> None:
    """Every method of a grid varying a test-time axis declares it, and its table does not
    set the parameter the axis sets (`ConfigError` naming the key)."""
    for axis in AXES:
        if not getattr(config.grid, axis):
            continue
        for name in config.grid.methods:
            if name not in method_names():
                continue
            declared = get_method(name).axes
            if axis not in declared:
                takers = sorted(m for m in method_names() if axis in get_method(m).axes)
                raise ConfigError(f"grid.{axis}", f"does not apply to method {name!r}, so it "
                                                  f"would only repeat its runs; it applies to "
                                                  f"{', '.join(takers)}")
            param = declared[axis]
            if param is not None and param in config.methods.get(name, {}):
                raise ConfigError(f"methods.{name}.{param}", f"set by grid.{axis}; leave it "
                                                             f"to the grid")


def import_plugins(modules: Iterable[str]) -> None:
    """Import the modules that register a sweep's own methods, benchmarks or backends."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError("plugins", f"cannot import {module!r}: {exc}") from None


def _plugins(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(m, str) for m in raw):
        raise ConfigError("plugins", "expected a list of module names, e.g. [\"my_methods\"]")
    return tuple(raw)


def _known(key: str, names: Iterable[str], allowed: Iterable[str]) -> None:
    known = sorted(allowed)
    for name in names:
        if name not in known:
            raise ConfigError(key, f"unknown value {name!r}; allowed: {', '.join(known)}")


def _backbones(allowed: Allowed, backbones_file: str | None) -> Iterable[str]:
    try:
        return allowed.backbones(backbones_file)
    except ConfigError as exc:  # in the backbones file: say which key of the sweep names it
        where = f"{backbones_file}: {exc.key}: " if exc.key else f"{backbones_file}: "
        raise ConfigError("backbones_file", where + exc.reason.removeprefix(
            f"{backbones_file}: ")) from None


def check_sources(config: SweepConfig) -> None:
    """Every benchmark's data is where the sweep says (`ConfigError` naming the key)."""
    for index, bench in enumerate(config.benchmarks):
        _check_source(bench, f"benchmarks[{index}]")


def _check_source(bench: BenchmarkConfig, where: str) -> None:
    if bench.prepared is not None:
        if not (Path(bench.prepared) / "manifest.json").is_file():
            raise ConfigError(f"{where}.prepared", f"not a folder written by jobs.prepare: "
                                                   f"{bench.prepared}")
    elif bench.source is not None:
        if not Path(bench.source).exists():
            raise ConfigError(f"{where}.source", f"no such file or folder {bench.source}"
                                                 + missing_source_hint())
    elif bench.name in benchmark_names() and get_benchmark(bench.name).needs_source:
        raise ConfigError(f"{where}.source", f"benchmark {bench.name!r} is read from its "
                                             f"native files: give source (or prepared)")


def _check_judge_prompt(name: str, path: str) -> None:
    """`{bundled judge prompt: the prompt that judges instead}`: a user's prompt file, or
    another bundled judge prompt (the project's paraphrase `judge/locomo@v1`, say)."""
    if not name.startswith("judge/"):
        raise ConfigError(f"judge_prompts.{name}", "names a bundled judge prompt, e.g. "
                                                   "judge/locomo")
    if not Path(path).is_file() and not path.startswith("judge/"):
        raise ConfigError(f"judge_prompts.{name}", f"no such prompt file {path!r} (or a "
                                                   f"bundled judge prompt, judge/<name>@v<N>)")
    try:
        judge_prompt(path)
    except ConfigError as exc:
        raise ConfigError(f"judge_prompts.{name}", exc.reason) from None


def _check_results_dir(path: Path) -> None:
    """The results folder exists or can be made: its nearest existing ancestor is a folder
    this process may write in (nothing is created now)."""
    existing = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        problem = "is not a folder" if not existing.is_dir() else "is not writable"
        raise ConfigError("results_dir", f"cannot create {path}: {existing} {problem}")
