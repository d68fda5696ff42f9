"""The method registry: one decorated factory per method, with its typed parameters.

    @method("my_method", config=MyParams, description="what it does")
    def build(env: MethodEnv, params: MyParams, name: str) -> ContextMethod: ...

`params` is the method's config dataclass, built from the sweep config's `[methods.<name>]`
table and checked when the config loads (unknown keys, types, `Literal` choices and the
dataclass's own checks, each reported with its key). `variants` registers ablations of the
same factory as changes to its parameters (nested dataclasses as sub-mappings); `show` is
how `jobs.inspect` prints the method's evidence and context; `ranked` marks methods whose
`retrieve` ranks messages without an LLM and keeps `env.top_k` (scored by evidence recall@k).
`version` counts revisions of what the method (and its variants) does: a run's identity
carries it from 2 on, so records an earlier definition wrote are never resumed as its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Generic, TypeVar, cast

from tmem_core._typed import ConfigError, build_config
from tmem_core.methods._base import Evidence
from tmem_core.methods._context import Context, ContextMethod
from tmem_core.retrieval import Conversation, IndexStore
from tmem_core.schema import DataError, Message

P = TypeVar("P")
Show = Callable[[Evidence, Context, Mapping[str, Message]], str]


@dataclass
class MethodEnv:
    """What a method factory gets: the run's conversations and the grid's Top-k and budget."""

    conversations: Mapping[str, Conversation]
    top_k: int
    budget_tokens: int
    store: IndexStore | None = None  # shared indexes; made from `conversations` when None

    @cached_property
    def index_store(self) -> IndexStore:
        return self.store or IndexStore(self.conversations)


@dataclass(frozen=True)
class NoParams:
    """Parameters of a method that takes none."""


def show_context(_evidence: Evidence, context: Context, _messages: Mapping[str, Message]) -> str:
    """The context as the answer model reads it, with its size."""
    return f"-- context ({context.kind}, {context.tokens} tokens, {len(context.ids)} messages)\n" \
           f"{context.text}"


@dataclass(frozen=True)
class MethodSpec(Generic[P]):
    """A registered method: its factory, parameter dataclass and (for a variant) changes."""

    name: str
    build: Callable[[MethodEnv, P, str], ContextMethod]
    params: type[P]
    description: str
    overrides: Mapping[str, Any] = field(default_factory=dict)
    variant_of: str | None = None
    show: Show = show_context
    ranked: bool = False
    version: int = 1

    def parse(self, raw: Mapping[str, Any], where: str = "") -> P:
        """The method's parameters from a config table (the variant's changes applied last)."""
        params = build_config(self.params, raw, where or f"methods.{self.name}")
        return cast(P, _apply(params, self.overrides))

    def create(self, env: MethodEnv, raw: Mapping[str, Any] | None = None) -> ContextMethod:
        return self.build(env, self.parse(raw or {}), self.name)


_REGISTRY: dict[str, MethodSpec[Any]] = {}


def method(name: str, *, description: str, config: type[Any] = NoParams,
           variants: Mapping[str, Mapping[str, Any]] | None = None, show: Show | None = None,
           ranked: bool = False, version: int = 1
           ) -> Callable[[Callable[[MethodEnv, P, str], ContextMethod]],
                         Callable[[MethodEnv, P, str], ContextMethod]]:
    """Register a method factory under `name` (and its ablations under `variants`)."""

    def register(build: Callable[[MethodEnv, P, str], ContextMethod]
                 ) -> Callable[[MethodEnv, P, str], ContextMethod]:
        base = MethodSpec(name, build, config, description, show=show or show_context,
                          ranked=ranked, version=version)
        for spec in (base, *(dataclasses.replace(base, name=variant, overrides=changes,
                                                 variant_of=name)
                             for variant, changes in (variants or {}).items())):
            if spec.name in _REGISTRY:
                raise ValueError(f"method {spec.name!r} is already registered")
            _apply(build_config(config, {}, f"methods.{spec.name}"), spec.overrides)
            _REGISTRY[spec.name] = spec
        return build

    return register


def get_method(name: str) -> MethodSpec[Any]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise DataError(f"unknown method {name!r}; known: {', '.join(method_names())}") from None


def method_names(*, ranked: bool | None = None) -> list[str]:
    """Registered method names (only those that rank without an LLM, with `ranked=True`)."""
    return sorted(n for n, s in _REGISTRY.items() if ranked is None or s.ranked == ranked)


def build_method(name: str, env: MethodEnv, raw: Mapping[str, Any] | None = None
                 ) -> ContextMethod:
    """The method registered as `name`, with parameters from the config table `raw`."""
    return get_method(name).create(env, raw)


def _apply(params: Any, changes: Mapping[str, Any]) -> Any:
    """`params` with `changes` (nested dataclasses changed by sub-mappings)."""
    updates = {}
    for key, value in changes.items():
        if not hasattr(params, key):
            raise ConfigError(f"variant changes unknown parameter {key!r}")
        current = getattr(params, key)
        nested = dataclasses.is_dataclass(current) and isinstance(value, Mapping)
        updates[key] = _apply(current, value) if nested else value
    return dataclasses.replace(params, **updates) if updates else params
