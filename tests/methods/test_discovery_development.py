"""The development split of discovery's defaults: messages with their own times only, LoCoMo's
session stamps reported, never chosen on; the defaults are an admissible point of its grid."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from tmem_core.methods.tmem import DiscoveryConfig
from tmem_core.methods.tmem._development import GRID, grid, lone_seed_fails, split

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_development_reads_messages_with_their_own_times(locomo_path: Path) -> None:
    sample = FIXTURES / "evermembench" / "dynamic"
    development = split("development", locomo_path, sample)
    reported = split("reported", locomo_path)
    assert {p.benchmark for p in development} == {"synthetic", "evermembench"}
    assert {p.benchmark for p in reported} == {"synthetic", "locomo"}
    seeds = {p.request.seed for p in development if p.benchmark == "synthetic"}
    assert not seeds & {p.request.seed for p in reported if p.benchmark == "synthetic"}
    assert {p.request.variant for p in development} >= {"base", "interleaved"}


def test_the_defaults_are_an_admissible_grid_point() -> None:
    defaults = DiscoveryConfig()
    assert lone_seed_fails(defaults)
    searched = {k: asdict(defaults)[k] for k in GRID}
    assert searched in [{k: asdict(c)[k] for k in GRID} for c in grid(defaults)]
