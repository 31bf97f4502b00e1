"""The arithmetic bin index of power-of-two edges is the binary search's, on both engines.

``describe``'s range step and synthesis' domain discovery group values by the magnitude
bins ``-2^hi, ..., -2^lo, 0, 2^lo, ..., 2^hi``. Their index is computed from
``floor(log2 |x|)`` corrected by exact comparisons with the edges
(``SqlEngine._ladder_index``) instead of ~240 nested CASEs. These tests compare it with
``numpy.searchsorted`` (the definition: the first edge above ``x``) and with the nested
CASEs on every double that could trip it: each power of two in range and beyond, one ulp
either side, both zeros, subnormals, infinities, the largest doubles, and random
magnitudes, on DuckDB and on Spark.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from dpkit.analytics._describe_scales import _magnitude_edges
from dpkit.analytics.engines._sql import _bin_search, _literal, power_ladder

LADDERS = {"fractional": _magnitude_edges(False)[1:-1], "integer": _magnitude_edges(True)[1:-1]}


def _hard_values() -> list[float]:
    values = [0.0, -0.0, math.inf, -math.inf, 5e-324, -5e-324, 2.2250738585072014e-308]
    values += [1.7976931348623157e308, -1.7976931348623157e308]
    for k in range(-30, 70):
        p = 2.0**k
        for v in (p, math.nextafter(p, 0.0), math.nextafter(p, math.inf), 1.5 * p, 3 * p / 4):
            values += [v, -v]
    rng = random.Random(20261129)
    values += [rng.choice((-1, 1)) * 10 ** rng.uniform(-12, 22) for _ in range(2000)]
    return values


VALUES = _hard_values()


def _truth(interior: list[float]) -> list[int]:
    # The first i with x < interior[i] (n if none); -0.0 sorts with 0.0.
    found = np.searchsorted(np.array(interior), np.array(VALUES) + 0.0, side="right")
    return [int(i) for i in found]


def test_power_ladder_recognises_only_exact_ladders() -> None:
    assert power_ladder(LADDERS["fractional"]) == (-20, 61)
    assert power_ladder(LADDERS["integer"]) == (0, 61)
    assert power_ladder([-1.0, 0.0, 1.0]) == (0, 0)
    good = LADDERS["integer"]
    for bad in (
        [x * 1.5 for x in good],  # not powers of two
        [*good[:-1], 2.0**70],  # a gap in the exponents
        [*good[:-1], 3.0],  # the last edge not the next power of two
        good[:-1],  # not symmetric
        [-2.0, -1.0, 0.5, 1.0, 2.0],  # no zero
        [-(2.0**1020), 0.0, 2.0**1020],  # 2^(hi + 1) overflows
        [-(2.0**-1030), 0.0, 2.0**-1030],  # subnormal
    ):
        assert power_ladder(bad) is None, bad


def _duckdb_indices(interior: list[float], values: list[Any]) -> list[Any]:
    """Per value, in order: its arithmetic index and its binary search's, on DuckDB."""
    import duckdb

    from dpkit.analytics.engines.duckdb import DuckDBEngine

    ladder = power_ladder(interior)
    assert ladder is not None
    connection = duckdb.connect()
    connection.execute(
        "CREATE TABLE t AS SELECT unnest(?) AS i, CAST(unnest(?) AS DOUBLE) AS x",
        [list(range(len(values))), values],
    )
    engine = DuckDBEngine(connection, "t")
    index = engine._ladder_index('"x"', interior, *ladder)
    search = _bin_search('"x"', [_literal(e) for e in interior])
    return engine._execute(f"SELECT {index}, {search} FROM t ORDER BY i")


@pytest.mark.parametrize("name", sorted(LADDERS))
def test_duckdb_ladder_index_is_the_binary_search(name: str) -> None:
    interior = LADDERS[name]
    rows = _duckdb_indices(interior, VALUES)
    assert [r[0] for r in rows] == _truth(interior)
    assert [r[1] for r in rows] == _truth(interior)


def _spark_indices(spark: Any, interior: list[float], values: list[Any]) -> list[Any]:
    """Per value, in order: its arithmetic index and its binary search's, on Spark."""
    from pyspark.sql import types as T  # noqa: N812 - PySpark's own convention

    from dpkit.analytics.engines.spark import SparkEngine

    ladder = power_ladder(interior)
    assert ladder is not None
    schema = T.StructType([T.StructField("i", T.LongType()), T.StructField("x", T.DoubleType())])
    engine = SparkEngine(spark.createDataFrame(list(enumerate(values)), schema))
    index = engine._ladder_index("`x`", interior, *ladder)
    search = _bin_search("`x`", [_literal(e) for e in interior])
    return engine._execute(f"SELECT {index}, {search} FROM {engine.relation} ORDER BY i")


@pytest.mark.parametrize("name", sorted(LADDERS))
def test_spark_ladder_index_is_the_binary_search(spark: Any, name: str) -> None:
    interior = LADDERS[name]
    rows = _spark_indices(spark, interior, VALUES)
    assert [r[0] for r in rows] == _truth(interior)
    assert [r[1] for r in rows] == _truth(interior)


#: Values a binned column can hold that have no bin: the statement's WHERE drops their
#: rows (``SqlEngine._group_present_sql``), and the index is written without a guard of
#: its own, so it must not raise on them, whatever the engine evaluates first. (It gives
#: them some index -- LEAST and GREATEST skip a NULL -- which no statement keeps.)
NO_BIN = [math.nan, None, -math.nan]


@pytest.mark.parametrize("name", sorted(LADDERS))
def test_duckdb_bin_index_is_total_on_nan_and_null(name: str) -> None:
    interior = LADDERS[name]
    rows = _duckdb_indices(interior, NO_BIN)
    assert all(0 <= v <= len(interior) for row in rows for v in row)


@pytest.mark.parametrize("name", sorted(LADDERS))
def test_spark_bin_index_is_total_on_nan_and_null(spark: Any, name: str) -> None:
    interior = LADDERS[name]
    rows = _spark_indices(spark, interior, NO_BIN)
    assert all(0 <= v <= len(interior) for row in rows for v in row)
