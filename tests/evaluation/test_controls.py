"""Calibration controls on the real LoCoMo file and on hand-made golds: no negative is
equivalent to its gold under the benchmark's rule, each kind applies where the data allows,
and everything is deterministic."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tmem_core.benchmarks import LoadRequest, build, get_protocol
from tmem_core.evaluation import normalise, says_not_available
from tmem_core.evaluation._controls import (
    KINDS,
    ControlPool,
    Rules,
    dates,
    equivalent,
    paraphrase,
    shift_dates,
)
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


def test_locomo_negatives_are_never_equivalent_to_their_gold(locomo_path: Path) -> None:
    pool, questions, gold = _pool("locomo", locomo_path)
    kinds: Counter[str] = Counter()
    for question in questions:
        g = gold[question.qid]
        for control in pool.controls(question, g):
            kinds[control.kind] += 1
            assert control.expected == KINDS[control.kind]
            if control.expected:
                continue
            if g.answer_kind == "abstention":  # the benchmark's rule: says it is not there
                assert not says_not_available(control.prediction), question.qid
                continue
            a, b = set(normalise(control.prediction).split()), set(normalise(g.answer).split())
            assert not (a <= b or b <= a), (question.qid, control)
            assert not {d.value for d in dates(control.prediction)} & {
                d.value for d in dates(g.answer or "")}, (question.qid, control)
    text = sum(gold[q.qid].answer_kind == "text" for q in questions)
    adversarial = sum(gold[q.qid].answer_kind == "abstention" for q in questions)
    temporal = sum(q.category == "temporal" for q in questions)
    assert kinds["gold"] == kinds["paraphrase"] == text + adversarial
    assert kinds["other"] == text  # a differing gold exists for every question
    assert kinds["made_up"] == adversarial  # LoCoMo states each one's adversarial answer
    # temporal golds that are dates or counts (most; others are "Seattle", "Yes")
    assert 0.8 * temporal <= kinds["shifted_date"] <= temporal
    assert kinds["superseded"] == kinds["choice_right"] == 0  # nothing in the data for them


def test_a_date_is_shifted_beyond_a_one_day_tolerance() -> None:
    for gold in ("5 July 2023", "July 5, 2023", "2023-07-05", "The week before 9 June 2023",
                 "May 2023", "2022", "18 days"):
        shifted = shift_dates(gold)
        assert shifted != gold and not equivalent(shifted, gold, PM_ONE_DAY), gold
    assert shift_dates("5 July 2023") == "26 June 2023"
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
