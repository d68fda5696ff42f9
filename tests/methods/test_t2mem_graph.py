"""T2Mem's graph ablation with a scripted LLM on the hand-built chat: triples as entries
linked to their episodes, the unchanged loop over them, their own extraction cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.methods.test_t2mem_loop import QUESTION, ScriptedLLM, loop_record, step
from tmem_core.llm import ChatRequest, ChatResponse, Usage, request_hash
from tmem_core.methods import MethodEnv
from tmem_core.methods._registry import build_method
from tmem_core.methods.t2mem import T2Mem, render_trace
from tmem_core.methods.t2mem._config import T2MemConfig
from tmem_core.methods.t2mem._extract import extraction_schema
from tmem_core.retrieval import IndexStore, cl100k_tokens

GRAPH = T2MemConfig(units="graph")
DAY1 = "2025-03-04"  # the date of the chat's topic episode (E2)


class GraphLLM(ScriptedLLM):
    """Graph extraction: a triple per message (`team — said — <text>`), the first one dated,
    then one triple with an empty object; metadata extraction as ScriptedLLM's."""

    def _extract(self, request: ChatRequest) -> ChatResponse:
        if "triples" not in json.dumps(request.schema):
            return super()._extract(request)
        lines = request.messages[-1].content.split("Messages:\n")[1].split("\n\n")[0]
        texts = [line.partition(": ")[2] for line in lines.splitlines()
                 if not line.startswith("[")]
        triples = [{"subject": "team", "relation": "said", "object": t, "time": ""}
                   for t in texts]
        triples[0]["time"] = "that morning"
        triples.append({"subject": "team", "relation": "said", "object": "  ", "time": ""})
        parsed: dict[str, Any] = {"triples": triples}
        return ChatResponse(json.dumps(parsed), parsed, Usage(120, 40), 0.5)


class JunkOnTopic(GraphLLM):
    """Junk (not JSON) for the episodes that mention the retry limit."""

    def _extract(self, request: ChatRequest) -> ChatResponse:
        if "retry limit" in request.messages[-1].content:
            return ChatResponse(text="{oops", usage=Usage(120, 3),
                                error="invalid_output: not JSON", error_kind="invalid_output")
        return super()._extract(request)


def graph(store: IndexStore, tmp_path: Path, **config: Any) -> T2Mem:
    return T2Mem(store, T2MemConfig(units="graph", **config), cache=tmp_path / "t2mem",
                 budget=4096)


def test_registered_as_the_graph_variant(store: IndexStore) -> None:
    built = build_method("t2mem_graph", MethodEnv(store.conversations, 5, 500, store),
                         {"max_triples": 4})
    assert isinstance(built, T2Mem) and built.config == T2MemConfig(units="graph",
                                                                    max_triples=4)


def test_triples_are_entries_linked_to_their_episodes(store: IndexStore,
                                                      tmp_path: Path) -> None:
    method = graph(store, tmp_path)
    llm = GraphLLM()
    stats = method.prepare("c", llm)
    assert (stats.episodes, stats.entries, stats.extracted) == (9, 40, 9)
    assert stats.dropped == 9 and not stats.failed  # the empty object of each episode
    assert {c.stage for c in stats.calls} == {"memory"}
    request = llm.extractions()[0]
    assert request.schema == extraction_schema(GRAPH)
    assert request.schema["properties"]["triples"]["maxItems"] == 12  # type: ignore[index]
    assert "at most 12 triples" in request.messages[-1].content
    index = method._memory("c").index
    assert {e.kind for e in index.entries} == {"triple"}
    for entry in index.entries:
        episode = index.by_episode[entry.episode_id]
        said = entry.text.removeprefix("team — said — ").rsplit(" (", 1)[0]
        assert said in [m.text for m in episode.messages], entry.text
    topic = [e.text for e in index.entries if e.episode_id == "E2"]
    assert topic[0] == ("team — said — Kicking off the Atlas checkout retry limit "
                        "discussion. (that morning)")
    assert topic[1].endswith(f"I propose 3 attempts. ({DAY1})")  # no time: the episode's date


def test_triples_per_episode_are_capped(store: IndexStore, tmp_path: Path) -> None:
    method = graph(store, tmp_path, max_triples=2)
    stats = method.prepare("c", GraphLLM())
    sizes = [len(e.messages) for e in method._memory("c").index.episodes]
    assert stats.entries == sum(min(n, 2) for n in sizes) < 40
    assert stats.dropped == sizes.count(1) == 1  # the empty triple is past the cap elsewhere


def test_search_finds_a_triple_and_read_follows_its_episode(store: IndexStore,
                                                            tmp_path: Path) -> None:
    method = graph(store, tmp_path)
    llm = GraphLLM([step("read", "E2", "changed to 5"), step("answer", "", "changed to 5")])
    method.prepare("c", llm)
    found = method.retrieve(QUESTION)
    context = method.construct(QUESTION, found, llm, cl100k_tokens)
    initial = loop_record(context).initial
    assert initial[0]["kind"] == "triple" and "retry limit" in initial[0]["text"]
    assert "E2" in {e["episode"] for e in initial}
    first = llm.steps()[0].messages[-1].content
    assert f"({initial[0]['id']}) [{initial[0]['episode']} (#eng" in first
    raw = llm.steps()[1].messages[-1].content
    assert "Correction: make that 5, effective immediately." in raw and "[c:12]" in raw
    assert loop_record(context).read == ("E2",) and set(context.ids) == {f"c:{i}" for i in
                                                                   range(10, 14)}
    assert context.text == "changed to 5" and loop_record(context).stop == "answer"
    assert loop_record(context).metadata.dropped == 9
    assert loop_record(context).degradation.degraded_memory == 1  # dropped triples are shown
    assert "9 dropped as invalid" in render_trace(context)


def test_a_second_prepare_reuses_the_cache_and_accounts_its_calls(store: IndexStore,
                                                                  tmp_path: Path) -> None:
    built = GraphLLM()
    first = graph(store, tmp_path).prepare("c", built)
    again = GraphLLM()
    second = graph(store, tmp_path).prepare("c", again)  # a new process, say
    assert again.requests == [] and second.extracted == 0 and second.calls == ()
    assert second.reused == 9 and (second.entries, second.dropped) == (40, 9)
    assert len(second.reused_calls) == 9
    assert sum(c.prompt_tokens for c in second.reused_calls) == first.usage.prompt_tokens
    assert all(c.stage == "memory" for c in second.reused_calls)
    # each under the identity of the call that built it (the count keeps one of the two)
    assert sorted(c.request_hash for c in second.reused_calls) == sorted(
        request_hash(built.backbone, r) for r in built.requests)


def test_junk_extraction_is_a_recorded_failure_retried_next_time(store: IndexStore,
                                                                 tmp_path: Path) -> None:
    method = graph(store, tmp_path)
    stats = method.prepare("c", JunkOnTopic())
    junk = [f.split(":")[0] for f in stats.failed]
    assert len(junk) == 2 and all("invalid_output: not JSON" in f for f in stats.failed)
    assert stats.entries == 40 - 4 - 1  # E2's four messages and the stray mention's one
    found = method.retrieve(QUESTION)
    context = method.construct(QUESTION, found, GraphLLM([step("answer")]), cl100k_tokens)
    assert loop_record(context).metadata.complete is False
    assert loop_record(context).degradation.degraded_memory == 1
    assert "incomplete, 7 dropped as invalid)" in render_trace(context)
    retry = GraphLLM()
    again = method.prepare("c", retry)
    assert len(retry.extractions()) == 2 and again.extracted == 2 and again.reused == 7
    assert not again.failed and again.entries == 40


def test_graph_and_metadata_extractions_never_serve_each_other(store: IndexStore,
                                                               tmp_path: Path) -> None:
    cache = tmp_path / "t2mem"
    metadata = T2Mem(store, cache=cache).prepare("c", GraphLLM())
    assert metadata.extracted == 9
    llm = GraphLLM()
    triples = T2Mem(store, GRAPH, cache=cache).prepare("c", llm)
    assert triples.extracted == 9 and triples.reused == 0  # the metadata cache served nothing
    assert all("triples" in json.dumps(r.schema) for r in llm.extractions())
    for config, kinds in ((T2MemConfig(), {"fact"}), (GRAPH, {"triple"})):
        fresh = GraphLLM()
        method = T2Mem(store, config, cache=cache)
        assert method.prepare("c", fresh).reused == 9 and fresh.requests == []
        assert {e.kind for e in method._memory("c").index.entries} == kinds
