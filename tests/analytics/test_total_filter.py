"""Filters whose terms are total by their types run without TRY (dpkit.analytics._total_filter).

Three things must hold, each checked on a real DuckDB with dpkit's own settings:

* every term the allowlist calls total evaluates on every value of its column's type
  without raising -- the extreme values included (NULL, NaN, the infinities, the integer
  types' ends, the largest dates and timestamps);
* the combinations the allowlist leaves out for a reason do raise on such values, so the
  reason is real (if DuckDB stops raising, the allowlist may grow);
* the rewritten filter keeps exactly the rows of ``TRY(filter)``, whatever the mix of
  total and other terms (a property test over random conjunctions).
"""

from __future__ import annotations

import itertools

import duckdb
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.analytics._expr import validate_expression
from dpkit.analytics._total_filter import (
    FLOAT_TYPES,
    INTEGER_TYPES,
    _check_rendered,
    is_total,
    with_total_terms_bare,
)
from dpkit.errors import InternalError

#: One column per type of the allowlist (and the left-out ones), and their extreme values.
EXTREMES: dict[str, tuple[str, list[str]]] = {
    "ti": ("TINYINT", ["-128", "127"]),
    "si": ("SMALLINT", ["-32768", "32767"]),
    "ii": ("INTEGER", ["-2147483648", "2147483647"]),
    "bi": ("BIGINT", ["-9223372036854775808", "9223372036854775807"]),
    "hi": ("HUGEINT", ["-170141183460469231731687303715884105728",
                       "170141183460469231731687303715884105727"]),
    "ut": ("UTINYINT", ["0", "255"]),
    "us": ("USMALLINT", ["0", "65535"]),
    "ui": ("UINTEGER", ["0", "4294967295"]),
    "ub": ("UBIGINT", ["0", "18446744073709551615"]),
    "uh": ("UHUGEINT", ["0", "340282366920938463463374607431768211455"]),
    "fl": ("FLOAT", ["'nan'", "'inf'", "'-inf'", "3.4028235e38", "-3.4028235e38", "1e-45"]),
    "db": ("DOUBLE", ["'nan'", "'inf'", "'-inf'", "1.7976931348623157e308", "5e-324"]),
    "de": ("DECIMAL(38,0)", ["99999999999999999999999999999999999999",
                              "-99999999999999999999999999999999999999"]),
    "vc": ("VARCHAR", ["''", "'x'", "'2020-01-01'", "'9999999999999999999999'"]),
    "dt": ("DATE", ["'5877642-06-25'", "'-5877641-06-25'", "'infinity'", "'-infinity'"]),
    "ts": ("TIMESTAMP", ["'294247-01-10 04:00:54'", "'-290308-12-22 00:00:00'",
                         "'infinity'", "'-infinity'"]),
    "bo": ("BOOLEAN", ["true", "false"]),
}  # fmt: skip
TYPES = {column: type_name for column, (type_name, _) in EXTREMES.items()}

#: Literals of every kind the allowlist reads, at the edges of each kind.
LITERALS = [
    "0", "1", "-1", "127", "128", "-129", "255", "256", "65536", "-32769", "2147483648",
    "-2147483649", "4294967296", "9223372036854775807", "-9223372036854775807",
    "9223372036854775808", "100000000000000000000000000000000000000000000000000000",
    "0.05", "-0.05", "1.5", "-1.5", "123456789012345678901234567890.5",
    "0.12345678901234567890123456789012345678901234", "1e300", "-1e300", "1e-300",
    "3.5e38", "1e39", ".5", "'x'", "''", "'2020-01-01'", "DATE '1994-01-01'",
    "DATE '5877642-06-25'", "CAST('1994-01-01 00:00:00' AS TIMESTAMP)", "TRUE", "FALSE",
]  # fmt: skip


def _connection() -> duckdb.DuckDBPyConnection:
    """A table with one row per extreme value of each column (NULL elsewhere), under
    the settings of dpkit's DuckDB engine."""
    con = duckdb.connect()
    con.execute("SET ieee_floating_point_ops = false")
    columns = ", ".join(f"{c} {t}" for c, (t, _) in EXTREMES.items())
    con.execute(f"CREATE TABLE t ({columns})")
    for column, (type_name, values) in EXTREMES.items():
        for value in [*values, "NULL"]:
            con.execute(f"INSERT INTO t ({column}) VALUES (CAST({value} AS {type_name}))")
    return con


def _terms() -> list[str]:
    out = []
    for column, literal in itertools.product(EXTREMES, LITERALS):
        out += [
            f"{column} < {literal}",
            f"{literal} >= {column}",
            f"{column} = {literal}",
            f"{column} <> {literal}",
            f"{column} BETWEEN {literal} AND {literal}",
            f"{column} IN ({literal}, {literal})",
            f"NOT ({column} > {literal})",
        ]
    for a, b in itertools.product(EXTREMES, repeat=2):
        out.append(f"{a} < {b}")
    out += [f"{column} IS NULL" for column in EXTREMES]
    out += [f"{column} IS NOT NULL" for column in EXTREMES]
    out += ["bo", "NOT bo", "bo OR ti > 1", "(db > 1 AND vc = 'x') OR dt < DATE '2000-01-01'"]
    return out


def _total(term: str) -> bool:
    return is_total(sqlglot.parse_one(term, read="duckdb"), TYPES)


def test_every_term_the_allowlist_calls_total_runs_on_every_extreme_value() -> None:
    con = _connection()
    total = [term for term in _terms() if _total(term)]
    # The allowlist covers what analysts write (every numeric type with its literals,
    # strings, dates, booleans): a test that checks a handful of terms proves little.
    assert len(total) > 1_000
    for term in total:
        checked = validate_expression(term, TYPES, "test")
        rendered = with_total_terms_bare(checked, term, TYPES)
        assert "TRY(" not in rendered.replace("TRY_CAST(", "")
        con.execute(f"SELECT count(*) FROM t WHERE {rendered}").fetchall()


@pytest.mark.parametrize(
    "term",
    [
        "hi < 1.5",  # HUGEINT -> DECIMAL(38,1) overflows above 10^37
        "uh > -1",  # UHUGEINT -> a signed type
        "fl > 100000000000000000000000000000000000000000000000000000",  # FLOAT -> a bignum
        "de > 0.5",  # DECIMAL(38,0) -> DECIMAL(38,1)
        "dt < '2020-01-01x'",  # a string against a DATE: cast of the literal
        "vc = 5",  # a number against a VARCHAR: cast of the column
    ],
)
def test_left_out_comparisons_do_raise_on_some_value(term: str) -> None:
    assert not _total(term)
    con = _connection()
    with pytest.raises(duckdb.Error):
        con.execute(f"SELECT count(*) FROM t WHERE {term}").fetchall()


@pytest.mark.parametrize(
    "term",
    [
        "ti + 1 > 5",  # arithmetic can overflow
        "CAST(vc AS INTEGER) = 1",  # a cast of a column
        "vc LIKE 'x%'",  # not in the allowlist (Spark rewrites LIKE)
        "db > ti",  # two columns of different types
        "ti = 1.5",  # a decimal literal against an integer column
        "dt < CAST('2020-01-01' AS TIMESTAMP)",  # a DATE against a TIMESTAMP
        "ti IN (1, db)",  # a column in an IN list
        "unknown > 1",  # not a column of the table (a derived column's type is unknown)
        "de IS NULL AND ti + 1 > 5",  # one total term and one other
    ],
)
def test_terms_outside_the_allowlist_are_not_total(term: str) -> None:
    assert not _total(term)


def test_a_mixed_filter_keeps_its_try_form_after_the_total_terms() -> None:
    whole = validate_expression("ti > 1 AND ti + 1 > 5 AND vc = 'x'", TYPES, "test")
    rendered = with_total_terms_bare(whole, "ti > 1 AND ti + 1 > 5 AND vc = 'x'", TYPES)
    assert rendered == f"(ti > 1) AND (vc = 'x') AND {whole}"
    only_other = validate_expression("ti + 1 > 5", TYPES, "test")
    assert with_total_terms_bare(only_other, "ti + 1 > 5", TYPES) == only_other


def test_a_rendered_filter_that_does_not_print_back_is_refused() -> None:
    # The defence in depth: bare terms must be total on their own parse, and the TRY
    # part must be the checked whole, byte for byte.
    with pytest.raises(InternalError):
        _check_rendered("(ti + 1 > 5) AND TRY(ti > 1)", "TRY(ti > 1)", TYPES)
    with pytest.raises(InternalError):
        _check_rendered("ti > 1 AND TRY(ti > 1)", "TRY(ti > 1)", TYPES)  # no parentheses
    with pytest.raises(InternalError):
        _check_rendered("(ti > 1) AND TRY(ti > 2)", "TRY(ti > 1)", TYPES)
    _check_rendered("(ti > 1) AND TRY(ti > 1)", "TRY(ti > 1)", TYPES)


_TERM = st.sampled_from(
    [
        "ti > 1", "bi <= -1", "db BETWEEN 0.05 AND 1e300", "fl < 1.5", "vc IN ('x', '')",
        "dt >= DATE '2000-01-01'", "ts < CAST('2000-01-01' AS TIMESTAMP)", "bo",
        "ut IS NULL", "NOT (ii = 2147483647)", "hi > -1", "ub <> 0", "db < db",
        # terms that are not total: each raises on some extreme value outside TRY
        "ti + 100 > 5", "CAST(vc AS INTEGER) > 0", "hi < 1.5", "uh > -1", "bi * 2 > 0",
        "de > 0.5", "ii // (ii - 2147483647) > 0",
    ]
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.lists(_TERM, min_size=1, max_size=5), st.booleans())
def test_the_rewritten_filter_keeps_exactly_the_rows_of_its_try_form(
    terms: list[str], with_or: bool
) -> None:
    expression = " AND ".join(terms)
    if with_or:
        expression = f"({expression}) OR vc = 'x'"
    con = _connection()
    whole = validate_expression(expression, TYPES, "test")
    rendered = with_total_terms_bare(whole, expression, TYPES)
    kept = "SELECT list(rowid ORDER BY rowid) FROM t WHERE {}"
    assert (
        con.execute(kept.format(rendered)).fetchall() == con.execute(kept.format(whole)).fetchall()
    )


@pytest.mark.parametrize("column", sorted(INTEGER_TYPES | FLOAT_TYPES))
def test_each_numeric_type_of_the_allowlist_is_in_the_extreme_table(column: str) -> None:
    # The matrix above covers every type the allowlist names.
    assert column in {t for t, _ in EXTREMES.values()}


def test_timestamp_literals_filter_a_session_query() -> None:
    # SQLGlot (>= 26) reads TIMESTAMP as TIMESTAMPNTZ, which the grammar refused: a
    # filter on a timestamp column could not name a timestamp. Accepted now, written
    # bare (a TIMESTAMP column against a TIMESTAMP literal), and it keeps the right rows.
    import datetime as dt

    import pandas as pd

    import dpkit as dp
    from dpkit.analytics import Query

    when = [dt.datetime(2020, 1, 1) + dt.timedelta(hours=h) for h in range(100)]
    session = dp.Session.from_pandas(pd.DataFrame({"at": when}), budget=dp.PureDP(1e7), rng=0)
    for expression in (
        "at >= TIMESTAMP '2020-01-02 00:00:00'",
        "at >= CAST('2020-01-02' AS TIMESTAMP)",
    ):
        result = session.evaluate(Query().filter(expression).count(), budget=dp.PureDP(1e6))
        assert abs(float(result.dataframe["count"].iloc[0]) - 76) < 1
