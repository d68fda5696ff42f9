"""One writer per sweep folder: the lease names its holder, a second taker is refused, a
stale lease (holder gone on this host, or not renewed from another) is taken over by exactly
one of the drivers that find it, and a holder gives up only its own lease."""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import subprocess
import sys
import time
from multiprocessing.synchronize import Event
from pathlib import Path

import psutil
import pytest

from tmem_core.results._lease import LEASE_FILE, Holder, Lease, LeaseHeld, read_holder


def _write(folder: Path, **fields: object) -> Holder:
    now = time.time()
    holder = Holder(**{"host": platform.node(), "pid": os.getpid(), "process_started": 0.0,
                       "since": now, "renewed_at": now, "token": "theirs", **fields})
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
        with pytest.raises(LeaseHeld) as refused:
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


def test_another_hosts_lease_is_stale_only_once_not_renewed(tmp_path: Path) -> None:
    _write(tmp_path, host="node-7", pid=1)
    with pytest.raises(LeaseHeld, match="host node-7 pid 1"):
        Lease(tmp_path, stale_after_s=60).acquire()
    _write(tmp_path, host="node-7", pid=1, renewed_at=time.time() - 120)
    lines: list[str] = []
    with Lease(tmp_path, log=lines.append, stale_after_s=60):
        assert "not renewed for 120s (> 60s)" in lines[0]


def test_a_holder_releases_only_its_own_lease(tmp_path: Path) -> None:
    lease = Lease(tmp_path, heartbeat_s=3600)
    lease.acquire()
    theirs = _write(tmp_path, host="node-7", pid=1)  # taken over meanwhile
    lease.release()
    assert read_holder(tmp_path / LEASE_FILE) == theirs


def _take(folder: str, results: multiprocessing.Queue[str], done: Event) -> None:
    try:
        Lease(Path(folder), log=lambda _: None).acquire()
    except LeaseHeld:
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
