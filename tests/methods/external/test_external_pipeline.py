"""An external system through the pipeline: its memory calls are on record under stage
`memory` with exactly the tokens the accounting endpoint counted; another sweep reuses the
memory (no rebuild, no new spend); a build whose LLM output is junk fails its questions as
error records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from tests.conftest import scripted_backbones
from tests.methods.external import notes_system
from tests.methods.external.conftest import SystemServer, external_sweep
from tmem_core import from_json
from tmem_core.methods.external._method import DONE
from tmem_core.methods.external._record import SystemRecord
from tmem_core.pipeline._summary import RunSummary
from tmem_core.results import MEMORY_STAGE, calls_store, stage_store


def notes_server(note: str) -> SystemServer:
    """The notes system's build calls answered with `note`."""
    return SystemServer(lambda system, _: note if system.startswith("Write one JSON object")
                        else None)


def _sweep(tmp_path: Path, name: str, backbones: Path) -> RunSummary:
    return external_sweep(tmp_path, name, backbones, "notes", {"batch": 40},
                          plugins=["tests.methods.external.notes_system"])


def _memory_calls(summary: RunSummary) -> list[dict[str, Any]]:
    calls = calls_store(summary.run_dir).latest()
    return calls.filter(pc.equal(calls.column("stage"), MEMORY_STAGE)).to_pylist()


def _traces(summary: RunSummary) -> list[SystemRecord]:
    """The construct records, as the method's record type reads them back."""
    records = stage_store(summary.run_dir, "construct").latest().to_pylist()
    return [from_json(SystemRecord, r["payload"]) for r in records]


def test_memory_tokens_equal_the_endpoints_count_and_another_sweep_reuses_the_memory(
        tmp_path: Path) -> None:
    server = notes_server('{"note": "The team moved the review to Fridays."}')
    try:
        backbones = scripted_backbones(tmp_path, server, "scripted")
        first = _sweep(tmp_path, "first", backbones)
        directories = {t.directory for t in _traces(first)}
        adds = {d: notes_system.ADDS[str(Path(d) / "system")] for d in directories}
        engine_calls = server.calls
        second = _sweep(tmp_path, "second", backbones)
    finally:
        server.close()
    assert not any(first.stage_errors.values()) and adds and all(adds.values())
    built = [json.loads((Path(d) / DONE).read_text())["endpoint"] for d in directories]
    memory = _memory_calls(first)
    assert memory and not any(c["reused"] for c in memory)
    assert sum(c["prompt_tokens"] for c in memory) == sum(b["prompt_tokens"] for b in built)
    assert sum(c["completion_tokens"] for c in memory) == sum(
        b["completion_tokens"] for b in built)
    assert len(memory) == sum(b["chat_calls"] for b in built)
    assert all(b["embedding_calls"] > 0 and b["embedding_tokens"] > 0 for b in built)
    # the second sweep opened the same memories: no add, no engine call for them
    assert {d: notes_system.ADDS[str(Path(d) / "system")] for d in directories} == adds
    assert {t.directory for t in _traces(second)} == directories
    assert not any(t.built_here for t in _traces(second))
    reused = _memory_calls(second)
    assert reused and all(c["reused"] and c["cost_usd"] == 0 for c in reused)
    assert sorted((c["prompt_tokens"], c["completion_tokens"], c["request_hash"])
                  for c in reused) == sorted((c["prompt_tokens"], c["completion_tokens"],
                                              c["request_hash"]) for c in memory)
    notes = [r for t in _traces(second) for r in t.recalled if not r.raw]
    assert server.calls - engine_calls <= 2 * 2  # answers and judgements only, at most
    assert all(r.timestamp and not r.timestamp.isoformat().startswith(_this_year())
               for r in notes)


def test_a_failed_build_makes_its_questions_error_records_never_answers(tmp_path: Path
                                                                         ) -> None:
    server = notes_server("this is not json")
    try:
        summary = _sweep(tmp_path, "junk", scripted_backbones(tmp_path, server, "scripted"))
    finally:
        server.close()
    assert summary.stage_errors["construct"] == 2 and summary.judged == 0
    assert summary.accuracy is None  # never scored
    failed = stage_store(summary.run_dir, "construct").failures().to_pylist()
    assert {r["qid"] for r in failed} == {r["qid"] for r in _records(summary, "retrieve")}
    assert all("EngineError" in r["error"] and "is incomplete" in r["error"]
               for r in failed)
    for stage in ("construct", "answer", "judge"):
        assert _records(summary, stage) == [], stage
    assert [c for c in _memory_calls_all(summary) if c["error"]]  # the junk calls, on record


def _records(summary: RunSummary, stage: str) -> list[dict[str, Any]]:
    return stage_store(summary.run_dir, stage).latest().to_pylist()


def _memory_calls_all(summary: RunSummary) -> list[dict[str, Any]]:
    calls = calls_store(summary.run_dir).read_all()
    return calls.filter(pc.equal(calls.column("stage"), MEMORY_STAGE)).to_pylist()


def _this_year() -> str:
    from datetime import datetime

    return str(datetime.now().year)
