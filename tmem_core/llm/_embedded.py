"""The embedded default: a llama.cpp server (xllamacpp) in a child process on 127.0.0.1.

The backend reaches it through the OpenAI-compatible HTTP backend; a connection failure makes
the client call `EmbeddedServer.recover`, which restarts a dead or unresponsive server on the
same port (at most `max_restarts` times) before the request is retried.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tmem_core import ConfigError, EngineError, allowed
from tmem_core._cache_dir import cache_root
from tmem_core.llm._backends import backend
from tmem_core.llm._batch_model import EMBEDDED_PACE, Pace
from tmem_core.llm._config import (
    BUNDLED_SMOLLM2,
    BackboneConfig,
    HttpConfig,
    _require_non_negative,
    _require_positive,
)
from tmem_core.llm._gguf import WEIGHT_FORMATS
from tmem_core.llm._http import OpenAICompatBackend
from tmem_core.llm._models import gguf_path, serving_gguf
from tmem_core.llm._types import Backend

_log = logging.getLogger(__name__)

_SERVER_SCRIPT = Path(__file__).with_name("_xserver.py")  # run by path: needs only xllamacpp
_START_TRIES = 3  # a free port can be taken between probing it and binding it
_HEALTH_TIMEOUT_S = 10.0  # generous: a busy server still answers /health from its HTTP threads


@dataclass(frozen=True)
class EmbeddedEngineConfig(HttpConfig):
    """A llama.cpp server (xllamacpp) on 127.0.0.1, started and stopped by the backend."""

    model_path: str = BUNDLED_SMOLLM2  # a .gguf file
    weights: str = "Q8_0"  # served as: "keep" (the file's own), "Q8_0" or "F16" (see _gguf)
    n_ctx: int = 32768  # split evenly between the slots: 4096 tokens each by default
    n_parallel: int = 8
    n_threads: int = 0  # decoding one sequence; 0 = the usable cores less one, at least 1
    n_threads_batch: int = 0  # prompts and several sequences at once; 0 = all usable cores
    startup_timeout_s: float = 60.0
    max_restarts: int = 3
    pace: Pace = EMBEDDED_PACE  # how fast it runs here, for jobs.plan (not for the server)

    def __post_init__(self) -> None:
        super().__post_init__()
        _require_positive(self, "n_ctx", "n_parallel", "startup_timeout_s")
        _require_non_negative(self, "n_threads", "n_threads_batch", "max_restarts")
        if self.weights not in WEIGHT_FORMATS:
            raise ConfigError("", f"weights: unknown value {self.weights!r}; "
                                  f"{allowed(WEIGHT_FORMATS)}")

    def weights_identity(self) -> str:
        return f"{self.model_path}:{self.weights}"

    @property
    def context_per_request(self) -> int:
        """The server splits `n_ctx` evenly among its slots."""
        return self.n_ctx // self.n_parallel




class EmbeddedServer:
    """Owns the server process: start, health check, restart, stop.

    llama.cpp's threads meet at spinning barriers after every operation. Decoding one
    sequence runs many small operations, so when the caller (or a neighbour) takes a core that
    every thread needs it slows down by one or two orders of magnitude: it computes on all
    usable cores but one. Prompts and several sequences decoded together run large operations,
    1.6-2x as fast on two cores as on one and at worst 1.3-1.9x slower beside a process
    that keeps a core busy: they compute on all usable cores.
    """

    def __init__(self, config: EmbeddedEngineConfig) -> None:
        self.config = config
        source = gguf_path(config.model_path)
        if not source.is_file():
            raise FileNotFoundError(f"embedded model not found: {source}")
        self.model = serving_gguf(config.model_path, config.weights)
        self.port = 0
        self.restarts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def log_path(self) -> Path:
        return cache_root() / "logs" / f"embedded-{os.getpid()}-{self.port}.log"

    def start(self) -> None:
        for attempt in range(1, _START_TRIES + 1):
            self.port = _free_port()
            try:
                self._spawn()
                return
            except EngineError:
                if attempt == _START_TRIES:
                    raise

    def recover(self) -> None:
        """Restart the server unless it is alive and healthy; raise when restarts run out."""
        with self._lock:
            if self._alive() and self._healthy():
                return
            if self.restarts >= self.config.max_restarts:
                raise EngineError(
                    f"embedded server down after {self.restarts} restarts; log {self.log_path}"
                )
            self.restarts += 1
            _log.warning("embedded server on port %d is down: restart %d", self.port, self.restarts)
            self.stop()
            self._spawn()

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin:
            proc.stdin.close()  # the server exits at EOF
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _spawn(self) -> None:
        cores = len(os.sched_getaffinity(0))
        threads = self.config.n_threads or max(1, cores - 1)
        threads_batch = self.config.n_threads_batch or cores
        command = [
            sys.executable, str(_SERVER_SCRIPT), "--model", str(self.model),
            "--port", str(self.port), "--n-ctx", str(self.config.n_ctx),
            "--n-parallel", str(self.config.n_parallel), "--threads", str(threads),
            "--threads-batch", str(threads_batch),
        ]  # fmt: skip
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + self.config.startup_timeout_s
        while time.monotonic() < deadline:
            if not self._alive():
                self.stop()
                raise EngineError(f"embedded server exited at start; log {self.log_path}")
            if self._healthy():
                return
            time.sleep(0.1)
        self.stop()
        raise EngineError(f"embedded server not healthy in time; log {self.log_path}")

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _healthy(self) -> bool:
        url = f"http://127.0.0.1:{self.port}/health"
        try:
            with urllib.request.urlopen(url, timeout=_HEALTH_TIMEOUT_S) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False


class EmbeddedBackend(OpenAICompatBackend):
    """SmolLM2 (or another GGUF) on a private llama.cpp server, spoken to over HTTP (it
    continues a final assistant message and returns it whole)."""

    echoes_prefill = True

    def __init__(self, backbone: BackboneConfig, config: EmbeddedEngineConfig) -> None:
        self.server = EmbeddedServer(config)
        self.server.start()
        super().__init__(backbone, config, self.server, api_key="embedded")

    def close(self) -> None:
        super().close()
        self.server.stop()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@backend("embedded", engine=EmbeddedEngineConfig)
def _start_embedded(backbone: BackboneConfig, engine: EmbeddedEngineConfig) -> Backend:
    return EmbeddedBackend(backbone, engine)
