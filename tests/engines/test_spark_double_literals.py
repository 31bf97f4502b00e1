"""The Spark engine's constant arrays of doubles hold exactly the doubles dpkit computed.

An order statistic's grid cuts reach Spark as a constant array written in the
statement (``SparkEngine.double_array``): parameters take scalars only. The cuts decide
which bin a value falls in, so a cut one ulp off would move a value at the boundary into
another bin than DuckDB's (which gets the cuts as a parameter). A short array is a list
of Spark's typed ``D`` literals (``dpkit.analytics.engines.spark._double_literal``), a
long one JSON text read by ``from_json`` (``_double_array_sql``); this reads both back
from Spark and compares bits, on the doubles where text round trips go wrong: the
extremes, subnormals, negative zero, sums that are not their decimal, and random bits --
with infinities between them, which JSON cannot spell.
"""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import pytest

from dpkit.analytics.engines.spark import JSON_ARRAY_LENGTH, _double_literal


def _bits(value: float) -> int:
    return int(struct.unpack("<q", struct.pack("<d", value))[0])


def _doubles() -> list[float]:
    rng = random.Random(20261130)
    special = [
        0.0,
        -0.0,
        5e-324,
        -5e-324,
        2.2250738585072014e-308,  # the smallest normal
        2.225073858507201e-308,  # the largest subnormal
        1.7976931348623157e308,
        -1.7976931348623157e308,
        0.1 + 0.2,
        1 / 3,
        -1e-5,
        0.0005,
        math.nextafter(1.0, 2.0),
        math.nextafter(1.0, 0.0),
        2.0**53 + 2,
        123456789.123456789,
    ]
    random_bits = []
    while len(random_bits) < 300:
        value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if math.isfinite(value):
            random_bits.append(value)
    return special + random_bits


def _read_back(spark: Any, values: list[float]) -> list[float]:
    from dpkit.analytics.engines.spark import SparkEngine

    engine = SparkEngine(spark.range(1))
    try:
        array, params = engine.double_array(values)
        assert params == []
        (row,) = engine._execute(f"SELECT {array} AS a", [])
    finally:
        engine.close()
    return list(row[0])


@pytest.mark.parametrize("form", ["literals", "json"])
def test_spark_reads_each_value_as_the_same_double(spark: Any, form: str) -> None:
    values = _doubles()
    if form == "literals":
        chunks = [values[i : i + JSON_ARRAY_LENGTH - 1] for i in range(0, len(values), 31)]
    else:
        # Infinities first, last and between two runs of finite values.
        middle = len(values) // 2
        chunks = [[-math.inf, *values[:middle], math.inf, -math.inf, *values[middle:], math.inf]]
    for chunk in chunks:
        read = _read_back(spark, chunk)
        assert [_bits(v) for v in read] == [_bits(v) for v in chunk]


def test_a_long_array_is_folded_into_one_constant(spark: Any) -> None:
    """``from_json`` runs once, when Spark plans the statement, not once per row: the
    optimised plan of a query over a table holds the array, not the function."""
    from dpkit.analytics.engines.spark import SparkEngine

    values = [-math.inf, *(i / 7 for i in range(2000)), math.inf]
    engine = SparkEngine(spark.range(1000))
    array, _ = engine.double_array(values)
    assert "from_json" in array
    frame = spark.range(1000).selectExpr(f"element_at({array}, CAST(id % 2000 + 1 AS INT)) AS c")
    plan = frame._jdf.queryExecution().optimizedPlan().toString().lower()
    engine.close()
    assert "json" not in plan


def test_non_finite_values_are_written_as_casts(spark: Any) -> None:
    for value in (math.inf, -math.inf):
        assert _double_literal(value).startswith("CAST(")
    (row,) = spark.sql(
        f"SELECT {_double_literal(math.inf)}, {_double_literal(-math.inf)}, "
        f"{_double_literal(math.nan)}"
    ).collect()
    assert row[0] == math.inf and row[1] == -math.inf and math.isnan(row[2])
