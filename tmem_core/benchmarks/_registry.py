from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tmem_core._registry import Registry
from tmem_core.evaluation import Protocol
from tmem_core.schema import Gold, Message, Question


@dataclass(frozen=True)
class LoadRequest:
    """What a user asked to load: a source path, or generator parameters."""

    source: Path | None = None
    size: int = 2000
    seed: int = 0
    variant: str = "base"


@dataclass
class LoadedBenchmark:
    """An adapter's output, before it is turned into canonical tables."""

    messages: list[Message]
    questions: list[tuple[Question, Gold]]
    warnings: list[str] = field(default_factory=list)  # problems left in the data
    repairs: list[str] = field(default_factory=list)  # unambiguous fixes applied
    details: dict[str, object] = field(default_factory=dict)  # adapter facts for the manifest


Loader = Callable[[LoadRequest], LoadedBenchmark]


@dataclass(frozen=True)
class BenchmarkSpec:
    """A registered benchmark: how to load it and how its answers are scored."""

    name: str
    loader: Loader
    protocol: Protocol
    description: str
    needs_source: bool = True
    fixtures_only: bool = False  # adapter tested only on hand-made files in the native shape
    version: int = 1  # raised when the adapter prepares the same source differently


BENCHMARKS: Registry[BenchmarkSpec] = Registry("benchmark", tuple(
    f"tmem_core.benchmarks._{name}"
    for name in ("evermembench", "groupmembench", "locomo", "longmemeval", "synthetic")))
"""The bundled benchmarks, by the modules that register them."""


def benchmark(
    name: str, *, protocol: Protocol, description: str, needs_source: bool = True,
    fixtures_only: bool = False, version: int = 1,
) -> Callable[[Loader], Loader]:
    """Register a loader and its evaluation protocol under `name`: the one way to add a
    benchmark. Raise `version` when a change to the loader prepares the same source
    differently: a sweep's prepared copy is named by it and the source's content."""

    def register(loader: Loader) -> Loader:
        BENCHMARKS.add(name, BenchmarkSpec(name, loader, protocol, description, needs_source,
                                           fixtures_only, version))
        return loader

    return register


get_benchmark = BENCHMARKS.get
"""The benchmark registered as `name` (`key`: where a config named it)."""
benchmark_names = BENCHMARKS.names


def get_protocol(name: str) -> Protocol:
    """The evaluation protocol registered with benchmark `name`."""
    return get_benchmark(name).protocol
