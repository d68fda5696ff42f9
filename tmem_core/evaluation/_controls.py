"""Judge calibration controls: answers whose verdict is known, built from a benchmark's own
questions before a judge's accuracy is believed. Pure: no LLM, no I/O, deterministic.

Control kinds, each where the question and the data allow (`KINDS`: expected verdict):

- `gold` (positive): the gold answer itself (an abstention question's: its gold text, else
  the benchmark's abstention phrase);
- `paraphrase` (positive): the gold answer reworded by rule: dates in another format
  ("5 July 2023" -> "July 5, 2023", ISO dates spelled out), whole numbers up to twelve as
  words ("3 attempts" -> "three attempts"), inside a carrier phrase chosen by a hash of the qid
  ("The answer: ...", "From the conversation: ...", "In short: ...");
- `other` (negative): another question's gold answer, from another conversation where the
  benchmark has several: of another conversation and the same category, else of another
  conversation, else of the same conversation, the first in an order that spreads the draws
  (`ControlPool._candidates`); never equivalent to this gold and never on its topic
  (`related`: a shared content word, a yes/no answer against one that takes no side, a
  vague time against a date, count or vague time);
- `superseded` (negative, knowledge-update questions): the latest superseded value alone,
  where the data states one (`gold_meta.superseded_answers`, oldest first);
- `shifted_date` (negative, temporal categories): every date of the gold moved earlier, day
  dates so far that each interval they stand for ("24 August 2023", "the week before 25
  August 2023", "between 1 July 2023 and 9 July 2023") ends `DAY_SHIFT` days before the
  gold's starts, months by `MONTH_SHIFT`, bare years by `YEAR_SHIFT`, and every count of
  days, weeks, months or years ("18 days", "two weeks") raised by `COUNT_SHIFT`; not made
  when the result still agrees with the gold within the benchmark's tolerance;
- `made_up` (negative, abstention questions): a confident answer: the data's own
  (`gold_meta.adversarial_answer`, LoCoMo), else another question's non-abstention gold
  (chosen as `other` is);
- `choice_right` (positive) and `choice_wrong` (negative, multiple choice): the right letter
  and the next option's.

No negative is equivalent to the gold under the benchmark's rule (`equivalent`): token
containment either way, a yes/no answer on the same side, dates compared as the intervals
they stand for (a day, a month, a year, a range, "the week before X", "the week of X",
"around X") overlapping (within the benchmark's tolerance in days when one is a single day),
a count within that tolerance, abstention against abstention.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from functools import lru_cache

from tmem_core.evaluation._metrics import _stem, normalise, says_not_available
from tmem_core.evaluation._protocols import Protocol
from tmem_core.schema import Gold, Question

POSITIVE, NEGATIVE = 1.0, 0.0
KINDS: dict[str, float] = {
    "gold": POSITIVE, "paraphrase": POSITIVE, "choice_right": POSITIVE,
    "other": NEGATIVE, "superseded": NEGATIVE, "shifted_date": NEGATIVE, "made_up": NEGATIVE,
    "choice_wrong": NEGATIVE}
"""Every control kind and the verdict a reliable judge gives it."""
CONTROLS_VERSION = 2
"""The builder's version (2: `other` from another conversation, dates as intervals): raise
it with any change to how controls are made, so that no verdict on a control of the old
builder is reused (`Control.sha256`)."""
DAY_SHIFT, MONTH_SHIFT, YEAR_SHIFT, COUNT_SHIFT = 9, 3, 3, 3
CARRIERS = ("The answer: {}.", "From the conversation: {}.", "In short: {}.")
SUPERSEDED_KEY, ADVERSARIAL_KEY = "superseded_answers", "adversarial_answer"

_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
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
_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                 "nine", "ten", "eleven", "twelve")
_COUNT = re.compile(rf"\b(?P<n>\d+|{'|'.join(_NUMBER_WORDS)})\s+(?P<unit>day|week|month|year)s?\b",
                    re.IGNORECASE)
"""A count of days, weeks, months or years ("18 days", "two weeks")."""
_SMALL_NUMBER = re.compile(r"(?<![\w.,:$/-])\d{1,2}(?![\w:/%-]|[.,]\d)")
"""A whole number standing alone (not in 3.5, 10:00, $40k, 5%, 2-3)."""


@dataclass(frozen=True)
class Control:
    """One control answer: its kind, the prediction the judge scores, the expected verdict
    and, for `other` and `made_up`, the question it was taken from."""

    kind: str
    prediction: str
    expected: float
    other_qid: str | None = None

    @property
    def sha256(self) -> str:
        """The control's identity for reuse: its kind, text, expected verdict and source
        question under `CONTROLS_VERSION`."""
        text = json.dumps([CONTROLS_VERSION, self.kind, self.prediction, self.expected,
                           self.other_qid])
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Rules:
    """What a benchmark's own rule needs: its abstention phrase, temporal categories and how
    many days a date may be off and still count (LongMemEval, EverMemBench: 1)."""

    abstention_phrase: str | None = None
    temporal_categories: frozenset[str] = frozenset()
    tolerance_days: int = 0

    @classmethod
    def of(cls, protocol: Protocol) -> Rules:
        return cls(protocol.abstention_phrase, protocol.temporal_categories,
                   protocol.date_tolerance_days)


class ControlPool:
    """The controls of a benchmark's questions (`pool`: every question with its gold)."""

    def __init__(self, pool: Sequence[tuple[Question, Gold]], rules: Rules) -> None:
        self.pool = sorted(pool, key=lambda item: item[0].qid)
        self.rules = rules
        self.conversations: dict[str, list[tuple[Question, Gold]]] = {}
        self.categories: dict[tuple[str, str], list[tuple[Question, Gold]]] = {}
        for item in self.pool:
            self.conversations.setdefault(item[0].conv_id, []).append(item)
            self.categories.setdefault((item[0].conv_id, item[0].category), []).append(item)

    def controls(self, question: Question, gold: Gold) -> list[Control]:
        """Every control kind that applies to the question, in `KINDS` order."""
        if gold.answer_kind == "choice" and gold.options:
            return _choice(gold)
        if gold.answer_kind == "abstention":
            return self._abstention(question, gold)
        if not gold.answer:
            return []
        out = [Control("gold", gold.answer, POSITIVE),
               Control("paraphrase", paraphrase(gold.answer, question.qid), POSITIVE)]
        if (other := self._other(question, gold.answer)) is not None:
            out.append(Control("other", other[1].answer or "", NEGATIVE, other[0].qid))
        if (old := self._superseded(gold)) is not None:
            out.append(Control("superseded", old, NEGATIVE))
        if question.category in self.rules.temporal_categories:
            shifted = shift_dates(gold.answer)
            if shifted != gold.answer and not equivalent(shifted, gold.answer, self.rules):
                out.append(Control("shifted_date", shifted, NEGATIVE))
        return out

    def _abstention(self, question: Question, gold: Gold) -> list[Control]:
        declined = gold.answer or self.rules.abstention_phrase
        if not declined:
            return []
        out = [Control("gold", declined, POSITIVE),
               Control("paraphrase", paraphrase(declined, question.qid), POSITIVE)]
        stated = _meta(gold).get(ADVERSARIAL_KEY)
        if isinstance(stated, str) and stated.strip() and not says_not_available(stated):
            out.append(Control("made_up", stated, NEGATIVE))
        elif (other := self._other(question, None)) is not None:
            out.append(Control("made_up", other[1].answer or "", NEGATIVE, other[0].qid))
        return out

    def _other(self, question: Question, answer: str | None
               ) -> tuple[Question, Gold] | None:
        """The first of `_candidates` in the best tier that has one whose gold is a text
        answer neither equivalent nor related to `answer` (None: any text answer). Tiers:
        another conversation and the same category, another conversation, the same
        conversation and category, the same conversation."""
        best: tuple[int, tuple[Question, Gold]] | None = None
        for q, g in self._candidates(question):
            tier = 2 * (q.conv_id == question.conv_id) + (q.category != question.category)
            if (best is not None and tier >= best[0]) or not self._fits(q, g, question, answer):
                continue
            best = tier, (q, g)
            if tier == 0:
                break
        return best[1] if best else None

    def _candidates(self, question: Question) -> list[tuple[Question, Gold]]:
        """Every question in a deterministic order that spreads the draws: the other
        conversations from the next one by id (wrapping), each by its questions of this
        question's category entered at this question's rank among its own conversation's
        (the i-th looks from the i-th on, wrapping), then all its questions entered at this
        question's place; last this conversation's questions after this one (wrapping)."""
        names = sorted(self.conversations)
        at = bisect.bisect_left(names, question.conv_id)
        own = self.conversations.get(question.conv_id, [])
        place = _rank(own, question.qid)
        rank = _rank(self.categories.get((question.conv_id, question.category), []), question.qid)
        out: list[tuple[Question, Gold]] = []
        for name in names[at:] + names[:at]:
            if name != question.conv_id:
                out += _rotated(self.categories.get((name, question.category), []), rank)
                out += _rotated(self.conversations[name], place)
        after = bisect.bisect_right([q.qid for q, _ in own], question.qid)
        return out + _rotated(own, after)

    def _fits(self, q: Question, g: Gold, question: Question, answer: str | None) -> bool:
        """Whether `g` may be the `other` (or `made_up`) control of `question`."""
        if (q.qid == question.qid or g.answer_kind != "text" or not g.answer
                or says_not_available(g.answer)):
            return False
        return answer is None or not (equivalent(g.answer, answer, self.rules)
                                      or related(g.answer, answer))

    def _superseded(self, gold: Gold) -> str | None:
        values = _meta(gold).get(SUPERSEDED_KEY)
        stated = [v for v in values if isinstance(v, str)] if isinstance(values, list) else []
        fits = [v for v in stated if not equivalent(v, gold.answer or "", self.rules)]
        return fits[-1] if fits else None


def _rank(rows: list[tuple[Question, Gold]], qid: str) -> int:
    """Where `qid` stands (or would) among `rows`, sorted by qid."""
    return bisect.bisect_left([q.qid for q, _ in rows], qid)


def _rotated(rows: list[tuple[Question, Gold]], start: int) -> list[tuple[Question, Gold]]:
    """`rows` from `start` (modulo their number) on, wrapping."""
    start = start % len(rows) if rows else 0
    return rows[start:] + rows[:start]


def _choice(gold: Gold) -> list[Control]:
    labels = [o.label for o in gold.options or ()]
    right = (gold.answer or "").strip().upper()
    if right not in labels or len(labels) < 2:
        return []
    wrong = labels[(labels.index(right) + 1) % len(labels)]
    return [Control("choice_right", right, POSITIVE), Control("choice_wrong", wrong, NEGATIVE)]


def _meta(gold: Gold) -> dict[str, object]:
    meta = json.loads(gold.gold_meta) if gold.gold_meta else {}
    return meta if isinstance(meta, dict) else {}


# -- equivalence under a benchmark's rule ---------------------------------------------------

def equivalent(candidate: str, gold: str, rules: Rules) -> bool:
    """Whether the benchmark's rule could count `candidate` as the gold answer: both saying
    the information is not available, two yes/no answers on the same side, token
    containment either way, dates whose intervals overlap within tolerance, or a count
    within it."""
    if says_not_available(candidate) and says_not_available(gold):
        return True
    sides = polarity(candidate), polarity(gold)
    if None not in sides:
        return sides[0] == sides[1]
    a, b = set(normalise(candidate).split()), set(normalise(gold).split())
    if not a or not b or a <= b or b <= a:
        return True
    return _same_date(candidate, gold, rules.tolerance_days) or _same_count(
        candidate, gold, rules.tolerance_days)


def related(candidate: str, gold: str) -> bool:
    """Whether `candidate` may be on the gold's topic, which a lenient judge ("touches on the
    same topic", LoCoMo's) may count: a yes/no answer against one that takes no side; a
    content word in common (Porter stems, dates and function words left out); or a vague
    time, no content word and no date or count ("A few years ago"), against a date, a count
    or another vague time. Two yes/no answers are never related: their sides decide
    (`equivalent`)."""
    sides = polarity(candidate), polarity(gold)
    if None not in sides:
        return False
    if sides != (None, None):
        return True
    a, b = content_words(candidate), content_words(gold)
    for vague, other, words in ((candidate, gold, b), (gold, candidate, a)):
        if not content_words(vague) and not _dated(vague):
            return _dated(other) or not words
    return bool(a & b)


def _dated(text: str) -> bool:
    """Whether `text` holds a date or a count of days, weeks, months or years."""
    return bool(dates(text)) or _COUNT.search(text) is not None


_POLAR = re.compile(r"^\W*(?:(?:most\s+|very\s+)?(?:likely|probably|possibly|perhaps|maybe|"
                    r"definitely|certainly)[\s,;:]+)?(?P<side>yes|no)\b", re.IGNORECASE)


def polarity(answer: str) -> str | None:
    """"yes" or "no" when the answer opens with that side ("Likely no; ...", "Yes, ..."), else
    None (an abstention takes no side)."""
    if says_not_available(answer):
        return None
    m = _POLAR.match(answer)
    return m["side"].lower() if m else None


_FUNCTION_TEXT = """
a an the and or but nor so yet if then than as of in on at to for from by with without into
onto upon about above below over under after before during since until till through between
among around near off out up down i me my mine we us our you your he him his she her hers it
its they them their theirs this that these those there here who whom whose which what when
where why how is are was were be been being am do does did done doing have has had having
will would shall should can could may might must not no yes also too very just only even
still some any all each every both either neither more most much many few several other
another such same own likely probably possibly perhaps maybe definitely certainly really
because while although though whether shes hes theyre im ive id youre thats theres
day days week weeks weekend weekends month months year years ago last first next early late
mid monday tuesday wednesday thursday friday saturday sunday today yesterday tomorrow
"""
_FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split()) | frozenset(_MONTHS)
"""Words that carry no topic: function words, hedges, yes/no and the words of dates."""


@lru_cache(maxsize=65536)
def content_words(text: str) -> frozenset[str]:
    """The Porter stems of the words of `text` that carry its topic: dates and
    `_FUNCTION_WORDS` left out."""
    for d in reversed(dates(text)):
        text = text[:d.start] + " " + text[d.end:]
    return frozenset(_stem(w) for w in normalise(text).split() if w not in _FUNCTION_WORDS)


@dataclass(frozen=True)
class _Date:
    start: int
    end: int
    granularity: str  # day, month or year
    value: date


def dates(text: str) -> list[_Date]:
    """The dates written in `text`, each at the granularity it is written."""
    found: list[_Date] = []
    for granularity, pattern in _DATE_FORMS:
        for m in pattern.finditer(text):
            if any(d.start < m.end() and m.start() < d.end for d in found):
                continue
            value = _date_of(m.groupdict(), granularity)
            if value is not None:
                found.append(_Date(m.start(), m.end(), granularity, value))
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
    return next(i for i, m in enumerate(_MONTHS, 1) if m.startswith(prefix))


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
    rf"\b(?:(?P<n>\d+|{'|'.join(_NUMBER_WORDS)}|few|several|couple|some)\s+(?:of\s+)?)?"
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
    return [span for span, _ in _spans(text)]


def _spans(text: str) -> list[tuple[Interval, tuple[_Date, ...]]]:
    """Each interval of `text` (see `intervals`) with the one or two dates it is made of."""
    found, i = dates(text), 0
    out: list[tuple[Interval, tuple[_Date, ...]]] = []
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


def _written(d: _Date, head: str) -> Interval:
    """The interval of one date, with the relative or hedging phrase in `head` before it."""
    plain = _natural(d)
    if (m := _RELATIVE.search(head)) is not None:
        n = m["n"].lower() if m["n"] else "1"
        count = _VAGUE.get(n) or (_NUMBER_WORDS.index(n) if n in _NUMBER_WORDS else int(n))
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


def _around(d: _Date, plain: Interval) -> Interval:
    """A hedged date ("around X"): a week, a calendar month or a year either side."""
    if d.granularity == "day":
        return Interval(plain.first - timedelta(days=7), plain.last + timedelta(days=7))
    if d.granularity == "year":
        return Interval(date(d.value.year - 1, 1, 1), date(d.value.year + 1, 12, 31))
    before = plain.first - timedelta(days=1)
    after = _natural(_Date(0, 0, "month", plain.last + timedelta(days=1)))
    return Interval(before.replace(day=1), after.last)


def _natural(d: _Date) -> Interval:
    """The days a date covers at its granularity."""
    if d.granularity == "day":
        return Interval(d.value, d.value)
    if d.granularity == "month":
        following = date(d.value.year + d.value.month // 12, d.value.month % 12 + 1, 1)
        return Interval(d.value, following - timedelta(days=1))
    return Interval(date(d.value.year, 1, 1), date(d.value.year, 12, 31))


def _same_date(a: str, b: str, tolerance_days: int) -> bool:
    return any(x.meets(y, tolerance_days) for x in intervals(a) for y in intervals(b))


def _same_count(a: str, b: str, tolerance: int) -> bool:
    counts = [(_count(m), m["unit"].lower()) for m in _COUNT.finditer(a)]
    return any(unit == m["unit"].lower() and abs(n - _count(m)) <= tolerance
               for n, unit in counts for m in _COUNT.finditer(b))


def _count(m: re.Match[str]) -> int:
    n = m["n"].lower()
    return _NUMBER_WORDS.index(n) if n in _NUMBER_WORDS else int(n)


# -- rewritten answers ----------------------------------------------------------------------

def paraphrase(answer: str, qid: str) -> str:
    """The answer reworded by rule (see the module docstring): the same facts, other words."""
    text = answer.strip().rstrip(".")
    out, last = [], 0
    for d in dates(text):  # numbers as words outside dates, dates in another format
        out += [_SMALL_NUMBER.sub(_number_word, text[last:d.start]),
                _reformatted(d, text[d.start:d.end])]
        last = d.end
    reworded = "".join([*out, _SMALL_NUMBER.sub(_number_word, text[last:])])
    carrier = CARRIERS[hashlib.blake2b(qid.encode(), digest_size=2).digest()[0] % len(CARRIERS)]
    return carrier.format(reworded)


def _reformatted(d: _Date, written: str) -> str:
    """A day date in another format: "5 July 2023" and ISO as "July 5, 2023", "July 5, 2023"
    as "5 July 2023"; months and years as written."""
    if d.granularity != "day":
        return written
    month = _MONTHS[d.value.month - 1].capitalize()
    if re.match(r"[A-Za-z]", written):
        return f"{d.value.day} {month} {d.value.year}"
    return f"{month} {d.value.day}, {d.value.year}"


def _number_word(m: re.Match[str]) -> str:
    n = int(m.group(0))
    return _NUMBER_WORDS[n] if n < len(_NUMBER_WORDS) else m.group(0)


def shift_dates(answer: str) -> str:
    """The answer with every date moved earlier and every count raised, beyond any
    tolerance of a day (see the module docstring); unchanged when it holds neither."""
    days = DAY_SHIFT - 1 + max((span.days for span, made_of in _spans(answer)
                                if all(d.granularity == "day" for d in made_of)), default=1)
    out, last = [], 0
    for d in dates(answer):
        out += [answer[last:d.start], _shifted(d, answer[d.start:d.end], days)]
        last = d.end
    return _COUNT.sub(_raised, "".join([*out, answer[last:]]))


def _raised(m: re.Match[str]) -> str:
    """A count raised by `COUNT_SHIFT`, written as it was (digits or words)."""
    n = _count(m) + COUNT_SHIFT
    written = str(n) if m["n"].isdigit() or n >= len(_NUMBER_WORDS) else _NUMBER_WORDS[n]
    return f"{written} {m['unit']}s"


def _shifted(d: _Date, written: str, days: int) -> str:
    if d.granularity == "year":
        return str(d.value.year - YEAR_SHIFT)
    if d.granularity == "month":
        months = d.value.year * 12 + d.value.month - 1 - MONTH_SHIFT
        return f"{_MONTHS[months % 12].capitalize()} {months // 12}"
    moved = d.value - timedelta(days=days)
    month = _MONTHS[moved.month - 1].capitalize()
    if re.fullmatch(r"\d{4}-\d\d-\d\d", written):
        return moved.isoformat()
    if re.match(r"[A-Za-z]", written):
        return f"{month} {moved.day}, {moved.year}"
    return f"{moved.day} {month} {moved.year}"
