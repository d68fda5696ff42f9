"""The evidence audit page (`jobs.view --audit`) in headless Chromium: a person accepts one
low-confidence unit, rejects another and accepts a third one's whole evidence group, the audit
file holds exactly those decisions, the page shows them again after a reload, and
`jobs.annotate --apply` writes them into the prepared variant."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from playwright.sync_api import Browser

import jobs.annotate as annotate_job
from tmem_core.annotation import (
    AUDIT_FILE,
    PREPARED_DIR,
    SETTINGS_FILE,
    annotatable,
    candidate_groups,
    read_units,
    write_units,
)
from tmem_core.annotation._units import judged
from tmem_core.benchmarks import LoadRequest, build, read_prepared, tables_sha256, write_prepared
from tmem_core.schema import gold_from_table, messages_from_table, questions_from_table
from tmem_core.viewer import Background


def _annotation(tmp_path: Path) -> Path:
    """A base benchmark and an annotation folder of hand-judged units over it (two
    questions, five candidates each: one accepted, two to audit, two rejected)."""
    base = build("synthetic", LoadRequest(size=200, seed=0))
    base_dir = tmp_path / "base"
    write_prepared(base, base_dir)
    gold = gold_from_table(base.questions)
    messages = messages_from_table(base.messages)
    units = []
    for q in annotatable(questions_from_table(base.questions), gold)[:2]:
        candidates = [m for m in messages if m.conv_id == q.conv_id][:5]
        for rank, (m, label, lexical) in enumerate(zip(candidates, (
                "ANSWER", "NONE", "ANSWER", "NONE", "NONE"), (0.9, 0.8, 0.0, 0.1, 0.0),
                strict=True)):
            units.append(judged(q.qid, q.conv_id, q.question, gold[q.qid].answer or "",
                                m.msg_id, m.text, rank if rank != 2 else 30, label, lexical))
    folder = tmp_path / "annotation"
    folder.mkdir()
    write_units(folder, units)
    (folder / SETTINGS_FILE).write_text(json.dumps({
        "backbone": "smollm2", "model": "SmolLM2-135M-Instruct", "depth": 5, "calls": 2,
        "failed_calls": 0, "cached_calls": 0, "prompt_tokens": 1, "completion_tokens": 1,
        "base_request": {"prepared": str(base_dir)},
        "base_sha256": tables_sha256(base.messages, base.questions)}))
    return folder


def test_accept_and_reject_write_the_audit_file_and_the_variant(
        tmp_path: Path, browser: Browser, artefacts: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _annotation(tmp_path)
    low = read_units(folder, "low_confidence.jsonl")
    assert [u.status for u in low] == ["audit"] * 4  # NONE with signals, ANSWER without
    errors: list[str] = []
    with Background(None, audit=folder) as url:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url)  # the root sends a viewer of no sweep to its audit page
        page.wait_for_selector("table.units tbody tr.unit")
        rows = page.locator("tr.unit")
        assert rows.count() == len(low)
        assert [rows.nth(k).get_attribute("data-key") for k in range(rows.count())] == [
            u.key for u in low]
        rows.nth(0).locator("button.accept").click()
        page.wait_for_selector(f'tr.unit[data-key="{low[0].key}"] .decision.correct')
        rows.nth(1).locator("button.reject").click()
        page.wait_for_selector(f'tr.unit[data-key="{low[1].key}"] .decision.wrong')
        assert "4 low-confidence units, 2 decided" in page.locator(".summary").inner_text()
        group = next(g for g in candidate_groups(read_units(folder))
                     if low[2].key in {u.key for u in g.units})
        inherits = [u.key for u in low[2:] if u.key in {m.key for m in group.units}]
        rows.nth(2).locator("button.accept-group").click()
        page.wait_for_selector(f'tr.unit[data-key="{low[2].key}"] .decision.correct')
        page.screenshot(path=str(artefacts / "audit.png"), full_page=True)
        decisions = json.loads((folder / AUDIT_FILE).read_text())
        assert {k: v["decision"] for k, v in decisions.items()} == {
            low[0].key: "accept", low[1].key: "reject", group.key: "accept"}
        page.reload()
        page.wait_for_selector("table.units tbody tr.unit")
        shown = page.locator("tr.unit .decision").all_inner_texts()
        assert shown[:2] == ["accept", "reject"]
        assert shown[2:] == ["accept (group)" if u.key in inherits else "undecided"
                             for u in low[2:]]
        page.close()
    assert not errors
    monkeypatch.setattr(sys, "argv", ["annotate", "--apply", str(folder)])
    assert annotate_job.main() == 0
    gold = gold_from_table(read_prepared(folder / PREPARED_DIR).questions)
    assert low[0].msg_id in gold[low[0].qid].evidence_ids
    assert low[1].msg_id not in gold[low[1].qid].evidence_ids
    assert low[2].msg_id in gold[low[2].qid].evidence_ids  # accepted with its group
    accepted = [u for u in read_units(folder) if u.status == "accepted"]
    assert all(u.msg_id in gold[u.qid].evidence_ids for u in accepted)
