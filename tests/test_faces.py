"""Each package's face (its `__all__`) holds what code outside the package uses, at most
about 30 names, none used only by tests (tests import from the module they test)."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_NAMES = 32
DOCS = (ROOT / "README.md", ROOT / "cluster" / "README.md")


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _inside(module: str, face: str) -> bool:
    """A module of the face's own package: the face itself or one of its private modules
    (a public subpackage uses its parent's face as any other code does)."""
    rest = module.removeprefix(face + ".") if module.startswith(face + ".") else None
    return module == face or (rest is not None and rest.split(".")[0].startswith("_"))


def _faces() -> dict[str, list[str]]:
    faces = {}
    for init in sorted((ROOT / "tmem_core").rglob("__init__.py")):
        for node in ast.parse(init.read_text()).body:
            if isinstance(node, ast.Assign) and any(
                    getattr(target, "id", "") == "__all__" for target in node.targets):
                assert isinstance(node.value, ast.List | ast.Tuple)
                faces[_module(init)] = [ast.literal_eval(e) for e in node.value.elts]
    return faces


def _importers(faces: dict[str, list[str]]) -> dict[str, dict[str, set[str]]]:
    """face -> name -> the kinds of code that import it ("code" or "test")."""
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    paths = (p for d in ("tmem_core", "jobs", "perf", "tests") for p in (ROOT / d).rglob("*.py"))
    for path in paths:
        module = _module(path)
        kind = "test" if path.relative_to(ROOT).parts[0] == "tests" else "code"
        if path.relative_to(ROOT).parts[:2] == ("tests", "extending"):
            kind = "code"  # the extension examples are what a plugin author writes
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in faces and not node.level:
                if _inside(module, node.module):
                    continue
                for alias in node.names:
                    found[node.module][alias.name].add(kind)
    for doc in DOCS:
        for match in re.finditer(r"from (tmem_core[\w.]*) import ([\w, ()\n]+)", doc.read_text()):
            for name in re.findall(r"\w+", match.group(2)):
                found[match.group(1)][name].add("code")
    return found


def test_every_face_is_small_and_used_outside_its_package_and_its_tests() -> None:
    faces = _faces()
    importers = _importers(faces)
    problems = []
    for face, names in faces.items():
        if len(names) > MAX_NAMES:
            problems.append(f"{face}: {len(names)} names (at most {MAX_NAMES})")
        for name in names:
            kinds = importers[face].get(name, set())
            if "code" not in kinds:
                used = "only by tests" if kinds else "by nothing outside the package"
                problems.append(f"{face}.{name} is used {used}")
    assert not problems, "\n".join(problems)
