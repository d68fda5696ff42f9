"""A sweep's results in the browser: every question's evidence, forest or steps, answer,
verdicts and LLM calls, and two runs side by side.

    app = viewer_app(Path("results/default"))          # ASGI; `python -m jobs.view` serves it
    export_html(Path("results/default"), Path("viewer.html"))   # one file, opens from disk
"""

from tmem_core.viewer._app import HOST, Background, viewer_app
from tmem_core.viewer._export import VIEWER_FILE, export_html

__all__ = [
    "HOST",
    "VIEWER_FILE",
    "Background",
    "export_html",
    "viewer_app",
]
