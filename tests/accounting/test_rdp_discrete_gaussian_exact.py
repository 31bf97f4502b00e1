"""Exact RDP of the Poisson-subsampled one-dimensional discrete Gaussian.

The certified sums of :mod:`dpkit.accounting._math.discrete_gaussian_rdp` are checked
against 50-digit mpmath sums over the integers, both directions, on a grid of sigma,
q and orders (fractional included): never below, within 1e-9 relative. Power: a
sigma 1% too large gives values below the reference, which the same check rejects.
"""

from __future__ import annotations

import math

import mpmath
import pytest

from dpkit.accounting import (
    DiscreteGaussianEvent,
    GaussianEvent,
    PoissonSampledEvent,
    RDPAccountant,
)
from dpkit.accounting._math.discrete_gaussian_rdp import (
    subsampled_discrete_gaussian_log_moments,
    subsampled_discrete_gaussian_rdp_curve,
)
from dpkit.accounting._math.subsampled_zcdp import poisson_subsampled_zcdp_rdp_curve


def _reference(q: float, sigma: float, shift: int, order: float) -> tuple[float, float]:
    """(log A_a, log B_a) at 50 digits: the sums over a window far beyond the mass."""
    with mpmath.workdps(50):
        qm, a, c = mpmath.mpf(q), mpmath.mpf(order), 2 * mpmath.mpf(sigma) ** 2
        half = int(order * shift + 45 * sigma + 45)
        ks = range(-half, half + 1)
        weights = [mpmath.exp(-(mpmath.mpf(k) ** 2) / c) for k in ks]
        z = mpmath.fsum(weights)
        mix = [(1 - qm) + qm * mpmath.exp((2 * k * shift - shift * shift) / c) for k in ks]
        big_a = mpmath.fsum(w * x**a for w, x in zip(weights, mix, strict=True)) / z
        big_b = mpmath.fsum(w * x ** (1 - a) for w, x in zip(weights, mix, strict=True)) / z
        return float(mpmath.log(big_a)), float(mpmath.log(big_b))


GRID = [
    (sigma, q, order)
    for sigma in (0.5, 1.3, 6.0, 50.0)
    for q in (1e-3, 0.05, 0.5)
    for order in (1.5, 2.0, 3.7, 16.0, 256.0)
]


@pytest.mark.parametrize(("sigma", "q", "order"), GRID)
def test_never_below_and_within_1e9_of_mpmath(sigma: float, q: float, order: float) -> None:
    moments = subsampled_discrete_gaussian_log_moments(q, sigma, 1, order)
    assert moments is not None
    for got, want in zip(moments, _reference(q, sigma, 1, order), strict=True):
        assert got >= want
        assert got <= want * (1.0 + 1e-9)


@pytest.mark.parametrize(("sigma", "shift"), [(0.7, 2), (3.0, 3)])
def test_larger_shifts(sigma: float, shift: int) -> None:
    for order in (1.25, 7.0):
        moments = subsampled_discrete_gaussian_log_moments(0.1, sigma, shift, order)
        assert moments is not None
        for got, want in zip(moments, _reference(0.1, sigma, shift, order), strict=True):
            assert want <= got <= want * (1.0 + 1e-9)


def test_power_a_wrong_sigma_fails_the_check() -> None:
    # The same comparison rejects the values of a sigma 1% too large.
    moments = subsampled_discrete_gaussian_log_moments(0.05, 1.3 * 1.01, 1, 3.7)
    assert moments is not None
    reference = _reference(0.05, 1.3, 1, 3.7)
    assert any(got < want for got, want in zip(moments, reference, strict=True))


def test_sensitivity_takes_the_worst_shift() -> None:
    orders = (1.5, 4.0)
    curve = subsampled_discrete_gaussian_rdp_curve(0.1, 1.0, 3, orders)
    for a, value in zip(orders, curve, strict=True):
        assert value is not None
        worst = max(max(_reference(0.1, 1.0, d, a)) for d in (1, 2, 3)) / (a - 1.0)
        assert worst <= value <= worst * (1.0 + 1e-9)


def test_integer_orders_equal_the_gaussian_removal() -> None:
    # CKS20 (proof of Prop. 5): the integer moments of the 1-D discrete Gaussian pair are
    # the Gaussian's, so at integer orders the removal sum is the MTZ19 sum.
    for sigma, q in ((0.8, 0.2), (2.5, 0.01)):
        for order in (2.0, 5.0, 12.0):
            moments = subsampled_discrete_gaussian_log_moments(q, sigma, 1, order)
            assert moments is not None
            gaussian = RDPAccountant((order,)).compose(PoissonSampledEvent(GaussianEvent(sigma), q))
            log_a = gaussian.guarantee.epsilons[0] * (order - 1.0)
            assert math.isclose(moments[0], log_a, rel_tol=1e-9)
            assert moments[1] <= moments[0]  # addition is the smaller direction here


def test_accountant_uses_the_exact_curve() -> None:
    orders = (1.5, 2.5, 5.0, 50.0)
    event = PoissonSampledEvent(DiscreteGaussianEvent(2.5, 1), 0.01)
    curve = RDPAccountant(orders).compose(event).guarantee.epsilons
    generic = poisson_subsampled_zcdp_rdp_curve(0.01, 0.5 / 2.5**2, orders)
    assert all(x <= g for x, g in zip(curve, generic, strict=True))
    assert curve[2] < generic[2] * 0.99  # the quadratic-majorant addition bound dominated
    for a, value in zip(orders, curve, strict=True):
        assert value >= max(_reference(0.01, 2.5, 1, a)) / (a - 1.0)


def test_generic_path_kept_elsewhere() -> None:
    orders = (2.0, 8.0)
    for inner in (DiscreteGaussianEvent(2.0, 1.5, dimension=2), DiscreteGaussianEvent(2.0, 9)):
        event = PoissonSampledEvent(inner, 0.1)
        rho = inner.sensitivity**2 / (2 * inner.sigma**2)
        curve = RDPAccountant(orders).compose(event).guarantee.epsilons
        assert curve == poisson_subsampled_zcdp_rdp_curve(0.1, rho, orders)
