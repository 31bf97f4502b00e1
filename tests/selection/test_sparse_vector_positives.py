"""Sparse vector with ``max_positives = c`` (Lyu, Su & Li 2017, Alg. 1): exact-law checks.

The output law of a run is computed exactly (up to quadrature error ~1e-12) by
integrating over the threshold noise ``rho``: given ``rho`` the queries are
independent, so ``P(o) = int f_rho(r) prod_i P(o_i | r) dr``. On small instances the
test checks ``P_D(o) <= e^eps P_D'(o)`` for every output ``o`` and neighbouring pair,
and that the planted bugs (query noise ``c D / eps2`` for non-monotonic queries,
``c D / (2 eps2)`` for monotonic ones) break it. The sampler is checked against the
same law, with the power to reject a threshold refreshed after each positive.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator, Sequence

import numpy as np
import pytest
from scipy import integrate, stats

import dpkit as dp
from dpkit.accounting.events import PureEvent, SparseVectorEvent
from dpkit.selection import SparseVector, sparse_vector
from dpkit.testing import seeded

Outcome = tuple[bool, ...]


def _log_answer(x: float, above: bool, b2: float) -> float:
    """``log P(nu >= x)`` (above) or ``log P(nu < x)`` (below) for ``nu ~ Lap(b2)``."""
    if x >= 0:
        return math.log(0.5) - x / b2 if above else math.log1p(-0.5 * math.exp(-x / b2))
    return math.log1p(-0.5 * math.exp(x / b2)) if above else math.log(0.5) + x / b2


def _segment_probability(
    answers: Sequence[float], outcome: Outcome, threshold: float, b1: float, b2: float
) -> float:
    """``int f_rho(r) prod_i P(o_i | r) dr`` for one threshold draw, by piecewise quadrature."""

    def density(r: float) -> float:
        log_p = -abs(r) / b1 - math.log(2 * b1)
        for a, above in zip(answers, outcome, strict=True):
            log_p += _log_answer(threshold + r - a, above, b2)
        return math.exp(log_p)

    kinks = sorted({0.0, *(a - threshold for a in answers)})
    reach = 80 * max(b1, b2)
    edges = [kinks[0] - reach, *kinks, kinks[-1] + reach]
    return sum(
        integrate.quad(density, lo, hi, epsabs=0.0, epsrel=1e-12, limit=400)[0]
        for lo, hi in itertools.pairwise(edges)
        if hi > lo
    )


def _outcomes(m: int, c: int) -> Iterator[Outcome]:
    """Every output of a run over ``m`` queries that halts at the ``c``-th positive."""

    def extend(prefix: Outcome) -> Iterator[Outcome]:
        if sum(prefix) == c or len(prefix) == m:
            yield prefix
            return
        yield from extend((*prefix, False))
        yield from extend((*prefix, True))

    return extend(())


def exact_law(
    answers: Sequence[float],
    c: int,
    b1: float,
    b2: float,
    *,
    threshold: float = 0.0,
    refresh: bool = False,
) -> dict[Outcome, float]:
    """Output law of the run; ``refresh=True`` redraws the threshold after each positive."""
    law = {}
    for outcome in _outcomes(len(answers), c):
        if not refresh:
            law[outcome] = _segment_probability(answers[: len(outcome)], outcome, threshold, b1, b2)
            continue
        probability, start = 1.0, 0
        for i, above in enumerate(outcome):
            if above or i == len(outcome) - 1:
                segment = slice(start, i + 1)
                probability *= _segment_probability(
                    answers[segment], outcome[segment], threshold, b1, b2
                )
                start = i + 1
        law[outcome] = probability
    return law


def max_log_ratio(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]], c: int, b1: float, b2: float
) -> float:
    """Largest ``|log P_D(o) / P_D'(o)|`` over the pairs and every output."""
    worst = 0.0
    for first, second in pairs:
        law_1, law_2 = exact_law(first, c, b1, b2), exact_law(second, c, b1, b2)
        assert math.isclose(sum(law_1.values()), 1.0, rel_tol=1e-9)
        for outcome, p in law_1.items():
            worst = max(worst, abs(math.log(p / law_2[outcome])))
    return worst


def _shifted(base: Sequence[float], signs: Sequence[int], d: float) -> list[float]:
    return [a + s * d for a, s in zip(base, signs, strict=True)]


# Near-worst instances: "below" queries far above the threshold and "above" queries far
# below it, moving in opposite directions (non-monotonic) or all one way (monotonic).
EPSILON, C = 1.0, 2
BASE = [6.0, 6.0, 6.0, -6.0, -6.0]
NON_MONOTONIC_PAIRS = [
    (BASE, _shifted(BASE, [1, 1, 1, -1, -1], 1.0)),
    (_shifted(BASE, [1, 1, 1, -1, -1], 1.0), BASE),
    ([0.0, 1.0, -1.0, 2.0, 0.0], [1.0, 0.0, 0.0, 1.0, -1.0]),
]
MONOTONIC_PAIRS = [  # "above" answers may stay put while the "below" ones move
    (BASE, _shifted(BASE, [1, 1, 1, 0, 0], 1.0)),
    (_shifted(BASE, [1, 1, 1, 0, 0], 1.0), BASE),
    (BASE, _shifted(BASE, [1, 1, 1, 1, 1], 1.0)),
    ([0.0, 1.0, -1.0, 2.0, 0.0], [1.0, 2.0, 0.0, 3.0, 1.0]),
]


@pytest.mark.parametrize("monotonic", [False, True], ids=["general", "monotonic"])
def test_exact_law_is_epsilon_dp_and_planted_bug_is_not(monotonic: bool) -> None:
    mechanism = SparseVector(epsilon=EPSILON, threshold=0.0, monotonic=monotonic, max_positives=C)
    pairs = MONOTONIC_PAIRS if monotonic else NON_MONOTONIC_PAIRS
    b1, b2 = mechanism.threshold_scale, mechanism.query_scale
    loss = max_log_ratio(pairs, C, b1, b2)
    assert loss <= EPSILON * (1 + 1e-9)
    # The instances are close to the worst case (the limit is checked below).
    assert loss > 0.55 * EPSILON
    # Planted bug: half the query noise (c D / eps2 without monotonicity, or
    # c D / (2 eps2) with it) -- the same instances exceed epsilon.
    assert max_log_ratio(pairs, C, b1, b2 / 2) > EPSILON * 1.1


def test_bound_is_attained_in_the_limit() -> None:
    """Many "below" answers far above the threshold pin it: the loss tends to epsilon."""
    mechanism = SparseVector(epsilon=EPSILON, threshold=0.0, max_positives=C)
    b1, b2 = mechanism.threshold_scale, mechanism.query_scale
    n_below = 20
    first = [16.0] * n_below + [-16.0] * C
    second = _shifted(first, [1] * n_below + [-1] * C, 1.0)
    outcome = (False,) * n_below + (True,) * C
    p1 = _segment_probability(first, outcome, 0.0, b1, b2)
    p2 = _segment_probability(second, outcome, 0.0, b1, b2)
    loss = math.log(p1 / p2)
    assert 0.99 * EPSILON < loss <= EPSILON * (1 + 1e-9)
    # ... and with the planted bug it tends to 1.5 epsilon.
    p1 = _segment_probability(first, outcome, 0.0, b1, b2 / 2)
    p2 = _segment_probability(second, outcome, 0.0, b1, b2 / 2)
    assert math.log(p1 / p2) > 1.4 * EPSILON


def _chi_square_p(counts: Counter[Outcome], law: dict[Outcome, float], n: int) -> float:
    observed = np.array([counts.get(o, 0) for o in law], dtype=float)
    expected = np.array([law[o] * n for o in law])
    assert sum(counts.values()) == n and set(counts) <= set(law)
    return float(stats.chisquare(observed, expected).pvalue)


def test_sampler_follows_the_exact_law_with_one_threshold_draw() -> None:
    """Sampled outputs match the law; a threshold refreshed after each positive is rejected."""
    answers = [0.0, 0.5, -0.5, 0.0, 1.0, 0.0]
    mechanism = SparseVector(epsilon=1.0, threshold=0.0, monotonic=True, max_positives=C)
    b1, b2 = mechanism.threshold_scale, mechanism.query_scale
    law = exact_law(answers, C, b1, b2)
    refreshed = exact_law(answers, C, b1, b2, refresh=True)
    rng, n = seeded(2024), 8000
    counts: Counter[Outcome] = Counter()
    for _ in range(n):
        value = mechanism.release(answers, rng=rng).value
        positives = set(value)
        length = value[-1] + 1 if len(value) == C else len(answers)
        counts[tuple(i in positives for i in range(length))] += 1
    assert _chi_square_p(counts, law, n) > 1e-6
    assert _chi_square_p(counts, refreshed, n) < 1e-6


# ------------------------------------------------------------------ API and calibration


@pytest.mark.parametrize(
    ("c", "monotonic", "query_scale"), [(1, False, 4.0), (3, False, 12.0), (3, True, 6.0)]
)
def test_scales(c: int, monotonic: bool, query_scale: float) -> None:
    mechanism = SparseVector(epsilon=1.0, threshold=0.0, monotonic=monotonic, max_positives=c)
    assert mechanism.threshold_scale == 2.0  # D / eps1, eps1 = epsilon / 2: never refreshed
    assert mechanism.query_scale == query_scale  # 2 c D / eps2 (c D / eps2 if monotonic)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None], ids=repr)
def test_rejects_bad_max_positives(bad: object) -> None:
    with pytest.raises(dp.InvalidParameter, match="max_positives"):
        SparseVector(epsilon=1.0, threshold=0.0, max_positives=bad)  # type: ignore[arg-type]


def test_event_and_guarantee() -> None:
    assert SparseVector(epsilon=0.5, threshold=0.0).event == SparseVectorEvent(0.5)
    mechanism = SparseVector(epsilon=0.5, threshold=0.0, max_positives=4)
    assert mechanism.event == PureEvent(0.5)
    assert mechanism.guarantee == dp.PureDP(0.5)
    assert "max_positives=4" in repr(mechanism)


def test_default_is_above_threshold_unchanged() -> None:
    answers = [3.0, 12.0, 250.0, 7.0, 300.0]
    for seed in range(5):
        one = sparse_vector(answers, epsilon=1.0, threshold=100.0, rng=seeded(seed)).value
        same = sparse_vector(
            answers, epsilon=1.0, threshold=100.0, max_positives=1, rng=seeded(seed)
        ).value
        assert one == same == 2


def test_offline_clear_cases() -> None:
    far = [-1e6, 1e6, -1e6, 1e6, 1e6, 1e6]
    release = sparse_vector(far, epsilon=1.0, threshold=0.0, max_positives=3, rng=seeded(0))
    assert release.value == (1, 3, 4)
    assert release.event == PureEvent(1.0)
    few = sparse_vector(far[:4], epsilon=1.0, threshold=0.0, max_positives=3, rng=seeded(0))
    assert few.value == (1, 3)
    none = sparse_vector([-1e6] * 3, epsilon=1.0, threshold=0.0, max_positives=2, rng=seeded(0))
    assert none.value == ()


def test_stream_halts_at_the_c_th_positive() -> None:
    stream = SparseVector(epsilon=1.0, threshold=0.0, max_positives=2).stream(rng=seeded(1))
    answers = [stream.query(x) for x in (-1e6, 1e6, -1e6, 1e6)]
    assert answers == [False, True, False, True]
    assert stream.halted and stream.indices == (1, 3) and stream.index == 3
    with pytest.raises(dp.BudgetExceeded, match="2 'above'"):
        stream.query(0.0)
    assert stream.event == PureEvent(1.0)


def test_stream_index_is_none_until_halted() -> None:
    stream = SparseVector(epsilon=1.0, threshold=0.0, max_positives=2).stream(rng=seeded(1))
    assert stream.query(1e6) and not stream.halted
    assert stream.index is None and stream.indices == (0,)


def test_accuracy_grows_with_c() -> None:
    one = SparseVector(epsilon=1.0, threshold=0.0).accuracy(10)
    three = SparseVector(epsilon=1.0, threshold=0.0, max_positives=3).accuracy(10)
    b1, beta = 2.0, 0.05
    assert three == pytest.approx(b1 * math.log(2 / beta) + 12.0 * math.log(20 / beta), rel=1e-9)
    assert three > one
