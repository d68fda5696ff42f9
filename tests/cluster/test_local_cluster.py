"""cluster/stop-local.sh stops every process of the head its start-local.sh started (agents and
workers included) and none of another head running beside it (the tests' session head)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.ray_head import PORTS, ROOT, cluster_env, free_ports

CLUSTER = ROOT / "cluster"


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


def test_stop_local_stops_its_own_head_only(ray_address: str) -> None:
    beside_dir = cluster_env(PORTS)["RAY_TEMP_DIR"]
    beside = {pid: args for pid, args in head_processes(beside_dir).items()
              if args != "ray::IDLE"}  # idle workers come and go on their own
    env = cluster_env(free_ports())
    subprocess.run([str(CLUSTER / "start-local.sh")], env=env, check=True, timeout=180)
    started = head_processes(env["RAY_TEMP_DIR"])
    stop = subprocess.run([str(CLUSTER / "stop-local.sh")], env=env, capture_output=True,
                          text=True, timeout=120, check=False)

    assert stop.returncode == 0, stop.stderr
    assert {"ray::DashboardAgent", "ray::RuntimeEnvAgent"} <= set(started.values())
    assert not {pid: args for pid, args in started.items() if _running(str(pid))}
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
