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
they stand for (`tmem_core.evaluation._dates`: a day, a month, a year, a range, "the week
before X", "the week of X", "around X") overlapping (within the benchmark's tolerance in days
when one is a single day), a count within that tolerance, abstention against abstention.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache

from tmem_core.evaluation._dates import (
    COUNT,
    MONTHS,
    NUMBER_WORDS,
    DateMention,
    count_of,
    dates,
    same_count,
    same_date,
    spans,
)
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
    return same_date(candidate, gold, rules.tolerance_days) or same_count(
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
    return bool(dates(text)) or COUNT.search(text) is not None


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
_FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split()) | frozenset(MONTHS)
"""Words that carry no topic: function words, hedges, yes/no and the words of dates."""


@lru_cache(maxsize=65536)
def content_words(text: str) -> frozenset[str]:
    """The Porter stems of the words of `text` that carry its topic: dates and
    `_FUNCTION_WORDS` left out."""
    for d in reversed(dates(text)):
        text = text[:d.start] + " " + text[d.end:]
    return frozenset(_stem(w) for w in normalise(text).split() if w not in _FUNCTION_WORDS)



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


def _reformatted(d: DateMention, written: str) -> str:
    """A day date in another format: "5 July 2023" and ISO as "July 5, 2023", "July 5, 2023"
    as "5 July 2023"; months and years as written."""
    if d.granularity != "day":
        return written
    month = MONTHS[d.value.month - 1].capitalize()
    if re.match(r"[A-Za-z]", written):
        return f"{d.value.day} {month} {d.value.year}"
    return f"{month} {d.value.day}, {d.value.year}"


def _number_word(m: re.Match[str]) -> str:
    n = int(m.group(0))
    return NUMBER_WORDS[n] if n < len(NUMBER_WORDS) else m.group(0)


def shift_dates(answer: str) -> str:
    """The answer with every date moved earlier and every count raised, beyond any
    tolerance of a day (see the module docstring); unchanged when it holds neither."""
    days = DAY_SHIFT - 1 + max((span.days for span, made_of in spans(answer)
                                if all(d.granularity == "day" for d in made_of)), default=1)
    out, last = [], 0
    for d in dates(answer):
        out += [answer[last:d.start], _shifted(d, answer[d.start:d.end], days)]
        last = d.end
    return COUNT.sub(_raised, "".join([*out, answer[last:]]))


def _raised(m: re.Match[str]) -> str:
    """A count raised by `COUNT_SHIFT`, written as it was (digits or words)."""
    n = count_of(m) + COUNT_SHIFT
    written = str(n) if m["n"].isdigit() or n >= len(NUMBER_WORDS) else NUMBER_WORDS[n]
    return f"{written} {m['unit']}s"


def _shifted(d: DateMention, written: str, days: int) -> str:
    if d.granularity == "year":
        return str(d.value.year - YEAR_SHIFT)
    if d.granularity == "month":
        months = d.value.year * 12 + d.value.month - 1 - MONTH_SHIFT
        return f"{MONTHS[months % 12].capitalize()} {months // 12}"
    moved = d.value - timedelta(days=days)
    month = MONTHS[moved.month - 1].capitalize()
    if re.fullmatch(r"\d{4}-\d\d-\d\d", written):
        return moved.isoformat()
    if re.match(r"[A-Za-z]", written):
        return f"{month} {moved.day}, {moved.year}"
    return f"{moved.day} {month} {moved.year}"
