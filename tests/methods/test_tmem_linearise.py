"""Linearisation: trees by root time, chronological pre-order, one line per node."""

from __future__ import annotations

from test_tmem_fakes import message

from tmem_core.methods.tmem import Proposal, build_forest, linearise
from tmem_core.methods.tmem._build import flat_forest

MSGS = [message(1, "We use 3 attempts.", phase="design"), message(2, "Unrelated B.", topic="B"),
        message(3, "Now 5 attempts.", phase="design"), message(4, "Applies to EU.")]
PROPOSALS = {"c:1": Proposal(None, "ROOT"), "c:2": Proposal(None, "ROOT"),
             "c:3": Proposal("c:1", "UPDATE"), "c:4": Proposal("c:3", "EXPAND")}


def test_forest_lines_carry_structure_metadata_and_retained_text() -> None:
    forest, _ = build_forest(MSGS, PROPOSALS)
    by_id = {m.msg_id: m for m in MSGS}
    texts = {m.msg_id: m.text for m in MSGS} | {"c:4": "EU."}
    out = linearise(forest, by_id, texts)
    assert out.order == ("c:1", "c:3", "c:4", "c:2")
    assert out.text.split("\n") == [
        "- ROOT (depth 0, no parent) [c:1] 2025-03-03 09:01 User_1 (channel: #eng, topic: A, "
        "phase: design): We use 3 attempts.",
        "  - UPDATE (depth 1, parent [c:1]) [c:3] 2025-03-03 09:03 User_0 (channel: #eng, "
        "topic: A, phase: design): Now 5 attempts.",
        "    - EXPAND (depth 2, parent [c:3]) [c:4] 2025-03-03 09:04 User_1 (channel: #eng, "
        "topic: A): EU.",
        "",
        "- ROOT (depth 0, no parent) [c:2] 2025-03-03 09:02 User_2 (channel: #eng, topic: B): "
        "Unrelated B.",
    ]


def test_flat_list_is_plain_messages_in_time_order() -> None:
    by_id = {m.msg_id: m for m in MSGS}
    out = linearise(flat_forest(MSGS), by_id, {m.msg_id: m.text for m in MSGS}, flat=True)
    assert out.order == ("c:1", "c:2", "c:3", "c:4")
    assert out.text.split("\n")[1] == ("[c:2] 2025-03-03 09:02 User_2 (channel: #eng, "
                                       "topic: B): Unrelated B.")
