"""A method's tokens and cost do not depend on what ran before: a sweep run again, on warm
caches and with T2Mem memories another sweep built, reports the same tokens per question per
stage for every run, and spends nothing new."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from tests.conftest import ScriptedServer, Step, scripted_backbones
from tmem_core.pipeline import parse_sweep, run_sweep
from tmem_core.reports import read_sweep, summarise

ENTRIES = {"entries": [{"kind": "fact", "text": "The review cadence changed.", "entities": [],
                        "time": ""}]}
STEP = {"reasoning": "The notes suffice.", "memory": "cadence changed", "action": "answer",
        "argument": ""}


class ShapedServer(ScriptedServer):
    """Answers each kind of request in its own shape: extraction, loop step, judge, answer."""

    def _next(self, body: dict[str, Any], authorization: str) -> Step:
        super()._next(body, authorization)
        system = body["messages"][0]["content"]
        if system.startswith("You write light metadata"):
            return Step(content=json.dumps(ENTRIES))
        if system.startswith("You answer a question about a long conversation by building"):
            return Step(content=json.dumps(STEP))
        if system.startswith("You grade answers"):
            return Step(content='{"verdict": "WRONG"}')
        return Step(content="It changed to daily.")


def _sweep(tmp_path: Path, name: str, backbones: Path) -> dict[str, Any]:
    config = parse_sweep({
        "name": name, "results_dir": str(tmp_path / name), "backbones_file": str(backbones),
        "benchmarks": [{"name": "synthetic", "size": 200, "limit": 2}],
        "grid": {"methods": ["t2mem", "bm25"], "backbones": ["priced"], "top_k": [4],
                 "budgets": [512]},
        "methods": {"t2mem": {"episodes": "topic_window", "topic_gap_hours": 1440,
                              "max_entries": 2}}})
    summaries = {s.run_id.split("_")[1]: s for s in run_sweep(config, log=lambda _: None,
                                                              local=True)}
    tokens = summarise(read_sweep(tmp_path / name / name)).tokens
    return {"summaries": summaries, "tokens": tokens}


def _per_stage(tokens: pl.DataFrame, run_id: str) -> dict[str, float]:
    rows = tokens.filter(pl.col("run_id") == run_id).select("stage", "tokens_per_question")
    return dict(rows.iter_rows())


def test_warm_caches_and_reused_memories_report_the_same_tokens(tmp_path: Path) -> None:
    server = ShapedServer([Step()])
    try:
        backbones = scripted_backbones(tmp_path, server, "priced")
        backbones.write_text(backbones.read_text()
                             + "prices = { input_per_mtok = 1.0, output_per_mtok = 2.0 }\n")
        first = _sweep(tmp_path, "first", backbones)
        calls_after_first = server.calls
        second = _sweep(tmp_path, "second", backbones)  # another sweep: its memory is reused
    finally:
        server.close()
    assert server.calls == calls_after_first  # nothing new reached the engine
    for method in ("t2mem", "bm25"):
        a, b = first["summaries"][method], second["summaries"][method]
        assert _per_stage(first["tokens"], a.run_id) == _per_stage(second["tokens"], b.run_id)
        assert a.tokens == b.tokens and a.method_cost_usd == b.method_cost_usd > 0
        assert a.cost_usd > 0 and b.cost_usd == 0  # spent now: only the first time
    memory = _per_stage(first["tokens"], first["summaries"]["t2mem"].run_id)["memory"]
    assert memory > 0  # the memory's extraction is part of T2Mem's tokens, both times
