"""The paper's figures beside ours: the bundled table, its match key, and the report's paper
column over hand-written sweeps whose settings match (or miss) a paper row."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.reports.conftest import QUESTIONS, QSpec, locomo_run, write_locomo_data, write_run
from tmem_core.methods import method_names
from tmem_core.pipeline import BenchmarkConfig, RunSpec
from tmem_core.reports import _paper, read_sweep, summarise, write_report
from tmem_core.reports._paper import (
    FIGURES_FILE,
    JUDGED,
    paper_comparators,
    paper_figures,
    paper_table,
)
from tmem_core.results._sweep import RUN_SCHEMA

GROUPMEMBENCH = BenchmarkConfig("groupmembench", limit=5)


def _groupmembench_run(method: str, judges: tuple[str, ...] | None = None,
                       **changes: object) -> RunSpec:
    """A run as `locomo_run` makes it, of GroupMemBench (the hand-written data serves),
    judged by its own backbone as the paper's runs were unless `judges` says otherwise."""
    run = locomo_run("s", method=method, **changes)
    return dataclasses.replace(run, benchmark=GROUPMEMBENCH, judges=judges or (run.backbone,))


def _recall_percent(questions: tuple[QSpec, ...]) -> float:
    scores = [len(set(q.evidence) & set(q.context)) / len(q.evidence) for q in questions]
    return 100 * sum(scores) / len(scores)


def test_the_table_names_only_registered_methods_and_every_experiment() -> None:
    figures = paper_figures()
    registered = set(method_names())
    assert all(f.method in registered for f in figures if f.method)
    assert {f.experiment for f in figures} == {"Exp-1", "Exp-2", "Exp-3", "Exp-4", "Exp-5",
                                               "Exp-6", "E.1", "E.2", "E.3"}
    values = {f.id: f.value for f in figures}
    assert (values["exp2-tmem-36"], values["exp2-bm25-expand-36"], values["exp5-tmem-3"],
            values["e3-untyped-36"]) == (72.8, 56.6, 38.32, 58.39)


def test_a_report_over_a_matching_sweep_shows_the_paper_column(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    write_locomo_data(root)
    matching = _groupmembench_run("bm25_expand", top_k=36)
    write_run(root, matching)
    write_run(root, _groupmembench_run("bm25_expand", top_k=12))
    locomo = locomo_run("s", method="bm25_expand", top_k=36, judges=("b1",))  # no Exp-2 figure
    write_run(root, locomo)
    summary = summarise(read_sweep(root))
    paper = summary.paper.filter(experiment="Exp-2")
    row = paper.row(0, named=True)
    assert paper.height == 1 and row["run_id"] == matching.run_id
    flat = summary.paper.filter(figure="exp3-flat-36")  # Exp-3 names no benchmark
    assert sorted(flat["run_id"]) == sorted([matching.run_id, locomo.run_id])
    ours = _recall_percent(QUESTIONS)
    assert (row["figure"], row["paper"], row["match"]) == ("exp2-bm25-expand-36", 56.6, "loose")
    assert row["ours"] == pytest.approx(ours) and row["difference"] == pytest.approx(ours - 56.6)
    interval = summary.runs.row(by_predicate=pl.col("run_id") == matching.run_id, named=True)
    low, high = 100 * interval["recall_low"], 100 * interval["recall_high"]
    assert row["inside_interval"] is (low <= 56.6 <= high)  # the paper's figure in ours
    report = write_report(root, tmp_path / "out").markdown.read_text()
    section = report.split("## Paper figures")[1].split("## ")[0]
    header = next(line for line in section.splitlines() if line.startswith("| run"))
    assert "| paper |" in header and "| difference |" in header
    assert "inside_interval" in header
    assert "| 56.6 |" in section and f"{ours - 56.6:+.4g}".lstrip("+") in section


@pytest.fixture(scope="module")
def margin_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """T-MEM, BM25 (a paper comparator, worse), full context (no paper comparator, as good
    as T-MEM) and a T-MEM variant, in one setting."""
    root = tmp_path_factory.mktemp("margins") / "sweep"
    write_locomo_data(root)
    worse = tuple(dataclasses.replace(q, scores=(0.0,) * len(q.scores)) for q in QUESTIONS)
    setting: dict[str, Any] = {"backbone": "DeepSeek-V4-Flash", "top_k": 36, "budget": 8192}
    for method, questions in (("tmem", QUESTIONS), ("bm25", worse),
                              ("full_context", QUESTIONS), ("tmem_untyped", QUESTIONS)):
        write_run(root, _groupmembench_run(method, **setting), questions)
    return root


def _margin_row(root: Path) -> tuple[dict[str, object], dict[str, float]]:
    summary = summarise(read_sweep(root))
    assert summary.paper.filter(figure="exp1-groupmembench-gpt-5.5").is_empty()
    accuracy = dict(summary.runs.select("method", "accuracy").iter_rows())
    return (summary.paper.filter(figure="exp1-groupmembench-deepseek-v4-flash").row(
        0, named=True), accuracy)


def test_a_margin_is_taken_over_the_papers_comparators_and_loose_without_all_of_them(
        margin_sweep: Path) -> None:
    """The sweep lacks most of the paper's comparator set: the margin is over the one it ran
    (BM25), never over full context, and says so."""
    margin, accuracy = _margin_row(margin_sweep)
    assert set(paper_comparators()) == {"HippoRAG2", "A-Mem", "MemGAS", "StructMem",
                                        "Hindsight", "BM25", "Embedding"}
    assert margin["match"] == "loose: compared against bm25"
    assert margin["ours"] == pytest.approx(100 * (accuracy["tmem"] - accuracy["bm25"]))
    assert accuracy["full_context"] == accuracy["tmem"] > accuracy["bm25"]


def test_a_margin_matches_exactly_a_sweep_that_ran_the_whole_comparator_set(
        margin_sweep: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_paper, "paper_comparators", lambda: {"BM25": "bm25"})
    margin, accuracy = _margin_row(margin_sweep)
    assert margin["match"] == "exact"
    assert margin["ours"] == pytest.approx(100 * (accuracy["tmem"] - accuracy["bm25"]))
    monkeypatch.setattr(_paper, "paper_comparators", lambda: {"HippoRAG2": "hipporag2"})
    margin, _ = _margin_row(margin_sweep)  # none of the set ran: every other non-T-MEM one
    assert margin["match"] == "loose: compared against bm25, full_context"
    assert margin["ours"] == pytest.approx(0.0)


def test_a_figure_on_accuracy_needs_the_paper_s_judge(tmp_path: Path) -> None:
    """A run judged by another model, or pooled over judges, gets no accuracy figure of the
    paper (whose answers each answer model judged itself), and is labelled so."""
    root = tmp_path / "sweep"
    write_locomo_data(root)
    setting: dict[str, Any] = {"backbone": "DeepSeek-V4-Flash", "top_k": 36, "budget": 8192}
    for judges in (("gpt-5.5",), ("gpt-5.5", "DeepSeek-V4-Flash")):
        for method in ("tmem", "bm25"):
            write_run(root, _groupmembench_run(method, judges=judges, **setting))
    summary = summarise(read_sweep(root))
    assert set(summary.runs["judged_by"]) == {"gpt-5.5", "pooled: gpt-5.5, DeepSeek-V4-Flash"}
    metrics = set(summary.paper["metric"])
    assert metrics and not metrics & set(JUDGED)  # figures without a judge still match
    report = write_report(root, tmp_path / "out").markdown.read_text()
    accuracy = report.split("## Accuracy")[1].split("## ")[0]
    assert "pooled: gpt-5.5, DeepSeek-V4-Flash" in accuracy


def test_exp5_figures_match_their_condition_and_the_interval_hook(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.json").write_text(json.dumps({"revision_chains": {"condition": 2}}))
    run = {name: None for name in RUN_SCHEMA} | {
        "run_id": "r", "benchmark": "groupmembench", "dataset": "d", "method": "tmem",
        "backbone": "b", "judges": "b", "top_k": 36, "budget": 8192, "data_dir": str(data),
        "accuracy": 0.4, "recall": None, "tokens": 10, "method_cost_usd": 0.0}
    runs = pl.DataFrame([{**run, "categories": "knowledge_update"},
                         {**run, "run_id": "all questions"},
                         {**run, "run_id": "more", "categories": "knowledge_update,temporal"}])
    table = paper_table(runs, interval=lambda run_id, metric: (35.0, 45.0))
    exp5 = table.filter(experiment="Exp-5")  # beside Knowledge Update accuracy only
    assert exp5["figure"].to_list() == ["exp5-tmem-2"] and exp5["run_id"].to_list() == ["r"]
    assert exp5["ours"].item() == pytest.approx(40.0)
    assert exp5["inside_interval"].item() is True  # 41.12 lies in [35, 45]


def test_the_newest_table_links_methods_and_never_changes_a_figure() -> None:
    assert FIGURES_FILE.name == "paper_figures.v3.toml"
    first = {f.id: f for f in paper_figures(FIGURES_FILE.with_name("paper_figures.v1.toml"))}
    second = {f.id: f for f in paper_figures(FIGURES_FILE.with_name("paper_figures.v2.toml"))}
    newest = {f.id: f for f in paper_figures()}
    assert newest.keys() == first.keys() == second.keys()
    assert {i: dataclasses.replace(f, categories=()) for i, f in newest.items()} == second
    assert {i for i, f in newest.items() if f.categories} == {"exp5-tmem-1", "exp5-tmem-2",
                                                              "exp5-tmem-3"}
    assert all((f.value, f.setting, f.section, f.paper_method) == (
        first[f.id].value, first[f.id].setting, first[f.id].section, first[f.id].paper_method)
        for f in newest.values())
    linked = {f.id: (f.method, f.metric) for f in newest.values()
              if f.method and not first[f.id].method}
    assert linked["exp2-tmem-36"] == ("tmem", "selection_recall")
    assert linked["e2-global-36"] == ("tmem_global", "selection_recall")
    assert linked["exp4-wo-discovery-gpt-5.5"] == ("tmem_wo_discovery", "loss")
    assert linked["e3-flat-36"] == ("tmem_wo_structuring", "accuracy")
    assert "e1-memgas-cost" not in linked and "exp2-hipporag2-36" not in linked


def test_exp3_gains_of_the_forest_match_any_benchmark_loosely(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    write_locomo_data(root)
    worse = tuple(dataclasses.replace(q, scores=(0.0,) * len(q.scores)) for q in QUESTIONS)
    self_judged = {"judges": ("b1",)}  # as the paper judged
    forest = locomo_run("s", method="tmem_bm25_expand_forest", top_k=36, **self_judged)
    flat = locomo_run("s", method="bm25_expand", top_k=36, **self_judged)
    write_run(root, forest)
    write_run(root, flat, worse)
    write_run(root, locomo_run("s", method="tmem_bm25_expand_forest", top_k=12,
                               **self_judged))  # no figure
    summary = summarise(read_sweep(root))
    accuracy = dict(summary.runs.select("run_id", "accuracy").iter_rows())
    gains = summary.paper.filter(experiment="Exp-3")
    assert sorted(gains["figure"].to_list()) == ["exp3-flat-36", "exp3-gain-36"]
    gain = gains.row(by_predicate=pl.col("figure") == "exp3-gain-36", named=True)
    assert (gain["run_id"], gain["match"]) == (forest.run_id, "loose")
    assert gain["ours"] == pytest.approx(100 * (accuracy[forest.run_id] - accuracy[flat.run_id]))
    assert summary.paper.filter(experiment="E.2").is_empty()  # GroupMemBench's, by name


def test_exp2_compares_the_evidence_after_selection(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    write_locomo_data(root)
    selected = tuple(dataclasses.replace(q, selected=q.evidence[:1]) for q in QUESTIONS)
    tmem = _groupmembench_run("tmem", backbone="deepseek-v4-flash", top_k=48)
    write_run(root, tmem, selected)
    summary = summarise(read_sweep(root))
    row = summary.paper.filter(experiment="Exp-2").row(0, named=True)
    assert (row["figure"], row["metric"], row["run_id"]) == (
        "exp2-tmem-48", "selection_recall", tmem.run_id)
    ours = summary.runs.row(0, named=True)["selection_recall"]
    assert 0 < ours < 1 and row["ours"] == pytest.approx(100 * ours)
    assert row["ours"] != pytest.approx(_recall_percent(QUESTIONS))  # not the context's recall
