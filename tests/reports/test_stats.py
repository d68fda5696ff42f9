"""The report's statistics against hand computations: Wilson's interval, the two-stage
bootstrap on the recorded seed (both ways it draws), the cluster bootstrap over conversations,
exact McNemar, the sign-flip test."""

from __future__ import annotations

import dataclasses
import math
from itertools import product

import numpy as np
import pytest

from tmem_core.reports import _stats as stats


def test_wilson_matches_the_published_values() -> None:
    two_of_three = stats.wilson(2, 3)  # Wilson (1927); e.g. Newcombe (1998), table I
    assert (two_of_three.low, two_of_three.high) == pytest.approx((0.2077, 0.9385), abs=1e-4)
    none_of_ten = stats.wilson(0, 10)
    assert (none_of_ten.low, none_of_ten.high) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert stats.wilson(0, 0) == stats.NO_INTERVAL


@pytest.mark.parametrize(("successes", "n", "low", "high"), [
    (81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718)])  # Newcombe (1998), table II, method 3 (score, no correction)
def test_wilson_matches_newcombes_table(successes: int, n: int, low: float, high: float
                                        ) -> None:
    found = stats.wilson(successes, n)
    assert (found.low, found.high) == pytest.approx((low, high), abs=5e-5)


@pytest.mark.parametrize("n", range(1, 40))
def test_wilson_holds_an_estimate_of_none_or_all(n: int) -> None:
    """0 of 3 would otherwise start at 5.6e-17 (matplotlib refuses the negative error bar)."""
    assert stats.wilson(0, n).low == 0.0
    assert stats.wilson(n, n).high == 1.0


def test_wilson_for_a_proportion_the_bootstrap_otherwise() -> None:
    assert stats.interval([[1.0], [0.0], [1.0]]).method == stats.WILSON
    assert stats.interval([[1.0], [0.5], [1.0]]).method == stats.BOOTSTRAP  # an F1
    assert stats.interval([[1.0, 0.0], [1.0, 1.0]]).method == stats.BOOTSTRAP  # repeats
    assert stats.interval([[1.0]]).method == stats.WILSON
    assert stats.interval([[0.5]]) == stats.NO_INTERVAL  # one question: nothing to resample
    assert stats.interval([]) == stats.NO_INTERVAL


def _quantiles(draws: np.ndarray) -> tuple[float, float]:
    low, high = np.quantile(draws, [0.025, 0.975])
    return float(low), float(high)


def test_the_bootstrap_by_type_matches_a_hand_computation() -> None:
    # three questions with two repeats each: types (0, 0), (0, 1) and (1, 1), twice (1, 1)
    values = [[1.0, 1.0], [0.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    rng = np.random.default_rng(stats.SEED)
    copies = rng.multinomial(4, [1 / 4, 1 / 4, 2 / 4], stats.RESAMPLES)
    ones = rng.multinomial(copies[:, 1] * 2, [0.5, 0.5])[:, 1]  # draws within (0, 1)
    means = (copies[:, 2] * 1.0 + ones / 2) / 4
    found = stats.bootstrap_interval(values)
    assert (found.low, found.high) == _quantiles(means)
    assert (found.method, found.seed, found.resamples) == (stats.BOOTSTRAP, stats.SEED,
                                                           stats.RESAMPLES)


def test_the_bootstrap_by_index_matches_a_hand_computation(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setattr(stats, "TYPE_LIMIT", 0)
    values = [[1.0, 0.0, 1.0], [0.25], [0.0, 1.0]]
    ordered = [[0.0, 1.0], [0.0, 1.0, 1.0], [0.25]]  # questions in sorted order of values
    rng = np.random.default_rng(stats.SEED)
    questions = rng.integers(0, 3, (stats.RESAMPLES, 3))
    within = rng.random((stats.RESAMPLES, 3, 3))
    means = []
    for row in range(stats.RESAMPLES):
        picked = []
        for j, q in enumerate(questions[row]):
            own = ordered[q]
            picked.append(sum(own[int(u * len(own))] for u in within[row, j, :len(own)])
                          / len(own))
        means.append(sum(picked) / 3)
    found = stats.bootstrap_interval(values)
    assert (found.low, found.high) == pytest.approx(_quantiles(np.array(means)), abs=1e-12)


def test_both_ways_of_drawing_give_one_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    values = [list(map(float, rng.random(3) < p)) for p in rng.random(300)]
    by_type = stats._resampled([values], np.random.default_rng(1))[0]
    monkeypatch.setattr(stats, "TYPE_LIMIT", 0)
    by_index = stats._resampled([values], np.random.default_rng(1))[0]
    assert by_type.mean() == pytest.approx(by_index.mean(), abs=0.003)
    assert by_type.std() == pytest.approx(by_index.std(), rel=0.08)
    # and the spread covers both stages: wider than questions alone, about as the theory says
    means = np.array([np.mean(v) for v in values])
    within = np.mean([np.var(v) / len(v) for v in values])
    expected = math.sqrt((means.var() + within) / len(values))
    assert by_type.std() == pytest.approx(expected, rel=0.08)


def test_identical_runs_differ_by_zero() -> None:
    values = [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [0.5, 1.0]]
    same = stats.paired(values, values)
    assert same.diff == 0.0 and same.p_value == 1.0 and same.test == stats.SIGN_FLIP
    assert same.interval.low is not None and same.interval.high is not None
    assert same.interval.low <= 0.0 <= same.interval.high
    binary = stats.paired([[1.0], [0.0]], [[1.0], [0.0]])
    assert (binary.diff, binary.p_value, binary.test) == (0.0, 1.0, stats.MCNEMAR)
    assert (binary.interval.low, binary.interval.high) == (0.0, 0.0)


def test_the_paired_bootstrap_draws_the_same_questions_for_both_runs() -> None:
    a = [[1.0], [0.0], [1.0], [0.0], [1.0]]
    b = [[1.0], [1.0], [1.0], [0.0], [0.0]]
    rng = np.random.default_rng(stats.SEED)
    # pair types, sorted: (0,0) q4, (0,1) q2, (1,0) q5, (1,1) q1 q3; d = b - a per type
    copies = rng.multinomial(5, [1 / 5, 1 / 5, 1 / 5, 2 / 5], stats.RESAMPLES)
    diffs = (copies @ np.array([0.0, 1.0, -1.0, 0.0])) / 5
    found = stats.paired(a, b)
    assert (found.interval.low, found.interval.high) == _quantiles(diffs)
    assert (found.a, found.b, found.diff, found.questions) == (0.6, 0.6, 0.0, 5)


def test_exact_mcnemar() -> None:
    a = np.array([1.0] * 10 + [0.0] * 2 + [1.0] * 5)
    b = np.array([0.0] * 10 + [1.0] * 2 + [1.0] * 5)
    # 10 and 2 discordant questions: 2 * P(X <= 2), X ~ Binomial(12, 1/2)
    assert stats.mcnemar(a, b) == pytest.approx(2 * (1 + 12 + 66) / 4096)
    assert stats.mcnemar(b, a) == stats.mcnemar(a, b)
    assert stats.mcnemar(a, a) == 1.0
    big = np.array([1.0] * 1300 + [0.0] * 1200)
    expected = 2 * sum(math.comb(2500, i) for i in range(1201)) / 2**2500
    assert stats.mcnemar(big, 1 - big) == pytest.approx(expected)


def test_sign_flip_exact_and_drawn() -> None:
    # |+-1 +- 0.5| reaches 1.5 in two of four patterns
    assert stats.sign_flip(np.array([1.0, 0.0, 0.5])) == 0.5
    assert stats.sign_flip(np.zeros(5)) == 1.0
    # 30 differences of one size, 22 positive: drawn p close to the sign test's exact one
    diffs = np.array([0.5] * 22 + [-0.5] * 8)
    exact = 2 * sum(math.comb(30, i) for i in range(9)) / 2**30
    assert stats.sign_flip(diffs) == pytest.approx(exact, abs=0.004)

def test_sign_flip_drawn_both_ways_against_every_pattern(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    mixed = np.linspace(0.05, 0.85, 17) * np.array([1, -1] * 8 + [1])  # 17 sizes
    patterns = np.array(list(product((1.0, -1.0), repeat=17)))
    every = float(np.mean(np.abs(patterns @ mixed) >= abs(mixed.sum()) * (1 - 1e-9)))
    assert stats.sign_flip(mixed) == pytest.approx(every, abs=0.01)  # kept signs per size
    monkeypatch.setattr(stats, "TYPE_LIMIT", 0)
    assert stats.sign_flip(mixed) == pytest.approx(every, abs=0.01)  # a sign per question


def test_fractions_are_tested_by_sign_flips_and_unequal_lengths_refused() -> None:
    found = stats.paired([[0.5], [1.0], [0.0]], [[1.0], [1.0], [0.5]])
    assert found.test == stats.SIGN_FLIP and found.p_value == 0.5  # two of four patterns
    with pytest.raises(ValueError, match="paired values"):
        stats.paired([[1.0]], [[1.0], [0.0]])
    assert stats.paired([], []).diff is None


def _clustered_fixture() -> tuple[list[list[float]], list[str]]:
    """Twelve conversations of 25 questions each, LoCoMo-like: a conversation's questions
    share its difficulty (its accuracy drawn between 0.1 and 0.9)."""
    rng = np.random.default_rng(11)
    values, clusters = [], []
    for c, p in enumerate(rng.uniform(0.1, 0.9, 12)):
        for _ in range(25):
            values.append([float(rng.random() < p)])
            clusters.append(f"conv-{c + 26}")
    return values, clusters


def test_a_cluster_bootstrap_is_wider_than_the_question_level_one() -> None:
    values, clusters = _clustered_fixture()
    by_question, by_conversation = stats.interval(values), stats.interval(values, clusters)
    assert (by_question.method, by_question.unit) == (stats.WILSON, stats.QUESTION)
    assert (by_conversation.method, by_conversation.unit) == (stats.CLUSTER_BOOTSTRAP,
                                                              stats.CONVERSATION)
    assert by_conversation.low is not None and by_conversation.high is not None
    assert by_question.low is not None and by_question.high is not None
    width = by_conversation.high - by_conversation.low
    assert width > 1.5 * (by_question.high - by_question.low)
    # about as the theory says for equal conversations: between-conversation variance of
    # their means over 12, plus the within-conversation variance over all 300 questions
    table = np.array([v[0] for v in values]).reshape(12, 25)
    expected = math.sqrt(table.mean(axis=1).var() / 12 + table.var(axis=1).mean() / 300)
    draws = stats._by_cluster([values], clusters, np.random.default_rng(stats.SEED))[0]
    assert draws.std() == pytest.approx(expected, rel=0.1)
    assert width == pytest.approx(2 * 1.96 * expected, rel=0.15)


def test_the_cluster_bootstrap_matches_a_hand_computation() -> None:
    values = [[1.0], [0.0, 1.0], [1.0], [0.0], [0.0]]
    clusters = ["conv-30", "conv-30", "conv-26", "conv-26", "conv-26"]
    rng = np.random.default_rng(stats.SEED)
    copies = rng.multinomial(2, [0.5, 0.5], stats.RESAMPLES)  # conv-26, then conv-30
    in_26 = rng.multinomial(copies[:, 0] * 3, [2 / 3, 1 / 3])  # types (0,), (1,)
    in_30 = rng.multinomial(copies[:, 1] * 2, [1 / 2, 1 / 2])  # types (0, 1), (1,)
    split = rng.multinomial(in_30[:, 0] * 2, [0.5, 0.5])  # the values of (0, 1)'s copies
    sums = in_26[:, 1] * 1.0 + split[:, 1] / 2 + in_30[:, 1] * 1.0
    means = sums / (copies[:, 0] * 3 + copies[:, 1] * 2)
    found = stats.interval(values, clusters)
    assert (found.low, found.high) == pytest.approx(_quantiles(means), abs=1e-12)
    assert (found.method, found.seed, found.unit) == (stats.CLUSTER_BOOTSTRAP, stats.SEED,
                                                      stats.CONVERSATION)


def test_the_cluster_bootstrap_by_type_draws_questions_alike() -> None:
    """Drawing types of questions within a conversation is drawing its questions: against
    question indices drawn within the drawn conversations, on fractions (every question its
    own type) and on repeats."""
    rng = np.random.default_rng(5)
    values = [[float(x) for x in rng.random(int(k)) < p]
              for p, k in zip(rng.random(120), rng.integers(1, 4, 120), strict=True)]
    clusters = [f"conv-{i % 7}" for i in range(120)]
    found = stats._by_cluster([values], clusters, np.random.default_rng(1))[0]
    groups = [np.array([i for i in range(120) if clusters[i] == f"conv-{c}"]) for c in range(7)]
    means = np.array([np.mean(v) for v in values])
    counts = np.array([len(v) for v in values])
    matrix = np.array([v + [0.0] * (3 - len(v)) for v in values])
    rows = []
    for _ in range(stats.RESAMPLES):
        picked = np.concatenate([rng.choice(groups[c], groups[c].size)
                                 for c in rng.integers(0, 7, 7)])
        within = (rng.random((picked.size, 3)) * counts[picked, None]).astype(np.int64)
        used = np.arange(3) < counts[picked, None]
        drawn = (matrix[picked[:, None], within] * used).sum(axis=1) / counts[picked]
        rows.append(drawn.mean())
    by_hand = np.array(rows)
    assert found.mean() == pytest.approx(by_hand.mean(), abs=0.01)
    assert found.std() == pytest.approx(by_hand.std(), rel=0.1)
    assert found.mean() == pytest.approx(means.mean(), abs=0.01)


def test_questions_with_their_own_history_are_resampled_as_questions() -> None:
    """LongMemEval: one conversation per question; one conversation: nothing between."""
    values = [[1.0], [0.0], [1.0], [1.0]]
    own = stats.interval(values, [f"lme-{i}" for i in range(4)])
    assert own == dataclasses.replace(stats.wilson(3, 4), unit=stats.QUESTION)
    one = stats.interval(values, ["conv-26"] * 4)
    assert (one.method, one.unit) == (stats.WILSON, stats.QUESTION)
    fractions = stats.interval([[0.5], [1.0], [0.0]], ["lme-0", "lme-1", "lme-2"])
    assert (fractions.method, fractions.unit) == (stats.BOOTSTRAP, stats.QUESTION)


def test_a_paired_difference_is_resampled_by_conversation() -> None:
    values, clusters = _clustered_fixture()
    better = [[1.0] if i % 25 < 5 else v for i, v in enumerate(values)]  # 5 more per conv
    by_question = stats.paired(values, better)
    by_conversation = stats.paired(values, better, clusters)
    assert by_conversation.diff == by_question.diff
    assert by_conversation.interval.method == stats.PAIRED_CLUSTER
    assert by_conversation.interval.unit == stats.CONVERSATION
    for found in (by_question, by_conversation):
        assert found.interval.low is not None and found.interval.high is not None
    assert (by_conversation.interval.high - by_conversation.interval.low
            ) > (by_question.interval.high - by_question.interval.low)
    with pytest.raises(ValueError, match="conversations"):
        stats.paired(values, better, clusters[:-1])
