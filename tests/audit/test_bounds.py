"""Clopper-Pearson bounds and the epsilon bound from a test's error rates."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpkit.audit import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_from_rates,
    epsilon_lower_bound,
)
from dpkit.errors import DPError


@pytest.mark.parametrize("n", [1, 10, 1000])
def test_edge_counts_have_closed_forms(n: int) -> None:
    # k = 0: P(Bin(n, u) = 0) = (1 - u)^n = level  =>  u = 1 - level^(1/n).
    assert clopper_pearson_upper(0, n, 0.05) == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-10)
    assert clopper_pearson_lower(n, n, 0.05) == pytest.approx(0.05 ** (1 / n), rel=1e-10)
    assert clopper_pearson_upper(n, n, 0.05) == 1.0
    assert clopper_pearson_lower(0, n, 0.05) == 0.0


@pytest.mark.parametrize(("k", "n"), [(1, 10), (37, 100), (5000, 10000)])
def test_bounds_are_the_exact_binomial_inversions(k: int, n: int) -> None:
    upper = float(clopper_pearson_upper(k, n, 0.025))
    lower = float(clopper_pearson_lower(k, n, 0.025))
    # At the upper bound, seeing k or fewer has probability exactly 0.025.
    assert stats.binom.cdf(k, n, upper) == pytest.approx(0.025, rel=1e-8)
    assert stats.binom.sf(k - 1, n, lower) == pytest.approx(0.025, rel=1e-8)
    interval = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    assert (lower, upper) == pytest.approx((interval.low, interval.high), rel=1e-8)


def test_bounds_vectorise() -> None:
    upper = clopper_pearson_upper(np.array([0, 5, 10]), 10, 0.05)
    assert isinstance(upper, np.ndarray) and upper.shape == (3,)
    assert np.all(np.diff(upper) > 0) and upper[-1] == 1.0


def test_epsilon_from_rates() -> None:
    # Randomized response at epsilon = 1: FPR = FNR = 1/(1 + e).
    rate = 1 / (1 + math.e)
    assert epsilon_from_rates(rate, rate) == pytest.approx(1.0)
    assert epsilon_from_rates(0.5, 0.5) == 0.0
    assert epsilon_from_rates(0.0, 0.5) == math.inf
    assert epsilon_from_rates(0.2, 0.3, 0.1) == pytest.approx(math.log(0.6 / 0.2))
    assert epsilon_from_rates(0.95, 0.95, 0.1) == 0.0


def test_epsilon_lower_bound_combines_both_upper_bounds() -> None:
    got = epsilon_lower_bound(100, 1000, 300, 1000, delta=0.01, confidence=0.9)
    fpr = clopper_pearson_upper(100, 1000, 0.05)
    fnr = clopper_pearson_upper(300, 1000, 0.05)
    assert got == pytest.approx(math.log((1 - 0.01 - fnr) / fpr))
    assert got < math.log(0.69 / 0.1)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((5, 4, 0.05), {}),
        ((-1, 4, 0.05), {}),
        ((1.5, 4, 0.05), {}),
        ((1, 0, 0.05), {}),
        ((1, 4, 0.0), {}),
        ((1, 4, 1.0), {}),
        ((1, 4, math.nan), {}),
    ],
    ids=["k>n", "negative", "fractional", "n=0", "level0", "level1", "nan"],
)
def test_bad_input(args: tuple[float, float, float], kwargs: dict[str, float]) -> None:
    with pytest.raises(DPError):
        clopper_pearson_upper(*args, **kwargs)


def test_bad_delta_and_confidence() -> None:
    with pytest.raises(DPError):
        epsilon_from_rates(0.1, 0.1, 1.0)
    with pytest.raises(DPError):
        epsilon_lower_bound(1, 10, 1, 10, confidence=1.0)
