"""Offline extraction per episode (paper §3.1: metadata; §5.2 ablations: a summary or an
entity-relation graph), cached on disk across processes.

A cached output is keyed by the extraction request's hash (backbone name and model, the
rendered prompt holding the episode's messages, sampling, schema) and the prompt file's
hash (each kind of unit has its own prompt and schema, so their outputs never collide), so a
sweep over many methods, questions or processes extracts each episode once.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from tmem_core.llm import BackboneConfig, ChatRequest, ChatResponse, Usage, request_hash
from tmem_core.llm._accounting import CallRecord
from tmem_core.llm._gating import gating_wait
from tmem_core.llm._tokens import TokenCounter, count_chat_tokens
from tmem_core.llm._types import GATING_PRIORITY, object_schema
from tmem_core.methods._context import LLM
from tmem_core.methods.t2mem._config import T2MemConfig
from tmem_core.methods.t2mem._episodes import Episode, fit_lines
from tmem_core.prompts import Prompt, load_prompt
from tmem_core.retrieval import content_key

EXTRACT_STAGE = "memory"
"""Stage of extraction calls: offline memory construction, apart from the per-question loop."""

_VERSION = "t2mem-extract-v3"  # v2: each output keeps its call's usage; v3: one file per set
CONTEXT_MARGIN = 0.7  # the budget tokenizer (cl100k) counts ~25% fewer tokens than SmolLM2's
_PROMPTS = {"metadata": "t2mem/extract", "summary": "t2mem/summarize", "graph": "t2mem/graph"}
_TRIPLE = ("subject", "relation", "object")


@dataclass(frozen=True)
class Entry:
    """A memory unit that SearchMeta finds: `text` is shown, `search_text` embedded;
    `msg_id`: the raw message it shows (the no-metadata ablation's entries)."""

    entry_id: str
    episode_id: str
    kind: str  # event | fact | summary | triple | message
    text: str
    search_text: str
    msg_id: str | None = None

    def to_json(self) -> dict[str, str]:
        return {"id": self.entry_id, "episode": self.episode_id, "kind": self.kind,
                "text": self.text}


@dataclass(frozen=True)
class ConstructionStats:
    """What `T2Mem.prepare` did for one conversation (offline memory construction).

    `calls` are this call's LLM calls (stage "memory"), ready for the calls table; `reused`
    counts episodes whose metadata came from the extraction cache, and `reused_calls` are the
    calls that made them (original tokens, no new spend: every run that uses a memory accounts
    for what building it cost); `failed` holds one error per episode left without metadata
    (not cached: the next `prepare` retries it); `dropped` counts extracted items left out as
    invalid (a triple with an empty part, an entry without text).
    """

    conv_id: str
    mode: str
    episodes: int
    entries: int
    extracted: int
    reused: int
    failed: tuple[str, ...]
    calls: tuple[CallRecord, ...]
    seconds: float
    reused_calls: tuple[CallRecord, ...] = ()
    dropped: int = 0

    @property
    def usage(self) -> Usage:
        return sum((Usage(c.prompt_tokens, c.completion_tokens) for c in self.calls), Usage())


@dataclass(frozen=True)
class Extraction:
    """Parsed metadata by episode id, and the calls it took."""

    outputs: dict[str, dict[str, Any]]
    calls: tuple[CallRecord, ...]
    reused: int
    failed: tuple[str, ...]
    reused_calls: tuple[CallRecord, ...] = ()  # the original calls of the reused episodes


def extraction_limit(config: T2MemConfig, backbone: BackboneConfig) -> int:
    """Tokens of rendered messages an episode part may hold so that its extraction prompt and
    output fit the backbone's context (every variant segments alike, raw included)."""
    prompt = load_prompt(_PROMPTS.get(config.units, "t2mem/extract"))
    overhead = count_chat_tokens(backbone, prompt.chat(**_values(prompt, "", "", config)))
    context = backbone.request_context
    room = int((context - config.extract_max_tokens) * CONTEXT_MARGIN) - overhead
    if room < 64:
        raise ValueError(f"backbone {backbone.name}: a context of {context} tokens leaves no "
                         f"room for an episode after {config.extract_max_tokens} output tokens")
    return min(config.episode_tokens, room)


def extract(episodes: Sequence[Episode], llm: LLM, config: T2MemConfig, cache: Path,
            limit: int, count: TokenCounter) -> Extraction:
    """Metadata of every episode: from the cache, else from one batch of LLM calls."""
    prompt = load_prompt(_PROMPTS[config.units])
    schema = extraction_schema(config)  # one object: checked once, not once per episode
    requests = {e.episode_id: _request(prompt, e, config, schema, llm.backbone, limit, count)
                for e in episodes}
    hashes = {eid: request_hash(llm.backbone, r) for eid, r in requests.items()}
    keys = {eid: content_key([_VERSION, hashed, prompt.sha256]) for eid, hashed in hashes.items()}
    store = _Store(cache / "extract", sorted(keys.values()))
    stored = store.read(keys)
    missing = sorted(set(keys) - set(stored))
    todo: list[str] = []
    sent_at = 0.0
    responses: list[ChatResponse] = []
    failed: list[str] = []
    if missing:
        with _acquired(FileLock(str(store.lock_path))):
            stored |= store.read({eid: keys[eid] for eid in missing})  # written meanwhile
            todo = [eid for eid in missing if eid not in stored]
            sent_at = time.time()  # the batch's calls end at sent_at + their own latency
            responses = llm.generate([requests[eid] for eid in todo]) if todo else []
            made = {keys[eid]: (r.parsed, r.usage) for eid, r in zip(todo, responses, strict=True)
                    if r.ok and isinstance(r.parsed, dict)}
            failed = [f"{eid}: {r.error or 'output is not a JSON object'}"
                      for eid, r in zip(todo, responses, strict=True) if keys[eid] not in made]
            if made:
                store.write(made)
    outputs = {eid: out for eid, (out, _) in stored.items()}
    outputs |= {eid: r.parsed for eid, r in zip(todo, responses, strict=True)
                if r.ok and isinstance(r.parsed, dict)}
    calls = tuple(CallRecord.of(llm.backbone, requests[eid], r, sent_at=sent_at)
                  for eid, r in zip(todo, responses, strict=True))
    reused = tuple(CallRecord.reused_call(llm.backbone, requests[eid], usage, hashes[eid])
                   for eid, (_, usage) in sorted(stored.items()))
    return Extraction(outputs, calls, len(stored), tuple(failed), reused)


@contextmanager
def _acquired(lock: FileLock) -> Iterator[None]:
    """`lock`, waited for as a wait of gating work (the build may be another process's)."""
    with gating_wait():
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def metadata_entries(episodes: Sequence[Episode], outputs: dict[str, dict[str, Any]],
                     config: T2MemConfig) -> tuple[tuple[Entry, ...], int]:
    """Entries of the extracted metadata (or summaries, or triples), numbered M1... in episode
    order, and how many extracted items were dropped as invalid."""
    parsed = [(e.episode_id, _units(outputs[e.episode_id], e, config))
              for e in episodes if e.episode_id in outputs]
    units = [(eid, kind, text) for eid, (found, _) in parsed for kind, text in found]
    entries = tuple(Entry(f"M{i}", eid, kind, text, text)
                    for i, (eid, kind, text) in enumerate(units, 1))
    return entries, sum(dropped for _, (_, dropped) in parsed)


def message_entries(episodes: Sequence[Episode]) -> tuple[Entry, ...]:
    """One entry per raw message (the no-metadata ablation), linked to its episode."""
    pairs = [(e.episode_id, m, line) for e in episodes
             for m, line in zip(e.messages, e.lines, strict=True)]
    return tuple(Entry(f"M{i}", eid, "message", line, m.text, m.msg_id)
                 for i, (eid, m, line) in enumerate(pairs, 1))


def extraction_schema(config: T2MemConfig) -> dict[str, Any]:
    if config.units == "summary":
        return object_schema({"summary": {"type": "string", "minLength": 1, "maxLength": 800}})
    if config.units == "graph":  # no minLength: a triple with an empty part is dropped, counted
        triple = object_schema({**{k: {"type": "string", "maxLength": 80} for k in _TRIPLE},
                          "time": {"type": "string", "maxLength": 24}})
        return object_schema({"triples": {"type": "array", "minItems": 1,
                                    "maxItems": config.max_triples, "items": triple}})
    entry = object_schema({  # bounded by the call's tokens, not by characters
        "kind": {"enum": ["event", "fact"]},
        "text": {"type": "string", "minLength": 1},
        "entities": {"type": "array", "items": {"type": "string"}},
        "time": {"type": "string"},
    })
    limit = {} if config.max_entries is None else {"maxItems": config.max_entries}
    return object_schema({"entries": {"type": "array", "minItems": 1, **limit,
                                      "items": entry}})


def _request(prompt: Prompt, episode: Episode, config: T2MemConfig, schema: dict[str, Any],
             backbone: BackboneConfig, limit: int, count: TokenCounter) -> ChatRequest:
    messages = "\n".join(fit_lines(episode.transcript(), limit, count))
    label = f"{episode.source}, from {episode.start:%Y-%m-%d %H:%M}"
    sampling = dataclasses.replace(backbone.sampling, max_tokens=config.extract_max_tokens)
    return ChatRequest(prompt.chat(**_values(prompt, label, messages, config)), sampling,
                       schema, stage=EXTRACT_STAGE,
                       priority=GATING_PRIORITY)  # every question of the conversation waits


def _values(prompt: Prompt, episode: str, messages: str, config: T2MemConfig) -> dict[str, str]:
    entries = "the entries" if config.max_entries is None else \
        f"at most {config.max_entries} entries"
    values = {"episode": episode, "messages": messages, "entries": entries,
              "max_triples": str(config.max_triples)}
    return {k: v for k, v in values.items() if k in prompt.placeholders}


_Units = tuple[list[tuple[str, str]], int]


def _units(output: dict[str, Any], episode: Episode, config: T2MemConfig) -> _Units:
    """(kind, text) of each valid item of one episode's parsed output, and how many items were
    invalid; an entry's entities and time join its text."""
    if config.units == "summary":
        summary = str(output.get("summary") or "").strip()
        return ([("summary", summary)], 0) if summary else ([], 1)
    if config.units == "graph":
        return _triples(output.get("triples") or [], episode, config.max_triples)
    items = output.get("entries") or []
    units = []
    for item in items:
        if not isinstance(item, dict) or not str(item.get("text", "")).strip():
            continue
        entities = ", ".join(str(e).strip() for e in item.get("entities") or [] if str(e).strip())
        time = str(item.get("time") or "").strip()
        extras = "; ".join(f"{k}: {v}" for k, v in (("entities", entities), ("time", time)) if v)
        text = str(item["text"]).strip()
        units.append((str(item.get("kind") or "fact"), f"{text} ({extras})" if extras else text))
    return units, len(items) - len(units)


def _triples(items: list[Any], episode: Episode, cap: int) -> _Units:
    """The first `cap` triples as "subject — relation — object (time)", dated by the episode
    when they state no time; a triple with an empty part is invalid."""
    units = []
    for item in items[:cap]:
        parts = [str(item.get(k) or "").strip() for k in _TRIPLE] if isinstance(item, dict) \
            else []
        if parts and all(parts):
            time = str(item.get("time") or "").strip() or f"{episode.start:%Y-%m-%d}"
            units.append(("triple", f"{' — '.join(parts)} ({time})"))
    return units, len(items[:cap]) - len(units)


class _Store:
    """The outputs of one set of requests (a conversation's episodes under one prompt and
    backbone) in one JSON file by request key, written to a temporary file and renamed into
    place. One file, not one per output: a build's ~2,000 writes (and every other process's
    ~2,000 reads of them) took seconds of syscalls, each waiting for the GIL behind the
    questions of other conversations, while the conversation's questions waited for the
    build."""

    def __init__(self, directory: Path, keys: Sequence[str]) -> None:
        name = content_key([_VERSION, *keys])
        self.path = directory / name[:2] / f"{name}.json"
        self.lock_path = directory / ".locks" / f"{name}.lock"
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)

    def read(self, keys: dict[str, str]) -> dict[str, tuple[dict[str, Any], Usage]]:
        """Stored outputs by name, with the usage of the call that made each."""
        stored = self._all()
        return {name: (stored[key]["parsed"], Usage(**stored[key]["usage"]))
                for name, key in keys.items() if key in stored}

    def write(self, made: dict[str, tuple[dict[str, Any], Usage]]) -> None:
        """Add outputs (under the set's lock: a write replaces the whole file)."""
        outputs = self._all() | {key: {"parsed": parsed, "usage": dataclasses.asdict(usage)}
                                 for key, (parsed, usage) in made.items()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".json", dir=self.path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"version": _VERSION, "outputs": outputs}))
        os.replace(tmp, self.path)

    def _all(self) -> dict[str, dict[str, Any]]:
        if not self.path.exists():
            return {}
        outputs: dict[str, dict[str, Any]] = json.loads(
            self.path.read_text(encoding="utf-8"))["outputs"]
        return outputs
