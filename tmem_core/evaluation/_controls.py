"""Judge calibration controls: answers whose verdict is known, built from a benchmark's own
questions before a judge's accuracy is believed. Pure: no LLM, no I/O, deterministic.

Control kinds, each where the question and the data allow (`KINDS`: expected verdict):

- `gold` (positive): the gold answer itself (an abstention question's: its gold text, else
  the benchmark's abstention phrase);
- `paraphrase` (positive): the gold answer reworded by rule: dates in another format
  ("5 July 2023" -> "July 5, 2023", ISO dates spelled out), whole numbers up to twelve as
  words ("3 attempts" -> "three attempts"), inside a carrier phrase chosen by a hash of the qid
  ("The answer: ...", "From the conversation: ...", "In short: ...");
- `other` (negative): another question's gold answer, the next by qid (wrapping) of the same
  category, else of any, that is not equivalent to this gold under the benchmark's rule;
- `superseded` (negative, knowledge-update questions): the latest superseded value alone,
  where the data states one (`gold_meta.superseded_answers`, oldest first);
- `shifted_date` (negative, temporal categories): every date of the gold moved beyond the
  benchmark's tolerance (days by `DAY_SHIFT`, months by `MONTH_SHIFT`, bare years by
  `YEAR_SHIFT`, earlier) and every count of days, weeks, months or years ("18 days", "two
  weeks") raised by `COUNT_SHIFT`;
- `made_up` (negative, abstention questions): a confident answer: the data's own
  (`gold_meta.adversarial_answer`, LoCoMo), else another question's non-abstention gold;
- `choice_right` (positive) and `choice_wrong` (negative, multiple choice): the right letter
  and the next option's.

No negative is equivalent to the gold under the benchmark's rule (`equivalent`): token
containment either way, a date agreeing at the coarser granularity (within the benchmark's
tolerance in days), a count within it, abstention against abstention.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from tmem_core.evaluation._metrics import normalise, says_not_available
from tmem_core.evaluation._protocols import Protocol
from tmem_core.schema import Gold, Question

POSITIVE, NEGATIVE = 1.0, 0.0
KINDS: dict[str, float] = {
    "gold": POSITIVE, "paraphrase": POSITIVE, "choice_right": POSITIVE,
    "other": NEGATIVE, "superseded": NEGATIVE, "shifted_date": NEGATIVE, "made_up": NEGATIVE,
    "choice_wrong": NEGATIVE}
"""Every control kind and the verdict a reliable judge gives it."""
CONTROLS_VERSION = 1
"""The builder's version: raise it with any change to how controls are made, so that no
verdict on a control of the old builder is reused (`Control.sha256`)."""
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
        self.qids = [q.qid for q, _ in self.pool]
        self.rules = rules

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
        """The next question by qid (wrapping) whose gold is a text answer not equivalent to
        `answer` (None: any text answer), of the same category first."""
        start = bisect.bisect_right(self.qids, question.qid)
        first: tuple[Question, Gold] | None = None
        for q, g in self.pool[start:] + self.pool[:start]:
            if first is not None and q.category != question.category:
                continue  # a fit of any category is known: only the same category can beat it
            if (q.qid == question.qid or g.answer_kind != "text" or not g.answer
                    or says_not_available(g.answer)
                    or (answer is not None and equivalent(g.answer, answer, self.rules))):
                continue
            if q.category == question.category:
                return q, g
            first = first or (q, g)
        return first

    def _superseded(self, gold: Gold) -> str | None:
        values = _meta(gold).get(SUPERSEDED_KEY)
        stated = [v for v in values if isinstance(v, str)] if isinstance(values, list) else []
        fits = [v for v in stated if not equivalent(v, gold.answer or "", self.rules)]
        return fits[-1] if fits else None


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
    """Whether the benchmark's rule could count `candidate` as the gold answer: token
    containment either way, a date or count the gold's within tolerance, or both saying
    the information is not available."""
    if says_not_available(candidate) and says_not_available(gold):
        return True
    a, b = set(normalise(candidate).split()), set(normalise(gold).split())
    if not a or not b or a <= b or b <= a:
        return True
    return _same_date(candidate, gold, rules.tolerance_days) or _same_count(
        candidate, gold, rules.tolerance_days)


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


def _same_date(a: str, b: str, tolerance_days: int) -> bool:
    return any(_agree(x, y, tolerance_days) for x in dates(a) for y in dates(b))


def _agree(x: _Date, y: _Date, tolerance_days: int) -> bool:
    """Equal at the coarser of the two granularities (within tolerance for two days)."""
    coarse = {x.granularity, y.granularity}
    if "year" in coarse:
        return x.value.year == y.value.year
    if "month" in coarse:
        return (x.value.year, x.value.month) == (y.value.year, y.value.month)
    return abs((x.value - y.value).days) <= tolerance_days


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
    out, last = [], 0
    for d in dates(answer):
        out += [answer[last:d.start], _shifted(d, answer[d.start:d.end])]
        last = d.end
    return _COUNT.sub(_raised, "".join([*out, answer[last:]]))


def _raised(m: re.Match[str]) -> str:
    """A count raised by `COUNT_SHIFT`, written as it was (digits or words)."""
    n = _count(m) + COUNT_SHIFT
    written = str(n) if m["n"].isdigit() or n >= len(_NUMBER_WORDS) else _NUMBER_WORDS[n]
    return f"{written} {m['unit']}s"


def _shifted(d: _Date, written: str) -> str:
    if d.granularity == "year":
        return str(d.value.year - YEAR_SHIFT)
    if d.granularity == "month":
        months = d.value.year * 12 + d.value.month - 1 - MONTH_SHIFT
        return f"{_MONTHS[months % 12].capitalize()} {months // 12}"
    moved = d.value - timedelta(days=DAY_SHIFT)
    month = _MONTHS[moved.month - 1].capitalize()
    if re.fullmatch(r"\d{4}-\d\d-\d\d", written):
        return moved.isoformat()
    if re.match(r"[A-Za-z]", written):
        return f"{month} {moved.day}, {moved.year}"
    return f"{moved.day} {month} {moved.year}"
