"""The server: its JSON API over a hand-written sweep, a sweep that is still being written,
bad input (no such folder), and a record part damaged while serving (reported, skipped)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from tests.reports.conftest import DATA, T0, locomo_run, write_locomo_data, write_run
from tests.viewer.conftest import ROOT
from tmem_core import DataError
from tmem_core.pipeline import Contract
from tmem_core.viewer import viewer_app

RUN = locomo_run("hand")


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    write_locomo_data(tmp_path)
    write_run(tmp_path, RUN)
    return tmp_path


def test_api_pages_and_missing_ones(sweep: Path) -> None:
    client = TestClient(viewer_app(sweep))
    assert "viewer.js" in client.get("/").text
    assert client.get("/static/viewer.js").status_code == 200
    (run,) = client.get("/api/sweep").json()["runs"]
    assert run["run_id"] == RUN.run_id
    rows = client.get(f"/api/runs/{RUN.run_id}").json()["questions"]
    assert [r["qid"] for r in rows] == ["q1", "q2", "q3", "q4", "q5"]
    q2 = client.get(f"/api/runs/{RUN.run_id}/questions/q2").json()
    assert [v["verdict"] for v in q2["verdicts"]] == ["correct", "wrong"]
    assert client.get("/api/runs/nope").status_code == 404
    assert client.get(f"/api/runs/{RUN.run_id}/questions/{quote('no/such')}").status_code == 404
    assert client.get("/figures/accuracy_vs_top_k").status_code == 404  # no report yet


def test_a_running_sweep_shows_what_has_landed(tmp_path: Path) -> None:
    write_locomo_data(tmp_path)
    Contract(RUN.run_id, RUN.identity(), "0" * 64, data={"dir": str(tmp_path / "data" / DATA)},
             started_at=T0).write(tmp_path / RUN.run_id)  # started, nothing written yet
    client = TestClient(viewer_app(tmp_path))
    sweep = client.get("/api/sweep").json()
    assert sweep["running"] and sweep["runs"][0]["questions"] == 0
    write_run(tmp_path, RUN)  # the run's records land and it ends
    sweep = client.get("/api/sweep").json()
    assert not sweep["running"] and sweep["runs"][0]["questions"] == 5


def test_a_part_corrupted_while_serving_is_reported_and_skipped(
        sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    client = TestClient(viewer_app(sweep))
    assert client.get("/api/sweep").json()["runs"][0]["judged"] == 4
    part = _corrupt(sweep)
    (run,) = client.get("/api/sweep").json()["runs"]  # the page still serves
    assert run["judged"] == 0 and run["questions"] == 5  # the part held every verdict
    assert client.get(f"/api/runs/{RUN.run_id}/questions/q2").json()["verdicts"] == []
    assert f"warning: unreadable record part {part} skipped" in capsys.readouterr().err


def test_bad_folder_raises_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such sweep folder"):
        viewer_app(tmp_path / "missing")
    with pytest.raises(DataError, match="not a sweep folder"):
        viewer_app(tmp_path)


def test_cli_bad_input_is_one_error_line_and_exit_2(sweep: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "jobs.view", str(sweep / "missing"),
                           "--port", "0"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ")


def _corrupt(sweep: Path) -> Path:
    """A record part damaged on disk: the judge store's (one part with every verdict)."""
    (part,) = sorted((sweep / RUN.run_id / "judge").glob("part-*.parquet"))
    part.write_bytes(b"not parquet")
    return part
