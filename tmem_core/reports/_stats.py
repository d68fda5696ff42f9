"""Uncertainty of the report's figures: 95% intervals over questions or conversations, paired
differences.

Pure functions of per-question values: `values[i]` holds question i's values (one per judge
record, judges x repeats, for judge scores; one for F1, exact match and recall).

- `interval(values, clusters)`: Wilson's score interval when every question has one value,
  0 or 1 (a proportion over questions), and the questions are independent (`clusters`: each
  question's conversation, None or one conversation each); otherwise `bootstrap_interval`.
- Questions that share a conversation share its memory and its difficulty: they are not
  independent draws, and an interval over questions would be narrower than the data support.
  Where at least two conversations hold the questions and one holds several (LoCoMo,
  GroupMemBench, EverMemBench, synthetic), every interval here is a cluster bootstrap
  (`unit` "conversation"): conversations drawn with replacement, then within each drawn
  conversation as many of its questions as it holds, with replacement, then each drawn
  question's values (judges x repeats) as below; the estimate is the mean over all drawn
  questions. Where each question has its own history (LongMemEval) the unit is the question.
- `bootstrap_interval(values)`: percentile bootstrap of the mean over questions of each
  question's mean, in two stages: n questions drawn with replacement, then within each drawn
  question as many of its own values as it has, drawn with replacement; the interval covers
  the spread between questions and between judges and repeats (slightly wider than one stage).
- `paired(a, b, clusters)`: run b minus run a over the questions both scored: the difference
  of their means, a paired bootstrap interval (the same conversations and questions drawn for
  both runs, each run's values within a question drawn apart), and a two-sided p-value (over
  questions, as independent: the test ignores conversations): exact McNemar (binomial on
  the discordant questions) when every question has one 0/1 value in both runs, else a
  sign-flip permutation test of the per-question differences of means (every sign pattern
  when at most `EXACT_FLIPS` differences are non-zero, else `PERMUTATIONS` drawn).

How the draws are made (each figure from a fresh `numpy.random.default_rng(SEED)`, so each is
reproducible on its own): questions with the same values (the same pair of values, paired)
are one type, types in sorted order. With at most `TYPE_LIMIT` types, each resample draws
how many copies of each type it holds, `multinomial(n, type shares)` (`RESAMPLES` rows at
once), then for every type whose values differ, in type order (paired: run a's, then run
b's), which values its copies draw, `multinomial(copies x values of the type, the type's
shares of each distinct value)`: the same distribution as drawing question indices, with far
fewer draws. With more types, the questions in sorted order of their (sorted) values,
`integers(0, n, (rows, n))` draws indices (in chunks of at most `CHUNK_CELLS` draws), then
`random((rows, n, width))` the values within, `int(u x values)` (paired: run a's, then b's).
The sign-flip test draws, per distinct |difference|, how many of its questions keep their
sign, `binomial(questions, 1/2, (PERMUTATIONS, sizes))` (with more sizes than `TYPE_LIMIT`, a
sign per question, `integers(0, 2, (rows, questions))`, the differences in sorted order).
The cluster bootstrap draws how many copies of each conversation (in sorted order) a
resample holds, `multinomial(conversations, equal shares)`, then conversation by conversation
how many copies of each type of its questions (types as above, in sorted order), as many as
`copies x its questions`, `multinomial(that, the type shares)`, then the values within its
types as above; the mean divides by the drawn questions, `sum(copies x questions)`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import product

import numpy as np
from numpy.typing import NDArray

from tmem_core.results._wilson import NO_INTERVAL as NO_INTERVAL
from tmem_core.results._wilson import WILSON as WILSON
from tmem_core.results._wilson import Interval as Interval
from tmem_core.results._wilson import wilson as wilson

SEED = 20240917
LEVEL = 0.95
RESAMPLES = 2000
PERMUTATIONS = 10000
EXACT_FLIPS = 16  # at most 2**16 sign patterns are enumerated, beyond that drawn
TYPE_LIMIT = 256  # more types of question than this: question indices are drawn
CHUNK_CELLS = 2_000_000  # index draws held at once
BOOTSTRAP, CLUSTER_BOOTSTRAP = "bootstrap", "cluster bootstrap"
QUESTION, CONVERSATION = "question", "conversation"  # what an interval resamples
PAIRED_BOOTSTRAP, PAIRED_CLUSTER = "paired bootstrap", "paired cluster bootstrap"
MCNEMAR, SIGN_FLIP = "exact McNemar", "sign-flip permutation"
_TIES = 1e-9  # relative slack when a permuted statistic ties the observed one

Values = Sequence[Sequence[float]]
Clusters = Sequence[str] | None  # each question's conversation
Floats = NDArray[np.float64]
Ints = NDArray[np.int64]


@dataclass(frozen=True)
class Paired:
    """Run b minus run a over `questions` shared questions, with its interval and test."""

    questions: int
    a: float | None
    b: float | None
    diff: float | None
    interval: Interval
    p_value: float | None
    test: str | None


def is_proportion(values: Values) -> bool:
    """Every question has one value and it is 0 or 1."""
    return all(len(v) == 1 and v[0] in (0.0, 1.0) for v in values)


def clustered(clusters: Clusters) -> bool:
    """Whether the questions share conversations: at least two conversations hold them and
    fewer than there are questions (one conversation: nothing to resample between)."""
    return clusters is not None and 2 <= len(set(clusters)) < len(clusters)


def interval(values: Values, clusters: Clusters = None) -> Interval:
    """Wilson for a proportion over independent questions, else the bootstrap."""
    if not values:
        return NO_INTERVAL
    if is_proportion(values) and not clustered(clusters):
        return replace(wilson(int(sum(v[0] for v in values)), len(values)), unit=QUESTION)
    return bootstrap_interval(values, clusters)


def bootstrap_interval(values: Values, clusters: Clusters = None) -> Interval:
    """Percentile interval of the mean of question means over `RESAMPLES` resamples, by
    conversation where they share conversations (none for fewer than two questions: every
    resample would be the one question)."""
    if len(values) < 2:
        return NO_INTERVAL
    rng = np.random.default_rng(SEED)
    if clustered(clusters):
        assert clusters is not None
        return _percentile(_by_cluster([values], clusters, rng)[0], CLUSTER_BOOTSTRAP,
                           CONVERSATION)
    return _percentile(_resampled([values], rng)[0], BOOTSTRAP, QUESTION)


def paired(a: Values, b: Values, clusters: Clusters = None) -> Paired:
    """Run b minus run a; `a[i]` and `b[i]` are the same question's values in each run,
    `clusters[i]` its conversation."""
    if len(a) != len(b) or (clusters is not None and len(clusters) != len(a)):
        raise ValueError(f"paired values of {len(a)} and {len(b)} questions"
                         + ("" if clusters is None else f", {len(clusters)} conversations"))
    if not a:
        return Paired(0, None, None, None, NO_INTERVAL, None, None)
    means_a, means_b = question_means(a), question_means(b)
    rng = np.random.default_rng(SEED)
    if clustered(clusters):
        assert clusters is not None
        drawn_a, drawn_b = _by_cluster([a, b], clusters, rng)
        ci = _percentile(drawn_b - drawn_a, PAIRED_CLUSTER, CONVERSATION)
    else:
        drawn_a, drawn_b = _resampled([a, b], rng)
        ci = _percentile(drawn_b - drawn_a, PAIRED_BOOTSTRAP, QUESTION)
    if is_proportion(a) and is_proportion(b):
        p, test = mcnemar(means_a, means_b), MCNEMAR
    else:
        p, test = sign_flip(means_b - means_a), SIGN_FLIP
    mean_a, mean_b = float(means_a.mean()), float(means_b.mean())
    return Paired(len(a), mean_a, mean_b, mean_b - mean_a, ci, p, test)


def question_means(values: Values) -> Floats:
    if any(not v for v in values):
        raise ValueError("a question without a value")
    return np.array([sum(v) / len(v) for v in values], dtype=np.float64)


def mcnemar(a: Floats, b: Floats) -> float:
    """Exact two-sided McNemar p-value of two runs' 0/1 outcomes on the same questions."""
    only_a = int(np.sum((a == 1) & (b == 0)))
    only_b = int(np.sum((a == 0) & (b == 1)))
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail, term = 0, 1  # sum of comb(n, i) for i <= the smaller count, term by term
    for i in range(min(only_a, only_b) + 1):
        tail += term
        term = term * (n - i) // (i + 1)
    return min(1.0, 2 * tail / (1 << n))


def sign_flip(diffs: Floats) -> float:
    """Two-sided p-value of a zero mean difference when each question's difference may as
    well have the other sign: the share of sign patterns whose |sum| reaches the observed one
    (every pattern when at most `EXACT_FLIPS` are non-zero; else (1 + as extreme) /
    (1 + PERMUTATIONS) of drawn ones)."""
    nonzero = np.sort(diffs[diffs != 0])  # in sorted order: the draws do not depend on it
    if nonzero.size == 0:
        return 1.0
    bar = abs(float(nonzero.sum())) * (1 - _TIES)
    if nonzero.size <= EXACT_FLIPS:
        signs = np.array(list(product((1.0, -1.0), repeat=nonzero.size)))
        return float(np.mean(np.abs(signs @ nonzero) >= bar))
    rng = np.random.default_rng(SEED)
    sizes, counts = np.unique(np.abs(nonzero), return_counts=True)
    if sizes.size <= TYPE_LIMIT:  # kept signs per size: a binomial; sum = size (2 kept - all)
        kept = rng.binomial(counts, 0.5, (PERMUTATIONS, sizes.size))
        sums = (2 * kept - counts) @ sizes
    else:
        sums = np.concatenate([(rng.integers(0, 2, (rows, nonzero.size)) * 2 - 1) @ nonzero
                               for rows in _chunks(PERMUTATIONS, nonzero.size)])
    extreme = int(np.sum(np.abs(sums) >= bar))
    return (1 + extreme) / (1 + PERMUTATIONS)


def _resampled(runs: Sequence[Values], rng: np.random.Generator) -> list[Floats]:
    """`RESAMPLES` means of question means of each run, the same questions drawn for all."""
    keys = _keys(runs)
    types = sorted(Counter(keys).items())
    if len(types) <= TYPE_LIMIT:
        return _by_type(types, len(keys), rng)
    ordered = sorted(keys)
    return _by_index([[key[side] for key in ordered] for side in range(len(runs))], rng)


Key = tuple[tuple[float, ...], ...]  # a question's values in each run (sorted): its type


def _keys(runs: Sequence[Values]) -> list[Key]:
    return list(zip(*[[tuple(v) if len(v) == 1 else tuple(sorted(v)) for v in run]
                      for run in runs], strict=True))


def _by_type(types: list[tuple[Key, int]], n: int, rng: np.random.Generator) -> list[Floats]:
    """Copies of each type per resample, then the values drawn within the copies."""
    shares = np.array([count for _, count in types], dtype=np.float64) / n
    copies = rng.multinomial(n, shares, RESAMPLES)
    return [total / n for total in _type_sums(types, copies, rng)]


def _by_cluster(runs: Sequence[Values], clusters: Sequence[str], rng: np.random.Generator
                ) -> list[Floats]:
    """`RESAMPLES` means of question means of each run: conversations drawn, then the types
    of questions within each drawn conversation, then the values within (the same
    conversations and questions for every run)."""
    keys = _keys(runs)
    members: dict[str, list[Key]] = {}
    for cluster, key in zip(clusters, keys, strict=True):
        members.setdefault(cluster, []).append(key)
    groups = [members[c] for c in sorted(members)]
    drawn = rng.multinomial(len(groups), np.full(len(groups), 1 / len(groups)), RESAMPLES)
    totals = [np.zeros(RESAMPLES) for _ in runs]
    for g, questions in enumerate(groups):
        types = sorted(Counter(questions).items())
        shares = np.array([count for _, count in types], dtype=np.float64) / len(questions)
        copies = rng.multinomial(drawn[:, g] * len(questions), shares)
        for total, sums in zip(totals, _type_sums(types, copies, rng), strict=True):
            total += sums
    sizes = drawn @ np.array([len(q) for q in groups], dtype=np.float64)
    return [total / sizes for total in totals]


def _type_sums(types: list[tuple[Key, int]], copies: Ints, rng: np.random.Generator
               ) -> list[Floats]:
    """Per run, each resample's sum of its drawn questions' means: `copies[r, t]` copies of
    type t, the values of each copy drawn again (as many as it has, with replacement) where
    they differ, type by type (run a's, then run b's)."""
    sums = []
    for side in range(len(types[0][0])):
        total = np.zeros(copies.shape[0])
        for t, (key, _) in enumerate(types):
            values = key[side]
            distinct, counts = np.unique(values, return_counts=True)
            if distinct.size == 1:
                total += copies[:, t] * distinct[0]
                continue
            drawn = rng.multinomial(copies[:, t] * len(values), counts / len(values))
            total += (drawn @ distinct) / len(values)
        sums.append(total)
    return sums


def _by_index(runs: Sequence[Values], rng: np.random.Generator) -> list[Floats]:
    """Question indices per resample, then each drawn question's values drawn again."""
    padded = [_Padded.of(run) for run in runs]
    n = padded[0].n
    chunks: list[list[Floats]] = [[] for _ in runs]
    for rows in _chunks(RESAMPLES, n * max(p.width for p in padded)):
        questions = rng.integers(0, n, (rows, n))
        for side, run in enumerate(padded):
            chunks[side].append(run.draw(rng, rows, questions))
    return [np.concatenate(c) for c in chunks]


@dataclass(frozen=True)
class _Padded:
    """Questions' values as rows of a matrix, padded to the most values of a question."""

    values: Floats  # n x width
    counts: Ints  # values of each question

    @classmethod
    def of(cls, values: Values) -> _Padded:
        counts = np.array([len(v) for v in values], dtype=np.int64)
        matrix = np.zeros((len(values), int(counts.max())))
        for i, row in enumerate(values):
            matrix[i, :len(row)] = row
        return cls(matrix, counts)

    @property
    def n(self) -> int:
        return int(self.counts.size)

    @property
    def width(self) -> int:
        return int(self.values.shape[1])

    def draw(self, rng: np.random.Generator, rows: int, questions: Ints) -> Floats:
        """Mean of question means for each row of drawn `questions`, each question's own
        values drawn again with replacement when it has several."""
        if self.width == 1:
            return np.asarray(self.values[:, 0][questions].mean(axis=1), dtype=np.float64)
        counts = self.counts[questions]
        within = (rng.random((rows, self.n, self.width)) * counts[..., None]).astype(np.int64)
        drawn = self.values[questions[..., None], within]
        used = np.arange(self.width) < counts[..., None]
        return np.asarray(((drawn * used).sum(axis=2) / counts).mean(axis=1), dtype=np.float64)


def _chunks(total: int, cells_per_row: int) -> list[int]:
    """Rows per chunk, so that no chunk holds more than `CHUNK_CELLS` draws."""
    rows = max(1, CHUNK_CELLS // cells_per_row)
    return [min(rows, total - start) for start in range(0, total, rows)]


def _percentile(draws: Floats, method: str, unit: str) -> Interval:
    tail = (1 - LEVEL) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return Interval(float(low), float(high), method, SEED, RESAMPLES, unit)
