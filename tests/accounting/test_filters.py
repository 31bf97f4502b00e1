"""Privacy filters and odometers: never overspend, exact ledger, thread safety, bad input."""

from __future__ import annotations

import math
import threading
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import (
    RDP,
    ZCDP,
    ApproxDP,
    ApproxEvent,
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PureDP,
    RepeatedEvent,
    TruncatedLaplaceEvent,
)
from dpkit.accounting.filters import (
    ApproxDPFilter,
    ApproxDPOdometer,
    PureDPFilter,
    PureDPOdometer,
    RDPFilter,
    RDPOdometer,
    ZCDPFilter,
    ZCDPOdometer,
    privacy_filter,
)
from dpkit.errors import BudgetExceeded, InvalidParameter, UnsupportedEvent


def test_pure_filter_refuses_and_spends_nothing() -> None:
    budget = PureDPFilter(PureDP(1.0))
    budget.spend(PureDP(0.6))
    with pytest.raises(BudgetExceeded) as info:
        budget.spend(LaplaceEvent(noise_multiplier=2.0))  # 0.5 > 0.4 left
    assert info.value.requested == PureDP(0.5)
    assert info.value.remaining == PureDP(0.4)
    assert budget.spent == PureDP(0.6) and len(budget.history) == 1
    budget.spend(0.4)  # exactly the rest fits
    assert budget.remaining == PureDP(0.0)
    assert not budget.can_spend(1e-300)
    assert budget.can_spend(0.0)


def test_ledger_is_exact_not_float_sums() -> None:
    budget = PureDPFilter(PureDP(1.0))
    budget.spend(0.1)
    budget.spend(0.2)
    exact = Fraction(0.1) + Fraction(0.2)
    assert Fraction(budget.spent.epsilon) >= exact  # spent rounds up
    assert Fraction(budget.spent.epsilon) - exact < Fraction(1, 10**16)
    assert Fraction(budget.remaining.epsilon) <= 1 - exact  # remaining rounds down
    # A float ledger would accept this (1.0 + 1e-300 == 1.0); the exact one refuses.
    full = PureDPFilter(PureDP(1.0))
    full.spend(1.0)
    assert 1.0 + 1e-300 <= 1.0
    with pytest.raises(BudgetExceeded):
        full.spend(1e-300)


def test_remaining_plus_spent_never_exceeds_budget() -> None:
    budget = ZCDPFilter(ZCDP(1.0))
    for rho in [0.1, 1 / 3, 0.05, 1e-9]:
        budget.spend(rho)
        assert Fraction(budget.remaining.rho) + Fraction(rho) * 0 <= Fraction(1.0) - sum(
            Fraction(r) for r in [0.1, 1 / 3, 0.05, 1e-9][: len(budget.history)]
        )


def test_approx_filter_basic_composition() -> None:
    budget = ApproxDPFilter(ApproxDP(1.0, 1e-6))
    budget.spend(ApproxEvent(0.25, 2.5e-7))
    budget.spend(TruncatedLaplaceEvent(0.25, 2.5e-7))
    budget.spend(ComposedEvent((LaplaceEvent(8.0), ApproxEvent(0.125, 0.0))))
    assert budget.spent == ApproxDP(0.5, 5e-7) + ApproxDP(0.25, 0.0)
    with pytest.raises(BudgetExceeded):
        budget.spend(ApproxDP(0.0, 6e-7))  # delta runs out first
    with pytest.raises(UnsupportedEvent):
        budget.spend(GaussianEvent(1.0))  # no (eps, delta) statement without a delta
    assert budget.spent == ApproxDP(0.75, 5e-7)


def test_zcdp_filter_converts_pure_steps_tightly() -> None:
    budget = ZCDPFilter(ZCDP(1.0))
    charged = budget.spend(PureDP(1.0))
    assert charged.rho == pytest.approx(math.tanh(0.5), rel=1e-14)
    assert charged.rho >= math.tanh(0.5)
    assert budget.spend(RepeatedEvent(GaussianEvent(4.0), 4)) == ZCDP(0.125)
    with pytest.raises(InvalidParameter):
        budget.spend(ApproxDP(0.1, 1e-9))  # (eps, delta>0) has no zCDP


def test_zcdp_filter_from_approx_meets_target() -> None:
    budget = ZCDPFilter.from_approx(epsilon=1.0, delta=1e-6)
    assert budget.budget.to_approx(1e-6).epsilon <= 1.0
    assert budget.budget.rho > 0.99 * ZCDP(budget.budget.rho).rho
    # essentially the largest such rho
    assert ZCDP(budget.budget.rho * (1 + 1e-9)).to_approx(1e-6).epsilon > 1.0


def test_rdp_filter_every_order_must_fit() -> None:
    orders = (2.0, 4.0, 16.0)
    budget = RDPFilter(RDP(orders, (1.0, 1.0, 1.0)))
    spent = budget.spend(PureDP(0.5))  # tight curve, below 0.5 at every order
    assert all(e <= 0.5 for e in spent.epsilons)
    with pytest.raises(BudgetExceeded):
        budget.spend(ZCDP(0.1))  # 16 * 0.1 = 1.6 > budget at order 16
    budget.spend(RDP(orders, (0.1, 0.1, 0.1)))
    with pytest.raises(InvalidParameter, match="different order grid"):
        budget.spend(RDP((2.0,), (0.1,)))
    with pytest.raises(InvalidParameter, match="infinite"):
        budget.spend(RDP(orders, (0.1, 0.1, math.inf)))
    assert len(budget.history) == 2


def test_privacy_filter_dispatches_on_budget_type() -> None:
    assert isinstance(privacy_filter(PureDP(1.0)), PureDPFilter)
    assert isinstance(privacy_filter(ApproxDP(1.0, 1e-6)), ApproxDPFilter)
    assert isinstance(privacy_filter(ZCDP(1.0)), ZCDPFilter)
    assert isinstance(privacy_filter(ZCDP(1.0).to_rdp((2.0,))), RDPFilter)
    with pytest.raises(InvalidParameter):
        privacy_filter(1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "bad"),
    [
        (lambda: PureDPFilter(ZCDP(1.0)), None),  # type: ignore[arg-type]
        (lambda: ApproxDPFilter(PureDP(1.0)), None),  # type: ignore[arg-type]
        (lambda: ZCDPFilter(1.0), None),  # type: ignore[arg-type]
        (lambda: RDPFilter(RDP((2.0,), (math.inf,))), None),
    ],
    ids=["pure<-zcdp", "approx<-pure", "zcdp<-float", "rdp-inf"],
)
def test_budgets_of_the_wrong_type(make: Any, bad: Any) -> None:
    with pytest.raises(InvalidParameter):
        make()


@pytest.mark.parametrize("spend", [-0.1, math.nan, math.inf, -math.inf, True, "0.1", None])
@pytest.mark.parametrize("make", [lambda: PureDPFilter(PureDP(1.0)), lambda: ZCDPFilter(ZCDP(1.0))])
def test_bad_spends_are_rejected_and_spend_nothing(make: Any, spend: object) -> None:
    budget = make()
    with pytest.raises(InvalidParameter):
        budget.spend(spend)
    assert budget.history == ()


def test_pure_filter_rejects_guarantees_it_cannot_read() -> None:
    budget = PureDPFilter(PureDP(1.0))
    with pytest.raises(InvalidParameter):
        budget.spend(ZCDP(0.1))
    with pytest.raises(UnsupportedEvent):
        budget.spend(GaussianEvent(1.0))
    with pytest.raises(InvalidParameter):
        ApproxDPFilter(ApproxDP(1.0, 1e-6)).spend(0.1)  # a bare number is ambiguous here


def test_thread_race_never_overspends() -> None:
    # 8 threads race to spend 0.01 (or 0.03) from a budget of 1; the accepted spends sum
    # exactly to the ledger's total, and never past the budget.
    budget = PureDPFilter(PureDP(1.0))
    accepted: list[list[float]] = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def worker(index: int) -> None:
        amount = 0.01 if index % 2 else 0.03
        start.wait()
        for _ in range(200):
            try:
                budget.spend(amount)
            except BudgetExceeded:
                continue
            accepted[index].append(amount)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    total = sum((Fraction(a) for spends in accepted for a in spends), Fraction(0))
    assert total <= Fraction(1.0)
    assert Fraction(1.0) - total < Fraction(0.01)  # the budget was used up
    assert len(budget.history) == sum(len(s) for s in accepted)
    assert budget.spent.epsilon == float(total) or Fraction(budget.spent.epsilon) >= total
    assert Fraction(budget.spent.epsilon) - total < Fraction(1, 10**15)


def test_odometers_are_monotone() -> None:
    pure = PureDPOdometer()
    zcdp = ZCDPOdometer()
    approx = ApproxDPOdometer()
    rdp = RDPOdometer(orders=(2.0, 8.0))
    previous = (0.0, 0.0, 0.0, (0.0, 0.0))
    for epsilon in [0.3, 0.0, 1e-12, 2.0, 0.7]:
        pure.spend(PureDP(epsilon))
        zcdp.spend(PureDP(epsilon))
        approx.spend(ApproxDP(epsilon, 1e-9))
        rdp.spend(PureDP(epsilon))
        now = (pure.spent.epsilon, zcdp.spent.rho, approx.spent.epsilon, rdp.spent.epsilons)
        assert now[0] >= previous[0] and now[1] >= previous[1] and now[2] >= previous[2]
        assert all(a >= b for a, b in zip(now[3], previous[3], strict=True))
        previous = now
    assert pure.spent == PureDP(3.0 + 1e-12) or pure.spent.epsilon >= 3.0
    assert approx.spent.delta >= 5e-9
    assert "spent" in repr(pure)


# ----------------------------------------------------------------- persisted state
# The Session's SQLite ledger keeps a filter's state outside it and applies the filter's
# rule through admits/after: that must accept and refuse exactly what spend() does.


@settings(max_examples=80, deadline=None)
@given(spends=st.lists(st.floats(0.0, 0.4), min_size=1, max_size=30))
def test_persisted_state_follows_the_filter_rule(spends: list[float]) -> None:
    live = ZCDPFilter(ZCDP(1.0))
    rule = ZCDPFilter(ZCDP(1.0))
    state = (Fraction(0),)
    for rho in spends:
        cost = rule.cost_of(ZCDP(rho) if rho > 0 else 0.0)
        try:
            live.spend(rho)
            accepted = True
        except BudgetExceeded:
            accepted = False
        assert rule.admits(state, cost) == accepted
        if accepted:
            state = rule.after(state, cost)
        else:
            with pytest.raises(BudgetExceeded):
                rule.after(state, cost)
    assert rule.as_guarantee(state, round_up=True) == live.spent
    assert state[0] <= rule.budget_cost[0]
