"""The local server: the page, a JSON API over the sweep, its figures and the page's assets.

The sweep is read again whenever a run has written something, so a sweep that is still
running shows what has landed; a run's questions come as light rows, a question's records
(contexts, traces, prompts) only when its page is opened.
"""

from __future__ import annotations

import threading
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from tmem_core.schema import DataError
from tmem_core.viewer._data import SweepData, fingerprint, load_sweep
from tmem_core.viewer._page import page, to_json
from tmem_core.viewer._question import question_views
from tmem_core.viewer._views import run_view, sweep_view

STATIC = Path(__file__).parent / "static"


class LiveSweep:
    """A sweep folder, reloaded when its fingerprint changes (one reload at a time)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._key: object = None
        self._data: SweepData | None = None

    def data(self) -> SweepData:
        with self._lock:
            key = fingerprint(self.root)
            if self._data is None or key != self._key:
                self._data, self._key = load_sweep(self.root), key
            return self._data


def viewer_app(root: Path) -> Starlette:
    """The viewer of the sweep folder `root` as an ASGI app."""
    sweep = LiveSweep(root)
    sweep.data()  # a bad folder fails here, before anything is served

    def index(_: Request) -> Response:
        return HTMLResponse(page(f"sweep {sweep.data().results.name}"))

    def api_sweep(_: Request) -> Response:
        return _json(sweep_view(sweep.data(), lambda name, _path: f"figures/{name}"))

    def api_run(request: Request) -> Response:
        view = run_view(sweep.data(), request.path_params["run_id"])
        return _json(view) if view else _missing("run")

    def api_question(request: Request) -> Response:
        qid = request.path_params["qid"]
        views = question_views(sweep.data(), request.path_params["run_id"], [qid])
        return _json(views[qid]) if qid in views else _missing("question")

    def figure(request: Request) -> Response:
        path = sweep.data().figures.get(request.path_params["name"])
        return FileResponse(path) if path else _missing("figure")

    return Starlette(exception_handlers={DataError: _bad_data}, routes=[
        Route("/", index),
        Route("/api/sweep", api_sweep),
        Route("/api/runs/{run_id}", api_run),
        Route("/api/runs/{run_id}/questions/{qid:path}", api_question),
        Route("/figures/{name}", figure),
        Mount("/static", StaticFiles(directory=STATIC)),
    ])


def _json(view: object) -> Response:
    return Response(to_json(view), media_type="application/json")


async def _bad_data(_: Request, exc: Exception) -> Response:
    """Results that turned unreadable while serving (the page shows the line)."""
    return Response(f"error: {exc}", status_code=500, media_type="text/plain")


def _missing(what: str) -> Response:
    return Response(f"no such {what}", status_code=404, media_type="text/plain")
