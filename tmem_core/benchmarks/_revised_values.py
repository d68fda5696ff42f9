"""The values a revision chain may set a question's state to (Exp-5, A.5): values of the same
kind as the state's own, never a question's answer.

The kinds, tried in this order, the first that leaves a value wins:
1. the slot's vocabulary: the values the benchmark knows the state's slot can take (the
   synthetic set: its attribute's values, spares included; any benchmark: the values the
   question's own gold says the state held before it, `superseded_answers`);
2. a date for a date: the answer's date moved by whole weeks, written as the answer writes it;
3. a number for a number: the answer's first number scaled, the rest of the answer kept
   ("30 seconds" -> "45 seconds").
Every value that is a question's answer, or a whole phrase of one (compared normalised as
LoCoMo's scorer does), is dropped: a revision never reads as another question's answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from tmem_core.evaluation import SUPERSEDED_KEY, normalise
from tmem_core.schema import Gold

Vocabulary = Callable[[Gold], Sequence[str]]  # the values the state's slot can take
MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|"
          "December")
DATES: tuple[tuple[re.Pattern[str], str], ...] = (  # a date in an answer and its format
    (re.compile(r"\b\d{4}-\d{2}-\d{2}\b"), "%Y-%m-%d"),
    (re.compile(rf"\b\d{{1,2}} (?:{MONTHS}) \d{{4}}\b"), "%d %B %Y"),
    (re.compile(rf"\b(?:{MONTHS}) \d{{1,2}}, \d{{4}}\b"), "%B %d, %Y"),
)
WEEKS = (1, -1, 2, -2, 3, -3, 4, -4)
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
FACTORS = (1.5, 2.0, 0.5, 3.0, 0.75, 4.0, 1.25, 0.25)


@dataclass(frozen=True)
class Answers:
    """Every question's answer, normalised: what a revised value must never be."""

    normalised: frozenset[str]

    @classmethod
    def of(cls, golds: Iterable[Gold]) -> Answers:
        return cls(frozenset(n for g in golds if (n := normalise(g.answer or ""))))

    def taken(self, value: str) -> bool:
        """`value` is an answer or a whole phrase of one."""
        phrase = f" {normalise(value)} "
        return phrase.strip() == "" or any(phrase in f" {a} " for a in self.normalised)


def revision_candidates(gold: Gold, vocabulary: Vocabulary, answers: Answers) -> list[str]:
    """The values `gold`'s state may be revised to: of the first kind that has any."""
    answer = gold.answer or ""
    for kind in (vocabulary(gold), dates(answer), numbers(answer)):
        pool = [v for v in dict.fromkeys(kind) if v != answer and not answers.taken(v)]
        if pool:
            return pool
    return []


def superseded_values(gold: Gold) -> list[str]:
    """The values the question's gold says its state held before (its own slot's)."""
    meta = json.loads(gold.gold_meta) if gold.gold_meta else {}
    values = meta.get(SUPERSEDED_KEY) if isinstance(meta, dict) else None
    return [v for v in values if isinstance(v, str)] if isinstance(values, list) else []


def dates(answer: str) -> list[str]:
    """The answer with its first date moved by whole weeks, in the answer's own format."""
    for pattern, form in DATES:
        if (found := pattern.search(answer)) is None:
            continue
        day = datetime.strptime(found.group(), form)
        return [answer[:found.start()] + _written(day + timedelta(weeks=w), form)
                + answer[found.end():] for w in WEEKS]
    return []


def _written(day: datetime, form: str) -> str:
    """`day` in `form`, the day of the month unpadded where the answer writes words."""
    return day.strftime(form) if form == "%Y-%m-%d" else day.strftime(form).replace(
        day.strftime("%d"), str(day.day), 1)


def numbers(answer: str) -> list[str]:
    """The answer with its first number scaled (kept whole when it was, commas kept)."""
    if (found := NUMBER.search(answer)) is None:
        return []
    text = found.group()
    value = float(text.replace(",", ""))
    whole = "." not in text
    out = []
    for factor in FACTORS:
        scaled = round(value * factor) if whole else round(value * factor, 2)
        if scaled != value and scaled > 0:
            written = f"{scaled:,}" if "," in text else str(scaled)
            out.append(answer[:found.start()] + written + answer[found.end():])
    return out
