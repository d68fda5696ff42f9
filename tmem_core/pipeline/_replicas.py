"""A backbone's engine replicas: named Ray actors, each owning a backend (the embedded
llama.cpp server, an in-process vLLM engine, an HTTP client or a simulated engine), created
and placed by the driver for the whole sweep, restarted by Ray when their engine dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence
from typing import Any, cast

import psutil
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from tmem_core import EngineError
from tmem_core.llm import BackboneConfig, ChatRequest, VLLMEngineConfig
from tmem_core.llm._backends import get_backend
from tmem_core.llm._client import START_ATTEMPTS, START_BACKOFF_S
from tmem_core.llm._serve import SERVE_BACKEND
from tmem_core.llm._shared import Answered, SharedEngine
from tmem_core.llm._tokens import counter_for
from tmem_core.pipeline._config_load import import_plugins

ENGINE_PREFIX = "tmem-llm-"
MAX_IN_FLIGHT = 256
CRASH_ANSWER_S = 2.0
"""How long a replica whose engine died keeps its process, so that the `engine_crash`
answers of the calls it held reach their routers."""


def replica_name(backbone: BackboneConfig, index: int) -> str:
    return f"{ENGINE_PREFIX}{backbone.name}-{index}"


HEAD_NODE_RESOURCE = "node:__internal_head__"
"""The resource Ray gives its head node only (Serve's `get_head_node_id` looks for it too)."""


class EngineReplica(SharedEngine):
    """The body of a replica actor: the sweep's plugins first (a backend may be one of
    theirs). An engine that died answers the calls it held with `engine_crash` errors (one of
    their requests may be what killed it: resent, it could take every replica down in turn),
    then ends the actor's process (its engine workers first) once those answers are out, so
    that Ray restarts the actor (`max_restarts`) with a new engine; a call that arrives
    meanwhile waits for the process to end, and its router resends it like any call of a
    replica that died. It starts only where the backbone's tokenizer resolves as on the
    driver (`EngineError` otherwise)."""

    def __init__(self, backbone: BackboneConfig, replica: int = 0,
                 plugins: tuple[str, ...] = (), start_attempts: int = START_ATTEMPTS,
                 start_backoff_s: float = START_BACKOFF_S) -> None:
        import_plugins(plugins)
        counter_for(backbone)
        super().__init__(backbone, replica, start_attempts, start_backoff_s)
        self.crashed = False

    async def generate(self, requests: Sequence[ChatRequest]) -> Answered:
        if self.crashed:  # ending: the router resends this call once the process is gone
            await asyncio.Event().wait()
        return await super().generate(requests)

    def engine_died(self, exc: Exception) -> None:
        print(f"[engine] {self.client.backbone.name} replica {self.replica}: {exc}; its calls "
              "in flight are engine_crash errors, never resent; ending the replica so that "
              "Ray restarts it", flush=True)
        if not self.crashed:
            self.crashed = True
            asyncio.get_running_loop().call_later(CRASH_ANSWER_S, end_process)

    def ping(self) -> int:
        """Answers once the actor is placed and constructed."""
        return os.getpid()


def end_process() -> None:
    """Kill this process's children (a vLLM engine core and its workers), then exit
    abnormally: Ray restarts an actor that died, not one that exited on purpose."""
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            child.kill()
    os._exit(1)


def engine_handles(backbone: BackboneConfig, gpus: float = 0.0, plugins: tuple[str, ...] = (),
                   start: tuple[int, float] = (START_ATTEMPTS, START_BACKOFF_S)) -> list[Any]:
    """The backbone's replica actors (`backbone.replicas` of them, each holding its engine's
    GPUs, or `gpus` if that is more), created on first use and found by name afterwards;
    each imports the sweep's `plugins`; `start`: attempts at starting an engine, and the
    first back-off between them. Ray restarts a replica that dies; its calls are not retried
    on it: the router resends them to another replica. The client of a Serve application
    runs on the head node, where Serve always runs an HTTP proxy."""
    options: dict[str, Any] = {}
    if backbone.backend == SERVE_BACKEND:
        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(head_node_id(),
                                                                        soft=False)
    elif env_vars := process_env(backbone.engine):  # the in-process engine's
        options["runtime_env"] = {"env_vars": env_vars}
    return [ray.remote(EngineReplica).options(
        name=replica_name(backbone, index), get_if_exists=True,
        max_concurrency=MAX_IN_FLIGHT, num_cpus=0, num_gpus=replica_gpus(backbone, gpus),
        max_restarts=-1, max_task_retries=0, **options).remote(backbone, index, plugins, *start)
        for index in range(max(1, backbone.replicas))]


def process_env(engine: Any) -> dict[str, str]:
    """The variables an engine config sets in its engine's process (a vLLM engine's
    `process_env`, another's `env_vars`)."""
    if isinstance(engine, VLLMEngineConfig):
        return engine.process_env()
    return dict(getattr(engine, "env_vars", None) or {})


def _nodes() -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], ray.nodes())  # type: ignore[no-untyped-call]


def head_node_id() -> str:
    alive = [n["NodeID"] for n in _nodes() if n["Alive"] and HEAD_NODE_RESOURCE in
             n["Resources"]]
    if not alive:
        raise EngineError("the Ray cluster has no live head node")
    return str(alive[0])


def replica_gpus(backbone: BackboneConfig, gpus: float = 0.0) -> float:
    """GPUs of one replica of an in-process GPU engine: its shards' (tensor x pipeline
    parallel, `gpus_per_shard` each; none for the CPU build), all in one actor on one node,
    or `gpus` (the sweep's `gpus_per_engine`) if that is more. None for other backends."""
    if not get_backend(backbone.backend).uses_gpus:
        return 0.0
    own = float(getattr(backbone.engine, "replica_gpus", 1.0))
    return max(gpus, own) if own > 0 else 0.0


def await_placement(replicas: dict[str, list[Any]], gpus: dict[str, float],
                    timeout_s: float) -> None:
    """Wait until every replica actor runs; after `timeout_s`, end with one
    `EngineError` naming the replicas that could not be placed and what they ask."""
    pings = {h.ping.remote(): (name, i) for name, hs in replicas.items()
             for i, h in enumerate(hs)}
    ready, waiting = ray.wait(list(pings), num_returns=len(pings), timeout=timeout_s)
    try:
        ray.get(ready)
    except ray.exceptions.RayActorError as exc:
        raise EngineError(f"an engine replica did not start: {exc}") from exc
    if not waiting:
        return
    missing: dict[str, list[int]] = {}
    for ref in waiting:
        name, index = pings[ref]
        missing.setdefault(name, []).append(index)
        ray.kill(replicas[name][index])  # nothing to close: it never ran
    asks = "; ".join(f"backbones.{name}: replicas {', '.join(map(str, sorted(ids)))} "
                     f"({gpus[name]:g} GPUs each, on one node)" for name, ids in missing.items())
    raise EngineError(f"engine replicas not placed after {timeout_s:g} s: {asks}; "
                            f"{node_gpus()} (resources.placement_timeout_s sets the wait)")


def node_gpus() -> str:
    """The cluster's GPUs now, per live node and free in all."""
    totals = [n["Resources"].get("GPU", 0) for n in _nodes() if n["Alive"]]
    free = ray.available_resources().get("GPU", 0)  # type: ignore[no-untyped-call]
    return (f"the cluster's {len(totals)} nodes have {', '.join(f'{t:g}' for t in totals)} "
            f"GPUs ({free:g} free)")


class StartWatch:
    """Ends the sweep when every replica of a backbone gave up starting its engine (their
    requests fail at once then, so error records come fast and nothing would be answered)."""

    def __init__(self, replicas: dict[str, list[Any]]) -> None:
        self.replicas = replicas

    def check(self) -> None:
        for handles in self.replicas.values():
            causes = [_start_failure(h) for h in handles]
            if all(causes):
                raise EngineError(str(causes[0]))


def _start_failure(handle: Any) -> str | None:
    """A replica's start failure; None while it answers none (Ray is restarting it)."""
    try:
        return cast(str | None, ray.get(handle.start_failure.remote(), timeout=120))
    except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
        return None
