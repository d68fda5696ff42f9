"""The local server: the page, a JSON API over the sweep, its figures and the page's assets.

The sweep is read again whenever a run has written something, so a sweep that is still
running shows what has landed; a run's questions come as light rows, a question's records
(contexts, construct records, prompts) only when its page is opened.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tmem_core import DataError
from tmem_core.viewer._audit import audit_routes
from tmem_core.viewer._data import SweepData, fingerprint, load_sweep
from tmem_core.viewer._page import page, to_json
from tmem_core.viewer._question import question_views
from tmem_core.viewer._views import run_view, sweep_view

STATIC = Path(__file__).parent / "static"
HOST = "127.0.0.1"  # never another interface: the viewer has no authentication
START_TIMEOUT_S = 30.0


class LiveSweep:
    """A sweep folder, reloaded when its fingerprint changes (one reload at a time); the
    sweep's and runs' pages are kept as JSON until then (questions' pages are not: there
    can be many, each read when asked for)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._key: object = None
        self._data: SweepData | None = None
        self._pages: dict[str, str | None] = {}

    def data(self) -> SweepData:
        with self._lock:
            key = fingerprint(self.root)
            if self._data is None or key != self._key:
                self._data, self._key, self._pages = load_sweep(self.root), key, {}
            return self._data

    def page(self, name: str, build: Callable[[SweepData], object | None]) -> str | None:
        """The JSON of `build(data)` (None stays None), built once per version of the sweep."""
        data = self.data()
        pages = self._pages  # replaced, not cleared, by a reload
        if name not in pages:
            view = build(data)
            pages[name] = None if view is None else to_json(view)
        return pages[name]


def viewer_app(root: Path | None, audit: Path | None = None) -> Starlette:
    """The viewer of the sweep folder `root` as an ASGI app, with the audit page of the
    annotation folder `audit` when given (alone when there is no sweep)."""
    extra = audit_routes(audit) if audit is not None else []
    if root is None:
        return Starlette(exception_handlers={DataError: _bad_data}, routes=[
            Route("/", _to_audit), *extra,
            Mount("/static", StaticFiles(directory=STATIC))])
    sweep = LiveSweep(root)
    sweep.data()  # a bad folder fails here, before anything is served

    def index(_: Request) -> Response:
        return HTMLResponse(page(f"sweep {sweep.data().results.name}"))

    def api_sweep(_: Request) -> Response:
        return _json(sweep.page("", lambda d: sweep_view(d, lambda name, _: f"figures/{name}")))

    def api_run(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        return _json(sweep.page(f"run/{run_id}", lambda d: run_view(d, run_id)), "run")

    def api_question(request: Request) -> Response:
        qid = request.path_params["qid"]
        views = question_views(sweep.data(), request.path_params["run_id"], [qid])
        return _json(to_json(views[qid]) if qid in views else None, "question")

    def figure(request: Request) -> Response:
        path = sweep.data().figures.get(request.path_params["name"])
        return FileResponse(path) if path else _missing("figure")

    return Starlette(exception_handlers={DataError: _bad_data}, routes=[
        Route("/", index),
        Route("/api/sweep", api_sweep),
        Route("/api/runs/{run_id}", api_run),
        Route("/api/runs/{run_id}/questions/{qid:path}", api_question),
        Route("/figures/{name}", figure), *extra,
        Mount("/static", StaticFiles(directory=STATIC)),
    ])


def _to_audit(_: Request) -> Response:
    return RedirectResponse("audit")


def _json(text: str | None, what: str = "") -> Response:
    if text is None:
        return _missing(what)
    return Response(text, media_type="application/json")


async def _bad_data(_: Request, exc: Exception) -> Response:
    """Results that turned unreadable while serving (the page shows the line)."""
    return Response(f"error: {exc}", status_code=500, media_type="text/plain")


def _missing(what: str) -> Response:
    return Response(f"no such {what}", status_code=404, media_type="text/plain")


class Background:
    """The viewer of a sweep served on 127.0.0.1 (a free port) from a thread of this
    process, for tests and benchmarks: `with Background(root) as url: ...`."""

    def __init__(self, root: Path | None, audit: Path | None = None) -> None:
        config = uvicorn.Config(viewer_app(root, audit), host=HOST, port=0,
                                log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> str:
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the viewer's server did not start")
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        return f"http://{HOST}:{port}/"

    def __exit__(self, *_: object) -> None:
        self._server.should_exit = True
        self._thread.join()
