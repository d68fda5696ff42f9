"""`python -m jobs.prepare` as a user runs it: outputs, one-line errors, nothing half-written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jobs.prepare", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_prepare_locomo_writes_tables_and_manifest(locomo_path: Path, tmp_path: Path) -> None:
    done = _run("--benchmark", "locomo", "--source", str(locomo_path), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    target = tmp_path / "locomo"
    assert sorted(p.name for p in target.iterdir()) == ["manifest.json", "messages.parquet",
                                                         "questions.parquet"]
    manifest = json.loads((target / "manifest.json").read_text())
    assert manifest["source"]["sha256"] == (
        "56d52ccb1c98523ded325a3f98314b77c4924ffca6be43fd29f977cb691b6575")
    assert manifest["conversations"]["conv-26"]["questions"] == 199
    assert "1347 questions" in done.stdout
    assert list(tmp_path.iterdir()) == [target]  # no temporary leftovers


def _bad_locomo(tmp_path: Path, locomo_path: Path, edit) -> Path:
    data = json.loads(locomo_path.read_text())[:2]
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(("edit", "expect"), [
    (None, "malformed JSON at line 1"),
    (lambda d: d[1]["qa"][3].pop("category"), "record conv-30:q3, field category: missing"),
    (lambda d: d[1].__setitem__("sample_id", "conv-26"), "record conv-26, field sample_id"),
    (lambda d: d[0]["conversation"].__setitem__("session_2_date_time", "2 pm, Mayday"),
     "field session_2_date_time: unparseable date"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path: Path, locomo_path: Path,
                                                            edit, expect: str) -> None:
    if edit is None:
        source = tmp_path / "bad.json"
        source.write_text('[{"sample_id": "x", ')
    else:
        source = _bad_locomo(tmp_path, locomo_path, edit)
    out = tmp_path / "out"
    done = _run("--benchmark", "locomo", "--source", str(source), "--out", str(out))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0]
    assert str(source) in lines[0]
    assert not out.exists() or not any(out.iterdir())


def test_unknown_benchmark_lists_the_known_ones(tmp_path: Path) -> None:
    done = _run("--benchmark", "locomoo", "--source", "x.json", "--out", str(tmp_path))
    assert done.returncode == 2
    assert "unknown benchmark 'locomoo'" in done.stderr and "synthetic" in done.stderr


def test_failed_rerun_keeps_the_previous_output(tmp_path: Path) -> None:
    assert _run("--benchmark", "synthetic", "--size", "300", "--out", str(tmp_path)
                ).returncode == 0
    before = (tmp_path / "synthetic" / "messages.parquet").read_bytes()
    assert _run("--benchmark", "synthetic", "--size", "5", "--out", str(tmp_path)).returncode == 2
    assert (tmp_path / "synthetic" / "messages.parquet").read_bytes() == before


def _longmemeval_two_updates(fixtures: Path, tmp_path: Path) -> Path:
    """LongMemEval's file with a second `knowledge-update` instance (its spelling), so each
    update has another update's answer to be revised to."""
    data = json.loads((fixtures / "longmemeval" / "longmemeval_mini.json").read_text())
    second = {**data[0], "question_id": f"{data[0]['question_id']}_2", "answer": "3"}
    path = tmp_path / "longmemeval_s.json"
    path.write_text(json.dumps([*data, second]))
    return path


def test_a_variant_is_written_beside_its_base_with_revisions_on_longmemeval(
        fixtures: Path, tmp_path: Path) -> None:
    source = _longmemeval_two_updates(fixtures, tmp_path)
    out = tmp_path / "prepared"
    base = _run("--benchmark", "longmemeval", "--source", str(source), "--out", str(out))
    revised = _run("--benchmark", "longmemeval", "--source", str(source), "--out", str(out),
                   "--variant", "revisions=2")
    assert base.returncode == 0 and revised.returncode == 0, base.stderr + revised.stderr
    assert sorted(p.name for p in out.iterdir()) == ["longmemeval", "longmemeval-revisions-2"]
    manifests = {p.name: json.loads((p / "manifest.json").read_text()) for p in out.iterdir()}
    assert "revision_chains" not in manifests["longmemeval"]
    chains = manifests["longmemeval-revisions-2"]["revision_chains"]
    assert chains["questions"] == 2 and chains["skipped"] == []
    assert (manifests["longmemeval-revisions-2"]["messages"]
            == manifests["longmemeval"]["messages"] + chains["injected"])


def test_help_lists_the_variants_of_any_benchmark() -> None:
    done = _run("--help")
    assert done.returncode == 0
    assert "any benchmark: revisions=N" in " ".join(done.stdout.split())
