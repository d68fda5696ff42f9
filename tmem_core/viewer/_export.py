"""The viewer as one self-contained HTML file: every page's data, the figures as data URIs,
the script and style inline; it opens from disk with no server and no network."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from tmem_core.viewer._data import load_sweep
from tmem_core.viewer._page import page, to_json
from tmem_core.viewer._question import QuestionView, question_views
from tmem_core.viewer._views import RunView, SweepView, run_view, sweep_view

VIEWER_FILE = "viewer.html"


@dataclass(frozen=True)
class Embedded:
    sweep: SweepView
    runs: dict[str, RunView]
    questions: dict[str, dict[str, QuestionView]]  # run -> qid -> page


def export_html(root: Path, out: Path, report: Path | None = None) -> Path:
    """Write the viewer of the sweep folder `root` to the file `out`; figures are taken from
    `report` (default: the sweep's report folder)."""
    data = load_sweep(root, report)
    runs = {r: view for r in data.run_dirs if (view := run_view(data, r)) is not None}
    embedded = Embedded(
        sweep_view(data, lambda _name, path: _data_uri(path)), runs,
        {r: question_views(data, r, [q.qid for q in view.questions])
         for r, view in runs.items()})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page(f"sweep {data.results.name}", to_json(embedded)), encoding="utf-8")
    return out


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")
