"""One writer per sweep folder: the lease names its holder, a second taker is refused, a
stale lease (not renewed, or its holder's process gone in the same PID namespace and boot)
is taken over by exactly one of the drivers that find it, a holder in another PID namespace
under the same host name is never judged by its pid, and a holder gives up only its own
lease."""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import shutil
import subprocess
import sys
import time
from multiprocessing.synchronize import Event
from pathlib import Path

import psutil
import pytest

from tmem_core import ResultsError
from tmem_core.results._lease import (
    LEASE_FILE,
    Holder,
    Lease,
    pid_space,
    read_holder,
)

ROOT = Path(__file__).resolve().parents[2]


def _write(folder: Path, **fields: object) -> Holder:
    now = time.time()
    holder = Holder(**{"host": platform.node(), "pid": os.getpid(), "process_started": 0.0,
                       "since": now, "renewed_at": now, "token": "theirs",
                       "pid_space": pid_space(), **fields})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / LEASE_FILE).write_text(json.dumps(holder.__dict__))
    return holder


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_the_lease_names_its_holder_and_refuses_a_second_driver(tmp_path: Path) -> None:
    with Lease(tmp_path, heartbeat_s=0.05) as lease:
        lease.note("raysubmit_123 (driver job 02000000)")
        holder = read_holder(tmp_path / LEASE_FILE)
        assert holder is not None and holder.token == lease.holder.token  # type: ignore[union-attr]
        assert (holder.host, holder.pid) == (platform.node(), os.getpid())
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        assert holder.pid_space == f"{boot} {os.readlink('/proc/self/ns/pid')}"
        with pytest.raises(ResultsError) as refused:
            Lease(tmp_path).acquire()
        message = str(refused.value)
        assert f"host {platform.node()} pid {os.getpid()}" in message
        assert "Ray job raysubmit_123 (driver job 02000000), since " in message
        time.sleep(0.2)  # renewed by its heartbeat meanwhile
        renewed = read_holder(tmp_path / LEASE_FILE)
        assert renewed is not None and renewed.renewed_at > holder.renewed_at
    assert not (tmp_path / LEASE_FILE).exists()  # released on exit
    assert [p.name for p in tmp_path.iterdir()] == []  # and no temporary left


def test_a_lease_whose_process_is_gone_is_taken_over_with_a_log_line(tmp_path: Path) -> None:
    _write(tmp_path, pid=_dead_pid(), process_started=time.time() - 5, ray_job="02000000")
    lines: list[str] = []
    with Lease(tmp_path, log=lines.append) as lease:
        assert lease.holder is not None and lease.holder.pid == os.getpid()
    (line,) = lines
    assert line.startswith(f"lease: took over the stale lease of {tmp_path} (host ")
    assert "Ray job 02000000" in line and "no longer runs" in line


def test_a_holder_that_ended_but_was_not_reaped_yet_is_gone(tmp_path: Path) -> None:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])  # a zombie until waited for
    while psutil.Process(ended.pid).status() != psutil.STATUS_ZOMBIE:
        time.sleep(0.01)
    _write(tmp_path, pid=ended.pid, process_started=psutil.Process(ended.pid).create_time())
    lines: list[str] = []
    with Lease(tmp_path, log=lines.append):
        assert "no longer runs" in lines[0]
    ended.wait()


def test_a_reused_pid_is_not_the_holder(tmp_path: Path) -> None:
    # this very process, but not the one that took the lease (another start time)
    _write(tmp_path, process_started=1.0)
    with Lease(tmp_path, log=lambda _: None) as lease:
        assert lease.holder is not None and lease.holder.token != "theirs"


@pytest.mark.parametrize("where", [
    {"host": "node-7", "pid_space": "5d1c8e0a-0c5e-4a52-9d55-8b1f0f4e2b7a pid:[4026531836]"},
    # this host name, another PID namespace (a container sharing the host name), in which
    # this pid (no process of ours) may well run
    {"pid_space": f"{pid_space().split()[0]} pid:[4026532999]"},
    {"pid_space": ""},  # a lease that does not say where its pid is counted
])
def test_a_lease_whose_pid_cannot_be_checked_is_stale_only_once_not_renewed(
        tmp_path: Path, where: dict[str, str]) -> None:
    dead = _dead_pid()
    _write(tmp_path, pid=dead, **where)
    with pytest.raises(ResultsError, match=f"pid {dead}"):
        Lease(tmp_path, stale_after_s=60).acquire()
    _write(tmp_path, pid=dead, renewed_at=time.time() - 120, **where)
    lines: list[str] = []
    with Lease(tmp_path, log=lines.append, stale_after_s=60):
        assert "not renewed for 120s (> 60s)" in lines[0]


def test_a_running_holder_that_stopped_renewing_is_stale(tmp_path: Path) -> None:
    # this host, this namespace, its process runs (hung, say): the age still counts
    started = psutil.Process(os.getppid()).create_time()
    _write(tmp_path, pid=os.getppid(), process_started=started, renewed_at=time.time() - 120)
    lines: list[str] = []
    with Lease(tmp_path, log=lines.append, stale_after_s=60):
        assert "not renewed for 120s (> 60s)" in lines[0]


HOLD = """
import sys, time
from pathlib import Path
from tmem_core.results._lease import Lease
Lease(Path(sys.argv[1]), heartbeat_s=0.1).acquire()
print("held", flush=True)
time.sleep(120)
"""


def test_a_holder_in_another_pid_namespace_keeps_its_lease_while_it_renews(
        tmp_path: Path) -> None:
    """Two drivers under one host name, each in its own PID namespace (`unshare`): the first
    is pid 1 in its namespace, which here is another process; the second refuses while the
    first renews, and takes over only once the lease is older than the renewal age."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "--pid", "--fork", "--mount-proc", "true"],
                                         capture_output=True).returncode != 0:
        pytest.skip("no PID namespaces here (unshare --pid needs root or user namespaces)")
    first = subprocess.Popen(
        [unshare, "--pid", "--fork", "--mount-proc", "--kill-child", sys.executable, "-c",
         HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert first.stdout is not None and first.stdout.readline() == "held\n"
        holder = read_holder(tmp_path / LEASE_FILE)
        assert holder is not None and (holder.host, holder.pid) == (platform.node(), 1)
        assert holder.pid_space not in ("", pid_space())
        for _ in range(3):
            with pytest.raises(ResultsError, match=f"host {platform.node()} pid 1,"):
                Lease(tmp_path, stale_after_s=1.0).acquire()
            time.sleep(0.5)
        renewed = read_holder(tmp_path / LEASE_FILE)
        assert renewed is not None and renewed.token == holder.token
        assert renewed.renewed_at > holder.renewed_at
    finally:
        first.kill()
        first.wait()
    with pytest.raises(ResultsError):  # gone, but nothing here can know it yet
        Lease(tmp_path, stale_after_s=1.0).acquire()
    time.sleep(1.2)
    lines: list[str] = []
    with Lease(tmp_path, log=lines.append, stale_after_s=1.0) as lease:
        assert lease.holder is not None and lease.holder.token != holder.token
    assert "not renewed for 1s (> 1s)" in lines[0]


def test_a_holder_releases_only_its_own_lease(tmp_path: Path) -> None:
    lease = Lease(tmp_path, heartbeat_s=3600)
    lease.acquire()
    theirs = _write(tmp_path, host="node-7", pid=1)  # taken over meanwhile
    lease.release()
    assert read_holder(tmp_path / LEASE_FILE) == theirs


def _take(folder: str, results: multiprocessing.Queue[str], done: Event) -> None:
    try:
        Lease(Path(folder), log=lambda _: None).acquire()
    except ResultsError:
        results.put("refused")
        return
    results.put("held")
    done.wait(60)  # keep it while the others try


def test_of_drivers_that_find_one_stale_lease_exactly_one_takes_it(tmp_path: Path) -> None:
    _write(tmp_path, pid=_dead_pid(), process_started=time.time() - 5)
    context = multiprocessing.get_context("fork")  # at once, no imports
    results: multiprocessing.Queue[str] = context.Queue()
    done = context.Event()
    drivers = [context.Process(target=_take, args=(str(tmp_path), results, done))
               for _ in range(6)]
    for driver in drivers:
        driver.start()
    outcomes = sorted(results.get(timeout=120) for _ in drivers)
    done.set()
    for driver in drivers:
        driver.join(timeout=30)
    assert outcomes == ["held"] + ["refused"] * 5


def test_a_stale_lease_taken_over_meanwhile_is_left_to_its_new_holder(tmp_path: Path) -> None:
    """Two drivers find one stale lease; the first replaces it: the second, which judged the
    old one stale, must not break the new one."""
    stale = _write(tmp_path, pid=_dead_pid(), process_started=time.time() - 5)
    fresh = _write(tmp_path, host="node-7", pid=1, token="first-taker")
    assert not Lease(tmp_path)._break(stale)
    assert read_holder(tmp_path / LEASE_FILE) == fresh
    assert not (tmp_path / f"{LEASE_FILE}.break").exists()
