"""A second look at control negatives, independent of the control builder's rule
(`tmem_core.evaluation._controls`): dates read by dateutil, the side of a yes/no answer read
from the question's form, numbers compared as numbers, everything else by MiniLM's cosine
(which cannot see dates, numbers or a yes against a no, so those decide where both answers
hold them).

Its bounds, each on a principle rather than on the pairs it is run on:
- `SAME_MEANING` = 0.75: sentence-transformers' own bound for "same meaning"
  (`util.community_detection`'s default threshold, its paraphrase clustering);
- a date stands for the days it leaves open (dateutil parses it against two far-apart
  defaults: "August 2023" is all of August), `RELATIVE_DAYS` more either side when words
  around it make it relative or vague ("the week before", "around", "early");
- two dates agree when their intervals overlap, within the judges' tolerance of a day when
  one is a single day; two answers' numbers differ when none is within that tolerance of
  another.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import numpy as np
from dateutil import parser

SAME_MEANING = 0.75
RELATIVE_DAYS = 7
TOLERANCE_DAYS = 1
_RELATIVE = re.compile(r"\b(?:before|after|week|weekend|around|about|early|late|mid|few|ago|"
                       r"since|last|first)\b", re.IGNORECASE)
_POLAR_QUESTION = re.compile(r"^\W*(?:is|are|was|were|do|does|did|would|will|can|could|has|"
                             r"have|had|should)\b", re.IGNORECASE)
_DEFAULTS = (datetime(1, 1, 1), datetime(4, 12, 31))  # 4: a leap year, so 29 Feb parses
_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
_PARTS = re.compile(r"\s+(?:and|to|until|through|-|–)\s+", re.IGNORECASE)
_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                 "ten", "eleven", "twelve")


@dataclass(frozen=True)
class Pair:
    """A question, its gold answer and a negative control built for it."""

    question: str
    gold: str
    negative: str


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def date_interval(text: str) -> tuple[date, date] | None:
    """The days a dated answer leaves open, None without a year: from the first of its parts
    (split at "and", "to", a spaced dash) to the last, each part as dateutil reads it when the year
    it reads is written in that part, else from the first year written to the last."""
    years = sorted(int(y) for y in _YEAR.findall(text))
    if not years:
        return None
    ends = [end for part in _PARTS.split(text) for end in _read(part)]
    if not ends:
        ends = [date(years[0], 1, 1), date(years[-1], 12, 31)]
    widen = timedelta(days=RELATIVE_DAYS if _RELATIVE.search(text) else 0)
    return min(ends) - widen, max(ends) + widen


def _read(part: str) -> list[date]:
    """The first and last day dateutil leaves open in `part`, if it reads a year written there."""
    try:
        ends = sorted(parser.parse(part, fuzzy=True, default=d).date() for d in _DEFAULTS)
    except (ValueError, OverflowError):
        return []
    written = {int(y) for y in _YEAR.findall(part)}
    return ends if ends[0].year == ends[1].year and ends[0].year in written else []


def numbers(text: str) -> set[int]:
    """The whole numbers of an answer, in digits or words, years left out."""
    found = {int(n) for n in re.findall(r"\b\d+\b", _YEAR.sub(" ", text))}
    return found | {_NUMBER_WORDS.index(w) for w in _words(text) if w in _NUMBER_WORDS}


def side(answer: str) -> str | None:
    """"no" when the answer's first clause denies, "yes" when it affirms, else None."""
    words = _words(re.split(r"[;,.:]", answer, maxsplit=1)[0])
    if words & {"no", "not", "never", "nope"}:
        return "no"
    return "yes" if words & {"yes", "yeah", "yep"} else None


class SecondLook:
    """Which negatives a lenient judge could count as the gold, by rules of its own."""

    def __init__(self, encode: Callable[[Sequence[str]], np.ndarray]) -> None:
        self.encode = encode

    def accepted(self, pairs: Sequence[Pair]) -> list[str | None]:
        """Per pair, why it could be the gold ("contains", "same side", "same dates",
        "similar"), or None."""
        texts = sorted({t for p in pairs for t in (p.gold, p.negative)})
        vectors = dict(zip(texts, self.encode(texts), strict=True))
        return [self._why(p, float(vectors[p.gold] @ vectors[p.negative])) for p in pairs]

    @staticmethod
    def _why(pair: Pair, cosine: float) -> str | None:
        a, b = _words(pair.gold), _words(pair.negative)
        if not a or not b or a <= b or b <= a:
            return "contains"
        if _POLAR_QUESTION.match(pair.question):
            sides = side(pair.gold), side(pair.negative)
            if None not in sides:
                return "same side" if sides[0] == sides[1] else None
        x, y = date_interval(pair.gold), date_interval(pair.negative)
        if x is not None and y is not None:
            return "same dates" if _meet(x, y) else None
        counts = numbers(pair.gold), numbers(pair.negative)
        if all(counts) and all(abs(x - y) > TOLERANCE_DAYS for x in counts[0] for y in counts[1]):
            return None  # numbers that differ: what MiniLM cannot see decides
        return "similar" if cosine >= SAME_MEANING else None


def _meet(x: tuple[date, date], y: tuple[date, date]) -> bool:
    one_day = min(x[1] - x[0], y[1] - y[0]) == timedelta(0)
    slack = timedelta(days=TOLERANCE_DAYS if one_day else 0)
    return x[0] <= y[1] + slack and y[0] <= x[1] + slack
