"""However a supervised driver ends, the sweep's last word is one `error:` line with what
landed; its own clean exits pass through untouched."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tmem_core.pipeline._watch import CLUSTER_LOST, supervise

ROOT = Path(__file__).resolve().parents[2]


def driver(gcs: str, then: str) -> list[str]:
    """A stand-in driver: it records two runs' counts against `gcs`, then does `then`."""
    script = textwrap.dedent(f"""
        import os, signal, time
        from pathlib import Path
        from tmem_core.pipeline._watch import STATUS_ENV, Landed, SweepStatus
        runs = (Landed("locomo_bm25_a", 4, 6), Landed("locomo_tmem_a", 0, 6))
        SweepStatus({gcs!r}, runs).write(Path(os.environ[STATUS_ENV]))
        {then}
    """)
    return [sys.executable, "-c", script]


@pytest.fixture
def live_gcs() -> Iterator[str]:
    """A port that accepts connections, standing for a cluster that is still up."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"127.0.0.1:{server.getsockname()[1]}"


@pytest.fixture
def dead_gcs() -> str:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    return f"127.0.0.1:{port}"  # closed: nothing listens there any more


def error_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]


def test_a_silent_exit_after_the_cluster_went_away_gets_the_lost_cluster_line(
        dead_gcs: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert supervise(driver(dead_gcs, "os._exit(1)")) == 1
    [line] = error_lines(capsys)
    assert "went away mid-sweep" in line
    assert "locomo_bm25_a 4/6, locomo_tmem_a 0/6" in line and "resume" in line


@pytest.mark.parametrize("cluster", ["up", "gone"])
def test_a_killed_driver_is_reported_killed_whatever_became_of_its_cluster(
        cluster: str, live_gcs: str, dead_gcs: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A driver's own local cluster dies with it: its GCS is gone, but the driver was
    killed."""
    gcs = live_gcs if cluster == "up" else dead_gcs
    assert supervise(driver(gcs, "os.kill(os.getpid(), signal.SIGKILL)")) == 1
    [line] = error_lines(capsys)
    assert line.startswith("error: the sweep driver was killed (SIGKILL); ")
    assert "locomo_bm25_a 4/6" in line and "went away" not in line


def test_a_driver_that_crashed_on_a_signal_of_its_own_says_which(
        live_gcs: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert supervise(driver(live_gcs, "os.abort()")) == 1
    [line] = error_lines(capsys)
    assert line.startswith("error: the sweep driver ended (signal SIGABRT); ")


def test_a_driver_that_ends_before_its_runs_start_says_so(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert supervise([sys.executable, "-c", "import os; os._exit(7)"]) == 1
    [line] = error_lines(capsys)
    assert "status 7" in line and "before its runs started" in line


@pytest.mark.parametrize(("code", "returned"), [(0, 0), (2, 2), (CLUSTER_LOST, 1)])
def test_the_drivers_own_endings_pass_through_without_another_line(
        live_gcs: str, code: int, returned: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert supervise(driver(live_gcs, f"os._exit({code})")) == returned
    assert error_lines(capsys) == []


def test_a_killed_supervisor_takes_its_driver_with_it_at_once(live_gcs: str) -> None:
    # a driver slow to end on SIGTERM, as the Ray core's failure handler can be
    child = driver(live_gcs, "signal.signal(signal.SIGTERM, lambda *_: time.sleep(10)); "
                   "print(os.getpid(), flush=True); time.sleep(60)")
    parent = subprocess.Popen(
        [sys.executable, "-c", "import sys; from tmem_core.pipeline._watch import supervise; "
         f"sys.exit(supervise({child!r}))"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    pid = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 2.0  # the driver's lease is free for a rerun at once
    while _runs(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _runs(pid)


def _runs(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_stopped_job_stops_its_driver_and_says_what_landed(live_gcs: str) -> None:
    child = driver(live_gcs, "print('ready', flush=True); time.sleep(60)")
    parent = subprocess.Popen(
        [sys.executable, "-c", "import sys; from tmem_core.pipeline._watch import supervise; "
         f"sys.exit(supervise({child!r}))"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
    parent.send_signal(signal.SIGTERM)  # what `ray job stop` sends
    _, stderr = parent.communicate(timeout=30)
    assert parent.returncode == 1
    [line] = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert "was killed (SIGTERM)" in line and "locomo_tmem_a 0/6" in line
