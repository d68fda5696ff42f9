"""A head of cluster/start-local.sh beside another one (the tests' session head): a driver
started directly with cluster/env.sh's settings joins the head they name, and stop-local.sh
stops every process of its head (agents and workers included) and none of the other's."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ray_head import PORTS, ROOT, cluster_env, free_ports, sweep_env

CLUSTER = ROOT / "cluster"
JOIN = ("import sys, ray; from tmem_core.pipeline._ray_start import init_ray; init_ray(); "
        "print(ray.get_runtime_context().gcs_address, flush=True); sys.stdin.read()")
"""A driver that joins the cluster its environment names, says which, and stays."""


@pytest.fixture(scope="module")
def own_head() -> Iterator[dict[str, str]]:
    """The environment of a head started by start-local.sh in a folder of its own (the last
    test stops it; stop-local.sh then finds no head to stop)."""
    env = cluster_env(free_ports())
    try:
        subprocess.run([str(CLUSTER / "start-local.sh")], env=env, check=True, timeout=300)
        yield env
    finally:  # a start that timed out may have left a head
        subprocess.run([str(CLUSTER / "stop-local.sh")], env=env, timeout=120, check=False,
                       capture_output=True)


def _driver_env(head: dict[str, str], **extra: str) -> dict[str, str]:
    """cluster/env.sh's settings for `head`."""
    return sweep_env(f"http://127.0.0.1:{head['RAY_DASHBOARD_PORT']}",
                     RAY_TEMP_DIR=head["RAY_TEMP_DIR"], **extra)


def test_a_driver_joins_the_head_its_environment_names(
        own_head: dict[str, str], ray_address: str, tmp_path: Path) -> None:
    """cluster/env.sh names the head by its job server and temp dir; Ray's default folder
    (here RAY_TMPDIR's) says another cluster started last."""
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{PORTS['RAY_GCS_PORT']}")
    env = _driver_env(own_head, RAY_TMPDIR=str(tmp_path))
    joined = subprocess.run([sys.executable, "-c", JOIN], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=180, check=False)
    assert joined.returncode == 0, joined.stderr[-2000:]
    assert joined.stdout.split()[-1] == f"127.0.0.1:{own_head['RAY_GCS_PORT']}"


def test_a_driver_refuses_a_job_server_without_a_head_in_its_folder(tmp_path: Path) -> None:
    env = sweep_env("http://127.0.0.1:8265", RAY_TEMP_DIR=str(tmp_path))
    joined = subprocess.run(
        [sys.executable, "-c", "from tmem_core.pipeline._ray_start import cluster_address; "
         "cluster_address()"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
        check=False)
    assert joined.returncode == 1
    assert (f"ConfigError: config key 'RAY_ADDRESS': http://127.0.0.1:8265: no Ray head was "
            f"started in {tmp_path}") in joined.stderr


def _running(pid: str) -> tuple[int, str, str] | None:
    """(parent, command line, open files) of a live process; None when gone or a zombie."""
    proc = Path("/proc") / pid
    try:
        state, ppid = proc.joinpath("stat").read_text().rpartition(")")[2].split()[:2]
        args = proc.joinpath("cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        files = " ".join(str(fd.readlink()) for fd in proc.joinpath("fd").iterdir())
    except OSError:  # gone, or not ours to read
        return None
    return None if state == "Z" else (int(ppid), args, files)


def head_processes(temp_dir: str) -> dict[int, str]:
    """The live processes naming `temp_dir` or with a file open in it, and their descendants
    (pid -> command line)."""
    table = {int(p.name): info for p in Path("/proc").iterdir()
             if p.name.isdigit() and (info := _running(p.name))}
    own = {pid for pid, (_, args, files) in table.items()
           if f"{temp_dir}/" in args or f"{temp_dir}/" in files}
    grown = True
    while grown:
        more = {pid for pid, (ppid, _, _) in table.items() if ppid in own} - own
        own |= more
        grown = bool(more)
    return {pid: table[pid][1] for pid in own}


def test_stop_local_stops_its_own_head_only(own_head: dict[str, str], ray_address: str
                                            ) -> None:
    beside_dir = cluster_env(PORTS)["RAY_TEMP_DIR"]
    beside = {pid: args for pid, args in head_processes(beside_dir).items()
              if args != "ray::IDLE"}  # idle workers come and go on their own
    env = own_head
    driver = subprocess.Popen([sys.executable, "-c", JOIN], cwd=ROOT, env=_driver_env(env),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert driver.stdout is not None and driver.stdout.readline().strip()  # joined
        started = head_processes(env["RAY_TEMP_DIR"])
        stop = subprocess.run([str(CLUSTER / "stop-local.sh")], env=env, capture_output=True,
                              text=True, timeout=120, check=False)
        assert driver.poll() is None  # a driver that joined it is not the head's to stop
    finally:
        driver.kill()
        driver.wait()

    assert stop.returncode == 0, stop.stderr
    assert {"ray::DashboardAgent", "ray::RuntimeEnvAgent"} <= set(started.values())
    assert driver.pid in started  # a process with files in the head's folder
    assert not {pid: args for pid, args in started.items()
                if _running(str(pid)) and pid != driver.pid}
    assert not head_processes(env["RAY_TEMP_DIR"])
    assert {pid: args for pid, args in beside.items() if _running(str(pid))} == beside


def test_stop_local_without_its_marker_stops_nothing(ray_address: str) -> None:
    beside_dir = cluster_env(PORTS)["RAY_TEMP_DIR"]
    beside = head_processes(beside_dir)
    env = {**cluster_env(PORTS), "RAY_GCS_PORT": free_ports()["RAY_GCS_PORT"]}
    stop = subprocess.run([str(CLUSTER / "stop-local.sh")], env=env, capture_output=True,
                          text=True, timeout=60, check=False)

    assert stop.returncode == 1
    assert stop.stderr.startswith("error: ") and stop.stderr.count("\n") == 1
    assert "nothing stopped" in stop.stderr
    assert set(head_processes(beside_dir)) >= {pid for pid, args in beside.items()
                                                 if args != "ray::IDLE"}
