"""The one HTML page of the viewer: linking its assets (served) or holding them (export)."""

from __future__ import annotations

import dataclasses
import json
import math
from importlib import resources
from typing import Any

import jinja2

_PACKAGE = resources.files("tmem_core.viewer")
_TEMPLATES = jinja2.Environment(loader=jinja2.PackageLoader("tmem_core.viewer"),
                                autoescape=jinja2.select_autoescape(["html"]))


def to_json(view: Any) -> str:
    """A view (dataclasses, lists, dicts) as JSON; NaN and infinities become null."""
    return json.dumps(_plain(view), separators=(",", ":"))


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def asset(name: str) -> str:
    return (_PACKAGE / "static" / name).read_text(encoding="utf-8")


def page(title: str, data: str | None = None) -> str:
    """The page; with `data` (JSON) it holds its script, style and data: no server needed."""
    inline = data is not None
    return _TEMPLATES.get_template("page.html").render(
        title=title, inline=inline, css=asset("viewer.css") if inline else "",
        js=asset("viewer.js") if inline else "",
        # inside <script>, "<" is escaped so that no string can close the element
        data=data.replace("<", "\\u003c") if data is not None else None)
