"""The evidence basis of a construct record: shown, read, or untraceable."""

from __future__ import annotations

import json

from tmem_core.results._evidence import READ, SHOWN, UNTRACEABLE, evidence_basis


def _recalled(*items: tuple[bool, list[str]], shown: int | None = None) -> str:
    recalled = [{"text": "t", "timestamp": None, "source_ids": ids, "score": 1.0, "raw": raw}
                for raw, ids in items]
    return json.dumps({"system": "mem", "recalled": recalled,
                       "shown": len(recalled) if shown is None else shown})


def test_messages_shown_as_they_are() -> None:
    assert evidence_basis("flat", None) == (SHOWN, [])
    assert evidence_basis("forest", '{"forest": []}') == (SHOWN, [])
    assert evidence_basis("memory", _recalled((True, ["m1"]))) == (SHOWN, [])
    assert evidence_basis("memory", _recalled()) == (SHOWN, [])  # nothing recalled


def test_what_a_method_wrote_after_reading() -> None:
    assert evidence_basis("memory", json.dumps({"steps": [], "stop": "answer"})) == (READ, [])
    assert evidence_basis("memory", None) == (READ, [])
    assert evidence_basis("chain", json.dumps({"queries": ["q"]})) == (READ, [])  # Search-o1
    both = _recalled((True, ["m1"]), (False, ["m2", "m3"]), (False, ["m3"]))
    assert evidence_basis("memory", both) == (READ, ["m2", "m3"])


def test_a_memory_without_sources_is_untraceable() -> None:
    assert evidence_basis("memory", _recalled((True, ["m1"]), (False, []))) == (UNTRACEABLE, [])
    # ... unless it was cut by the budget before it reached the answer model
    cut = _recalled((True, ["m1"]), (False, []), shown=1)
    assert evidence_basis("memory", cut) == (SHOWN, [])
