"""Poisson-subsampled discrete Gaussian and zCDP events in the RDP accountant.

The bound (removal: the MTZ19 binomial sum at rho; addition: the quadratic majorant,
see dpkit.accounting._math.subsampled_zcdp) is checked against exact Renyi divergences
in both directions, computed in 30-digit mpmath: the one-dimensional discrete Gaussian
(an exact sum over the integers) and binary randomized response (a zCDP mechanism
that is not Gaussian-like). Power: at a rho 30% too small, the curve falls below the
exact divergence of the discrete Gaussian.
"""

from __future__ import annotations

import math

import mpmath
import pytest

from dpkit.accounting import (
    ComposedEvent,
    DiscreteGaussianEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RDPAccountant,
    ZCDPEvent,
    zcdp_rho,
)
from dpkit.accounting._math.conversions import pure_to_zcdp_rho
from dpkit.accounting._math.rdp import subsampled_gaussian_rdp_curve
from dpkit.accounting._math.subsampled_zcdp import poisson_subsampled_zcdp_rdp_curve

ORDERS = (1.5, 2.0, 3.0, 7.5, 16.0, 40.0)


def _divergences(p: list[mpmath.mpf], q: list[mpmath.mpf], order: float) -> tuple[float, float]:
    """(D_order(p || q), D_order(q || p)) for two pmfs on the same points."""
    with mpmath.workdps(30):  # (the sums cancel to ~1e-5: 15 digits are not enough)
        a = mpmath.mpf(order)
        forward = mpmath.fsum(x**a * y ** (1 - a) for x, y in zip(p, q, strict=True))
        backward = mpmath.fsum(y**a * x ** (1 - a) for x, y in zip(p, q, strict=True))
        return float(mpmath.log(forward) / (a - 1)), float(mpmath.log(backward) / (a - 1))


def _discrete_gaussian_pair(sigma: float, shift: int, q: float, order: float):  # type: ignore[no-untyped-def]
    """mu0 = N_Z(0, sigma^2) and the Poisson mixture (1 - q) mu0 + q N_Z(shift, sigma^2)."""
    with mpmath.workdps(30):
        half_width = int(order * shift + 60 * sigma + 20)
        ys = range(-half_width, half_width + 1)
        s2 = 2 * mpmath.mpf(sigma) ** 2
        base = [mpmath.exp(-(mpmath.mpf(y) ** 2) / s2) for y in ys]
        total = mpmath.fsum(base)
        mu0 = [b / total for b in base]
        shifted = [mpmath.exp(-(mpmath.mpf(y - shift) ** 2) / s2) / total for y in ys]
        qm = mpmath.mpf(q)  # 1 - q in floats would be off by an ulp
        mix = [(1 - qm) * x + qm * z for x, z in zip(mu0, shifted, strict=True)]
        return mix, mu0


@pytest.mark.parametrize(("sigma", "shift"), [(0.7, 1), (2.0, 1), (6.0, 2)])
@pytest.mark.parametrize("q", [0.01, 0.3])
def test_discrete_gaussian_is_above_both_exact_directions(
    sigma: float, shift: int, q: float
) -> None:
    event = PoissonSampledEvent(DiscreteGaussianEvent(sigma, shift), q)
    curve = RDPAccountant(ORDERS).compose(event).guarantee.epsilons
    for order, value in zip(ORDERS, curve, strict=True):
        removal, addition = _divergences(*_discrete_gaussian_pair(sigma, shift, q, order), order)
        assert value >= removal
        assert value >= addition


def test_power_a_smaller_rho_is_caught() -> None:
    sigma, q = 2.0, 0.3
    rho = 1 / (2 * sigma**2)
    wrong = poisson_subsampled_zcdp_rdp_curve(q, 0.7 * rho, ORDERS)
    exact = [max(_divergences(*_discrete_gaussian_pair(sigma, 1, q, a), a)) for a in ORDERS]
    assert any(w < e for w, e in zip(wrong, exact, strict=True))


def _randomized_response_pair(epsilon: float, q: float) -> tuple[list[mpmath.mpf], ...]:
    with mpmath.workdps(30):
        keep = mpmath.exp(epsilon) / (1 + mpmath.exp(epsilon))
        mu0 = [keep, 1 - keep]
        mu1 = [1 - keep, keep]
        mix = [(1 - q) * x + q * y for x, y in zip(mu0, mu1, strict=True)]
        return mix, mu0


@pytest.mark.parametrize("epsilon", [0.2, 1.0, 3.0])
@pytest.mark.parametrize("q", [0.001, 0.1, 0.6])
def test_randomized_response_is_below_its_zcdp_curve(epsilon: float, q: float) -> None:
    # Binary randomized response is eps tanh(eps/2)-zCDP (Steinke 2024, Thm 5), not
    # Gaussian: the addition direction is the larger one for some of these parameters.
    rho = pure_to_zcdp_rho(epsilon)
    curve = poisson_subsampled_zcdp_rdp_curve(q, rho, ORDERS)
    for order, value in zip(ORDERS, curve, strict=True):
        removal, addition = _divergences(*_randomized_response_pair(epsilon, q), order)
        assert value >= removal
        assert value >= addition


@pytest.mark.parametrize("sigma", [0.6, 1.0, 3.0])
@pytest.mark.parametrize("q", [0.001, 0.01, 0.2])
def test_gaussian_as_zcdp_is_never_below_the_exact_sampled_gaussian(sigma: float, q: float) -> None:
    orders = (1.25, 2.0, 3.0, 8.0, 10.5, 32.0, 256.0)
    zcdp = poisson_subsampled_zcdp_rdp_curve(q, 1 / (2 * sigma**2), orders)
    exact = subsampled_gaussian_rdp_curve(q, sigma, orders)
    for order, z, g in zip(orders, zcdp, exact, strict=True):
        assert z >= g * (1 - 1e-12)
        if order.is_integer() and q <= 0.01 and sigma <= 1.0:
            assert z <= g * 1.02  # the DP-SGD regime loses little


def test_accountant_routes_each_inner_event() -> None:
    dg = DiscreteGaussianEvent(3.0, 2)
    rho = zcdp_rho(dg)
    assert rho is not None
    got = RDPAccountant(ORDERS).compose(PoissonSampledEvent(dg, 0.05)).guarantee.epsilons
    generic = poisson_subsampled_zcdp_rdp_curve(0.05, rho, ORDERS)
    # The 1-D discrete Gaussian now gets its exact divergences (issue 33): never above.
    assert all(x <= g for x, g in zip(got, generic, strict=True))
    wide = DiscreteGaussianEvent(3.0, 2.5, dimension=2)  # several coordinates: generic
    wide_rho = zcdp_rho(wide)
    assert wide_rho is not None
    got = RDPAccountant(ORDERS).compose(PoissonSampledEvent(wide, 0.05)).guarantee.epsilons
    assert got == poisson_subsampled_zcdp_rdp_curve(0.05, wide_rho, ORDERS)
    z = RDPAccountant(ORDERS).compose(PoissonSampledEvent(ZCDPEvent(0.1), 0.05))
    assert z.guarantee.epsilons == poisson_subsampled_zcdp_rdp_curve(0.05, 0.1, ORDERS)
    # Several Gaussians on the same sample: zCDP adds up.
    both = ComposedEvent((GaussianEvent(1.0), GaussianEvent(2.0)))
    composed = RDPAccountant(ORDERS).compose(PoissonSampledEvent(both, 0.05)).guarantee
    assert composed.epsilons == poisson_subsampled_zcdp_rdp_curve(0.05, 0.625, ORDERS)
    # Pure events keep the amplified pure-DP curve.
    laplace = RDPAccountant(ORDERS).compose(PoissonSampledEvent(LaplaceEvent(1.0), 0.05))
    amplified = math.log1p(0.05 * math.expm1(1.0))
    assert max(laplace.guarantee.epsilons) <= amplified


def test_edge_cases() -> None:
    assert poisson_subsampled_zcdp_rdp_curve(1.0, 0.5, (2.0,)) == (1.0,)
    assert poisson_subsampled_zcdp_rdp_curve(0.3, 0.0, (2.0,)) == (0.0,)
    assert poisson_subsampled_zcdp_rdp_curve(0.0, 0.5, (2.0,)) == (0.0,)
    # Orders beyond the binomial sums keep rho * a.
    assert poisson_subsampled_zcdp_rdp_curve(0.01, 0.5, (1e6,)) == (0.5e6,)
