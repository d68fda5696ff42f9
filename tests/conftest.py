"""Shared fixtures: the real LoCoMo file (from ../shared) and the synthetic fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
LOCOMO = Path(os.environ.get(
    "TMEM_LOCOMO_PATH", ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10_dev.json"))


@pytest.fixture(scope="session")
def locomo_path() -> Path:
    if not LOCOMO.exists():
        pytest.fail(f"LoCoMo data missing at {LOCOMO}: tests need ../shared beside the checkout")
    return LOCOMO


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES
