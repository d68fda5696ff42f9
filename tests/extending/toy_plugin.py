"""A method and a benchmark added by a module of their own (a sweep's `plugins`): one
decorated function each."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from tmem_core.benchmarks import LoadedBenchmark, LoadRequest, benchmark
from tmem_core.evaluation import Protocol, one_judge
from tmem_core.methods import ContextMethod, Evidence, MethodEnv, evidence, method, ranked
from tmem_core.retrieval import IndexStore
from tmem_core.schema import Gold, Message, Question

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class LatestParams:
    """How many of the newest messages to keep, at most."""

    keep: int = 3


@dataclass(frozen=True)
class Newest:
    """The `top_k` newest messages, newest first."""

    store: IndexStore
    name: str

    def __call__(self, question: Question, top_k: int) -> Evidence:
        newest = self.store.conversations[question.conv_id].messages[::-1][:top_k]
        return evidence(self.name, question, [m.msg_id for m in newest])


@method("toy_latest", config=LatestParams, description="the newest messages (test method)")
def _toy_latest(env: MethodEnv, params: LatestParams, name: str) -> ContextMethod:
    return ranked(Newest(env.index_store, name), MethodEnv(
        env.conversations, min(params.keep, env.top_k), env.budget, env.index_store))


@benchmark("toy_chat", needs_source=False, description="a two-person chat (test benchmark)",
           protocol=Protocol(one_judge("judge/synthetic"), ("judge/synthetic",),
                             abstention_phrase="No information available."))
def _toy_chat(request: LoadRequest) -> LoadedBenchmark:
    lines = ["I moved the launch to Friday.", "Noted, Friday it is.", "The venue is Hall B."]
    messages = [Message("toy", f"toy:{i}", i, T0 + timedelta(minutes=i), text, "s1",
                        ("ana", "ben")[i % 2]) for i, text in enumerate(lines)]
    asked = T0 + timedelta(days=1)
    questions = [(Question("toy", "toy:q0", "When is the launch?", "temporal", "ana", asked),
                  Gold("toy:q0", "Friday", ("toy:0",))),
                 (Question("toy", "toy:q1", "Where is the venue?", "single_hop", "ben", asked),
                  Gold("toy:q1", "Hall B", ("toy:2",)))]
    return LoadedBenchmark(messages, questions)
