"""The delta of threshold key selection, checked against exact pmf sums."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from dpkit.analytics._accounting import calibrate_noise, selection_threshold
from dpkit.mechanisms._tails import discrete_gaussian_tail_upper as gaussian_tail_upper
from dpkit.mechanisms._tails import discrete_laplace_tail as laplace_tail


def exact_gaussian_tail(t: int, sigma: float) -> float:
    width = int(40 * sigma) + 10
    weights = [math.exp(-(z * z) / (2 * sigma * sigma)) for z in range(-width, width + 1)]
    total = math.fsum(weights)
    return math.fsum(weights[width + t :]) / total


def exact_laplace_tail(t: int, scale: float) -> float:
    q = math.exp(-1 / scale)
    width = int(60 * scale) + 10
    weights = [q ** abs(z) for z in range(-width, width + 1)]
    return math.fsum(weights[width + t :]) / math.fsum(weights)


@pytest.mark.parametrize("sigma", [0.7, 2.0, 5.5, 20.0], ids=str)
@pytest.mark.parametrize("t", [1, 3, 10, 40], ids=str)
def test_gaussian_tail_is_a_tight_upper_bound(sigma: float, t: int) -> None:
    exact = exact_gaussian_tail(t, sigma)
    bound = gaussian_tail_upper(t, sigma)
    assert bound >= exact
    if exact > 1e-250:
        # f(t) and the integral are each at most the exact tail sum: within a factor 2.
        assert bound <= 2 * exact * (1 + 1e-9)


@pytest.mark.parametrize("scale", [0.5, 2.0, 7.0], ids=str)
@pytest.mark.parametrize("t", [1, 4, 30], ids=str)
def test_laplace_tail_is_exact(scale: float, t: int) -> None:
    assert laplace_tail(t, scale) == pytest.approx(exact_laplace_tail(t, scale), rel=1e-9)


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
@pytest.mark.parametrize("groups", [1, 4], ids=str)
@pytest.mark.parametrize("delta", [1e-5, 1e-9], ids=str)
def test_threshold_is_the_smallest_within_delta(kind: str, groups: int, delta: float) -> None:
    noise = calibrate_noise(kind, Fraction(1, 2), 1, groups)
    exact_tail = exact_laplace_tail if kind == "laplace" else exact_gaussian_tail
    threshold, spent = selection_threshold(noise, delta)
    # A key held by one person alone is released iff 1 + Z >= T (mass at T included).
    p = exact_tail(threshold - 1, noise.scale)
    assert 1 - (1 - p) ** groups <= delta
    assert spent <= delta
    # Power: one below the threshold exceeds delta (so a threshold that ignored the mass
    # at T, i.e. used > instead of >=, would be caught by the same check).
    bound_tail = laplace_tail if kind == "laplace" else gaussian_tail_upper
    p_below = bound_tail(threshold - 2, noise.scale)
    assert 1 - (1 - p_below) ** groups > delta
    # The exact release probability one below is also above delta, up to the slack of
    # the Gaussian tail bound (tested above).
    slack = 1.0 if kind == "laplace" else 2.0
    assert (1 - (1 - exact_tail(threshold - 2, noise.scale)) ** groups) * slack * 1.001 > delta
