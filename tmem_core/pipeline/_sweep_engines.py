"""A sweep's engines: every backbone's replica actors and Serve applications, started before
the stages and stopped however the sweep ends."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import ray

from tmem_core.llm import BackboneConfig
from tmem_core.llm._serve import SERVE_BACKEND
from tmem_core.pipeline._config import SweepConfig
from tmem_core.pipeline._engine import check_local_engines, close_local_engines
from tmem_core.pipeline._replicas import (
    StartWatch,
    await_placement,
    engine_handles,
    replica_gpus,
)
from tmem_core.pipeline._run import Run
from tmem_core.pipeline._serve import deploy as deploy_serve
from tmem_core.pipeline._serve import undeploy as undeploy_serve


@contextlib.contextmanager
def sweep_engines(runs: list[Run], config: SweepConfig, local: bool
                  ) -> Iterator[Callable[[], None]]:
    """The engines of the runs' backbones (in this process when `local`), held for the whole
    sweep; yields the check that raises once every engine of a backbone gave up starting."""
    replicas: dict[str, list[Any]] = {}  # the driver holds every replica for the whole sweep
    served: list[BackboneConfig] = []  # and every Ray Serve LLM application
    try:
        if local:
            yield check_local_engines
        else:
            start_engines(runs, config, replicas, served)
            yield StartWatch(replicas).check
    finally:
        close_engines(h for handles in replicas.values() for h in handles)
        close_local_engines()
        for backbone in served:
            undeploy_serve(backbone)


def start_engines(runs: list[Run], config: SweepConfig, replicas: dict[str, list[Any]],
                  served: list[BackboneConfig]) -> None:
    """Deploy the sweep's Serve applications and create every backbone's replica actors
    (noted in `served` and `replicas`, so that they are stopped however this ends), waiting
    until they are placed."""
    resources = config.resources
    backbones = {b.name: b for run in runs for b in run.backbones}
    for backbone in backbones.values():
        if backbone.backend == SERVE_BACKEND:
            served.append(backbone)  # deleted when the sweep ends, even if it never ran
            deploy_serve(backbone, resources.placement_timeout_s,
                         resources.engine_start_attempts)
        replicas[backbone.name] = engine_handles(
            backbone, resources.gpus_per_engine, config.plugins,
            (resources.engine_start_attempts, resources.engine_start_backoff_s))
    await_placement(replicas, {name: replica_gpus(b, resources.gpus_per_engine)
                               for name, b in backbones.items()},
                    resources.placement_timeout_s)


def close_engines(handles: Iterable[Any]) -> None:
    """Stop each engine's backend (its server process), then the actor."""
    for handle in handles:
        try:
            ray.get(handle.close.remote(), timeout=60)
        except Exception as exc:  # a dead engine has nothing left to stop
            print(f"engine close: {exc}")
        ray.kill(handle)
