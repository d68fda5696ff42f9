"""Routing to engine replicas: conversation affinity, spill under load, resending on death."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from ray.exceptions import RayActorError

from tmem_core.llm import Answered, ChatRequest, ChatResponse, error_response, get_backbone
from tmem_core.pipeline._engine import ROUTE_SLACK, ReplicaRouter, replica_gpus, replica_name

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
        self.asked.append((name, misses[0].conv_id))
        if name in self.dead:
            raise RayActorError()
        self.hold.wait()
        if name in self.unreachable:
            failed = error_response("connection", "Connection error.")
            return [failed] * len(misses), []
        return [ChatResponse(text=name) for _ in misses], []


def _router(replicas: Replicas) -> ReplicaRouter:
    return ReplicaRouter(BACKBONE, lookup=lambda name: name, send=replicas.send)


def _ask(conv: str) -> list[ChatRequest]:
    return [dataclasses.replace(ChatRequest.from_prompt("q"), conv_id=conv)]


def test_a_conversation_keeps_its_replica() -> None:
    replicas = Replicas()
    router = _router(replicas)
    for _ in range(3):
        for conv in ("c0", "c1", "c2", "c3", "c4", "c5"):
            router(_ask(conv))
    by_conv: dict[str, set[str]] = {}
    for name, conv in replicas.asked:
        by_conv.setdefault(conv, set()).add(name)
    assert all(len(names) == 1 for names in by_conv.values())
    assert len({n for names in by_conv.values() for n in names}) > 1  # spread by conversation
    assert by_conv["c0"] == {replica_name(BACKBONE, router.ranking("c0")[0])}


def test_a_busy_replica_spills_to_the_next_one() -> None:
    replicas = Replicas()
    replicas.hold.clear()  # calls stay in flight
    router = _router(replicas)
    threads = [threading.Thread(target=router, args=(_ask("c0"),)) for _ in range(8)]
    for thread in threads:
        thread.start()
    while len(replicas.asked) < 8:
        threading.Event().wait(0.01)
    replicas.hold.set()
    for thread in threads:
        thread.join()
    counts: dict[str, int] = {}
    for name, _ in replicas.asked:
        counts[name] = counts.get(name, 0) + 1
    # the preferred replica takes ROUTE_SLACK + 1, the next ones in its order the rest
    ranked = [replica_name(BACKBONE, i) for i in router.ranking("c0")]
    top = ROUTE_SLACK + 1
    assert [counts.get(name, 0) for name in ranked] == [top, top, 8 - 2 * top, 0]


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
    router.attempts = 5
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
    qwen = get_backbone("qwen3.5-27b")
    sharded = dataclasses.replace(qwen, engine=dataclasses.replace(
        qwen.engine, tensor_parallel_size=2, pipeline_parallel_size=2))
    assert replica_gpus(sharded, 1) == 4 and replica_gpus(qwen, 1) == 1
    assert replica_gpus(sharded, 0) == 0  # a CPU sweep asks for no GPU
    assert replica_gpus(get_backbone("smollm2"), 1) == 0  # nor does a CPU backend
