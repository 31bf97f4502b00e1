"""Poisson-subsampled Gaussian under the replace-one relation in the PLD accountant.

Checked against the exact profile of the pair (an mpmath evaluation of its closed-form
threshold), against the unsampled Gaussian at q = 1 (sensitivity 2 C), and for the
reduction to a line (numerically, in the plane of 0, g(x), g(x')). Two-sided: never
below the exact value, within 0.1% of it.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from dpkit.accounting import (
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    gaussian_delta,
)
from dpkit.accounting.pld import PLDAccountant

TIGHT = 1e-3


def _exact_delta(z: float, q: float, epsilon: float) -> float:
    """delta(eps) = P[L > eps] - e^eps Q[L > eps] at the closed-form threshold, in mpmath."""
    mpmath.mp.dps = 40
    z_, q_, e = mpmath.mpf(z), mpmath.mpf(q), mpmath.mpf(epsilon)
    alpha = (1 - q_) * mpmath.exp(1 / (2 * z_**2)) / q_
    x = z_**2 * (e / 2 + mpmath.asinh(alpha * mpmath.sinh(e / 2)))

    def above(centre: mpmath.mpf) -> mpmath.mpf:  # mixture's mass above x
        return (1 - q_) * mpmath.ncdf(-x / z_) + q_ * mpmath.ncdf(-(x - centre) / z_)

    return float(above(1) - mpmath.exp(e) * above(-1))


@pytest.mark.parametrize(
    ("z", "q", "epsilon"),
    [
        (1.0, 0.01, 0.1),
        (1.0, 0.3, 0.5),
        (0.6, 0.05, 1.0),
        (2.0, 0.9, 0.2),
        (0.8, 0.5, 3.0),
        (0.3, 1e-6, 0.0),  # a very flat loss: the bracket must stay narrow
        (0.3, 1e-6, 0.5),
    ],
)
def test_one_step_is_the_exact_profile(z: float, q: float, epsilon: float) -> None:
    exact = _exact_delta(z, q, epsilon)
    event = PoissonSampledEvent(GaussianEvent(z), q)
    got = PLDAccountant(relation="replace").compose(event).get_delta(epsilon)
    assert exact <= got <= exact * (1 + TIGHT)
    # Power: a 30% smaller or larger noise multiplier is rejected by the same check.
    for wrong in (0.7 * z, 1.3 * z):
        other = _exact_delta(wrong, q, epsilon)
        assert not other <= got <= other * (1 + TIGHT)


def test_q_one_is_the_gaussian_with_twice_the_radius() -> None:
    event = PoissonSampledEvent(GaussianEvent(1.0), 1.0)
    got = PLDAccountant(relation="replace").compose(event, count=3).get_delta(1.0)
    # Three steps of N(0, 1) on a shift of 2: one Gaussian with sigma 1 / sqrt(3).
    exact = gaussian_delta(1.0 / np.sqrt(3), 1.0, sensitivity=2.0)
    assert exact * (1 - 1e-10) <= got <= exact * (1 + TIGHT)


def test_replace_is_between_add_remove_and_twice_the_sensitivity() -> None:
    event = PoissonSampledEvent(GaussianEvent(1.0), 0.05)
    add_remove = PLDAccountant().compose(event, count=50).get_epsilon(1e-6)
    replace = PLDAccountant(relation="replace").compose(event, count=50).get_epsilon(1e-6)
    doubled = PoissonSampledEvent(GaussianEvent(0.5), 0.05)
    twice = PLDAccountant().compose(doubled, count=50).get_epsilon(1e-6)
    assert add_remove < replace < twice


def test_sampled_laplace_under_replace_stays_unsupported() -> None:
    accountant = PLDAccountant(relation="replace")
    assert not accountant.supports(PoissonSampledEvent(LaplaceEvent(1.0), 0.1))
    assert accountant.supports(PoissonSampledEvent(GaussianEvent(1.0), 0.1))


def _hockey(p: np.ndarray, q: np.ndarray, gamma: float, cell: float) -> float:
    return float(np.maximum(p - gamma * q, 0.0).sum() * cell)


def test_the_line_is_the_worst_case_in_the_plane() -> None:
    """H_g(P_a || P_b) <= H_g(P_e || P_-e) for contributions a, b in the unit disc."""
    from scipy.stats import norm

    z, q = 0.8, 0.4
    xs = np.linspace(-7.0, 7.0, 281)
    cell = float((xs[1] - xs[0]) ** 2)
    gx, gy = np.meshgrid(xs, xs)

    def mixture(centre: tuple[float, float]) -> np.ndarray:
        base = norm.pdf(gx, 0, z) * norm.pdf(gy, 0, z)
        return (1 - q) * base + q * norm.pdf(gx, centre[0], z) * norm.pdf(gy, centre[1], z)

    line_p, line_q = mixture((1.0, 0.0)), mixture((-1.0, 0.0))
    rng = np.random.default_rng(7)  # checking code, not a mechanism
    for gamma in (0.9, 1.5, 3.0):
        worst = _hockey(line_p, line_q, gamma, cell)
        for _ in range(12):
            radius, angle = np.sqrt(rng.uniform(size=2)), rng.uniform(0, 2 * np.pi, size=2)
            a = (radius[0] * np.cos(angle[0]), radius[0] * np.sin(angle[0]))
            b = (radius[1] * np.cos(angle[1]), radius[1] * np.sin(angle[1]))
            assert _hockey(mixture(a), mixture(b), gamma, cell) <= worst * (1 + 1e-9)
