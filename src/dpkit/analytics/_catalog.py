"""The tables of a Session over several tables: private tables, public tables, one engine.

A :class:`Catalog` holds, for each table of ``Session.from_tables`` (or
``from_duckdb``/``from_spark`` over several tables), the SQL naming it in the engine,
its public schema and, for a private table, the column holding the privacy unit. All
tables live where one engine statement can join them: one private DuckDB database, or
one Spark application (global temporary views).

Public tables (reference data: a list of regions, a calendar, a price list) are read
**once, at creation**, and copied: into the engine (for joins) and into a separate
in-memory DuckDB connection holding the public tables only, with external access turned
off and its configuration locked (:meth:`Catalog.public_query`). A later change to the
file cannot influence a release of this Session; a new Session reads it again. Their
contents are public: key sets and multiplicities are read from them for free, and a
query on them alone is not a private query (:meth:`Catalog.public_query` returns rows).

What is public about a private table is its schema only, as for a single-table Session
(:mod:`dpkit.analytics._sources`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpkit.analytics._canonical import from_engine, key_category
from dpkit.analytics.engines._sql import SqlEngine
from dpkit.analytics.query import KeySet
from dpkit.errors import DataError, InvalidParameter

__all__ = ["Catalog", "TableInfo"]

#: Longest public-table SQL text accepted by :meth:`Catalog.public_query`.
_MAX_PUBLIC_SQL = 100_000


@dataclass(frozen=True)
class TableInfo:
    """One table of a Session over several tables.

    Attributes
    ----------
    name:
        The name the analyst uses (``Query.from_table``, ``Query.join``).
    relation:
        SQL naming the table in the engine.
    schema:
        Column -> type (dpkit's DuckDB type names); public.
    unit:
        The privacy unit column of a private table; None for a public table.
    """

    name: str
    relation: str
    schema: dict[str, str]
    unit: str | None

    @property
    def public(self) -> bool:
        return self.unit is None


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Catalog:
    """The tables of a Session over several tables (module docstring).

    Parameters
    ----------
    tables:
        Every table, private and public, by the analyst's name.
    public_connection:
        A DuckDB connection holding a copy of each public table under its own name, and
        nothing else.
    """

    def __init__(self, tables: Mapping[str, TableInfo], public_connection: Any) -> None:
        self._tables = dict(tables)
        self._public = public_connection
        self._canonical = SqlEngine()  # dpkit's canonical SQL (DuckDB's dialect)
        self._multiplicities: dict[tuple[str, tuple[str, ...]], int] = {}

    # ------------------------------------------------------------------ names
    @property
    def tables(self) -> dict[str, TableInfo]:
        return dict(self._tables)

    def private_names(self) -> list[str]:
        return [name for name, info in self._tables.items() if not info.public]

    def public_names(self) -> list[str]:
        return [name for name, info in self._tables.items() if info.public]

    def table(self, name: str, owner: str) -> TableInfo:
        """The table ``name``; DataError naming the tables if there is none."""
        info = self._tables.get(name)
        if info is None:
            raise DataError(
                f"{owner}: the Session has no table {name!r}. Tables: "
                f"private {self.private_names()}, public {self.public_names()}."
            )
        return info

    def fingerprint_schema(self) -> dict[str, str]:
        """Every table's columns, qualified (``table.column -> type``), with the role of
        each table: what identifies this Session's data in the ledger (public only)."""
        out: dict[str, str] = {}
        for name, info in sorted(self._tables.items()):
            out[f"{name}."] = "public" if info.public else f"private unit={info.unit}"
            for column, type_name in info.schema.items():
                out[f"{name}.{column}"] = type_name
        return out

    # ------------------------------------------------------------------ public data
    def _public_table(self, table: str, owner: str) -> TableInfo:
        info = self.table(table, owner)
        if not info.public:
            raise InvalidParameter(
                f"{owner}: {table!r} is a private table; keys and multiplicities are read "
                f"from public tables only ({self.public_names()})."
            )
        return info

    def _key_columns(self, info: TableInfo, columns: Sequence[str], owner: str) -> list[str]:
        """The canonical SQL of ``columns`` of a public table (refused if a column is
        missing or has no canonical form)."""
        out = []
        for column in columns:
            if column not in info.schema:
                raise DataError(
                    f"{owner}: the public table {info.name!r} has no column {column!r}. "
                    f"Columns: {list(info.schema)}."
                )
            type_name = info.schema[column]
            if key_category(type_name) is None:
                raise InvalidParameter(
                    f"{owner}: column {column!r} of {info.name!r} has type {type_name}, "
                    "which has no canonical form to compare keys in."
                )
            out.append(self._canonical.canonical_key_sql(_quote(column), type_name))
        return out

    def multiplicity(self, table: str, columns: Sequence[str], owner: str) -> int:
        """The largest number of rows of the public ``table`` sharing one key (the
        canonical form of ``columns``; rows with a NULL key never match). Public."""
        cache_key = (table, tuple(columns))
        if cache_key not in self._multiplicities:
            info = self._public_table(table, owner)
            keys = self._key_columns(info, columns, owner)
            not_null = " AND ".join(f"{k} IS NOT NULL" for k in keys)
            sql = (
                f"SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM "
                f"{_quote(table)} WHERE {not_null} GROUP BY {', '.join(keys)})"
            )
            (count,) = self._public.execute(sql).fetchone()
            self._multiplicities[cache_key] = int(count)
        return self._multiplicities[cache_key]

    def keyset(self, table: str, columns: Sequence[str], owner: str) -> KeySet:
        """The distinct keys of ``columns`` in the public ``table`` (NULL/NaN left out)."""
        info = self._public_table(table, owner)
        keys = self._key_columns(info, columns, owner)
        categories = [key_category(info.schema[c]) or "" for c in columns]
        not_null = " AND ".join(f"{k} IS NOT NULL" for k in keys)
        sql = (
            f"SELECT DISTINCT {', '.join(keys)} FROM {_quote(table)} WHERE {not_null} "
            f"ORDER BY {', '.join(str(i + 1) for i in range(len(keys)))}"
        )
        rows = self._public.execute(sql).fetchall()
        if not rows:
            raise DataError(
                f"{owner}: the public table {table!r} has no non-NULL keys in {list(columns)}."
            )
        values = [
            tuple(from_engine(v, c) for v, c in zip(row, categories, strict=True)) for row in rows
        ]
        return KeySet(tuple(columns), tuple(values))

    def public_query(self, sql: str, owner: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one read-only ``SELECT`` over the public tables (a free, exact answer:
        the tables are public). Returns the column names and the rows.

        The statement runs on a connection that holds the public tables only, with
        external access off and its configuration locked, so it can read nothing else
        (no private table, no file); it must parse (SQLGlot, DuckDB dialect) as one
        query (``SELECT``/``WITH``/set operations), so it cannot change the tables.
        """
        import duckdb
        import sqlglot
        from sqlglot import exp

        if not isinstance(sql, str) or not sql.strip() or len(sql) > _MAX_PUBLIC_SQL:
            raise InvalidParameter.for_parameter(
                "sql", owner, f"a SELECT statement of at most {_MAX_PUBLIC_SQL} characters", sql
            )
        try:
            statements = sqlglot.parse(sql, read="duckdb")
        except sqlglot.errors.ParseError as err:
            raise InvalidParameter(f"{owner}: cannot parse the SQL: {err}") from None
        writes = (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create, exp.Drop)
        if (
            len(statements) != 1
            or not isinstance(statements[0], exp.Query)
            or any(isinstance(node, writes) for node in statements[0].walk())
        ):
            raise InvalidParameter(
                f"{owner}: give one SELECT statement over the public tables "
                f"({self.public_names()}); it may not change them."
            )
        cursor = self._public.cursor()
        try:
            # And in a transaction rolled back, whatever the statement turned out to do
            # (a data-modifying CTE: found by the adversarial review).
            cursor.execute("BEGIN TRANSACTION")
            result = cursor.execute(statements[0].sql(dialect="duckdb"))
            columns = [d[0] for d in result.description]
            return columns, list(result.fetchall())
        except duckdb.Error as err:
            # The public tables only: their contents may be shown.
            raise DataError(f"{owner}: the public query failed: {err}") from None
        finally:
            with contextlib.suppress(duckdb.Error):
                cursor.execute("ROLLBACK")
            cursor.close()


# ---------------------------------------------------------------------- building
def public_connection(tables: Mapping[str, Any]) -> Any:
    """A DuckDB connection holding a copy of each public table (``name -> Arrow-stream
    source``: a DuckDB relation or a pyarrow Table) and nothing else; then external
    access off and the configuration locked."""
    import duckdb

    connection = duckdb.connect()
    try:
        for name, source in tables.items():
            connection.register("__dpkit_public", source)
            connection.execute(f"CREATE TABLE {_quote(name)} AS SELECT * FROM __dpkit_public")
            connection.unregister("__dpkit_public")
        connection.execute("SET enable_external_access = false")
        connection.execute("SET lock_configuration = true")
    except BaseException:
        connection.close()
        raise
    return connection


def is_file(value: object) -> bool:
    return isinstance(value, str | Path)


def kind_of(value: object) -> str:
    """``"file"``, ``"pandas"``, ``"arrow"``, ``"spark"`` or ``"polars"``, or
    ``"unknown"``: what a table of ``from_tables`` is given as."""
    from dpkit.analytics._sources import is_polars

    if is_file(value):
        return "file"
    if is_polars(value):
        return "polars"
    module = type(value).__module__
    if module.startswith("pandas"):
        return "pandas"
    if module.startswith("pyarrow"):
        return "arrow"
    if module.startswith("pyspark") and hasattr(value, "sparkSession"):
        return "spark"
    return "unknown"


def check_tables(
    private: object, privacy_unit: object, public: object, owner: str
) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    """Validate ``from_tables``' arguments (names, units) before anything is read."""
    if not isinstance(private, Mapping) or not private:
        raise InvalidParameter.for_parameter(
            "tables", owner, "a non-empty mapping of table names to data", private
        )
    public = {} if public is None else public
    if not isinstance(public, Mapping):
        raise InvalidParameter.for_parameter(
            "public", owner, "None or a mapping of table names to data", public
        )
    names = [*private, *public]
    for name in names:
        if not isinstance(name, str) or not name or name.startswith("__"):
            raise InvalidParameter.for_parameter(
                "tables", owner, "table names: non-empty strings not starting with '__'", name
            )
    folded = [n.casefold() for n in names]
    if len(set(folded)) != len(folded):
        raise InvalidParameter(
            f"{owner}: table names must be distinct (ignoring case); got {names}."
        )
    if isinstance(privacy_unit, str):
        units = {name: privacy_unit for name in private}
    elif isinstance(privacy_unit, Mapping):
        units = dict(privacy_unit)
        if set(units) != set(private) or not all(isinstance(u, str) for u in units.values()):
            raise InvalidParameter(
                f"{owner}: privacy_unit must name the privacy unit column of every private "
                f"table ({sorted(private)}) and no other; got {privacy_unit!r}."
            )
    else:
        raise InvalidParameter.for_parameter(
            "privacy_unit",
            owner,
            "a column name (the same in every private table) or a mapping table -> column",
            privacy_unit,
        )
    return dict(private), units, dict(public)


def check_unit_types(tables: Mapping[str, TableInfo], owner: str) -> None:
    """Every private table has its unit column, the units compare as one key (DECIMAL
    units of one precision and scale: compared exactly, never through a cast that could
    fail or round), and no column name starts with ``__dpkit`` (dpkit's own names in
    the joined view's SQL)."""
    categories = {}
    decimals = set()
    for name, info in tables.items():
        for column in info.schema:
            if column.casefold().startswith("__dpkit"):
                raise DataError(
                    f"{owner}: column {column!r} of {name!r} starts with '__dpkit', a prefix "
                    "dpkit keeps for its own columns; rename it."
                )
        if info.unit is None:
            continue
        if info.unit not in info.schema:
            raise DataError(
                f"{owner}: the privacy unit column {info.unit!r} of {name!r} does not exist. "
                f"Columns: {list(info.schema)}."
            )
        category = key_category(info.schema[info.unit])
        if category is None:
            raise InvalidParameter(
                f"{owner}: the privacy unit column {info.unit!r} of {name!r} has type "
                f"{info.schema[info.unit]}, which has no canonical form to join persons on."
            )
        categories[name] = category
        if category == "decimal":
            decimals.add(info.schema[info.unit].upper().replace(" ", ""))
    if len(set(categories.values())) > 1 or len(decimals) > 1:
        raise InvalidParameter(
            f"{owner}: the privacy unit columns must hold the same kind of value in every "
            f"private table (one person, one id); got {categories}."
        )


def _internal_name(index: int) -> str:
    return f"__dpkit_t{index}"


def open_duckdb_tables(
    private: Mapping[str, Any],
    units: Mapping[str, str],
    public: Mapping[str, Any],
    owner: str,
    connection: Any = None,
) -> tuple[Any, Catalog]:
    """Every table in one private DuckDB database (files read as ``Session.from_path``
    reads them, pandas/Arrow tables and a caller's DuckDB tables copied), public ones
    also into the public connection. Returns the database's connection and the catalog.

    ``connection``: the caller's DuckDB connection when the tables are names in it
    (``from_duckdb``); every one is copied (:func:`open_duckdb`).
    """
    from dpkit.analytics._duckdb_source import open_duckdb
    from dpkit.analytics._sources import (
        _arrow_stream,
        open_file,
        private_database,
        seal_private_database,
    )
    from dpkit.analytics.engines import DuckDBEngine

    database = private_database()
    tables: dict[str, TableInfo] = {}
    try:
        everything: list[tuple[str, Any, str | None]] = [
            (n, v, units[n]) for n, v in private.items()
        ]
        everything += [(n, v, None) for n, v in public.items()]
        for index, (name, value, unit) in enumerate(everything):
            internal = _internal_name(index)
            label = f"{owner} (table {name!r})"
            if connection is not None:
                if not isinstance(value, str):
                    raise InvalidParameter.for_parameter(
                        "tables", owner, "names of tables of the connection", value
                    )
                open_duckdb(connection, value, owner=label, into=database, name_in=internal)
            elif is_file(value):
                file = Path(value)
                if not file.exists():
                    raise DataError(f"{owner}: no file at {str(file)!r} (table {name!r}).")
                open_file(
                    file,
                    schema=None,
                    owner=label,
                    into=database,
                    table=internal,
                    copy=unit is None,
                )
            elif kind_of(value) in ("pandas", "arrow", "polars"):
                _copy_object(database.connection, value, internal, label)
            else:
                raise InvalidParameter.for_parameter(
                    "tables",
                    owner,
                    "file paths (.parquet, .csv), pandas or Polars DataFrames or pyarrow Tables",
                    value,
                )
            relation = _quote(internal)
            schema = DuckDBEngine(database.connection, relation).schema()
            tables[name] = TableInfo(name, relation, schema, unit)
        # The copied DataFrames too: their rows leave the write-ahead log for the
        # unlinked database file.
        seal_private_database(database.connection, database.directory)
        check_unit_types(tables, owner)
        copies = {
            name: _arrow_stream(database.connection.sql(f"SELECT * FROM {info.relation}"))
            for name, info in tables.items()
            if info.public
        }
        public_db = public_connection(copies)
    except BaseException:
        database.connection.close()
        database.remove()
        raise
    return database.connection, Catalog(tables, public_db)


def _copy_object(connection: Any, data: Any, internal: str, owner: str) -> None:
    """A pandas DataFrame, Arrow table or Polars frame copied into ``internal`` (as
    from_pandas, from_arrow, from_polars)."""
    from dpkit.analytics._sources import is_polars, polars_stream

    if is_polars(data):
        data = polars_stream(data, owner)
    try:
        connection.register("__dpkit_input", data)
        connection.execute(f"CREATE TABLE {_quote(internal)} AS SELECT * FROM __dpkit_input")
        connection.unregister("__dpkit_input")
    except Exception as err:
        # The conversion's message can quote the caller's rows: the class only.
        raise DataError(
            f"{owner}: cannot read the data given ({type(err).__name__}). The message is "
            "not shown because it may quote row values."
        ) from None


def open_spark_tables(
    private: Mapping[str, Any],
    units: Mapping[str, str],
    public: Mapping[str, Any],
    owner: str,
) -> tuple[Any, Catalog]:
    """Every table in one Spark application: private tables (files read by Spark,
    DataFrames materialised) as global temporary views of one SparkEngine; public tables
    read once -- by DuckDB for files, collected for DataFrames -- into the public
    connection, and that very copy handed to Spark. Returns the engine and the catalog.
    """
    from dpkit.analytics.engines.spark import SparkEngine, read_path, spark_session

    spark = None
    engine: Any = None
    tables: dict[str, TableInfo] = {}
    for name, value in private.items():
        label = f"{owner} (table {name!r})"
        kind = kind_of(value)
        if kind == "file":
            spark = spark or spark_session(owner)
            file = Path(value)
            if not file.exists():
                raise DataError(f"{owner}: no file at {str(file)!r} (table {name!r}).")
            frame = read_path(spark, str(file.resolve()), None, label, None)
        elif kind == "spark":
            frame = value
        elif kind in ("pandas", "arrow"):
            spark = spark or spark_session(owner)
            frame = spark.createDataFrame(value)
        elif kind == "polars":
            # Read by DuckDB (as from_polars), then handed to Spark as an Arrow table.
            spark = spark or spark_session(owner)
            frame = spark.createDataFrame(_public_arrow(value, label))
        else:
            raise InvalidParameter.for_parameter(
                "tables",
                owner,
                "file paths, Spark DataFrames, pandas, Polars or Arrow tables",
                value,
            )
        if engine is None:
            engine = SparkEngine(frame)
            relation = engine.relation
        else:
            relation = engine.register(frame)
        tables[name] = TableInfo(
            name, relation, engine.with_relation(relation).schema(), units[name]
        )
    copies = {}
    for name, value in public.items():
        copies[name] = _public_arrow(value, f"{owner} (table {name!r})")
    public_db = public_connection(copies)
    try:
        for name in public:
            arrow = _arrow_table(public_db.sql(f"SELECT * FROM {_quote(name)}"))
            relation = engine.register(engine.spark_frame(arrow), in_place=True)
            schema = engine.with_relation(relation).schema()
            tables[name] = TableInfo(name, relation, schema, None)
        check_unit_types(tables, owner)
    except BaseException:
        with contextlib.suppress(Exception):
            public_db.close()
        raise
    return engine, Catalog(tables, public_db)


def _arrow_table(relation: Any) -> Any:
    """A DuckDB relation's rows as a pyarrow Table (``to_arrow_table`` since DuckDB 1.4)."""
    fetch = getattr(relation, "to_arrow_table", None) or relation.fetch_arrow_table
    return fetch()


def _public_arrow(value: Any, owner: str) -> Any:
    """A public table as an Arrow table: a file read by DuckDB (as from_path reads it),
    a Spark DataFrame collected, pandas/Arrow/Polars copied by DuckDB."""
    from dpkit.analytics._sources import open_file

    kind = kind_of(value)
    if kind == "file":
        file = Path(value)
        if not file.exists():
            raise DataError(f"{owner}: no file at {str(file)!r}.")
        opened = open_file(file, schema=None, owner=owner, copy=True)
        try:
            return _arrow_table(opened.connection.sql(f"SELECT * FROM {opened.relation}"))
        finally:
            opened.connection.close()
    if kind == "spark":
        return value.toArrow()
    if kind in ("pandas", "arrow", "polars"):
        import duckdb

        connection = duckdb.connect()
        try:
            _copy_object(connection, value, "__dpkit_public", owner)
            return _arrow_table(connection.sql('SELECT * FROM "__dpkit_public"'))
        finally:
            connection.close()
    raise InvalidParameter.for_parameter(
        "public", owner, "file paths, Spark DataFrames, pandas, Polars or Arrow tables", value
    )
