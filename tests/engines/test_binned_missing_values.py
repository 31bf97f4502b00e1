"""A binned group column's NULL and NaN values are in no bin, on both engines.

``group_by_bins`` gives every other double a bin (infinities in the end bins). The bin
index in SQL is written without a guard against NULL and NaN (``SqlEngine._group_sql``):
the statement's WHERE drops those rows (``SqlEngine._group_present_sql``). These tests
check the rows each bin counts against ``numpy.searchsorted`` on the values that are
neither NULL nor NaN, for the binary search over arbitrary edges and for the arithmetic
index of describe's power-of-two edges, with and without a privacy unit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import dpkit as dp
from dpkit.analytics import Query
from dpkit.analytics._describe_scales import _magnitude_edges

EDGES = {
    "search": [0.0, 10.0, 20.0, 40.0, 100.0],
    "ladder": _magnitude_edges(),
}
#: Each value on its own person's row, so with a privacy unit (one row and one group
#: per person) every row is kept and counts as one person.
VALUES = [-math.inf, -3.5, 0.0, 5.0, 12.0, 12.0, 39.9, 40.0, 1e6, math.inf]
MISSING = [math.nan, None, -math.nan, math.nan]


def expected(edges: list[float]) -> dict[int, int]:
    bins = np.searchsorted(np.array(edges[1:-1]), np.array(VALUES), side="right")
    found, counts = np.unique(bins, return_counts=True)
    return {int(b): int(c) for b, c in zip(found, counts, strict=True)}


def counted(session: dp.Session, edges: list[float], unit: str | None) -> dict[int, int]:
    query = Query().group_by_bins("x", edges)
    if unit is not None:
        query = query.bound(max_groups=1, max_rows=1)
    compiled = session._compile(query.count(), 0.1, salt=7)
    exact = session._engine.aggregate(compiled.plan)
    return {int(key[0]): int(values[0]) for key, values in exact.items() if values[0]}


@pytest.mark.parametrize("unit", [None, "person"])
@pytest.mark.parametrize("edges", sorted(EDGES))
def test_duckdb_counts_no_missing_value_in_a_bin(edges: str, unit: str | None) -> None:
    import duckdb

    connection = duckdb.connect()
    connection.execute(
        "CREATE TABLE t AS SELECT CAST(unnest(?) AS BIGINT) AS person, "
        "CAST(unnest(?) AS DOUBLE) AS x",
        [list(range(len(VALUES) + len(MISSING))), [*VALUES, *MISSING]],
    )
    # NaN and NULL both reach the engine.
    assert connection.execute("SELECT count(*) FILTER (isnan(x)), count(*) - count(x) FROM t")
    assert connection.fetchall() == [(3, 1)]
    session = dp.Session.from_duckdb(connection, "t", privacy_unit=unit, budget=dp.PureDP(1.0))
    assert counted(session, EDGES[edges], unit) == expected(EDGES[edges])


@pytest.mark.parametrize("unit", [None, "person"])
@pytest.mark.parametrize("edges", sorted(EDGES))
def test_spark_counts_no_missing_value_in_a_bin(spark: Any, edges: str, unit: str | None) -> None:
    from pyspark.sql import types as T  # noqa: N812 - PySpark's own convention

    schema = T.StructType(
        [T.StructField("person", T.LongType()), T.StructField("x", T.DoubleType())]
    )
    rows = [(i, v) for i, v in enumerate([*VALUES, *MISSING])]
    session = dp.Session.from_spark(
        spark.createDataFrame(rows, schema), privacy_unit=unit, budget=dp.PureDP(1.0)
    )
    assert counted(session, EDGES[edges], unit) == expected(EDGES[edges])
