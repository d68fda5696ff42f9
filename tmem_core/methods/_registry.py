"""The method registry: one decorated factory per method, with its typed parameters and hooks.

    @method("my_method", config=MyParams, description="what it does")
    def build(env: MethodEnv, params: MyParams, name: str) -> ContextMethod: ...

`params` is the method's config dataclass, built from the sweep config's `[methods.<name>]`
table and checked when the config loads (unknown keys, types, `Literal` choices and the
dataclass's own checks, each reported with its key, and a parameter its other settings leave
unused: the dataclass's `ignored()`). `variants` registers ablations of the
same factory as changes to its parameters (nested dataclasses as sub-mappings); a key a
variant sets is refused in its table. The hooks:
- `evidence`: the dataclass of what construction needs of retrieval, stored as JSON;
- `record`: the dataclass of its construct record (a `Record`, see `_record`): what its
  construction did, stored as JSON and read back by every reader as that type;
- `checks`: named checks of a stored context (its record and presented ids), run when a run
  ends and kept in its contract;
- `view`: how the results viewer draws a context (a panel and the function that fills it);
- `show`: how `jobs.inspect` prints the method's evidence and context;
- `ranked`: its `retrieve` ranks messages without an LLM and keeps `env.top_k` (scored by
  evidence recall@k);
- `memory`: its retrieval reads a memory that its LLM steps built for the conversation
  (`prepare(conv_id, llm)`), so what it retrieves depends on their backbone; a method
  without it retrieves the same whatever the backbone (its retrieve records are reused when
  only a backbone changed);
- `llm_free`: neither its memory nor its construction calls an LLM (by default, as `ranked`:
  a ranked method shows its messages as a flat list), so a sweep refuses it a construct
  backbone;
- `axes`: the grid's test-time axes that apply (`reasoning_budget`, `steps`), each to the
  parameter it sets (None: the axis acts in the shared answer stage only); `variant_axes`
  narrows them for a variant (a one-step ablation has no step axis). A sweep varying an axis
  refuses a method it does not apply to;
- `version`: counts revisions of what the method (and its variants) does: a run's identity
  carries it from 2 on, so records an earlier definition wrote are never resumed as its own;
  bump it whenever the method's definition changes (stage records carry it, and a re-run
  redoes those an earlier version wrote);
- `prompts`: the bundled prompts the method's LLM steps use (`kind/name`): a stage record
  carries their hashes, so a changed prompt file redoes the records it produced.
- `additions`: which of the method and its variants are project additions (not in the paper
  they stand beside): reports and the viewer label them so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Generic, TypeVar, cast

from tmem_core import ConfigError, from_json
from tmem_core._registry import Registry
from tmem_core._typed import build_config
from tmem_core.methods._base import Evidence
from tmem_core.methods._context import Context, ContextMethod
from tmem_core.methods._record import Record
from tmem_core.prompts import load_prompt
from tmem_core.retrieval import Conversation, IndexStore
from tmem_core.schema import Message

P = TypeVar("P")
Show = Callable[[Evidence, Context, Mapping[str, Message]], str]
Check = Callable[[Any, Sequence[str]], list[str]]
"""Problems of one stored context, from its construct record and its presented ids."""


@dataclass(frozen=True)
class View:
    """How the results viewer draws the method's contexts: in its `panel` ("forest" or
    "timeline"), what `render(payload, context text, messages by id, gold ids)` returns."""

    panel: str
    render: Callable[[Any, str, Mapping[str, Message], Collection[str]], object]


@dataclass
class MethodEnv:
    """What a method factory gets: the run's conversations, the grid's `top_k` (every
    method's retrieval depth) and `budget` (the context's tokens)."""

    conversations: Mapping[str, Conversation]
    top_k: int
    budget: int
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
    llm_free: bool = False
    memory: bool = False
    evidence: type[Any] | None = None
    record: type[Record] = Record
    checks: Mapping[str, Check] = field(default_factory=dict)
    view: View | None = None
    version: int = 1
    axes: Mapping[str, str | None] = field(default_factory=dict)
    prompts: tuple[str, ...] = ()
    addition: bool = False  # a project addition, not a method or condition of the papers
    environment: Callable[[], Mapping[str, Any]] | None = None  # its own, for the contract

    def parse(self, raw: Mapping[str, Any], where: str = "") -> P:
        """The method's parameters from a config table, with the variant's changes (a key
        the variant sets is refused: it would be dropped)."""
        where = where or f"methods.{self.name}"
        _refuse_overridden(raw, self.overrides, where, self)
        params = _apply(build_config(self.params, raw, where), self.overrides)
        _refuse_ignored(raw, params, where)
        return cast(P, params)

    def create(self, env: MethodEnv, raw: Mapping[str, Any] | None = None) -> ContextMethod:
        return self.build(env, self.parse(raw or {}), self.name)

    def stored_record(self, payload: str | None) -> Record | None:
        """The construct record a stage stored as JSON (None: a record without one, written
        before the method kept a record)."""
        return None if payload is None else from_json(self.record, payload)


METHODS: Registry[MethodSpec[Any]] = Registry("method", tuple(
    f"tmem_core.methods.{module}" for module in (
        "baselines._ranked", "baselines._naive_rag", "baselines._search_o1", "baselines._lazymem",
        "external._mem0", "external._graphiti", "external._comparators", "external._mcp",
        "external._http", "t2mem._method", "tmem._method", "tmem._tmem")))
"""The bundled methods, by the modules that register them."""


def method(name: str, *, description: str, config: type[Any] = NoParams,
           variants: Mapping[str, Mapping[str, Any]] | None = None, show: Show | None = None,
           ranked: bool = False, llm_free: bool | None = None, memory: bool = False,
           evidence: type[Any] | None = None, record: type[Record] = Record,
           checks: Mapping[str, Check] | None = None, view: View | None = None, version: int = 1,
           axes: Mapping[str, str | None] | None = None,
           variant_axes: Mapping[str, Sequence[str]] | None = None,
           prompts: Sequence[str] = (), additions: Collection[str] = (),
           environment: Callable[[], Mapping[str, Any]] | None = None
           ) -> Callable[[Callable[[MethodEnv, P, str], ContextMethod]],
                         Callable[[MethodEnv, P, str], ContextMethod]]:
    """Register a method factory under `name` (and its ablations under `variants`), with its
    payload and record types and hooks."""

    for ref in prompts:
        load_prompt(ref)  # a prompt that does not exist fails the registration

    def register(build: Callable[[MethodEnv, P, str], ContextMethod]
                 ) -> Callable[[MethodEnv, P, str], ContextMethod]:
        base = MethodSpec(name, build, config, description, show=show or show_context,
                          ranked=ranked, llm_free=ranked if llm_free is None else llm_free,
                          memory=memory,
                          evidence=evidence, record=record, checks=checks or {},
                          view=view, version=version,
                          axes=dict(axes or {}), prompts=tuple(prompts),
                          addition=name in additions, environment=environment)
        unknown = set(additions) - {name, *(variants or {})}
        if unknown:
            raise ValueError(f"method {name!r}: additions name no variant: {sorted(unknown)}")
        narrowed = variant_axes or {}
        for spec in (base, *(dataclasses.replace(
                base, name=variant, overrides=changes, variant_of=name,
                addition=variant in additions,
                axes={a: p for a, p in base.axes.items()
                      if variant not in narrowed or a in narrowed[variant]})
                             for variant, changes in (variants or {}).items())):
            _apply(build_config(config, {}, f"methods.{spec.name}"), spec.overrides)
            METHODS.add(spec.name, spec)
        return build

    return register


def method_label(name: str) -> str:
    """The method's name as reports show it: a project addition says so."""
    addition = name in METHODS.names() and get_method(name).addition
    return f"{name} (project addition)" if addition else name


RENAMED = {"full_context": "recent_context"}
"""Old method names -> the names they are registered under now (refused, naming the new)."""


def refuse_renamed(names: Sequence[str], key: str) -> None:
    """A `ConfigError` at `key` for a method named by its old name, telling the new one."""
    for name in names:
        if name in RENAMED:
            raise ConfigError(key, f"method {name!r} is now {RENAMED[name]!r} (named for what "
                                   f"it does); use {RENAMED[name]!r}")


def get_method(name: str, key: str = "") -> MethodSpec[Any]:
    """The method registered as `name` (`key`: where a config named it)."""
    refuse_renamed([name], key)
    return METHODS.get(name, key)


def method_names(*, ranked: bool | None = None) -> list[str]:
    """Registered method names (only those that rank without an LLM, with `ranked=True`)."""
    return [n for n, s in METHODS if ranked is None or s.ranked == ranked]


def check_params(tables: Mapping[str, Mapping[str, Any]], methods: Sequence[str]) -> None:
    """Each `[methods.<name>]` table checked by its method's parameter dataclass (unknown
    keys, types, choices, keys a variant sets); each names one of `methods`."""
    for name, table in tables.items():
        if name not in methods:
            raise ConfigError(f"methods.{name}", f"parameters for a method not in grid.methods "
                                                 f"({', '.join(methods)})")
        if name in method_names():  # else a name the caller allowed unregistered (grid tests)
            get_method(name).parse(table)


def build_method(name: str, env: MethodEnv, raw: Mapping[str, Any] | None = None
                 ) -> ContextMethod:
    """The method registered as `name`, with parameters from the config table `raw`."""
    return get_method(name).create(env, raw)


def _apply(params: Any, changes: Mapping[str, Any]) -> Any:
    """`params` with `changes` (nested dataclasses changed by sub-mappings)."""
    updates = {}
    for key, value in changes.items():
        if not hasattr(params, key):
            raise ConfigError("", f"variant changes unknown parameter {key!r}")
        current = getattr(params, key)
        nested = dataclasses.is_dataclass(current) and isinstance(value, Mapping)
        updates[key] = _apply(current, value) if nested else value
    return dataclasses.replace(params, **updates) if updates else params


def _refuse_ignored(raw: Mapping[str, Any], params: Any, where: str) -> None:
    """A parameter given that the other settings leave unused (the dataclass's `ignored()`:
    name -> the setting that makes it so) is refused, naming the key."""
    ignored = getattr(params, "ignored", None)
    for key, why in (ignored() if callable(ignored) else {}).items():
        if key in raw:
            raise ConfigError(f"{where}.{key}", f"not used when {why}; leave it out")


def _refuse_overridden(raw: Mapping[str, Any], changes: Mapping[str, Any], where: str,
                       spec: MethodSpec[Any]) -> None:
    for key, value in changes.items():
        if key not in raw:
            continue
        if isinstance(value, Mapping) and isinstance(raw[key], Mapping):
            _refuse_overridden(raw[key], value, f"{where}.{key}", spec)
            continue
        raise ConfigError(f"{where}.{key}", f"set to {value!r} by the variant {spec.name} of "
                                            f"{spec.variant_of}; name {spec.variant_of} to "
                                            f"choose it yourself")
