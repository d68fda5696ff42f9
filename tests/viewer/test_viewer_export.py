"""`jobs.report --html`: one file that opens from disk, with no server and no network, and
shows the same question page as the server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import Browser, Route

from tests.viewer.conftest import ROOT, check_question_page, richest_forest, run_dir
from tmem_core.reports import FIGURES

pytestmark = pytest.mark.slow  # a real sweep (the session's forest) on the embedded SmolLM2


def test_report_html_opens_from_disk(forest_sweep: Path, browser: Browser, artefacts: Path,
                                     tmp_path: Path) -> None:
    out = tmp_path / "report"
    done = subprocess.run([sys.executable, "-m", "jobs.report", str(forest_sweep), "--out",
                           str(out), "--html"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    html = out / "viewer.html"
    assert html.exists()

    tmem = run_dir(forest_sweep, "tmem")
    qid = richest_forest(tmem)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    fetched: list[str] = []

    def only_the_file(route: Route) -> None:
        fetched.append(route.request.url)
        route.abort()

    page.route("http*://**/*", only_the_file)  # anything beyond file: and data: fails
    page.goto(html.as_uri())
    page.wait_for_selector("#sweep-page")
    figures = page.locator(".figures img")
    assert figures.count() == len(FIGURES)
    assert all(figures.nth(k).evaluate("img => img.naturalWidth > 0")
               for k in range(figures.count()))

    page.goto(f"{html.as_uri()}#/q/{quote(tmem.name, safe='')}/{quote(qid, safe='')}")
    page.wait_for_selector("#question-page .forest")
    check_question_page(page, tmem, qid)
    page.screenshot(path=str(artefacts / "export-question-forest.png"), full_page=True)
    assert fetched == []
