"""The leak guards on the shared LoCoMo file, every question, with real prompts (the `sim`
engine answers; no model): BM25 and T-MEM raise no false alarm (LoCoMo's adversarial
answers are words its conversations use, and the judges must see the gold), while each
question's gold answer planted in its stored answer prompt is caught; and a method that
shows the answer model one gold evidence id raises exactly one.

LoCoMo's gold ids (`conv-26:D1:3`, its source ids and sessions) are the harness's names that
no method is shown, so the ids guard cannot raise a false alarm here; the answers guard can,
on every real prompt, and the planted answers show it would see a leak."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tmem_core.benchmarks import LoadRequest, build, get_protocol
from tmem_core.evaluation import GUARDED_STAGES
from tmem_core.evaluation._leaks import _MIN_CHARS
from tmem_core.evaluation._metrics import normalise
from tmem_core.pipeline import parse_sweep, run_sweep
from tmem_core.pipeline._validators import no_gold_in_prompts
from tmem_core.results import calls_store, stage_store
from tmem_core.schema import gold_from_table, questions_from_table

PLUGIN = "tests.pipeline.planted_id"


def _backbones(tmp_path: Path) -> Path:
    """A `sim` backbone with no simulated delay to speak of and a fresh seed (nothing
    cached): the test's time is the harness's."""
    path = tmp_path / "backbones.toml"
    path.write_text(f'[backbones.sim]\nbackend = "sim"\nmodel = "sim"\nengine = {{ seed = '
                    f"{uuid.uuid4().int % 10**6}, ttft_s = 0.0, step_s = 0.00001, "
                    "step_s_per_seq = 0.0, step_s_per_ktok = 0.0, prefill_tokens_per_s = 1e12, "
                    "max_output_tokens = 16 }\n")
    return path


def _sweep(tmp_path: Path, name: str, methods: list[str], locomo: Path, limit: int | None,
           **extra: Any) -> list[Any]:
    bench: dict[str, Any] = {"name": "locomo", "source": str(locomo)}
    if limit:
        bench["limit"] = limit
    config = parse_sweep({
        "name": name, "results_dir": str(tmp_path / "results"),
        "backbones_file": str(_backbones(tmp_path)), "benchmarks": [bench],
        "grid": {"methods": methods, "backbones": ["sim"], "top_k": [10], "budget": [1024]},
        "resources": {"batch_size": 64}, **extra})
    return run_sweep(config, log=lambda _line: None, local=True)


def _validators(summary: Any) -> dict[str, Any]:
    contract = json.loads((summary.run_dir / "contract.json").read_text())
    return dict(contract["validators"])


def _planted_answers(run_dir: Path, prepared: Any) -> tuple[set[str], set[str]]:
    """Each stored answer prompt with its question's gold answer added after the evidence:
    what `no_gold_in_prompts` finds, and what it should (every text answer it checks)."""
    answers = stage_store(run_dir, "answer").latest().to_pylist()
    gold = gold_from_table(prepared.questions)
    for r in answers:
        prompt = json.loads(r["prompt"])
        prompt[-1]["content"] += f"\n(The answer is {gold[r['qid']].answer}.)"
        r["prompt"] = json.dumps(prompt)
    found = no_gold_in_prompts(
        pa.Table.from_pylist(answers), stage_store(run_dir, "construct").latest(),
        {q.qid: q for q in questions_from_table(prepared.questions)}, gold,
        get_protocol("locomo"))
    expected = {f"{g.qid}: gold answer {g.answer!r} in prompt" for g in
                (gold[r["qid"]] for r in answers)
                if g.answer_kind == "text" and len(normalise(g.answer)) >= _MIN_CHARS}
    return set(found.problems), expected


@pytest.mark.slow
def test_bm25_and_tmem_on_all_of_locomo_raise_no_leak(tmp_path: Path, locomo_path: Path
                                                      ) -> None:
    prepared = build("locomo", LoadRequest(source=locomo_path))
    questions = prepared.questions.num_rows
    summaries = _sweep(tmp_path, "leaks", ["bm25", "tmem"], locomo_path, None)
    for summary in summaries:
        assert summary.questions == questions
        checks = _validators(summary)
        for name in ("no_gold_ids_in_prompts", "no_gold_in_prompts"):
            assert checks[name]["passed"], (summary.run_id, name, checks[name]["problems"])
        assert checks["no_gold_in_prompts"]["checked"] == questions
        found, expected = _planted_answers(summary.run_dir, prepared)
        assert len(expected) > questions // 2 and found == expected, summary.run_id
        guarded = [c for c in calls_store(summary.run_dir).read_all().to_pylist()
                   if c["stage"] in GUARDED_STAGES]
        assert checks["no_gold_ids_in_prompts"]["checked"] == len({c["key"] for c in guarded})
        assert len(guarded) >= questions  # every answer prompt at least
    judged = calls_store(summaries[0].run_dir).read_all().to_pylist()
    # the judges' prompts carry the gold by design: not guarded, so not flagged
    assert any(c["stage"] == "calibration" for c in judged)


@dataclass(frozen=True)
class Planted:
    qid: str
    source_id: str


def test_a_gold_id_shown_to_the_answer_model_raises_exactly_one(
        tmp_path: Path, locomo_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prepared = build("locomo", LoadRequest(source=locomo_path))
    meta = {m["msg_id"]: json.loads(m["meta"]) for m in prepared.messages.to_pylist()}
    question = next(q for q in sorted(prepared.questions.to_pylist(), key=lambda q: q["qid"])
                    if q["evidence_ids"])
    planted = Planted(question["qid"], meta[question["evidence_ids"][0]]["source_id"])
    monkeypatch.setenv("TMEM_PLANTED", f"{planted.qid}={planted.source_id}")
    (summary,) = _sweep(tmp_path, "planted", ["planted_bm25"], locomo_path, 12,
                        plugins=[PLUGIN])
    check = _validators(summary)["no_gold_ids_in_prompts"]
    assert not check["passed"] and check["problem_count"] == 1
    assert check["problems"] == [f"answer {planted.qid}: prompt holds {planted.source_id}"]
