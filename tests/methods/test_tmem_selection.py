"""LLM evidence selection with scripted outputs: batching, labels, fallback, the seam."""

from __future__ import annotations

from typing import Any

from test_tmem_fakes import ScriptedLLM, asked_ids, label_all, message, shown_lines

from tmem_core.llm import ChatRequest
from tmem_core.methods.tmem._discovery import Candidate, Interval
from tmem_core.methods.tmem._rerank import Selector
from tmem_core.methods.tmem._steps import LLMSelector, interval_batches
from tmem_core.schema import Question

QUESTION = Question("c", "q1", "What is the retry limit for Atlas checkout?", "ku")
MSGS = [message(k, f"message {k}", topic="A" if k < 6 else "B") for k in range(10)]
# relevance decreasing with k: the reranker's order is c:0, c:1, ...
CANDIDATES = [Candidate(m, 1.0 - k / 10, 0.0, None) for k, m in enumerate(MSGS)]
INTERVALS = [Interval("topic:A", ("c:1",), 0.0, 7200.0, 6, 0.5, 0.0, 0.6, 0.3, True,
                      tuple(f"c:{k}" for k in range(6))),
             Interval("topic:B", ("c:7", "c:8"), 4 * 3600.0, 4 * 3600.0, 2, 0.5, 0.0, 2.0, 1.0,
                      False, ())]


def test_candidates_are_packed_by_interval_in_time_order() -> None:
    batches = interval_batches(reversed(CANDIDATES), INTERVALS, 4)
    assert [[c.message.msg_id for c in b.candidates] for b in batches] == [
        ["c:0", "c:1", "c:2", "c:3"], ["c:4", "c:5"], ["c:6", "c:7", "c:8", "c:9"]]
    assert batches[0].name == "Interval 1 (topic:A), part 1"
    assert batches[2].name == "Anchors of topic:B"  # not in a kept interval: by group
    packed = interval_batches(CANDIDATES, INTERVALS, 20)
    assert len(packed) == 1 and len(packed[0].sections) == 2


def test_labels_map_back_from_local_ids_and_keys_rank_first() -> None:
    def script(request: ChatRequest) -> dict[str, Any]:
        lines = shown_lines(request)
        return {"labels": {i: "KEY" if "message 7" in lines[i] else
                           "SUPPORT" if "message 2" in lines[i] else "DROP"
                           for i in asked_ids(request)}}

    llm = ScriptedLLM(script)
    out = LLMSelector(llm, batch_size=4).label(QUESTION, CANDIDATES, INTERVALS)
    assert out.ranked == ("c:7", "c:2")
    assert out.labels["c:7"] == "KEY" and out.labels["c:0"] == "DROP"
    assert out.failures == () and out.stats.calls == 3
    assert len(llm.batches) == 1  # every request in one generate call
    first = llm.requests[0]
    assert asked_ids(first) == ["m1", "m2", "m3", "m4"]
    assert first.stage == "tmem.select" and first.qid == "q1"
    assert "Question: What is the retry limit for Atlas checkout?" in first.messages[-1].content


def test_unusable_batches_fall_back_to_reranked_order_and_are_recorded() -> None:
    def script(request: ChatRequest) -> dict[str, Any] | str:
        ids = asked_ids(request)
        if ids[0] == "m1":
            return "not JSON"
        if ids[0] == "m5":
            return {"labels": {ids[0]: "MAYBE"}}  # too few usable labels
        return {"labels": {**dict.fromkeys(ids, "DROP"), ids[-1]: "KEY"}}

    out = LLMSelector(ScriptedLLM(script), batch_size=4).label(QUESTION, CANDIDATES,
                                                                INTERVALS)
    assert [f["batch"] for f in out.failures] == ["Interval 1 (topic:A), part 1",
                                                  "Interval 1 (topic:A), part 2"]
    assert "not JSON" in out.failures[0]["error"]
    assert out.failures[1]["error"] == "labels for 0 of 2 messages"
    assert out.ranked == ("c:9", "c:0", "c:1", "c:2", "c:3", "c:4", "c:5")
    assert {out.labels[f"c:{k}"] for k in range(6)} == {"FALLBACK"}


def test_omitted_labels_count_as_drop_when_coverage_suffices() -> None:
    llm = ScriptedLLM(lambda r: {"labels": {asked_ids(r)[0]: "KEY", asked_ids(r)[1]: "KEY"}})
    out = LLMSelector(llm, batch_size=4, min_coverage=0.5).label(QUESTION, CANDIDATES[:4])
    assert out.ranked == ("c:0", "c:1") and out.labels["c:3"] == "DROP"


def test_the_llm_selector_fits_the_selector_seam() -> None:
    selector: Selector = LLMSelector(ScriptedLLM(label_all("KEY")))
    assert selector.select(QUESTION, CANDIDATES, 3) == ["c:0", "c:1", "c:2"]
