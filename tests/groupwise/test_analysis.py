"""Numerical analysis of Algorithm 1: quadrature accuracy, closed forms, sanity bounds.

Every number checked here is numerical evidence about Algorithm 1, not a guarantee.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate
from scipy.special import logsumexp

from dpkit.errors import InvalidParameter
from dpkit.groupwise import _quadrature as quad
from dpkit.groupwise import analysis
from dpkit.groupwise.analysis import (
    EVIDENCE,
    effective_rho,
    expected_absolute_error,
    gaussian_approximation_distance,
    nonincreasing_envelope,
    output_cdf,
    output_log_density,
    renyi_divergence,
)
from dpkit.groupwise.two_stage import TwoStageNoise
from dpkit.testing import seeded

CASES = [
    (0, 10.0, 0.3),
    (30, 10.0, 0.3),
    (100, 10.0, 0.3),
    (10_000, 10.0, 0.3),
    (5, 1.0, 1.0),
    (200, 10.0, 0.1),
]


def total_mass(count: float, sigma: float, r: float, steps: int = 8) -> float:
    y_max = quad.output_y_max(count, sigma, r, 2)
    grid = quad.y_nodes(count, sigma, r, y_max, steps)
    log_p = quad.log_density_on(
        grid.points, count, sigma, r, quad.t_nodes(count, sigma, r, y_max, steps)
    )
    return float(np.exp(logsumexp(log_p + grid.log_weights)))


@pytest.mark.parametrize(("count", "sigma", "r"), CASES, ids=[str(c) for c in CASES])
def test_density_integrates_to_one(count: int, sigma: float, r: float) -> None:
    assert abs(total_mass(count, sigma, r) - 1.0) < 1e-9


@pytest.mark.parametrize(("count", "sigma", "r"), CASES[:4], ids=[str(c) for c in CASES[:4]])
def test_halving_the_step_does_not_move_the_density(count: int, sigma: float, r: float) -> None:
    sd = math.sqrt(sigma**2 + r**2 * (count**2 + sigma**2))
    y = count + sd * np.linspace(-6, 6, 41) + 0.123
    coarse = output_log_density(y, count=count, sigma=sigma, relative_error=r)
    fine = output_log_density(y, count=count, sigma=sigma, relative_error=r, steps=16)
    assert np.max(np.abs(coarse - fine)) < 1e-10


@pytest.mark.parametrize(("count", "y"), [(0, 0.5), (0, -7.0), (30, 31.0), (30, 90.0), (100, -3.0)])
def test_density_matches_adaptive_quadrature(count: int, y: float) -> None:
    """An independent method: scipy's adaptive Gauss-Kronrod over t, with breakpoints."""
    sigma, r = 10.0, 0.3

    def integrand(t: float) -> float:
        return math.exp(-0.5 * ((t - count) / sigma) ** 2 - 0.5 * ((y / t - 1) / r) ** 2) / (
            2 * math.pi * sigma * r * abs(t)
        )

    points = sorted({0.0, y, float(count)})
    pieces = [(-np.inf, points[0]), *itertools.pairwise(points), (points[-1], np.inf)]
    reference = sum(
        integrate.quad(integrand, a, b, epsabs=0, epsrel=1e-13, limit=500)[0] for a, b in pieces
    )
    ours = float(np.exp(output_log_density([y], count=count, sigma=sigma, relative_error=r))[0])
    assert ours == pytest.approx(reference, rel=1e-9)


def test_cdf_is_the_integral_of_the_density() -> None:
    count, sigma, r = 30, 10.0, 0.3
    a, b = 5.0, 80.0
    piece = integrate.quad(
        lambda y: float(
            np.exp(output_log_density([y], count=count, sigma=sigma, relative_error=r))[0]
        ),
        a,
        b,
        epsrel=1e-11,
    )[0]
    cdf = output_cdf([a, b], count=count, sigma=sigma, relative_error=r)
    assert cdf[1] - cdf[0] == pytest.approx(piece, rel=1e-9)
    assert output_cdf([-1e9, 1e9], count=count, sigma=sigma, relative_error=r) == pytest.approx(
        [0, 1], abs=1e-12
    )


@pytest.mark.parametrize("sigma", [1.0, 10.0, 0.3])
def test_renyi_at_r0_is_the_gaussian_closed_form(sigma: float) -> None:
    orders = (1.5, 2.0, 5.0, 20.0, 64.0)
    result = renyi_divergence(100, 101, sigma=sigma, relative_error=0.0, orders=orders)
    for order, value in zip(orders, result.divergences, strict=True):
        exact = order / (2 * sigma**2)
        assert abs(value - exact) < 1e-9 and abs(value / exact - 1) < 1e-9
    assert result.resolved and result.label == EVIDENCE


def test_renyi_tends_to_the_gaussian_as_r_vanishes() -> None:
    # Y = X (1 + 0.1 Z): at count 0 the Gaussian mechanism up to O(r^2), never above it.
    orders = (2.0, 8.0)
    result = renyi_divergence(0, 1, sigma=10.0, relative_error=0.1, orders=orders)
    for order, value in zip(orders, result.divergences, strict=True):
        assert 0.97 * order / 200 < value <= order / 200


def test_effective_rho_never_exceeds_the_proven_rho_and_falls_with_the_count() -> None:
    sigma, r = 10.0, 0.3
    values = [
        effective_rho(x, sigma=sigma, relative_error=r, orders=(2.0, 5.0, 20.0))
        for x in (0, 100, 1000)
    ]
    for v in values:
        assert v.resolved and v.label == EVIDENCE
        assert 0 < v.value <= 1 / (2 * sigma**2)  # data processing: never above rho
    assert values[0].value > values[1].value > values[2].value
    # The digest's table (sigma = 10, r = 0.3) at count 1000, orders 2, 5, 20: 6.56e-6,
    # 6.60e-6, 6.80e-6 (three digits). At count 100 its coarse uniform grids give
    # values about 2% lower; ours are stable under halving the step.
    assert values[2].per_order == pytest.approx((6.56e-6, 6.60e-6, 6.80e-6), rel=5e-3)


def test_large_orders_do_not_decay_with_the_count() -> None:
    """Tail evidence: D_a / a approaches rho/2 for large a whatever the count
    (sigma = 1, rho = 1/2): at count 5 and order 64 it is already above 0.24."""
    result = effective_rho(5, sigma=1.0, relative_error=0.3, orders=(2.0, 64.0))
    assert result.resolved
    assert 0.24 < result.per_order[1] < 0.25 < 0.5
    assert result.order == 64.0


def test_expected_absolute_error_matches_monte_carlo() -> None:
    count, sigma, r, n = 30, 10.0, 0.3, 400_000
    samples = (
        TwoStageNoise(rho=0.005, relative_error=r).release(np.full(n, count), rng=seeded(5)).value
    )
    errors = np.abs(samples - count)
    # 5.3 standard errors: two-sided false-failure rate ~1e-7 (CLT).
    exact = expected_absolute_error(count, sigma=sigma, relative_error=r)
    assert abs(errors.mean() - exact) < 5.3 * errors.std() / math.sqrt(n)
    assert expected_absolute_error(count, sigma=sigma, relative_error=0) == pytest.approx(
        sigma * math.sqrt(2 / math.pi)
    )


def test_gaussian_approximation_breaks_near_zero_and_holds_for_large_counts() -> None:
    near_zero = gaussian_approximation_distance(10, sigma=10.0, relative_error=0.3)
    large = gaussian_approximation_distance(10_000, sigma=10.0, relative_error=0.3)
    assert near_zero > 0.02 and large < 1e-5


def test_envelope() -> None:
    assert nonincreasing_envelope([3.0, 1.0, 2.0, 0.5]).tolist() == [3.0, 2.0, 2.0, 0.5]


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: output_log_density([1.0], count=1, sigma=0.0, relative_error=0.3), "sigma"),
        (
            lambda: output_log_density([1.0], count=1, sigma=1.0, relative_error=-0.3),
            "relative_error",
        ),
        (
            lambda: output_log_density([1.0], count=1, sigma=1.0, relative_error=0.001),
            "relative_error",
        ),
        (lambda: output_log_density([1.0], count=math.nan, sigma=1.0, relative_error=0.3), "count"),
        (lambda: renyi_divergence(1, 2, sigma=1.0, relative_error=0.3, orders=(1.0,)), "orders"),
        (lambda: renyi_divergence(1, 2, sigma=1.0, relative_error=0.3, orders=()), "orders"),
        (lambda: renyi_divergence(-1, 2, sigma=1.0, relative_error=0.3), "count_p"),
        (lambda: effective_rho(1.5, sigma=1.0, relative_error=0.3), "count"),  # type: ignore[arg-type]
        (lambda: effective_rho(1, sigma=1.0, relative_error=0.3, steps=1), "steps"),
    ],
)
def test_bad_input(call: object, name: str) -> None:
    with pytest.raises(InvalidParameter, match=name):
        call()  # type: ignore[operator]


def test_nothing_in_accounting_reads_the_analysis() -> None:
    import pathlib

    import dpkit

    root = pathlib.Path(dpkit.__file__).parent
    for path in (root / "accounting").rglob("*.py"):
        assert "groupwise" not in path.read_text()
    assert analysis.EVIDENCE == "numerical evidence, not a guarantee"


def test_renyi_divergence_matches_monte_carlo_with_power() -> None:
    """The digest's cross-check: E_{Y ~ P_3}[(p_4(Y) / p_3(Y))^2] = exp(D_2(P_4 || P_3)),
    estimated from releases of the mechanism with the quadrature densities at the
    samples. CLT bound at 5.3 standard errors (two-sided rate ~1e-7); power: a D_2 30%
    off in either direction is rejected."""
    sigma, r, n = 1.0, 0.3, 40_000
    exact = renyi_divergence(4, 3, sigma=sigma, relative_error=r, orders=(2.0,)).divergences[0]
    samples = TwoStageNoise(rho=0.5, relative_error=r).release(np.full(n, 3), rng=seeded(8)).value
    log_ratio = output_log_density(
        samples, count=4, sigma=sigma, relative_error=r
    ) - output_log_density(samples, count=3, sigma=sigma, relative_error=r)
    terms = np.exp(2.0 * log_ratio)
    bound = 5.3 * terms.std() / math.sqrt(n)
    assert abs(terms.mean() - math.exp(exact)) < bound
    assert abs(terms.mean() - math.exp(1.3 * exact)) > bound
    assert abs(terms.mean() - math.exp(0.7 * exact)) > bound
