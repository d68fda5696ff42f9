"""The package layering: no import circle between tmem_core's packages, and reading results
imports neither Ray nor the methods nor the pipeline."""

from __future__ import annotations

import ast
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "tmem_core"


def _package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "tmem_core" and len(parts) > 1 else None


def _imports(path: Path) -> set[str]:
    """Every tmem_core module `path` imports, at any depth (function-level imports too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("tmem_core.")}


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        own = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        deps = {p for m in _imports(path) if (p := _package_of(m)) and p != own}
        graph.setdefault(own, set()).update(deps)
    return graph


def test_no_import_circle_between_packages() -> None:
    graph = package_graph()
    assert {"results", "pipeline", "reports", "methods"} <= set(graph)
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"import circle: {' -> '.join(exc.args[1])}") from None
    assert order.index("results") < order.index("pipeline")
    assert order.index("results") < order.index("reports")
    assert "pipeline" not in graph["reports"] and "methods" not in graph["results"]


def test_reading_results_imports_neither_ray_nor_methods() -> None:
    probe = ("import sys, tmem_core.reports, tmem_core.results; "
             "print(' '.join(m for m in sys.modules if m.split('.')[0] == 'ray' "
             "or m.startswith(('tmem_core.methods', 'tmem_core.pipeline'))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.split() == []
