"""End-of-run validators over stored records: the checks a method registered (T-MEM's forest
structure), on each context's stored payload; the leak guards on every row of a call and on
answer prompts whatever their context."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest

from tmem_core import to_json
from tmem_core.benchmarks import get_protocol
from tmem_core.evaluation import answer_prompt
from tmem_core.methods import get_method
from tmem_core.methods.tmem import Built
from tmem_core.methods.tmem._forest import Forest, Node, Relation
from tmem_core.pipeline._validators import (
    context_checks,
    no_gold_ids_in_prompts,
    no_gold_in_prompts,
)
from tmem_core.results import memory_qid
from tmem_core.schema import Gold, Question

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _node(i: str, parent: str | None, depth: int, seq: int, children: tuple[str, ...] = ()
          ) -> Node:
    relation: Relation = "ROOT" if parent is None else "EXPAND"
    return Node(i, parent, relation, depth, T0 + timedelta(minutes=seq), seq, children)


def _record(qid: str, forest: Forest, ids: list[str]) -> dict[str, Any]:
    built = Built(forest=tuple(forest.nodes.values()), labels={}, trimmed=(), repairs=(),
                  failures=(), compression=None)
    return {"qid": qid, "ok": True, "context_ids": ids, "payload": to_json(built)}


def test_forest_records_are_checked_for_structure_and_order() -> None:
    good = Forest({"a": _node("a", None, 0, 1, ("b",)), "b": _node("b", "a", 1, 2),
                   "c": _node("c", None, 0, 3)}, ("a", "c"))
    # "y" claims a parent that came later, and its context lists the trees out of order
    bad = Forest({"x": _node("x", None, 0, 5, ()), "y": _node("y", "z", 1, 4),
                  "z": _node("z", None, 0, 6, ("y",))}, ("x", "z"))
    table = pa.Table.from_pylist([
        _record("q1", good, ["a", "b", "c"]),
        _record("q2", bad, ["z", "y", "x"]),
        {**_record("q3", good, ["a"]), "payload": "{}"},
        {**_record("q4", bad, ["z"]), "ok": False},  # a failed record: not checked
    ])
    (name, found), = context_checks(table, get_method("tmem_wo_compression")).items()
    assert name == "forest_structure" and not found.passed and found.checked == 3
    assert any(p.startswith("q2: y: parent z is not earlier") for p in found.problems)
    assert any(p.startswith("q2: linearised order differs") for p in found.problems)
    assert any(p.startswith("q3: unreadable construct record") for p in found.problems)
    assert not [p for p in found.problems if p.startswith(("q1", "q4"))]


def test_a_method_without_checks_has_none() -> None:
    assert context_checks(pa.Table.from_pylist([{"qid": "q", "ok": True}]),
                          get_method("bm25")) == {}


def _call(stage: str, qid: str, request_hash: str, leaks: list[str]) -> dict[str, Any]:
    return {"key": f"{stage}|{qid}|{request_hash}", "stage": stage, "qid": qid, "leaks": leaks}


def test_a_flagged_memory_call_is_not_cleared_by_a_reused_copy() -> None:
    """A memory call that showed a gold id, then the same call reused from the memory's
    earlier build (its copy unflagged): still one leak, counted once."""
    memory = memory_qid("conv-26")
    calls = pa.Table.from_pylist([
        _call("memory", memory, "9f1c2a", ["conv-26:D1:3"]),
        _call("memory", memory, "9f1c2a", []),  # reused
        _call("memory", memory, "4be1b6", []),
        _call("answer", "conv-26:q0", "77d0e3", []),
        _call("judge", "conv-26:q0", "0c5a91", ["conv-26:D1:3"]),  # judges see the gold
    ])
    found = no_gold_ids_in_prompts(calls)
    assert not found.passed and found.checked == 3
    assert found.problems == [f"memory {memory}: prompt holds conv-26:D1:3"]
    clean = no_gold_ids_in_prompts(calls.slice(2))
    assert clean.passed and clean.checked == 2


# LoCoMo's, as prepared: its gold answer is inside "mentioned" of the answer instructions
QUESTION = Question("conv-47", "conv-47:q79", "What is the name of the pup that was adopted by "
                    "James?", "single-hop")
GOLD = Gold("conv-47:q79", "Ned", evidence_ids=("m3541",))
EVIDENCE = ("[m3541] 2022-04-12 09:52 James: Hey John! Long time no chat - I adopted a pup from "
            "a shelter in Stamford last week and my days have been so much happier with him "
            "in the fam. I named it Ned. Any progress on your gaming goals? [shares an image: a "
            "photo of a dog and a cat sitting on a dog bed]")


@pytest.mark.parametrize("context", ["", "[m3541] 2022-04-12 09:52 James: Ned",
                                     "\n".join([EVIDENCE] * 40)])
def test_a_gold_answer_planted_in_an_answer_prompt_fails_the_run(context: str) -> None:
    protocol = get_protocol("locomo")
    messages, _ = answer_prompt(QUESTION, "flat", context, protocol)
    planted = [*messages[:-1], {**messages[-1], "content": messages[-1]["content"] + " Ned"}]
    construct = pa.Table.from_pylist([{"qid": QUESTION.qid, "ok": True, "kind": "flat",
                                       "context": context}])

    def check(prompt: list[dict[str, str]]) -> list[str]:
        answers = pa.Table.from_pylist([{"qid": QUESTION.qid, "prompt": json.dumps(prompt)}])
        found = no_gold_in_prompts(answers, construct, {QUESTION.qid: QUESTION},
                                   {GOLD.qid: GOLD}, protocol)
        assert found.checked == 1
        return found.problems

    assert check(messages) == []
    assert check(planted) == ["conv-47:q79: gold answer 'Ned' in prompt"]
