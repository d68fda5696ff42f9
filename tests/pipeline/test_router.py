"""Routing to engine replicas: conversation affinity, spill under load, resending on death."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from ray.exceptions import RayActorError

from tmem_core.llm import Answered, ChatRequest, get_backbone
from tmem_core.pipeline._engine import ROUTE_SLACK, ReplicaRouter, replica_name

BACKBONE = dataclasses.replace(get_backbone("sim"), replicas=4)


class Replicas:
    """Stand-ins for replica actors: they record who was asked; `dead` ones raise."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []
        self.dead: set[str] = set()
        self.hold = threading.Event()
        self.hold.set()

    def send(self, name: str, misses: list[ChatRequest]) -> Answered:
        self.asked.append((name, misses[0].conv_id))
        if name in self.dead:
            raise RayActorError()
        self.hold.wait()
        return [], []


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
