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
        assert np.isnan(row["median_income_se"]) and np.isnan(row["max_income_low"])
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
