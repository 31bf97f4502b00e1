"""PureApproxZCDPFilter: pure epsilons at face value next to approximate zCDP.

The theorem (module docstring of dpkit.accounting.filters.pure_approx_zcdp) is checked
on exact laws: an analyst runs a Gaussian step, looks at its output, and in each of two
output regions spends the rest of the budget differently (pure randomized response at
face value, or more Gaussian noise), as far as the filter lets it. The whole
interaction's delta at epsilon_g is computed exactly (one quadrature over the first
step's privacy loss, closed forms inside) and must stay below the budget's delta. Two
natural wrong rules accept strategies whose exact delta is far above it, so the check
has power.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from dpkit.accounting import ZCDP, ApproxDP, PureDP
from dpkit.accounting._math.conversions import zcdp_epsilon_at_order
from dpkit.accounting.filters import (
    ApproxZCDP,
    ApproxZCDPFilter,
    PureApproxZCDP,
    PureApproxZCDPFilter,
)
from dpkit.errors import BudgetExceeded, InvalidParameter

# ------------------------------------------------------------------ exact privacy loss


def _gaussian_delta(rho: float, c: float) -> float:
    """E[(1 - e^(c - L))+] for L ~ N(rho, 2 rho), the loss of rho-zCDP Gaussian noise."""
    if rho == 0.0:
        return max(0.0, -math.expm1(c))
    mu = math.sqrt(2.0 * rho)
    return float(stats.norm.cdf((rho - c) / mu) - math.exp(c) * stats.norm.cdf((-rho - c) / mu))


def _continuation_delta(c: float, epsilon: float, rho: float) -> float:
    """E[(1 - e^(c - L))+] after one epsilon-randomized response (loss +-epsilon) and
    Gaussian noise of rho, given the loss so far moved c."""
    if epsilon == 0.0:
        return _gaussian_delta(rho, c)
    agree = 1.0 / (1.0 + math.exp(-epsilon))  # P[loss = +epsilon] under x
    return agree * _gaussian_delta(rho, c - epsilon) + (1.0 - agree) * _gaussian_delta(
        rho, c + epsilon
    )


Plan = tuple[float, float]  # (pure epsilon at face value, further rho)


def _exact_delta(epsilon_g: float, rho1: float, split: float, high: Plan, low: Plan) -> float:
    """Exact delta at epsilon_g of: Gaussian(rho1); if its loss L1 > split run ``high``,
    else ``low``. Both branches' choices depend on the first output (fully adaptive)."""
    mu = math.sqrt(2.0 * rho1)

    def integrand(loss: float, plan: Plan) -> float:
        return float(stats.norm.pdf(loss, rho1, mu)) * _continuation_delta(epsilon_g - loss, *plan)

    top = rho1 + 40.0 * mu
    bottom = rho1 - 40.0 * mu
    above = integrate.quad(integrand, split, top, args=(high,), limit=400, epsabs=1e-17)[0]
    below = integrate.quad(integrand, bottom, split, args=(low,), limit=400, epsabs=1e-17)[0]
    return above + below


# ------------------------------------------------------------------ the analyst


def _most_pure(admits: Callable[[float, float], bool], rho: float, top: float) -> float:
    """The largest pure epsilon a rule admits next to ``rho`` (bisection)."""
    low, high = 0.0, top
    if admits(high, rho):
        return high
    for _ in range(100):
        mid = (low + high) / 2.0
        if admits(mid, rho):
            low = mid
        else:
            high = mid
    return low


def _strategy_delta(
    admits: Callable[[float, float], bool],
    epsilon_g: float,
    rho_g: float,
    rho1: float,
    split: float,
) -> float:
    """The analyst's best use of a rule: after Gaussian(rho1), the high branch spends
    the most pure epsilon the rule admits; the low branch the most rho."""
    high = (_most_pure(admits, rho1, epsilon_g), 0.0)
    low = (0.0, rho_g - rho1)
    assert admits(0.0, rho_g)
    return _exact_delta(epsilon_g, rho1, split, high, low)


def _filter_rule(flt: PureApproxZCDPFilter) -> Callable[[float, float], bool]:
    def admits(epsilon: float, rho: float) -> bool:
        zero = (Fraction(0),) * 3
        return flt.admits(zero, (Fraction(rho), Fraction(0), Fraction(epsilon)))

    return admits


BUDGETS = [(2.0, 1e-6), (0.5, 1e-5), (1.0, 1e-9)]


@pytest.mark.parametrize(("epsilon_g", "delta_g"), BUDGETS)
def test_fully_adaptive_two_branch_interactions_stay_within_delta(
    epsilon_g: float, delta_g: float
) -> None:
    flt = PureApproxZCDPFilter(ApproxDP(epsilon_g, delta_g), selection_delta=0.0)
    rho_g = float(flt.budget_cost[0])
    rule = _filter_rule(flt)
    worst = 0.0
    for fraction in (0.02, 0.1, 0.3, 0.6):
        rho1 = fraction * rho_g
        mu = math.sqrt(2.0 * rho1)
        for k in (-1.0, 0.0, 1.0, 2.0, 4.0):
            delta = _strategy_delta(rule, epsilon_g, rho_g, rho1, rho1 + k * mu)
            worst = max(worst, delta)
    assert worst <= delta_g
    assert worst > 0.01 * delta_g  # the strategies do reach into the budget


def _sum_without_constant(flt: PureApproxZCDPFilter) -> Callable[[float, float], bool]:
    # Planted bug: epsilons plus a * rho, dropping the conversion's constant term.
    a = 1.0 + flt.order

    def admits(epsilon: float, rho: float) -> bool:
        return rho <= float(flt.budget_cost[0]) and epsilon + a * rho <= flt.total.epsilon

    return admits


def _larger_not_sum(flt: PureApproxZCDPFilter) -> Callable[[float, float], bool]:
    # Planted bug: the larger of the pure sum and the zCDP part, instead of their sum.
    def admits(epsilon: float, rho: float) -> bool:
        zcdp = 0.0 if rho == 0 else zcdp_epsilon_at_order(rho, flt.conversion_delta, flt.order)
        return rho <= float(flt.budget_cost[0]) and max(epsilon, zcdp) <= flt.total.epsilon

    return admits


@pytest.mark.parametrize("planted", [_sum_without_constant, _larger_not_sum])
def test_wrong_rules_fail_the_same_check(
    planted: Callable[[PureApproxZCDPFilter], Callable[[float, float], bool]],
) -> None:
    epsilon_g, delta_g = 2.0, 1e-6
    flt = PureApproxZCDPFilter(ApproxDP(epsilon_g, delta_g), selection_delta=0.0)
    rho_g = float(flt.budget_cost[0])
    rule = planted(flt)
    worst = max(
        _strategy_delta(rule, epsilon_g, rho_g, fraction * rho_g, fraction * rho_g)
        for fraction in (0.02, 0.1, 0.3)
    )
    assert worst > 10 * delta_g


# ------------------------------------------------------------------ the rule itself


def test_four_pure_half_epsilons_fit_in_approx_two() -> None:
    flt = PureApproxZCDPFilter(ApproxDP(2.0, 1e-6), selection_delta=5e-7)
    for _ in range(4):
        assert flt.spend(PureDP(0.5)) == PureApproxZCDP(epsilon=0.5, rho=0.0, delta=0.0)
    assert flt.epsilon_used(flt.state) == 2.0
    with pytest.raises(BudgetExceeded):
        flt.spend(PureDP(1e-9))
    with pytest.raises(BudgetExceeded):
        flt.spend(ZCDP(1e-9))  # any zCDP step now adds the conversion's constant


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=1e-6, max_value=0.05), min_size=1, max_size=12))
def test_zcdp_only_sessions_accept_exactly_as_before(rhos: list[float]) -> None:
    budget = ApproxDP(2.0, 1e-6)
    new = PureApproxZCDPFilter(budget, selection_delta=5e-7)
    old = ApproxZCDPFilter(ApproxZCDP(rho=float(new.budget_cost[0]), delta=5e-7))
    for rho in rhos:
        accepted_new = accepted_old = True
        try:
            new.spend(ZCDP(rho))
        except BudgetExceeded:
            accepted_new = False
        try:
            old.spend(ZCDP(rho))
        except BudgetExceeded:
            accepted_old = False
        assert accepted_new == accepted_old


def test_rho_budget_is_that_of_the_zcdp_only_filter() -> None:
    from dpkit.accounting.filters import ZCDPFilter

    for epsilon, delta in BUDGETS:
        flt = PureApproxZCDPFilter(ApproxDP(epsilon, delta), selection_delta=0.0)
        rho = ZCDPFilter.from_approx(epsilon=epsilon, delta=delta).budget.rho
        assert float(flt.budget_cost[0]) == pytest.approx(rho, rel=1e-12)
        assert float(flt.budget_cost[0]) <= rho
        assert flt.epsilon_used((flt.budget_cost[0], Fraction(0), Fraction(0))) <= epsilon


def test_cheaper_route_and_what_is_left() -> None:
    flt = PureApproxZCDPFilter(ApproxDP(2.0, 1e-6), selection_delta=5e-7)
    zero = flt.state
    # Nothing in rho yet: a pure step is cheapest at face value.
    assert flt.cheaper(zero, 0.5) == (Fraction(0), Fraction(0), Fraction(0.5))
    flt.spend(ZCDP(0.01))
    # Once the zCDP part is active, a tiny pure step is cheaper in rho.
    cost = flt.cheaper(flt.state, 0.01)
    assert cost[2] == 0 and cost[0] > 0
    left = flt.epsilon_left(flt.state)
    assert 0.0 < left < 2.0
    flt.spend(PureDP(left))
    assert flt.epsilon_used(flt.state) <= 2.0
    assert flt.rho_left(flt.state) < 1e-15  # a rounding's worth at most
    with pytest.raises(BudgetExceeded):
        flt.spend(ZCDP(1e-12))


def test_approximate_steps_take_delta_and_face_value_epsilon() -> None:
    flt = PureApproxZCDPFilter(ApproxDP(1.0, 1e-6), selection_delta=4e-7)
    assert flt.spend(ApproxDP(0.3, 1e-7)) == PureApproxZCDP(epsilon=0.3, rho=0.0, delta=1e-7)
    with pytest.raises(BudgetExceeded):
        flt.spend(ApproxDP(0.1, 4e-7))  # the selection delta is spent
    assert flt.spend(ApproxZCDP(rho=0.001, delta=3e-7)).delta == 3e-7


@pytest.mark.parametrize(
    ("budget", "share"),
    [
        (ApproxDP(1.0, 1e-6), 1e-6),  # nothing left to convert
        (ApproxDP(1.0, 1e-6), -1e-9),
        (ApproxDP(1.0, 1e-6), math.nan),
        (ApproxDP(1.0, 0.0), 0.0),
        (PureDP(1.0), 0.0),
    ],
)
def test_bad_budgets_are_refused(budget: object, share: float) -> None:
    with pytest.raises(InvalidParameter):
        PureApproxZCDPFilter(budget, selection_delta=share)  # type: ignore[arg-type]
