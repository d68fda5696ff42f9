"""The report's statistics against hand computations: Wilson's interval, the two-stage
bootstrap on the recorded seed (both ways it draws), exact McNemar, the sign-flip test."""

from __future__ import annotations

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
