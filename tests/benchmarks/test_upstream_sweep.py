"""The GroupMemBench and EverMemBench fixtures through the real pipeline: one small sweep
(bm25 and tmem_heuristic on the embedded model) over each fixture, and its report."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import write_sweep
from tests.ray_head import run_sweep
from tmem_core.benchmarks._evermembench_qa import CATEGORIES
from tmem_core.benchmarks._groupmembench import QUESTION_TYPES
from tmem_core.reports import write_report

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SWEEP = "upstream-fixtures"
METHODS = ("bm25", "tmem_heuristic")


@pytest.fixture(scope="module")
def sweep(fixtures: Path, tmp_path_factory: pytest.TempPathFactory, ray_address: str) -> Path:
    """Six runs: each fixture x each method; 2 + 2 + 1 questions (the last a choice)."""
    tmp = tmp_path_factory.mktemp("upstream")
    evermembench = fixtures / "evermembench"
    config = write_sweep(tmp, SWEEP, [
        {"name": "groupmembench", "source": str(fixtures / "groupmembench"), "limit": 2},
        {"name": "evermembench", "source": str(evermembench / "dynamic"), "limit": 2},
        {"name": "evermembench", "source": str(evermembench / "eval"), "categories": ["F_TP"],
         "limit": 1}], {"methods": list(METHODS), "top_k": [8], "budget": [512]},
        resources={"batch_size": 4})
    run_sweep(config, ray_address, timeout=1200)
    return tmp / "results" / SWEEP


def _judged(run_dir: Path) -> list[dict[str, object]]:
    return [r for part in sorted((run_dir / "judge").glob("part-*.parquet"))
            for r in pq.read_table(part).to_pylist() if r["ok"]]


def test_every_run_answers_and_judges_its_questions(sweep: Path) -> None:
    runs = json.loads((sweep / "sweep.json").read_text())["runs"]
    assert len(runs) == 3 * len(METHODS)
    for run_id in runs:
        contract = json.loads((sweep / run_id / "contract.json").read_text())
        limit = contract["config"]["benchmark"]["limit"]
        assert len({r["qid"] for r in _judged(sweep / run_id)}) == limit
        for validator in ("question_counts", "no_gold_in_prompts", "budget"):
            assert contract["validators"][validator]["passed"], (run_id, validator)


def _runs(sweep: Path, source: str) -> list[Path]:
    """The run folders of the benchmark read from `source` (a fixture folder's name)."""
    return [c.parent for c in sweep.glob("*/contract.json")
            if (json.loads(c.read_text())["config"]["benchmark"]["source"] or "").endswith(
                source)]


def test_the_report_shows_the_benchmarks_own_categories(sweep: Path) -> None:
    answered = {r["category"] for run in sweep.glob("*/contract.json")
                for r in _judged(run.parent)}
    assert answered & set(QUESTION_TYPES) and answered & set(CATEGORIES)
    assert answered <= set(QUESTION_TYPES) | set(CATEGORIES)
    with_evidence = {r["category"] for run in _runs(sweep, "dynamic") for r in _judged(run)}
    report = write_report(sweep).markdown.read_text()
    for section in ("Accuracy per category", "Evidence recall@k"):
        table = report.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
        header = next(line for line in table.splitlines() if line.startswith("| run |"))
        columns = {c.strip() for c in header.strip("|").split("|")} - {"run", "overall",
                                                                        "judged by"}
        expected = answered if section.startswith("Accuracy") else with_evidence
        assert columns == expected, section  # recall: the Dynamic release's R evidence only


def test_recall_is_not_available_for_the_eval_code_questions(sweep: Path) -> None:
    """Upstream's evaluation code reads qars without R: those runs answer and are judged,
    and the report says recall is not available for them."""
    report = write_report(sweep).markdown.read_text()
    section = report.split("## Evidence recall@k", 1)[1].split("\n## ", 1)[0]
    eval_runs = _runs(sweep, "eval")
    assert len(eval_runs) == len(METHODS)
    for run_dir in eval_runs:
        assert _judged(run_dir), run_dir.name  # scored without any evidence
        assert f"| {run_dir.name} |" in report
    without = len(eval_runs) + len(_runs(sweep, "groupmembench"))  # its questions name none
    assert section.count("Recall **not available** for") == without == 2 * len(METHODS)
    assert section.count("none of its 1 questions has gold evidence") == len(METHODS)
