"""Ray Serve LLM applications for the sweep's `serve` backbones: deployed by the driver
before the stages start, deleted when the sweep ends."""

from __future__ import annotations

import time
from typing import Any

from tmem_core import EngineError
from tmem_core.llm import BackboneConfig
from tmem_core.llm._serve import PREFIX_ROUTER, ServeLLMEngineConfig, app_name
from tmem_core.pipeline._replicas import node_gpus


def serve_options(backbone: BackboneConfig, start_attempts: int = 3) -> dict[str, Any]:
    """The backbone's Ray Serve LLM `LLMConfig` fields: model, autoscaling range, router,
    one placement group per replica (its shards packed on one node), vLLM's engine
    arguments (as the in-process `vllm` backend's) and how many replica starts fail before
    Serve gives the application up (`resources.engine_start_attempts`, as for the
    in-process engines)."""
    engine: ServeLLMEngineConfig = backbone.engine
    deployment: dict[str, Any] = {
        "autoscaling_config": {"min_replicas": engine.min_replicas,
                               "initial_replicas": engine.min_replicas,
                               "max_replicas": engine.max_replicas,
                               "target_ongoing_requests": engine.target_ongoing_requests},
        "max_ongoing_requests": max(engine.max_num_seqs, engine.target_ongoing_requests),
        "max_constructor_retry_count": start_attempts,
    }
    if engine.prefix_routing:
        deployment["request_router_config"] = {"request_router_class": PREFIX_ROUTER}
    shard = {"CPU": engine.cpus_per_replica / engine.shards}
    if engine.gpus_per_shard > 0:
        shard["GPU"] = engine.gpus_per_shard
    options: dict[str, Any] = {
        "model_loading_config": {"model_id": backbone.model,
                                 "model_source": engine.model_source(backbone)},
        "deployment_config": deployment,
        "placement_group_config": {"bundles": [shard] * engine.shards,
                                   "strategy": "STRICT_PACK"},
        "engine_kwargs": engine.engine_args(backbone),
    }
    options["runtime_env"] = {"env_vars": engine.process_env()}
    if engine.accelerator_type:
        options["accelerator_type"] = engine.accelerator_type
    return options


POLL_S = 2.0


def deploy(backbone: BackboneConfig, timeout_s: float, start_attempts: int) -> None:
    """Deploy (or update) the backbone's application and wait until it runs; one that
    failed (`start_attempts` replica starts failed), or is not running after `timeout_s`
    (replicas not placed, engines not started), raises `EngineError` saying what it
    waited for."""
    from ray import serve
    from ray.serve.llm import LLMConfig, build_openai_app

    engine: ServeLLMEngineConfig = backbone.engine
    serve.start(http_options={"host": "127.0.0.1", "port": engine.http_port})
    app = build_openai_app({
        "llm_configs": [LLMConfig(**serve_options(backbone, start_attempts))],
        "ingress_deployment_config": {"ray_actor_options": {"num_cpus": 0}},
    })
    name = app_name(backbone)
    print(f"serve: deploying {name} ({engine.min_replicas}-{engine.max_replicas} replicas)",
          flush=True)
    try:
        serve.run_many([serve.RunTarget(app, name=name, route_prefix=f"/{name}")],
                       wait_for_ingress_deployment_creation=False,
                       wait_for_applications_running=False)
        _wait_running(backbone, timeout_s)
    except EngineError:
        raise
    except Exception as exc:  # Serve reports a failed deployment as a bare RuntimeError
        raise EngineError(_did_not_start(backbone, str(exc))) from exc
    print(f"serve: {name} is running", flush=True)


def _wait_running(backbone: BackboneConfig, timeout_s: float) -> None:
    from ray import serve
    from ray.serve.schema import ApplicationStatus

    deadline = time.monotonic() + timeout_s
    while True:
        status = serve.status().applications.get(app_name(backbone))
        state = status.status if status is not None else None
        if state == ApplicationStatus.RUNNING:
            return
        if state == ApplicationStatus.DEPLOY_FAILED:
            raise EngineError(_did_not_start(backbone, _messages(status)))
        if time.monotonic() >= deadline:
            raise EngineError(_did_not_start(
                backbone, f"not running after {timeout_s:g} s (resources.placement_timeout_s)"
                          f"; {_placement(backbone)}; Serve says: "
                          f"{_messages(status) or 'nothing'}"))
        time.sleep(POLL_S)


def _did_not_start(backbone: BackboneConfig, why: str) -> str:
    return (f"backbones.{backbone.name}: its Ray Serve LLM application did not start: "
            f"{' '.join(why.split())[-2000:]}")


def _placement(backbone: BackboneConfig) -> str:
    """What one replica asks for, and where it may go."""
    engine: ServeLLMEngineConfig = backbone.engine
    group = serve_options(backbone)["placement_group_config"]
    return (f"each of its {engine.min_replicas} to {engine.max_replicas} replicas needs "
            f"{len(group['bundles'])} x {group['bundles'][0]} on one node; {node_gpus()}")


def _messages(status: Any) -> str:
    if status is None:
        return ""
    parts = [status.message, *(d.message for d in status.deployments.values())]
    return " ".join(p for p in parts if p)


def undeploy(backbone: BackboneConfig) -> None:
    """Delete the backbone's application (its replicas free their GPUs)."""
    from ray import serve

    serve.delete(app_name(backbone))
