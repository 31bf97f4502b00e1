"""``Session.from_polars``: DataFrames and LazyFrames read as ``from_pandas`` and
``from_arrow`` read the same rows, the types DuckDB gives them, what is refused at
creation (before anything is spent), no pandas conversion, and Polars in
``from_tables`` and ``dp.synthesize``."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.errors import DataError, InvalidParameter

pl = pytest.importorskip("polars")
pa = pytest.importorskip("pyarrow")


def people(n_rows: int = 4000, n_users: int = 150, seed: int = 0) -> pd.DataFrame:
    """The analytics tests' person-level table (conftest.people)."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "user": rng.integers(0, n_users, n_rows),
            "region": rng.choice(["north", "south", "east"], n_rows),
            "age": rng.integers(18, 90, n_rows),
            "income": rng.uniform(0.0, 100.0, n_rows),
        }
    )


REGIONS = KeySet.from_values(region=["north", "south", "east", "west"])


def grouped_query() -> Query:
    return (
        Query()
        .group_by("region", keys=REGIONS)
        .bound(max_groups=3, max_rows=1000)
        .count()
        .sum("income", bounds=(0.0, 100.0))
        .mean("age", bounds=(18, 90))
        .quantile("income", 0.5, bounds=(0.0, 100.0))
    )


def released(session: dp.Session) -> pd.DataFrame:
    frame: pd.DataFrame = session.evaluate(grouped_query(), budget=dp.PureDP(1.0)).dataframe
    return frame


@pytest.mark.parametrize("lazy", [False, True], ids=["DataFrame", "LazyFrame"])
def test_same_release_as_from_pandas_for_the_same_seed(lazy: bool) -> None:
    frame = people()
    polars_frame = pl.from_pandas(frame)
    data = polars_frame.lazy() if lazy else polars_frame
    on_polars = dp.Session.from_polars(data, privacy_unit="user", budget=dp.PureDP(2.0), rng=7)
    on_pandas = dp.Session.from_pandas(frame, privacy_unit="user", budget=dp.PureDP(2.0), rng=7)
    assert on_polars.columns == on_pandas.columns
    assert on_polars.source == "polars"
    pd.testing.assert_frame_equal(released(on_polars), released(on_pandas))
    assert on_polars.spent == on_pandas.spent == dp.PureDP(1.0)


def test_a_lazy_plan_is_collected_once_at_creation() -> None:
    frame = people()
    lazy = (
        pl.from_pandas(frame)
        .lazy()
        .filter(pl.col("age") >= 30)
        .with_columns((pl.col("income") * 2).alias("doubled"))
    )
    session = dp.Session.from_polars(lazy, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    assert session.columns["doubled"] == "DOUBLE"
    plan = session._compile(Query().bound(max_rows=10**6).count(), 1.0, salt=1).plan
    assert session._engine.aggregate(plan)[()] == [int((frame.age >= 30).sum())]


# ------------------------------------------------------------------ types
def typed_frame(rows: int = 3) -> Any:
    """One column of each Polars type the Session may be given."""
    at = dt.datetime(2024, 1, 1, 12)
    return pl.DataFrame(
        {
            "cat": pl.Series(["a", "b", "a"], dtype=pl.Categorical),
            "enum": pl.Series(["x", "y", "x"], dtype=pl.Enum(["x", "y"])),
            "dec": pl.Series([Decimal("1.50"), Decimal("2.25"), None], dtype=pl.Decimal(10, 2)),
            "tz": pl.Series([at] * 3).dt.replace_time_zone("Europe/Paris"),
            "naive": pl.Series([at] * 3),
            "day": pl.Series([dt.date(2024, 1, 1)] * 3),
            "null": pl.Series([None] * 3, dtype=pl.Null),
            "list": pl.Series([[1], [2, 3], []]),
            "struct": pl.Series([{"a": 1}, {"a": 2}, {"a": 3}]),
            "text": ["p", "q", None],
            "int": [1, 2, 3],
            "small": pl.Series([1, 2, 3], dtype=pl.UInt8),
            "float": [1.0, None, float("nan")],
            "flag": [True, False, None],
            "span": pl.Series([dt.timedelta(days=1)] * 3),
            "bytes": pl.Series([b"a", b"b", b"c"]),
        }
    ).head(rows)


EXPECTED_TYPES = {
    "cat": "VARCHAR",
    "enum": "VARCHAR",
    "dec": "DECIMAL(10,2)",
    "tz": "TIMESTAMP WITH TIME ZONE",
    "naive": "TIMESTAMP",
    "day": "DATE",
    "null": '"NULL"',
    "list": "BIGINT[]",
    "struct": "STRUCT(a BIGINT)",
    "text": "VARCHAR",
    "int": "BIGINT",
    "small": "UTINYINT",
    "float": "DOUBLE",
    "flag": "BOOLEAN",
    "span": "INTERVAL",
    "bytes": "BLOB",
}


@pytest.mark.parametrize("rows", [3, 0], ids=["rows", "empty"])
def test_types_are_those_from_arrow_gives(rows: int) -> None:
    frame = typed_frame(rows)
    on_polars = dp.Session.from_polars(frame, budget=dp.PureDP(1.0))
    on_arrow = dp.Session.from_arrow(frame.to_arrow(), budget=dp.PureDP(1.0))
    assert on_polars.columns == EXPECTED_TYPES
    # The schema is public: the same whether the frame has rows or not (a Null column
    # with rows is exported with a validity bitmap DuckDB needs, without rows too).
    assert on_arrow.columns == EXPECTED_TYPES


def test_null_types_nested_in_lists_and_structs_are_read_whatever_the_rows() -> None:
    frame = pl.DataFrame(
        {
            "list": pl.Series([[None], [None, None]]),
            "struct": pl.Series([{"a": None}] * 2, dtype=pl.Struct({"a": pl.Null})),
            "array": pl.Series([[None, None]] * 2, dtype=pl.Array(pl.Null, 2)),
        }
    )
    expected = {"list": "BOOLEAN[]", "struct": "STRUCT(a BOOLEAN)", "array": "BOOLEAN[2]"}
    assert dp.Session.from_polars(frame, budget=dp.PureDP(1.0)).columns == expected
    assert dp.Session.from_polars(frame.clear(), budget=dp.PureDP(1.0)).columns == expected


def outcome(session: dp.Session, query: Query) -> str:
    try:
        session.explain(query, budget=dp.PureDP(0.5))
    except dp.errors.DPError as err:
        return f"{type(err).__name__}: {err}"
    return "ok"


@pytest.mark.parametrize("column", sorted(EXPECTED_TYPES))
def test_queries_are_accepted_and_refused_as_on_from_arrow(column: str) -> None:
    frame = typed_frame()
    on_polars = dp.Session.from_polars(frame, budget=dp.PureDP(1.0))
    on_arrow = dp.Session.from_arrow(frame.to_arrow(), budget=dp.PureDP(1.0))
    keys = KeySet.from_values(**{column: ["a"]})
    for query in (
        Query().group_by(column, keys=keys).count(),
        Query().sum(column, bounds=(0, 10)),
        Query().count_distinct(column),
    ):
        assert outcome(on_polars, query) == outcome(on_arrow, query)


def test_categorical_enum_decimal_and_dates_compute() -> None:
    frame = typed_frame()
    session = dp.Session.from_polars(frame, budget=dp.PureDP(1.0), rng=1)
    query = (
        Query()
        .filter("enum = 'x' AND day = DATE '2024-01-01' AND tz IS NOT NULL")
        .group_by("cat", keys=KeySet.from_values(cat=["a", "b"]))
        .count()
        .sum("dec", bounds=(0, 10))
    )
    compiled = session._compile(query, 1.0, salt=1)
    counts = session._engine.aggregate(compiled.plan)
    assert counts[("a",)][0] == 2
    assert ("b",) not in counts


# ------------------------------------------------------------------ refusals
def test_a_lazy_plan_failing_on_a_row_fails_at_creation_without_its_message() -> None:
    lazy = pl.LazyFrame({"x": ["1", "oops-secret"]}).with_columns(
        pl.col("x").cast(pl.Int64, strict=True)
    )
    with pytest.raises(DataError, match="computing the Polars frame failed") as info:
        dp.Session.from_polars(lazy, budget=dp.PureDP(1.0))
    assert "oops" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_an_object_column_is_refused_by_its_type() -> None:
    frame = pl.DataFrame({"o": pl.Series([object()], dtype=pl.Object), "i": [1]})
    with pytest.raises(DataError, match=r"\['o'\] have the Polars type Object"):
        dp.Session.from_polars(frame, budget=dp.PureDP(1.0))
    with pytest.raises(DataError, match="Object"):
        dp.Session.from_polars(frame.clear(), budget=dp.PureDP(1.0))


@pytest.mark.parametrize(
    "value", [pd.DataFrame({"a": [1]}), {"a": [1]}, None], ids=["pandas", "dict", "None"]
)
def test_anything_but_a_polars_frame_is_refused(value: object) -> None:
    with pytest.raises(InvalidParameter, match=r"polars\.DataFrame or polars\.LazyFrame"):
        dp.Session.from_polars(value, budget=dp.PureDP(1.0))


def test_a_missing_privacy_unit_column_is_refused() -> None:
    with pytest.raises(DataError, match="privacy unit column 'person'"):
        dp.Session.from_polars(
            pl.DataFrame({"a": [1]}), privacy_unit="person", budget=dp.PureDP(1.0)
        )


# ------------------------------------------------------------------ no copy
def test_no_pandas_and_no_pyarrow_conversion(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("from_polars converted the frame")

    frame = pl.from_pandas(people(200))
    for name in ("to_pandas", "to_arrow", "to_numpy", "rows", "to_dicts", "iter_rows"):
        monkeypatch.setattr(pl.DataFrame, name, refuse)
    session = dp.Session.from_polars(frame, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    plan = session._compile(Query().bound(max_rows=10**6).count(), 1.0, salt=1).plan
    assert session._engine.aggregate(plan)[()] == [200]


def test_duckdb_is_handed_the_frames_own_buffers() -> None:
    from dpkit.analytics._sources import polars_stream

    frame = pl.DataFrame({"i": np.arange(100_000), "s": ["abcdefghijklmnop"] * 100_000})
    stream = polars_stream(frame, "test")
    # What DuckDB reads: the Arrow C stream, whose buffers are Polars' memory (the same
    # addresses as a second export of the same frame: nothing was copied to export).
    first = pa.RecordBatchReader.from_stream(stream).read_all()
    second = pa.RecordBatchReader.from_stream(polars_stream(frame, "test")).read_all()
    for column in ("i", "s"):
        one = first.column(column).chunk(0).buffers()
        two = second.column(column).chunk(0).buffers()
        assert [b.address for b in one if b is not None] == [
            b.address for b in two if b is not None
        ]
    assert first.column("s").type == pa.string_view()  # Polars' string layout, not copied


# ------------------------------------------------------------------ other entry points
def test_from_tables_accepts_polars_private_and_public_tables() -> None:
    frame = people()
    regions = pd.DataFrame({"region": ["north", "south", "east"], "zone": [1, 2, 2]})
    query = (
        Query.from_table("visits")
        .join("regions", on="region")
        .group_by("zone", keys=KeySet.from_values(zone=[1, 2]))
        .bound(max_groups=2, max_rows=100)
        .count()
    )

    def session(visits: Any, public: Any) -> dp.Session:
        return dp.Session.from_tables(
            {"visits": visits},
            public={"regions": public},
            privacy_unit="user",
            budget=dp.PureDP(1.0),
            rng=3,
            source="same",
        )

    on_polars = session(pl.from_pandas(frame).lazy(), pl.from_pandas(regions))
    on_pandas = session(frame, regions)
    assert on_polars.tables == on_pandas.tables
    pd.testing.assert_frame_equal(
        on_polars.public_query("SELECT * FROM regions"),
        on_pandas.public_query("SELECT * FROM regions"),
    )
    pd.testing.assert_frame_equal(
        on_polars.evaluate(query, budget=dp.PureDP(1.0)).dataframe,
        on_pandas.evaluate(query, budget=dp.PureDP(1.0)).dataframe,
    )


def test_synthesize_accepts_a_polars_frame() -> None:
    frame = pl.DataFrame({"x": ["a", "b", "a", "c"] * 50, "y": list(range(200))})
    result = dp.synthesize(
        frame,
        budget=dp.ZCDP(2.0),
        method="mst",
        domains={"x": ["a", "b", "c"], "y": (0, 199)},
        rows=50,
        rng=1,
    )
    assert list(result.data.columns) == ["x", "y"]
    assert len(result.data) == 50


def test_import_dpkit_and_from_pandas_do_not_import_polars() -> None:
    code = (
        "import sys, pandas as pd, dpkit as dp\n"
        "dp.Session.from_pandas(pd.DataFrame({'a': [1]}), budget=dp.PureDP(1.0))\n"
        "assert 'polars' not in sys.modules, 'polars imported'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
