"""A sweep's last words: one `error:` line with what landed, however its driver ends.

The Ray core ends a driver whose cluster went away with a bare `_exit`, sometimes within a
second of the loss, so a line printed by the driver itself cannot be guaranteed. `supervise`
therefore runs the driver as a child process that keeps a small status file (its cluster's
address and, per run, the questions landed); when the child ends abnormally, the parent
says how and what landed, and that the same command resumes.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType

STATUS_ENV = "TMEM_SWEEP_STATUS"
"""Set in the supervised driver: where it keeps its status file."""
CLUSTER_LOST = 3
"""The driver's exit status after it said itself that its cluster went away."""
RESUME = "run the same command again to resume (landed questions are kept)"
KILLS = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
"""Signals a driver gets from outside: it was killed, whatever its cluster's state after (a
driver without RAY_ADDRESS takes its own local cluster down with it)."""
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Landed:
    run_id: str
    done: int
    total: int


@dataclass(frozen=True)
class SweepStatus:
    """What the driver last knew: its cluster's GCS ("host:port") and each run's count."""

    gcs: str
    runs: tuple[Landed, ...]

    def write(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"gcs": self.gcs, "runs": [asdict(r) for r in self.runs]}))
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> SweepStatus | None:
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return cls(raw["gcs"], tuple(Landed(**r) for r in raw["runs"]))

    def landed(self) -> str:
        return ", ".join(f"{r.run_id} {r.done}/{r.total}" for r in self.runs)


def lost_cluster_line(status: SweepStatus) -> str:
    return (f"error: the Ray cluster went away mid-sweep; questions landed: {status.landed()}; "
            f"{RESUME}")


def reachable(gcs: str, timeout_s: float = 2.0) -> bool:
    host, _, port = gcs.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError:
        return False
    return True


class ClusterWatch:
    """Ends the driver when its cluster goes away mid-sweep, with one `error:` line saying
    how many questions of each run landed (Ray itself would end it a minute later, silently),
    and keeps the status file of a supervised driver up to date.

    The cluster is gone when its GCS refuses connections `misses` checks in a row."""

    def __init__(self, gcs: str, counts: Callable[[], tuple[Landed, ...]],
                 interval_s: float = 1.0, misses: int = 3) -> None:
        self.gcs, self.counts = gcs, counts
        self.interval_s, self.misses = interval_s, misses
        self.status_file = Path(os.environ[STATUS_ENV]) if STATUS_ENV in os.environ else None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="cluster-watch", daemon=True)

    def __enter__(self) -> ClusterWatch:
        self._note()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._note()

    def _note(self) -> SweepStatus:
        status = SweepStatus(self.gcs, self.counts())
        if self.status_file is not None:
            status.write(self.status_file)
        return status

    def _watch(self) -> None:
        missed = 0
        while not self._stop.wait(self.interval_s):
            status = self._note()
            missed = 0 if reachable(self.gcs, self.interval_s) else missed + 1
            if missed >= self.misses and not self._stop.is_set():
                print(lost_cluster_line(status), file=sys.stderr, flush=True)
                os._exit(CLUSTER_LOST)  # the Ray core would otherwise end it without a word


def supervise(command: Sequence[str]) -> int:
    """Run a sweep driver as a child process and return its exit status; when it ends
    abnormally (a signal, or the Ray core's silent exit), print one `error:` line."""
    with tempfile.TemporaryDirectory(prefix="tmem-sweep-") as tmp:
        status_file = Path(tmp) / "status.json"
        child = subprocess.Popen(list(command), env={**os.environ, STATUS_ENV: str(status_file)},
                                 preexec_fn=_die_with_parent)

        def forward(signum: int, _: FrameType | None) -> None:
            child.send_signal(signum)

        previous = signal.signal(signal.SIGTERM, forward)
        interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal tells the child
        try:
            code = child.wait()
        finally:
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, interrupt)
        if code in (0, 2):
            return code
        if code != CLUSTER_LOST:
            print(abnormal_end_line(code, SweepStatus.read(status_file)), file=sys.stderr,
                  flush=True)
        return 1


def abnormal_end_line(code: int, status: SweepStatus | None) -> str:
    """What to tell the user when the driver ended with `code` and left `status`."""
    killed = code < 0 and signal.Signals(-code) in KILLS
    if killed:
        ended = f"the sweep driver was killed ({signal.Signals(-code).name})"
    else:
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"status {code}"
        ended = f"the sweep driver ended ({how})"
    if status is None:
        return f"error: {ended} before its runs started; {RESUME}"
    if not killed and not reachable(status.gcs):
        return lost_cluster_line(status)
    return f"error: {ended}; questions landed: {status.landed()}; {RESUME}"


def _die_with_parent() -> None:
    """In the child: end at once when the supervising parent is killed (Linux): as killed as
    its parent (SIGKILL; a SIGTERM would go through the Ray core's failure handler, which can
    take seconds to dump the driver's stack, while a rerun finds the sweep's lease held)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
