"""The tests' one Ray head (started with the cluster/ scripts, token authentication on), shared
by every test of a session that runs a sweep on Ray, and helpers to run sweeps on it."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tmem_core.pipeline import STATUS_ENV

ROOT = Path(__file__).resolve().parents[1]


PORT_NAMES = ("RAY_DASHBOARD_PORT", "RAY_GCS_PORT", "RAY_AGENT_PORT")


def free_ports() -> dict[str, str]:
    """Ports for one test head that nothing on this machine listens on now (so test runs
    side by side, and a head left over by another run, get in nobody's way)."""
    sockets = [socket.create_server(("127.0.0.1", 0)) for _ in PORT_NAMES]
    try:
        return {name: str(s.getsockname()[1]) for name, s in zip(PORT_NAMES, sockets,
                                                                 strict=True)}
    finally:
        for s in sockets:
            s.close()


# kept in the environment: the sweeps' drivers (child processes) name the same head; each
# pytest-xdist worker (PYTEST_XDIST_WORKER, inherited by its drivers) has a head of its own
PORTS_ENV = "TMEM_TEST_RAY_PORTS" + os.environ.get("PYTEST_XDIST_WORKER", "")
os.environ.setdefault(PORTS_ENV, ",".join(free_ports().values()))
PORTS = dict(zip(PORT_NAMES, os.environ[PORTS_ENV].split(","), strict=True))
TOKEN_PATH = Path(tempfile.gettempdir()) / f"tmem-eval-test-{os.getpid()}" / "token"
"""The test clusters' token file (start-local.sh creates it)."""


def cluster_env(ports: dict[str, str]) -> dict[str, str]:
    """The environment of cluster/start-local.sh and stop-local.sh for a test cluster, in a
    folder of its own (a job's entrypoint joins the head that last started in its folder)."""
    env = {**os.environ, **ports, "PY": sys.executable, "RAY_AUTH_TOKEN_PATH": str(TOKEN_PATH),
           "RAY_TEMP_DIR": f"/tmp/ray-{ports['RAY_GCS_PORT']}"}
    env.pop("RAY_ADDRESS", None)
    return env


@contextlib.contextmanager
def local_head(ports: dict[str, str], **env: str) -> Iterator[str]:
    """A head started by cluster/start-local.sh on `ports` (its job server's address), stopped
    by stop-local.sh on leaving."""
    environment = {**cluster_env(ports), **env}
    try:
        subprocess.run([str(ROOT / "cluster" / "start-local.sh")], env=environment, check=True,
                       timeout=180)
        yield f"http://127.0.0.1:{ports['RAY_DASHBOARD_PORT']}"
    finally:  # a start that timed out may have left a head behind
        subprocess.run([str(ROOT / "cluster" / "stop-local.sh")], env=environment, timeout=120,
                       check=False)


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    with local_head(PORTS) as address:
        yield address


def sweep_config(tmp: Path, name: str, *, methods: str = '["bm25"]', limit: int = 3,
                 backbones: str = '["smollm2"]', extra: str = "", fused: bool = True) -> Path:
    """A small sweep on the synthetic benchmark, results under `tmp/results`; `fused=False`
    gives each stage its own actor pool."""
    path = tmp / f"{name}.toml"
    path.write_text(textwrap.dedent(f"""\
        name = "{name}"
        results_dir = "{tmp / 'results'}"
        {extra}
        [[benchmarks]]
        name = "synthetic"
        size = 300
        seed = 0
        limit = {limit}
        [grid]
        methods = {methods}
        backbones = {backbones}
        top_k = [8]
        budget = [512]
        [resources]
        retrieve_actors = 1
        llm_actors = 1
        fuse_stages = {str(fused).lower()}
        """))
    return path


ONE_ACTOR = {"retrieve_actors": 1, "llm_actors": 1, "fuse_stages": True}


def locomo_and_synthetic(locomo: Path, limit: int) -> list[dict[str, Any]]:
    """The first `limit` questions of the shared LoCoMo file and of a small synthetic chat."""
    return [{"name": "locomo", "source": str(locomo), "limit": limit},
            {"name": "synthetic", "size": 200, "seed": 0, "limit": limit}]


def sweep_env(address: str, **extra: str) -> dict[str, str]:
    """A driver's environment, with the clusters' token: `ray job submit` takes the job
    server's HTTP address, a driver run directly takes the head's GCS address."""
    return {**os.environ, "RAY_ADDRESS": address, "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(TOKEN_PATH), "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", **extra}


def run_sweep(config: Path, address: str, timeout: float = 900, **env: str
              ) -> subprocess.CompletedProcess[str]:
    """`python -m jobs.sweep config` on the head; it must succeed. The command runs its driver
    itself, as the child it supervises would (the supervision has tests of its own)."""
    status = {STATUS_ENV: str(config.with_suffix(".status.json"))}
    done = subprocess.run([sys.executable, "-m", "jobs.sweep", str(config)], cwd=ROOT,
                          env=sweep_env(gcs(address), **status, **env), capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def start_sweep(config: Path, address: str, log: Path) -> subprocess.Popen[bytes]:
    """`jobs.sweep config` on the cluster at `address`, in the background, output to `log`."""
    with log.open("w") as out:
        return subprocess.Popen([sys.executable, "-m", "jobs.sweep", str(config)], cwd=ROOT,
                                env=sweep_env(gcs(address)), stdout=out,
                                stderr=subprocess.STDOUT)


def gcs(address: str) -> str:
    """The head's GCS address, for drivers started directly on this machine."""
    return f"127.0.0.1:{PORTS['RAY_GCS_PORT']}" if address.startswith("http") else address


def alive_actor_pid(address: str, name: str) -> int:
    """The process of a live actor, from the state API (which asks for the token too)."""
    request = urllib.request.Request(
        f"{address}/api/v0/actors?limit=1000",
        headers={"Authorization": f"Bearer {TOKEN_PATH.read_text().strip()}"})
    with urllib.request.urlopen(request, timeout=60) as reply:
        actors = json.load(reply)["data"]["result"]["result"]
    (pid,) = [a["pid"] for a in actors if a["name"] == name and a["state"] == "ALIVE"]
    return int(pid)


def wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")
