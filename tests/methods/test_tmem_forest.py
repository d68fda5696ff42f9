"""Temporal Memory Structuring: constraint checks, deterministic repair, forest validators."""

from __future__ import annotations

import json
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from test_tmem_fakes import message

from tmem_core import from_json, to_json
from tmem_core.methods.tmem import Proposal, build_forest
from tmem_core.methods.tmem._build import Constraints, flat_forest, phase_order
from tmem_core.methods.tmem._forest import Forest
from tmem_core.methods.tmem._validate import forest_problems, order_problems
from tmem_core.schema import Message

PHASES = {group: {"planning": 0, "design": 1, "launch": 2}
          for group in ("topic:A", "topic:B", "channel:#eng")}


def _edges(forest: Forest) -> dict[str, tuple[str | None, str]]:
    return {i: (n.parent, n.relation) for i, n in forest.nodes.items()}


def test_valid_proposals_are_kept_with_depth_and_children() -> None:
    msgs = [message(1, "Propose 3."), message(2, "Make it 5."), message(3, "Applies to EU.")]
    forest, repairs = build_forest(msgs, {"c:1": Proposal(None, "ROOT"),
                                          "c:2": Proposal("c:1", "UPDATE"),
                                          "c:3": Proposal("c:1", "EXPAND")})
    assert repairs == []
    assert _edges(forest) == {"c:1": (None, "ROOT"), "c:2": ("c:1", "UPDATE"),
                              "c:3": ("c:1", "EXPAND")}
    assert forest.nodes["c:1"].children == ("c:2", "c:3")
    assert [n.depth for n in forest.preorder()] == [0, 1, 1]
    assert forest_problems(forest) == []


def test_a_later_parent_is_repaired_to_the_nearest_earlier_message_of_the_topic() -> None:
    msgs = [message(1, "a"), message(2, "b", topic="B"), message(3, "c"), message(4, "d")]
    proposals = {"c:1": Proposal(None, "ROOT"), "c:2": Proposal(None, "ROOT"),
                 "c:3": Proposal("c:4", "UPDATE"), "c:4": Proposal("c:3", "UPDATE")}
    forest, repairs = build_forest(msgs, proposals)
    assert [(r.id, r.problem, r.parent, r.relation) for r in repairs] == [
        ("c:3", "parent is not earlier", "c:1", "EXPAND")]  # c:2 is in another topic
    assert _edges(forest)["c:4"] == ("c:3", "UPDATE")


def test_a_cross_topic_parent_is_repaired_and_a_lone_topic_becomes_a_root() -> None:
    msgs = [message(1, "a", topic="A"), message(2, "b", topic="B"), message(3, "c", topic="A")]
    proposals = {"c:2": Proposal("c:1", "UPDATE"), "c:3": Proposal("c:2", "EXPAND")}
    forest, repairs = build_forest(msgs, proposals)
    assert {r.id: r.problem for r in repairs} == {
        "c:1": "no proposal", "c:2": "parent is in another topic",
        "c:3": "parent is in another topic"}
    assert _edges(forest) == {"c:1": (None, "ROOT"), "c:2": (None, "ROOT"),
                              "c:3": ("c:1", "EXPAND")}


def test_a_proposed_cycle_is_broken_by_time_order() -> None:
    msgs = [message(1, "a"), message(2, "b"), message(3, "c")]
    cycle = {"c:1": Proposal("c:3", "UPDATE"), "c:2": Proposal("c:1", "UPDATE"),
             "c:3": Proposal("c:2", "UPDATE")}
    forest, repairs = build_forest(msgs, cycle)
    assert [r.id for r in repairs] == ["c:1"]
    assert _edges(forest) == {"c:1": (None, "ROOT"), "c:2": ("c:1", "UPDATE"),
                              "c:3": ("c:2", "UPDATE")}
    assert forest_problems(forest) == []


def test_phase_order_must_not_go_backwards() -> None:
    msgs = [message(1, "a", phase="launch"), message(2, "b", phase="design"),
            message(3, "c", phase="launch")]
    proposals = {"c:2": Proposal("c:1", "UPDATE"), "c:3": Proposal("c:2", "UPDATE")}
    forest, repairs = build_forest(msgs, {"c:1": Proposal(None, "ROOT"), **proposals},
                                   Constraints(PHASES))
    assert [(r.id, r.problem, r.parent) for r in repairs] == [
        ("c:2", "phase order goes backwards", None)]
    assert _edges(forest)["c:3"] == ("c:2", "UPDATE")
    assert phase_order(msgs) == {"topic:A": {"launch": 0, "design": 1}}


def test_phase_order_is_each_topics_own() -> None:
    """Topic A runs design -> launch while topic B, started earlier, is already at launch:
    a conversation-wide order (launch first) would reject A's true UPDATE edge."""
    msgs = [message(1, "b0", topic="B", phase="launch"), message(2, "b1", topic="B",
                                                                 phase="design"),
            message(3, "a0", topic="A", phase="design"),
            message(4, "a1", topic="A", phase="launch")]
    ranks = phase_order(msgs)
    assert ranks == {"topic:B": {"launch": 0, "design": 1},
                     "topic:A": {"design": 0, "launch": 1}}
    proposals = {"c:1": Proposal(None, "ROOT"), "c:2": Proposal("c:1", "UPDATE"),
                 "c:3": Proposal(None, "ROOT"), "c:4": Proposal("c:3", "UPDATE")}
    forest, repairs = build_forest(msgs, proposals, Constraints(ranks))
    assert _edges(forest)["c:4"] == ("c:3", "UPDATE")  # design -> launch within A
    assert _edges(forest)["c:2"] == ("c:1", "UPDATE")  # B's own order: launch, then design
    assert repairs == []
    untopical = [replace(m, topic=None, channel="#eng") for m in msgs]
    assert list(phase_order(untopical)) == ["channel:#eng"]  # topicless: the channel's order


def test_same_time_breaks_ties_by_conversation_order() -> None:
    msgs = [message(1, "a", minutes=0), message(2, "b", minutes=0)]
    forest, repairs = build_forest(msgs, {"c:1": Proposal("c:2", "EXPAND"),
                                          "c:2": Proposal("c:1", "EXPAND")})
    assert _edges(forest) == {"c:1": (None, "ROOT"), "c:2": ("c:1", "EXPAND")}
    assert len(repairs) == 1


def test_unknown_parent_relation_and_missing_proposal_are_repaired() -> None:
    msgs = [message(1, "a"), message(2, "b"), message(3, "c")]
    forest, repairs = build_forest(msgs, {"c:1": Proposal(None, "ROOT"),
                                          "c:2": Proposal("c:9", "UPDATE"),
                                          "c:3": Proposal("c:1", "SUPERSEDES")})
    assert [r.problem for r in repairs] == ["unknown parent 'c:9'",
                                            "unknown relation 'SUPERSEDES'"]
    assert _edges(forest) == {"c:1": (None, "ROOT"), "c:2": ("c:1", "EXPAND"),
                              "c:3": ("c:2", "EXPAND")}


def test_untyped_forest_keeps_the_topology_with_related_edges() -> None:
    msgs = [message(1, "a"), message(2, "b"), message(3, "c")]
    proposals = {"c:2": Proposal("c:1", "UPDATE"), "c:3": Proposal("c:1", "EXPAND")}
    typed, _ = build_forest(msgs, proposals)
    untyped, _ = build_forest(msgs, proposals, typed=False)
    assert {i: n.parent for i, n in untyped.nodes.items()} == {
        i: n.parent for i, n in typed.nodes.items()}
    assert [n.relation for n in untyped.preorder()] == ["ROOT", "RELATED", "RELATED"]
    assert forest_problems(untyped) == []


def test_flat_forest_is_all_roots_in_the_order_given() -> None:
    forest = flat_forest([message(2, "b"), message(1, "a"), message(3, "c")])  # by rank
    assert forest.roots == ("c:2", "c:1", "c:3") and forest_problems(forest) == []
    assert [n.id for n in forest.preorder()] == ["c:2", "c:1", "c:3"]


def test_preorder_orders_trees_by_root_time_and_children_chronologically() -> None:
    msgs = [message(k, str(k), topic="A" if k % 2 else "B") for k in range(1, 7)]
    proposals = {"c:3": Proposal("c:1", "UPDATE"), "c:5": Proposal("c:1", "EXPAND"),
                 "c:4": Proposal("c:2", "EXPAND"), "c:6": Proposal("c:4", "UPDATE")}
    forest, _ = build_forest(msgs, {"c:1": Proposal(None, "ROOT"),
                                    "c:2": Proposal(None, "ROOT"), **proposals})
    order = [n.id for n in forest.preorder()]
    assert order == ["c:1", "c:3", "c:5", "c:2", "c:4", "c:6"]
    assert order_problems(forest, order) == []
    assert order_problems(forest, sorted(order)) != []


def test_json_round_trip_and_validators_catch_broken_forests() -> None:
    msgs = [message(1, "a"), message(2, "b"), message(3, "c")]
    forest, _ = build_forest(msgs, {"c:2": Proposal("c:1", "UPDATE"),
                                    "c:3": Proposal("c:2", "EXPAND")})
    assert from_json(Forest, to_json(forest)) == forest
    broken = json.loads(to_json(forest))
    broken["nodes"]["c:1"].update(parent="c:3", relation="UPDATE", depth=3)  # a cycle
    broken["roots"] = []
    problems = forest_problems(from_json(Forest, json.dumps(broken)))
    assert any("not earlier" in p for p in problems)
    assert any("on a cycle" in p for p in problems)
    mixed = replace(forest, nodes={**forest.nodes,
                                   "c:3": replace(forest.nodes["c:3"], relation="RELATED")})
    assert "typed and untyped relations mixed" in forest_problems(mixed)


def test_trimming_a_leaf_keeps_every_other_edge() -> None:
    msgs = [message(1, "a"), message(2, "b"), message(3, "c")]
    forest, _ = build_forest(msgs, {"c:2": Proposal("c:1", "UPDATE"),
                                    "c:3": Proposal("c:1", "EXPAND")})
    smaller = forest.without("c:3")
    assert smaller.nodes["c:1"].children == ("c:2",) and forest_problems(smaller) == []


_TOPICS = st.sampled_from(["A", "B", None])
_PHASES = st.sampled_from(["planning", "design", "launch", None])


@st.composite
def _scenario(draw: st.DrawFn) -> tuple[list[Message], dict[str, Proposal]]:
    n = draw(st.integers(1, 12))
    msgs = [message(k, f"m{k}", topic=draw(_TOPICS), phase=draw(_PHASES),
                    minutes=draw(st.integers(0, 5))) for k in range(n)]
    ids = [m.msg_id for m in msgs] + ["c:99", None]
    proposals = {m.msg_id: Proposal(draw(st.sampled_from(ids)),
                                    draw(st.sampled_from(["UPDATE", "EXPAND", "ROOT", "X"])))
                 for m in msgs if draw(st.booleans())}
    return msgs, proposals


@given(_scenario(), st.booleans())
@settings(max_examples=300, deadline=None)
def test_any_proposed_edges_repair_to_a_valid_forest(
        scenario: tuple[list[Message], dict[str, Proposal]], typed: bool) -> None:
    msgs, proposals = scenario
    constraints = Constraints(PHASES)
    forest, _ = build_forest(msgs, proposals, constraints, typed)
    assert forest_problems(forest) == []
    assert set(forest.nodes) == {m.msg_id for m in msgs}
    by_id = {m.msg_id: m for m in msgs}
    for node in forest.nodes.values():
        if node.parent is not None:
            assert constraints.problem(by_id[node.id], by_id[node.parent]) is None
