"""Records a user can trust, on real sweeps (the session's Ray, a scripted priced engine):
one writer per sweep, one count of tokens and cost whatever the number of stage actors, no
call lost to a kill between a batch's calls and its records, a damaged part skipped."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Step, scripted_backbones
from tests.pipeline.faults import probe_env
from tests.pipeline.test_memory_cost import AnsweringServer
from tests.ray_head import ROOT, gcs, run_sweep, sweep_env
from tmem_core import pipeline
from tmem_core.pipeline import STAGES
from tmem_core.pipeline._data import prepare_benchmark, select_questions
from tmem_core.reports import read_sweep, summarise
from tmem_core.results import calls_store, run_dirs, stage_store
from tmem_core.results._layout import run_stores
from tmem_core.results._lease import LEASE_FILE
from tmem_core.viewer._data import load_sweep
from tmem_core.viewer._views import sweep_view

pytestmark = pytest.mark.slow

RUN_LINE = re.compile(r"^run (?P<run>\S+): (?P<questions>\d+) questions, .* (?P<tokens>\d+) "
                      r"tokens, \$(?P<cost>[\d.]+) spent now \(\$(?P<method>[\d.]+) as if run\), "
                      r"calibration (?P<calibration>\d+) tokens \$(?P<calibration_cost>[\d.]+),",
                      re.MULTILINE)
T2MEM = ('[methods.t2mem]\nepisodes = "topic_window"\ntopic_gap_hours = 1440\n'
         "max_entries = 2\n")


@pytest.fixture(scope="module")
def server() -> Any:
    served = AnsweringServer([Step()])
    yield served
    served.close()


def _config(tmp: Path, server: AnsweringServer, name: str, *, methods: str = '["bm25"]',
            limit: int = 3, actors: int = 1, fused: bool = True, extra: str = "") -> Path:
    backbones = scripted_backbones(tmp, server, "priced")
    backbones.write_text(backbones.read_text()
                         + "prices = { input_per_mtok = 1000.0, output_per_mtok = 2000.0 }\n")
    path = tmp / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\nresults_dir = "{tmp / "results"}"\nbackbones_file = "{backbones}"\n'
        f'[[benchmarks]]\nname = "synthetic"\nsize = 200\nlimit = {limit}\n'
        f'[grid]\nmethods = {methods}\nbackbones = ["priced"]\ntop_k = [4]\nbudget = [512]\n'
        f"[resources]\nretrieve_actors = {actors}\nllm_actors = {actors}\nbatch_size = 1\n"
        f"fuse_stages = {str(fused).lower()}\n{extra}")
    return path


def _driver(config: Path, address: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "jobs.sweep", str(config)], cwd=ROOT,
                            env=sweep_env(gcs(address), **env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def assert_no_duplicated_or_lost_records(sweep: Path, questions: int) -> None:
    """Every stage of every run holds each of its questions' keys once (0 duplicated, 0
    lost), and every answer and judge record has its calls on record."""
    for run_dir in run_dirs(sweep):
        for stage in STAGES:
            ok = Counter(r["key"] for r in stage.store_for(run_dir).read_all().to_pylist()
                         if r["ok"])
            assert [k for k, n in ok.items() if n > 1] == [], (run_dir.name, stage.name)
            assert len({k.split("|")[0] for k in ok}) == questions, (run_dir.name, stage.name)
        called = {(c["stage"], c["qid"]) for c in calls_store(run_dir).latest().to_pylist()}
        for stage in ("answer", "judge"):
            qids = {r["qid"] for r in stage_store(run_dir, stage).latest().to_pylist()}
            assert {(stage, q) for q in qids} <= called, (run_dir.name, stage)


def assert_run_lines_equal_report_and_viewer(stdout: str, sweep: Path) -> None:
    lines = {m["run"]: m for m in RUN_LINE.finditer(stdout)}
    report = {r["run_id"]: r for r in summarise(read_sweep(sweep)).runs.iter_rows(named=True)}
    viewer = {r.run_id: r for r in sweep_view(load_sweep(sweep), lambda n, _p: n).runs}
    assert set(lines) == set(report) == set(viewer) and lines
    for run_id, line in lines.items():
        row, shown = report[run_id], viewer[run_id]
        assert int(line["tokens"]) == row["tokens"] > 0
        assert int(line["calibration"]) == row["calibration_tokens"] > 0
        assert float(line["cost"]) == pytest.approx(row["cost_usd"], abs=5e-5)
        assert float(line["method"]) == pytest.approx(row["method_cost_usd"], abs=5e-5)
        assert float(line["calibration_cost"]) == pytest.approx(row["calibration_cost_usd"],
                                                                abs=5e-5)
        questions = int(line["questions"])
        assert shown.tokens_per_question == pytest.approx(row["tokens"] / questions)
        assert shown.cost_per_question == pytest.approx(row["cost_usd"] / questions)
        assert shown.calibration_tokens_per_question == pytest.approx(
            row["calibration_tokens"] / questions)


def test_two_drivers_started_together_one_refuses(ray_address: str, tmp_path: Path,
                                                  server: AnsweringServer) -> None:
    config = _config(tmp_path, server, "twice")
    drivers = [_driver(config, ray_address) for _ in range(2)]
    outcomes = [(d.wait(timeout=600), *d.communicate()) for d in drivers]
    codes = sorted(code for code, _, _ in outcomes)
    assert codes == [0, 2], outcomes
    _, _, refused = next(o for o in outcomes if o[0] == 2)
    errors = [line for line in refused.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "is being written by another driver (host " in errors[0], refused
    assert re.search(r"pid \d+(, Ray job [^,]+)?, since \d{4}-\d\d-\d\d", errors[0])
    _, done, _ = next(o for o in outcomes if o[0] == 0)
    sweep = tmp_path / "results" / "twice"
    assert not (sweep / LEASE_FILE).exists()  # released on exit
    assert_no_duplicated_or_lost_records(sweep, 3)
    assert_run_lines_equal_report_and_viewer(done, sweep)


def test_one_count_with_several_unfused_stage_actors(ray_address: str, tmp_path: Path,
                                                     server: AnsweringServer) -> None:
    """Two actors per stage, each loading T2Mem's memory of the conversation: the memory's
    calls are on record more than once, and count once in the run line, the report and the
    viewer alike."""
    config = _config(tmp_path, server, "actors", methods='["t2mem", "bm25"]', limit=4,
                     actors=2, fused=False, extra=T2MEM)
    done = run_sweep(config, ray_address)
    sweep = tmp_path / "results" / "actors"
    (t2mem,) = [d for d in run_dirs(sweep) if "_t2mem_" in d.name]
    memory = Counter(c["key"] for c in calls_store(t2mem).read_all().to_pylist()
                     if c["stage"] == "memory")
    assert memory and max(memory.values()) > 1  # recorded by more than one actor
    assert_no_duplicated_or_lost_records(sweep, 4)
    for run_dir in run_dirs(sweep):  # written a call at a time, merged when the run was done
        parts = {store.stage: len(store.parts()) for store in run_stores(run_dir)
                 if store.directory.exists()}
        assert len(parts) >= 6 and set(parts.values()) == {1}, (run_dir.name, parts)
    assert_run_lines_equal_report_and_viewer(done.stdout, sweep)
    report = summarise(read_sweep(sweep)).tokens
    memory_tokens = report.filter((report["run_id"] == t2mem.name)
                                  & (report["stage"] == "memory"))["tokens"].item()
    assert memory_tokens == 18 * len(memory)  # each memory call once (11 + 7 tokens)


def test_a_kill_between_a_batch_s_calls_and_its_records_loses_no_call(
        ray_address: str, tmp_path: Path, server: AnsweringServer) -> None:
    config = _config(tmp_path, server, "between", limit=3)
    marker = tmp_path / "died-once"
    loaded = pipeline.load_sweep(config)
    bench = loaded.benchmarks[0]
    data = prepare_benchmark(bench, Path(loaded.results_dir) / loaded.name / "data")
    qid = select_questions(data, bench)[1][0]
    started = time.time()
    done = run_sweep(config, ray_address, **probe_env(
        f"stage=answer,qid={qid},kind=exit_before_records,once={marker}"))
    assert marker.exists()  # the worker died with the batch's calls written, not its records
    sweep = tmp_path / "results" / "between"
    (run_dir,) = run_dirs(sweep)
    answers = [c for c in calls_store(run_dir).read_all().to_pylist()
               if c["stage"] == "answer" and c["qid"] == qid and c["written_at"] > started]
    assert len(answers) == 2  # the dead attempt's call and the redone question's (cached)
    assert_no_duplicated_or_lost_records(sweep, 3)
    assert_run_lines_equal_report_and_viewer(done.stdout, sweep)


def test_a_damaged_part_is_skipped_and_its_questions_redone(
        tmp_path: Path, server: AnsweringServer, capsys: pytest.CaptureFixture[str]) -> None:
    """In one process (the point is the stores, not Ray)."""
    config = pipeline.load_sweep(_config(tmp_path, server, "damaged", limit=3))
    pipeline.run_sweep(config, log=lambda _: None, local=True)
    sweep = tmp_path / "results" / "damaged"
    (run_dir,) = run_dirs(sweep)
    part = stage_store(run_dir, "answer").parts()[0]
    lost = set(stage_store(run_dir, "answer").read_all().column("qid").to_pylist())
    part.write_bytes(b"PAR1 damaged")
    leftover = run_dir / "calls" / ".part-0000000000001-dead.parquet.tmp"
    leftover.write_text("half")
    lines: list[str] = []
    capsys.readouterr()
    pipeline.run_sweep(config, log=lines.append, local=True)
    assert f"warning: unreadable record part {part} skipped" in capsys.readouterr().err
    assert f"removed {leftover}: left over by an interrupted write" in lines
    assert not leftover.exists()
    redone = set(stage_store(run_dir, "answer").read_all().column("qid").to_pylist())
    assert lost <= redone and part.exists()
    assert_no_duplicated_or_lost_records(sweep, 3)
    assert_run_lines_equal_report_and_viewer("\n".join(lines), sweep)
