"""The backend registry: one decorated start function per engine kind.

    @backend("mine", engine=MyEngineConfig)
    def start(backbone: BackboneConfig, engine: MyEngineConfig) -> Backend: ...

`engine` is the dataclass of the backbone's `[backbones.<name>.engine]` table (checked when
the backbones load); `uses_gpus`: its engine actors take the sweep's `gpus_per_engine`;
`in_process`: it computes in the process that holds it, so stage actors that call it need
real CPUs rather than a share of one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from tmem_core._registry import Registry

if TYPE_CHECKING:
    from tmem_core.llm._config import BackboneConfig
    from tmem_core.llm._types import Backend

E = TypeVar("E")
Start = Callable[["BackboneConfig", Any], "Backend"]


@dataclass(frozen=True)
class BackendSpec:
    name: str
    engine: type[Any]
    start: Start
    uses_gpus: bool = False
    in_process: bool = False


BACKENDS: Registry[BackendSpec] = Registry("backend", (
    "tmem_core.llm._sim", "tmem_core.llm._serve"))
"""The backends; the simulated engine's module registers it at the first lookup (the others
register as the package imports them)."""


def backend(name: str, *, engine: type[E], uses_gpus: bool = False, in_process: bool = False
            ) -> Callable[[Callable[[BackboneConfig, E], Backend]],
                          Callable[[BackboneConfig, E], Backend]]:
    """Register the start function of backend `name` and its engine config type."""

    def register(start: Callable[[BackboneConfig, E], Backend]
                 ) -> Callable[[BackboneConfig, E], Backend]:
        BACKENDS.add(name, BackendSpec(name, engine, start, uses_gpus, in_process))
        return start

    return register


get_backend = BACKENDS.get
"""The backend registered as `name` (`key`: where a config named it)."""
backend_names = BACKENDS.names
