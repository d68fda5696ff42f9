"""A backbone served by Ray Serve LLM: vLLM's async engine in Serve deployment replicas, with
autoscaling and prefix-aware request routing done by Ray's serving layer.

The sweep's driver deploys the application (`tmem_core.pipeline` does: only it imports Ray)
and the stages reach it through Serve's HTTP proxy on their own node, with the
OpenAI-compatible client; this module only describes the deployment.
"""

from __future__ import annotations

from dataclasses import dataclass

from tmem_core import check_range
from tmem_core.llm._backends import backend
from tmem_core.llm._config import BackboneConfig, HttpConfig, _require_positive
from tmem_core.llm._http import OpenAICompatBackend, StaticEndpoint
from tmem_core.llm._types import Backend
from tmem_core.llm._vllm import VLLMEngineConfig

SERVE_BACKEND = "serve"

PREFIX_ROUTER = "ray.serve.llm.request_router:PrefixCacheAffinityRouter"
"""Serve LLM's router that sends prompts sharing a prefix to the replica that cached it."""


@dataclass(frozen=True)
class ServeLLMEngineConfig(VLLMEngineConfig, HttpConfig):
    """Ray Serve LLM replicas of one vLLM engine (its settings as for `vllm`, and the HTTP
    client's for reaching them).

    Replicas autoscale between `min_replicas` and `max_replicas` on the requests each has in
    flight (`target_ongoing_requests`); `prefix_routing` routes by shared prompt prefix
    (a conversation's steps reach the replica that holds them). One replica holds
    `tensor_parallel_size` x `pipeline_parallel_size` GPUs (`gpus_per_shard` each, none on
    the CPU build), packed on one node, plus `cpus_per_replica` CPUs. The HTTP proxy listens
    on 127.0.0.1 only; the client runs on the head node, where Serve always runs a proxy.
    `timeout_s` is the time one request may take once a replica runs it; the client waits as
    many times that as the requests it may have in flight fill the replicas' running slots
    (`request_timeout_s`)."""

    min_replicas: int = 1
    max_replicas: int = 1
    target_ongoing_requests: int = 32
    prefix_routing: bool = True
    cpus_per_replica: float = 1.0
    accelerator_type: str = ""  # e.g. "H100"; "" = any
    http_port: int = 8000
    max_concurrency: int = 256  # requests in flight from one caller to the proxy

    def __post_init__(self) -> None:
        VLLMEngineConfig.__post_init__(self)
        HttpConfig.__post_init__(self)
        _require_positive(self, "min_replicas", "max_replicas", "target_ongoing_requests",
                          "http_port")
        check_range("max_replicas (at least min_replicas)", self.max_replicas, self.min_replicas)
        check_range("cpus_per_replica", self.cpus_per_replica, 0)

    @property
    def fleet(self) -> int:
        """One endpoint: Serve routes among its own replicas behind it."""
        return 1

    @property
    def request_timeout_s(self) -> float:
        """`timeout_s` per wave of requests ahead: the client's `max_concurrency` in flight
        over the running slots of the fewest replicas Serve keeps (`min_replicas` x
        `max_num_seqs`) queue that many deep."""
        waves = -(-self.max_concurrency // (self.min_replicas * self.max_num_seqs))
        return self.timeout_s * waves


def app_name(backbone: BackboneConfig) -> str:
    """The Serve application (and its route prefix) of a backbone."""
    return f"tmem-{backbone.name}"


def serve_url(backbone: BackboneConfig, engine: ServeLLMEngineConfig) -> str:
    """The OpenAI base URL of the backbone's application on this node's proxy."""
    return f"http://127.0.0.1:{engine.http_port}/{app_name(backbone)}/v1"


@backend(SERVE_BACKEND, engine=ServeLLMEngineConfig)
def _start_serve(backbone: BackboneConfig, engine: ServeLLMEngineConfig) -> Backend:
    return OpenAICompatBackend(backbone, engine, StaticEndpoint(serve_url(backbone, engine)),
                               "EMPTY")
