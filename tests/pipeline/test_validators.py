"""End-of-run validators over stored records: the checks a method registered (T-MEM's forest
structure), on each context's stored payload."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from tmem_core import to_json
from tmem_core.methods import get_method
from tmem_core.methods.tmem import Built, Forest, Node, Relation
from tmem_core.pipeline._validators import context_checks

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _node(i: str, parent: str | None, depth: int, seq: int, children: tuple[str, ...] = ()
          ) -> Node:
    relation: Relation = "ROOT" if parent is None else "EXPAND"
    return Node(i, parent, relation, depth, T0 + timedelta(minutes=seq), seq, children)


def _record(qid: str, forest: Forest, ids: list[str]) -> dict[str, Any]:
    built = Built(tuple(forest.nodes.values()), {}, (), (), (), None)
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
    assert any(p.startswith("q3: unreadable payload") for p in found.problems)
    assert not [p for p in found.problems if p.startswith(("q1", "q4"))]


def test_a_method_without_checks_has_none() -> None:
    assert context_checks(pa.Table.from_pylist([{"qid": "q", "ok": True}]),
                          get_method("bm25")) == {}
