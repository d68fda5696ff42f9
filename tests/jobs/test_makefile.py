"""The install off this machine: `make setup` takes torch's CPU build, alone, from PyTorch's
CPU wheel index or from what pip already has, does not wait on an index it cannot reach, and
fails with one line naming the build and its source when nothing has it. Run on a scratch
copy of the Makefile and lock with a scratch venv (never the project's own .venv); every
index is a local port nothing listens on, and pip only pretends to install (dry run)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TORCH = next(line for line in (ROOT / "requirements.lock").read_text().splitlines()
             if line.startswith("torch=="))
NOWHERE = "http://127.0.0.1:9"  # the discard port: connection refused at once


def _targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout of the install files with its own venv (pip included)."""
    folder = tmp_path_factory.mktemp("checkout")
    for name in ("Makefile", "requirements.lock", "pyproject.toml"):
        shutil.copy(ROOT / name, folder / name)
    subprocess.run([sys.executable, "-m", "venv", str(folder / ".venv")], check=True)
    return folder


def _make(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """make in `folder` with pip's configuration hidden (PIP_CONFIG_FILE=/dev/null, no PIP_*
    variables: this machine's own wheel folder and indexes are out of sight)."""
    for stamp in (folder / ".venv").glob(".torch-*"):
        stamp.unlink()
    hidden = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "MAKE"))}
    return subprocess.run(
        ["make", "--no-print-directory", *args], cwd=folder, capture_output=True, text=True,
        timeout=300, check=False,
        env={**hidden, "PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": f"{NOWHERE}/simple",
             "PIP_DRY_RUN": "1", "TORCH_INDEX": f"{NOWHERE}/whl/cpu", **env})


def test_setup_takes_torch_alone_from_pytorchs_cpu_index_first(scratch: Path) -> None:
    done = _make(scratch, "-n", "setup", TORCH_INDEX="https://download.pytorch.org/whl/cpu")
    assert done.returncode == 0, done.stderr
    plan = done.stdout
    torch_line = next(i for i, line in enumerate(plan.splitlines()) if f"'{TORCH}'" in line)
    lock_line = next(i for i, line in enumerate(plan.splitlines())
                     if "-r requirements.lock" in line)
    assert torch_line < lock_line
    head = plan.splitlines()[torch_line - 1] + plan.splitlines()[torch_line]
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in head
    assert "--timeout 10 --retries 1" in head and "--no-deps" in head


def test_no_document_names_a_target_that_does_not_exist() -> None:
    named = set()
    for doc in ("README.md", "pyproject.toml", "Makefile", "cluster/README.md",
                "results/README.md", "datasets/README.md"):
        text = (ROOT / doc).read_text()
        named |= set(re.findall(r"`make ([a-z][\w-]*)", text))
        named |= set(re.findall(r"Makefile: ([a-z][\w-]*)", text))
    assert named and named <= _targets()


def test_without_any_source_of_torch_setup_fails_with_one_line(scratch: Path) -> None:
    done = _make(scratch, "torch")
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert TORCH in errors[0] and f"{NOWHERE}/whl/cpu" in errors[0]
    assert "Traceback" not in done.stderr + done.stdout and "ERROR:" not in done.stderr
    assert "No matching distribution" in (scratch / ".venv" / "torch-install.log").read_text()


def _wheel(folder: Path) -> Path:
    """A wheel of the locked torch build (metadata only: pip pretends to install it)."""
    version = TORCH.split("==")[1]
    info = f"torch-{version}.dist-info"
    path = folder / f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{info}/METADATA",
                       f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                       "Root-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
    return path


def test_an_unreachable_index_is_not_waited_on(scratch: Path, tmp_path: Path) -> None:
    _wheel(tmp_path)
    done = _make(scratch, "torch", PIP_FIND_LINKS=str(tmp_path))
    assert done.returncode == 0, done.stderr  # pip found the build in its find-links
    assert list((scratch / ".venv").glob(".torch-*"))
    log = (scratch / ".venv" / "torch-install.log").read_text()
    # one retry per index it could not reach, not pip's default five with back-off
    assert log.count("Retrying") <= 2 and "total=4" not in log
