"""Reports of a small real sweep (embedded model), checked against the raw Parquet records."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from statistics import fmean
from typing import Any

import matplotlib.image
import polars as pl
import pyarrow.parquet as pq
import pytest
from matplotlib.figure import Figure
from PIL import Image

from tests.reports.conftest import ROOT
from tmem_core.benchmarks import read_prepared
from tmem_core.reports import FIGURES, Summary, read_sweep, summarise, write_report
from tmem_core.reports import _stats as stats
from tmem_core.reports._report import REPORT_FILE
from tmem_core.results import RECORD_STAGES, stage_store
from tmem_core.results._current import expected_deps, question_data

pytestmark = pytest.mark.slow  # a real sweep on the embedded SmolLM2

INJECTED = "retrieve: injected failure"


def _raw(run_dir: Path, stage: str) -> list[dict[str, Any]]:
    return [row for part in sorted((run_dir / stage).glob("part-*.parquet"))
            for row in pq.read_table(part).to_pylist()]


def _latest_ok(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["ok"] and row["written_at"] >= latest.get(row["key"], {}).get("written_at", 0):
            latest[row["key"]] = row
    return list(latest.values())


def _run_dirs(sweep: Path) -> list[Path]:
    return sorted(p.parent for p in sweep.glob("*/contract.json"))


@pytest.fixture(scope="module")
def summary(real_sweep: Path) -> Summary:
    return summarise(read_sweep(real_sweep))


@pytest.fixture(scope="module")
def errored_sweep(real_sweep: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the real sweep whose first run has one more question, failed at retrieve
    under the run's dependencies (as its retrieve stage would have written it)."""
    copy = tmp_path_factory.mktemp("errored") / real_sweep.name
    shutil.copytree(real_sweep, copy, ignore=shutil.ignore_patterns("report"))
    run_dir = _run_dirs(copy)[0]
    taken = {r["qid"] for r in _raw(run_dir, "retrieve")}
    (data_dir,) = (copy / "data").iterdir()
    questions = pq.read_table(data_dir / "questions.parquet").select(["qid", "conv_id"])
    spare = next(q for q in questions.to_pylist() if q["qid"] not in taken)
    prepared = read_prepared(data_dir)
    deps = expected_deps(json.loads((run_dir / "contract.json").read_text())["deps"],
                         "retrieve", question_data(prepared.messages, prepared.questions))
    assert deps is not None
    retrieve = stage_store(run_dir, "retrieve")
    retrieve.append([{"run_id": run_dir.name, "key": spare["qid"], **spare, "ok": False,
                      "error": INJECTED, "latency_s": 0.0, "deps": deps[spare["qid"]]}])
    return copy


def test_counts_and_sums_match_the_raw_records(real_sweep: Path, summary: Summary) -> None:
    runs = {r["run_id"]: r for r in summary.runs.to_dicts()}
    assert len(runs) == 2
    for run_dir in _run_dirs(real_sweep):
        run = runs[run_dir.name]
        qids = {r["qid"] for s in RECORD_STAGES for r in _raw(run_dir, s)}
        assert run["questions"] == len(qids) == 4
        calls = [c for c in _latest_ok(_raw(run_dir, "calls"))
                 if c["stage"] != "calibration"]  # the judges' controls: not the method's
        assert run["tokens"] == sum(c["prompt_tokens"] + c["completion_tokens"] for c in calls)
        assert run["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in calls))
        tokens = summary.tokens.filter(run_id=run_dir.name, stage="judge").row(0, named=True)
        assert tokens["tokens"] == sum(c["prompt_tokens"] + c["completion_tokens"]
                                       for c in calls if c["stage"] == "judge")
        judge_errors = sum(not r["ok"] for r in _raw(run_dir, "judge"))
        counts = summary.error_counts.filter(run_id=run_dir.name, store="judge")
        assert counts.get_column("failed_attempts").item() == judge_errors


def test_the_sweeps_summary_lines_give_the_reports_accuracy(real_sweep: Path,
                                                            summary: Summary) -> None:
    log = (real_sweep.parents[1] / "sweep.log").read_text()
    found = re.findall(r"run (\S+): \d+ questions, accuracy (\S+) (?:UNRELIABLE \(.*?\) )?"
                       r"\((\d+) judged", log)
    lines = {run_id: (accuracy, int(judged)) for run_id, accuracy, judged in found}
    runs = summary.runs.to_dicts()
    assert len(lines) == len(runs) == 2
    for run in runs:
        assert lines[run["run_id"]] == (f"{run['accuracy']:.3f}", run["scored"])


def test_category_accuracy_matches_the_raw_records(real_sweep: Path, summary: Summary) -> None:
    for run_dir in _run_dirs(real_sweep):
        judged = _latest_ok(_raw(run_dir, "judge"))
        category = judged[0]["category"]
        per_repeat: dict[int, list[float]] = defaultdict(list)
        for record in judged:
            if record["category"] == category:
                per_repeat[record["repeat"]].append(record["score"])
        expected = fmean(fmean(scores) for scores in per_repeat.values())
        row = summary.accuracy.filter(run_id=run_dir.name, category=category, judge="all")
        assert row.get_column("accuracy").item() == pytest.approx(expected)
        assert row.get_column("repeats").item() == len(per_repeat)


def test_recall_matches_the_raw_records(real_sweep: Path, summary: Summary) -> None:
    (data_dir,) = (real_sweep / "data").iterdir()
    gold = {r["qid"]: r for r in pq.read_table(data_dir / "questions.parquet").to_pylist()}
    for run_dir in _run_dirs(real_sweep):
        values = [len(set(gold[r["qid"]]["evidence_ids"]) & set(r["context_ids"]))
                  / len(set(gold[r["qid"]]["evidence_ids"]))
                  for r in _latest_ok(_raw(run_dir, "construct"))
                  if gold[r["qid"]]["evidence_ids"]
                  and gold[r["qid"]]["answer_kind"] != "abstention"]
        row = summary.recall.filter(run_id=run_dir.name, category="overall")
        assert row.get_column("questions").item() == len(values)
        assert row.get_column("recall").item() == pytest.approx(fmean(values))


def test_report_renders(real_sweep: Path, tmp_path: Path) -> None:
    files = write_report(real_sweep, tmp_path / "out")
    text = files.markdown.read_text()
    for heading in ("## Runs", "## Accuracy per category", "## LoCoMo F1",
                    "## Evidence recall@k", "## Failure attribution", "## Paired differences",
                    "## Tokens per question by stage", "## Time per stage", "## Errors",
                    "## Across token budgets"):
        assert heading in text
    runs_table = text.split("## Runs")[1].split("## ")[0]
    assert re.search(r"\| [\d.]+ \[[\d.]+, [\d.]+\]", runs_table)  # accuracy [interval]
    attribution = text.split("## Failure attribution")[1].split("\n## ")[0]
    assert "| correct | judging |" in attribution and "P(correct | gold in context)" in attribution
    assert "| top_k | accuracy | 4 |" in text.split("## Paired differences")[1]
    assert set(files.figures) == set(FIGURES)
    for path in files.figures.values():
        assert f"]({path.name})" in text
        with Image.open(path) as image:
            image.verify()
            assert image.format == "PNG" and image.size[0] > 400
        assert matplotlib.image.imread(path).ndim == 3
    runs = pq.read_table(files.tables["runs"])
    assert runs.num_rows == 2 and "tokens_per_question" in runs.column_names
    for path in files.tables.values():
        pq.read_table(path)


def _scores(run_dir: Path) -> dict[str, list[float]]:
    """Each question's judge scores (judges x repeats), from the raw records."""
    found: dict[str, list[float]] = defaultdict(list)
    for record in _latest_ok(_raw(run_dir, "judge")):
        found[record["qid"]].append(record["score"])
    return found


def test_intervals_and_paired_differences_match_the_raw_records(real_sweep: Path,
                                                               summary: Summary) -> None:
    first, second = _run_dirs(real_sweep)
    for run_dir in (first, second):
        row = summary.runs.filter(run_id=run_dir.name).row(0, named=True)
        expected = stats.interval(list(_scores(run_dir).values()))  # 2 repeats: bootstrap
        assert expected.method == stats.BOOTSTRAP
        assert (row["accuracy_low"], row["accuracy_high"]) == pytest.approx(
            (expected.low, expected.high))
    a, b = sorted((first, second), key=lambda d: summary.runs.filter(
        run_id=d.name)["top_k"].item())
    paired = summary.paired.filter(metric="accuracy").row(0, named=True)
    assert (paired["run_a"], paired["run_b"], paired["varied"]) == (a.name, b.name, "top_k")
    scores_a, scores_b = _scores(a), _scores(b)
    shared = sorted(scores_a.keys() & scores_b.keys())
    expected_pair = stats.paired([scores_a[q] for q in shared], [scores_b[q] for q in shared])
    assert paired["questions"] == len(shared) == 4
    assert paired["diff"] == pytest.approx(expected_pair.diff)
    assert (paired["ci_low"], paired["ci_high"], paired["p_value"]) == pytest.approx(
        (expected_pair.interval.low, expected_pair.interval.high, expected_pair.p_value))


def test_attribution_matches_the_raw_records(real_sweep: Path, summary: Summary) -> None:
    for run_dir in _run_dirs(real_sweep):
        scores = _scores(run_dir)
        causes = dict(summary.questions.filter(run_id=run_dir.name).select(
            "qid", "cause").iter_rows())
        assert {q for q, c in causes.items() if c == "correct"} == {
            q for q, s in scores.items() if fmean(s) >= 0.5}
        counts = summary.attribution.filter(run_id=run_dir.name)
        assert counts["questions"].sum() == len(causes) == 4


def test_figures_have_titles_and_labelled_axes(summary: Summary) -> None:
    for name, draw in FIGURES.items():
        ax = Figure().add_subplot()
        draw(ax, summary)
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel(), name


def test_an_injected_error_is_counted_not_scored(errored_sweep: Path, summary: Summary) -> None:
    errored = summarise(read_sweep(errored_sweep))
    run_id = _run_dirs(errored_sweep)[0].name
    failed = errored.questions.filter(run_id=run_id, status="failed", failed_stage="retrieve")
    assert failed.height == 1 and failed.get_column("error").item() == INJECTED
    assert errored.runs.filter(run_id=run_id).get_column("questions").item() == 5
    counts = errored.error_counts.filter(run_id=run_id, store="retrieve").row(0, named=True)
    assert (counts["failed_attempts"], counts["unresolved"], counts["questions"]) == (1, 1, 1)
    columns = ["run_id", "category", "judge", "questions", "accuracy"]
    assert errored.accuracy.select(columns).equals(summary.accuracy.select(columns))


def test_cli_compares_with_a_baseline(errored_sweep: Path, real_sweep: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "jobs.report", str(errored_sweep),
                           "--baseline", str(real_sweep)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = errored_sweep / "report"
    text = (out / REPORT_FILE).read_text()
    assert "## Against the baseline sweep" in text and INJECTED in text
    deltas = pl.read_parquet(out / "compare_baseline.parquet")
    assert deltas.height == 2
    assert deltas.get_column("accuracy_delta").to_list() == [0.0, 0.0]
    run_id = _run_dirs(errored_sweep)[0].name
    tokens = pl.read_parquet(out / "runs.parquet").filter(run_id=run_id)
    expected = tokens.get_column("tokens").item() * (1 / 5 - 1 / 4)
    delta = deltas.filter(run_id=run_id).get_column("tokens_per_question_delta").item()
    assert delta == pytest.approx(expected)
