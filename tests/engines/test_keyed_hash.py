"""dpkit's keyed hash: the same value on DuckDB, on Spark and in Python, for every type.

Contribution bounding keeps each person's groups and rows of smallest keyed hash; for
the engines to keep the same ones, the hash must be one function that both compute
exactly (dpkit.analytics.engines._hash).
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import duckdb
import numpy as np
import pytest
from scipy import stats

from dpkit.analytics.engines._hash import (
    _FINISH_KEYS,
    HASH_PRIME,
    HASH_VERSION,
    KeyedHash,
    Limb,
    TypedPart,
    python_hash,
    python_integer_limbs,
    python_text_limbs,
    round_keys,
)
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.analytics.engines.spark import SparkEngine

SALT = 20261125
P = HASH_PRIME
#: Version 2's hashes of SALT with the integers 0, 1, -1, 2^40 + 7 and the text 'north'.
PINNED_V2 = [1172744403, 1657178887, 1978483206, 563737694, 1012474731]

VALUES: dict[str, list[Any]] = {
    # p on both sides of zero, the BIGINT ends, and the ends of each 30-bit limb.
    "BIGINT": [
        *(0, 1, -1, P - 1, P, -P, P * P + 5, -(2**63), 2**63 - 1, 123456789012345),
        *(2**30 - 1, 2**30, -(2**30), -(2**30) - 1, 2**60 - 1, 2**60, -(2**60), -(2**60) - 1),
    ],
    # The narrower and unsigned integer types: their ends, p itself (2^31 - 1) and the
    # values on each side of zero and of -p.
    "INTEGER": [0, 1, -1, P - 1, P, -P, -P + 1, -(2**31), 123456789, -987654321],
    "SMALLINT": [0, 1, -1, 2**15 - 1, -(2**15), 12345],
    "TINYINT": [0, 1, -1, 127, -128],
    "USMALLINT": [0, 1, 2**16 - 1, 40000],
    "UINTEGER": [0, 1, P - 1, P, P + 1, 2**32 - 1],
    "DOUBLE": [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.1,
        1e300,
        -1e-300,
        5e-324,
        2.0**-1022,
        2.0**-1074 * 3,
        2.0**52,
        2.0**53 + 2,
        1.7976931348623157e308,
        0.5 - 2.0**-54,
        2.0**-20,
        math.inf,
        -math.inf,
        math.nan,
    ],
    "VARCHAR": ["", "a", "ana", "chloé", "🙂 emoji", "line\nbreak", "quote's", "x" * 300],
    "DATE": [dt.date(1970, 1, 1), dt.date(1969, 12, 31), dt.date(2024, 2, 29), dt.date(1, 1, 1)],
    "BOOLEAN": [True, False],
    "DECIMAL(10,2)": [Decimal("1.50"), Decimal("-0.01"), Decimal("12345678.90")],
    "BLOB": [b"", b"\x00", b"\xff\xfe", b"abc"],
}


def duckdb_hashes(type_name: str, values: list[Any]) -> list[int]:
    connection = duckdb.connect()
    engine = DuckDBEngine(connection, "t")
    sql_type = "DECIMAL(10,2)" if type_name.startswith("DECIMAL") else type_name
    connection.execute(f"CREATE TABLE t (i INTEGER, v {sql_type})")
    connection.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(values)))
    keyed = KeyedHash(SALT, engine.hash_dialect())
    linear = keyed.linear([TypedPart('"v"', type_name)])
    rows = connection.execute(
        f"SELECT i, {keyed.finish('h')} FROM (SELECT i, {linear} AS h FROM t) ORDER BY i"
    ).fetchall()
    return [int(h) for _, h in rows]


def spark_hashes(spark: Any) -> dict[str, list[int]]:
    """Every type's hashes on Spark: one table with a column per type (padded with NULLs
    to the longest list) and one statement, instead of a table and a statement per type
    (each costs Spark most of a second, whatever its size). Each column's hash is the SQL
    it would have alone; each type's test compares its own column."""
    from pyspark.sql import types as T  # noqa: N812 - PySpark's own convention

    spark_types = {
        "BIGINT": T.LongType(), "DOUBLE": T.DoubleType(), "VARCHAR": T.StringType(),
        "DATE": T.DateType(), "BOOLEAN": T.BooleanType(), "DECIMAL(10,2)": T.DecimalType(10, 2),
        "BLOB": T.BinaryType(), "INTEGER": T.IntegerType(), "SMALLINT": T.ShortType(),
        "TINYINT": T.ByteType(), "USMALLINT": T.IntegerType(), "UINTEGER": T.LongType(),
    }  # fmt: skip
    names = list(VALUES)
    schema = T.StructType(
        [T.StructField("i", T.IntegerType())]
        + [T.StructField(f"v{j}", spark_types[name]) for j, name in enumerate(names)]
    )
    length = max(len(values) for values in VALUES.values())
    table = [
        (i, *(values[i] if i < len(values) else None for values in VALUES.values()))
        for i in range(length)
    ]
    engine = SparkEngine(spark.createDataFrame(table, schema))
    keyed = KeyedHash(SALT, engine.hash_dialect())
    linears = ", ".join(
        f"{keyed.linear([TypedPart(f'`v{j}`', name)])} AS h{j}" for j, name in enumerate(names)
    )
    finished = ", ".join(keyed.finish(f"h{j}") for j in range(len(names)))
    rows = engine._execute(
        f"SELECT i, {finished} FROM (SELECT i, {linears} FROM {engine.relation}) AS s ORDER BY i"
    )
    return {
        name: [int(row[1 + j]) for row in rows[: len(VALUES[name])]] for j, name in enumerate(names)
    }


@pytest.fixture(scope="module")
def on_spark(spark: Any) -> dict[str, list[int]]:
    return spark_hashes(spark)


def test_the_hash_of_a_fixed_salt_is_pinned_to_its_version() -> None:
    # A partition assigns persons to parts by this hash of a salt kept in the ledger,
    # and its identity holds HASH_VERSION (_partition.py): a change of the hash's
    # values must come with a new version, or a reopened ledger would resume an old
    # partition with persons in other parts. These values are version 2's.
    assert HASH_VERSION == 2
    got = [python_hash(SALT, python_integer_limbs(x)) for x in (0, 1, -1, 2**40 + 7)]
    got.append(python_hash(SALT, python_text_limbs("north")))
    assert got == PINNED_V2


def test_integer_limbs_are_the_twos_complement_bits() -> None:
    # Injective: the three limbs give back the integer.
    for x in VALUES["BIGINT"]:
        low, middle, top = python_integer_limbs(x)
        assert x == low + (middle << 30) + ((top - 8) << 60)


@pytest.mark.parametrize("type_name", list(VALUES))
def test_every_limb_lies_within_its_stated_bound(type_name: str) -> None:
    # The reduced sums skip a `% p` only because each limb stays below its bound: check
    # the bounds on every value of every type as DuckDB computes them. A NULL integer,
    # date or string has NULL limbs (callers hash non-NULL keys only): no value at all.
    connection = duckdb.connect()
    sql_type = "DECIMAL(10,2)" if type_name.startswith("DECIMAL") else type_name
    connection.execute(f"CREATE TABLE t (v {sql_type})")
    connection.executemany("INSERT INTO t VALUES (?)", [(v,) for v in [*VALUES[type_name], None]])
    keyed = KeyedHash(SALT, DuckDBEngine(connection, "t").hash_dialect())
    limbs = keyed.limbs(TypedPart('"v"', type_name))
    columns = ", ".join(f"CAST({limb.sql} AS BIGINT)" for limb in limbs)
    for row in connection.execute(f"SELECT {columns} FROM t").fetchall():
        for value, limb in zip(row, limbs, strict=True):
            assert value is None or 0 <= value < limb.bound


def test_reduced_sums_never_overflow_at_their_bounds() -> None:
    # Every term at its largest value (limb = bound - 1 times its key), in long runs of
    # mixed bounds: DuckDB raises on a BIGINT overflow, so a running sum allowed past
    # 2^63 fails here; the residue must be the sum's mod p.
    keyed = KeyedHash(SALT, DuckDBEngine(duckdb.connect(), "t").hash_dialect())
    keys = round_keys(SALT)
    bounds = [2**30, 2**30, 16, P, 3, 2**28, P, P, 6, 2, 3024] * 5
    key = [keys[1 + j % 32] for j in range(len(bounds))]
    terms = [
        Limb(f"(CAST({b - 1} AS BIGINT) * {k})", (b - 1) * k + 1)
        for b, k in zip(bounds, key, strict=True)
    ]
    expected = sum((b - 1) * k for b, k in zip(bounds, key, strict=True)) % P
    got = duckdb.connect().execute(f"SELECT {keyed._reduced_sum(terms)}").fetchone()
    assert got == (expected,)
    # Fewer reductions than terms (the point of the bounds).
    assert keyed._reduced_sum(terms).count("%") < len(terms)
    # Sums near 2^63: each closed sum's residue is added to the last one, which must
    # leave room for it (bounds one above the values; (2^63 - 6) mod p = p - 4).
    values = [2**62 - 3, 2**62 - 3, 2**62 - 3, 2**62 - 4]
    big = [Limb(f"CAST({v} AS BIGINT)", v + 1) for v in values]
    got = duckdb.connect().execute(f"SELECT {keyed._reduced_sum(big)}").fetchone()
    assert got == (sum(values) % P,)


@pytest.mark.parametrize("type_name", ["BIGINT", "INTEGER", "SMALLINT", "TINYINT", "USMALLINT"])
def test_sql_hash_of_integers_is_the_python_definition(type_name: str) -> None:
    values = VALUES[type_name]
    expected = [python_hash(SALT, python_integer_limbs(v)) for v in values]
    assert duckdb_hashes(type_name, values) == expected


def test_sql_hash_of_unsigned_integers_is_the_python_definition() -> None:
    # UINTEGER has no Spark type (LongType would hash as BIGINT, the same limbs anyway).
    values = VALUES["UINTEGER"]
    expected = [python_hash(SALT, python_integer_limbs(v)) for v in values]
    assert duckdb_hashes("UINTEGER", values) == expected


@pytest.mark.parametrize("type_name", list(VALUES))
def test_both_engines_compute_the_same_hash(on_spark: dict[str, list[int]], type_name: str) -> None:
    values = VALUES[type_name]
    on_duckdb = duckdb_hashes(type_name, values)
    assert on_duckdb == on_spark[type_name]
    assert all(0 <= h < P for h in on_duckdb)
    if type_name not in ("DOUBLE",):  # -0.0 and 0.0 are one value
        assert len(set(on_duckdb)) == len(values)


def test_double_zero_signs_hash_alike_and_distinct_doubles_apart() -> None:
    hashes = duckdb_hashes("DOUBLE", VALUES["DOUBLE"])
    assert hashes[0] == hashes[1]  # 0.0 and -0.0
    assert len(set(hashes)) == len(VALUES["DOUBLE"]) - 1


def test_hash_is_uniform_and_salts_are_unrelated() -> None:
    # 10^4 consecutive integers into 50 bins: chi-square at 1e-6 (false failure 1e-6);
    # two nearby salts' ranks are uncorrelated (|Spearman| < 5 / sqrt(n)).
    connection = duckdb.connect()
    engine = DuckDBEngine(connection, "range(10000)")

    def hashes(salt: int) -> np.ndarray:
        keyed = KeyedHash(salt, engine.hash_dialect())
        linear = keyed.linear([TypedPart("range", "BIGINT")])
        inner = f"SELECT range, {linear} AS h FROM range(10000)"
        sql = f"SELECT {keyed.finish('h')} FROM ({inner}) ORDER BY range"
        return np.array([r[0] for r in connection.execute(sql).fetchall()], dtype=float)

    first = hashes(SALT)
    counts = np.bincount((first / P * 50).astype(int), minlength=50)
    assert stats.chisquare(counts).pvalue > 1e-6
    rho = stats.spearmanr(first, hashes(SALT + 1)).statistic
    assert abs(rho) < 5 / math.sqrt(len(first))


def test_pairs_of_groups_are_kept_together_as_often_as_by_chance() -> None:
    # The finishing round's purpose (module docstring of _hash): with the linear hash
    # alone, each person keeps an arc of one circular order of the groups, so groups
    # next to each other on it are kept together ~10x as often as chance. Consecutive
    # person ids and group ids (the most structured input), 50 groups, 5 kept: each
    # pair's count of persons keeping both against its expectation under a uniform
    # choice (chi-square at 1e-6), and each group's count (uniform marginals).
    persons, groups, kept = 4000, 50, 5
    connection = duckdb.connect()
    engine = DuckDBEngine(connection, "t")
    keyed = KeyedHash(SALT, engine.hash_dialect())
    linear = keyed.linear([TypedPart("u", "BIGINT"), TypedPart("g", "BIGINT")])
    pairs = (
        f"(SELECT u, g, {linear} AS h FROM range({persons}) AS a(u), "
        f"range({groups}) AS b(g)) AS pairs"
    )
    rows = connection.execute(
        f"SELECT u, g FROM ({keyed.finished(pairs, 'h', 'f')}) "
        f"QUALIFY row_number() OVER (PARTITION BY u ORDER BY f, g) <= {kept}"
    ).fetchall()
    chosen = np.zeros((persons, groups), dtype=np.int64)
    for u, g in rows:
        chosen[u, g] = 1
    together = (chosen.T @ chosen)[np.triu_indices(groups, 1)]
    expected = persons * kept * (kept - 1) / (groups * (groups - 1))
    statistic = float(((together - expected) ** 2 / expected).sum())
    assert stats.chi2.sf(statistic, len(together) - 1) > 1e-6
    assert stats.chisquare(chosen.sum(axis=0)).pvalue > 1e-6


# Inputs of the finishing rounds: the ends of [0, p) and 200 residues drawn at random.
FINISH_INPUTS = [0, 1, 2, P - 2, P - 1, *np.random.default_rng(3).integers(0, P, 200).tolist()]


def python_finish(salt: int, x: int) -> int:
    """The finishing rounds of :func:`python_hash` alone, on a residue ``x``."""
    keys = round_keys(salt)
    for i in _FINISH_KEYS:
        x = pow((x + keys[i]) % P, 5, P)
    return x


def finish_both_ways_sql(keyed: KeyedHash) -> str:
    """``finish`` as one expression and ``finished`` in projections, side by side."""
    rows = ", ".join(f"({i}, {x})" for i, x in enumerate(FINISH_INPUTS))
    relation = f"(SELECT i, CAST(x AS BIGINT) AS h FROM (VALUES {rows}) AS v(i, x)) AS src"
    return (
        f"SELECT i, {keyed.finish('h')} AS inline, f FROM "
        f"({keyed.finished(relation, 'h', 'f')}) AS s ORDER BY i"
    )


def test_finished_in_projections_is_finish_on_duckdb() -> None:
    connection = duckdb.connect()
    keyed = KeyedHash(SALT, DuckDBEngine(connection, "t").hash_dialect())
    rows = connection.execute(finish_both_ways_sql(keyed)).fetchall()
    expected = [python_finish(SALT, x) for x in FINISH_INPUTS]
    assert [int(r[1]) for r in rows] == expected
    assert [int(r[2]) for r in rows] == expected


def test_finished_in_projections_is_finish_on_spark(spark: Any) -> None:
    engine = SparkEngine(spark.range(1))
    keyed = KeyedHash(SALT, engine.hash_dialect())
    rows = engine._execute(finish_both_ways_sql(keyed))
    expected = [python_finish(SALT, x) for x in FINISH_INPUTS]
    assert [int(r[1]) for r in rows] == expected
    assert [int(r[2]) for r in rows] == expected
