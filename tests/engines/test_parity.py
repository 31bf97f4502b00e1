"""Engine parity: for the same rows, salt and plan, Spark computes DuckDB's integers.

Every query type runs on both engines on small data and the exact statistics -- bounded
counts, fixed-point sums, distinct counts, grid histograms, the candidate keys of
private selection (before noise) -- are compared bit for bit; then whole releases with
the same seeded generator must be equal, since the noise is drawn in Python from the
same integers. The keyed hash that chooses kept groups and rows is dpkit's own
(dpkit.analytics.engines._hash), so both engines keep the same ones.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.analytics._describe_scales import _magnitude_edges
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.analytics.engines.spark import SparkEngine

SALT = 987_654_321


def table(rows: int = 1500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "user": rng.integers(0, 90, rows),
            "email": [f"p{i}@example.org" for i in rng.integers(0, 60, rows)],
            "name": rng.choice(["ana", "bo", "chloé", "dmitri", "🙂"], rows),
            "region": rng.choice(["north", "south", "east"], rows),
            "income": np.round(rng.lognormal(3.0, 0.7, rows), 2),
            "rating": rng.integers(1, 6, rows).astype(float),
            "score": rng.normal(0.0, 1e-3, rows),
            "flag": rng.random(rows) < 0.3,
            "day": [
                dt.date(2020, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 900, rows)
            ],
        }
    )
    frame.loc[rng.random(rows) < 0.05, "income"] = np.nan
    frame.loc[3, "score"] = -0.0
    frame.loc[4, "score"] = 5e-324  # a subnormal
    frame.loc[5, "score"] = 2.0**-20  # a power of two
    return frame


REGIONS = KeySet.from_values(region=["north", "south", "east", "west"])
BOUNDS = (0.0, 100.0)

QUERIES: dict[str, Query] = {
    "counts and sums, grouped": Query()
    .group_by("region", keys=REGIONS)
    .bound(max_groups=2, max_rows=3)
    .count()
    .sum("income", bounds=BOUNDS)
    .mean("income", bounds=BOUNDS)
    .variance("income", bounds=BOUNDS),
    "ungrouped": Query().bound(max_rows=4).count().sum("income", bounds=BOUNDS),
    "a total bound over groups": Query()
    .group_by("region", keys=REGIONS)
    .bound(max_groups=3, max_rows=6, max_total_rows=7)
    .count()
    .sum("income", bounds=BOUNDS)
    .mean("rating", bounds=(0.0, 5.0))
    .count_distinct(),
    "distinct strings": Query()
    .group_by("region", keys=REGIONS)
    .bound(max_groups=1, max_rows=2)
    .count_distinct("name"),
    "distinct doubles": Query().bound(max_rows=3).count_distinct("score"),
    "quantiles": Query()
    .group_by("region", keys=REGIONS)
    .bound(max_groups=2, max_rows=3)
    .quantile("income", [0.1, 0.5, 0.9], bounds=BOUNDS),
    "max and min": Query()
    .group_by("region", keys=REGIONS)
    .bound(max_groups=2, max_rows=3)
    .max("income", bounds=BOUNDS)
    .min("income", bounds=BOUNDS),
    "bins": Query()
    .group_by_bins("income", [0.0, 10.0, 20.0, 40.0, 100.0])
    .bound(max_groups=2, max_rows=5)
    .count()
    .median("rating", bounds=(0.0, 6.0)),
    # describe's power-of-two bins: the arithmetic index (SqlEngine._ladder_index) and
    # every bin as a key (no IN list; the keys' table as a range).
    "magnitude bins": Query()
    .group_by_bins("income", _magnitude_edges())
    .bound(max_groups=2, max_rows=5)
    .count()
    .sum("rating", bounds=(0.0, 5.0)),
    "two key columns": Query()
    .group_by("region", "flag", keys=REGIONS * KeySet.from_values(flag=[True, False]))
    .bound(max_groups=3, max_rows=2)
    .count()
    .sum("rating", bounds=(0.0, 5.0)),
    "grouped by string person's name": Query()
    .group_by("name", keys=KeySet.from_values(name=["ana", "bo", "chloé", "🙂"]))
    .bound(max_groups=1, max_rows=2)
    .count(),
    "grouped by date": Query()
    .group_by("day", keys=KeySet.from_values(day=[dt.date(2020, 1, 1), dt.date(2021, 6, 1)]))
    .bound(max_groups=1, max_rows=9)
    .count(),
    "expressions": Query()
    .with_column("per_star", "income / (rating - 3)")  # division by zero on rating 3
    .with_column("whole", "CAST(income AS INTEGER) + CAST(rating AS BIGINT)")
    .with_column("year", "year(day)")
    .filter("per_star > 0 OR year = 2021")
    .bound(max_rows=5)
    .sum("per_star", bounds=(0.0, 50.0))
    .sum("whole", bounds=(0.0, 200.0))
    .count(),
    "casts round like DuckDB": Query()
    .with_column("half", "CAST(rating + 0.5 AS INTEGER)")  # 1.5 -> 2, 2.5 -> 2 (even)
    .with_column("dec", "CAST(CAST(rating + 0.5 AS DECIMAL(4, 1)) AS INTEGER)")  # away
    .bound(max_rows=3)
    .sum("half", bounds=(0.0, 10.0))
    .sum("dec", bounds=(0.0, 10.0)),
}


def sessions(spark: Any, frame: pd.DataFrame, unit: str | None) -> tuple[dp.Session, dp.Session]:
    budget = dp.ApproxDP(1.0, 1e-6)
    duck = dp.Session.from_pandas(frame, privacy_unit=unit, budget=budget, rng=11)
    sparked = dp.Session.from_spark(
        spark.createDataFrame(frame), privacy_unit=unit, budget=budget, rng=11
    )
    return duck, sparked


def exact(session: dp.Session, query: Query) -> tuple[Any, Any]:
    compiled = session._compile(query, 0.1, salt=SALT)
    engine = session._engine
    engine.prepare(compiled.plan, compiled.orders)
    histograms = [engine.histograms(compiled.plan, spec) for spec in compiled.orders]
    aggregates = engine.aggregate(compiled.plan) if compiled.plan.statistics else {}
    return aggregates, histograms


@pytest.fixture(scope="module")
def pairs(spark: Any) -> dict[str | None, tuple[dp.Session, dp.Session]]:
    frame = table()
    return {unit: sessions(spark, frame, unit) for unit in (None, "user", "email")}


def grid() -> list[Any]:
    """Every query with every privacy unit; the default run keeps a subset that runs
    every code path (the whole grid runs with --runslow).

    No unit (``None``) takes the row-level SQL, a unit the per-person bounding
    (``SqlEngine._row_level`` against ``_bounded`` and the per-person histograms): every
    query runs both. The unit's type, BIGINT (``user``) or VARCHAR (``email``), enters
    the SQL only as the typed part of the keyed hash (``SqlEngine._pair_parts`` and
    ``_source``), whose values test_keyed_hash.py compares type by type on both engines;
    otherwise the unit is a column selected, tested for NULL and grouped by, whatever its
    type. So each query's per-person run takes one of the two units, alternately, which
    gives each unit type grouped and ungrouped queries, distinct counts, order
    statistics, bins and derived columns; the other unit is the same SQL with the other
    hash part.
    """
    cases = []
    for i, name in enumerate(QUERIES):
        default_unit = ("user", "email")[i % 2]
        for unit in (None, "user", "email"):
            marks = [] if unit in (None, default_unit) else [pytest.mark.slow]
            cases.append(pytest.param(name, unit, marks=marks, id=f"{name}-{unit}"))
    return cases


@pytest.mark.parametrize(("name", "unit"), grid())
def test_exact_statistics_are_identical(
    name: str, unit: str | None, pairs: dict[str | None, tuple[dp.Session, dp.Session]]
) -> None:
    duck, sparked = pairs[unit]
    query = QUERIES[name]
    assert duck._compile(query, 0.1, salt=SALT).plan == sparked._compile(query, 0.1, salt=SALT).plan
    assert isinstance(sparked._engine, SparkEngine)
    expected, got = exact(duck, query), exact(sparked, query)
    assert got == expected
    assert any(expected[0].values()) or any(expected[1]), "a query that computes nothing"


def test_schemas_use_one_vocabulary(pairs: dict[str | None, tuple[dp.Session, dp.Session]]) -> None:
    duck, sparked = pairs[None]
    assert sparked.columns == duck.columns


@pytest.mark.parametrize("unit", [None, "user"])
def test_releases_are_identical_with_the_same_generator(spark: Any, unit: str | None) -> None:
    frame = table(seed=3)
    query = QUERIES["counts and sums, grouped"].median("income", bounds=BOUNDS)
    if unit is None:
        query = Query().count().mean("income", bounds=BOUNDS).median("income", bounds=BOUNDS)
    duck, sparked = sessions(spark, frame, unit)
    # Same salt: the Session draws it from its generator, seeded alike.
    a, b = duck.evaluate(query, budget=0.3), sparked.evaluate(query, budget=0.3)
    assert a.columns.keys() == b.columns.keys()
    for column in a.columns:
        left, right = np.asarray(a.columns[column]), np.asarray(b.columns[column])
        same = np.array_equal(left, right, equal_nan=left.dtype.kind == "f")
        assert same, column
    assert duck.spent == sparked.spent


def test_private_key_selection_selects_the_same_keys(spark: Any) -> None:
    frame = table(seed=4)
    query = Query().group_by("name", keys="private").bound(max_groups=2, max_rows=3).count()
    duck, sparked = sessions(spark, frame, "user")
    assert exact(duck, query) == exact(sparked, query)
    a, b = duck.evaluate(query, budget=0.5), sparked.evaluate(query, budget=0.5)
    assert sorted(a.columns["name"]) == sorted(b.columns["name"])


def test_partitions_keep_every_person_in_one_part_on_both(spark: Any) -> None:
    frame = table(seed=5)
    duck, sparked = sessions(spark, frame, "user")
    keys = ["north", "south", "east"]
    units = Query().bound(max_rows=1).count()  # one row per person: persons per part
    per_part = {}
    for label, session in (("duck", duck), ("spark", sparked)):
        parts = session.partition("region", keys, budgets=0.3)
        per_part[label] = {key: exact(part, units)[0] for key, part in parts.items()}
    assert per_part["duck"] == per_part["spark"]
    assert sum(c[()][0] for c in per_part["duck"].values()) == frame["user"].nunique()


@pytest.mark.parametrize("limit", [2])
def test_window_branch_beyond_min_by_limit_is_identical(
    spark: Any, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # max_rows above min_by's n (10^5 on Spark, 10^6 on DuckDB) takes the window
    # branch; lowering both limits runs it on small data.
    frame = table(seed=6)
    duck, sparked = sessions(spark, frame, "user")
    query = QUERIES["quantiles"]
    expected = exact(duck, query)
    monkeypatch.setattr(DuckDBEngine, "top_n_limit", limit)
    monkeypatch.setattr(SparkEngine, "top_n_limit", limit)
    assert exact(duck, query) == expected
    assert exact(sparked, query) == expected


@pytest.mark.slow
@pytest.mark.parametrize("name", list(QUERIES))
def test_exact_statistics_are_identical_on_a_larger_table(spark: Any, name: str) -> None:
    # The documented larger parity run (pytest tests/engines --runslow): 10^5 rows,
    # 3,000 persons, every query type, bit for bit.
    frame = table(rows=100_000, seed=9)
    frame["user"] = np.random.default_rng(9).integers(0, 3000, len(frame))
    duck, sparked = sessions(spark, frame, "user")
    assert exact(sparked, QUERIES[name]) == exact(duck, QUERIES[name])


def test_private_bounds_releases_are_identical(spark: Any) -> None:
    # Two stages on each engine: the bounds' quantile histograms, then the mean within
    # the released bounds; the same generator draws the same salts and noise.
    frame = table(seed=7)
    query = (
        Query()
        .group_by("region", keys=REGIONS)
        .bound(max_groups=2, max_rows=3)
        .mean("income", bounds="private", search_range=(-1000.0, 1000.0))
    )
    duck, sparked = sessions(spark, frame, "user")
    a, b = duck.evaluate(query, budget=0.5), sparked.evaluate(query, budget=0.5)
    for column in a.columns:
        left, right = np.asarray(a.columns[column]), np.asarray(b.columns[column])
        assert np.array_equal(left, right, equal_nan=left.dtype.kind == "f"), column
