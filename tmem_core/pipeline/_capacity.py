"""Whether a sweep's engines fit the GPU cluster its config states (`resources.cluster_gpus`
in nodes of `resources.gpus_per_node`): checked by `jobs.plan` and by the driver before
anything starts, so that a plan that cannot be placed is refused with one line instead of
engine actors waiting forever for GPUs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from tmem_core import ConfigError
from tmem_core.llm import BackboneConfig, load_backbones
from tmem_core.llm._backends import get_backend
from tmem_core.llm._serve import SERVE_BACKEND
from tmem_core.pipeline._config import Resources, SweepConfig
from tmem_core.pipeline._replicas import replica_gpus


@dataclass(frozen=True)
class EngineAsk:
    """The engine replicas one backbone asks for: `replicas` of `gpus` GPUs, each on one
    node (a Serve backbone at its most, `max_replicas`)."""

    backbone: str
    replicas: int
    gpus: float

    def describe(self) -> str:
        return f"{self.backbone} {self.replicas} x {self.gpus:g}"


def sweep_backbones(config: SweepConfig, replicas: int = 0) -> list[BackboneConfig]:
    """The backbones a sweep runs engines for (its grid's, its judges', its construct
    backbones), each with its number of replicas resolved (`replicas` > 0 overrides the
    config's, as `jobs.plan --replicas` does)."""
    known = load_backbones(config.backbones_file)
    return [with_replicas(known[name], config.resources, replicas)
            for name in config.backbone_names]


def with_replicas(backbone: BackboneConfig, resources: Resources, replicas: int = 0
                  ) -> BackboneConfig:
    """The backbone with its number of engine replicas resolved: one per server of its fleet,
    else `replicas` if given, its own, or the sweep's."""
    count = backbone.fleet or replicas or backbone.replicas or resources.engine_replicas
    return dataclasses.replace(backbone, replicas=count)


def questions_in_flight(backbones: Iterable[BackboneConfig], resources: Resources,
                        questions: int) -> int:
    """Questions each stage pool keeps in flight: `resources.questions_in_flight`, else
    enough to hold every replica of every backbone (by name, replicas resolved) at its
    engine's slots, as a question has about one call in flight at a time; at most
    `questions`, at least one."""
    unique = {backbone.name: backbone for backbone in backbones}.values()
    wanted = resources.questions_in_flight or sum(
        _replica_count(backbone) * backbone.slots for backbone in unique)
    return max(1, min(wanted, questions))


def _replica_count(backbone: BackboneConfig) -> int:
    if backbone.backend == SERVE_BACKEND:
        return int(backbone.engine.max_replicas)
    return backbone.replicas or 1


def engine_asks(backbones: Iterable[BackboneConfig], resources: Resources) -> list[EngineAsk]:
    """What the GPU backbones' replicas ask for (CPU backends ask nothing)."""
    asks = []
    for backbone in backbones:
        engine = backbone.engine
        if backbone.backend == SERVE_BACKEND:
            asks.append(EngineAsk(backbone.name, engine.max_replicas, engine.replica_gpus))
        elif get_backend(backbone.backend).uses_gpus:
            asks.append(EngineAsk(backbone.name, backbone.replicas,
                                  replica_gpus(backbone, resources.gpus_per_engine)))
    return asks


def check_gpus(backbones: Iterable[BackboneConfig], resources: Resources) -> None:
    """Refuse, with one `ConfigError`, engines that do not fit the stated cluster."""
    if resources.cluster_gpus <= 0:
        return
    asks = engine_asks(backbones, resources)
    for ask in asks:
        if ask.gpus <= 0:
            raise ConfigError(f"backbones.{ask.backbone}", "a vLLM engine without a GPU on a "
                              f"sweep that states {resources.cluster_gpus} GPUs "
                              "(gpus_per_shard = 0 is for vLLM's CPU build)")
        if resources.gpus_per_node and ask.gpus > resources.gpus_per_node:
            raise ConfigError(f"backbones.{ask.backbone}", f"a replica needs {ask.gpus:g} GPUs "
                              "on one node (tensor x pipeline parallel), but "
                              f"resources.gpus_per_node is {resources.gpus_per_node}")
    placed = _pack([a.gpus for a in asks for _ in range(a.replicas)], resources)
    if placed is not None:
        wanted = sum(a.gpus * a.replicas for a in asks)
        nodes = (f" ({resources.cluster_gpus // resources.gpus_per_node} nodes of "
                 f"{resources.gpus_per_node})" if resources.gpus_per_node else "")
        raise ConfigError("resources.cluster_gpus", f"the sweep's engines need {wanted:g} "
                          f"GPUs (replicas x GPUs: {', '.join(a.describe() for a in asks)}), "
                          f"but the cluster has {resources.cluster_gpus}{nodes}, which hold "
                          f"{placed} of the {sum(a.replicas for a in asks)} replicas")


def _pack(replicas: list[float], resources: Resources) -> int | None:
    """None if the replicas fit the nodes (first fit, largest first), else how many did."""
    per_node = resources.gpus_per_node or resources.cluster_gpus
    free = [float(per_node)] * max(1, resources.cluster_gpus // per_node)
    for placed, gpus in enumerate(sorted(replicas, reverse=True)):
        node = next((i for i, left in enumerate(free) if left >= gpus - 1e-9), None)
        if node is None:
            return placed
        free[node] -= gpus
    return None


def check_sweep_gpus(config: SweepConfig, replicas: int = 0) -> None:
    """`check_gpus` for the backbones of a sweep."""
    check_gpus(sweep_backbones(config, replicas), config.resources)
