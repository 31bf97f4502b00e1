"""The DuckDB engine binds a statement without reading a row (issue 34).

``DuckDBEngine._bind`` makes a relation of the statement and never runs it: DuckDB's
binder checks names, types and functions, and the Session charges only after every
statement bound. These tests hold the two halves of that contract: a statement that
fails only when a row is read binds (so binding read no row), and one that cannot
bind is refused with DuckDB's schema-level message.
"""

from __future__ import annotations

import duckdb
import pytest

from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.errors import EngineError


@pytest.fixture
def engine() -> DuckDBEngine:
    connection = duckdb.connect()
    # Reading any row of the view fails: its one value does not convert.
    connection.execute("CREATE TABLE t AS SELECT 'not a number' AS s, 1.5 AS x")
    connection.execute("CREATE VIEW v AS SELECT CAST(s AS INTEGER) AS n, x FROM t")
    return DuckDBEngine(connection, "v")


def test_binding_reads_no_row(engine: DuckDBEngine) -> None:
    sql, params = "SELECT sum(n) + $1 FROM v WHERE x > $2", [1, 0.5]
    engine._bind(sql, params)  # no row read: the failing cast is never evaluated
    with pytest.raises(EngineError, match="failed while reading the data"):
        engine._execute(sql, params)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT sum(no_such_column) FROM v",  # a name (Binder)
        "SELECT sum(x) FROM no_such_table",  # a table (Catalog)
        "SELECT no_such_function(x) FROM v",  # a function (Catalog)
        "SELECT sum(x + DATE '2020-01-01') FROM v",  # a type (Binder)
        "SELECT sum(x FROM v",  # the syntax (Parser)
    ],
)
def test_what_cannot_bind_is_refused_with_a_schema_message(engine: DuckDBEngine, sql: str) -> None:
    with pytest.raises(EngineError, match="DuckDB cannot run the query"):
        engine._bind(sql, [])
