"""The simulated engine: its batching model in virtual time, its answers, usage and counters."""

from __future__ import annotations

import dataclasses
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from graphiti_core.prompts.extract_nodes import ExtractedEntities
from pydantic import BaseModel

from tmem_core.llm import (
    BatchModel,
    ChatRequest,
    Sampling,
    SimEngineConfig,
    count_tokens,
    get_backbone,
    open_backend,
    request_hash,
)
from tmem_core.llm._batch_model import Seq
from tmem_core.llm._config import parse_backbones
from tmem_core.llm._tokens import count_chat_tokens
from tmem_core.llm._types import schema_validator
from tmem_core.methods.t2mem._loop import step_schema
from tmem_core.methods.tmem._steps import keyed_schema, one_of


class Entity(BaseModel):
    """An item type pydantic puts under `$defs` and names by `$ref` (as graphiti's and mem0's
    response models are sent)."""

    name: str
    kind: int


class Entities(BaseModel):
    entities: list[Entity]
    best: Entity | None


FLAT = SimEngineConfig(ttft_s=0.0, prefill_tokens_per_s=1000.0, step_s=0.01, step_s_per_seq=0.0,
                       step_s_per_ktok=0.0, max_num_seqs=2)


def _finish(model: BatchModel, until: float = 100.0) -> dict[int, float]:
    """Finish times by output length, driving the model event by event as the backend does."""
    done: dict[int, float] = {}
    while (at := model.next_event()) is not None and at <= until:
        for seq in model.advance(at):
            done[seq.output_tokens] = round(seq.finished_at or 0.0, 6)
    return done


def test_sequences_share_steps_and_the_batch_is_bounded() -> None:
    model = BatchModel(FLAT)
    for tokens in (5, 10, 3):  # the third waits: two sequences at most
        model.submit(Seq(prompt_tokens=100, output_tokens=tokens), 0.0)
    model.advance(0.0)
    # both prefill (0.2 s) in the first step, then decode together; the third joins when
    # the first leaves (0.25 s) and prefills (0.1 s) in the step that admits it
    assert _finish(model) == {5: 0.25, 3: 0.38, 10: 0.4}
    assert model.counters.max_batch == 2
    assert (model.counters.steps, model.counters.shared_steps) == (10, 8)  # 2 alone
    assert model.counters.busy_s == pytest.approx(0.4)


def test_a_late_request_joins_at_the_next_step_boundary() -> None:
    model = BatchModel(dataclasses.replace(FLAT, prefill_tokens_per_s=1e12))
    model.submit(Seq(prompt_tokens=1, output_tokens=10), 0.0)
    model.advance(0.034)  # three steps done, the fourth under way
    model.submit(Seq(prompt_tokens=1, output_tokens=2), 0.034)
    assert _finish(model) == {2: 0.06, 10: 0.1}
    assert model.counters.shared_steps == 2


@pytest.mark.parametrize(("policy", "order"), [("priority", [1, 2, 3, 4]),
                                                ("fcfs", [1, 3, 4, 2])])
def test_waiting_requests_run_by_priority_then_arrival(policy: str, order: list[int]) -> None:
    config = dataclasses.replace(FLAT, prefill_tokens_per_s=1e12, max_num_seqs=1,
                                 scheduling_policy=policy)
    model = BatchModel(config)
    started: list[int] = []
    model.submit(Seq(prompt_tokens=1, output_tokens=1, priority=5), 0.0)  # runs at once
    for tokens, priority in ((3, 7), (4, 7), (2, 0)):  # wait while the first runs
        model.submit(Seq(prompt_tokens=1, output_tokens=tokens, priority=priority), 0.001)
    while (at := model.next_event()) is not None:
        started += [seq.output_tokens for seq in model.advance(at)]
    assert started == order  # by output length: which ran when


def test_an_unknown_scheduling_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="scheduling_policy"):
        SimEngineConfig(scheduling_policy="lifo")


def test_step_time_grows_with_the_batch() -> None:
    config = dataclasses.replace(FLAT, prefill_tokens_per_s=1e12, step_s_per_seq=0.01,
                                 step_s_per_ktok=0.01, max_num_seqs=8)
    model = BatchModel(config)
    model.submit(Seq(prompt_tokens=1000, output_tokens=1), 0.0)
    assert _finish(model) == {1: pytest.approx(0.01 + 0.01 + 0.01)}  # 1 seq, 1,000 tokens


def _sim_backbone(**engine: Any) -> Any:
    return dataclasses.replace(get_backbone("sim"), engine=SimEngineConfig(**engine))


def test_answers_are_deterministic_schema_valid_and_counted() -> None:
    backbone = _sim_backbone(step_s=0.001)
    schemas = [step_schema(["search", "answer"]),
               keyed_schema("links", {"m1": {"type": "object", "properties": {
                   "parent": one_of(["m0", "none"])}, "required": ["parent"]}}),
               {"type": "object", "properties": {"verdict": {"enum": ["CORRECT", "WRONG"]}}},
               Entities.model_json_schema(), ExtractedEntities.model_json_schema()]
    requests = [ChatRequest.from_prompt("Atlas checkout retry limit moved to 5 attempts", schema=s)
                for s in schemas] + [ChatRequest.from_prompt("What did the team decide?")]
    with open_backend(backbone) as engine:
        first, again = engine.generate(requests), engine.generate(requests)
    assert [r.text for r in first] == [r.text for r in again]
    for request, response in zip(requests, first, strict=True):
        assert response.ok, response.error
        if request.schema is not None:
            assert not list(schema_validator(request.schema).iter_errors(json.loads(response.text)))
            assert response.parsed == json.loads(response.text)
        assert response.usage.prompt_tokens == count_chat_tokens(backbone, request.messages)
        assert response.usage.completion_tokens == count_tokens(backbone, response.text)
    other = dataclasses.replace(backbone, engine=SimEngineConfig(step_s=0.001, seed=1))
    with open_backend(other) as engine:
        assert [r.text for r in engine.generate(requests)] != [r.text for r in first]


def test_a_new_revision_is_a_new_backbone_that_answers_the_same() -> None:
    backbone = _sim_backbone(step_s=0.001)
    revised = dataclasses.replace(backbone, engine=SimEngineConfig(step_s=0.001, revision="r2"))
    requests = [ChatRequest.from_prompt("What did the team decide about the retry limit?"),
                ChatRequest.from_prompt("Atlas checkout", schema=step_schema(["search"]))]
    assert revised.definition() != backbone.definition()
    assert {request_hash(revised, r) for r in requests}.isdisjoint(
        request_hash(backbone, r) for r in requests)
    with open_backend(backbone) as engine, open_backend(revised) as again:
        assert [r.text for r in again.generate(requests)] == [
            r.text for r in engine.generate(requests)]


def test_free_text_length_follows_the_config_and_max_tokens() -> None:
    backbone = _sim_backbone(step_s=0.001, min_output_tokens=40, max_output_tokens=60)
    words = " ".join(f"word{i}" for i in range(200))
    short = ChatRequest.from_prompt(words, sampling=Sampling(max_tokens=8))
    with open_backend(backbone) as engine:
        long_answer, short_answer = engine.generate([ChatRequest.from_prompt(words), short])
    assert long_answer.usage.completion_tokens >= 20
    assert short_answer.usage.completion_tokens <= 8


def test_concurrent_callers_share_steps_without_burning_cpu() -> None:
    backbone = _sim_backbone(ttft_s=0.0, step_s=0.02, min_output_tokens=40, max_output_tokens=40)
    callers = [ChatRequest.from_prompt(f"caller {i} asks about the Atlas rollout region")
               for i in range(8)]
    with open_backend(backbone) as engine, ThreadPoolExecutor(8) as pool:
        assert engine.counters.cpu_s == 0.0  # type: ignore[attr-defined]  # nothing served yet
        cpu = time.process_time()
        responses = list(pool.map(lambda r: engine.generate([r])[0], callers))
        cpu = time.process_time() - cpu
        counters = engine.counters  # type: ignore[attr-defined]
    assert all(r.ok for r in responses)
    assert 0.0 < counters.cpu_s <= cpu + 0.05  # serving only: the process's start left out
    assert counters.requests == 8 and counters.max_batch == 8
    assert counters.steps < sum(r.usage.completion_tokens for r in responses) / 4
    # ~0.6 s of simulated decoding: the waiting itself costs (almost) no CPU
    assert cpu < 0.5 * counters.busy_s


def test_a_shared_prefix_is_found_in_the_prefix_cache() -> None:
    backbone = _sim_backbone(step_s=0.001)
    shared = "The conversation so far. " * 200
    with open_backend(backbone) as engine:
        engine.generate([ChatRequest.from_prompt(shared + "first question")])
        engine.generate([ChatRequest.from_prompt(shared + "second question")])
        counters = engine.counters  # type: ignore[attr-defined]
    assert counters.cached_tokens > 0.8 * counters.prompt_tokens / 2


def test_sim_backbones_load_from_config() -> None:
    backbones = parse_backbones({"fast": {"backend": "sim", "model": "m", "replicas": 4,
                                          "engine": {"step_s": 0.001, "max_num_seqs": 8}}})
    assert backbones["fast"].engine.max_num_seqs == 8 and backbones["fast"].replicas == 4
    with pytest.raises(ValueError, match="max_output_tokens"):
        SimEngineConfig(min_output_tokens=10, max_output_tokens=5)
