"""The worker side of an isolated memory system: one JSON request a line on stdin, one JSON
reply a line on stdout. It runs in the system's own environment, so it uses the standard
library only (no tmem_core). Whatever the system prints goes to stderr: stdout carries the
protocol alone.

Requests: {"op": "add", "messages": [...]}, {"op": "search", "query": str, "k": int},
{"op": "versions"}. Replies: {"ok": ...} or {"error": "Type: message"}. At the end of stdin
(the parent closed it, or exited) the system's `close` runs, if it has one, and the process
ends at once (a system's leftover threads do not keep it alive, its child processes are
ended).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from importlib import metadata
from typing import Any, Protocol


class System(Protocol):
    def add(self, messages: list[dict[str, Any]]) -> None: ...

    def search(self, query: str, k: int) -> list[dict[str, Any]]: ...


def serve(open_system: Callable[[dict[str, Any]], System], packages: tuple[str, ...]) -> None:
    """Open the system from the JSON config in argv[1], then answer requests until EOF."""
    protocol = sys.stdout
    sys.stdout = sys.stderr  # the system's own prints must not corrupt the protocol
    config = json.loads(sys.argv[1])
    try:
        system = open_system(config)
    except Exception as exc:
        _reply(protocol, {"error": _describe(exc)})
        return
    _reply(protocol, {"ok": "ready"})
    for line in sys.stdin:
        request = json.loads(line)
        try:
            _reply(protocol, {"ok": _answer(system, request, packages)})
        except Exception as exc:
            traceback.print_exc()
            _reply(protocol, {"error": _describe(exc)})
    close = getattr(system, "close", None)
    if close is not None:
        close()
    processing = sys.modules.get("multiprocessing")
    for child in processing.active_children() if processing else ():
        child.terminate()  # e.g. HippoRAG's multiprocessing.Manager server
    sys.stderr.flush()
    os._exit(0)


def _answer(system: System, request: dict[str, Any], packages: tuple[str, ...]) -> Any:
    op = request.get("op")
    if op == "add":
        system.add(request["messages"])
        return None
    if op == "search":
        return system.search(request["query"], int(request["k"]))
    if op == "versions":
        return {name: metadata.version(name) for name in packages}
    raise ValueError(f"unknown op {op!r}")


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _reply(out: Any, payload: dict[str, Any]) -> None:
    out.write(json.dumps(payload) + "\n")
    out.flush()
