"""Quantiles, median, max and min in Session queries, on real DuckDB files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.analytics._order import release_order
from dpkit.errors import DataError, InvalidParameter
from dpkit.estimators import Grid
from dpkit.estimators.quantiles import quantile_from_counts
from dpkit.random import as_random

KEYS = KeySet.from_values(region=["north", "south", "east"])


def session_on(path: Path, unit: str | None, budget: object = None) -> dp.Session:
    return dp.Session.from_path(path, privacy_unit=unit, budget=budget or dp.PureDP(4.0), rng=3)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_quantile_histogram_is_the_grids(
    fmt: str, frame: pd.DataFrame, request: pytest.FixtureRequest
) -> None:
    path = request.getfixturevalue(f"{fmt}_path")
    session = session_on(path, None)
    query = Query().group_by("region", keys=KEYS).quantile("income", [0.25, 0.5], bounds=(0, 100))
    compiled = session._compile(query, 1.0, salt=1)
    spec = compiled.orders[0]
    hist = session._engine.histograms(compiled.plan, spec)
    grid = Grid.linear(0.0, 100.0, size=spec.size)
    for (region,), counts in hist.items():
        expected = grid.histogram(frame.loc[frame.region == region, "income"].to_numpy())
        got = np.zeros(spec.size, dtype=np.int64)
        for i, c in counts.items():
            got[i] = c
        np.testing.assert_array_equal(got, expected)
        # Same counts and same seed: the same release as the numpy estimator.
        mine = release_order(spec, counts, as_random(11), 0.95)[0]
        theirs = quantile_from_counts(
            expected, grid, 0.25, epsilon=spec.parameter, rng=as_random(11)
        )
        assert mine.value == theirs.value and mine.error == theirs.error


def test_max_min_match_the_estimators(parquet_path: Path, frame: pd.DataFrame) -> None:
    session = session_on(parquet_path, "user")
    query = (
        Query()
        .group_by("region", keys=KEYS)
        .bound(max_groups=3)
        .max("income", bounds=(0, 100))
        .min("income", bounds=(0, 100))
    )
    compiled = session._compile(query, 1.0, salt=1)
    for spec in compiled.orders:
        hist = session._engine.histograms(compiled.plan, spec)
        for (region,), counts in hist.items():
            part = frame[frame.region == region]
            mine = release_order(spec, counts, as_random(5), 0.95)[0]
            function = dp.max if spec.kind == "max" else dp.min
            points = np.linspace(0.0, 100.0, spec.size)
            points[-1] = 100.0
            theirs = function(
                part.income,
                privacy_unit=part.user,
                grid=spec.points() if spec.kind == "max" else points,
                epsilon=spec.parameter,
                rng=as_random(5),
            )
            assert mine.value == pytest.approx(theirs.value)


def test_evaluate_accuracy_and_budget(parquet_path: Path, frame: pd.DataFrame) -> None:
    session = session_on(parquet_path, "user", dp.PureDP(20.0))
    query = (
        Query()
        .group_by("region", keys=KEYS)
        .bound(max_groups=3, max_rows=30)
        .median("income", bounds=(0, 100))
        .max("income", bounds=(0, 100))
    )
    result = session.evaluate(query, budget=dp.PureDP(10.0))
    assert session.spent == dp.PureDP(10.0)
    df = result.dataframe
    truth = frame.groupby("region").income.median()
    for _, row in df.iterrows():
        # ~1300 rows per region; rank radius from the release, converted loosely.
        assert abs(row["median_income"] - truth[row["region"]]) < 10.0
        assert row["max_income"] <= 100.0
        assert np.isnan(row["median_income_se"]) and np.isnan(row["max_income_se"])
        # A max is a lower bound of the exact one: [value, high]; a quantile's rank
        # accuracy implies no value interval narrower than its bounds.
        assert (row["max_income_low"], row["max_income_high"]) == (row["max_income"], 100.0)
        assert (row["median_income_low"], row["median_income_high"]) == (0.0, 100.0)
    kinds = {r.mechanism for r in result.releases}
    assert kinds == {"InverseSensitivityQuantile", "ShiftedInverseSensitivity"}
    # PureDP: the releases' epsilons, times the person's k groups and m rows, fit.
    quantile_eps = [r.guarantee.epsilon for r in result.releases if r.mechanism.startswith("Inv")]
    assert sum(quantile_eps) * 30 <= 5.0 + 1e-12


def test_zcdp_session_charges_rho(parquet_path: Path) -> None:
    session = session_on(parquet_path, "user", dp.ZCDP(1.0))
    query = Query().bound(max_rows=5).quantile("income", [0.1, 0.9], bounds=(0, 100))
    result = session.evaluate(query, budget=dp.ZCDP(0.5))
    assert session.spent == dp.ZCDP(0.5)
    eps = [r.guarantee.epsilon for r in result.releases]
    # bounded range: each release is (5 e)^2/8-zCDP for a person.
    assert sum((5 * e) ** 2 / 8 for e in eps) <= 0.5 + 1e-12


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda q: q.quantile("income", 0.5, bounds=(100, 0)), InvalidParameter),
        (lambda q: q.max("income", bounds=(1, 1)), InvalidParameter),
        (lambda q: q.quantile("income", 1.5, bounds=(0, 1)), InvalidParameter),
        (lambda q: q.median("region", bounds=(0, 1)), DataError),
        (lambda q: q.max("nope", bounds=(0, 1)), DataError),
    ],
    ids=["reversed", "empty-bounds", "bad-level", "non-numeric", "missing"],
)
def test_bad_input_spends_nothing(parquet_path: Path, build: object, error: type) -> None:
    session = session_on(parquet_path, "user")
    with pytest.raises(error):
        query = build(Query().bound(max_rows=2))  # type: ignore[operator]
        session.evaluate(query, budget=1.0)
    assert session.spent == dp.PureDP(0.0)


# ------------------------------------------------ accuracy columns of the result table


@pytest.mark.parametrize("budget", [dp.PureDP(4.0), dp.ZCDP(1.0)], ids=["pure", "zcdp"])
def test_order_statistics_carry_their_accuracy_as_columns(
    parquet_path: Path, budget: dp.Guarantee
) -> None:
    session = session_on(parquet_path, "user", budget)
    query = (
        Query()
        .group_by("region", keys=KEYS)
        .bound(max_groups=3, max_rows=5)
        .median("income", bounds=(0, 100))
        .quantile("income", [0.1, 0.9], bounds=(0, 100), name="q")
        .max("income", bounds=(0, 100))
        .min("income", bounds=(0, 100))
        .count()
    )
    result = session.evaluate(query, budget=_half(budget))
    df = result.dataframe
    expected = {
        "median_income_rank_radius",
        "q_0.1_rank_radius",
        "q_0.9_rank_radius",
        "max_income_removals",
        "min_income_removals",
    }
    assert expected <= set(df.columns)
    # Nothing else gained one: counts keep their four columns.
    assert not {c for c in df.columns if c.startswith("count_")} - {
        "count_se",
        "count_low",
        "count_high",
    }
    assert "median_income_removals" not in df and "max_income_rank_radius" not in df
    assert "q_rank_radius" not in df  # several levels: one column per level
    for column in expected:
        assert df[column].dtype == np.int64
        assert df[column].nunique() == 1 and int(df[column].iloc[0]) >= 0  # public
    # The numbers are the releases' own statements, level by level and group by group.
    radii = {r.error.rank_radius for r in result.releases if r.mechanism.startswith("Inv")}
    removals = {r.error.removals for r in result.releases if r.mechanism.startswith("Shift")}
    assert radii == set(df[[c for c in expected if "rank" in c]].to_numpy().ravel())
    assert removals == set(df[["max_income_removals", "min_income_removals"]].to_numpy().ravel())
    # And they are what explain() promised before anything was spent.
    explained = {o.aggregation: o for o in session.explain(query, budget=_half(budget)).orders}
    assert df["median_income_rank_radius"].iloc[0] == explained["median_income"].rank_radius
    assert df["q_0.9_rank_radius"].iloc[0] == explained["q"].rank_radius
    assert df["max_income_removals"].iloc[0] == explained["max_income"].removals


def _half(budget: dp.Guarantee) -> dp.Guarantee:
    return dp.PureDP(2.0) if isinstance(budget, dp.PureDP) else dp.ZCDP(0.5)


def test_accuracy_columns_of_an_empty_result_are_empty_integers(parquet_path: Path) -> None:
    # Private key selection on rows that the filter removes: no key is released.
    session = session_on(parquet_path, "user", dp.ApproxDP(4.0, 1e-6))
    query = (
        Query()
        .filter("income < 0")
        .group_by("region", keys="private")
        .bound(max_groups=1, max_rows=1)
        .median("income", bounds=(0, 100))
        .max("income", bounds=(0, 100))
    )
    df = session.evaluate(query, budget=dp.ApproxDP(1.0, 1e-7)).dataframe
    assert len(df) == 0
    assert df["median_income_rank_radius"].dtype == np.int64
    assert df["max_income_removals"].dtype == np.int64


@pytest.mark.parametrize(
    "build",
    [
        lambda q: q.max("income", bounds=(0, 100), name="m").count(name="m_removals"),
        lambda q: q.count(name="m_rank_radius").median("income", bounds=(0, 100), name="m"),
        lambda q: q.quantile("income", [0.5, 0.9], bounds=(0, 100), name="q").sum(
            "income", bounds=(0, 100), name="q_0.9_rank_radius"
        ),
        lambda q: q.count(name="c_se").mean("income", bounds=(0, 100), name="c"),
        lambda q: q.group_by("m_removals", keys=KeySet.from_values(m_removals=["north"])).max(
            "income", bounds=(0, 100), name="m"
        ),
    ],
    ids=["max-vs-count", "median-vs-count", "level-vs-sum", "se-vs-mean", "group-column"],
)
def test_result_column_collisions_are_refused_before_the_charge(
    parquet_path: Path, build: object
) -> None:
    frame = pd.read_parquet(parquet_path).assign(m_removals=lambda d: d.region)
    session = dp.Session.from_pandas(frame, budget=dp.PureDP(4.0), rng=3)
    query = build(Query())  # type: ignore[operator]
    with pytest.raises(InvalidParameter, match="another name"):
        session.evaluate(query, budget=1.0)
    assert session.spent == dp.PureDP(0.0)
