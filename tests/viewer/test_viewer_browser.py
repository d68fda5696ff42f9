"""The viewer in headless Chromium on a real sweep: sweep -> run -> question -> side by side,
checked against the records the sweep wrote; screenshots kept under results/test-artifacts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from tests.viewer.conftest import check_question_page, records, richest_forest, run_dir
from tmem_core.reports import read_sweep, summarise

pytestmark = pytest.mark.slow  # a real sweep (the session's forest) on the embedded SmolLM2

VIEWPORT = {"width": 1400, "height": 1000}


def _page(browser: Browser) -> tuple[Page, list[str]]:
    page = browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return page, errors


def test_sweep_run_question_side_by_side(forest_sweep: Path, serve: Callable[[Path], str],
                                         browser: Browser, artefacts: Path) -> None:
    tmem, bm25 = run_dir(forest_sweep, "tmem"), run_dir(forest_sweep, "bm25")
    qid = richest_forest(tmem)
    page, errors = _page(browser)
    page.goto(serve(forest_sweep))

    page.locator("#sweep-page a.run-link", has_text="tmem").first.click()
    page.wait_for_selector("#run-page table.questions")
    shown = page.locator("a.question-link").all_inner_texts()
    assert sorted(shown) == sorted(records(tmem, "construct")["qid"])
    judged = records(tmem, "judge")
    for outcome, wanted in (("correct", judged["score"] >= 0.5), ("wrong", judged["score"] < 0.5)):
        page.select_option("select[name=outcome]", outcome)
        assert sorted(page.locator("a.question-link").all_inner_texts()) == sorted(
            judged.filter(wanted)["qid"])
    page.select_option("select[name=outcome]", "")
    category = judged.filter(qid=qid)["category"].item()
    page.select_option("select[name=category]", category)
    assert sorted(page.locator("a.question-link").all_inner_texts()) == sorted(
        judged.filter(category=category)["qid"])
    page.fill("input[name=text]", qid)  # search narrows the list to the question
    assert page.locator("a.question-link").all_inner_texts() == [qid]

    page.locator("a.question-link", has_text=qid).click()
    page.wait_for_selector("#question-page .forest")
    check_question_page(page, tmem, qid)
    page.screenshot(path=str(artefacts / "question-forest.png"), full_page=True)

    page.select_option("select[name=other]", bm25.name)
    page.get_by_role("button", name="compare").click()
    page.wait_for_selector("#side-by-side .columns")
    columns = page.locator(".column")
    assert columns.count() == 2
    for k, run in enumerate((tmem, bm25)):
        prediction = records(run, "answer").filter(qid=qid)["prediction"].item()
        assert columns.nth(k).locator(".prediction").inner_text() == prediction
    assert columns.nth(0).locator(".forest").count() == 1  # T-MEM's forest, BM25's list
    assert columns.nth(1).locator(".forest").count() == 0
    page.screenshot(path=str(artefacts / "side-by-side.png"), full_page=True)
    assert not errors


def test_compare_lists_where_runs_disagree(forest_sweep: Path, serve: Callable[[Path], str],
                                           browser: Browser) -> None:
    tmem, bm25 = run_dir(forest_sweep, "tmem"), run_dir(forest_sweep, "bm25")
    page, errors = _page(browser)
    page.goto(serve(forest_sweep))
    page.select_option("select[name=a]", tmem.name)
    page.select_option("select[name=b]", bm25.name)
    page.get_by_role("button", name="compare").click()
    page.wait_for_selector("#compare-page table.pairs")
    scores = [dict(records(run, "judge").group_by("qid").agg("score").iter_rows())
              for run in (tmem, bm25)]
    shared = sorted(set(scores[0]) & set(scores[1]))
    assert sorted(page.locator("a.pair-link").all_inner_texts()) == shared
    page.check("input[name=only]")
    differ = [q for q in shared
              if (sum(scores[0][q]) / len(scores[0][q]) >= 0.5)
              != (sum(scores[1][q]) / len(scores[1][q]) >= 0.5)]
    assert sorted(page.locator("a.pair-link").all_inner_texts()) == differ
    assert not errors


def test_intervals_causes_and_paired_differences(forest_sweep: Path,
                                                 serve: Callable[[Path], str],
                                                 browser: Browser, artefacts: Path) -> None:
    summary = summarise(read_sweep(forest_sweep))
    tmem, bm25 = run_dir(forest_sweep, "tmem"), run_dir(forest_sweep, "bm25")
    page, errors = _page(browser)
    page.goto(serve(forest_sweep))
    page.wait_for_selector("#sweep-page table.runs")
    for run in (tmem, bm25):
        row = summary.runs.filter(run_id=run.name).row(0, named=True)
        cell = page.locator("table.runs tr", has=page.locator(f'a[href="#/run/{run.name}"]'))
        assert cell.locator("td.accuracy .ci").inner_text() == (
            f" [{100 * row['accuracy_low']:.1f}%–{100 * row['accuracy_high']:.1f}%]")

    page.locator("#sweep-page a.run-link", has_text="tmem").first.click()
    page.wait_for_selector("#run-page table.questions")
    questions = summary.questions.filter(run_id=tmem.name)
    causes = dict(questions.group_by("cause").len().iter_rows())
    shown = page.locator("p.attribution a").all_inner_texts()
    assert sorted(shown) == sorted(f"{c} {n}" for c, n in causes.items())
    for cause in causes:
        page.select_option("select[name=cause]", cause)
        assert sorted(page.locator("a.question-link").all_inner_texts()) == sorted(
            questions.filter(cause=cause)["qid"])
        assert page.locator("td.cause").all_inner_texts() == [cause] * causes[cause]
    page.select_option("select[name=cause]", "")

    page.select_option("select[name=a]", bm25.name)
    page.select_option("select[name=b]", tmem.name)
    page.get_by_role("button", name="compare").click()
    page.wait_for_selector("#compare-page table.paired-table")
    paired = summary.paired.filter(run_a=bm25.name, run_b=tmem.name)
    assert paired.height >= 2  # accuracy and recall at least
    rows = page.locator("table.paired-table tbody tr")
    assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.metric)")) == sorted(
        paired["metric"])
    for p in paired.iter_rows(named=True):
        row = page.locator(f'table.paired-table tr[data-metric="{p["metric"]}"]')
        diff = f"{'+' if p['diff'] >= 0 else '−'}{abs(p['diff']):.3f}"
        assert row.locator("td.diff").inner_text().startswith(diff)
        shown_p = float(row.locator("td.p-value").inner_text())  # three significant digits
        assert shown_p == pytest.approx(p["p_value"], rel=5e-3)
    page.screenshot(path=str(artefacts / "compare-paired.png"), full_page=True)
    assert not errors
