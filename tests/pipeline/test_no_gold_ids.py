"""No gold through ids: on LongMemEval in its real naming (evidence sessions `answer_<hash>`,
abstention questions `<id>_abs`, `has_answer` turns), no prompt of any stage of any method holds
a gold-derived string, and the run validator that scans them would catch one."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ScriptedServer, Step, scripted_backbones, source_named
from tmem_core.benchmarks import LoadRequest, build
from tmem_core.evaluation import gold_strings
from tmem_core.llm import ChatRequest, ChatResponse, get_backbone
from tmem_core.llm._accounting import CallRecord
from tmem_core.llm._types import ChatMessage
from tmem_core.methods import render_message
from tmem_core.pipeline import parse_sweep, run_sweep
from tmem_core.pipeline._engine import EngineProxy
from tmem_core.schema import gold_from_table, messages_from_table, questions_from_table

REAL_NAMING = FIXTURES / "longmemeval" / "longmemeval_s_real_naming.json"
METHODS = ["bm25", "tmem_heuristic", "tmem", "t2mem"]


def _forbidden() -> dict[str, tuple[str, ...]]:
    prepared = build("longmemeval", LoadRequest(source=REAL_NAMING))
    messages = {m.msg_id: m for m in messages_from_table(prepared.messages)}
    return gold_strings(messages, questions_from_table(prepared.questions),
                        gold_from_table(prepared.questions))


def test_prepared_ids_carry_nothing_of_the_source_naming() -> None:
    prepared = build("longmemeval", LoadRequest(source=REAL_NAMING))
    shown = [m.msg_id for m in messages_from_table(prepared.messages)] + [
        m.session_id or "" for m in messages_from_table(prepared.messages)] + [
        q.conv_id for q in questions_from_table(prepared.questions)]
    assert not [s for s in shown if "answer_" in s or "_abs" in s or "sharegpt" in s]
    forbidden = _forbidden()
    assert "answer_280352e9" in forbidden["lme-0"] and "0a995998_abs" in forbidden["lme-1"]


def test_the_guard_flags_a_prompt_in_the_source_naming() -> None:
    """What the answer model was shown before ids were the harness's: the source ids."""
    source = source_named(build("longmemeval", LoadRequest(source=REAL_NAMING)))
    evidence = next(m for m in messages_from_table(source.messages)
                    if m.session_id and "answer_" in m.session_id)
    backbone = get_backbone("smollm2")
    request = ChatRequest((ChatMessage("user", render_message(evidence)),))

    def engine(requests: Sequence[ChatRequest]) -> tuple[list[ChatResponse], list[CallRecord]]:
        return ([ChatResponse("ok") for _ in requests],
                [CallRecord.of(backbone, r, ChatResponse("ok")) for r in requests])

    proxy = EngineProxy(engine, backbone, "answer", "e47becba",
                        forbidden=_forbidden()[evidence.conv_id])
    proxy.generate([request])
    assert "answer_280352e9" in proxy.records[0].leaks


@pytest.mark.slow
def test_no_prompt_of_any_method_holds_a_gold_derived_string(
        tmp_path: Path, scripted_server: Callable[..., ScriptedServer]) -> None:
    server = scripted_server([Step(content='{"verdict": "WRONG"}')])
    config = parse_sweep({
        "name": "lme", "results_dir": str(tmp_path / "results"),
        "backbones_file": str(scripted_backbones(tmp_path, server, "scripted")),
        "benchmarks": [{"name": "longmemeval", "source": str(REAL_NAMING)}],
        "grid": {"methods": METHODS, "backbones": ["scripted"], "top_k": [4],
                 "budget": [512]}})
    summaries = run_sweep(config, log=lambda _line: None, local=True)
    strings = {s for conv in _forbidden().values() for s in conv}
    prompts = [json.dumps(b["messages"]) for b in server.bodies]
    assert len(prompts) > 3 * len(METHODS) and strings
    assert [s for s in strings for p in prompts if s in p] == []
    for summary in summaries:
        contract = json.loads((summary.run_dir / "contract.json").read_text())
        check = contract["validators"]["no_gold_ids_in_prompts"]
        assert check["passed"] and check["checked"] > 0, summary.run_id
