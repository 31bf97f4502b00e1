"""Opening data on Spark: from_path(engine="spark") on Parquet and CSV, and the errors
a user meets without PySpark or with a file Spark cannot read."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.analytics.engines.spark import SparkEngine
from dpkit.errors import DataError, InvalidParameter

QUERY = (
    Query()
    .group_by("region", keys=KeySet.from_values(region=["north", "south"]))
    .bound(max_groups=1, max_rows=2)
    .count()
    .sum("amount", bounds=(0.0, 50.0))
    .median("amount", bounds=(0.0, 50.0))
)


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    return pd.DataFrame(
        {
            "person": rng.integers(0, 200, 1000),
            "region": rng.choice(["north", "south"], 1000),
            "amount": np.round(rng.exponential(10.0, 1000), 2),
        }
    )


def exact(session: dp.Session) -> Any:
    compiled = session._compile(QUERY, 0.5, salt=42)
    engine = session._engine
    return engine.aggregate(compiled.plan), [
        engine.histograms(compiled.plan, spec) for spec in compiled.orders
    ]


def test_parquet_on_spark_equals_parquet_on_duckdb(
    spark: Any, frame: pd.DataFrame, tmp_path: Path
) -> None:
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    budget = dp.PureDP(1.0)
    on_spark = dp.Session.from_path(path, privacy_unit="person", budget=budget, engine="spark")
    on_duckdb = dp.Session.from_path(path, privacy_unit="person", budget=budget)
    assert isinstance(on_spark._engine, SparkEngine)
    assert on_spark.columns == on_duckdb.columns
    assert exact(on_spark) == exact(on_duckdb)


def test_csv_on_spark_with_a_schema(spark: Any, frame: pd.DataFrame, tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    with path.open("a") as handle:
        handle.write("7,north,not-a-number\n")  # becomes NULL (missing), never an error
    schema = {"person": "BIGINT", "amount": "DOUBLE"}
    on_spark = dp.Session.from_path(
        path, privacy_unit="person", budget=dp.PureDP(1.0), engine="spark", schema=schema
    )
    assert on_spark.columns == {"person": "BIGINT", "region": "VARCHAR", "amount": "DOUBLE"}
    result = on_spark.evaluate(QUERY, budget=0.5)
    assert list(result.columns["region"]) == ["north", "south"]


def test_unknown_engine_and_unreadable_files_are_refused(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    path.write_bytes(b"not a parquet file")
    with pytest.raises(InvalidParameter, match="engine"):
        dp.Session.from_path(path, budget=dp.PureDP(1.0), engine="polars")
    with pytest.raises(DataError, match="cannot read"):
        dp.Session.from_path(path, budget=dp.PureDP(1.0), engine="spark")
    with pytest.raises(InvalidParameter, match="DataFrame"):
        dp.Session.from_spark(pd.DataFrame({"x": [1]}), budget=dp.PureDP(1.0))


def test_without_pyspark_the_error_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dpkit.analytics.engines import spark as spark_engine

    real_import = builtins.__import__

    def no_pyspark(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("pyspark"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyspark)
    with pytest.raises(InvalidParameter, match=r"dpkit\[spark\]"):
        spark_engine.spark_session("test")


@pytest.mark.parametrize("name", ["t[1].parquet", "t*.parquet", "t?.csv", "t{1,2}.parquet"])
@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_a_file_named_like_a_pattern_is_read_itself(
    spark: Any, tmp_path: Path, engine: str, name: str
) -> None:
    # Both engines' readers take a path as a glob pattern: t[1].parquet read the decoy
    # t1.parquet beside it (found by the adversarial review). Each reads the file named.
    target = tmp_path / name
    decoy = tmp_path / ("t1" + target.suffix)
    for path, count in ((target, 3), (decoy, 40)):
        rows = pd.DataFrame({"person": range(count), "amount": [1] * count})
        if path.suffix == ".csv":
            rows.to_csv(path, index=False)
        else:
            rows.to_parquet(path)
    session = dp.Session.from_path(target, engine=engine, budget=dp.PureDP(1e8), rng=0)
    released = session.evaluate(Query().count(), budget=dp.PureDP(1e6)).dataframe["count"]
    assert round(float(released.iloc[0])) == 3


def test_a_column_named_like_a_float_type_keeps_a_file_in_place(spark: Any, tmp_path: Path) -> None:
    # A file is copied when a column's type is a float (Parquet statistics leave NaN
    # out), decided on the types, not on the names: a bigint column named "double" is
    # read in place; a double nested in a struct is copied.
    from dpkit.analytics.engines.spark import _IN_PLACE, read_path

    plain = tmp_path / "plain.parquet"
    pd.DataFrame({"double": [1, 2], "float": [3, 4]}).to_parquet(plain)
    assert read_path(spark, str(plain), None, "test") in _IN_PLACE
    nested = tmp_path / "nested.parquet"
    spark.createDataFrame([(1, (2.5,))], "u bigint, s struct<x: double>").write.parquet(str(nested))
    assert read_path(spark, str(nested), None, "test") not in _IN_PLACE


def test_a_schema_type_spark_cannot_spell_is_a_clear_error(spark: Any, tmp_path: Path) -> None:
    # pyspark's ParseException reached the caller before (found by the review); the
    # type is public, and nothing is spent at creation either way.
    path = tmp_path / "x.parquet"
    pd.DataFrame({"person": [1, 2], "amount": [1, 2]}).to_parquet(path)
    with pytest.raises(InvalidParameter, match="UBIGINT"):
        dp.Session.from_path(
            path, engine="spark", schema={"amount": "UBIGINT"}, budget=dp.PureDP(1.0)
        )
