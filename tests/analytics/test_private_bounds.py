"""Clamping bounds found privately, and explain() for order statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.errors import BudgetExceeded, DataError, EngineError, InvalidParameter
from dpkit.mechanisms._base import DownSensitivityBound, RankErrorBound

KEYS = KeySet.from_values(region=["north", "south", "east"])
STRICT = 1 - 1e-6  # confidence of every accuracy check below (false-failure rate 1e-6)


def skewed(n: int = 20_000, seed: int = 1) -> pd.DataFrame:
    """One row per person; values in [0, 100] plus 0.5% outliers at 10^4."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 100.0, n)
    x[rng.random(n) < 0.005] = 1e4
    return pd.DataFrame({"x": x, "region": rng.choice(["north", "south", "east"], n)})


def order_statistic(values: np.ndarray, rank: int) -> float:
    ordered = np.sort(values)
    return float(ordered[min(max(rank, 1), ordered.size) - 1])


@pytest.mark.parametrize(
    ("kind", "budget"),
    [("sum", dp.PureDP(100.0)), ("mean", dp.PureDP(100.0)), ("mean", dp.ZCDP(5.0))],
    ids=["sum-pure", "mean-pure", "mean-zcdp"],
)
def test_private_bounds_accuracy_on_a_large_budget(kind: str, budget: object) -> None:
    frame = skewed()
    session = dp.Session.from_pandas(frame, budget=budget, rng=3)
    build = getattr(Query(), kind)
    query = build("x", bounds="private", search_range=(-1e5, 1e5))
    explained = session.explain(query, budget=1.0, confidence=STRICT)
    bounds_step = explained.orders[0]
    assert bounds_step.role == "bounds" and bounds_step.levels == (0.01, 0.99)
    result = session.evaluate(query, budget=1.0, confidence=STRICT)
    name = f"{kind}_x"
    low = float(result.columns[f"{name}_clamp_low"][0])
    high = float(result.columns[f"{name}_clamp_high"][0])
    # Each bound is a grid point within the rank radius of its order statistic
    # (snapped: one grid step either way), with probability >= STRICT.
    n, k, step = len(frame), bounds_step.rank_radius, bounds_step.grid_step
    assert k is not None and k < 0.005 * n  # the radius is small next to the 1% tail
    x = frame.x.to_numpy()
    for value, q in ((low, 0.01), (high, 0.99)):
        m = int(np.ceil(q * n))
        assert order_statistic(x, m - k) - step <= value <= order_statistic(x, m + k) + step
    # The outliers (0.5% of rows at 10^4, beyond the 99th percentile) are clamped away.
    assert high < 1000.0
    # The estimate is the clamped truth plus noise: inside the exact interval.
    clamped = np.clip(x, low, high)
    truth = clamped.sum() if kind == "sum" else clamped.mean()
    if kind == "sum":
        assert result.columns[f"{name}_low"][0] <= truth <= result.columns[f"{name}_high"][0]
    else:
        assert abs(result.columns[name][0] - truth) < 0.05
    # Power: without clamping the outliers the truth would be far outside.
    raw = x.sum() if kind == "sum" else x.mean()
    assert not result.columns[f"{name}_low"][0] <= raw <= result.columns[f"{name}_high"][0]


def test_private_bounds_charged_once(parquet_path: Path) -> None:
    session = dp.Session.from_path(parquet_path, privacy_unit="user", budget=dp.PureDP(2.0), rng=5)
    query = (
        Query()
        .group_by("region", keys=KEYS)
        .bound(max_groups=3, max_rows=10)
        .count()
        .mean("income", bounds="private", search_range=(-1000.0, 1000.0))
        .variance("income", bounds="private", search_range=(-1000.0, 1000.0), bounds_share=0.3)
        .median("income", bounds=(0.0, 100.0))
    )
    result = session.evaluate(query, budget=dp.PureDP(1.0))
    assert session.spent == dp.PureDP(1.0)
    assert len(session.history) == 1
    assert result.dataframe.shape[0] == 3
    # Per person: each bounds release costs eps * max_rows (2 levels), the noisy
    # statistics their own cost; together at most the query budget.
    bounds = [r for r in result.releases if isinstance(r.error, RankErrorBound)][:4]
    bound_cost = sum(r.guarantee.epsilon * 10 for r in bounds)
    assert bound_cost == pytest.approx(0.25 * 0.2 + 0.25 * 0.3, rel=1e-9)
    lows = result.columns["mean_income_clamp_low"]
    assert (lows == lows[0]).all() and len(result.notes) == 2


def test_constant_column_gets_a_nonempty_interval() -> None:
    frame = pd.DataFrame({"x": np.full(500, 7.0)})
    session = dp.Session.from_pandas(frame, budget=dp.PureDP(100.0), rng=1)
    query = Query().sum("x", bounds="private", search_range=(0.0, 10.0))
    result = session.evaluate(query, budget=1.0)
    low, high = result.columns["sum_x_clamp_low"][0], result.columns["sum_x_clamp_high"][0]
    assert 0.0 <= low < high <= 10.0


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda q: q.sum("income", bounds="private"), InvalidParameter),
        (lambda q: q.sum("income", bounds=(0, 1), search_range=(0, 1)), InvalidParameter),
        (lambda q: q.mean("income", bounds="private", search_range=(5, 5)), InvalidParameter),
        (
            lambda q: q.mean("income", bounds="private", search_range=(0, 1), bounds_share=1.0),
            InvalidParameter,
        ),
        (
            lambda q: q.mean(
                "income", bounds="private", search_range=(0, 1), bounds_levels=(0.9, 0.1)
            ),
            InvalidParameter,
        ),
        (lambda q: q.mean("region", bounds="private", search_range=(0, 1)), DataError),
        (lambda q: q.variance("nope", bounds="private", search_range=(0, 1)), DataError),
    ],
    ids=[
        "no-search-range",
        "range-without-private",
        "empty-range",
        "share-1",
        "levels",
        "text",
        "missing",
    ],
)
def test_bad_private_bounds_spend_nothing(parquet_path: Path, build: object, error: type) -> None:
    session = dp.Session.from_path(parquet_path, privacy_unit="user", budget=dp.PureDP(1.0))
    with pytest.raises(error):
        query = build(Query().bound(max_rows=2))  # type: ignore[operator]
        session.evaluate(query, budget=1.0)
    assert session.spent == dp.PureDP(0.0) and not session.history


def test_engine_failure_before_the_charge_spends_nothing(
    parquet_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # prepare() binds every statement (bounds histograms and the clamped aggregate)
    # before the charge: a failure there spends nothing.
    session = dp.Session.from_path(parquet_path, privacy_unit="user", budget=dp.PureDP(1.0))

    def fail(*args: object) -> None:
        raise EngineError("injected")

    monkeypatch.setattr(session._engine, "prepare", fail)
    query = Query().bound(max_rows=2).count().sum("income", bounds="private", search_range=(0, 1))
    with pytest.raises(EngineError):
        session.evaluate(query, budget=1.0)
    assert session.spent == dp.PureDP(0.0)
    with pytest.raises(BudgetExceeded):
        session.evaluate(query, budget=dp.PureDP(2.0))
    assert not session.history


@pytest.mark.parametrize("where", ["histograms", "aggregate"])
def test_engine_failure_after_the_charge_keeps_it(
    parquet_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    # A failure while rows are read (out of memory, a disk error) could depend on the
    # data, so it fails closed: the whole budget is charged and the Session is locked.
    session = dp.Session.from_path(parquet_path, privacy_unit="user", budget=dp.PureDP(1.0))

    def fail(*args: object) -> None:
        raise EngineError("injected")

    monkeypatch.setattr(session._engine, where, fail)
    query = Query().bound(max_rows=2).count().sum("income", bounds="private", search_range=(0, 1))
    with pytest.raises(dp.SessionLocked) as caught:
        session.evaluate(query, budget=0.5)
    assert "injected" not in str(caught.value) and caught.value.__context__ is None
    assert session.spent == dp.PureDP(1.0) and len(session.history) == 2
    with pytest.raises(dp.SessionLocked):
        session.evaluate(Query().count(), budget=0.1)


def test_explain_lists_every_aggregation_and_spends_nothing(parquet_path: Path) -> None:
    session = dp.Session.from_path(parquet_path, privacy_unit="user", budget=dp.PureDP(4.0), rng=9)
    query = (
        Query()
        .group_by("region", keys=KEYS)
        .bound(max_groups=3, max_rows=10)
        .count()
        .sum("income", bounds="private", search_range=(0.0, 1000.0))
        .quantile("income", [0.25, 0.75], bounds=(0.0, 100.0))
        .median("age", bounds=(0.0, 120.0))
        .max("income", bounds=(0.0, 100.0))
        .min("age", bounds=(0.0, 120.0))
    )
    explained = session.explain(query, budget=dp.PureDP(2.0))
    assert session.spent == dp.PureDP(0.0) and not session.history
    listed = {s.aggregation for s in explained.statistics} | {
        o.aggregation for o in explained.orders
    }
    assert listed == {a.name for a in query.aggregations}
    roles = {(o.aggregation, o.role) for o in explained.orders}
    assert roles == {
        ("sum_income", "bounds"),
        ("quantile_income", "quantile"),
        ("median_age", "quantile"),
        ("max_income", "max"),
        ("min_age", "min"),
    }
    text = str(explained)
    for name in listed:
        assert name in text
    assert "rank radius" in text and "removals" in text
    # What explain states is what the releases state.
    by_role = {(o.aggregation, o.role): o for o in explained.orders}
    result = session.evaluate(query, budget=dp.PureDP(2.0))
    ranks = [r.error for r in result.releases if isinstance(r.error, RankErrorBound)]
    downs = [r.error for r in result.releases if isinstance(r.error, DownSensitivityBound)]
    expected_ranks = {
        by_role[("sum_income", "bounds")].rank_radius,
        by_role[("quantile_income", "quantile")].rank_radius,
        by_role[("median_age", "quantile")].rank_radius,
    }
    assert {e.rank_radius for e in ranks} == expected_ranks
    assert {e.removals for e in downs} == {by_role[("max_income", "max")].removals}
    assert {e.confidence for e in downs} == {by_role[("max_income", "max")].confidence}
    quantile = by_role[("quantile_income", "quantile")]
    assert quantile.releases_per_group == 2 and quantile.max_rows == 10
    assert quantile.budget.epsilon == pytest.approx(2.0 / 6)  # rounded up
    assert quantile.release_epsilon == pytest.approx(2.0 / 6 / (2 * 3 * 10))
