"""Tables and views of a caller's DuckDB connection, read so that no row can make a
query fail (``Session.from_duckdb``; the rule and its measured cost are in the
docstring of :mod:`dpkit.analytics._sources`, "Tables and views of a DuckDB
connection").

A plain base table of DuckDB's own format, with no generated column, is read in place;
anything else the name resolves to -- a view, a generated column, an attached SQLite
or Postgres table, a replacement scan of a file or a pandas variable -- is copied once,
at Session creation, into a private temporary database, so the source's own
expressions run then (a failure is a DataError that spends nothing) and never inside a
query.
"""

from __future__ import annotations

import contextlib
from typing import Any

from dpkit.analytics._sources import (
    _TABLE,
    OpenedFile,
    PrivateDatabase,
    _arrow_stream,
    _ident,
    private_database,
    seal_private_database,
)
from dpkit.errors import DataError, InvalidParameter

__all__ = ["open_duckdb"]


def open_duckdb(
    connection: Any,
    table: str,
    *,
    owner: str,
    into: PrivateDatabase | None = None,
    name_in: str = _TABLE,
) -> OpenedFile:
    """The relation a Session reads for ``table`` of the caller's DuckDB ``connection``.

    A plain DuckDB base table (module docstring, "Tables and views of a DuckDB
    connection") is read in place: the result holds ``connection`` and the table's
    qualified name. Anything else ``table`` names (a view, a table with a generated
    column, a table of an attached SQLite or Postgres database, a replacement scan of a
    file or a Python object...) is evaluated once, now, and copied into a table of a
    private DuckDB database (as a CSV file is), so that its own expressions cannot fail
    during a query. The caller's connection is only read, through a cursor of its own.
    With ``into`` (a Session over several tables, which must all be in one database),
    every table is copied, into ``into`` as the table ``name_in``.

    Raises
    ------
    InvalidParameter
        If ``connection`` is not a ``duckdb.DuckDBPyConnection``.
    DataError
        If ``table`` does not name a relation of the connection (DuckDB's message, which
        names tables only), or evaluating it fails (the error's class only: DuckDB's
        message can quote rows).
    """
    import duckdb

    if not isinstance(connection, duckdb.DuckDBPyConnection):
        raise InvalidParameter.for_parameter(
            "connection", owner, "a duckdb.DuckDBPyConnection", connection
        )
    # A cursor is a new connection to the same database, with its own settings and
    # results: what dpkit's queries run on (DuckDBEngine), and nothing the caller sees.
    cursor = connection.cursor()
    try:
        name = _ident(table)
        _describe(cursor, name, table, owner)
        in_place = None if into is not None else _plain_table(cursor, name, table)
        if in_place is not None:
            return OpenedFile(connection=connection, relation=in_place)
        return _copy_relation(cursor, name, table, owner, into, name_in)
    finally:
        cursor.close()


def _describe(cursor: Any, name: str, table: str, owner: str) -> None:
    """Bind ``name`` (no row read, except by a replacement scan's sniffer): a name that
    does not resolve is a DataError with DuckDB's message (names only)."""
    import duckdb

    try:
        cursor.execute(f"DESCRIBE SELECT * FROM {name}").fetchall()
    except (duckdb.CatalogException, duckdb.BinderException, duckdb.ParserException) as err:
        raise DataError(
            f"{owner}: DuckDB cannot read {table!r} from a cursor of the connection: "
            f"{str(err).splitlines()[0]} A DataFrame registered on the connection, or a "
            "temporary table or view, is visible to that connection only: use "
            "Session.from_pandas or Session.from_arrow, or a table of the database."
        ) from None
    except duckdb.Error as err:
        raise DataError(
            f"{owner}: DuckDB cannot read {table!r} ({type(err).__name__}). Its message "
            "is not shown because it may quote row values; nothing was spent."
        ) from None


#: Base tables named like the source, in a database of DuckDB's own format, with no
#: generated (virtual) column: the candidates for reading in place.
_PLAIN_TABLES = """
    SELECT t.database_name, t.schema_name, t.table_name
    FROM duckdb_tables() AS t
    JOIN duckdb_databases() AS d ON d.database_oid = t.database_oid
    WHERE lower(t.table_name) = lower(?) AND d.type = 'duckdb'
      AND NOT t.temporary AND NOT t.internal
      AND NOT EXISTS (
          SELECT 1 FROM duckdb_columns() AS c WHERE c.table_oid = t.table_oid AND c.is_generated
      )
"""


def _plain_table(cursor: Any, name: str, table: str) -> str | None:
    """The qualified name of the plain base table ``name`` binds to, or None.

    The catalog lists the candidates (:data:`_PLAIN_TABLES`); DuckDB's binder decides:
    ``name`` is that table iff ``SELECT * FROM name`` and ``SELECT * FROM db.schema.t``
    have the same unoptimised logical plan (a scan of ``db.schema.t`` projecting its
    columns: a view, a replacement scan or a generated column adds or changes nodes).
    Anything unexpected (a DuckDB without these catalog columns) answers None: copy.
    """
    import duckdb

    try:
        candidates = cursor.execute(_PLAIN_TABLES, [table]).fetchall()
        if not candidates:
            return None
        cursor.execute("SET SESSION explain_output = 'all'")
        bound = _logical_plan(cursor, f"SELECT * FROM {name}")
        for parts in candidates:
            qualified = ".".join(_ident(str(part)) for part in parts)
            if bound is not None and _logical_plan(cursor, f"SELECT * FROM {qualified}") == bound:
                return qualified
    except duckdb.Error:
        return None
    return None


def _logical_plan(cursor: Any, sql: str) -> str | None:
    """DuckDB's unoptimised logical plan of ``sql`` (JSON text), as bound."""
    rows = cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}").fetchall()
    plans = [str(value) for key, value in rows if key == "logical_plan"]
    return plans[0] if len(plans) == 1 else None


def _copy_relation(
    cursor: Any,
    name: str,
    table: str,
    owner: str,
    into: PrivateDatabase | None = None,
    name_in: str = _TABLE,
) -> OpenedFile:
    """Evaluate ``name`` once on ``cursor`` and copy its rows into a private database
    (:func:`_private_database`), through an Arrow stream."""
    import duckdb

    # Keep DuckDB's types through Arrow (HUGEINT, UUID, TIME WITH TIME ZONE, BIT, JSON
    # would otherwise change type; ENUM still becomes VARCHAR). SESSION: a plain SET of
    # this option would set it for the caller's whole database.
    with contextlib.suppress(duckdb.Error):
        cursor.execute("SET SESSION arrow_lossless_conversion = true")
    database = into if into is not None else private_database()
    connection, directory, remove = database.connection, database.directory, database.remove
    try:
        stream = _arrow_stream(cursor.sql(f"SELECT * FROM {name}"))
        connection.register("__dpkit_source", stream)
        connection.execute(f"CREATE TABLE {_ident(name_in)} AS SELECT * FROM __dpkit_source")
        connection.unregister("__dpkit_source")
        seal_private_database(connection, directory)
    except Exception as err:
        if into is None:
            connection.close()
            remove()
        # The class only, and nothing chained: the source's message can quote a row
        # (a failed CAST names its value).
        raise DataError(
            f"{owner}: evaluating {table!r} once, to copy it, failed ({type(err).__name__}"
            "; e.g. one of its own expressions fails on a row). Its message is not shown "
            "because it may quote row values; nothing was spent."
        ) from None
    except BaseException:
        if into is None:
            connection.close()
            remove()
        raise
    return OpenedFile(connection=connection, relation=_ident(name_in))
