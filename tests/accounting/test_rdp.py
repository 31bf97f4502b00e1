"""RDPAccountant and the RDP mathematics behind it (dpkit.accounting.rdp, _math.rdp)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import pytest

from dpkit.accounting import (
    DEFAULT_ORDERS,
    RDP,
    ApproxEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PureDP,
    PureEvent,
    RandomizedResponseEvent,
    RepeatedEvent,
    SampledWithoutReplacementEvent,
    TruncatedLaplaceEvent,
    ZCDPEvent,
    laplace_rdp,
)
from dpkit.accounting._math.conversions import pure_to_rdp_epsilon
from dpkit.accounting._math.rdp import (
    gaussian_rdp,
    randomized_response_rdp,
    subsampled_gaussian_log_a,
    subsampled_gaussian_rdp,
    subsampled_gaussian_rdp_curve,
)
from dpkit.accounting.rdp import RDPAccountant, event_rdp
from dpkit.errors import InvalidParameter, UnsupportedEvent
from dpkit.testing import check_accountant

# --- the digest's test vectors (accounting.md §7) ----------------------------------------


@pytest.mark.parametrize(
    ("q", "sigma", "order", "expected"),
    [
        pytest.param(0.1, 2.0, 2.5, 0.00359408, id="q0.1-s2-a2.5"),
        pytest.param(0.01, 1.0, 8.5, 0.00108939, id="q0.01-s1-a8.5"),
        pytest.param(0.01, 1.0, 8.0, 0.000893644, id="q0.01-s1-a8-int"),
        pytest.param(0.1, 2.0, 5.0, 0.00773697, id="q0.1-s2-a5-int"),
    ],
)
def test_subsampled_gaussian_digest_vectors(
    q: float, sigma: float, order: float, expected: float
) -> None:
    # The digest prints 6 significant digits.
    assert subsampled_gaussian_rdp(q, sigma, order) == pytest.approx(expected, rel=5e-6)


def test_signed_series_is_below_the_absolute_coefficient_variant() -> None:
    # The digest: |C| gives 0.00362164 at (0.1, 2, 2.5); the signed series is exact.
    assert subsampled_gaussian_rdp(0.1, 2.0, 2.5) < 0.00362164 * (1 - 5e-3)


# --- against numerical integration (mpmath, 30 digits) -----------------------------------


def _exact_rdp(q: float, sigma: float, order: float) -> mpmath.mpf:
    """``log(A_a)/(a-1)``, A_a = E_{z~N(0,s^2)}[((1-q) + q exp((2z-1)/(2s^2)))^a]."""
    with mpmath.workdps(30):
        q_, s, a = mpmath.mpf(q), mpmath.mpf(sigma), mpmath.mpf(order)

        def integrand(z: mpmath.mpf) -> mpmath.mpf:
            density = mpmath.npdf(z, 0, s)
            return density * ((1 - q_) + q_ * mpmath.exp((2 * z - 1) / (2 * s * s))) ** a

        z0 = s * s * mpmath.log(1 / q_ - 1) + mpmath.mpf(0.5)
        # Split where the integrand changes regime and around the two bumps.
        points = sorted({-mpmath.inf, -10 * s, 0, z0, a, a + 10 * s, mpmath.inf})
        total = mpmath.quad(integrand, points)
        return mpmath.log(total) / (a - 1)


CASES = [
    (0.001, 1.0, 1.01),
    (0.001, 1.0, 10.9),
    (0.01, 1.0, 1.5),
    (0.01, 1.0, 3.7),
    (0.1, 2.0, 1.01),
    (0.1, 1.0, 1.6),
    (0.1, 2.0, 2.5),
    (0.01, 0.5, 1.5),
    (0.01, 0.5, 3.7),
    (0.5, 0.8, 1.5),
    (0.9, 3.0, 2.5),
    (0.01, 10.0, 1.3),
    (0.2, 1.5, 20.5),
    (0.001, 8.0, 1.5),
    (0.02, 20.0, 3.3),
    (0.01, 1.0, 8.0),
    (0.3, 0.7, 5.0),
]


@pytest.mark.parametrize(("q", "sigma", "order"), CASES, ids=[str(c) for c in CASES])
def test_subsampled_gaussian_is_a_tight_upper_bound_on_the_integral(
    q: float, sigma: float, order: float
) -> None:
    ours = subsampled_gaussian_rdp(q, sigma, order)
    exact = _exact_rdp(q, sigma, order)
    assert mpmath.mpf(ours) >= exact  # valid: never below the true divergence
    # Tight: the error allowances cost at most ~1e-15 / (A - 1) relative (q = 0.001, a = 1.01).
    assert ours == pytest.approx(float(exact), rel=1e-6, abs=0.0)


def test_subsampled_gaussian_edges() -> None:
    assert subsampled_gaussian_rdp(0.0, 1.0, 3.5) == 0.0
    assert subsampled_gaussian_rdp(1.0, 2.0, 3.5) == gaussian_rdp(2.0, 3.5) == 3.5 / 8
    # Never above the unsampled Gaussian; increasing in the order and in q.
    for order in (1.5, 2.0, 7.3, 64.0):
        assert subsampled_gaussian_rdp(0.3, 0.7, order) <= gaussian_rdp(0.7, order)
    curve = subsampled_gaussian_rdp_curve(0.05, 1.2, DEFAULT_ORDERS)
    assert all(b >= a for a, b in itertools.pairwise(curve))
    assert subsampled_gaussian_rdp(0.02, 1.0, 4.5) > subsampled_gaussian_rdp(0.01, 1.0, 4.5)
    # Tiny noise: finite (capped by the Gaussian bound), large noise: tiny.
    assert subsampled_gaussian_rdp(0.01, 1e-3, 2.5) <= gaussian_rdp(1e-3, 2.5)
    assert 0.0 < subsampled_gaussian_rdp(0.01, 1e3, 2.5) < 1e-9
    assert subsampled_gaussian_log_a(0.5, 1.0, 1) == 0.0


def test_integer_log_a_matches_exact_binomial_sum() -> None:
    q, sigma, n = Fraction(1, 100), 1.0, 12
    with mpmath.workdps(40):
        total = mpmath.fsum(
            math.comb(n, k)
            * (mpmath.mpf((1 - q).numerator) / (1 - q).denominator) ** (n - k)
            * (mpmath.mpf(q.numerator) / q.denominator) ** k
            * mpmath.exp(mpmath.mpf(k * k - k) / (2 * sigma**2))
            for k in range(n + 1)
        )
        exact = mpmath.log(total)
    ours = subsampled_gaussian_log_a(0.01, sigma, n)
    assert mpmath.mpf(ours) >= exact
    assert ours == pytest.approx(float(exact), rel=1e-12, abs=0.0)


# --- randomized response ------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.01, 0.5, 1.0, 5.0, 40.0])
@pytest.mark.parametrize("order", [1.01, 2.0, 3.7, 100.0])
def test_binary_randomized_response_is_the_tight_pure_curve(epsilon: float, order: float) -> None:
    ours = randomized_response_rdp(epsilon, 2, order)
    assert ours == pytest.approx(pure_to_rdp_epsilon(epsilon, order), rel=1e-12, abs=1e-300)
    assert ours <= epsilon


@pytest.mark.parametrize("categories", [3, 10, 1000])
@pytest.mark.parametrize(("epsilon", "order"), [(0.3, 1.5), (1.0, 2.0), (4.0, 12.5)])
def test_k_ary_randomized_response_matches_the_divergence(
    categories: int, epsilon: float, order: float
) -> None:
    with mpmath.workdps(40):
        e, a, k = mpmath.mpf(epsilon), mpmath.mpf(order), categories
        c = mpmath.exp(e) + k - 1
        p, r = mpmath.exp(e) / c, 1 / c
        divergence = p**a * r ** (1 - a) + r**a * p ** (1 - a) + (k - 2) * r
        exact = mpmath.log(divergence) / (a - 1)
    ours = randomized_response_rdp(epsilon, categories, order)
    assert mpmath.mpf(ours) >= exact
    assert ours == pytest.approx(float(exact), rel=1e-12, abs=0.0)
    assert ours < randomized_response_rdp(epsilon, 2, order)


# --- the accountant -----------------------------------------------------------------------

ORDERS = (1.5, 2.0, 4.0, 10.5, 32.0)


def curve(event: object, orders: tuple[float, ...] = ORDERS) -> tuple[float, ...]:
    result = event_rdp(event, orders)  # type: ignore[arg-type]
    assert result is not None
    return result.epsilons


def test_gaussian_curve_is_exact() -> None:
    assert curve(GaussianEvent(2.0)) == tuple(a / 8 for a in ORDERS)
    values = curve(GaussianEvent(0.3))
    for a, value in zip(ORDERS, values, strict=True):
        assert Fraction(value) >= Fraction(a) / (2 * Fraction(0.3) ** 2)
        assert value == pytest.approx(a / (2 * 0.09), rel=1e-15)


def test_laplace_discrete_gaussian_and_zcdp_curves() -> None:
    assert curve(LaplaceEvent(2.0)) == tuple(laplace_rdp(0.5, a) for a in ORDERS)
    assert curve(DiscreteGaussianEvent(2.0, 1)) == tuple(a / 8 for a in ORDERS)
    assert curve(DiscreteGaussianEvent(4.0, 2.0, dimension=3)) == tuple(a / 8 for a in ORDERS)
    assert curve(ZCDPEvent(0.25)) == tuple(0.25 * a for a in ORDERS)


def test_pure_events_use_the_tight_curve_and_the_best_bound() -> None:
    assert curve(PureEvent(1.0)) == PureDP(1.0).to_rdp(ORDERS).epsilons
    assert curve(DiscreteLaplaceEvent(2.0, 1)) == PureDP(0.5).to_rdp(ORDERS).epsilons
    # Exponential mechanism: min of the pure curve and the bounded-range curves (the
    # exact two-valued worst case, 0.18311 at order 1.5; Cesar & Rogers 2021 give 0.18580).
    em = curve(ExponentialMechanismEvent(1.0))
    pure = PureDP(1.0).to_rdp(ORDERS).epsilons
    assert em[0] == pytest.approx(0.18311253868) and em[0] < pure[0]
    assert all(e <= p for e, p in zip(em, pure, strict=True))
    assert curve(RandomizedResponseEvent(1.0, 5)) == tuple(
        randomized_response_rdp(1.0, 5, a) for a in ORDERS
    )


def test_subsampled_events() -> None:
    sampled = PoissonSampledEvent(GaussianEvent(1.0), 0.01)
    assert curve(sampled) == subsampled_gaussian_rdp_curve(0.01, 1.0, ORDERS)
    pure = PoissonSampledEvent(PureEvent(1.0), 0.1)
    amplified = math.log1p(0.1 * math.expm1(1.0))
    assert curve(pure) == pytest.approx(PureDP(amplified).to_rdp(ORDERS).epsilons, rel=1e-14)
    wor = SampledWithoutReplacementEvent(LaplaceEvent(1.0), 10, 100)
    assert RDPAccountant(ORDERS).supports(wor)


@pytest.mark.parametrize(
    "event",
    [
        # (ApproxEvent itself is composed since issue 33, its delta kept apart; see
        # tests/accounting/test_rdp_order_inf_and_approx_events.py.)
        PoissonSampledEvent(ApproxEvent(1.0, 1e-6), 0.5),
        TruncatedLaplaceEvent(1.0, 1e-6),
        SampledWithoutReplacementEvent(ApproxEvent(1.0, 1e-6), 10, 100),
        PoissonSampledEvent(TruncatedLaplaceEvent(1.0, 1e-6), 0.5),
        ComposedEvent((GaussianEvent(1.0), TruncatedLaplaceEvent(1.0, 1e-6))),
    ],
    ids=[
        "poisson-approx",
        "truncated-laplace",
        "wor-approx",
        "poisson-truncated-laplace",
        "composed",
    ],
)
def test_unsupported_events_are_refused_without_change(event: object) -> None:
    accountant = RDPAccountant().compose(GaussianEvent(3.0))
    before = accountant.guarantee
    assert not accountant.supports(event)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedEvent):
        accountant.compose(event)  # type: ignore[arg-type]
    assert accountant.guarantee == before
    assert len(accountant.ledger.events) == 1


def test_contract() -> None:
    check_accountant(RDPAccountant, GaussianEvent(1.0), TruncatedLaplaceEvent(1.0, 1e-6))
    check_accountant(
        RDPAccountant,
        PoissonSampledEvent(GaussianEvent(1.0), 0.01),
        PoissonSampledEvent(TruncatedLaplaceEvent(1.0, 1e-6), 0.5),
    )


def test_composition_adds_exactly() -> None:
    step = PoissonSampledEvent(GaussianEvent(1.1), 0.02)
    one = RDPAccountant(ORDERS).compose(step)
    many = RDPAccountant(ORDERS).compose(step, count=7)
    loop = RDPAccountant(ORDERS)
    for _ in range(7):
        loop.compose(step)
    nested = RDPAccountant(ORDERS).compose(
        ComposedEvent((RepeatedEvent(step, 3), NoOpEvent(), RepeatedEvent(step, 4)))
    )
    assert many.guarantee == loop.guarantee == nested.guarantee
    for single, total in zip(one.guarantee.epsilons, many.guarantee.epsilons, strict=True):
        assert Fraction(total) >= 7 * Fraction(single)
        assert total == pytest.approx(7 * single, rel=1e-15)
    assert (7 * one.guarantee) == many.guarantee


def test_queries() -> None:
    empty = RDPAccountant()
    assert empty.get_epsilon(1e-5) == 0.0 and empty.get_delta(0.0) == 0.0
    assert empty.compose(NoOpEvent()).get_epsilon(0.0) == 0.0
    accountant = RDPAccountant().compose(GaussianEvent(1.0))
    assert accountant.get_epsilon(0.0) == math.inf
    epsilon = accountant.get_epsilon(1e-5)
    guarantee = accountant.guarantee
    assert isinstance(guarantee, RDP) and guarantee.orders == DEFAULT_ORDERS
    assert epsilon == guarantee.to_approx(1e-5).epsilon
    # ZCDP(0.5): the continuous CKS20 optimum is 4.7284; a grid can only be above it.
    assert 4.7283 < epsilon < 4.74
    delta = accountant.get_delta(epsilon)
    assert delta <= 1e-5 * (1 + 1e-9)
    assert accountant.get_delta(0.0) <= 1.0
    assert accountant.get_epsilon(0.5) <= epsilon


def test_orders_are_validated() -> None:
    with pytest.raises(InvalidParameter):
        RDPAccountant((2.0, 1.5))
    with pytest.raises(InvalidParameter):
        RDPAccountant((1.0, 2.0))
    with pytest.raises(InvalidParameter):
        RDPAccountant(())
    assert RDPAccountant([2, 3]).orders == (2.0, 3.0)
    assert event_rdp(TruncatedLaplaceEvent(1.0, 1e-6)) is None


# ------------------------------------------------- batched evaluation across orders


@pytest.mark.parametrize("q", [1e-6, 0.01, 0.3, 0.6, 0.95])
@pytest.mark.parametrize("sigma", [0.4, 1.0, 3.0, 40.0])
def test_batched_series_match_per_order(q: float, sigma: float) -> None:
    from dpkit.accounting._math import rdp as rdp_math

    fractional = [1.01, 1.5, 2.37, 7.9, 10.9, 33.3, 70.5, 300.25]
    batched = rdp_math._log_a_frac_many(q, sigma, fractional)
    for order, value in zip(fractional, batched, strict=True):
        single = rdp_math._log_a_frac(q, sigma, order)
        assert (value is None) == (single is None)
        if value is not None and single is not None:
            # The same bound; only the sums' allowance differs, by ~2^-84 of A.
            assert value == pytest.approx(single, rel=1e-9, abs=1e-23)
    integers = [1, 2, 3, 11, 64, 1024]
    for order, value in zip(integers, rdp_math._log_a_int_many(q, sigma, integers), strict=True):
        assert value == subsampled_gaussian_log_a(q, sigma, order)


def test_batched_curve_matches_order_by_order() -> None:
    for q, sigma in [(0.01, 1.0), (0.2, 0.7), (0.001, 8.0)]:
        curve = subsampled_gaussian_rdp_curve(q, sigma, DEFAULT_ORDERS)
        for order, value in zip(DEFAULT_ORDERS, curve, strict=True):
            assert value == pytest.approx(subsampled_gaussian_rdp(q, sigma, order), rel=1e-9)


def test_sum_pairs_is_nearly_exact() -> None:
    import numpy as np

    from dpkit.accounting._math.rdp import _sum_pairs

    rng = np.random.default_rng(0)
    for width in (1, 2, 7, 64, 129, 4096):
        terms = np.exp(rng.uniform(-60.0, 0.0, size=(5, width)))
        hi, lo = _sum_pairs(terms)
        for row, h, low in zip(terms.tolist(), hi.tolist(), lo.tolist(), strict=True):
            exact = sum(Fraction(t) for t in row)
            assert abs(Fraction(h) + Fraction(low) - exact) <= exact * Fraction(2) ** -86


def test_fast_exact_helpers_match_fraction_versions() -> None:
    from dpkit.accounting._math.rdp import _gaussian_rdp_float
    from dpkit.accounting._math.rounding import fraction_up
    from dpkit.accounting.rdp import _in_units, _units_up

    for sigma in (0.3, 1.0, 1.1, 7.77, 1e-160):
        for order in DEFAULT_ORDERS[::7]:
            assert _gaussian_rdp_float(sigma, order) == gaussian_rdp(sigma, order)
    # The accountant's running sums: integers in units of 2^-1074, read out rounded up.
    for units in (0, 1, 3**700, 10**400 << 1074, 7 * 10**300):
        assert _units_up(units) == fraction_up(Fraction(units, 1 << 1074))
    for value in (5e-324, 1e-300, 0.1, 3.7e300):
        assert _units_up(_in_units(value)) == value
