"""The test-time loop (paper §3.2): reasoning, a memory cache and one action per step.

ReadRaw reads an episode part page by page: a page holds as many of its messages as the step's
raw budget allows, the agent names the page (`E3 page 2`; the first unread one when it names
none), so every message of every part is reachable whatever the budget. Repairs (each
recorded in the step): an empty search query searches the question; a read of a page already
read, or past the last, reads that episode's first unread page; a read of an unknown or fully
read episode reads the first unread page of the best-ranked entry's episode shown so far, else
of the best unseen entry's for the question. The loop ends on Answer, at Tmax, on malformed
output (or an LLM error), on an action that is not allowed, or when nothing is left to read;
`stop` says which.

`step_record` is what a run keeps per question: the steps taken out of Tmax, whether the
answer was forced (the loop reached its last step, where Answer is the only action: under
constrained decoding the model cannot but answer there, so a counter of non-answers at Tmax
never fires; the step the answer came at is what tells), its tool calls, and the share of
each episode part its reads showed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tmem_core.evaluation import question_block
from tmem_core.llm import BackboneConfig, ChatRequest, ChatResponse
from tmem_core.llm._tokens import TokenCounter, count_chat_tokens
from tmem_core.llm._types import object_schema
from tmem_core.methods._context import LLM
from tmem_core.methods._reasoning import ANSWER_ALLOWANCE, CHARS_PER_TOKEN
from tmem_core.methods.t2mem._config import Action, T2MemConfig
from tmem_core.methods.t2mem._episodes import Episode, fit_lines
from tmem_core.methods.t2mem._extract import CONTEXT_MARGIN, Entry
from tmem_core.methods.t2mem._index import MemoryIndex
from tmem_core.prompts import load_prompt
from tmem_core.schema import Question

STEP_STAGE = "construct"
"""Stage of the loop's LLM calls: test-time memory construction, per question."""

_ALIASES = {"searchmeta": "search", "readraw": "read"}
_PAGE = re.compile(r"^(?P<episode>.*?)[\s,:;/#(-]*(?:page|pg|p)\.?\s*(?P<page>\d+)\)?\s*$",
                   re.IGNORECASE)
_UNREAD_DEPTH = 32  # unseen entries ranked at first when looking for an unread episode
_TEXT_FIELDS = ("reasoning", "memory", "argument")
_NOTES_SHARE = {"reasoning": 3 / 7, "memory": 4 / 7}  # of a budget's reasoning tokens


def limits(config: T2MemConfig) -> dict[str, int]:
    """Characters of a step's text fields: none without a reasoning budget (the step's
    `max_tokens` bounds them); under a budget N, reasoning and memory share N tokens'
    characters (3 to 4) and the argument has the 64 tokens' allowance."""
    budget = config.reasoning
    if budget is None:
        return {}
    return {**{k: budget.chars(share) for k, share in _NOTES_SHARE.items()},
            "argument": ANSWER_ALLOWANCE * CHARS_PER_TOKEN}


def raw_budget(config: T2MemConfig, backbone: BackboneConfig) -> int:
    """Tokens of a ReadRaw excerpt such that a step prompt (instructions, question, the memory
    notes it shows) and its output fit the backbone's context; at most `config.raw_tokens`."""
    prompt = load_prompt("t2mem/step")
    empty = dict.fromkeys(prompt.placeholders, "")
    overhead = count_chat_tokens(backbone, prompt.chat(**empty))
    context = backbone.request_context
    memory = config.memory_tokens if config.rollout else 0  # one step writes none before
    room = int((context - config.step_tokens) * CONTEXT_MARGIN) - overhead - memory
    if room < 64:
        raise ValueError(f"backbone {backbone.name}: a context of {context} tokens leaves no "
                         f"room for a T2Mem step of {config.step_tokens} output tokens and "
                         f"{config.memory_tokens} tokens of memory")
    return min(config.raw_tokens, room)


def step_schema(allowed: Sequence[Action], lengths: Mapping[str, int] | None = None
                ) -> dict[str, Any]:
    """Reasoning, memory update, action and argument, generated in this order, each text
    within its `lengths` (characters) where it has one."""
    lengths = lengths or {}
    text = {k: {"type": "string", **({"maxLength": lengths[k]} if k in lengths else {})}
            for k in _TEXT_FIELDS}
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

    A ReadRaw page holds at most `raw_tokens` tokens as `count` (the backbone's) counts;
    `pages_read` holds each read episode's pages (from 1), `read` the episodes in the order
    first read.
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
    pages_read: dict[str, set[int]] = field(default_factory=dict)
    notes_left_out: int = 0  # most memory notes a step prompt left out
    _pages: dict[str, list[tuple[int, int]]] = field(default_factory=dict, repr=False)

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
            "repaired_actions": sum("repair" in s for s in self.steps),
            "fallback_context": int(not self.memory),
            "steps_total": len(self.steps),
        }

    @property
    def forced(self) -> bool:
        """The loop reached its last step, where Answer is the only action (never for the
        one-step no-rollout ablation, whose single Answer step is its design)."""
        return (self.config.steps > 1 and len(self.steps) == self.config.steps
                and not self.stop.startswith(MALFORMED))

    def step_record(self) -> dict[str, Any]:
        """Steps taken of the budget, a forced answer, tool calls, and per episode part read
        the share of its messages shown (`shown`)."""
        shown = {eid: sum(b - a for a, b in (self._pages[eid][p - 1] for p in pages))
                 / len(self.index.by_episode[eid].lines)
                 for eid, pages in self.pages_read.items()}
        searches = sum("found" in s for s in self.steps)
        reads = sum("read" in s for s in self.steps)
        return {"steps": len(self.steps), "max_steps": self.config.steps,
                "forced": self.forced, "tool_calls": searches + reads, "searches": searches,
                "reads": reads, "parts_read": len(shown),
                "parts_read_in_full": sum(f >= 1 for f in shown.values()),
                "notes_left_out": self.notes_left_out,
                "shown": {eid: round(f, 4) for eid, f in shown.items()}}

    def shown_ids(self) -> tuple[str, ...]:
        """Messages whose own text the loop showed: the lines of its ReadRaw excerpts, then
        raw-message entries it was shown (the no-metadata ablation), without repeats."""
        raw = [e.msg_id for e in self.seen.values() if e.msg_id is not None]
        return tuple(dict.fromkeys([*self.read_ids, *raw]))

    def linked_episodes(self) -> list[str]:
        """Episodes of the entries shown, then those read, without repeats."""
        return list(dict.fromkeys([e.episode_id for e in self.seen.values()] + self.read))

    def _request(self, step: int, allowed: Sequence[Action], new: str, llm: LLM) -> ChatRequest:
        memory = self._notes()
        messages = load_prompt("t2mem/step").chat(
            question=question_block(self.question), memory=memory, new=new or "(nothing new)",
            episodes=self._episode_list(allowed), allowed=", ".join(allowed),
            steps_left=str(self.config.steps - step + 1))
        budget = self.config.reasoning
        if budget is not None:
            messages = budget.ask(messages)
        sampling = dataclasses.replace(llm.backbone.sampling,
                                       max_tokens=self.config.step_tokens)
        return ChatRequest(messages, sampling, step_schema(allowed, limits(self.config)),
                           stage=STEP_STAGE, qid=self.question.qid)

    def _notes(self) -> str:
        """The memory notes a step prompt shows: the newest within `memory_tokens`, after a
        line saying how many older ones are left out (counted in `notes_left_out`)."""
        shown = fit_lines([f"- {n}" for n in reversed(self.memory)], self.config.memory_tokens,
                          self.count)[::-1]
        left_out = len(self.memory) - len(shown)
        self.notes_left_out = max(self.notes_left_out, left_out)
        head = [f"(... {left_out} earlier notes left out ...)"] if left_out else []
        return "\n".join(head + shown) or "(empty)"

    def _episode_list(self, allowed: Sequence[Action]) -> str:
        if "read" not in allowed:
            return ""
        items = [self._listed(self.index.by_episode[eid]) for eid in self.linked_episodes()]
        return "Episodes you can read: " + ", ".join(items) if items else ""

    def _listed(self, episode: Episode) -> str:
        """`E3 (source, date)`, with its pages when it has more than one, and what was read."""
        pages = len(self.pages(episode))
        read = sorted(self.pages_read.get(episode.episode_id, ()))
        notes = [f"{pages} pages"] if pages > 1 else []
        if read:
            notes.append("read" if len(read) == pages else
                         f"read page {', '.join(map(str, read))}")
        return episode.header + (f" [{'; '.join(notes)}]" if notes else "")

    def pages(self, episode: Episode) -> list[tuple[int, int]]:
        """The episode's pages as (first, end) line positions: consecutive runs of its lines,
        each within the raw budget (a line too long for a page alone is clipped)."""
        if episode.episode_id not in self._pages:
            bounds, start = [], 0
            while start < len(episode.lines):
                taken = max(1, len(fit_lines(episode.lines[start:], self.raw_tokens,
                                             self.count)))
                bounds.append((start, start + taken))
                start += taken
            self._pages[episode.episode_id] = bounds
        return self._pages[episode.episode_id]

    def _show(self, entries: Sequence[Entry]) -> str:
        self.seen.update((e.entry_id, e) for e in entries)
        return "\n".join(describe(e, self.index) for e in entries)

    def _search(self, argument: str, record: dict[str, Any]) -> str:
        query = argument or self.question.question
        if not argument:
            record["repair"] = "empty query: searched the question"
        found = self.index.search(query, self.config.search_top_k, self.seen)
        record["found"] = [e.to_json() for e in found]
        return self._show(found) or "No unseen entry matches that query."

    def _read(self, argument: str, record: dict[str, Any]) -> str | None:
        named, asked = _page_of(argument)
        episode = self.index.find_episode(named)
        page = None if episode is None else self._page(episode, asked)
        if episode is None or page is None:
            why = "unknown episode" if episode is None else "already read"
            episode = self._unread()
            if episode is None:
                self.stop = f"read {argument!r}: {why}, and no unread episode is linked"
                return None
            page = self._page(episode, None)
            assert page is not None  # an unread episode has an unread page
            record["repair"] = f"read {argument!r}: {why}; read {episode.episode_id} instead"
        elif asked is not None and page != asked:
            why = "already read" if asked <= len(self.pages(episode)) else "does not exist"
            record["repair"] = f"read {argument!r}: page {asked} {why}; read page {page} instead"
        return self._show_page(episode, page, record)

    def _page(self, episode: Episode, asked: int | None) -> int | None:
        """The page to read: the one asked for if it exists and is unread, else the
        episode's first unread page (None: every page is read)."""
        done = self.pages_read.get(episode.episode_id, set())
        pages = range(1, len(self.pages(episode)) + 1)
        if asked in pages and asked not in done:
            return asked
        return next((p for p in pages if p not in done), None)

    def _show_page(self, episode: Episode, page: int, record: dict[str, Any]) -> str:
        pages = self.pages(episode)
        first, end = pages[page - 1]
        lines = fit_lines(episode.lines[first:end], self.raw_tokens, self.count)
        if episode.episode_id not in self.pages_read:
            self.read.append(episode.episode_id)
        self.pages_read.setdefault(episode.episode_id, set()).add(page)
        self.read_ids += [m.msg_id for m in episode.messages[first:end]]
        record["read"] = {"episode": episode.episode_id, "source": episode.source,
                          "page": page, "pages": len(pages), "messages": end - first,
                          "of": len(episode.lines),
                          "tokens": sum(self.count(line) + 1 for line in lines)}
        where = (f", page {page} of {len(pages)} (messages {first + 1}-{end} of "
                 f"{len(episode.lines)})" if len(pages) > 1 else "")
        return f"Raw messages of episode {episode.header}{where}:\n" + "\n".join(lines)

    def _unread(self) -> Episode | None:
        """The episode of the best-ranked entry shown with a page unread, else that of the
        best unseen entry for the question (ranked a few at a time: most are found early)."""
        shown = [e.episode_id for e in self.seen.values()]
        found = self._first_unread(shown)
        depth = _UNREAD_DEPTH
        while found is None:
            unseen = self.index.search(self.question.question, depth, self.seen)
            found = self._first_unread([e.episode_id for e in unseen])
            if depth >= len(self.index.entries):
                break
            depth *= 4
        return found

    def _first_unread(self, episode_ids: Sequence[str]) -> Episode | None:
        episodes = (self.index.by_episode[eid] for eid in episode_ids)
        return next((e for e in episodes if self._page(e, None) is not None), None)


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


def _page_of(argument: str) -> tuple[str, int | None]:
    """The episode an argument names and the page it asks for (`E3 page 2`, `E3 p2`,
    `E3:2`, `[E3] (page 2)`), None when it asks for none."""
    match = _PAGE.match(argument.strip())
    if match and match["episode"].strip():
        return match["episode"], int(match["page"])
    short = re.fullmatch(r"\s*(\[?E?\d+\]?)\s*[:/#]\s*(\d+)\s*", argument, re.IGNORECASE)
    return (short[1], int(short[2])) if short else (argument, None)


def _stop_reason(action: str, last: bool) -> str:
    if action == "answer":
        return "answer"
    return "max_steps" if last else f"action {action!r} not allowed"
