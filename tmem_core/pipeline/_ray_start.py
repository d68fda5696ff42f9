"""Starting Ray: join the cluster RAY_ADDRESS names, or start a local one, with the
variables the workers need; what the Ray job that started this driver says of it."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ray

from tmem_core import ConfigError

LOCAL_RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
PROPAGATED_ENV = ("TMEM_CACHE_DIR", "HF_HUB_OFFLINE", "HF_HOME")
JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # set by Ray's job server for the entrypoint


def init_ray(num_cpus: int | None = None, env: Mapping[str, str] | None = None) -> None:
    """Join the cluster named by RAY_ADDRESS (with the token authentication settings of the
    environment, see cluster/env.sh), or start a local one on loopback; `env`: variables of
    every worker besides the driver's own that they need."""
    if ray.is_initialized():
        return
    for key, value in LOCAL_RAY_ENV.items():
        os.environ.setdefault(key, value)
    env_vars = worker_env(env or {})
    runtime_env = {"env_vars": env_vars} if env_vars else None
    address = cluster_address()
    if address:
        ray.init(address=address, log_to_driver=True, runtime_env=runtime_env)
    else:
        # address="local": a new cluster even when another one runs on this machine; it has
        # no job server, and token authentication is on if the environment turned it on
        # before Ray was imported (Ray reads it once)
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(address="local", num_cpus=num_cpus, object_store_memory=256 * 1024**2,
                 include_dashboard=False, log_to_driver=True, runtime_env=runtime_env)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the job log gets one progress line per batch
    # each map task would poll its process's memory from a thread of its own every second:
    # a stage actor runs hundreds of question tasks at once
    context.memory_usage_poll_interval_s = None
    context.issue_detectors_config.high_memory_detector_config.detection_time_interval_s = -1


def worker_env(needed: Mapping[str, str]) -> dict[str, str]:
    """The variables this driver adds to its workers' runtime env: `needed`, and the
    PROPAGATED_ENV the driver has (workers of an existing cluster do not inherit the driver's
    environment), less those the Ray job's own runtime env already sets (a submitted job's:
    `ray job submit --runtime-env`, a RayJob's `runtimeEnvYAML`). Ray refuses a driver whose
    runtime env names a variable the job's names too, even with the same value; a variable the
    job sets to another value than the driver needs is a `ConfigError`."""
    wanted = {**{k: os.environ[k] for k in PROPAGATED_ENV if k in os.environ}, **needed}
    job_env = job_runtime_env().get("env_vars") or {}
    clashes = [f"{k}={job_env[k]!r} (needed: {v!r})" for k, v in needed.items()
               if k in job_env and job_env[k] != v]
    if clashes:
        raise ConfigError("", f"the Ray job's runtime env sets {', '.join(clashes)}: leave "
                          f"{'these' if len(clashes) > 1 else 'it'} to the driver")
    return {k: v for k, v in wanted.items() if k not in job_env}


def job_runtime_env() -> dict[str, Any]:
    """The runtime env of the Ray job that started this driver (empty when none did)."""
    return dict(_job_config().get("runtime_env") or {})


def _job_config() -> dict[str, Any]:
    """The job config Ray's job server hands this driver (empty when none started it)."""
    return dict(json.loads(os.environ.get(JOB_CONFIG_ENV) or "{}"))


def cluster_address() -> str | None:
    """The GCS address ("host:port") of the cluster RAY_ADDRESS names; None when it names none.

    The job server's address (`http://...`, as cluster/env.sh sets it) stands for the head
    last started in the environment's RAY_TEMP_DIR (its `ray_current_cluster` file): Ray's
    own `address="auto"` reads /tmp/ray's, which names another head when this one was started
    in a folder of its own. RAY_ADDRESS is set to the result, which `ray.init` reads first."""
    address = os.environ.get("RAY_ADDRESS")
    if not address or not address.startswith("http"):
        return address or None
    current = Path(os.environ.get("RAY_TEMP_DIR") or "/tmp/ray") / "ray_current_cluster"
    try:
        gcs = current.read_text().strip()
    except OSError:
        raise ConfigError("RAY_ADDRESS", f"{address}: no Ray head was started in "
                                         f"{current.parent} (no {current.name} file); set "
                                         "RAY_TEMP_DIR to the head's --temp-dir, or RAY_ADDRESS "
                                         "to its GCS address (host:port)") from None
    os.environ["RAY_ADDRESS"] = gcs
    return gcs


def ray_job() -> str:
    """This driver's Ray job, with its submission id when `ray job submit` started it."""
    job = ray.get_runtime_context().get_job_id()
    submitted = _job_config().get("metadata") or {}
    submission = submitted.get("job_submission_id")
    return f"{submission} (driver job {job})" if submission else job
