"""A run as the driver plans it and every stage actor serves it, from its plan to its summary."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tmem_core.llm import BackboneConfig
from tmem_core.pipeline._config import RunSpec
from tmem_core.pipeline._contract import Contract


@dataclass(frozen=True)
class Run:
    """One run of a sweep: what the sweep asks of it (`spec`, which its id is made of), where
    it reads and writes, the backbones it calls, its questions and its contract (written
    when it is planned, closed when it is summarised). Picklable: the stage actors get it."""

    spec: RunSpec
    run_dir: Path
    bench_dir: Path  # the prepared benchmark
    backbone: BackboneConfig
    judges: tuple[BackboneConfig, ...]
    contract: Contract
    questions: tuple[tuple[str, str], ...] = ()  # (qid, conv_id), as selected
    construct: BackboneConfig | None = None  # the run's construct backbone, if it has one
    deps: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # per stage (`_deps`)
    probe: str = ""  # a test's probe (`_probe`); empty: none
    local: bool = False  # engines in this process instead of Ray actors (the plain loop)
    retrievals: int = 2  # retrievals at once per process (`Resources.retrievals_per_actor`)
    order: Mapping[str, int] = field(default_factory=dict)  # qid -> place among the sweep's

    @property
    def run_id(self) -> str:
        return self.spec.run_id

    @property
    def code(self) -> str | None:
        """The driver's git commit, on every record."""
        return self.contract.git_commit

    @property
    def method_backbone(self) -> BackboneConfig:
        """The backbone of the method's LLM steps (memory and construction)."""
        return self.construct or self.backbone

    @property
    def backbones(self) -> tuple[BackboneConfig, ...]:
        """Every backbone the run calls: its own, its construct backbone, its judges."""
        return (self.backbone, *([self.construct] if self.construct else []), *self.judges)
