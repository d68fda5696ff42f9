"""Routing to engine replicas: question affinity, bounded loads over a shared view, resending
on death."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import threading
import time
from pathlib import Path

import pytest
from ray.exceptions import RayActorError

from tmem_core.llm import ChatRequest, ChatResponse, get_backbone
from tmem_core.llm._shared import Answered
from tmem_core.llm._types import error_response
from tmem_core.pipeline._engine import (
    BALANCE,
    ROUTE_SLACK,
    SHORT_PROMPT_CHARS,
    SPREAD_MIN,
    ReplicaRouter,
)
from tmem_core.pipeline._loads import LoadBoard, LocalLoads
from tmem_core.pipeline._replicas import replica_gpus, replica_name
from tmem_core.prompts import load_prompt
from tmem_core.results import MEMORY_STAGE

BACKBONE = dataclasses.replace(get_backbone("sim"), replicas=4)


class Replicas:
    """Stand-ins for replica actors: they record who was asked; `dead` ones raise."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []
        self.dead: set[str] = set()
        self.unreachable: set[str] = set()  # alive, but their engine answers nothing
        self.hold = threading.Event()
        self.hold.set()

    def send(self, name: str, misses: list[ChatRequest]) -> Answered:
        self.asked.append((name, misses[0].qid or misses[0].conv_id))
        if name in self.dead:
            raise RayActorError()
        self.hold.wait()
        if name in self.unreachable:
            failed = error_response("connection", "Connection error.")
            return [failed] * len(misses), []
        return [ChatResponse(text=name) for _ in misses], []


def _router(replicas: Replicas) -> ReplicaRouter:
    return ReplicaRouter(BACKBONE, lookup=lambda name: name, send=replicas.send)


def _on_board(board: LoadBoard, replicas: Replicas) -> ReplicaRouter:
    """A router that shares `board` with the others (as "mine")."""
    return ReplicaRouter(BACKBONE, lookup=lambda name: name, send=replicas.send,
                         loads=LocalLoads(board, "mine"))


def _ask(conv: str, qid: str = "", prompt: str = "q" * (SHORT_PROMPT_CHARS + 1)
         ) -> list[ChatRequest]:
    """A call of the question (a construction's: longer than a short call, unless given)."""
    return [dataclasses.replace(ChatRequest.from_prompt(prompt), conv_id=conv, qid=qid)]


def test_a_question_keeps_its_replica_and_a_conversation_spreads() -> None:
    replicas = Replicas()
    router = _router(replicas)
    for _ in range(3):
        for q in range(12):
            router(_ask("c0", f"q{q}"))
    by_question: dict[str, set[str]] = {}
    for name, qid in replicas.asked:
        by_question.setdefault(qid, set()).add(name)
    assert all(len(names) == 1 for names in by_question.values())
    assert len({n for names in by_question.values() for n in names}) > 2  # one conversation
    assert by_question["q0"] == {replica_name(BACKBONE, router.ranking("q0")[0])}


def _batch(size: int, stage: str) -> list[ChatRequest]:
    return [dataclasses.replace(ChatRequest.from_prompt(f"e{i}"), stage=stage, qid="q0",
                                conv_id="c0") for i in range(size)]


def test_a_memory_build_spreads_over_the_replicas_in_order() -> None:
    def send(name: str, misses: list[ChatRequest]) -> Answered:
        return [ChatResponse(text=f"{name}:{m.messages[-1].content}") for m in misses], []

    router = ReplicaRouter(BACKBONE, lookup=lambda name: name, send=send)
    responses, _ = router(_batch(4 * SPREAD_MIN - 1, MEMORY_STAGE))
    names, prompts = zip(*(r.text.split(":") for r in responses), strict=True)
    assert list(prompts) == [f"e{i}" for i in range(4 * SPREAD_MIN - 1)]  # in order
    sizes = [len(list(part)) for _, part in itertools.groupby(names)]
    assert sizes == [SPREAD_MIN] * 3 + [SPREAD_MIN - 1]
    assert len(set(names)) == 4  # a part per replica


def test_a_small_memory_batch_and_a_question_batch_stay_whole() -> None:
    replicas = Replicas()
    router = _router(replicas)
    router(_batch(4 * SPREAD_MIN, "construct"))
    router(_batch(SPREAD_MIN, MEMORY_STAGE))
    assert len(replicas.asked) == 2


def _in_flight_at_once(router: ReplicaRouter, replicas: Replicas, asks: list[list[ChatRequest]]
                       ) -> dict[str, int]:
    """Every ask sent from its own thread while the replicas hold their answers."""
    replicas.hold.clear()
    threads = [threading.Thread(target=router, args=(ask,)) for ask in asks]
    for thread in threads:
        thread.start()
    while len(replicas.asked) < len(asks):
        threading.Event().wait(0.01)
    counts = {name: 0 for name in (replica_name(BACKBONE, i) for i in range(4))}
    for name, _ in replicas.asked:
        counts[name] += 1
    replicas.hold.set()
    for thread in threads:
        thread.join()
    return counts


def test_loads_stay_bounded_when_one_question_sends_many_calls() -> None:
    replicas = Replicas()
    router = _router(replicas)
    counts = _in_flight_at_once(router, replicas, [_ask("c0", "q0")] * 16)
    ranked = [replica_name(BACKBONE, i) for i in router.ranking("q0")]
    bound = math.ceil((1 + BALANCE) * 16 / 4) + ROUTE_SLACK  # when the last call was sent
    assert counts[ranked[0]] == bound == max(counts.values())  # its bounded share, no more
    assert counts[ranked[1]] > 0 and sum(counts.values()) == 16


def test_a_few_calls_of_one_question_stay_on_its_replica() -> None:
    replicas = Replicas()
    router = _router(replicas)
    counts = _in_flight_at_once(router, replicas, [_ask("c0", "q0")] * (ROUTE_SLACK + 1))
    assert counts[replica_name(BACKBONE, router.ranking("q0")[0])] == ROUTE_SLACK + 1


def _longest_locomo_verdict(locomo_path: Path) -> list[ChatRequest]:
    """The LoCoMo judge's prompt for its longest question and gold answer, grading a
    response of 1,000 characters (about 250 tokens, longer than an answer's `Answer:` line)."""
    prompt = load_prompt("judge/locomo")
    chats = [prompt.chat(question=qa["question"], answer=str(qa["answer"]), response="r" * 1000)
             for conv in json.loads(locomo_path.read_text()) for qa in conv["qa"]
             if "answer" in qa]
    longest = max(chats, key=lambda chat: sum(len(m.content) for m in chat))
    return [dataclasses.replace(ChatRequest(longest), conv_id="c0", qid="q0")]


def test_a_short_call_stays_home_over_the_bound_until_its_home_is_at_its_slots(
        locomo_path: Path) -> None:
    board, replicas = LoadBoard(4), Replicas()
    router = _on_board(board, replicas)
    top = router.ranking("q0")[0]
    held = [0] * 4
    held[top] = BACKBONE.slots - 1  # far over the bounded load, one slot free
    board.report("other", held)
    router(_longest_locomo_verdict(locomo_path))  # a real judge's prompt is short
    assert replicas.asked[-1][0] == replica_name(BACKBONE, top)
    verdict = _ask("c0", "q0", prompt="j" * SHORT_PROMPT_CHARS)  # as long as short goes
    router(verdict)
    assert replicas.asked[-1][0] == replica_name(BACKBONE, top)
    router(_ask("c0", "q0"))  # a long call of the same question is spread
    assert replicas.asked[-1][0] == replica_name(BACKBONE, router.ranking("q0")[1])
    held[top] = BACKBONE.slots  # its home's slots are all taken: the short one moves too
    board.report("other", held)
    router(verdict)
    assert replicas.asked[-1][0] == replica_name(BACKBONE, router.ranking("q0")[1])
    board.report("other", [0] * 4)
    replicas.dead.add(replica_name(BACKBONE, top))  # a home that died: resent, and avoided
    router(verdict)
    router(verdict)
    second = replica_name(BACKBONE, router.ranking("q0")[1])
    assert [name for name, _ in replicas.asked[-3:]] == [replica_name(BACKBONE, top), second,
                                                         second]


def test_a_router_counts_the_calls_other_routers_have_in_flight() -> None:
    board, replicas = LoadBoard(4), Replicas()
    router = _on_board(board, replicas)
    top = router.ranking("q0")[0]
    held = [0] * 4
    held[top] = 5  # another router's calls on q0's preferred replica: over the bound of 4
    board.report("other", held)
    router(_ask("c0", "q0"))
    assert replicas.asked[-1][0] == replica_name(BACKBONE, router.ranking("q0")[1])
    alone = _router(Replicas())  # without the shared view it would have taken the top one
    assert alone.ranking("q0")[0] == top
    board.report("other", [0] * 4)
    router(_ask("c0", "q0"))
    assert replicas.asked[-1][0] == replica_name(BACKBONE, top)
    assert board.others("other") == [0] * 4  # this router published its calls' end


def test_a_router_publishes_its_calls_in_flight() -> None:
    board, replicas = LoadBoard(4), Replicas()
    router = _on_board(board, replicas)
    replicas.hold.clear()
    thread = threading.Thread(target=router, args=(_ask("c0", "q0"),))
    thread.start()
    while not replicas.asked:
        threading.Event().wait(0.01)
    seen = board.others("other")
    replicas.hold.set()
    thread.join()
    assert seen[router.ranking("q0")[0]] == 1 and sum(seen) == 1
    assert board.others("other") == [0] * 4


def test_a_dead_replica_is_avoided_and_its_call_resent() -> None:
    replicas = Replicas()
    router = _router(replicas)
    preferred = replica_name(BACKBONE, router.ranking("c0")[0])
    replicas.dead.add(preferred)
    router(_ask("c0"))
    router(_ask("c0"))
    names = [name for name, _ in replicas.asked]
    # resent, then avoided while it restarts
    assert names == [preferred, *[replica_name(BACKBONE, router.ranking("c0")[1])] * 2]


def test_when_every_attempt_fails_the_error_is_raised() -> None:
    replicas = Replicas()
    replicas.dead |= {replica_name(BACKBONE, i) for i in range(4)}
    router = _router(replicas)
    router.attempts, router.down_s = 5, 0.05
    with pytest.raises(RayActorError):
        router(_ask("c0"))
    assert len(replicas.asked) == 5


def test_a_replica_whose_engine_is_unreachable_is_avoided_and_its_batch_resent() -> None:
    replicas = Replicas()
    router = _router(replicas)
    preferred, second = (replica_name(BACKBONE, i) for i in router.ranking("c0")[:2])
    replicas.unreachable.add(preferred)  # a fleet's server that went down
    first = router(_ask("c0") * 2)
    later = router(_ask("c0"))
    assert [r.text for r in first[0]] == [second, second] and later[0][0].text == second
    assert [name for name, _ in replicas.asked] == [preferred, second, second]


def test_a_request_error_is_the_requests_own_and_is_not_resent() -> None:
    refused = error_response("request", "400 Bad Request")
    asked: list[str] = []

    def send(name: str, misses: list[ChatRequest]) -> Answered:
        asked.append(name)
        return [refused] * len(misses), []

    router = ReplicaRouter(BACKBONE, lookup=lambda name: name, send=send)
    assert router(_ask("c0"))[0] == [refused]
    assert len(asked) == 1


def test_a_sharded_replica_holds_all_its_shards_gpus() -> None:
    qwen = get_backbone("qwen3.5-27b")  # tensor parallel 2 by default
    sharded = dataclasses.replace(qwen, engine=dataclasses.replace(
        qwen.engine, tensor_parallel_size=2, pipeline_parallel_size=2))
    assert replica_gpus(sharded) == 4 and replica_gpus(qwen) == 2
    assert replica_gpus(qwen, 1) == 2 and replica_gpus(qwen, 3) == 3  # gpus_per_engine: more
    cpu_build = get_backbone("smollm2-vllm-cpu")
    assert replica_gpus(cpu_build, 1) == 0  # vLLM's CPU build asks for no GPU
    assert replica_gpus(get_backbone("smollm2"), 1) == 0  # nor does a CPU backend


def test_a_lone_replica_that_died_is_waited_for_until_it_is_due_back() -> None:
    replicas = Replicas()
    one = dataclasses.replace(BACKBONE, replicas=1)
    name = replica_name(one, 0)
    replicas.dead.add(name)
    sent_at: list[float] = []

    def send(replica: str, misses: list[ChatRequest]) -> Answered:
        sent_at.append(time.monotonic())
        if len(sent_at) == 3:
            replicas.dead.discard(name)  # Ray restarted it meanwhile
        return replicas.send(replica, misses)

    router = ReplicaRouter(one, lookup=lambda n: n, send=send)
    router.down_s = 0.3
    answered, _ = router(_ask("c0"))
    assert [r.text for r in answered] == [name]
    # the batch waited for the replica to be due back each time, rather than using up its
    # attempts while Ray restarts it
    assert len(sent_at) == 3 and all(b - a >= 0.3 for a, b in itertools.pairwise(sent_at))


def test_a_replica_whose_engine_will_not_start_leaves_its_batches_to_the_others() -> None:
    replicas = Replicas()
    router = _router(replicas)
    preferred, second = (replica_name(BACKBONE, i) for i in router.ranking("c0")[:2])
    failed = error_response("engine", "backbones.sim: its engine did not start (3 attempts)")

    def send(name: str, misses: list[ChatRequest]) -> Answered:
        if name == preferred:
            replicas.asked.append((name, misses[0].conv_id))
            return [failed] * len(misses), []
        return replicas.send(name, misses)

    router._send = send
    assert [r.text for r in router(_ask("c0") * 2)[0]] == [second, second]
