"""End-to-end Session tests on real DuckDB over CSV and Parquet files."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.errors import BudgetExceeded, DataError, EngineError, InvalidParameter

REGIONS = KeySet.from_values(region=["north", "south", "east", "west"])


def grouped_query() -> Query:
    return (
        Query()
        .group_by("region", keys=REGIONS)
        .bound(max_groups=3, max_rows=1000)
        .count()
        .sum("income", bounds=(0.0, 100.0))
        .mean("income", bounds=(0.0, 100.0))
    )


@pytest.mark.parametrize("fixture", ["parquet_path", "csv_path"], ids=["parquet", "csv"])
def test_end_to_end_from_files(
    fixture: str, request: pytest.FixtureRequest, frame: pd.DataFrame
) -> None:
    path = request.getfixturevalue(fixture)
    session = dp.Session.from_path(path, privacy_unit="user", budget=dp.PureDP(10.0), rng=1)
    result = session.evaluate(grouped_query(), budget=dp.PureDP(9.0))
    df = result.dataframe
    assert list(df["region"]) == ["north", "south", "east", "west"]
    truth = frame.groupby("region")["income"].agg(["size", "sum", "mean"])
    for region in ["north", "south", "east"]:
        row = df[df.region == region].iloc[0]
        # Bounds are not binding here, so the estimates are noisy versions of the truth;
        # the intervals are exact (count, sum) at 95%: allow 4 half-widths (rate << 1e-6).
        assert abs(row["count"] - truth.loc[region, "size"]) <= 4 * (
            row["count_high"] - row["count"]
        )
        assert abs(row["sum_income"] - truth.loc[region, "sum"]) <= 4 * (
            row["sum_income_high"] - row["sum_income"]
        )
    assert session.spent == dp.PureDP(9.0)
    assert session.remaining == dp.PureDP(1.0)
    assert len(result.releases) == 4  # count, sum, mean's count and centred sum
    assert {r.mechanism for r in result.releases} == {"DiscreteLaplace"}
    assert all(isinstance(r.event, dp.accounting.DiscreteLaplaceEvent) for r in result.releases)


def exact(session: dp.Session, query: Query) -> dict[tuple[object, ...], list[int]]:
    compiled = session._compile(query, 1.0, salt=12345)
    return session._engine.aggregate(compiled.plan), compiled  # type: ignore[return-value]


def test_engine_aggregates_match_pandas(frame: pd.DataFrame) -> None:
    session = dp.Session.from_pandas(frame, budget=dp.ZCDP(1.0), rng=1)
    query = (
        Query()
        .filter("age >= 30")
        .with_column("k_income", "income / 10")
        .group_by("region", keys=REGIONS)
        .count()
        .sum("k_income", bounds=(0.0, 8.0))
        .count_distinct("age")
    )
    values, compiled = exact(session, query)
    sub = frame[frame.age >= 30].assign(k=lambda d: (d.income / 10).clip(0, 8))
    inv = compiled.specs[1].statistic.inv
    for region, group in sub.groupby("region"):
        count, fixed_sum, distinct = values[(region,)]
        assert count == len(group)
        expected = int(np.round(group.k.to_numpy() * inv).astype(np.int64).sum())
        assert fixed_sum == expected  # exact integer sum on the grid
        assert abs(fixed_sum / inv - group.k.sum()) <= len(group) / inv
        assert distinct == group.age.nunique()
    assert ("west",) not in values


def test_from_arrow_and_duckdb(frame: pd.DataFrame) -> None:
    import duckdb

    s1 = dp.Session.from_arrow(pa.Table.from_pandas(frame), budget=dp.PureDP(1.0), rng=1)
    con = duckdb.connect()
    con.execute("CREATE TABLE people AS SELECT * FROM frame")
    s2 = dp.Session.from_duckdb(con, "people", privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    q = Query().count()
    assert exact(s1, q)[0][()] == [len(frame)]
    assert exact(s2, q.bound(max_rows=10**6))[0][()] == [len(frame)]


def test_nan_null_inf_handling(tmp_path: Path) -> None:
    df = pd.DataFrame(
        {
            "user": [1, 2, 3, 4, 5, None],
            "x": [1.0, np.nan, None, np.inf, -np.inf, 2.0],
        }
    )
    session = dp.Session.from_pandas(df, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    q = (
        Query()
        .bound(max_rows=5)
        .count()
        .sum("x", bounds=(-10.0, 10.0))
        .mean("x", bounds=(-10.0, 10.0))
    )
    values, compiled = exact(session, q)
    count, fixed_sum, n_values, _ = values[()]
    assert count == 5  # the row whose privacy unit is NULL is dropped
    inv = compiled.specs[1].statistic.inv
    assert fixed_sum == round(1.0 * inv) + round(10.0 * inv) + round(-10.0 * inv)  # inf clamped
    assert n_values == 3  # NULL and NaN dropped from sums and means


def test_empty_table() -> None:
    df = pd.DataFrame({"user": pd.Series([], dtype="int64"), "x": pd.Series([], dtype="float64")})
    session = dp.Session.from_pandas(df, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    result = session.evaluate(
        Query().bound(max_rows=2).count().mean("x", bounds=(0.0, 1.0)), budget=0.5
    )
    assert len(result.dataframe) == 1
    assert 0.0 <= result.dataframe["mean_x"].iloc[0] <= 1.0


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: Query().sum("nope", bounds=(0, 1)), DataError, "Available columns"),
        (lambda: Query().sum("region", bounds=(0, 1)), DataError, "a number is needed"),
        (lambda: Query().filter("nope > 1").count(), DataError, "Available columns"),
        (lambda: Query().filter("age IN (SELECT 1)").count(), InvalidParameter, "not allowed"),
        (
            lambda: Query().filter("age > (SELECT max(age) FROM people)").count(),
            InvalidParameter,
            "not allowed",
        ),
        (lambda: Query().filter("sum(age) > 1").count(), InvalidParameter, "not allowed"),
        (
            lambda: Query().with_column("y", "read_text('/etc/passwd')").count(),
            InvalidParameter,
            "not",
        ),
        (lambda: Query().group_by("region", keys=REGIONS).count(), InvalidParameter, "max_groups"),
        (lambda: Query().count(), InvalidParameter, "max_rows"),
        (lambda: Query(), InvalidParameter, "no aggregation"),
        (
            lambda: (
                Query().group_by("region", keys="private").bound(max_groups=1, max_rows=1).count()
            ),
            InvalidParameter,
            "ApproxDP",
        ),
    ],
    ids=[
        "missing",
        "non-numeric",
        "filter-missing",
        "subquery",
        "scalar-subquery",
        "aggregate",
        "table-function",
        "no-max-groups",
        "no-max-rows",
        "empty",
        "selection-pure",
    ],
)
def test_bad_queries_spend_nothing(frame: pd.DataFrame, build, error, message) -> None:  # type: ignore[no-untyped-def]
    session = dp.Session.from_pandas(frame, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    with pytest.raises(error, match=message):
        session.evaluate(build(), budget=0.5)
    assert session.spent == dp.PureDP(0.0)
    assert session.history == []


def test_schema_level_engine_error_spends_nothing(frame: pd.DataFrame) -> None:
    # A statement that does not bind (a function with the wrong argument types) fails
    # in prepare(), before the charge, with the binder's (schema-level) message.
    session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=1)
    query = Query().with_column("bad", "year(region)").sum("age", bounds=(0, 1))
    with pytest.raises(EngineError, match="cannot run the query"):
        session.evaluate(query, budget=0.5)
    assert session.spent == dp.PureDP(0.0)


def test_a_cast_that_fails_on_some_rows_makes_them_missing(frame: pd.DataFrame) -> None:
    # CAST is TRY_CAST in user expressions: the rows whose region is not a number get
    # NULL (dropped by the filter), on every dataset; the query succeeds.
    session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=1)
    query = (
        Query()
        .with_column("bad", "CAST(region AS INTEGER)")
        .sum("age", bounds=(0, 1))
        .filter("bad > 0")
    )
    result = session.evaluate(query, budget=0.5)
    assert session.spent == dp.PureDP(0.5)
    assert len(result.dataframe) == 1


@pytest.mark.parametrize(
    "budget",
    [dp.ApproxDP(1.0, 0.0), dp.RDP((2.0,), (1.0,)), 1.0, "eps=1", dp.PureDP(0.0)],
    ids=["approx-no-delta", "rdp", "float", "str", "zero"],
)
def test_bad_session_budgets(frame: pd.DataFrame, budget: object) -> None:
    with pytest.raises(InvalidParameter, match="budget"):
        dp.Session.from_pandas(frame, budget=budget, rng=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "budget",
    [dp.ZCDP(0.1), 0.0, 1.5, float("nan"), None],
    ids=["wrong-kind", "zero", "over", "nan", "none"],
)
def test_bad_query_budgets(frame: pd.DataFrame, budget: object) -> None:
    session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=1)
    with pytest.raises(InvalidParameter, match="budget"):
        session.evaluate(Query().count(), budget=budget)


def test_missing_privacy_unit_and_file(tmp_path: Path, frame: pd.DataFrame) -> None:
    with pytest.raises(DataError, match="Available columns"):
        dp.Session.from_pandas(frame, privacy_unit="person", budget=dp.PureDP(1.0))
    with pytest.raises(DataError, match="no file"):
        dp.Session.from_path(tmp_path / "missing.parquet", budget=dp.PureDP(1.0))


def test_budget_exceeded_spends_nothing(frame: pd.DataFrame) -> None:
    session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=1)
    session.evaluate(Query().count(), budget=dp.PureDP(0.75))
    with pytest.raises(BudgetExceeded, match="Remaining"):
        session.evaluate(Query().count(), budget=dp.PureDP(0.5))
    assert session.remaining == dp.PureDP(0.25)


def test_explain_spends_nothing_and_matches_evaluate(frame: pd.DataFrame) -> None:
    session = dp.Session.from_pandas(frame, privacy_unit="user", budget=dp.ZCDP(1.0), rng=1)
    q = grouped_query()
    explanation = session.explain(q, budget=dp.ZCDP(0.5))
    assert session.spent == dp.ZCDP(0.0)
    assert "DiscreteGaussian" in str(explanation)
    count = explanation.statistics[0]
    # L2 sensitivity sqrt(3) * 1000 over rho = 0.5 / 3 (three aggregations, weight 1).
    assert count.noise_scale == pytest.approx(np.sqrt(3) * 1000 / np.sqrt(2 * 0.5 / 3), rel=1e-9)
    result = session.evaluate(q, budget=dp.ZCDP(0.5))
    assert result.releases[0].error.standard_deviation == pytest.approx(count.standard_deviation)  # type: ignore[union-attr]
    total = sum(Fraction(r.guarantee.rho) for r in result.releases)  # type: ignore[union-attr]
    assert total <= Fraction(0.5) * (1 + Fraction(1, 10**12))


def test_histogram_bins(frame: pd.DataFrame) -> None:
    session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=1)
    q = Query().group_by_bins("age", [18, 40, 60, 90]).count()
    values, _ = exact(session, q)
    expected = np.histogram(np.clip(frame.age, 18, 89), bins=[18, 40, 60, 90])[0]
    assert [values[(i,)][0] for i in range(3)] == list(expected)


def test_private_key_selection_end_to_end() -> None:
    rng = np.random.default_rng(3)
    big = pd.DataFrame({"user": np.arange(3000), "city": rng.choice(["a", "b"], 3000)})
    rare = pd.DataFrame({"user": [5000, 5001], "city": ["secret", "secret2"]})
    df = pd.concat([big, rare])
    session = dp.Session.from_pandas(df, privacy_unit="user", budget=dp.ApproxDP(1.0, 1e-6), rng=2)
    q = Query().group_by("city", keys="private").bound(max_groups=1, max_rows=1).count()
    explanation = session.explain(q, budget=0.5)
    assert explanation.selection_threshold is not None and explanation.selection_threshold > 5
    result = session.evaluate(q, budget=0.5)
    assert set(result.dataframe["city"]) == {"a", "b"}
    # Half of the selection delta (0.5e-6) was asked for; the charge is what the integer
    # threshold actually costs, at most that.
    charged = session.history[-1].amount[1]
    assert 0 < charged <= Fraction(0.25e-6)
    assert charged == Fraction(explanation.selection_delta)  # type: ignore[arg-type]
    assert session.remaining_selection_delta == pytest.approx(0.5e-6 - float(charged))


def test_partition_charges_max(frame: pd.DataFrame) -> None:
    session = dp.Session.from_pandas(frame, privacy_unit="user", budget=dp.PureDP(2.0), rng=1)
    parts = session.partition(
        "region", ["north", "south", "east"], [dp.PureDP(0.5), dp.PureDP(1.0), 0.25]
    )
    assert session.spent == dp.PureDP(1.0)
    counts = {}
    for key, part in parts.items():
        values, _ = exact(part, Query().bound(max_rows=10**6).count_distinct())
        counts[key] = values[()][0]
        part.evaluate(Query().bound(max_rows=5).count(), budget=1.0)
    # Each person is assigned to exactly one part.
    assert sum(counts.values()) == frame.user.nunique()
    assert parts["south"].remaining == dp.PureDP(0.0)
    with pytest.raises(BudgetExceeded):
        parts["north"].evaluate(Query().bound(max_rows=5).count(), budget=0.1)
