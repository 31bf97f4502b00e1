"""Property tests (hypothesis) for the laws of privacy accounting."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import dpkit.accounting as acc
from dpkit.errors import InvalidParameter

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

epsilons = st.floats(min_value=1e-4, max_value=20.0, allow_nan=False)
small_epsilons = st.floats(min_value=1e-3, max_value=3.0, allow_nan=False)
rhos = st.floats(min_value=1e-5, max_value=50.0, allow_nan=False)
deltas = st.floats(min_value=1e-14, max_value=0.5, allow_nan=False)
orders = st.floats(min_value=1.001, max_value=500.0, allow_nan=False)
sigmas = st.floats(min_value=0.2, max_value=200.0, allow_nan=False)
bad_floats = st.one_of(
    st.floats(max_value=-1e-300, allow_nan=False),
    st.just(float("nan")),
    st.just(float("inf")),
    st.just(float("-inf")),
)


# --- conversions ----------------------------------------------------------------------


def test_zcdp_conversion_of_a_subnormal_rho_ends() -> None:
    # A rho below ~1e-306 (a ledger's share of 5e-324, found by test_ledger's hypothesis
    # run) made log(1/delta) / rho infinite, and the search for the best order halved
    # an infinite bracket forever. The conversion now ends, below the simple bound.
    from dpkit.accounting._math.conversions import zcdp_epsilon, zcdp_epsilon_order

    for rho in (5e-324, 1e-320, 1e-310, 1e-306):
        for delta in (1e-300, 1e-12, 1e-6, 0.4):
            order = zcdp_epsilon_order(rho, delta)
            assert order is not None and math.isfinite(order) and order > 0
            epsilon = zcdp_epsilon(rho, delta)
            assert 0.0 <= epsilon <= 2.0 * math.sqrt(rho * math.log(1.0 / delta)) + rho
            assert acc.ZCDP(rho).to_approx(delta).epsilon == epsilon


@SETTINGS
@given(rho=rhos, d1=deltas, d2=deltas)
def test_zcdp_epsilon_decreases_in_delta(rho: float, d1: float, d2: float) -> None:
    lo, hi = sorted((d1, d2))
    z = acc.ZCDP(rho)
    assert z.to_approx(hi).epsilon <= z.to_approx(lo).epsilon


@SETTINGS
@given(r1=rhos, r2=rhos, delta=deltas)
def test_zcdp_epsilon_increases_in_rho(r1: float, r2: float, delta: float) -> None:
    lo, hi = sorted((r1, r2))
    assert acc.ZCDP(lo).to_approx(delta).epsilon <= acc.ZCDP(hi).to_approx(delta).epsilon


@SETTINGS
@given(rho=rhos, delta=deltas)
def test_optimal_zcdp_conversion_never_looser_than_simple(rho: float, delta: float) -> None:
    z = acc.ZCDP(rho)
    assert z.to_approx(delta).epsilon <= z.to_approx(delta, method="simple").epsilon


@SETTINGS
@given(rho=st.floats(min_value=1e-4, max_value=20.0), delta=deltas)
def test_zcdp_conversion_never_below_exact_gaussian(rho: float, delta: float) -> None:
    # The Gaussian mechanism with sigma = 1/sqrt(2 rho) is exactly rho-zCDP, so no valid
    # zCDP conversion can beat its exact epsilon.
    sigma = 1.0 / math.sqrt(2.0 * rho)
    exact = acc.gaussian_epsilon(sigma, delta)
    assert acc.ZCDP(rho).to_approx(delta).epsilon >= exact * (1 - 1e-9)


@SETTINGS
@given(rho=rhos, delta=deltas)
def test_zcdp_epsilon_and_delta_are_inverse(rho: float, delta: float) -> None:
    z = acc.ZCDP(rho)
    eps = z.to_approx(delta).epsilon
    assert z.delta_for(eps) <= delta * (1 + 1e-8)


@SETTINGS
@given(epsilon=epsilons, a1=orders, a2=orders)
def test_tight_pure_to_rdp_is_monotone_and_bounded(epsilon: float, a1: float, a2: float) -> None:
    lo, hi = sorted((a1, a2))
    assume(lo < hi)
    curve = acc.PureDP(epsilon).to_rdp((lo, hi))
    assert 0.0 <= curve.epsilons[0] <= curve.epsilons[1] + 16 * math.ulp(epsilon)
    assert curve.epsilons[1] <= epsilon
    # and below the zCDP line a * rho of the tight conversion
    # (each side is rounded up by a few ulps of eps, an absolute amount)
    rho = acc.PureDP(epsilon).to_zcdp().rho
    slack = 16 * math.ulp(epsilon)
    assert curve.epsilons[0] <= lo * rho * (1 + 1e-12) + slack
    assert curve.epsilons[1] <= hi * rho * (1 + 1e-12) + slack


@SETTINGS
@given(epsilon=epsilons)
def test_tight_pure_to_zcdp_is_below_the_classical(epsilon: float) -> None:
    rho = acc.PureDP(epsilon).to_zcdp().rho
    assert epsilon * math.tanh(epsilon / 2) <= rho <= epsilon * epsilon / 2 * (1 + 1e-15)


@SETTINGS
@given(epsilon=epsilons, order=orders)
def test_laplace_rdp_is_below_the_tight_pure_bound(epsilon: float, order: float) -> None:
    bound = acc.PureDP(epsilon).to_rdp((order,)).epsilons[0]
    assert acc.laplace_rdp(epsilon, order) <= bound * (1 + 1e-12) + 1e-300


@SETTINGS
@given(epsilon=small_epsilons, delta=deltas, count=st.integers(1, 50))
def test_rdp_composition_matches_scalar_multiple(epsilon: float, delta: float, count: int) -> None:
    curve = acc.PureDP(epsilon).to_rdp()
    assert (count * curve).to_approx(delta).epsilon >= curve.to_approx(delta).epsilon
    summed = sum([curve] * count)
    assert isinstance(summed, acc.RDP)
    assert summed.to_approx(delta).epsilon >= (count * curve).to_approx(delta).epsilon * (1 - 1e-12)


# --- composition ----------------------------------------------------------------------


@SETTINGS
@given(a=epsilons, b=epsilons)
def test_pure_composition_is_monotone_and_never_rounds_down(a: float, b: float) -> None:
    total = (acc.PureDP(a) + acc.PureDP(b)).epsilon
    assert total >= max(a, b)
    assert total >= a + b  # the float sum rounds to nearest; ours rounds up


@SETTINGS
@given(a=rhos, b=rhos, delta=deltas)
def test_zcdp_composition_costs_more(a: float, b: float, delta: float) -> None:
    both = acc.ZCDP(a) + acc.ZCDP(b)
    assert both.to_approx(delta).epsilon >= acc.ZCDP(a).to_approx(delta).epsilon


@SETTINGS
@given(
    epsilon=st.floats(min_value=0.01, max_value=1.0),
    count=st.integers(1, 300),
    target=st.floats(min_value=1e-10, max_value=0.1),
)
def test_optimal_composition_is_never_worse_than_basic_or_advanced(
    epsilon: float, count: int, target: float
) -> None:
    result = acc.optimal_composition(epsilon, 0.0, count, target)
    assert result is not None
    assert result.epsilon <= count * epsilon * (1 + 1e-12)
    advanced = acc.advanced_composition(epsilon, 0.0, count, target)
    assert result.epsilon <= advanced.epsilon + 2 * epsilon


@SETTINGS
@given(
    epsilon=st.floats(min_value=0.01, max_value=1.0),
    count=st.integers(1, 200),
    t1=st.floats(min_value=1e-10, max_value=0.1),
    t2=st.floats(min_value=1e-10, max_value=0.1),
)
def test_optimal_composition_is_monotone_in_target(
    epsilon: float, count: int, t1: float, t2: float
) -> None:
    lo, hi = sorted((t1, t2))
    strict = acc.optimal_composition(epsilon, 0.0, count, lo)
    loose = acc.optimal_composition(epsilon, 0.0, count, hi)
    assert strict is not None and loose is not None
    assert loose.epsilon <= strict.epsilon


@SETTINGS
@given(eps_list=st.lists(small_epsilons, min_size=1, max_size=30), delta=deltas)
def test_pure_via_zcdp_is_never_looser_than_the_textbook_formula(
    eps_list: list[float], delta: float
) -> None:
    total_sq = math.fsum(e * e for e in eps_list)
    textbook = 0.5 * total_sq + math.sqrt(2 * math.log(1 / delta) * total_sq)
    result = acc.compose_pure_via_zcdp(eps_list, delta)
    assert result.epsilon <= textbook * (1 + 1e-12)
    assert result.epsilon <= math.fsum(eps_list) * (1 + 1e-12)


# --- calibration never overshoots -------------------------------------------------------


@SETTINGS
@given(
    epsilon=st.floats(min_value=0.01, max_value=10.0),
    delta=deltas,
    sensitivity=st.floats(min_value=0.01, max_value=100.0),
)
def test_gaussian_calibration_is_private(epsilon: float, delta: float, sensitivity: float) -> None:
    sigma = acc.gaussian_sigma_analytic(epsilon, delta, sensitivity)
    assert acc.gaussian_delta(sigma, epsilon, sensitivity) <= delta
    if epsilon < 1.0:
        assert sigma <= acc.gaussian_sigma_classic(epsilon, delta, sensitivity)


@SETTINGS
@given(sigma=sigmas, delta=deltas)
def test_gaussian_epsilon_is_valid(sigma: float, delta: float) -> None:
    eps = acc.gaussian_epsilon(sigma, delta)
    assert acc.gaussian_delta(sigma, eps) <= delta
    # and it is never above what zCDP (a weaker analysis) would claim
    assert eps <= acc.ZCDP(acc.gaussian_rho(sigma)).to_approx(delta).epsilon * (1 + 1e-9)


@settings(max_examples=25, deadline=None)
@given(
    sigma=st.floats(min_value=0.3, max_value=40.0),
    delta=st.floats(min_value=1e-10, max_value=0.2),
    sensitivity=st.integers(1, 4),
)
def test_discrete_gaussian_epsilon_is_valid(sigma: float, delta: float, sensitivity: int) -> None:
    eps = acc.discrete_gaussian_epsilon(sigma, delta, sensitivity)
    assert acc.discrete_gaussian_delta(sigma, eps, sensitivity) <= delta


# --- invalid parameters, events ---------------------------------------------------------


@SETTINGS
@given(value=bad_floats)
def test_invalid_privacy_parameters_are_rejected(value: float) -> None:
    for build in (
        lambda: acc.PureDP(value),
        lambda: acc.ZCDP(value),
        lambda: acc.ApproxDP(1.0, value),
        lambda: acc.LaplaceEvent(value),
        lambda: acc.GaussianEvent(value),
        lambda: acc.gaussian_sigma_analytic(value, 1e-6),
    ):
        try:
            build()
        except InvalidParameter:
            continue
        raise AssertionError(f"accepted {value!r}")


@SETTINGS
@given(delta=st.one_of(st.floats(min_value=1.0), st.floats(max_value=-1e-300)))
def test_deltas_outside_unit_interval_are_rejected(delta: float) -> None:
    for build in (
        lambda: acc.ApproxDP(1.0, delta),
        lambda: acc.ZCDP(1.0).to_approx(delta),
        lambda: acc.gaussian_epsilon(1.0, delta),
    ):
        try:
            build()
        except InvalidParameter:
            continue
        raise AssertionError(f"accepted delta={delta!r}")


_leaf_events = st.one_of(
    st.builds(acc.LaplaceEvent, epsilons),
    st.builds(acc.GaussianEvent, sigmas),
    st.builds(acc.PureEvent, epsilons),
    st.builds(acc.ZCDPEvent, rhos),
    st.builds(acc.ApproxEvent, epsilons, deltas),
    st.builds(acc.ExponentialMechanismEvent, epsilons),
    st.builds(acc.DiscreteGaussianEvent, sigmas, st.integers(1, 10)),
    st.builds(acc.RandomizedResponseEvent, epsilons, st.integers(2, 100)),
    st.just(acc.NoOpEvent()),
)
_events = st.recursive(
    _leaf_events,
    lambda children: st.one_of(
        st.builds(acc.ComposedEvent, st.lists(children, max_size=4)),
        st.builds(acc.RepeatedEvent, children, st.integers(1, 1000)),
    ),
    max_leaves=8,
)


@SETTINGS
@given(event=_events)
def test_events_round_trip_and_costs_are_consistent(event: acc.Event) -> None:
    assert acc.event_from_dict(json.loads(json.dumps(event.to_dict()))) == event
    eps, rho = acc.pure_epsilon(event), acc.zcdp_rho(event)
    if eps is not None:
        # any pure-DP event has a zCDP guarantee no worse than the conversion of its total
        assert rho is not None
        assert rho <= acc.PureDP(eps).to_zcdp().rho * (1 + 1e-12) + 1e-300
