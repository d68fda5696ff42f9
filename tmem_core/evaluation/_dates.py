"""Dates and counts as answers write them, and the intervals of days they stand for: what
judge calibration compares a control with the gold by (`tmem_core.evaluation._controls`).

A date is read at the granularity it is written (a day, a month, a year), widened by the
phrase before it ("the week before X", "the week of X", "around X"); two dates joined as a
range ("between X and Y", "X to Y") are one interval. Counts are of days, weeks, months or
years ("18 days", "two weeks")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")
_MONTH = r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|" \
         r"aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DATE_FORMS = (  # most specific first; each match is (granularity, pattern)
    ("day", re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<mon>\d\d)-(?P<day>\d\d)\b")),
    ("day", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\.?,?\s+{_YEAR}\b", re.IGNORECASE)),
    ("day", re.compile(rf"\b{_MONTH}\.?\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE)),
    ("month", re.compile(rf"\b{_MONTH}\.?,?\s+{_YEAR}\b", re.IGNORECASE)),
    ("year", re.compile(rf"\b{_YEAR}\b")),
)
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                "nine", "ten", "eleven", "twelve")
COUNT = re.compile(rf"\b(?P<n>\d+|{'|'.join(NUMBER_WORDS)})\s+(?P<unit>day|week|month|year)s?\b",
                   re.IGNORECASE)


@dataclass(frozen=True)
class DateMention:
    """A date as written in a text: where, at which granularity, and its first day."""

    start: int
    end: int
    granularity: str  # day, month or year
    value: date


def dates(text: str) -> list[DateMention]:
    """The dates written in `text`, each at the granularity it is written."""
    found: list[DateMention] = []
    for granularity, pattern in _DATE_FORMS:
        for m in pattern.finditer(text):
            if any(d.start < m.end() and m.start() < d.end for d in found):
                continue
            value = _date_of(m.groupdict(), granularity)
            if value is not None:
                found.append(DateMention(m.start(), m.end(), granularity, value))
    return sorted(found, key=lambda d: d.start)


def _date_of(groups: dict[str, str | None], granularity: str) -> date | None:
    year, mon, name, day = (groups.get(k) for k in ("year", "mon", "month", "day"))
    month = int(mon) if mon else _month_number(name) if name else 1
    try:
        return date(int(year or 0), month, int(day) if granularity == "day" and day else 1)
    except ValueError:
        return None


def _month_number(name: str | None) -> int:
    prefix = (name or "").lower()[:3]
    return next(i for i, m in enumerate(MONTHS, 1) if m.startswith(prefix))


@dataclass(frozen=True)
class Interval:
    """The days a date phrase of an answer can mean, first and last included."""

    first: date
    last: date

    @property
    def days(self) -> int:
        return (self.last - self.first).days + 1

    def meets(self, other: Interval, tolerance_days: int) -> bool:
        """Whether the two overlap, within `tolerance_days` when either is a single day (the
        tolerance is for a day off by one: January and February do not meet)."""
        slack = timedelta(days=tolerance_days if min(self.days, other.days) == 1 else 0)
        return self.first <= other.last + slack and other.first <= self.last + slack


_UNIT_DAYS = {"day": 1, "week": 7, "weekend": 7, "fortnight": 14, "month": 31,
              **{d: 7 for d in ("monday", "tuesday", "wednesday", "thursday", "friday",
                                "saturday", "sunday")}}
_VAGUE = {"few": 7, "several": 7, "couple": 2, "some": 7}
_RELATIVE = re.compile(
    rf"\b(?:(?P<n>\d+|{'|'.join(NUMBER_WORDS)}|few|several|couple|some)\s+(?:of\s+)?)?"
    rf"(?P<unit>{'|'.join(_UNIT_DAYS)})s?\s+(?P<dir>before|after|prior\s+to|of)\s*$",
    re.IGNORECASE)
"""A phrase that makes the date after it relative: "the week before", "two weekends before",
"a few days after", "the Friday before", "the week of"."""
_HEDGE = re.compile(r"\b(?:around|about|approximately|roughly|circa|c\.)\s*$", re.IGNORECASE)
_RANGE = re.compile(r"^(?:-|–|—|to|until|till|through|and)$", re.IGNORECASE)
_RANGE_OPENER = re.compile(r"\b(?:between|from)\s*$", re.IGNORECASE)


def intervals(text: str) -> list[Interval]:
    """The intervals the dates of `text` stand for: a day, a month or a year as written,
    widened by the phrase before it ("the week before X": the seven days before X; "the
    week of X": six days either side; "around X": a week, a month or a year either side),
    two dates joined as a range ("between X and Y", "X to Y", "X - Y") as one."""
    return [span for span, _ in spans(text)]


def spans(text: str) -> list[tuple[Interval, tuple[DateMention, ...]]]:
    """Each interval of `text` (see `intervals`) with the one or two dates it is made of."""
    found, i = dates(text), 0
    out: list[tuple[Interval, tuple[DateMention, ...]]] = []
    while i < len(found):
        d, head = found[i], text[:found[i].start]
        nxt = found[i + 1] if i + 1 < len(found) else None
        joint = text[d.end:nxt.start].strip().lower() if nxt else ""
        if nxt and _RANGE.match(joint) and (joint != "and" or _RANGE_OPENER.search(head)):
            first, last = _written(d, head), _written(nxt, text[:nxt.start])
            out.append((Interval(min(first.first, last.first), max(first.last, last.last)),
                        (d, nxt)))
            i += 2
        else:
            out.append((_written(d, head), (d,)))
            i += 1
    return out


def _written(d: DateMention, head: str) -> Interval:
    """The interval of one date, with the relative or hedging phrase in `head` before it."""
    plain = _natural(d)
    if (m := _RELATIVE.search(head)) is not None:
        n = m["n"].lower() if m["n"] else "1"
        count = _VAGUE.get(n) or (NUMBER_WORDS.index(n) if n in NUMBER_WORDS else int(n))
        reach = timedelta(days=max(count, 1) * _UNIT_DAYS[m["unit"].lower()])
        direction = m["dir"].lower()
        if direction == "of":  # the week of X: the weeks that hold X
            return Interval(plain.first - reach + timedelta(days=1),
                            plain.last + reach - timedelta(days=1))
        if direction == "after":
            return Interval(plain.last + timedelta(days=1), plain.last + reach)
        return Interval(plain.first - reach, plain.first - timedelta(days=1))
    if _HEDGE.search(head):
        return _around(d, plain)
    return plain


def _around(d: DateMention, plain: Interval) -> Interval:
    """A hedged date ("around X"): a week, a calendar month or a year either side."""
    if d.granularity == "day":
        return Interval(plain.first - timedelta(days=7), plain.last + timedelta(days=7))
    if d.granularity == "year":
        return Interval(date(d.value.year - 1, 1, 1), date(d.value.year + 1, 12, 31))
    before = plain.first - timedelta(days=1)
    after = _natural(DateMention(0, 0, "month", plain.last + timedelta(days=1)))
    return Interval(before.replace(day=1), after.last)


def _natural(d: DateMention) -> Interval:
    """The days a date covers at its granularity."""
    if d.granularity == "day":
        return Interval(d.value, d.value)
    if d.granularity == "month":
        following = date(d.value.year + d.value.month // 12, d.value.month % 12 + 1, 1)
        return Interval(d.value, following - timedelta(days=1))
    return Interval(date(d.value.year, 1, 1), date(d.value.year, 12, 31))


def same_date(a: str, b: str, tolerance_days: int) -> bool:
    """Whether an interval of `a` meets one of `b` (`Interval.meets`)."""
    return any(x.meets(y, tolerance_days) for x in intervals(a) for y in intervals(b))


def same_count(a: str, b: str, tolerance: int) -> bool:
    """Whether `a` and `b` count the same unit within `tolerance`."""
    counts = [(count_of(m), m["unit"].lower()) for m in COUNT.finditer(a)]
    return any(unit == m["unit"].lower() and abs(n - count_of(m)) <= tolerance
               for n, unit in counts for m in COUNT.finditer(b))


def count_of(m: re.Match[str]) -> int:
    """The number of a `COUNT` match, written in digits or words."""
    n = m["n"].lower()
    return NUMBER_WORDS.index(n) if n in NUMBER_WORDS else int(n)
