"""Records that know what produced them: a re-run reuses a stored record only when the hashes
it carries (backbone definition, prompts, method version and parameters) match the run's,
redoes it otherwise (or refuses, exit 2), and the contract keeps every attempt."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import LOCOMO
from tests.pipeline.faults import probe_env
from tests.ray_head import ROOT, gcs, run_sweep, sweep_config, sweep_env
from tmem_core import pipeline
from tmem_core.benchmarks import read_prepared
from tmem_core.llm import load_backbones
from tmem_core.pipeline._data import prepare_benchmark
from tmem_core.pipeline._planning import plan_run
from tmem_core.pipeline._probe import PROBE_ENV
from tmem_core.pipeline._summary import finish_run
from tmem_core.prompts import _prompt
from tmem_core.reports import summarise
from tmem_core.results import calls_store, run_dirs, stage_store
from tmem_core.results._count import run_count
from tmem_core.results._layout import (
    CALIBRATION_STAGE,
    STORES,
    calibration_store,
    memory_quality_store,
)
from tmem_core.results._store import StageStore
from tmem_core.results._sweep import read_sweep
from tmem_core.viewer._data import benchmark, load_sweep, question_records
from tmem_core.viewer._views import question_rows

pytestmark = pytest.mark.slow


def _backbones(tmp: Path, model: str, seed: int) -> Path:
    """A `sim` backbone named "writer" serving `model`, with no simulated delay to speak of."""
    path = tmp / "backbones.toml"
    path.write_text(f'[backbones.writer]\nbackend = "sim"\nmodel = "{model}"\nengine = {{ '
                    f"seed = {seed}, ttft_s = 0.0, step_s = 0.00001, step_s_per_seq = 0.0, "
                    "step_s_per_ktok = 0.0, prefill_tokens_per_s = 1e12, "
                    "max_output_tokens = 16 }\n")
    return path


def _config(tmp: Path, name: str, seed: int, limit: int = 3) -> Path:
    backbones = _backbones(tmp, "sim-a", seed)
    return sweep_config(tmp, name, limit=limit, backbones='["writer"]',
                        extra=f'backbones_file = "{backbones}"')


def _store(run_dir: Path, name: str) -> StageStore:
    other = {"calls": calls_store, "calibration": calibration_store,
             "memory_quality": memory_quality_store}
    return other[name](run_dir) if name in other else stage_store(run_dir, name)


def _rows(run_dir: Path) -> dict[str, int]:
    """Rows ever written, per store."""
    return {name: _store(run_dir, name).read_all().num_rows for name in STORES}


def _attempts(run_dir: Path) -> list[dict[str, object]]:
    return list(json.loads((run_dir / "contract.json").read_text())["attempts"])


def _cold(tmp: Path) -> dict[str, str]:
    return {"TMEM_CACHE_DIR": str(tmp / "cache")}


def test_an_unchanged_rerun_reuses_every_record_and_the_contract_keeps_both_attempts(
        ray_address: str, tmp_path: Path) -> None:
    config = _config(tmp_path, "same", uuid.uuid4().int % 10**6)
    run_sweep(config, ray_address, **_cold(tmp_path))
    (run_dir,) = run_dirs(tmp_path / "results" / "same")
    first = _rows(run_dir)
    assert first["answer"] == 3 and first["calls"] > 0
    (only,) = _attempts(run_dir)
    for row in stage_store(run_dir, "answer").read_all().to_pylist():
        deps = json.loads(row["deps"])
        assert {"backbone writer", "method version", "method parameters",
                "prompt answer/flat"} <= set(deps) and row["code"] == only["git_commit"]

    done = run_sweep(config, ray_address, **_cold(tmp_path))
    assert _rows(run_dir) == first  # all reused: no record and no call written again
    assert "redone" not in done.stdout
    attempts = _attempts(run_dir)
    assert len(attempts) == 2 and attempts[0] == only
    assert all(a["ended_at"] is not None and a["git_commit"] for a in attempts)
    assert attempts[1]["started_at"] > attempts[0]["ended_at"]  # type: ignore[operator]


def test_a_backbone_model_changed_under_its_name_redoes_its_answers_or_refuses(
        ray_address: str, tmp_path: Path) -> None:
    seed = uuid.uuid4().int % 10**6
    config = _config(tmp_path, "model", seed)
    run_sweep(config, ray_address, **_cold(tmp_path))
    (run_dir,) = run_dirs(tmp_path / "results" / "model")
    before = _rows(run_dir)
    _backbones(tmp_path, "sim-b", seed)  # the same name, another model

    refused = subprocess.run([sys.executable, "-m", "jobs.sweep", str(config), "--on-changed",
                              "refuse"], cwd=ROOT, env=sweep_env(gcs(ray_address),
                                                                 **_cold(tmp_path)),
                             capture_output=True, text=True, timeout=600, check=False)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert errors == [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(errors) == 1
    assert (f"run {run_dir.name}: stage construct: 3 stored records were made with a "
            f"different backbone writer") in errors[0] and 'on_changed = "refuse"' in errors[0]
    assert _rows(run_dir) == before and len(_attempts(run_dir)) == 1  # nothing written

    done = run_sweep(config, ray_address, **_cold(tmp_path))
    assert (f"run {run_dir.name}: stage answer: 3 stored records were made with a different "
            f"backbone writer: redone") in done.stdout
    after = _rows(run_dir)
    assert after["retrieve"] == before["retrieve"]  # BM25 retrieves without the backbone
    for stage in ("construct", "answer"):
        assert after[stage] == 2 * before[stage]
    answers = Counter(r["qid"] for r in stage_store(run_dir, "answer").read_all().to_pylist())
    assert len(answers) == 3 and set(answers.values()) == {2}  # once per backbone definition
    models = Counter(c["model"] for c in calls_store(run_dir).read_all().to_pylist()
                     if c["stage"] == "answer")
    assert models == {"sim-a": 3, "sim-b": 3}
    assert len(_attempts(run_dir)) == 2
    # the count keeps the calls of the records in force, not those they replaced: every
    # call of the first pass had the old model
    calls = calls_store(run_dir).read_all()
    current = [c for c in calls.to_pylist() if c["model"] == "sim-b" and c["ok"]]
    count = run_count(calls)
    assert count.tokens == sum(c["prompt_tokens"] + c["completion_tokens"] for c in current
                               if c["stage"] != CALIBRATION_STAGE) > 0
    assert count.calibration_tokens == sum(c["prompt_tokens"] + c["completion_tokens"]
                                           for c in current if c["stage"] == CALIBRATION_STAGE)


def _changed_prompt_dir(tmp: Path) -> Path:
    """A copy of the bundled prompts whose flat answer prompt says one thing more (a judge
    prompt is in the run's id: a changed one makes another run, not a redo)."""
    copy = tmp / "prompts"
    shutil.copytree(_prompt.PROMPT_DIR, copy)
    answer = copy / "answer" / "flat.v2.txt"
    answer.write_text(answer.read_text().replace("[user]", "Be brief.\n[user]", 1))
    return copy


def _drop_provenance(store: StageStore) -> None:
    """Rewrite a store's parts as a writer from before dependency hashes would have."""
    for part in store.parts():
        table = pq.read_table(part)
        pq.write_table(table.drop_columns(["deps", "code"]), part)


def test_a_changed_prompt_file_redoes_its_stage_and_records_without_hashes_are_redone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In one process (the stages' logic, not Ray): the bundled prompts are swapped for a
    copy with the judge prompt changed."""
    config = pipeline.load_sweep(_config(tmp_path, "prompt", uuid.uuid4().int % 10**6))
    monkeypatch.setenv("TMEM_CACHE_DIR", str(tmp_path / "cache"))
    pipeline.run_sweep(config, log=lambda _: None, local=True)
    (run_dir,) = run_dirs(tmp_path / "results" / "prompt")
    before = _rows(run_dir)

    monkeypatch.setattr(_prompt, "PROMPT_DIR", _changed_prompt_dir(tmp_path))
    _prompt.load_prompt.cache_clear()
    try:
        lines: list[str] = []
        pipeline.run_sweep(config, log=lines.append, local=True)
    finally:
        _prompt.load_prompt.cache_clear()
    redone = [line for line in lines if line.endswith(": redone")]
    changed = "stored records were made with a different prompt answer/flat: redone"
    assert redone == [f"run {run_dir.name}: stage answer: {before['answer']} {changed}",
                      f"run {run_dir.name}: stage judge: "
                      f"{before['judge'] + before['calibration']} {changed}"]
    after = _rows(run_dir)
    assert {s: after[s] for s in ("retrieve", "construct")} == {
        s: before[s] for s in ("retrieve", "construct")}
    assert after["answer"] == 2 * before["answer"]
    assert after["judge"] == 2 * before["judge"]
    assert after["calibration"] == 2 * before["calibration"]

    _drop_provenance(stage_store(run_dir, "answer"))  # as if written before the hashes
    lines = []
    monkeypatch.setattr(_prompt, "PROMPT_DIR", _changed_prompt_dir(tmp_path / "again"))
    _prompt.load_prompt.cache_clear()
    try:
        pipeline.run_sweep(config, log=lines.append, local=True)
    finally:
        _prompt.load_prompt.cache_clear()
    assert (f"run {run_dir.name}: stage answer: 3 stored records carry no dependency hashes "
            f"(written before they were recorded): redone") in lines
    assert _rows(run_dir)["answer"] == 3 * before["answer"]  # written, redone, redone again


def _statuses(sweep: Path) -> dict[str, str]:
    """The report's status of each question of the sweep's one run."""
    table = summarise(read_sweep(sweep)).questions
    return dict(zip(table["qid"].to_list(), table["status"].to_list(), strict=True))


def _viewer(sweep: Path, run_dir: Path) -> tuple[dict[str, str], dict[str, list[str]],
                                                   dict[str, list[str]]]:
    """The viewer's outcome of each question, and per question the stores of its judge
    records in force and of its stale records."""
    data = load_sweep(sweep)
    rows = {r.qid: r.outcome for r in question_rows(data, run_dir.name)}
    bench = benchmark(Path(json.loads((run_dir / "contract.json").read_text())["data"]["dir"]))
    records = question_records(run_dir, list(rows), bench.data)
    return (rows, {q: [r["key"] for r in r_.latest["judge"]] for q, r_ in records.items()},
            {q: sorted({r["store"] for r in r_.stale}) for q, r_ in records.items()})


def test_a_model_change_and_a_failed_judge_call_is_an_error_never_an_old_verdict(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In one process: the backbone's model changes under its name and one question's judge
    call fails: the run line, the report and the viewer show that question as an error,
    not judged with the old model's verdict. Then the model changes again and the driver
    stops once it has planned the run (its contract written, nothing redone): every
    record made by the old model is stale, counted and never scored."""
    seed = uuid.uuid4().int % 10**6
    config = pipeline.load_sweep(_config(tmp_path, "stale", seed))
    monkeypatch.setenv("TMEM_CACHE_DIR", str(tmp_path / "cache"))
    (first,) = pipeline.run_sweep(config, log=lambda _: None, local=True)
    sweep, run_dir = tmp_path / "results" / "stale", first.run_dir
    assert first.judged == 3 and sum(first.stage_errors.values()) == 0
    failing = min(r["qid"] for r in stage_store(run_dir, "judge").read_all().to_pylist()
                  if r["scored_by"] == "llm")  # a verdict the judge model gives

    _backbones(tmp_path, "sim-b", seed)
    monkeypatch.setenv(PROBE_ENV, probe_env(f"stage=judge,qid={failing},kind=llm_error")[
        PROBE_ENV])
    (second,) = pipeline.run_sweep(config, log=lambda _: None, local=True)
    assert second.judged == 2 and second.stage_errors["judge"] == 1
    assert "1 errors {'retrieve': 0, 'construct': 0, 'answer': 0, 'judge': 1}" in second.line()
    assert "(2 judged)" in second.line() and "stale" not in second.line()
    old = [r for r in stage_store(run_dir, "judge").read_all().to_pylist()
           if r["qid"] == failing and r["ok"]]
    assert len(old) == 1  # the first model's verdict is still on record
    statuses = _statuses(sweep)
    assert statuses[failing] == "failed" and list(statuses.values()).count("judged") == 2
    results = read_sweep(sweep)
    scored = summarise(results).accuracy.filter(category="overall")
    assert set(scored["questions"].to_list()) == {2}
    judging = results.calls.filter(qid=failing, stage="judge")  # the old verdict's calls too
    assert judging.height == 2 and judging["tokens"].sum() == 0  # neither counts as if run
    outcomes, verdicts, _ = _viewer(sweep, run_dir)
    assert outcomes[failing] == "failed" and verdicts[failing] == []

    monkeypatch.delenv(PROBE_ENV)
    _backbones(tmp_path, "sim-c", seed)
    bench_dir = prepare_benchmark(config.benchmarks[0], sweep / "data")
    (run,) = config.runs()
    third = finish_run(plan_run(run, bench_dir, load_backbones(config.backbones_file), sweep,
                                local=True), 0.0)
    assert third.judged == 0 and third.accuracy is None
    assert third.stale == {"construct": 3, "answer": 3, "judge": 3}  # BM25: no backbone
    assert sum(third.stage_errors.values()) == 0
    assert "9 stale {'construct': 3, 'answer': 3, 'judge': 3}" in third.line()
    assert set(_statuses(sweep).values()) == {"stale"}
    outcomes, verdicts, stale = _viewer(sweep, run_dir)
    assert set(outcomes.values()) == {"stale"}
    assert all(v == [] for v in verdicts.values())
    assert all({"construct", "answer", "judge"} <= set(s) for s in stale.values())


def _locomo_config(tmp: Path, source: Path, seed: int) -> Path:
    """Three questions of a LoCoMo file on the `sim` backbone "writer" (judging too)."""
    backbones = _backbones(tmp, "sim-a", seed)
    path = tmp / "gold.toml"
    path.write_text(f'''name = "gold"
results_dir = "{tmp / 'results'}"
backbones_file = "{backbones}"
[[benchmarks]]
name = "locomo"
source = "{source}"
limit = 3
[grid]
methods = ["bm25"]
backbones = ["writer"]
top_k = [8]
budget = [512]
''')
    return path


def _edit_gold(source: Path, question: str, answer: str) -> None:
    """Give the LoCoMo question asking `question` another gold answer, in place."""
    samples = json.loads(source.read_text())
    (qa,) = [qa for sample in samples for qa in sample["qa"] if qa["question"] == question]
    qa["answer"] = answer
    source.write_text(json.dumps(samples))


def test_a_changed_gold_answer_prepares_again_and_rejudges_only_its_question(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In one process, on a copy of the shared LoCoMo file: a gold answer edited in the
    source is prepared again (a new copy, named by the source's content) and only its
    question's judge records are redone; retrieval, contexts and answers do not read gold,
    and the other questions' verdicts stay."""
    source = tmp_path / "locomo10.json"
    source.write_bytes(LOCOMO.read_bytes())
    config = pipeline.load_sweep(_locomo_config(tmp_path, source, uuid.uuid4().int % 10**6))
    monkeypatch.setenv("TMEM_CACHE_DIR", str(tmp_path / "cache"))
    (first,) = pipeline.run_sweep(config, log=lambda _: None, local=True)
    run_dir, data = first.run_dir, tmp_path / "results" / "gold" / "data"
    before = _rows(run_dir)
    judged = [r for r in stage_store(run_dir, "judge").read_all().to_pylist()
              if r["scored_by"] == "llm"]
    changed = judged[0]["qid"]
    (old_dir,) = data.iterdir()
    (asked,) = [q for q in read_prepared(old_dir).questions.to_pylist() if q["qid"] == changed]
    redone = sum(1 for store in ("judge", "calibration")
                 for r in _store(run_dir, store).read_all().to_pylist()
                 if r["qid"] == changed and r["ok"])

    _edit_gold(source, asked["question"], f"not {asked['answer']}")
    lines: list[str] = []
    (second,) = pipeline.run_sweep(config, log=lines.append, local=True)
    assert [line for line in lines if line.endswith(": redone")] == [
        f"run {run_dir.name}: stage judge: {redone} stored records were made with a "
        f"different data gold: redone"]
    (new_dir,) = set(data.iterdir()) - {old_dir}  # prepared again, the old copy kept
    contract = json.loads((run_dir / "contract.json").read_text())
    assert contract["data"]["dir"] == str(new_dir)
    (gold,) = [q["answer"] for q in read_prepared(new_dir).questions.to_pylist()
               if q["qid"] == changed]
    assert gold == f"not {asked['answer']}"
    after = _rows(run_dir)
    assert {s: after[s] for s in ("retrieve", "construct", "answer")} == {
        s: before[s] for s in ("retrieve", "construct", "answer")}
    verdicts = Counter(r["qid"] for r in stage_store(run_dir, "judge").read_all().to_pylist())
    assert after["judge"] == before["judge"] + 1 and verdicts[changed] == 2
    assert set(verdicts.values()) == {1, 2} and second.judged == first.judged
