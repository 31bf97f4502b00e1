"""Sampling without replacement in the RDP accountant (Wang, Balle & Kasiviswanathan 2019).

The bound (Thm 9, with Cor. 10 between integer orders) is recomputed here from its
statement in 40-digit mpmath: dpkit must be at or above it and within 1e-10 relative,
so a wrong term (a missing factor, a wrong binomial) fails. It is also checked against
a lower bound on the true divergence (one record of a sum query swapped: output
``N(0, s^2)`` against ``(1 - g) N(0, s^2) + g N(1, s^2)``, exact at integer orders);
Thm 9 is not tight (up to 4x above that at small g), so no 30%-power check applies.
"""

from __future__ import annotations

import math

import mpmath
import pytest

from dpkit.accounting import (
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RandomizedResponseEvent,
    RDPAccountant,
    RepeatedEvent,
    SampledWithoutReplacementEvent,
    SingleEpochTreeAggregationEvent,
    pure_epsilon,
)
from dpkit.accounting._math.without_replacement import without_replacement_rdp_curve

ORDERS = (1.5, 2.0, 3.0, 4.5, 8.0, 16.0, 40.0)


def _thm9(gamma: float, n: int, eps, eps_inf: float | None) -> mpmath.mpf:  # type: ignore[no-untyped-def]
    """log(T_n) from WBK19 Thm 9, in mpmath; eps(j) gives the inner RDP at order j."""
    with mpmath.workdps(40):
        g = mpmath.mpf(gamma)

        def pure_cap(j: int) -> mpmath.mpf:
            if eps_inf is None:
                return mpmath.mpf(2)
            return min(mpmath.mpf(2), mpmath.expm1(mpmath.mpf(eps_inf)) ** j)

        e2 = eps(2)
        total = 1 + g**2 * mpmath.binomial(n, 2) * min(
            4 * mpmath.expm1(e2), mpmath.exp(e2) * pure_cap(2)
        )
        for j in range(3, n + 1):
            total += g**j * mpmath.binomial(n, j) * mpmath.exp((j - 1) * eps(j)) * pure_cap(j)
        return mpmath.log(total)


def _reference(gamma: float, order: float, eps, eps_inf: float | None) -> mpmath.mpf:  # type: ignore[no-untyped-def]
    n = math.floor(order)
    theta = order - n
    low = _thm9(gamma, n, eps, eps_inf) if n >= 2 else mpmath.mpf(0)
    cgf = low if theta == 0 else (1 - theta) * low + theta * _thm9(gamma, n + 1, eps, eps_inf)
    return cgf / (order - 1)


def _gaussian_eps(sigma: float):  # type: ignore[no-untyped-def]
    return lambda j: mpmath.mpf(j) / (2 * mpmath.mpf(sigma) ** 2)


def _laplace_eps(epsilon: float):  # type: ignore[no-untyped-def]
    def eps(j: int) -> mpmath.mpf:  # Mironov 2017, Prop. 6
        e, a = mpmath.mpf(epsilon), mpmath.mpf(j)
        inner = a / (2 * a - 1) * mpmath.exp((a - 1) * e) + (a - 1) / (2 * a - 1) * mpmath.exp(
            -a * e
        )
        return mpmath.log(inner) / (a - 1)

    return eps


@pytest.mark.parametrize("sigma", [0.7, 1.0, 3.0])
@pytest.mark.parametrize(("m", "n"), [(1, 1000), (10, 1000), (300, 1000)])
def test_gaussian_matches_theorem_9(sigma: float, m: int, n: int) -> None:
    event = SampledWithoutReplacementEvent(GaussianEvent(sigma), m, n)
    curve = RDPAccountant(ORDERS).compose(event).guarantee.epsilons
    for order, value in zip(ORDERS, curve, strict=True):
        plain = order / (2 * sigma**2)
        reference = min(_reference(m / n, order, _gaussian_eps(sigma), None), plain)
        assert value >= reference
        assert value <= reference * (1 + 1e-10)


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 3.0])
def test_laplace_matches_theorem_9_with_its_pure_bound(epsilon: float) -> None:
    gamma = 0.05
    event = SampledWithoutReplacementEvent(LaplaceEvent(1 / epsilon), 50, 1000)
    curve = RDPAccountant(ORDERS).compose(event).guarantee.epsilons
    amplified = math.log1p(gamma * math.expm1(epsilon))
    for order, value in zip(ORDERS, curve, strict=True):
        reference = _reference(gamma, order, _laplace_eps(epsilon), epsilon)
        reference = min(reference, _laplace_eps(epsilon)(order))
        # The accountant may also use the tight pure-DP curve at the amplified epsilon.
        assert value >= min(reference, _steinke(amplified, order))
        assert value <= reference * (1 + 1e-10)
        assert value <= amplified * (1 + 1e-12)


def _steinke(epsilon: float, order: float) -> mpmath.mpf:
    """The tight RDP curve of an epsilon-DP pair (Steinke 2024, Thm 4), in mpmath."""
    with mpmath.workdps(40):
        e, a = mpmath.mpf(epsilon), mpmath.mpf(order)
        return e - mpmath.log((1 + mpmath.exp(-e)) / (1 + mpmath.exp(-(2 * a - 1) * e))) / (a - 1)


def _exact_lower_bound(gamma: float, sigma: float, order: int) -> mpmath.mpf:
    """D_order((1-g) N(0) + g N(1) || N(0)), exact (binomial expansion, integer order)."""
    with mpmath.workdps(40):
        g = mpmath.mpf(gamma)
        total = mpmath.fsum(
            mpmath.binomial(order, k)
            * (1 - g) ** (order - k)
            * g**k
            * mpmath.exp(mpmath.mpf(k * k - k) / (2 * mpmath.mpf(sigma) ** 2))
            for k in range(order + 1)
        )
        return mpmath.log(total) / (order - 1)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("gamma_m", [1, 20, 500])
def test_above_the_true_divergence_of_a_swapped_record(sigma: float, gamma_m: int) -> None:
    orders = (2.0, 3.0, 8.0, 32.0, 128.0)
    event = SampledWithoutReplacementEvent(GaussianEvent(sigma), gamma_m, 1000)
    curve = RDPAccountant(orders).compose(event).guarantee.epsilons
    for order, value in zip(orders, curve, strict=True):
        assert value >= _exact_lower_bound(gamma_m / 1000, sigma, int(order))


def test_full_sample_is_the_inner_curve_and_composition_counts() -> None:
    inner = RDPAccountant(ORDERS).compose(GaussianEvent(2.0)).guarantee.epsilons
    full = SampledWithoutReplacementEvent(GaussianEvent(2.0), 100, 100)
    assert RDPAccountant(ORDERS).compose(full).guarantee.epsilons == inner
    # A pure inner event with m == n: the amplified epsilon is the inner one (the
    # rounded-up fraction m / n once exceeded 1 and was refused).
    whole = SampledWithoutReplacementEvent(LaplaceEvent(1.0), 7, 7)
    assert pure_epsilon(whole) == 1.0
    laplace = RDPAccountant(ORDERS).compose(LaplaceEvent(1.0)).guarantee.epsilons
    assert RDPAccountant(ORDERS).compose(whole).guarantee.epsilons == laplace
    step = SampledWithoutReplacementEvent(GaussianEvent(1.0), 10, 1000)
    once = RDPAccountant(ORDERS).compose(step).guarantee.epsilons
    many = RDPAccountant(ORDERS).compose(RepeatedEvent(step, 250)).guarantee.epsilons
    assert many == pytest.approx([250 * v for v in once], rel=1e-15)


def test_inner_events_must_be_replace_one() -> None:
    accountant = RDPAccountant(ORDERS)
    rr = SampledWithoutReplacementEvent(RandomizedResponseEvent(1.0, 3), 10, 100)
    assert accountant.supports(rr)
    for inner in (
        PoissonSampledEvent(GaussianEvent(1.0), 0.1),
        SingleEpochTreeAggregationEvent(1.0, 4),
    ):
        assert not accountant.supports(SampledWithoutReplacementEvent(inner, 10, 100))
    assert not RDPAccountant(ORDERS, relation="add_remove").supports(rr)
    # A sample of a sample drawn without replacement is one drawn without replacement.
    nested = SampledWithoutReplacementEvent(GaussianEvent(1.0), 5, 10)
    assert accountant.supports(SampledWithoutReplacementEvent(nested, 10, 100))


def test_orders_beyond_the_limit_keep_the_inner_curve() -> None:
    curve = without_replacement_rdp_curve(0.01, [j / 2 for j in range(2, 11)], [5.0], (12.0,))
    assert curve == (5.0,)
