"""The evidence basis of a construct record: shown, read, or untraceable."""

from __future__ import annotations

import json
from datetime import datetime

from tmem_core import to_json
from tmem_core.evaluation._basis import READ, SHOWN, UNTRACEABLE
from tmem_core.methods import Record
from tmem_core.methods.external._record import MemoryUsed, system_record
from tmem_core.methods.external._system import Recalled
from tmem_core.results._evidence import evidence_basis

AT = datetime(2024, 3, 1, 9, 30)


def _recalled(*items: tuple[bool, tuple[str, ...]], shown: int | None = None) -> str:
    """The stored record of an external system that recalled `items` (raw?, sources)."""
    recalled = [Recalled("t", AT, ids, 1.0, raw) for raw, ids in items]
    return to_json(system_record("mem", "q", recalled, len(recalled) if shown is None else shown,
                                 MemoryUsed("b", "/m", True), ()))


def test_messages_shown_as_they_are() -> None:
    assert evidence_basis("flat", to_json(Record())) == (SHOWN, [])
    assert evidence_basis("memory", _recalled((True, ("m1",)))) == (SHOWN, [])
    assert evidence_basis("memory", _recalled()) == (SHOWN, [])  # nothing recalled


def test_what_a_method_wrote_after_reading() -> None:
    assert evidence_basis("memory", to_json(Record(basis=READ))) == (READ, [])
    both = _recalled((True, ("m1",)), (False, ("m2", "m3")), (False, ("m3",)))
    assert evidence_basis("memory", both) == (READ, ["m2", "m3"])


def test_a_memory_without_sources_is_untraceable() -> None:
    assert evidence_basis("memory", _recalled((True, ("m1",)), (False, ()))) == (UNTRACEABLE, [])
    # ... unless it was cut by the budget before it reached the answer model
    cut = _recalled((True, ("m1",)), (False, ()), shown=1)
    assert evidence_basis("memory", cut) == (SHOWN, [])


def _earlier(*items: tuple[bool, list[str]], shown: int | None = None) -> str:
    """An external system's detail as records before the construct record kept it."""
    recalled = [{"text": "t", "timestamp": None, "source_ids": ids, "score": 1.0, "raw": raw}
                for raw, ids in items]
    return json.dumps({"system": "mem", "recalled": recalled,
                       "shown": len(recalled) if shown is None else shown})


def test_records_written_before_the_construct_record_keep_their_basis() -> None:
    assert evidence_basis("flat", None) == (SHOWN, [])
    assert evidence_basis("forest", '{"forest": []}', '{"forest": []}') == (SHOWN, [])
    assert evidence_basis("memory", '{"steps": [], "stop": "answer"}', None) == (READ, [])
    assert evidence_basis("memory", None, _earlier((True, ["m1"]))) == (SHOWN, [])
    both = _earlier((True, ["m1"]), (False, ["m2", "m3"]), (False, ["m3"]))
    assert evidence_basis("memory", None, both) == (READ, ["m2", "m3"])
    assert evidence_basis("memory", None, _earlier((False, []))) == (UNTRACEABLE, [])
    assert evidence_basis("memory", None, _earlier((True, ["m1"]), (False, []), shown=1)) == (
        SHOWN, [])
