"""The float-summation attack (Casacuberta, Shoemate, Vadhan & Wagaman, CCS 2022).

A naive bounded sum (float sum of clamped values + textbook Laplace calibrated to
``U - L``) is refuted by the black-box auditor on the pair built by
``float_sum_neighbours``; dpkit's Session sum (exact fixed-point integers) is not.

Confidence: every audit here runs at confidence ``1 - 1e-6``, so a correct claim is
refuted with probability at most 1e-6 (the false-failure rate of the "not refuted"
tests). The "refuted" tests check power: seeds are fixed, and the bounds measured are
far from the claims (recorded next to each assertion).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from dpkit.audit import audit
from dpkit.audit.sum_attack import (
    SummationOrder,
    float_sum_gap,
    float_sum_neighbours,
    float_sum_sensitivity,
    naive_clamped_sum,
    session_sum_mechanism,
)
from dpkit.errors import DataError, InvalidParameter
from dpkit.random import Random
from dpkit.testing import seeded

CONFIDENCE = 1 - 1e-6
# Values near 2^52 (consecutive doubles 1 apart) clamped to a width-1 range: the exact
# sums of neighbours differ by 1, the float sums of 256 of them (near 2^60, where
# doubles are 256 apart) by 256.
BOUNDS = (2.0**52, 2.0**52 + 1.0)
N = 256
EPSILON = 1.0


def naive(order: SummationOrder = "pairwise", bounds: tuple[float, float] = BOUNDS) -> Any:
    def draw(values: Any, n: int, rng: Random) -> npt.NDArray[np.float64]:
        return naive_clamped_sum(
            values, bounds=bounds, epsilon=EPSILON, order=order, size=n, rng=rng
        )

    return draw


@pytest.mark.parametrize("order", ["pairwise", "sequential"])
@pytest.mark.parametrize(
    ("n", "bounds", "at_least"),
    [
        (N, BOUNDS, 256.0),
        (1000, (1e15, 1e15 + 1.0), 128.0),
        (4096, (2.0**50, 2.0**50 + 1.0), 1024.0),
    ],
    ids=["2^52-n256", "1e15-n1000", "2^50-n4096"],
)
def test_float_sums_move_far_more_than_claimed(
    order: SummationOrder, n: int, bounds: tuple[float, float], at_least: float
) -> None:
    x, x_prime = float_sum_neighbours(n, bounds=bounds, order=order)
    assert x.shape == x_prime.shape == (n,)
    assert np.count_nonzero(x != x_prime) == 1
    assert x.min() >= bounds[0] and x.max() <= bounds[1]
    assert x_prime.min() >= bounds[0] and x_prime.max() <= bounds[1]
    gap = float_sum_gap(x, x_prime, bounds=bounds, order=order)
    assert gap.exact_difference == gap.claimed_sensitivity == bounds[1] - bounds[0]
    # One unit in the last place of the total n * 2^e: n * 2^e * 2^-52.
    assert gap.float_difference >= at_least and gap.ratio >= at_least
    assert gap.exceeds_claim
    # The sound sensitivity covers what was measured.
    assert gap.float_difference <= gap.sound_sensitivity


def test_no_gap_when_bounds_include_zero() -> None:
    # With bounds [0, 1] the rounding error of 10^4 doubles is ~1e-8: no attack.
    x, x_prime = float_sum_neighbours(10_000, bounds=(0.0, 1.0))
    gap = float_sum_gap(x, x_prime, bounds=(0.0, 1.0))
    assert gap.ratio == pytest.approx(1.0, abs=1e-6)


def test_attack_refutes_the_naive_sum() -> None:
    x, x_prime = float_sum_neighbours(N, bounds=BOUNDS)
    result = audit(naive(), x, x_prime, samples=20_000, confidence=CONFIDENCE, rng=seeded(1))
    # No error among 10^4 draws per side: the Clopper-Pearson bounds give 6.53.
    assert result.refutes(EPSILON), result
    assert result.epsilon_lower_bound > 6.0


@pytest.mark.parametrize("order", ["pairwise", "sequential"])
def test_naive_sum_is_not_refuted_without_the_gap(order: SummationOrder) -> None:
    # Control: the same auditor on a pair where the float sums move by U - L only
    # (bounds containing 0) finds no more than the claim; the refutation above is
    # the float sum's doing, not an artefact of the auditor.
    bounds = (0.0, 1.0)
    x, x_prime = float_sum_neighbours(N, bounds=bounds, order=order)
    result = audit(
        naive(order, bounds), x, x_prime, samples=20_000, confidence=CONFIDENCE, rng=seeded(2)
    )
    assert not result.refutes(EPSILON), result
    assert result.epsilon_lower_bound > 0.5  # the test has power: measured 0.88


def test_attack_finds_nothing_against_the_session_sum() -> None:
    x, x_prime = float_sum_neighbours(N, bounds=BOUNDS)
    # Replacing one person's value is two add/remove steps: the claim is 2 epsilon.
    claim = 2 * EPSILON
    samples = 2000
    dpkit_sum = audit(
        session_sum_mechanism(bounds=BOUNDS, epsilon=EPSILON),
        x,
        x_prime,
        samples=samples,
        confidence=CONFIDENCE,
        rng=seeded(3),
    )
    assert not dpkit_sum.refutes(claim), dpkit_sum
    # Power at the same size: the same audit refutes the naive sum even against 2 epsilon.
    naive_sum = audit(naive(), x, x_prime, samples=samples, confidence=CONFIDENCE, rng=seeded(3))
    assert naive_sum.refutes(claim) and naive_sum.epsilon_lower_bound > 4.0


def test_naive_clamped_sum_releases() -> None:
    values = np.array([-5.0, 0.25, 0.5, 9.0])  # clamped to [0, 1]: sum 1.75
    one = naive_clamped_sum(values, bounds=(0.0, 1.0), epsilon=1.0, rng=seeded(4))
    assert isinstance(one, float)
    many = naive_clamped_sum(values, bounds=(0.0, 1.0), epsilon=1.0, size=20_000, rng=seeded(4))
    assert many.shape == (20_000,)
    # Laplace(1): the mean of 2*10^4 draws is within 6 standard errors (sd sqrt(2)).
    assert abs(many.mean() - 1.75) < 6 * math.sqrt(2 / 20_000)
    again = naive_clamped_sum(values, bounds=(0.0, 1.0), epsilon=1.0, size=20_000, rng=seeded(4))
    np.testing.assert_array_equal(many, again)


def test_sound_sensitivity() -> None:
    assert float_sum_sensitivity(1, bounds=(0.0, 1.0)) == 1.0
    small = float_sum_sensitivity(100, bounds=(-3.0, 1.0))
    # 4 + 2 * gamma_99 * 100 * 3, gamma_99 = 99u / (1 - 99u), u = 2^-53.
    u = 2.0**-53
    assert small >= 4 + 2 * (99 * u / (1 - 99 * u)) * 100 * 3
    assert small == pytest.approx(4 + 600 * 99 * u, rel=1e-9)
    assert float_sum_sensitivity(1000, bounds=(0.0, 1.0)) < float_sum_sensitivity(
        2000, bounds=(0.0, 1.0)
    )


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: float_sum_neighbours(1, bounds=BOUNDS), InvalidParameter),
        (lambda: float_sum_neighbours(10, bounds=(1.0, 1.0)), InvalidParameter),
        (lambda: float_sum_neighbours(10, bounds=(0.0, math.inf)), InvalidParameter),
        (lambda: float_sum_neighbours(10, bounds=BOUNDS, order="kahan"), InvalidParameter),  # type: ignore[arg-type]
        (lambda: naive_clamped_sum([1.0], bounds=(0.0, 1.0), epsilon=0.0), InvalidParameter),
        (lambda: naive_clamped_sum([], bounds=(0.0, 1.0), epsilon=1.0), DataError),
        (lambda: naive_clamped_sum([math.nan], bounds=(0.0, 1.0), epsilon=1.0), DataError),
        (lambda: float_sum_gap([1.0, 2.0], [1.0], bounds=(0.0, 3.0)), DataError),
        (lambda: float_sum_gap([1.0, 2.0], [2.0, 1.0], bounds=(0.0, 3.0)), DataError),
        (lambda: float_sum_sensitivity(2**54, bounds=(0.0, 1.0)), InvalidParameter),
        (lambda: session_sum_mechanism(bounds=(0.0, 1.0), epsilon=-1.0), InvalidParameter),
    ],
    ids=[
        "n-too-small",
        "empty-bounds",
        "infinite-bound",
        "order",
        "epsilon",
        "empty-values",
        "nan-values",
        "lengths",
        "two-changes",
        "n-too-large",
        "session-epsilon",
    ],
)
def test_bad_input(call: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        call()
