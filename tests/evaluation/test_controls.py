"""Calibration controls on the real LoCoMo file and on hand-made golds: negatives that a
second, independent look (`second_look.py`: dateutil, yes/no sides, MiniLM) does not take for
the gold, pairs the builder must never emit as negatives, each kind where the data allows,
and everything deterministic."""

from __future__ import annotations

import math
from collections import Counter
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from tests.evaluation.second_look import (
    SAME_MEANING,
    Pair,
    SecondLook,
    date_interval,
    numbers,
    side,
)
from tmem_core.benchmarks import LoadRequest, build, get_protocol
from tmem_core.evaluation import says_not_available
from tmem_core.evaluation._controls import (
    KINDS,
    ControlPool,
    Rules,
    equivalent,
    paraphrase,
    shift_dates,
)
from tmem_core.evaluation._dates import Interval, intervals
from tmem_core.retrieval import MiniLMEmbedder
from tmem_core.schema import Gold, Option, Question, gold_from_table, questions_from_table

PM_ONE_DAY = Rules(tolerance_days=1)


def _pool(prepared_name: str, source: Path) -> tuple[ControlPool, list[Question],
                                                     dict[str, Gold]]:
    prepared = build(prepared_name, LoadRequest(source=source))
    questions = questions_from_table(prepared.questions)
    gold = gold_from_table(prepared.questions)
    pool = ControlPool([(q, gold[q.qid]) for q in questions],
                       Rules.of(get_protocol(prepared_name)))
    return pool, questions, gold


def _by_chance(golds: list[tuple[Question, str]], vectors: dict[str, np.ndarray]) -> float:
    """The share of answer pairs from two conversations, same category, that MiniLM alone
    would call the same: what an arbitrary draw from another conversation gets."""
    plain = [(q, g) for q, g in golds if date_interval(g) is None and not numbers(g)
             and side(g) is None]
    v = np.stack([vectors[g] for _, g in plain])
    conv = np.array([q.conv_id for q, _ in plain])
    cat = np.array([q.category for q, _ in plain])
    apart = (conv[:, None] != conv[None, :]) & (cat[:, None] == cat[None, :])
    return float(((v @ v.T)[apart] >= SAME_MEANING).mean())


def _poisson_99(mean: float) -> int:
    """The least k with P(X <= k) >= 0.99 for X ~ Poisson(mean): sampling noise at chance."""
    k, term, total = 0, math.exp(-mean), math.exp(-mean)
    while total < 0.99:
        k += 1
        term *= mean / k
        total += term
    return k


def test_locomo_negatives_pass_a_second_look(locomo_path: Path) -> None:
    pool, questions, gold = _pool("locomo", locomo_path)
    conv = {q.qid: q.conv_id for q in questions}
    kinds: Counter[str] = Counter()
    pairs: list[Pair] = []
    for question in questions:
        g = gold[question.qid]
        for control in pool.controls(question, g):
            kinds[control.kind] += 1
            assert control.expected == KINDS[control.kind]
            if control.kind == "other":  # seven conversations: never the question's own
                assert conv[control.other_qid or ""] != question.conv_id, question.qid
            if control.expected:
                continue
            if g.answer_kind == "abstention":  # the benchmark's rule: says it is not there
                assert not says_not_available(control.prediction), question.qid
                continue
            pairs.append(Pair(question.question, g.answer or "", control.prediction))
    text = [(q, gold[q.qid].answer or "") for q in questions if gold[q.qid].answer_kind == "text"]
    texts = sorted({a for _, a in text} | {t for p in pairs for t in (p.gold, p.negative)})
    vectors = dict(zip(texts, MiniLMEmbedder().encode(texts), strict=True))
    look = SecondLook(lambda some: np.stack([vectors[t] for t in some]))
    why = Counter(r for r in look.accepted(pairs) if r is not None)
    # dates, yes/no sides, numbers and containment decide: no negative may agree
    assert set(why) <= {"similar"}, why
    # by MiniLM alone: no more often than for an arbitrary answer of another conversation
    assert why["similar"] <= _poisson_99(len(pairs) * _by_chance(text, vectors)), why
    adversarial = sum(gold[q.qid].answer_kind == "abstention" for q in questions)
    temporal = sum(q.category == "temporal" for q in questions)
    assert kinds["gold"] == kinds["paraphrase"] == len(text) + adversarial
    assert kinds["other"] == len(text)  # a differing gold exists for every question
    assert kinds["made_up"] == adversarial  # LoCoMo states each one's adversarial answer
    # temporal golds that are dates or counts (most; others are "Seattle", "Yes")
    assert 0.8 * temporal <= kinds["shifted_date"] <= temporal
    assert kinds["superseded"] == kinds["choice_right"] == 0  # nothing in the data for them


NEVER_NEGATIVE = [  # (question, gold, an answer the LoCoMo judge may count as that gold)
    ("Why does Maria think it's important for younger generations to visit military "
     "memorials?", "To remember and appreciate those who served",
     "Teaching them to respect and appreciate those who served"),
    ("What did Nate do while Joanna was on her road trip?", "Won a video game tournament",
     "Competing in video game tournaments"),
    ("Would Melanie go on another roadtrip soon?", "Likely no; since this one went badly",
     "No; she's in the process of adopting children."),
    ("When did Caroline encounter people on a hike and have a negative experience?",
     "The week before 25 August 2023", "24 August 2023"),
    ("Would Caroline pursue writing as a career option?",
     "LIkely no; though she likes reading, she wants to be a counselor",
     "Likely no, she does not refer to herself as part of it"),
    ("How did Melanie feel after the accident?", "Grateful and thankful for her family",
     "She was happy and thankful"),
    ("When did Caroline draw a self-portrait?", "The week before 23 August 2023",
     "The week before 25 August 2023"),
    ("When did Caroline apply to adoption agencies?", "The week of 23 August 2023",
     "The week before 25 August 2023"),
    ("When did Maria take up community work with her church friends?", "August 4, 2023",
     "The week before 9 August 2023"),
    ("When did Melanie go camping in July?", "two weekends before 17 July 2023",
     "The Tuesday before 20 July 2023"),
    ("When did James' mother and her friend visit him?", "October 19, 2022",
     "October 20, 2022"),  # a day off: within the judges' tolerance
    ("When did Audrey get into an accident in the park?", "between October 19 and 24, 2023",
     "October 21, 2023"),
    ("When did Jon start to go to the gym?", "between 1 March 2023 and 20 March 2023",
     "12 March, 2023"),
    ("When did Gina open her online clothing store?", "around 16 March, 2023",
     "20 March, 2023"),
    ("How long ago was Caroline's 18th birthday?", "10 years ago", "A few years ago"),
    ("Would Caroline likely have Dr. Seuss books on her bookshelf?",
     "Yes, since she collects classic children's books", "Likely yes"),
]
WRONG = {"yes": "Yes, she is supportive", "no": "No",
         "date": "19 January, 2021", "text": "Seattle"}
"""A plainly wrong answer of each type, from a third conversation."""


@pytest.mark.parametrize(("question", "gold", "candidate"), NEVER_NEGATIVE)
def test_the_builder_never_emits_an_equivalent_negative(question: str, gold: str,
                                                         candidate: str) -> None:
    kind = side(gold) or ("date" if date_interval(gold) else "text")
    wrong = WRONG["yes" if kind == "no" else "no" if kind == "yes" else kind]
    asked = [Question("conv-26", "conv-26:q1", question, "single-hop"),
             Question("conv-30", "conv-30:q1", "?", "single-hop"),
             Question("conv-41", "conv-41:q1", "?", "single-hop")]
    pool = ControlPool([(q, Gold(q.qid, a, (), "text")) for q, a in
                        zip(asked, (gold, candidate, wrong), strict=True)],
                       Rules.of(get_protocol("locomo")))
    for q, a in ((asked[0], gold), (asked[1], candidate)):
        other = [c for c in pool.controls(q, Gold(q.qid, a, (), "text")) if c.kind == "other"]
        assert [c.prediction for c in other] == [wrong], (a, other)


def _others(golds: dict[str, tuple[str, str]]) -> dict[str, list[str | None]]:
    """Per qid, where its `other` control came from (`golds`: qid -> category, answer)."""
    asked = {qid: Question(qid.split(":")[0], qid, f"{qid}?", category)
             for qid, (category, _) in golds.items()}
    gold = {qid: Gold(qid, answer, (), "text") for qid, (_, answer) in golds.items()}
    pool = ControlPool([(asked[qid], gold[qid]) for qid in golds], Rules())
    return {qid: [c.other_qid for c in pool.controls(asked[qid], gold[qid]) if c.kind == "other"]
            for qid in golds}


def test_other_comes_from_another_conversation_where_there_is_one() -> None:
    spread = _others({"conv-26:q1": ("single-hop", "Pottery"),
                      "conv-26:q2": ("single-hop", "Seattle"),
                      "conv-30:q1": ("single-hop", "Bowling"),
                      "conv-30:q2": ("single-hop", "Painting")})
    # another conversation, entered at the question's own place: draws are spread
    assert spread == {"conv-26:q1": ["conv-30:q1"], "conv-26:q2": ["conv-30:q2"],
                      "conv-30:q1": ["conv-26:q1"], "conv-30:q2": ["conv-26:q2"]}
    tiers = _others({"conv-26:q1": ("single-hop", "Pottery"),
                     "conv-26:q2": ("single-hop", "Seattle"),
                     "conv-30:q1": ("temporal", "19 January, 2023"),
                     "conv-30:q2": ("single-hop", "Painting")})
    # the same category in another conversation first, then any category there
    assert tiers["conv-26:q1"] == tiers["conv-26:q2"] == ["conv-30:q2"]
    assert tiers["conv-30:q1"] == ["conv-26:q1"]
    alone = _others({"conv-26:q1": ("single-hop", "Pottery"),
                     "conv-26:q2": ("single-hop", "Seattle")})
    assert alone == {"conv-26:q1": ["conv-26:q2"], "conv-26:q2": ["conv-26:q1"]}


def test_dates_are_the_intervals_they_stand_for() -> None:
    def days(text: str) -> list[tuple[date, date]]:
        return [(i.first, i.last) for i in intervals(text)]

    assert days("24 August 2023") == [(date(2023, 8, 24), date(2023, 8, 24))]
    assert days("The week before 25 August 2023") == [(date(2023, 8, 18), date(2023, 8, 24))]
    assert days("two weekends before 17 July 2023") == [(date(2023, 7, 3), date(2023, 7, 16))]
    assert days("The week of 23 August 2023") == [(date(2023, 8, 17), date(2023, 8, 29))]
    assert days("between 1 July 2023 and 20 July 2023") == [(date(2023, 7, 1),
                                                               date(2023, 7, 20))]
    assert days("June, 2023") == [(date(2023, 6, 1), date(2023, 6, 30))]
    assert days("around 2022") == [(date(2021, 1, 1), date(2023, 12, 31))]
    assert days("Paris and Rome") == []
    assert len(intervals("5 July 2023 and 20 July 2023")) == 2  # two dates, not a range
    assert not Interval(date(2023, 1, 1), date(2023, 1, 31)).meets(
        Interval(date(2023, 2, 1), date(2023, 2, 28)), 1)  # the tolerance is for a day


def test_the_whole_interval_is_shifted_beyond_a_one_day_tolerance() -> None:
    golds = ("5 July 2023", "July 5, 2023", "2023-07-05", "The week before 9 June 2023",
             "The week of 23 August 2023", "between 1 July 2023 and 20 July 2023",
             "around April 2, 2023", "May 2023", "2022", "18 days")
    shifted = [shift_dates(gold) for gold in golds]
    assert all(s != g and not equivalent(s, g, PM_ONE_DAY) for s, g in zip(shifted, golds,
                                                                              strict=True))
    look = SecondLook(lambda texts: np.eye(len(texts), dtype=np.float32))  # no MiniLM needed
    assert look.accepted([Pair("When?", g, s) for g, s in zip(golds, shifted,
                                                               strict=True)]) == [None] * 10
    assert shift_dates("5 July 2023") == "26 June 2023"
    # the interval ends nine days before the gold's starts, whatever its length
    assert shift_dates("The week before 25 August 2023") == "The week before 10 August 2023"
    assert shift_dates("between 1 July 2023 and 20 July 2023") == (
        "between 3 June 2023 and 22 June 2023")
    assert shift_dates("18 days") == "21 days"
    assert shift_dates("two weeks") == "five weeks" and shift_dates("1 month") == "4 months"
    assert shift_dates("Paris") == "Paris"  # no date: no shifted control
    # what the benchmark's rule would still count as the gold
    assert equivalent("6 July 2023", "5 July 2023", PM_ONE_DAY)
    assert equivalent("July 5, 2023", "5 July 2023", Rules())
    assert equivalent("19 days", "18 days", PM_ONE_DAY)
    assert equivalent("July 2023", "5 July 2023", Rules())  # containment
    assert not equivalent("7 July 2023", "5 July 2023", PM_ONE_DAY)


def test_a_paraphrase_keeps_the_facts_in_other_words() -> None:
    assert paraphrase("3 attempts", "q1") == paraphrase("3 attempts", "q1")  # deterministic
    assert "three attempts" in paraphrase("3 attempts", "q1")
    assert "July 5, 2023" in paraphrase("5 July 2023", "q2")
    assert "5 July 2023" in paraphrase("July 5, 2023", "q2")
    assert "$40k" in paraphrase("$40k", "q3") and "10:00" in paraphrase("10:00", "q3")
    assert len({paraphrase("weekly", f"q{i}").split(":")[0] for i in range(30)}) > 1


def _question(qid: str, category: str = "cat") -> Question:
    return Question(conv_id="c", qid=qid, question=f"{qid}?", category=category)


def test_kinds_from_hand_made_golds() -> None:
    update = Gold("q1", "weekly", (), "text",
                  gold_meta='{"superseded_answers": ["monthly", "biweekly"]}')
    choice = Gold("q2", "B", (), "choice",
                  options=(Option("A", "one"), Option("B", "two"), Option("C", "three")))
    unanswerable = Gold("q3", "No information available.", (), "abstention")
    other_abstention = Gold("q4", "No information available.", (), "abstention")
    same = Gold("q5", "every week: weekly", (), "text")  # contains the gold: equivalent
    pool = ControlPool([(_question(g.qid), g) for g in
                        (update, choice, unanswerable, other_abstention, same)],
                       Rules("No information available."))
    by_kind = {c.kind: c for c in pool.controls(_question("q1"), update)}
    assert by_kind["superseded"].prediction == "biweekly"  # the latest superseded value
    assert "other" not in by_kind  # the only other text gold contains this one
    letters = {c.kind: c.prediction for c in pool.controls(_question("q2"), choice)}
    assert letters == {"choice_right": "B", "choice_wrong": "C"}
    declined = {c.kind: c for c in pool.controls(_question("q3"), unanswerable)}
    assert set(declined) == {"gold", "paraphrase", "made_up"}
    assert declined["made_up"].other_qid == "q5"  # the next real answer, never an abstention
    assert not says_not_available(declined["made_up"].prediction)
