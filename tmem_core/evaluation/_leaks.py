"""Leak guards: no gold in what a method or the answer model is shown.

Methods never receive `Gold` objects (a structural guarantee, checked end to end by the
canary tests). Two guards check what reached the prompts anyway:

- gold *ids* (`gold_strings`: source ids and sessions of gold evidence, abstention questions'
  ids, `gold_meta` values under an id key) may appear in no prompt of a guarded stage
  (`GUARDED_STAGES`: memory, retrieve, construct, answer), matched as whole tokens
  (`ids_in`); the judges' prompts (answer judge, calibration, any other judging stage) must
  show the gold and are not guarded;
- gold *answers* (`gold_leaks`: the answer, and `gold_meta` values under an answer key such
  as LoCoMo's `adversarial_answer`) may not appear in an answer prompt outside its evidence
  context: inside it they are what the conversation says, and a benchmark's wrong or
  superseded answers are words the conversation uses too.

Other `gold_meta` values (annotations such as a difficulty) are neither, and unchecked.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from functools import lru_cache

from tmem_core.evaluation._metrics import normalise
from tmem_core.schema import Gold, Message, Question

_MIN_CHARS = 3  # shorter gold answers ("2", "no") match by chance
GUARDED_STAGES = frozenset({"memory", "retrieve", "construct", "answer"})
"""`calls.stage` values whose prompts a method or the answer model writes or reads."""
_ID_KEY = re.compile(r"(^|_)ids?$")
_ANSWER_KEY = re.compile(r"(^|_)answers?$")


def meta_kind(key: str) -> str | None:
    """What a `gold_meta` key holds: "id" (`task_id`, `answer_session_ids`), "answer"
    (`adversarial_answer`, `superseded_answers`) or None (an annotation)."""
    if _ID_KEY.search(key):
        return "id"
    return "answer" if _ANSWER_KEY.search(key) else None


def _meta_strings(gold: Gold, kind: str) -> list[tuple[str, str]]:
    """(key, value) of the question's `gold_meta` strings of one kind (lists flattened)."""
    meta = json.loads(gold.gold_meta) if gold.gold_meta else {}
    return [(key, str(v)) for key, value in meta.items() if meta_kind(key) == kind
            for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)]


HEAD_CHARS = 4
"""Characters of an id's start that `ids_in` looks for before trying the pattern."""


def ids_in(text: str, ids: tuple[str, ...]) -> tuple[str, ...]:
    """The ids of `ids` that occur in `text` as whole tokens (not inside a longer word,
    number or identifier: "T001" is not in "T0012" nor in "T001_b"; an id inside a longer
    one, "answer_1" in "q7:answer_1:0", is found too).

    The pattern is tried only where an id's first `HEAD_CHARS` characters occur (found by
    `str.find`), not at every position of the text: every prompt of a guarded stage is
    scanned, and a prompt of 4,000 characters of rendered messages took 1,280 us at every
    position against 9 us this way with the 850 ids of a synthetic conversation, 510 against
    5 us with LoCoMo's 212 (`perf/bench_leak_scan.py`)."""
    heads, pattern = _id_scanner(ids)
    found: set[str] = set()
    for head in heads:
        at = text.find(head)
        while at >= 0:
            if match := pattern.match(text, at):
                found.add(match.group(1))
            at = text.find(head, at + 1)
    return tuple(sorted(found))


@lru_cache(maxsize=4096)  # a stage actor holds hundreds of questions at once
def _id_scanner(ids: tuple[str, ...]) -> tuple[tuple[str, ...], re.Pattern[str]]:
    """The distinct starts of `ids`, and any of `ids` as a whole token at a position, the
    longest first (a shorter one is tried when a longer one is not whole there)."""
    alternatives = "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))
    heads = tuple(sorted({i[:HEAD_CHARS] for i in ids}))
    return heads, re.compile(rf"(?<!\w)({alternatives})(?!\w)")


def gold_leaks(prompt_messages: list[dict[str, str]], context: str, shown_anyway: str,
               gold: Gold) -> list[str]:
    """Gold values a prompt shows outside its evidence context more often than
    `shown_anyway` does: the text the harness shows for this question whatever its gold (the
    question, and the instructions: a question that names its answer "beach" among two
    places does not leak it, a second "beach" does). Both are compared as whole words of the
    normalised text ("sage" is not in "message"); the context (none when empty) is taken
    out once, so a copy of it elsewhere in the prompt still counts."""
    text = " ".join(m["content"] for m in prompt_messages)
    outside = normalise(text.replace(context, " ", 1) if context else text)
    anyway = normalise(shown_anyway)
    found = []
    for label, value in _gold_values(gold):
        norm = normalise(value)
        if len(norm) >= _MIN_CHARS and _count(norm, outside) > _count(norm, anyway):
            found.append(f"{gold.qid}: gold {label} {value!r} in prompt")
    return found


def _count(words: str, text: str) -> int:
    """How often `words` occur in `text` as whole words (both normalised)."""
    return len(re.findall(rf"(?<!\S){re.escape(words)}(?!\S)", text))


def _gold_values(gold: Gold) -> list[tuple[str, str]]:
    # a choice answer is a letter, and an abstention answer is the protocol's own phrase,
    # which the answer instructions legitimately name
    values = [("answer", gold.answer)] if gold.answer and gold.answer_kind == "text" else []
    values += [("evidence id", e) for e in gold.evidence_ids]
    values += [(f"gold_meta.{k}", v) for k, v in _meta_strings(gold, "answer")]
    return values


def gold_strings(evidence: Mapping[str, Message], questions: Iterable[Question],
                 gold: Mapping[str, Gold]) -> dict[str, tuple[str, ...]]:
    """Per conversation, the gold-derived ids that no guarded prompt may contain: the source
    ids and source sessions of its questions' gold evidence (`evidence`: those messages,
    with their `meta`), the ids of its abstention questions, and their `gold_meta` values
    under an id key. Ids shorter than a few characters are left out (they match by
    chance)."""
    found: dict[str, set[str]] = defaultdict(set)
    for question in questions:
        g = gold[question.qid]
        strings = found[question.conv_id]
        for msg_id in g.evidence_ids:
            meta = json.loads(evidence[msg_id].meta or "{}") if msg_id in evidence else {}
            strings.update(str(meta[k]) for k in ("source_id", "source_session") if k in meta)
        if g.answer_kind == "abstention":
            strings.add(question.qid)
        strings.update(value for _, value in _meta_strings(g, "id"))
    return {conv: tuple(sorted(s for s in strings if len(s) > _MIN_CHARS))
            for conv, strings in found.items()}
