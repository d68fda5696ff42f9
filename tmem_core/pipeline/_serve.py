"""Ray Serve LLM applications for the sweep's `serve` backbones: deployed by the driver
before the stages start, deleted when the sweep ends."""

from __future__ import annotations

from typing import Any

from tmem_core.llm import (
    PREFIX_ROUTER,
    BackboneConfig,
    EngineUnavailable,
    ServeLLMEngineConfig,
    app_name,
)


def serve_options(backbone: BackboneConfig) -> dict[str, Any]:
    """The backbone's Ray Serve LLM `LLMConfig` fields: model, autoscaling range, router,
    one placement group per replica (its shards packed on one node) and vLLM's engine
    arguments (as the in-process `vllm` backend's)."""
    engine: ServeLLMEngineConfig = backbone.engine
    deployment: dict[str, Any] = {
        "autoscaling_config": {"min_replicas": engine.min_replicas,
                               "initial_replicas": engine.min_replicas,
                               "max_replicas": engine.max_replicas,
                               "target_ongoing_requests": engine.target_ongoing_requests},
        "max_ongoing_requests": max(engine.max_num_seqs, engine.target_ongoing_requests),
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
    if engine.env_vars:
        options["runtime_env"] = {"env_vars": engine.env_vars}
    if engine.accelerator_type:
        options["accelerator_type"] = engine.accelerator_type
    return options


def deploy(backbone: BackboneConfig) -> None:
    """Deploy (or update) the backbone's application and wait until it answers."""
    from ray import serve
    from ray.serve.llm import LLMConfig, build_openai_app

    engine: ServeLLMEngineConfig = backbone.engine
    serve.start(http_options={"host": "127.0.0.1", "port": engine.http_port})
    app = build_openai_app({
        "llm_configs": [LLMConfig(**serve_options(backbone))],
        "ingress_deployment_config": {"ray_actor_options": {"num_cpus": 0}},
    })
    name = app_name(backbone)
    print(f"serve: deploying {name} ({engine.min_replicas}-{engine.max_replicas} replicas)",
          flush=True)
    try:
        serve.run(app, name=name, route_prefix=f"/{name}")  # returns once it is running
    except Exception as exc:  # Serve reports a failed deployment as a bare RuntimeError
        raise EngineUnavailable(f"backbones.{backbone.name}: its Ray Serve LLM application "
                                f"did not start: {str(exc).strip()[-2000:]}") from exc
    print(f"serve: {name} is running", flush=True)


def undeploy(backbone: BackboneConfig) -> None:
    """Delete the backbone's application (its replicas free their GPUs)."""
    from ray import serve

    serve.delete(app_name(backbone))
