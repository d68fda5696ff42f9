"""A conversation's extraction plan, made once and shared by every process that builds it.

Every stage actor that serves a conversation's questions builds its memory. Before the plan
was shared, each copy segmented the conversation and rendered and hashed one extraction
request per episode, only to find the first copy's outputs in the extraction store: 2 s of
CPU per copy of a 120,000-message conversation, 16 copies in a sweep of 4 actors over 4
conversations. Now the first process to take a plan's lock segments and renders, and stores
the episodes with each request's hash; the others wait for it (their questions wait for the
memory anyway) and read them.

A plan's key covers what segmentation and the requests read: the conversation's messages,
the episode mode and token limit, the method's configuration, the backbone, its tokenizer,
the prompt, and the source of the code that turns these into episodes and requests (so a
changed rule never reads an old plan).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import operator
import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from filelock import FileLock

from tmem_core.llm import BackboneConfig, ChatRequest, _request_cache, _tokens, _types, request_hash
from tmem_core.llm._tokens import tokenizer_identity
from tmem_core.methods import _context
from tmem_core.methods.t2mem import _episodes
from tmem_core.methods.t2mem._config import T2MemConfig
from tmem_core.methods.t2mem._episodes import Episode, Mode
from tmem_core.prompts import Prompt
from tmem_core.retrieval import Conversation, _text, content_key
from tmem_core.schema import Message

_VERSION = "t2mem-plan-v1"
_SHAPED_BY: tuple[ModuleType, ...] = (_episodes, _context, _text, _tokens, _types,
                                      _request_cache)
"""Modules whose code shapes a plan (with this one, and the extraction module, which renders
the requests)."""
_THIS = sys.modules[__name__]


@dataclass(frozen=True)
class Plan:
    """The episodes of a conversation, and per episode the hash of its extraction request;
    the requests themselves where this process rendered them (a plan read from the store
    holds none: extraction renders those of the episodes it has to send)."""

    episodes: tuple[Episode, ...]
    hashes: Mapping[str, str]  # episode id -> request_hash
    requests: Mapping[str, ChatRequest]


Make = Callable[[], tuple[tuple[Episode, ...], dict[str, ChatRequest]]]
"""Segments the conversation and renders each episode's extraction request."""


def shared_plan(conversation: Conversation, mode: Mode, limit: int, backbone: BackboneConfig,
                config: T2MemConfig, prompt: Prompt, directory: Path, make: Make,
                shaped_by: ModuleType,
                acquired: Callable[[FileLock], AbstractContextManager[None]]) -> Plan:
    """The conversation's plan: read from `directory`, or made (`make`) and stored there, by
    one process at a time (`acquired`: how the plan's lock is waited for); `shaped_by`: the
    module that renders the requests, whose code is part of the key."""
    key = plan_key(conversation, mode, limit, backbone, config, prompt, shaped_by)
    path = directory / key[:2] / f"{key}.json"
    (directory / ".locks").mkdir(parents=True, exist_ok=True)
    with acquired(FileLock(str(directory / ".locks" / f"{key}.lock"))):
        stored = _read(path, conversation)
        if stored is not None:
            return stored
        episodes, requests = make()
        plan = Plan(episodes, {eid: request_hash(backbone, r) for eid, r in requests.items()},
                    requests)
        _write(path, plan)
        return plan


def plan_key(conversation: Conversation, mode: Mode, limit: int, backbone: BackboneConfig,
             config: T2MemConfig, prompt: Prompt, shaped_by: ModuleType) -> str:
    """What the plan depends on, as one key."""
    def dumped(value: object) -> str:
        return json.dumps(dataclasses.asdict(value),  # type: ignore[call-overload]
                          sort_keys=True, default=str)

    return content_key([_VERSION, _code_digest((*_SHAPED_BY, shaped_by, _THIS)), mode, str(limit),
                        dumped(config), dumped(backbone), tokenizer_identity(backbone.tokenizer),
                        prompt.sha256, _fingerprint(conversation)])


_FIELDS = operator.attrgetter(*(f.name for f in dataclasses.fields(Message)))


def _fingerprint(conversation: Conversation) -> str:
    """A digest of every field of every message, in order."""
    return hashlib.sha256(repr([_FIELDS(m) for m in conversation.messages]).encode()).hexdigest()


@functools.cache
def _code_digest(modules: tuple[ModuleType, ...]) -> str:
    return content_key([Path(str(m.__file__)).read_text(encoding="utf-8") for m in modules])


def _read(path: Path, conversation: Conversation) -> Plan | None:
    """The stored plan, rebuilt on the conversation's messages; None if there is none (or it
    cannot be read: it is made again)."""
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        by_id = {m.msg_id: m for m in conversation.messages}
        episodes = tuple(Episode(eid, source, tuple(by_id[i] for i in ids), tuple(lines))
                         for eid, source, ids, lines in stored["episodes"])
        return Plan(episodes, dict(stored["hashes"]), {})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(path: Path, plan: Plan) -> None:
    """Written whole to a temporary file, then renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    episodes = [[e.episode_id, e.source, list(e.ids), list(e.lines)] for e in plan.episodes]
    fd, tmp = tempfile.mkstemp(prefix=".", suffix=".json", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"version": _VERSION, "episodes": episodes,
                             "hashes": dict(plan.hashes)}))
    os.replace(tmp, path)
