from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tmem_core.evaluation import Protocol
from tmem_core.schema import DataError, Gold, Message, Question


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


_REGISTRY: dict[str, BenchmarkSpec] = {}


def benchmark(
    name: str, *, protocol: Protocol, description: str, needs_source: bool = True,
    fixtures_only: bool = False,
) -> Callable[[Loader], Loader]:
    """Register a loader and its evaluation protocol under `name`: the one way to add a
    benchmark."""

    def register(loader: Loader) -> Loader:
        if name in _REGISTRY:
            raise ValueError(f"benchmark {name!r} is already registered")
        _REGISTRY[name] = BenchmarkSpec(name, loader, protocol, description, needs_source,
                                        fixtures_only)
        return loader

    return register


def get_benchmark(name: str) -> BenchmarkSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise DataError(
            f"unknown benchmark {name!r}; known: {', '.join(sorted(_REGISTRY))}"
        ) from None


def benchmark_names() -> list[str]:
    return sorted(_REGISTRY)


def get_protocol(name: str) -> Protocol:
    """The evaluation protocol registered with benchmark `name`."""
    return get_benchmark(name).protocol
