"""One writer per sweep folder: a lease file that names its holder.

`results/<sweep>/lease.json` holds the driver that writes the folder: its host, pid (and that
process's start time, so a reused pid is not mistaken for it), the PID namespace that pid is
counted in (`pid_space`: the kernel's boot id and the namespace's inode), Ray job, when it
took the lease and when it last renewed it. A second driver refuses (a `ResultsError`); a lease
whose holder is gone is taken over, with a log line. Gone means, on every host, that the lease
was not renewed for `STALE_AFTER_S`; or, at once, that the holder's process no longer runs,
which only a driver in the same PID namespace of the same boot can know (containers that
share a host name each count pids from 1: another's "pid 1" is not ours).

What this relies on, so that it also holds on a filesystem shared by several nodes:
- the lease appears by `link(2)` of a fully written temporary file, which either creates the
  name or fails with EEXIST, atomically, on local POSIX filesystems and on NFS v3 and later
  (a retried NFS link that reports EEXIST after succeeding is recognised by the temporary
  file's link count); readers never see a half-written lease;
- renewals replace the file with `rename(2)`, atomic on the same filesystems;
- clocks of the nodes agree to well within `STALE_AFTER_S` (NTP), for the test by age;
- taking over a stale lease happens under a short-lived break lock (the same link
  primitive), so two drivers that find the same stale lease do not both take it.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import psutil

from tmem_core import ResultsError
from tmem_core.results._layout import write_atomic

LEASE_FILE = "lease.json"
HEARTBEAT_S = 10.0  # the holder renews its lease this often
STALE_AFTER_S = 60.0  # a lease not renewed for this long is stale, whoever holds it
BREAK_STALE_S = 30.0  # a break lock older than this was left by a driver that died
LEASE_LOST = 2  # exit status of a holder that finds its lease taken over

Log = Callable[[str], None]


@dataclass(frozen=True)
class Holder:
    """Who holds a lease, and since when (Unix seconds)."""

    host: str
    pid: int
    process_started: float  # the holder process's start time (tells a reused pid apart)
    since: float
    renewed_at: float
    token: str
    ray_job: str | None = None
    pid_space: str = ""  # where `pid` is counted (`pid_space()`); "" unknown: age alone

    @classmethod
    def me(cls) -> Holder:
        """This process, taking a lease now."""
        now = time.time()
        return cls(platform.node(), os.getpid(), _process_started(os.getpid()), now, now,
                   uuid.uuid4().hex, pid_space=pid_space())

    def describe(self) -> str:
        job = f", Ray job {self.ray_job}" if self.ray_job else ""
        return f"host {self.host} pid {self.pid}{job}, since {_when(self.since)}"

    def gone(self, now: float, stale_after_s: float) -> str | None:
        """Why the holder is gone, or None while it may still be writing: its process no
        longer runs (known only in its PID namespace and boot), or its lease is older than
        `stale_after_s`."""
        if (self.pid_space and self.pid_space == pid_space()
                and not _running(self.pid, self.process_started)):
            return f"its process {self.pid} no longer runs on {self.host}"
        if now - self.renewed_at > stale_after_s:
            return f"not renewed for {now - self.renewed_at:.0f}s (> {stale_after_s:.0f}s)"
        return None


def lease_held(folder: Path, holder: Holder | None) -> ResultsError:
    """The error of a folder whose lease another driver holds (`holder`; None: unreadable)."""
    if holder is None:
        return ResultsError(f"{folder / LEASE_FILE} is unreadable: remove it if no driver "
                            "writes this folder, then run the same command again")
    return ResultsError(f"{folder} is being written by another driver ({holder.describe()});"
                        " wait for it to finish, or stop it, then run the same command again")


class Lease:
    """The lease of one folder, held from `acquire` to `release` and renewed meanwhile."""

    def __init__(self, folder: Path, log: Log = print, heartbeat_s: float = HEARTBEAT_S,
                 stale_after_s: float = STALE_AFTER_S) -> None:
        self.folder, self.log = folder, log
        self.path = folder / LEASE_FILE
        self.heartbeat_s, self.stale_after_s = heartbeat_s, stale_after_s
        self.holder: Holder | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._lock = threading.Lock()

    def acquire(self) -> Holder:
        """Take the lease (a stale one is taken over) or raise a `ResultsError`."""
        self.folder.mkdir(parents=True, exist_ok=True)
        mine = Holder.me()
        while not _create(self.path, mine):
            current = read_holder(self.path)
            if current is None:  # gone between our attempt and the read: try again
                if not self.path.exists():
                    continue
                raise lease_held(self.folder, None)
            why = current.gone(time.time(), self.stale_after_s)
            if why is None:
                raise lease_held(self.folder, current)
            if self._break(current):
                self.log(f"lease: took over the stale lease of {self.folder} "
                         f"({current.describe()}): {why}")
        self.holder = mine
        self._renewer = threading.Thread(target=self._renew_loop, name="lease", daemon=True)
        self._renewer.start()
        return mine

    def note(self, ray_job: str | None) -> None:
        """Name the holder's Ray job (known once Ray is up)."""
        with self._lock:
            if self.holder is not None:
                self.holder = replace(self.holder, ray_job=ray_job)
        self.renew()

    def renew(self) -> None:
        """Rewrite the lease with a fresh `renewed_at`; a holder that finds it taken over
        says so and ends (its writes would no longer be the only ones)."""
        with self._lock:
            if self.holder is None:
                return
            current = read_holder(self.path)
            if current is None or current.token != self.holder.token:
                other = current.describe() if current else "nobody"
                print(f"error: the lease of {self.folder} was taken over ({other}); this "
                      "driver stops writing", file=sys.stderr, flush=True)
                os._exit(LEASE_LOST)
            self.holder = replace(self.holder, renewed_at=time.time())
            write_atomic(self.path, json.dumps(asdict(self.holder)))

    def release(self) -> None:
        """Give the lease up (only if it is still ours)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        with self._lock:
            if self.holder is not None:
                current = read_holder(self.path)
                if current is not None and current.token == self.holder.token:
                    self.path.unlink(missing_ok=True)
                self.holder = None

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            self.renew()

    def _break(self, stale: Holder) -> bool:
        """Remove `stale`'s lease under the break lock; False if another driver is doing it
        (or did: the lease is no longer `stale`'s)."""
        lock = self.path.with_name(f"{LEASE_FILE}.break")
        with contextlib.suppress(FileNotFoundError):
            if time.time() - lock.stat().st_mtime > BREAK_STALE_S:
                lock.unlink()
        if not _create(lock, Holder.me()):
            time.sleep(0.1)
            return False
        try:
            current = read_holder(self.path)
            if current is None or current.token != stale.token:
                return False
            self.path.unlink()
            return True
        finally:
            lock.unlink(missing_ok=True)

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


def read_holder(path: Path) -> Holder | None:
    """The lease's holder, or None when there is no (readable) lease."""
    try:
        return Holder(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _create(path: Path, holder: Holder) -> bool:
    """Make `path` hold `holder`, only if it does not exist (atomic, by link)."""
    tmp = path.with_name(f".{path.name}.{holder.token}.tmp")
    tmp.write_text(json.dumps(asdict(holder)))
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return tmp.stat().st_nlink == 2  # an NFS retry of a link that did succeed
    finally:
        tmp.unlink(missing_ok=True)


def pid_space() -> str:
    """This process's PID namespace on this boot ("<boot id> pid:[<inode>]"), in which the
    pids that `/proc` (and psutil) shows are counted; "" when that cannot be told (no such
    files, or a `/proc` mounted from another namespace, whose pids are not ours)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")
        if os.readlink("/proc/self") != str(os.getpid()):
            return ""
    except OSError:
        return ""
    return f"{boot} {namespace}"


def _process_started(pid: int) -> float:
    """When `pid` started; 0 when it does not run (an ended process nobody reaped yet, a
    zombie, included)."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return 0.0
        return float(process.create_time())
    except psutil.Error:
        return 0.0


def _running(pid: int, started: float) -> bool:
    """The process `pid` runs and is the one that started at `started`."""
    current = _process_started(pid)
    return current > 0 and abs(current - started) < 1.0


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
