"""The context as drawn: T-MEM's forest with trimmed spans and gold marked, T2Mem's steps
(each the panel its method registered, from the stored payload), gold evidence lines; from
contexts rendered by the methods' own code."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tmem_core import to_json
from tmem_core.methods.t2mem import LoopRecord
from tmem_core.methods.tmem import Built, Proposal, build_forest, linearise
from tmem_core.schema import Message
from tmem_core.viewer._evidence import context_lines, panels

T0 = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
MSGS = [Message("c", f"c:{i}", i, T0 + timedelta(minutes=i), text, author=f"User_{i}",
                channel="#eng", topic="A", phase="design")
        for i, text in enumerate(["We use 3 attempts. Ping me later.", "Now 5 attempts.",
                                  "Applies to EU only. Thanks all!"], start=1)]
BY_ID = {m.msg_id: m for m in MSGS}
PROPOSALS = {"c:1": Proposal(None, "ROOT"), "c:2": Proposal("c:1", "UPDATE"),
             "c:3": Proposal("c:9", "EXPAND")}  # c:3's parent does not exist: repaired


def _forest() -> tuple[str, str]:
    """A T-MEM context's stored construct record, and its text."""
    forest, repairs = build_forest(MSGS, PROPOSALS)
    kept = {"c:1": "We use 3 attempts.", "c:2": "Now 5 attempts.", "c:3": "Applies to EU only."}
    text = linearise(forest, BY_ID, kept).text
    built = Built(forest=tuple(forest.nodes.values()), labels={"c:1": "KEY", "c:2": "SUPPORT"},
                  trimmed=(), repairs=tuple(repairs), failures=(), compression=None)
    return to_json(built), text


def test_forest_tree_relations_trimmed_spans_and_gold() -> None:
    payload, text = _forest()
    (view,) = panels("tmem_untyped", payload, text, BY_ID, {"c:2"}).values()
    (root,) = view.roots
    assert (root.id, root.relation, root.label, root.author) == ("c:1", "ROOT", "KEY", "User_1")
    (update,) = root.children
    (expand,) = update.children  # repaired: the nearest earlier message of its topic
    assert [(n.id, n.relation, n.gold) for n in (update, expand)] == [
        ("c:2", "UPDATE", True), ("c:3", "EXPAND", False)]
    assert [(s.text, s.trimmed) for s in root.spans] == [("We use 3 attempts.", False),
                                                         ("Ping me later.", True)]
    assert [(s.text, s.trimmed) for s in update.spans] == [("Now 5 attempts.", False)]
    assert [(s.text, s.trimmed) for s in expand.spans] == [
        ("Applies to EU only.", False), ("Thanks all!", True)]
    assert root.meta == "channel: #eng, topic: A, phase: design"
    assert view.repairs == ["c:3: unknown parent 'c:9'; made EXPAND of c:2"]


def test_gold_marks_a_line_by_its_own_message_not_its_parent_reference() -> None:
    _, text = _forest()
    lines = context_lines(text, {"c:1"})
    assert [(line.ids, line.gold) for line in lines] == [
        (["c:1"], True), (["c:2"], False), (["c:3"], False)]


def test_t2mem_steps_timeline() -> None:
    entry = {"id": "e1", "episode": "ep0", "kind": "fact", "text": "limit is 5"}
    usage = {"prompt_tokens": 300, "completion_tokens": 40, "latency_s": 1.5, "cached": False,
             "error": None}
    steps = (
        {"step": 1, "allowed": ["search", "read"], "action": "read", "argument": "ep0",
         "reasoning": "need raw", "memory": "limit: 5", **usage,
         "read": {"episode": "ep0", "source": "#eng", "messages": 4, "of": 9, "tokens": 120}},
        {"step": 2, "allowed": ["search", "answer"], "action": "search", "argument": "",
         "reasoning": "", "memory": "", **usage, "found": [entry],
         "repair": "empty query: searched the question"},
        {"step": 3, "allowed": ["answer"], **usage, "error": "timed out"})
    loop = LoopRecord(initial=(entry,), steps=steps, stop="answer", memory=("limit: 5",),
                      fallback=False)
    drawn = panels("t2mem_no_raw", to_json(loop), "limit: 5", BY_ID, set())
    view = drawn["timeline"]
    assert view.initial == ["(e1) [ep0] fact: limit is 5"]
    assert [s.action for s in view.steps] == ["read", "search", "-"]
    assert view.steps[0].read == "ep0 (#eng): 4 of 9 messages, 120 tokens"
    assert view.steps[0].memory == "limit: 5"
    assert view.steps[1].found == view.initial and view.steps[1].repair
    assert view.steps[2].error == "timed out"
    assert (view.stop, view.memory, view.fallback) == ("answer", ["limit: 5"], False)


def test_a_method_without_a_view_gets_no_panel() -> None:
    """Search-o1's trace has steps too: it registered no view, so none is drawn."""
    payload, text = _forest()
    assert panels("search_o1", payload, text, BY_ID, set()) == {}
    assert panels("tmem", None, text, BY_ID, set()) == {}  # a record without a payload
    assert panels("not_registered_here", payload, text, BY_ID, set()) == {}
