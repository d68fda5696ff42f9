"""The test-time loop (paper §3.2): reasoning, a memory cache and one action per step.

Repairs (each recorded in the step): an empty search query searches the question; ReadRaw of
an unknown or already read episode reads the episode of the best-ranked entry shown so far
whose episode is unread, else that of the best unseen entry for the question. The loop ends
on Answer, at Tmax, on malformed output (or an LLM error), on an action that is not allowed,
or when nothing is left to read; `stop` says which.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tmem_core.evaluation import question_block
from tmem_core.llm import (
    BackboneConfig,
    ChatRequest,
    ChatResponse,
    TokenCounter,
    count_chat_tokens,
    object_schema,
)
from tmem_core.methods._context import LLM
from tmem_core.methods.t2mem._config import Action, T2MemConfig
from tmem_core.methods.t2mem._episodes import Episode, fit_lines
from tmem_core.methods.t2mem._extract import CONTEXT_MARGIN, Entry
from tmem_core.methods.t2mem._index import MemoryIndex
from tmem_core.prompts import load_prompt
from tmem_core.schema import Question

STEP_STAGE = "construct"
"""Stage of the loop's LLM calls: test-time memory construction, per question."""

_ALIASES = {"searchmeta": "search", "readraw": "read"}
_LIMITS = {"reasoning": 300, "memory": 400, "argument": 100}  # characters


def raw_budget(config: T2MemConfig, backbone: BackboneConfig) -> int:
    """Tokens of a ReadRaw excerpt such that a step prompt (instructions, question, a full
    memory) and its output fit the backbone's context; at most `config.raw_tokens`."""
    prompt = load_prompt("t2mem/step")
    empty = dict.fromkeys(prompt.placeholders, "")
    overhead = count_chat_tokens(backbone, prompt.chat(**empty))
    memory = config.steps * _LIMITS["memory"] // 3  # three characters a token, at worst
    context = backbone.request_context
    room = int((context - config.step_max_tokens) * CONTEXT_MARGIN) - overhead - memory
    if room < 64:
        raise ValueError(f"backbone {backbone.name}: a context of {context} tokens leaves no "
                         f"room for a T2Mem step of {config.steps} steps")
    return min(config.raw_tokens, room)


def step_schema(allowed: Sequence[Action]) -> dict[str, Any]:
    """Reasoning, memory update, action and argument, generated in this order."""
    text = {k: {"type": "string", "maxLength": n} for k, n in _LIMITS.items()}
    properties = {"reasoning": text["reasoning"], "memory": text["memory"],
                  "action": {"enum": list(allowed)}, "argument": text["argument"]}
    return object_schema(properties)


MALFORMED = "malformed output"  # the stop reason of a step whose output is unusable

@dataclass(frozen=True)
class Decision:
    reasoning: str
    memory: str
    action: str
    argument: str


@dataclass
class Loop:
    """One question's construction: entries shown, episodes read, memory caches, step trace.

    A ReadRaw excerpt holds at most `raw_tokens` tokens as `count` (the backbone's) counts.
    """

    question: Question
    index: MemoryIndex
    config: T2MemConfig
    raw_tokens: int
    count: TokenCounter
    seen: dict[str, Entry] = field(default_factory=dict)
    read: list[str] = field(default_factory=list)
    memory: list[str] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    stop: str = ""
    read_ids: list[str] = field(default_factory=list)  # messages whose lines ReadRaw showed

    def run(self, initial: Sequence[Entry], llm: LLM) -> None:
        new = self._show(initial)
        for step in range(1, self.config.steps + 1):
            allowed = self.config.actions(step)
            (response,) = llm.generate([self._request(step, allowed, new, llm)])
            record = _call_record(step, allowed, response)
            self.steps.append(record)
            decision = _decision(response)
            if isinstance(decision, str):
                self.stop = f"{MALFORMED}: {decision}"
                break
            record.update(dataclasses.asdict(decision))
            if decision.memory and decision.memory not in self.memory:
                self.memory.append(decision.memory)
            if decision.action == "answer" or decision.action not in allowed:
                self.stop = _stop_reason(decision.action, step == self.config.steps)
                break
            found = (self._search(decision.argument, record) if decision.action == "search"
                     else self._read(decision.argument, record))
            if found is None:
                break
            new = found

    def degradation(self) -> dict[str, int]:
        """What fell back or was repaired (`steps_total`: the steps they are out of)."""
        return {
            "malformed_steps": int(self.stop.startswith(MALFORMED)),
            "tmax_without_answer": int(self.stop == "max_steps"),
            "repaired_actions": sum("repair" in s for s in self.steps),
            "fallback_context": int(not self.memory),
            "steps_total": len(self.steps),
        }

    def shown_ids(self) -> tuple[str, ...]:
        """Messages whose own text the loop showed: the lines of its ReadRaw excerpts, then
        raw-message entries it was shown (the no-metadata ablation), without repeats."""
        raw = [e.msg_id for e in self.seen.values() if e.msg_id is not None]
        return tuple(dict.fromkeys([*self.read_ids, *raw]))

    def linked_episodes(self) -> list[str]:
        """Episodes of the entries shown, then those read, without repeats."""
        return list(dict.fromkeys([e.episode_id for e in self.seen.values()] + self.read))

    def _request(self, step: int, allowed: Sequence[Action], new: str, llm: LLM) -> ChatRequest:
        memory = "\n".join(f"- {note}" for note in self.memory) or "(empty)"
        messages = load_prompt("t2mem/step").chat(
            question=question_block(self.question), memory=memory, new=new or "(nothing new)",
            episodes=self._episode_list(allowed), allowed=", ".join(allowed),
            steps_left=str(self.config.steps - step + 1))
        sampling = dataclasses.replace(llm.backbone.sampling,
                                       max_tokens=self.config.step_max_tokens)
        return ChatRequest(messages, sampling, step_schema(allowed), stage=STEP_STAGE,
                           qid=self.question.qid)

    def _episode_list(self, allowed: Sequence[Action]) -> str:
        if "read" not in allowed:
            return ""
        items = [self.index.by_episode[eid].header + (" [read]" if eid in self.read else "")
                 for eid in self.linked_episodes()]
        return "Episodes you can read: " + ", ".join(items) if items else ""

    def _show(self, entries: Sequence[Entry]) -> str:
        self.seen.update((e.entry_id, e) for e in entries)
        return "\n".join(describe(e, self.index) for e in entries)

    def _search(self, argument: str, record: dict[str, Any]) -> str:
        query = argument or self.question.question
        if not argument:
            record["repair"] = "empty query: searched the question"
        found = self.index.search(query, self.config.k_search, self.seen)
        record["found"] = [e.to_json() for e in found]
        return self._show(found) or "No unseen entry matches that query."

    def _read(self, argument: str, record: dict[str, Any]) -> str | None:
        episode = self.index.find_episode(argument)
        if episode is None or episode.episode_id in self.read:
            why = "unknown episode" if episode is None else "already read"
            episode = self._unread()
            if episode is None:
                self.stop = f"read {argument!r}: {why}, and no unread episode is linked"
                return None
            record["repair"] = f"read {argument!r}: {why}; read {episode.episode_id} instead"
        self.read.append(episode.episode_id)
        lines = fit_lines(episode.lines, self.raw_tokens, self.count)
        self.read_ids += [m.msg_id for m in episode.messages[:len(lines)]]
        record["read"] = {"episode": episode.episode_id, "source": episode.source,
                          "messages": len(lines), "of": len(episode.lines),
                          "tokens": sum(self.count(line) + 1 for line in lines)}
        return f"Raw messages of episode {episode.header}:\n" + "\n".join(lines)

    def _unread(self) -> Episode | None:
        """The episode of the best-ranked entry shown whose episode is unread, else that of
        the best unseen entry for the question."""
        shown = [e.episode_id for e in self.seen.values()]
        unseen = self.index.search(self.question.question, len(self.index.entries), self.seen)
        candidates = shown + [e.episode_id for e in unseen]
        return next((self.index.by_episode[eid] for eid in candidates if eid not in self.read),
                    None)


def describe(entry: Entry, index: MemoryIndex) -> str:
    """An entry as the LLM reads it: id, its episode (id, source, date), kind and text."""
    return f"({entry.entry_id}) [{index.by_episode[entry.episode_id].header}] " \
           f"{entry.kind}: {entry.text}"


def _call_record(step: int, allowed: Sequence[Action], response: ChatResponse) -> dict[str, Any]:
    return {"step": step, "allowed": list(allowed),
            "prompt_tokens": response.usage.prompt_tokens,
            "completion_tokens": response.usage.completion_tokens,
            "latency_s": round(response.latency_s, 3), "cached": response.cached,
            "error": response.error}


def _decision(response: ChatResponse) -> Decision | str:
    """The step's decision, or why there is none."""
    if not response.ok:
        return response.error or "error"
    parsed = response.parsed
    if not isinstance(parsed, dict) or not isinstance(parsed.get("action"), str):
        return f"no action in {response.text[:160]!r}"
    values = {k: str(parsed.get(k) or "").strip() for k in ("reasoning", "memory", "argument")}
    action = parsed["action"].strip().lower()
    return Decision(action=_ALIASES.get(action, action), **values)


def _stop_reason(action: str, last: bool) -> str:
    if action == "answer":
        return "answer"
    return "max_steps" if last else f"action {action!r} not allowed"
