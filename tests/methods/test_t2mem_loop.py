"""T2Mem with a scripted LLM on the hand-built chat: preparation, the loop, ablations, trace."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.hashed_embedder import HashEmbedder
from tmem_core import ConfigError, TmemError, from_json, to_json
from tmem_core.llm import BackboneConfig, ChatRequest, ChatResponse, Usage, get_backbone
from tmem_core.llm._gating import gating_threads
from tmem_core.llm._tokens import counter_for
from tmem_core.methods import Context, MethodEnv, get_method, method_names
from tmem_core.methods._registry import build_method
from tmem_core.methods.t2mem import LoopRecord, T2Mem, render_trace
from tmem_core.methods.t2mem._config import T2MemConfig
from tmem_core.methods.t2mem._extract import EXTRACT_STAGE, extraction_limit
from tmem_core.methods.t2mem._loop import _UNREAD_DEPTH, STEP_STAGE, Loop, raw_budget
from tmem_core.methods.t2mem._record import LoopSteps
from tmem_core.retrieval import Conversation, IndexStore, cl100k_tokens
from tmem_core.schema import Message, Question

QUESTION = Question("c", "q1", "What is the checkout retry limit?", "knowledge_update")
Script = Sequence[dict[str, str] | str]


class ScriptedLLM:
    """Extraction: one fact per message of the episode. Steps: the script, in order (a string
    is a failed call with that error); the last step repeats once the script runs out."""

    def __init__(self, script: Script = ()) -> None:
        self.backbone: BackboneConfig = get_backbone("smollm2")
        self.script = list(script)
        self.requests: list[ChatRequest] = []

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        self.requests += requests
        return [self._extract(r) if r.stage == EXTRACT_STAGE else self._step() for r in requests]

    def steps(self) -> list[ChatRequest]:
        return [r for r in self.requests if r.stage == STEP_STAGE]

    def extractions(self) -> list[ChatRequest]:
        return [r for r in self.requests if r.stage == EXTRACT_STAGE]

    def _extract(self, request: ChatRequest) -> ChatResponse:
        lines = request.messages[-1].content.split("Messages:\n")[1].split("\n\n")[0]
        texts = [line.partition(": ")[2] for line in lines.splitlines()
                 if not line.startswith("[")]  # date lines
        if "summary" in json.dumps(request.schema):
            parsed: dict[str, Any] = {"summary": " ".join(texts)}
        else:
            parsed = {"entries": [{"kind": "fact", "text": t, "entities": [], "time": ""}
                                  for t in texts]}
        return ChatResponse(json.dumps(parsed), parsed, Usage(100, 20), 0.5)

    def _step(self) -> ChatResponse:
        item = self.script[min(len(self.steps()), len(self.script)) - 1]
        if isinstance(item, str):
            return ChatResponse(text="{oops", usage=Usage(50, 3), error=item,
                                error_kind="invalid_output")
        parsed = {"reasoning": "", "memory": "", "argument": "", **item}
        return ChatResponse(json.dumps(parsed), parsed, Usage(200, 30), 0.25)



def loop_record(context: Context) -> LoopRecord:
    """The context's T2Mem record."""
    assert isinstance(context.record, LoopRecord)
    return context.record

def step(action: str, argument: str = "", memory: str = "") -> dict[str, str]:
    return {"action": action, "argument": argument, "memory": memory, "reasoning": "why"}


def run(store: IndexStore, tmp_path: Path, script: Script, budget: int = 4096,
        **config: Any) -> tuple[Any, ScriptedLLM]:
    method = T2Mem(store, T2MemConfig(**config), cache=tmp_path / "t2mem", budget=budget)
    llm = ScriptedLLM(script)
    method.prepare("c", llm)
    found = method.retrieve(QUESTION)
    return method.construct(QUESTION, found, llm, cl100k_tokens), llm


def shown(context: Any) -> list[str]:
    ids = [e["id"] for e in loop_record(context).initial]
    return ids + [e["id"] for s in loop_record(context).steps for e in s.get("found", [])]


def test_prepare_extracts_each_episode_once_then_reads_the_cache(store: IndexStore,
                                                                  tmp_path: Path) -> None:
    llm = ScriptedLLM()
    stats = T2Mem(store, cache=tmp_path / "t2mem").prepare("c", llm)
    # channel-days of the chat: day 0, the episode day, five noise days, day 20, day 21
    assert (stats.mode, stats.episodes, stats.entries) == ("channel_day", 9, 40)
    assert stats.extracted == 9 and stats.reused == 0 and not stats.failed
    assert {c.stage for c in stats.calls} == {"memory"} and stats.usage == Usage(900, 180)
    again = ScriptedLLM()
    second = T2Mem(store, cache=tmp_path / "t2mem").prepare("c", again)  # a new process, say
    assert again.requests == [] and second.extracted == 0 and second.reused == 9
    assert second.entries == 40


class SlowLLM(ScriptedLLM):
    """Extraction that takes a while and logs each request to a file shared by processes."""

    def __init__(self, log: Path) -> None:
        super().__init__()
        self.log = log

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
        with self.log.open("a") as fh:
            fh.write(f"{len(requests)}\n")
        time.sleep(0.5)
        return super().generate(requests)


def _prepare_in_child(store: IndexStore, cache: Path, log: Path) -> None:
    T2Mem(store, cache=cache).prepare("c", SlowLLM(log))


def test_concurrent_processes_extract_each_episode_once(store: IndexStore,
                                                        tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    context = multiprocessing.get_context("fork")
    children = [context.Process(target=_prepare_in_child, args=(store, tmp_path / "t2mem", log))
                for _ in range(3)]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
    assert [c.exitcode for c in children] == [0, 0, 0]
    assert log.read_text().split() == ["9"]  # one batch of the 9 episodes, by one process
    assert T2Mem(store, cache=tmp_path / "t2mem").prepare("c", ScriptedLLM()).reused == 9


class FailingExtraction(ScriptedLLM):
    def _extract(self, request: ChatRequest) -> ChatResponse:
        return ChatResponse(error="timeout: scripted", error_kind="timeout")


def test_failed_extractions_are_recorded_not_cached_and_retried(store: IndexStore,
                                                               tmp_path: Path) -> None:
    method = T2Mem(store, cache=tmp_path / "t2mem")
    stats = method.prepare("c", FailingExtraction())
    assert len(stats.failed) == 9 and stats.entries == 0
    assert stats.failed[0] == "E1: timeout: scripted"
    assert method.retrieve(QUESTION).ids == ()  # nothing to search, but no crash
    retry = ScriptedLLM()
    assert method.prepare("c", retry).extracted == 9 and len(retry.extractions()) == 9


class FailsEveryOther(ScriptedLLM):
    made = 0

    def _extract(self, request: ChatRequest) -> ChatResponse:
        self.made += 1
        if self.made % 2:
            return ChatResponse(error="timeout: scripted", error_kind="timeout")
        return super()._extract(request)


def test_a_conversation_s_extraction_is_one_file_that_a_retry_completes(
        store: IndexStore, tmp_path: Path) -> None:
    assert len(T2Mem(store, cache=tmp_path).prepare("c", FailsEveryOther()).failed) == 5
    retry = ScriptedLLM()
    stats = T2Mem(store, cache=tmp_path).prepare("c", retry)
    assert (stats.extracted, stats.reused) == (5, 4)  # only what failed is asked again
    assert len(retry.extractions()) == 5
    files = list((tmp_path / "extract").rglob("*.json"))
    assert len(files) == 1 and len(json.loads(files[0].read_text())["outputs"]) == 9
    again = ScriptedLLM()  # another process: everything from the file
    stats = T2Mem(store, cache=tmp_path).prepare("c", again)
    assert not again.extractions() and stats.entries > 0 and not stats.failed


def test_retrieve_before_prepare_is_a_clear_error(store: IndexStore, tmp_path: Path) -> None:
    with pytest.raises(TmemError, match="prepare"):
        T2Mem(store, cache=tmp_path).retrieve(QUESTION)


def test_search_never_returns_an_entry_twice(store: IndexStore, tmp_path: Path) -> None:
    script = [step("search", "checkout retry limit")] * 3 + [step("search", "")]
    context, llm = run(store, tmp_path, script)
    assert len(loop_record(context).initial) == 5
    assert len(shown(context)) == len(set(shown(context))) == 9  # 5 + 1 per search step
    assert loop_record(context).steps[3]["repair"] == "empty query: searched the question"
    # a step's prompt shows only what is new: the entry found by the step before
    found = loop_record(context).steps[0]["found"][0]
    assert f"({found['id']})" in llm.steps()[1].messages[-1].content
    assert f"({found['id']})" not in llm.steps()[2].messages[-1].content


def test_read_raw_follows_the_backlink_to_the_raw_episode(store: IndexStore,
                                                          tmp_path: Path) -> None:
    context, llm = run(store, tmp_path, [step("read", "E2", "3 then 5"), step("answer")])
    assert loop_record(context).steps[0]["read"]["episode"] == "E2"
    raw = llm.steps()[1].messages[-1].content
    assert "Correction: make that 5, effective immediately." in raw  # c:12, raw only
    assert "[c:12]" in raw and "[c:0]" not in raw
    assert loop_record(context).read == ("E2",) and {f"c:{i}" for i in range(10, 14)} <= set(
        context.ids)
    short, _ = run(store, tmp_path, [step("read", "E2"), step("answer")], raw_tokens=90)
    read = loop_record(short).steps[0]["read"]
    assert (read["page"], read["pages"], read["messages"], read["of"]) == (1, 2, 2, 4)
    assert short.ids == ("c:10", "c:11")  # only the lines of the page read count
    assert loop_record(short).step_record.shown == {"E2": 0.5}


def test_read_of_an_unknown_or_read_episode_is_repaired(store: IndexStore,
                                                        tmp_path: Path) -> None:
    context, _ = run(store, tmp_path, [step("read", "E99"), step("read", "E99"),
                                       step("answer")])
    first, second = loop_record(context).steps[0], loop_record(context).steps[1]
    best = loop_record(context).initial[0]["episode"]
    assert first["read"]["episode"] == best and "unknown episode" in first["repair"]
    assert second["read"]["episode"] != best  # the next unread linked episode
    assert loop_record(context).stop == "answer"


class ConstrainedLLM(ScriptedLLM):
    """The script's action where the step's schema allows it, else the first allowed one: what
    constrained decoding makes of a model that wants to go on searching."""

    def _step(self) -> ChatResponse:
        response = super()._step()
        allowed = self.steps()[-1].schema["properties"]["action"]["enum"]  # type: ignore[index]
        if response.parsed and response.parsed["action"] not in allowed:
            parsed = {**response.parsed, "action": allowed[0]}
            return dataclasses.replace(response, text=json.dumps(parsed), parsed=parsed)
        return response


def test_an_agent_that_never_answers_early_is_forced_at_the_last_step(
        store: IndexStore, tmp_path: Path) -> None:
    method = T2Mem(store, T2MemConfig(), budget=4096, cache=tmp_path / "t2mem")
    llm = ConstrainedLLM([step("search", "retry", "note")])  # wants to search forever
    method.prepare("c", llm)
    context = method.construct(QUESTION, method.retrieve(QUESTION), llm, cl100k_tokens)
    enums = [r.schema["properties"]["action"]["enum"] for r in llm.steps() if r.schema]
    assert enums == [["search", "read", "answer"]] * 4 + [["answer"]]  # Tmax = 5
    assert loop_record(context).stop == "answer"  # decoding could not but answer at step 5 ...
    record = loop_record(context).step_record
    assert record is not None
    assert record.forced and (record.steps, record.max_steps) == (5, 5)  # ... forced
    assert (record.tool_calls, record.searches, record.reads) == (4, 4, 0)
    assert "tmax_without_answer" not in loop_record(context).degradation.counters()
    assert "(answer forced at Tmax)" in render_trace(context)


@pytest.mark.parametrize(("script", "config"), [
    ([step("search", "retry"), step("answer")], {}),  # answered at step 2 of 5
    ([step("answer")], {"rollout": False}),  # one Answer step is the ablation's design
    ([step("search", "retry"), "not JSON"], {"max_steps": 2}),  # no answer at all
])
def test_an_answer_before_tmax_is_not_forced(store: IndexStore, tmp_path: Path,
                                             script: Script, config: dict[str, Any]) -> None:
    context, _ = run(store, tmp_path, script, **config)
    assert not loop_record(context).step_record.forced


def test_an_action_the_last_step_does_not_allow_ends_the_loop_forced(
        store: IndexStore, tmp_path: Path) -> None:
    context, llm = run(store, tmp_path, [step("search", "retry", "note")], max_steps=3)
    assert len(llm.steps()) == 3 and loop_record(context).stop == "max_steps"  # unconstrained
    assert loop_record(context).step_record.forced
    counters = loop_record(context).degradation.counters()
    assert counters == {"malformed_steps": 0, "repaired_actions": 0,
                        "fallback_context": 0, "steps_total": 3, "degraded_memory": 0}


def test_malformed_output_ends_the_loop_with_a_reason(store: IndexStore, tmp_path: Path) -> None:
    context, _ = run(store, tmp_path, [step("search", "retry", "limit is 3"), "not JSON"])
    assert loop_record(context).stop == "malformed output: not JSON"
    assert context.text == "limit is 3" and not loop_record(context).fallback
    first, _ = run(store, tmp_path, ["not JSON"])
    assert loop_record(first).fallback  # no memory written: the entries shown instead
    assert first.text.splitlines()[0].startswith(f"({loop_record(first).initial[0]['id']}) [E")


def test_an_action_that_is_not_allowed_ends_the_loop(store: IndexStore, tmp_path: Path) -> None:
    context, _ = run(store, tmp_path, [step("read", "E2")], read_raw=False)
    assert loop_record(context).stop == "action 'read' not allowed"


def test_the_context_text_is_the_accumulated_memory(store: IndexStore, tmp_path: Path) -> None:
    script = [step("search", "retry", "proposed 3 attempts"), step("read", "E2", "changed to 5"),
              step("answer", "", "changed to 5")]
    context, _ = run(store, tmp_path, script)
    assert context.kind == "memory" and loop_record(context).stop == "answer"
    assert context.text == "proposed 3 attempts\nchanged to 5"  # repeats are dropped
    assert context.tokens == cl100k_tokens(context.text)
    assert from_json(LoopRecord, to_json(context.record)) == context.record  # as stored
    cut, _ = run(store, tmp_path, script, budget=6)
    assert cut.text == "proposed 3 attempts"


def test_context_ids_are_the_messages_whose_text_was_shown(store: IndexStore,
                                                          tmp_path: Path) -> None:
    context, _ = run(store, tmp_path, [step("read", "E9"), step("answer")])
    linked = {e["episode"] for e in loop_record(context).initial} - {"E9"}
    assert linked  # episodes linked by entries it was shown ...
    assert set(context.ids) == {f"c:{i}" for i in range(35, 40)}  # ... count for nothing: E9
    unread, _ = run(store, tmp_path, [step("answer", "", "retry limit 3")])
    assert unread.ids == ()  # metadata entries only: no message's own text was shown
    raw, _ = run(store, tmp_path, [step("answer")], units="raw")
    shown_lines = [e["text"] for e in loop_record(raw).initial]  # raw messages as entries
    assert len(raw.ids) == len(shown_lines) == 5
    assert all(any(line.startswith(f"[{i}]") for line in shown_lines) for i in raw.ids)



def test_no_rollout_is_one_answer_only_step(store: IndexStore, tmp_path: Path) -> None:
    context, llm = run(store, tmp_path, [step("answer", "", "retry limit 3")], rollout=False)
    assert len(llm.steps()) == 1 and context.text == "retry limit 3"
    assert llm.steps()[0].schema["properties"]["action"]["enum"] == ["answer"]  # type: ignore[index]
    assert loop_record(context).config.rollout is False


def test_no_metadata_searches_raw_messages_without_extraction(store: IndexStore,
                                                              tmp_path: Path) -> None:
    context, llm = run(store, tmp_path, [step("answer")], units="raw")
    assert llm.extractions() == []
    assert all(e["kind"] == "message" for e in loop_record(context).initial)
    assert loop_record(context).initial[0]["text"].startswith("[c:")


def test_summary_units_are_one_entry_per_episode(store: IndexStore, tmp_path: Path) -> None:
    context, llm = run(store, tmp_path, [step("answer")], units="summary")
    assert len(llm.extractions()) == 9
    assert loop_record(context).metadata.entries == 9
    assert {e["kind"] for e in loop_record(context).initial} == {"summary"}


def test_no_raw_access_never_offers_read(store: IndexStore, tmp_path: Path) -> None:
    _, llm = run(store, tmp_path, [step("search", "retry")], read_raw=False, max_steps=2)
    enums = [r.schema["properties"]["action"]["enum"] for r in llm.steps() if r.schema]
    assert enums == [["search", "answer"], ["answer"]]
    assert "Episodes you can read" not in llm.steps()[0].messages[-1].content


def test_variants_by_name(store: IndexStore) -> None:
    assert {n for n in method_names() if get_method(n).variant_of == "t2mem"} == {
        "t2mem_no_metadata", "t2mem_no_raw", "t2mem_no_rollout", "t2mem_summary", "t2mem_graph"}
    env = MethodEnv(store.conversations, 3, 500, store)
    no_raw = build_method("t2mem_no_raw", env, {"search_top_k": 2})
    assert isinstance(no_raw, T2Mem) and no_raw.top_k == 3  # the grid's Top-k
    assert no_raw.config == T2MemConfig(search_top_k=2, read_raw=False)
    for name, key, why in (("t2mem_no_raw", "raw_tokens", "read_raw = False"),
                           ("t2mem", "max_triples", "units = 'metadata'"),
                           ("t2mem_graph", "max_entries", "units = 'graph'"),
                           ("t2mem", "topic_gap_hours", "episodes = 'auto'")):
        with pytest.raises(ConfigError, match=f"methods.{name}.{key}.*{why}"):
            build_method(name, env, {key: 2})
    for old in ("k_initial", "k_search", "reasoning_tokens"):
        with pytest.raises(ConfigError, match=old):
            build_method("t2mem", env, {old: 2})
    with pytest.raises(ConfigError, match="unknown method 't2mem_tree'"):
        build_method("t2mem_tree", MethodEnv(store.conversations, 5, 500, store))


def test_render_trace_shows_each_step(store: IndexStore, tmp_path: Path) -> None:
    script = [step("read", "E99", "3 attempts"), step("search", "retry"), "not JSON"]
    text = render_trace(run(store, tmp_path, script)[0])
    assert "initial SearchMeta (k=5):" in text and "step 1 [search, read, answer]" in text
    assert "action: read('E99')" in text and "repaired: read 'E99': unknown episode" in text
    assert "malformed: not JSON" in text and "stop: malformed output: not JSON" in text
    assert "memory for the answer" in text and "  3 attempts" in text


def test_step_requests_carry_the_question_and_its_qid(store: IndexStore, tmp_path: Path) -> None:
    _, llm = run(store, tmp_path, [step("answer")])
    prompt = llm.steps()[0].messages[-1].content
    assert prompt.startswith("Question: What is the checkout retry limit?")
    assert all(r.qid == "q1" for r in llm.steps())


def long_day(n: int = 76) -> Conversation:
    """One channel-day of `n` distinct messages, cut (at SmolLM2's largest episode parts:
    what its extraction prompt leaves of the context) into two parts, each longer than a
    ReadRaw page."""
    start = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
    return Conversation("long", tuple(
        Message("long", f"long:{i}", i, start + timedelta(minutes=i),
                f"Status {i}: the payments rollout step {i} is done, and the owner of step "
                f"{i + 1} is User_{i % 4}.", author=f"User_{i % 4}", channel="#ops")
        for i in range(n)))


def test_read_raw_reaches_the_last_message_of_the_largest_episode_part(tmp_path: Path) -> None:
    store = IndexStore({"long": long_day()}, HashEmbedder(), tmp_path)
    config = T2MemConfig(episode_tokens=10**6)  # the largest: what the backbone's context allows
    llm = ScriptedLLM([step("read", "E1"), step("read", "E1"), step("answer")])
    method = T2Mem(store, config, budget=4096, cache=tmp_path / "t2mem")
    method.prepare("long", llm)
    part = method._memory("long").index.by_episode["E1"]
    count = counter_for(llm.backbone)
    size = sum(count(line) + 1 for line in part.lines)
    assert raw_budget(config, llm.backbone) < size <= extraction_limit(config, llm.backbone)
    question = Question("long", "q", "Who owns the last step of the payments rollout?", "x")
    context = method.construct(question, method.retrieve(question), llm, cl100k_tokens)
    first, second = (s["read"] for s in loop_record(context).steps[:2])
    assert (first["episode"], first["page"], second["page"]) == ("E1", 1, 2)
    assert first["pages"] == second["pages"] == 2 and "repair" not in loop_record(context).steps[1]
    shown = llm.steps()[2].messages[-1].content  # the step after the second read
    assert part.lines[-1] in shown and f"page 2 of 2 (messages {first['messages'] + 1}-" in shown
    assert first["messages"] + second["messages"] == first["of"] == len(part.lines)
    assert set(part.ids) <= set(context.ids)  # every message of the part reached the memory
    record = loop_record(context).step_record
    assert record is not None
    assert record.shown == {"E1": 1.0} and record.parts_read_in_full == 1


@pytest.mark.parametrize(("argument", "page", "repair"), [
    ("E1 page 2", 2, None), ("e1 p2", 2, None), ("[E1] (page 2)", 2, None), ("E1:2", 2, None),
    ("E1 page 9", 1, "page 9 does not exist; read page 1 instead")])
def test_the_agent_names_the_page_it_reads(tmp_path: Path, argument: str, page: int,
                                           repair: str | None) -> None:
    store = IndexStore({"long": long_day()}, HashEmbedder(), tmp_path)
    llm = ScriptedLLM([step("read", argument), step("answer")])
    method = T2Mem(store, T2MemConfig(episode_tokens=10**6), budget=4096,
                   cache=tmp_path / "t2mem")
    method.prepare("long", llm)
    question = Question("long", "q", "Who owns step 3?", "x")
    context = method.construct(question, method.retrieve(question), llm, cl100k_tokens)
    first = loop_record(context).steps[0]
    assert first["read"]["page"] == page and (repair is None) == ("repair" not in first)
    assert repair is None or repair in first["repair"]
    assert "E1 (#ops part 1/2, 2025-03-03) [2 pages; read page " \
        f"{page}]" in llm.steps()[1].messages[-1].content


def test_the_unread_episode_is_found_however_far_down_the_ranking(store: IndexStore,
                                                                   tmp_path: Path) -> None:
    method = T2Mem(store, T2MemConfig(), cache=tmp_path / "t2mem", budget=4096)
    llm = ScriptedLLM()
    method.prepare("c", llm)
    index = method._memory("c").index
    assert len(index.entries) > _UNREAD_DEPTH  # some episodes are only found past the first
    for left in index.episodes:  # every episode but `left` read in full
        loop = Loop(QUESTION, index, method.config, raw_budget(method.config, llm.backbone),
                    counter_for(llm.backbone))
        loop.pages_read = {e.episode_id: set(range(1, len(loop.pages(e)) + 1))
                           for e in index.episodes if e is not left}
        assert loop._unread() is left
    loop.pages_read[left.episode_id] = set(range(1, len(loop.pages(left)) + 1))
    assert loop._unread() is None


def test_a_memory_build_is_gating_work(store: IndexStore, tmp_path: Path) -> None:
    seen: list[int] = []

    class Watching(ScriptedLLM):
        def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResponse]:
            seen.append(gating_threads())  # a proxy would mark its engine call a wait
            return super().generate(requests)

    method = T2Mem(store, T2MemConfig(), cache=tmp_path / "t2mem", budget=4096)
    method.prepare("c", Watching())
    assert seen == [1] and gating_threads() == 0
    method.prepare("c", Watching())  # built: nothing to wait for
    assert seen == [1]


def test_paper_settings_bound_steps_and_entries_by_tokens_not_characters(
        store: IndexStore, tmp_path: Path) -> None:
    _, llm = run(store, tmp_path, [step("search", "retry"), step("answer")])
    first = llm.steps()[0]
    assert first.sampling is not None and first.sampling.max_tokens == 1024  # §A.3
    assert first.schema is not None and "maxLength" not in json.dumps(first.schema)
    extraction = llm.extractions()[0]
    assert extraction.schema is not None
    assert not {"maxLength", "maxItems"} & set(json.dumps(extraction.schema).replace(
        '"', " ").split())
    assert "Write the entries as JSON." in extraction.messages[-1].content
    _, light = run(store, tmp_path / "light", [step("answer")], max_entries=3,
                   reasoning_budget=96)
    asked = light.extractions()[0]
    assert asked.schema is not None and '"maxItems": 3' in json.dumps(asked.schema)
    assert "Write at most 3 entries as JSON." in asked.messages[-1].content
    budgeted = light.steps()[0]
    assert budgeted.sampling is not None and budgeted.sampling.max_tokens == 96 + 64
    fields = budgeted.schema["properties"] if budgeted.schema else {}
    assert [fields[k]["maxLength"] for k in ("reasoning", "memory", "argument")] == [
        123, 164, 192]  # 96 tokens' characters shared 3 to 4; the 64 tokens' allowance


def test_a_step_prompt_shows_the_newest_notes_within_memory_tokens(
        store: IndexStore, tmp_path: Path) -> None:
    notes = [f"note {i}: " + "detail " * 12 for i in range(4)]
    script = [step("search", f"q{i}", note) for i, note in enumerate(notes)] + [step("answer")]
    context, llm = run(store, tmp_path, script, memory_tokens=40)
    last = llm.steps()[-1].messages[-1].content
    assert "note 3" in last and "note 0" not in last
    assert "earlier notes left out ...)" in last
    record = context.record.step_record
    left_out = int(last.split("(... ")[1].split()[0])
    assert isinstance(record, LoopSteps) and record.notes_left_out == left_out >= 2
    assert sum(f"note {i}" in last for i in range(4)) == 4 - left_out
    assert all(n.split(":")[0] in context.text for n in notes)  # the final memory keeps all
