"""Fixtures of the viewer tests: a small real sweep with a T-MEM forest (built once per
session), the viewer served on 127.0.0.1, Debian's Chromium driven by Playwright, and where
screenshots are kept."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.conftest import write_sweep
from tests.ray_head import run_sweep
from tmem_core.viewer import Background

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")  # Debian's package: `make browser` installs it
ARTEFACTS = ROOT / "results" / "test-artifacts" / "viewer"  # git-ignored, kept for reading
SWEEP = "viewer-real"


@pytest.fixture(scope="session")
def forest_sweep(tmp_path_factory: pytest.TempPathFactory, ray_address: str) -> Path:
    """The default sweep's benchmark and settings (the embedded SmolLM2, top_k 12, budget
    1,024) with only BM25 and T-MEM on its first two questions: a real forest, cheaply."""
    tmp = tmp_path_factory.mktemp("viewer")
    config = write_sweep(tmp, SWEEP, [{"name": "synthetic", "size": 200, "seed": 0, "limit": 2}],
                         {"methods": ["bm25", "tmem"], "judges": ["smollm2"], "top_k": [12],
                          "budget": [1024]},
                         resources={"retrieve_actors": 1, "llm_actors": 1, "batch_size": 2})
    run_sweep(config, ray_address, timeout=1800)
    return tmp / "results" / SWEEP


@pytest.fixture(scope="session")
def artefacts() -> Path:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    return ARTEFACTS


@pytest.fixture
def serve() -> Iterator[Callable[[Path], str]]:
    """Serves a sweep's viewer for the test; gives its URL."""
    with ExitStack() as stack:
        yield lambda sweep: stack.enter_context(Background(sweep))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless Debian Chromium under Playwright (no browser download), for a module: the
    sync API holds an event loop on the thread while it is open, which later tests on the
    same test worker (LLM clients that refuse to block inside a running loop) must not meet."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} missing: `make browser` installs Debian's chromium")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"])
        yield chromium
        chromium.close()


def run_dir(sweep: Path, method: str) -> Path:
    """The folder of the sweep's run of `method` (its contract names the method)."""
    (found,) = [p.parent for p in sweep.glob("*/contract.json")
                if json.loads(p.read_text())["config"]["method"] == method]
    return found


def records(run: Path, store: str) -> pl.DataFrame:
    """A store's successful records, read straight from its Parquet parts."""
    return pl.read_parquet(run / store / "*.parquet").filter("ok")


def richest_forest(run: Path) -> str:
    """The T-MEM question whose forest has the most nodes."""
    sizes = {r["qid"]: len(json.loads(r["payload"])["forest"])
             for r in records(run, "construct").iter_rows(named=True)}
    return max(sizes, key=sizes.__getitem__)


def check_question_page(page: Page, run: Path, qid: str) -> None:
    """The question page shows the run's own records: every forest node with its relation,
    each judge's verdict, each LLM call's prompt tokens."""
    for node in _forest(run, qid):
        label = page.locator(f'li.node[data-id="{node["id"]}"] > .node-head .rel')
        assert label.inner_text() == node["relation"]
    judged = records(run, "judge").filter(qid=qid)
    verdicts = page.locator("table.verdicts tbody tr .verdict").all_inner_texts()
    assert verdicts == ["correct" if s >= 0.5 else "wrong" for s in judged["score"]]
    shown = page.locator("table.calls tbody td.tokens").all_inner_texts()
    calls = records(run, "calls").filter(qid=qid)
    assert sorted(shown) == sorted(f"{t:,}" for t in calls["prompt_tokens"])


def _forest(run: Path, qid: str) -> list[dict[str, Any]]:
    row = records(run, "construct").filter(qid=qid).row(0, named=True)
    nodes: list[dict[str, Any]] = json.loads(row["payload"])["forest"]
    return nodes
