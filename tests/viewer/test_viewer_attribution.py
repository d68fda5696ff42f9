"""The viewer in headless Chromium on the hand-written sweep whose every question's cause is
planted (tests/reports/test_attribution.py): causes and their filter, gold evidence shown,
read or not measurable, the paired differences of the side-by-side page."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from tests.reports.test_attribution import PLANTED, RUN, UNRELIABLE, write_planted
from tmem_core.reports import read_sweep, summarise


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    write_planted(tmp_path)
    return tmp_path


def test_causes_gold_and_paired_differences(planted: Path, serve: Callable[[Path], str],
                                            browser: Browser, artefacts: Path) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    url = serve(planted)
    page.goto(f"{url}#/run/{RUN.run_id}")
    page.wait_for_selector("#run-page table.questions")
    planted_causes: dict[str, list[str]] = {}
    for qid, (_, cause) in PLANTED.items():
        planted_causes.setdefault(cause, []).append(qid)
    assert sorted(page.locator("p.attribution a").all_inner_texts()) == sorted(
        f"{c} {len(q)}" for c, q in planted_causes.items())
    assert "P(correct | gold in context) 25.0% [" in page.locator("p.gold-context").inner_text()
    assert "(1 not measurable)" in page.locator("p.stats").inner_text()
    page.locator('p.attribution a[data-cause="synthesis"]').click()
    page.wait_for_function("document.querySelectorAll('a.question-link').length === 3")
    assert sorted(page.locator("a.question-link").all_inner_texts()) == sorted(
        planted_causes["synthesis"])
    assert page.locator("select[name=cause]").input_value() == "synthesis"
    page.screenshot(path=str(artefacts / "run-causes.png"), full_page=True)

    for qid, badges in (("q6", ["not measurable"]), ("q9", ["read"]), ("q11", ["read"]),
                        ("q7", ["in context", "missing"]), ("q8", ["missing"])):
        page.goto(f"{url}#/q/{RUN.run_id}/{qid}")
        page.locator(".question-head h1", has_text=f"question {qid}?").wait_for()
        assert page.locator("ul.evidence .badge").all_inner_texts() == badges, qid
        assert page.locator("dd.cause").inner_text() == PLANTED[qid][1]

    page.goto(f"{url}#/cmp/{RUN.run_id}/{UNRELIABLE.run_id}")
    page.wait_for_selector("#compare-page table.paired-table")
    paired = summarise(read_sweep(planted)).paired
    assert sorted(page.locator("table.paired-table td:first-child").all_inner_texts()) == sorted(
        paired["metric"])
    assert page.locator("table.paired-table td.p-value").all_inner_texts() == ["1.00"] * 2
    assert not errors
