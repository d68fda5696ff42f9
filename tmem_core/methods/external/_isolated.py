"""External systems that run in environments of their own, as worker processes.

A system under `comparators/<name>/` brings `requirements.lock` (fully resolved, with
hashes: installed with `--no-deps`), optionally `requirements-nodeps.txt` (packages installed
without their declared dependencies: what the lock leaves out is said in its comments) and
`stubs/` (put first on the worker's path), and `worker.py` (the `comparators/_worker.py`
protocol). `IsolatedEnv.ensure` builds the environment once under
`cache_root()/envs/<name>-<lock hash>` with uv and this interpreter's Python version; a
`WorkerSystem` starts `worker.py` with that environment's python for one conversation's
memory and talks JSON lines to it. The driver's own packages (its torch among them) are
never on the worker's path.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import IO, Any

from filelock import FileLock

from tmem_core import EngineError
from tmem_core.llm._accounting_server import AccountingEndpoint
from tmem_core.methods._context import render_message
from tmem_core.methods.external._system import Recalled
from tmem_core.retrieval import cache_root
from tmem_core.schema import Message

COMPARATORS = Path(__file__).resolve().parents[3] / "comparators"
_LOCKS = ("requirements.lock", "requirements-nodeps.txt")
_READY = ".ready.json"


@dataclass(frozen=True)
class IsolatedEnv:
    """The environment of `comparators/<name>`, built from its lock."""

    name: str
    root: Path = COMPARATORS

    @property
    def folder(self) -> Path:
        return self.root / self.name

    @cached_property
    def lock_hash(self) -> str:
        """sha256 over the lock files and the stubs: the environment's identity."""
        digest = hashlib.sha256()
        files = [self.folder / f for f in _LOCKS if (self.folder / f).is_file()]
        files += sorted((self.folder / "stubs").rglob("*.py"))
        for path in files:
            digest.update(str(path.relative_to(self.folder)).encode() + b"\0" + path.read_bytes())
        return digest.hexdigest()

    @property
    def directory(self) -> Path:
        return cache_root() / "envs" / f"{self.name}-{self.lock_hash[:16]}"

    @property
    def python(self) -> Path:
        return self.directory / "bin" / "python"

    def pins(self) -> dict[str, str]:
        """The packages and versions the lock files pin (what the environment holds)."""
        pins = {}
        for name in _LOCKS:
            path = self.folder / name
            lines = path.read_text().splitlines() if path.is_file() else []
            for line in lines:
                spec = line.split("#")[0].strip().rstrip("\\").strip()
                if "==" in spec and not spec.startswith("-"):
                    package, version = spec.split("==", 1)
                    pins[package.strip().lower()] = version.strip()
        return pins

    def facts(self) -> dict[str, Any]:
        """What a run's contract says of the environment."""
        stubs = sorted(p.parent.name for p in (self.folder / "stubs").glob("*/__init__.py"))
        return {"system": self.name, "lock_sha256": self.lock_hash, "packages": self.pins(),
                "stubs": stubs}

    def ensure(self) -> float:
        """Build the environment unless it exists; the seconds this call spent building."""
        if (self.directory / _READY).is_file():
            return 0.0
        self.directory.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.directory) + ".lock"):
            if (self.directory / _READY).is_file():
                return 0.0
            start = time.perf_counter()
            self._build()
            seconds = time.perf_counter() - start
            (self.directory / _READY).write_text(json.dumps({"seconds": seconds}))
            return seconds

    def _build(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
        uv = [shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"]
        python = f"{sys.version_info.major}.{sys.version_info.minor}"
        _run([*uv, "venv", "--quiet", "--python", python, str(self.directory)])
        install = [*uv, "pip", "install", "--quiet", "--no-deps", "--python", str(self.python),
                   *_find_links()]
        _run([*install, "--require-hashes", "-r", str(self.folder / "requirements.lock")])
        nodeps = self.folder / "requirements-nodeps.txt"
        if nodeps.is_file():
            _run([*install, "-r", str(nodeps)])


def _find_links() -> list[str]:
    """Where the locks' local wheels are (the CPU torch they pin), as pip is set up to
    find them: `PIP_FIND_LINKS`, else pip's configured `find-links`."""
    links = os.environ.get("PIP_FIND_LINKS") or subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.find-links"],
        capture_output=True, text=True, check=False).stdout
    return [arg for link in links.split() for arg in ("--find-links", link)]


def _run(command: Sequence[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command[:3])} failed ({done.returncode}): "
                           f"{done.stderr[-2000:]}")


class WorkerSystem:
    """One conversation's memory held by a worker process in the system's environment."""

    def __init__(self, env: IsolatedEnv, endpoint: AccountingEndpoint, directory: Path,
                 params: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
        env.ensure()
        directory.mkdir(parents=True, exist_ok=True)
        config = {"directory": str(directory), "base_url": endpoint.base_url,
                  "api_key": endpoint.api_key, "embedder_id": endpoint.embedder_id,
                  "params": params, **(extra or {})}
        stubs = env.folder / "stubs"
        environ = {k: v for k, v in os.environ.items()
                   if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        environ.update(PYTHONPATH=str(stubs) if stubs.is_dir() else "",
                       HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", ANONYMIZED_TELEMETRY="False",
                       OPENAI_BASE_URL=endpoint.base_url, OPENAI_API_KEY=endpoint.api_key,
                       TOKENIZERS_PARALLELISM="false", LITELLM_LOCAL_MODEL_COST_MAP="True")
        self._log = open(directory.parent / f"{directory.name}.worker.log", "a")  # noqa: SIM115
        self._process = subprocess.Popen(
            [str(env.python), str(env.folder / "worker.py"), json.dumps(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True,
            env=environ, cwd=directory, start_new_session=True)
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _shut_down, self._process, self._log)
        self._read()  # "ready", or the error that stopped the system opening

    def add(self, messages: Sequence[Message]) -> None:
        self._call({"op": "add", "messages": [_message(m) for m in messages]})

    def search(self, query: str, k: int) -> list[Recalled]:
        return [_recalled(item) for item in self._call({"op": "search", "query": query,
                                                        "k": k})]

    def versions(self) -> dict[str, str]:
        """The system's packages as its environment reports them."""
        return dict(self._call({"op": "versions"}))

    def close(self) -> None:
        """End the worker (it closes its system first); also when this object is collected
        or the interpreter exits."""
        self._finalizer()

    def _call(self, request: dict[str, Any]) -> Any:
        with self._lock:
            stdin = self._process.stdin
            assert stdin is not None
            try:
                stdin.write(json.dumps(request) + "\n")
                stdin.flush()
            except BrokenPipeError as exc:
                raise EngineError(f"the worker exited ({self._process.poll()}); see "
                                   f"{self._log.name}") from exc
            return self._read()

    def _read(self) -> Any:
        out: IO[str] | None = self._process.stdout
        assert out is not None
        line = out.readline()
        if not line:
            raise EngineError(f"the worker exited ({self._process.wait()}); see "
                               f"{self._log.name}")
        reply = json.loads(line)
        if "error" in reply:
            raise EngineError(reply["error"])
        return reply["ok"]


def _shut_down(process: subprocess.Popen[str], log: IO[str]) -> None:
    """Close the worker's stdin and wait for it to close its system; kill it after 60 s,
    and whatever it left in its process group."""
    if process.poll() is None:
        assert process.stdin is not None
        try:
            process.stdin.close()
            process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    log.close()


def _message(m: Message) -> dict[str, Any]:
    return {"msg_id": m.msg_id, "timestamp": m.timestamp.isoformat(), "author": m.author,
            "text": m.text, "session_id": m.session_id, "rendered": render_message(m)}


def _recalled(item: dict[str, Any]) -> Recalled:
    when = item.get("timestamp")
    return Recalled(str(item["text"]), datetime.fromisoformat(when) if when else None,
                    tuple(item["source_ids"]), float(item["score"]), bool(item.get("raw")))
