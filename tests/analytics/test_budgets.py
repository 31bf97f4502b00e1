"""Budgets people can split: equal float splits, Fractions, 'remaining', and query
budgets in the unit the user chose (issue 12, item 5)."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest

import dpkit as dp
from dpkit.accounting._math.conversions import pure_to_zcdp_rho, zcdp_epsilon
from dpkit.accounting.filters import ZCDPFilter
from dpkit.analytics import Query
from dpkit.analytics._accounting import SPLIT_TOLERANCE


def session(budget: dp.Guarantee, frame: pd.DataFrame) -> dp.Session:
    return dp.Session.from_pandas(frame, budget=budget, rng=1)


def test_ten_tenths_of_a_float_epsilon_fit(frame: pd.DataFrame) -> None:
    # Fraction(0.1) is 0.1000000000000000055...: ten of them exceed 1. The tenth is
    # rounded down to what is left (5.6e-17 less), and its noise is calibrated for that.
    s = session(dp.PureDP(1.0), frame)
    for _ in range(10):
        result = s.evaluate(Query().count(), budget=dp.PureDP(0.1))
    assert s.remaining == dp.PureDP(0.0)
    last = result.releases[0]
    assert last.guarantee.epsilon <= 0.1  # type: ignore[attr-defined]
    assert sum(r.amount[0] for r in s.history) == Fraction(1.0)
    with pytest.raises(dp.BudgetExceeded):
        s.evaluate(Query().count(), budget=dp.PureDP(1e-9))


def test_three_hundred_equal_zcdp_spends_fit(frame: pd.DataFrame) -> None:
    s = session(dp.ZCDP(1.0), frame)
    for _ in range(300):
        s.evaluate(Query().count(), budget=dp.ZCDP(1 / 300))
    assert s.remaining == dp.ZCDP(0.0)
    assert sum(r.amount[0] for r in s.history) == Fraction(1)


def test_the_tolerance_never_rounds_up(frame: pd.DataFrame) -> None:
    s = session(dp.PureDP(1.0), frame)
    s.evaluate(Query().count(), budget=dp.PureDP(0.5))
    over = 0.5 + 4 * float(SPLIT_TOLERANCE)  # beyond the tolerance: refused
    with pytest.raises(dp.BudgetExceeded):
        s.evaluate(Query().count(), budget=dp.PureDP(over))
    assert s.spent == dp.PureDP(0.5)


def test_fraction_shares_are_exact(frame: pd.DataFrame) -> None:
    s = session(dp.ZCDP(0.9), frame)
    for _ in range(3):
        s.evaluate(Query().count(), budget=Fraction(1, 3))
    assert sum(r.amount[0] for r in s.history) == Fraction(0.9)
    with pytest.raises(dp.BudgetExceeded):
        s.evaluate(Query().count(), budget=Fraction(1, 10**9))


def test_remaining_spends_exactly_what_is_left(frame: pd.DataFrame) -> None:
    s = session(dp.PureDP(1.0), frame)
    s.evaluate(Query().count(), budget=dp.PureDP(0.3))
    result = s.evaluate(Query().count().sum("age", bounds=(0, 100)), budget="remaining")
    assert s.remaining == dp.PureDP(0.0)
    assert sum(r.amount[0] for r in s.history) == Fraction(1.0)
    assert sum(r.guarantee.epsilon for r in result.releases) <= 1.0 - 0.3 + 1e-15  # type: ignore[attr-defined]
    with pytest.raises(dp.BudgetExceeded, match="remaining"):
        s.evaluate(Query().count(), budget="remaining")


@pytest.mark.parametrize(
    "budget",
    [
        0.0,
        -0.5,
        1.5,
        float("nan"),
        float("inf"),
        Fraction(3, 2),
        True,
        "rest",
        dp.RDP((2.0,), (1.0,)),
    ],
    ids=["zero", "negative", "above-one", "nan", "inf", "fraction-above-one", "bool", "str", "rdp"],
)
def test_bad_budgets_are_refused_and_spend_nothing(frame: pd.DataFrame, budget: object) -> None:
    s = session(dp.PureDP(1.0), frame)
    with pytest.raises(dp.InvalidParameter):
        s.evaluate(Query().count(), budget=budget)
    assert s.spent == dp.PureDP(0.0) and not s.history


def test_approx_session_takes_approx_and_pure_query_budgets(frame: pd.DataFrame) -> None:
    total = dp.ApproxDP(2.0, 1e-6)
    s = session(total, frame)
    rho0 = s.remaining.rho  # type: ignore[attr-defined]
    # ApproxDP(eps, delta): Gaussian noise, charged the largest rho implying it (CKS20).
    result = s.evaluate(Query().count(), budget=dp.ApproxDP(0.5, 1e-7))
    rho = ZCDPFilter.from_approx(epsilon=0.5, delta=1e-7).budget.rho
    assert s.history[-1].amount[0] == Fraction(rho)
    assert zcdp_epsilon(rho, 1e-7) <= 0.5
    assert result.releases[0].event.__class__.__name__ == "DiscreteGaussianEvent"
    # PureDP(eps): Laplace noise (so the query is eps-DP). Charged eps at face value or
    # eps tanh(eps / 2) in rho, whichever leaves more (PureApproxZCDPFilter.cheaper): at
    # the order a ~ 13 of this budget, 0.2 at face value beats a * 0.0199 in rho.
    result = s.evaluate(Query().count(), budget=dp.PureDP(0.2))
    assert result.releases[0].event.__class__.__name__ == "DiscreteLaplaceEvent"
    assert s.history[-1].amount == (Fraction(0), Fraction(0), Fraction(0.2))
    # A tiny pure query next to an active zCDP part is cheaper in rho.
    s.evaluate(Query().count(), budget=dp.PureDP(0.01))
    assert s.history[-1].amount == (Fraction(pure_to_zcdp_rho(0.01)), Fraction(0), Fraction(0))
    # Remaining is shown in both units.
    left = s.remaining.rho  # type: ignore[attr-defined]
    assert left < rho0 - rho - pure_to_zcdp_rho(0.01)  # the pure 0.2 takes rho room too
    approx = s.remaining_approx
    assert approx is not None and approx.delta == pytest.approx(5e-7)
    assert approx.epsilon == pytest.approx(zcdp_epsilon(left, 5e-7), rel=1e-9)
    pure = s.remaining_pure
    assert pure is not None and 0 < pure.epsilon < 2.0 - 0.2
    assert "worth ApproxDP" in repr(s)


def test_approx_session_takes_pure_budgets_at_face_value(frame: pd.DataFrame) -> None:
    # Issue 32, item 5: ApproxDP(2, 1e-6) accepts four PureDP(0.5) queries (Tumult
    # charges each (0.5, 0)); the zCDP-only filter refused the first as worth eps 2.46.
    s = session(dp.ApproxDP(2.0, 1e-6), frame)
    for _ in range(4):
        result = s.evaluate(Query().count(), budget=dp.PureDP(0.5))
        assert result.releases[0].guarantee == dp.PureDP(0.5)
    assert [r.amount for r in s.history] == [(Fraction(0), Fraction(0), Fraction(1, 2))] * 4
    assert s.remaining_pure == dp.PureDP(0.0)
    with pytest.raises(dp.BudgetExceeded, match="PureDP"):
        s.evaluate(Query().count(), budget=dp.PureDP(0.01))
    with pytest.raises(dp.BudgetExceeded):
        s.evaluate(Query().count(), budget=dp.ZCDP(1e-6))
    assert len(s.history) == 4


def test_pure_query_budget_with_key_selection_is_refused(frame: pd.DataFrame) -> None:
    s = session(dp.ApproxDP(2.0, 1e-6), frame)
    query = Query().group_by("region", keys="private").count()
    with pytest.raises(dp.InvalidParameter, match="key selection"):
        s.evaluate(query, budget=dp.PureDP(0.2))
    assert s.spent == dp.ZCDP(0.0)


def test_partition_budgets_take_fractions(frame: pd.DataFrame) -> None:
    s = session(dp.PureDP(1.0), frame)
    parts = s.partition("region", ["north", "south"], budgets=Fraction(1, 3))
    # A part is a filter of a float budget: 1/3 is rounded down (never up) to a float.
    charged = s.history[-1].amount[0]
    assert charged <= Fraction(1, 3) and charged == Fraction(float(Fraction(1, 3)))
    for _ in range(3):
        parts["north"].evaluate(Query().count(), budget=Fraction(1, 3))
    assert parts["north"].remaining == dp.PureDP(0.0)
