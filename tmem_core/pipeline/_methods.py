"""Context methods by name, as sweep configs refer to them.

Evidence-only methods (the baselines and T-MEM's no-LLM discovery variants) are adapted to
the `ContextMethod` interface by rendering their ranked messages as a flat list.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tmem_core.methods import METHOD_NAMES, Evidence, EvidenceMethod, make_method
from tmem_core.methods._context import LLM, Context, ContextMethod, TokenCounter, render_flat
from tmem_core.methods.t2mem import VARIANTS as T2MEM_VARIANTS
from tmem_core.methods.t2mem import T2MemConfig, make_t2mem
from tmem_core.methods.tmem import TMEM_VARIANTS, DiscoveryConfig, TMemConfig, make_tmem
from tmem_core.retrieval import Budget, Conversation, IndexStore
from tmem_core.schema import Question


@dataclass
class MethodEnv:
    """What a method factory gets: the run's conversations, budgets and parameters."""

    conversations: Mapping[str, Conversation]
    top_k: int
    budget_tokens: int
    params: Mapping[str, Any] = field(default_factory=dict)

    @cached_property
    def index_store(self) -> IndexStore:
        return IndexStore(self.conversations)


class FlatContextMethod:
    """An evidence method whose selected messages are shown as a ranked flat list."""

    def __init__(self, method: EvidenceMethod, env: MethodEnv, budget: Budget) -> None:
        self.method, self.env, self.budget = method, env, budget

    @property
    def name(self) -> str:
        return self.method.name

    def retrieve(self, question: Question) -> Evidence:
        return self.method(question, self.budget)

    def construct(self, question: Question, evidence: Evidence, llm: LLM | None,
                  budget_tokens: int, count_tokens: TokenCounter) -> Context:
        conv = self.env.conversations[question.conv_id]
        messages = [conv.messages[conv.position[i]] for i in evidence.ids]
        return render_flat(question, self.name, messages, budget_tokens, count_tokens)


def _evidence_factory(name: str) -> Callable[[MethodEnv], ContextMethod]:
    def build(env: MethodEnv) -> ContextMethod:
        config = DiscoveryConfig(**env.params)
        method = make_method(name, env.index_store, config)
        budget = (Budget(tokens=env.budget_tokens) if name == "full_context"
                  else Budget(messages=env.top_k))
        return FlatContextMethod(method, env, budget)
    return build


def _tmem_factory(name: str) -> Callable[[MethodEnv], ContextMethod]:
    """T-MEM with its LLM steps; the grid's Top-k is the anchor depth (paper §5.3)."""
    def build(env: MethodEnv) -> ContextMethod:
        switches = {k: v for k, v in env.params.items() if k in _TMEM_FIELDS}
        discovery = DiscoveryConfig(**{k: v for k, v in env.params.items()
                                       if k not in _TMEM_FIELDS})
        discovery = dataclasses.replace(discovery, anchors=env.top_k,
                                        anchors_follow_budget=False,
                                        evidence_tokens=env.budget_tokens)
        return make_tmem(name, env.index_store, TMemConfig(discovery_config=discovery,
                                                           **switches))
    return build


_TMEM_FIELDS = {f.name for f in dataclasses.fields(TMemConfig)} - {"discovery_config"}


def _t2mem_factory(name: str) -> Callable[[MethodEnv], ContextMethod]:
    """T2Mem: its own k (5 then 1) and Tmax; the grid's Top-k does not apply."""
    def build(env: MethodEnv) -> ContextMethod:
        return make_t2mem(name, env.index_store, T2MemConfig(**env.params))
    return build

CONTEXT_METHODS: dict[str, Callable[[MethodEnv], ContextMethod]] = {
    **{name: _evidence_factory(name) for name in METHOD_NAMES},
    **{name: _tmem_factory(name) for name in TMEM_VARIANTS},
    **{name: _t2mem_factory(name) for name in T2MEM_VARIANTS},
}


def context_method_names() -> list[str]:
    return sorted(CONTEXT_METHODS)


def build_method(name: str, env: MethodEnv) -> ContextMethod:
    try:
        return CONTEXT_METHODS[name](env)
    except KeyError:
        raise ValueError(f"unknown method {name!r}; known: "
                         f"{', '.join(context_method_names())}") from None


def to_json(value: object) -> str:
    """Method traces (dataclasses, tuples, dicts) as JSON for Parquet records."""
    return json.dumps(_plain(value), sort_keys=True, default=str)


def _plain(value: object) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    return value
