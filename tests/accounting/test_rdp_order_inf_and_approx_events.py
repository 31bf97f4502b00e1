"""RDP at order infinity and (epsilon, delta) events in the RDP accountant (issue 33).

Order inf: the value there bounds the max-divergence, i.e. it is a pure-DP epsilon; it
is the event's pure epsilon or ``inf``, adds under composition, and converts to
(eps, delta) at every delta >= 0. (epsilon, delta) events: ``ApproxEvent(eps, delta)``
adds eps's randomized-response curve and keeps ``1 - prod (1 - delta_i)`` apart; every
path that would return a bare RDP curve refuses it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpkit.accounting import (
    RDP,
    ZCDP,
    ApproxEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDP,
    PureEvent,
    RandomizedResponseEvent,
    RDPAccountant,
    RepeatAndSelectEvent,
    RepeatedEvent,
    SampledWithoutReplacementEvent,
    SingleEpochTreeAggregationEvent,
    SparseVectorEvent,
    TruncatedLaplaceEvent,
    ZCDPEvent,
    event_rdp,
    pure_epsilon,
)
from dpkit.accounting._math import conversions
from dpkit.accounting._math.rounding import fraction_down
from dpkit.accounting.filters import RDPFilter, RDPOdometer
from dpkit.errors import InvalidParameter, UnsupportedEvent

INF = math.inf
FINITE = (1.5, 2.0, 4.0, 16.0, 64.0)
GRID = (*FINITE, INF)

# ---------------------------------------------------------------- order infinity


def test_rdp_guarantee_accepts_inf_as_last_order_only() -> None:
    rdp = RDP((2.0, INF), (0.5, 1.0))
    assert rdp.orders == (2.0, INF)
    for orders in ((INF, 2.0), (2.0, INF, INF), (INF, INF)):
        with pytest.raises(InvalidParameter, match=r"\(1, inf\]"):
            RDP(orders, (0.1,) * len(orders))
    # The conversions of other guarantees to RDP stay on finite orders (clear error).
    with pytest.raises(InvalidParameter, match=r"\(1, inf\)"):
        ZCDP(0.5).to_rdp((2.0, INF))
    with pytest.raises(InvalidParameter, match=r"\(1, inf\)"):
        PureDP(0.5).to_rdp((2.0, INF))
    # A grid cached as valid for RDP is not accepted by the finite-only callers.
    RDP(GRID, (0.1,) * len(GRID))
    with pytest.raises(InvalidParameter):
        PureDP(0.5).to_rdp(GRID)


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (PureEvent(0.7), 0.7),
        (LaplaceEvent(2.0), 0.5),
        (DiscreteLaplaceEvent(4.0, 2), 0.5),
        (RandomizedResponseEvent(math.log(91.0), 10), math.log(91.0)),
        (SparseVectorEvent(0.3), 0.3),
        (ApproxEvent(0.4, 0.0), 0.4),
        (PoissonSampledEvent(PureEvent(1.0), 0.1), math.log1p(0.1 * math.expm1(1.0))),
        (GaussianEvent(1.0), INF),
        (DiscreteGaussianEvent(2.0, 1), INF),
        (ZCDPEvent(0.1), INF),
        (PoissonSampledEvent(GaussianEvent(1.0), 0.01), INF),
        (SingleEpochTreeAggregationEvent(2.0, 8), INF),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, float) else "",
)
def test_order_inf_value_is_the_pure_epsilon_or_inf(event: object, expected: float) -> None:
    curve = RDPAccountant(GRID).compose(event).guarantee.epsilons  # type: ignore[arg-type]
    if math.isinf(expected):
        assert math.isinf(curve[-1])
    else:
        assert curve[-1] == pytest.approx(expected, rel=1e-15)
        assert curve[-1] >= expected * (1 - 1e-15)
        assert curve[-1] == pure_epsilon(event)  # type: ignore[arg-type]
        # D_inf bounds every finite order (RDP is non-decreasing in the order).
        assert max(curve[:-1]) <= curve[-1]
    # The finite orders are those of the grid without inf.
    finite = RDPAccountant(FINITE).compose(event).guarantee.epsilons  # type: ignore[arg-type]
    assert curve[:-1] == finite


def test_wrapped_pure_events_get_their_pure_epsilon_at_inf() -> None:
    for event in (
        SampledWithoutReplacementEvent(LaplaceEvent(1.0), 10, 100),
        RepeatAndSelectEvent(LaplaceEvent(1.0), mean=5.0, shape=1.0),
    ):
        expected = pure_epsilon(event)
        assert expected is not None
        curve = RDPAccountant(GRID).compose(event).guarantee.epsilons
        assert curve[-1] == expected
        assert curve[:-1] == RDPAccountant(FINITE).compose(event).guarantee.epsilons
    gaussian = RepeatAndSelectEvent(GaussianEvent(2.0), mean=5.0, shape=1.0)
    assert math.isinf(RDPAccountant(GRID).compose(gaussian).guarantee.epsilons[-1])


def test_only_inf_on_the_grid() -> None:
    accountant = RDPAccountant((INF,)).compose(LaplaceEvent(2.0), count=3)
    assert accountant.guarantee.epsilons == (1.5,)
    assert accountant.get_epsilon(0.0) == 1.5
    assert accountant.get_delta(1.5) == 0.0
    assert RDPAccountant((INF,)).supports(GaussianEvent(1.0))
    assert not RDPAccountant((INF,)).supports(TruncatedLaplaceEvent(1.0, 1e-6))


def test_composition_adds_at_inf_and_converts_at_every_delta() -> None:
    events = [LaplaceEvent(1.0), RandomizedResponseEvent(0.5, 4), PureEvent(0.25)]
    accountant = RDPAccountant(GRID)
    for event in events:
        accountant.compose(event, count=2)
    total = accountant.guarantee.epsilons[-1]
    epsilons = [pure_epsilon(e) for e in events]
    exact = 2 * sum((Fraction(e) for e in epsilons if e is not None), Fraction(0))
    assert Fraction(total) >= exact
    assert total == pytest.approx(float(exact), rel=1e-15)
    # D_inf <= eps both ways is eps-DP: (eps, delta) at every delta >= 0.
    assert accountant.get_epsilon(0.0) == total
    for delta in (1e-12, 1e-6, 1e-2, 0.5):
        assert 0.0 <= accountant.get_epsilon(delta) <= total
    assert accountant.get_delta(total) == 0.0
    assert accountant.get_delta(total * 1.0001) == 0.0
    assert 0.0 < accountant.get_delta(total * 0.9) < 1.0
    assert accountant.guarantee.to_approx(0.0).epsilon == total
    assert accountant.guarantee.delta_for(total) == 0.0


def test_infinite_order_inf_changes_nothing_and_gives_no_nan() -> None:
    event = PoissonSampledEvent(GaussianEvent(1.0), 0.01)
    with_inf = RDPAccountant(GRID).compose(event, count=100)
    without = RDPAccountant(FINITE).compose(event, count=100)
    for delta in (1e-8, 1e-5, 0.1):
        assert with_inf.get_epsilon(delta) == without.get_epsilon(delta)
    for epsilon in (0.0, 0.5, 2.0, 10.0):
        assert with_inf.get_delta(epsilon) == without.get_delta(epsilon)
    assert with_inf.get_epsilon(0.0) == INF
    with pytest.raises(InvalidParameter):
        with_inf.guarantee.to_approx(0.0)  # no finite order-inf value: delta must be > 0
    # Mixed: a Gaussian makes the inf order inf, a pure event alone keeps it finite.
    mixed = RDPAccountant(GRID).compose(LaplaceEvent(1.0)).compose(GaussianEvent(5.0))
    assert math.isinf(mixed.guarantee.epsilons[-1])


@pytest.mark.parametrize("eps_inf", [0.0, 0.3, 2.0, INF])
def test_conversion_functions_at_inf_never_nan(eps_inf: float) -> None:
    orders, curve = (2.0, 8.0, INF), (0.05, 0.2, eps_inf)
    for delta in (0.0, 1e-9, 1e-3, 0.3):
        value = conversions.rdp_epsilon(orders, curve, delta)
        assert not math.isnan(value)
        finite_only = INF if delta == 0.0 else conversions.rdp_epsilon(orders[:2], curve[:2], delta)
        assert value == min(finite_only, eps_inf)
    for epsilon in (0.0, 0.1, 0.3, 1.0, 5.0):
        value = conversions.rdp_delta(orders, curve, epsilon)
        assert not math.isnan(value)
        finite_only = conversions.rdp_delta(orders[:2], curve[:2], epsilon)
        if epsilon >= eps_inf:
            assert value == 0.0
        else:
            assert value <= finite_only  # at most the KL bound of eps_inf added
            if math.isinf(eps_inf):
                assert value == finite_only


def test_rdp_filter_and_odometer_with_order_inf() -> None:
    budget = RDP((2.0, INF), (1.0, 1.0))
    spend_filter = RDPFilter(budget)
    assert spend_filter.spend(PureEvent(0.4)).epsilons[-1] == 0.4  # the charge
    assert spend_filter.spend(PureDP(0.4)).epsilons[-1] == 0.4
    assert spend_filter.spend(ZCDP(0.0)).epsilons[-1] == 0.0
    assert spend_filter.spent.epsilons[-1] == 0.8
    with pytest.raises(InvalidParameter, match="order inf"):
        spend_filter.spend(GaussianEvent(10.0))  # no bound on D_inf
    with pytest.raises(InvalidParameter, match="order inf"):
        spend_filter.spend(ZCDP(0.001))
    assert spend_filter.spent.epsilons[-1] == 0.8  # the refusals spent nothing
    odometer = RDPOdometer((2.0, INF))
    odometer.spend(LaplaceEvent(2.0))
    assert odometer.spent.epsilons[-1] == 0.5


# ---------------------------------------------------------------- (epsilon, delta) events


def _gaussian_delta(sigma: float, epsilon: float) -> float:
    """Exact delta(eps) of the Gaussian mechanism (Balle & Wang 2018, Thm 8)."""
    mu = 1.0 / sigma
    return float(
        stats.norm.cdf(-epsilon / mu + mu / 2)
        - math.exp(epsilon) * stats.norm.cdf(-epsilon / mu - mu / 2)
    )


def test_approx_event_keeps_its_delta_apart() -> None:
    accountant = RDPAccountant().compose(GaussianEvent(1.0)).compose(ApproxEvent(0.0, 0.01))
    reference = RDPAccountant().compose(GaussianEvent(1.0))
    assert accountant.extra_delta >= 0.01
    assert accountant.extra_delta == pytest.approx(0.01, rel=1e-14)
    d = reference.get_delta(1.0)
    assert accountant.get_delta(1.0) >= d + 0.01 - d * 0.01
    assert accountant.get_delta(1.0) == pytest.approx(d + 0.01 - d * 0.01, rel=1e-14)
    # delta' = (delta - extra) / (1 - extra), exactly, rounded down.
    extra = Fraction(accountant.extra_delta)
    shifted = fraction_down((Fraction(0.02) - extra) / (1 - extra))
    assert accountant.get_epsilon(0.02) == reference.get_epsilon(shifted)
    assert accountant.get_epsilon(0.02) == pytest.approx(
        reference.get_epsilon(1 - (1 - 0.02) / (1 - 0.01)), rel=1e-12
    )
    assert accountant.get_epsilon(0.005) == INF  # delta below the extra delta
    assert accountant.get_epsilon(0.0) == INF
    # Never below the truth: the canonical (0, 0.01) pair composed with the Gaussian has
    # delta(eps) = 0.01 + 0.99 delta_G(eps) exactly.
    for epsilon in (0.0, 0.5, 1.0, 3.0):
        truth = 0.01 + 0.99 * _gaussian_delta(1.0, epsilon)
        assert accountant.get_delta(epsilon) >= truth


def test_extra_delta_of_repeated_events() -> None:
    accountant = RDPAccountant().compose(RepeatedEvent(ApproxEvent(0.0, 0.001), 10))
    exact = 1 - (1 - Fraction(0.001)) ** 10
    assert Fraction(accountant.extra_delta) >= exact
    assert accountant.extra_delta == pytest.approx(float(exact), rel=1e-14)
    # The RDP part is zero: (0, extra)-DP.
    assert accountant.get_epsilon(0.01) == 0.0
    assert accountant.get_epsilon(0.009) == INF
    assert accountant.get_delta(0.0) == accountant.extra_delta
    # compose(count=) and RepeatedEvent agree.
    again = RDPAccountant().compose(ApproxEvent(0.0, 0.001), count=10)
    assert again.extra_delta == accountant.extra_delta


def test_approx_event_with_order_inf() -> None:
    accountant = RDPAccountant(GRID).compose(ApproxEvent(1.0, 0.01), count=3)
    extra = accountant.extra_delta
    assert Fraction(extra) >= 1 - Fraction(0.99) ** 3
    # The good parts are 3-DP together: delta = extra at eps = 3, and eps = 3 at any
    # delta above extra.
    assert accountant.get_delta(3.0) == extra
    assert accountant.get_epsilon(0.05) <= 3.0
    assert accountant.get_epsilon(extra) == 3.0  # delta' = 0: the order-inf value
    assert accountant.get_epsilon(0.02) == INF


def test_pure_approx_event_is_unchanged() -> None:
    """ApproxEvent(eps, 0) is pure DP, as before: an RDP curve, no extra delta."""
    accountant = RDPAccountant().compose(ApproxEvent(1.0, 0.0))
    assert accountant.extra_delta == 0.0
    assert accountant.guarantee == RDPAccountant().compose(PureEvent(1.0)).guarantee


# -- the paths that return an RDP curve refuse a delta (they would drop it)

APPROX = ApproxEvent(1.0, 1e-6)


def test_guarantee_refuses_once_a_delta_was_composed() -> None:
    accountant = RDPAccountant().compose(GaussianEvent(1.0))
    before = accountant.guarantee
    accountant.compose(APPROX)
    with pytest.raises(UnsupportedEvent, match="delta"):
        _ = accountant.guarantee
    assert accountant.get_epsilon(1e-5) > before.to_approx(1e-5).epsilon


def test_event_rdp_gives_none_for_a_delta() -> None:
    assert event_rdp(APPROX) is None
    assert event_rdp(ComposedEvent((GaussianEvent(1.0), APPROX))) is None
    assert event_rdp(RepeatedEvent(APPROX, 3)) is None
    assert event_rdp(ApproxEvent(1.0, 0.0)) is not None


@pytest.mark.parametrize(
    "event",
    [
        SampledWithoutReplacementEvent(APPROX, 10, 100),
        SampledWithoutReplacementEvent(ComposedEvent((GaussianEvent(1.0), APPROX)), 10, 100),
        RepeatAndSelectEvent(APPROX, mean=5.0, shape=1.0),
        RepeatAndSelectEvent(ComposedEvent((GaussianEvent(1.0), APPROX)), mean=5.0, shape=INF),
        PoissonSampledEvent(APPROX, 0.1),
    ],
    ids=["wor", "wor-composed", "repeat-select", "repeat-select-composed", "poisson"],
)
def test_inner_curve_paths_refuse_a_delta(event: object) -> None:
    for orders in (FINITE, GRID):
        accountant = RDPAccountant(orders).compose(GaussianEvent(2.0))
        before = accountant.guarantee
        assert not accountant.supports(event)  # type: ignore[arg-type]
        with pytest.raises(UnsupportedEvent):
            accountant.compose(event)  # type: ignore[arg-type]
        assert accountant.guarantee == before  # nothing changed


def test_rdp_filter_still_refuses_a_delta() -> None:
    with pytest.raises(UnsupportedEvent):
        RDPFilter(RDP((2.0, 8.0), (5.0, 5.0))).spend(APPROX)


# -- property: the delta reported is never below the extra delta


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(
        st.tuples(
            st.floats(0.0, 2.0),
            st.floats(1e-9, 0.05),
            st.integers(1, 5),
        ),
        min_size=1,
        max_size=4,
    ),
    sigma=st.floats(0.5, 20.0),
    epsilon=st.floats(0.0, 10.0),
    with_inf=st.booleans(),
)
def test_reported_delta_is_at_least_the_extra_delta(
    parts: list[tuple[float, float, int]], sigma: float, epsilon: float, with_inf: bool
) -> None:
    accountant = RDPAccountant(GRID if with_inf else FINITE).compose(GaussianEvent(sigma))
    keep = Fraction(1)
    for eps, delta, count in parts:
        accountant.compose(ApproxEvent(eps, delta), count=count)
        keep *= (1 - Fraction(delta)) ** count
    exact_extra = 1 - keep
    assert Fraction(accountant.extra_delta) >= exact_extra
    reported = accountant.get_delta(epsilon)
    assert reported >= accountant.extra_delta
    assert not math.isnan(reported)
    # Below the extra delta no epsilon is claimed; above it get_epsilon answers
    # consistently with get_delta.
    assert accountant.get_epsilon(float(exact_extra) * 0.999) == INF
    target = min(0.5, float(exact_extra) * 2 + 1e-6)
    found = accountant.get_epsilon(target)
    if math.isfinite(found):
        assert accountant.get_delta(found) <= target * (1 + 1e-9)
