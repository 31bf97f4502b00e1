"""The DuckDB engine: dpkit's SQL (:mod:`._sql`) on a DuckDB connection.

DuckDB is the default engine: embedded, no server, one table or view of a connection
(a file read by :mod:`dpkit.analytics._sources`, a pandas or Arrow table copied in, or
the caller's own table). Statements are bound with ``EXPLAIN`` (names, types and
functions checked, no row read) before the Session charges anything.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from dpkit.analytics.engines._sql import SqlEngine
from dpkit.errors import EngineError

__all__ = ["DuckDBEngine"]


class DuckDBEngine(SqlEngine):
    """DuckDB engine over one table or view of a connection.

    Parameters
    ----------
    connection:
        A ``duckdb.DuckDBPyConnection``; each query runs on its own cursor, so threads
        may share the engine.
    relation:
        SQL of the source relation (a quoted table/view name or a table function call).
    """

    # NOT MATERIALIZED: the row-level CTEs are read twice by the quantile path (group
    # selection, then the rows); DuckDB would otherwise materialise every row (3.4 GB
    # at 10^8 rows; 1.4 GB without, and faster).
    cte_hint = "NOT MATERIALIZED "

    def __init__(self, connection: Any, relation: str) -> None:
        self._connection = connection
        self._relation = relation
        self._lock = threading.Lock()
        self._running: set[Any] = set()  # cursors of statements now running
        self._schema_cache: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}

    def _cursor(self) -> Any:
        with self._lock:
            cursor = self._connection.cursor()
            self._running.add(cursor)
            return cursor

    def interrupt(self) -> None:
        """Interrupt every statement this engine is running (a missed deadline)."""
        with self._lock:
            running = list(self._running)
        for cursor in running:
            cursor.interrupt()

    def _execute(
        self, sql: str, params: Sequence[Any] = (), *, reads_rows: bool = True
    ) -> list[tuple[Any, ...]]:
        import duckdb

        cursor = self._cursor()
        try:
            cursor.execute("SET enable_progress_bar = false")
            # Division by zero is an error (made NULL by the expressions' TRY), not an
            # infinity: the meaning Spark gives it, so both engines agree (a cursor's
            # settings are its own; the caller's connection is untouched).
            cursor.execute("SET ieee_floating_point_ops = false")
            return list(cursor.execute(sql, list(params)).fetchall())
        except duckdb.Error as err:
            if not reads_rows and isinstance(
                err, duckdb.BinderException | duckdb.CatalogException | duckdb.ParserException
            ):
                # Binding reads no row: the message names columns, types and functions.
                raise EngineError(f"DuckDB cannot run the query: {err}") from None
            # Anything else may quote a row (DuckDB's "Original Line", a cast's value):
            # the class only, and nothing chained.
            raise EngineError(
                f"DuckDB failed while reading the data ({type(err).__name__}). Its message "
                "is not shown because it may quote row values; nothing was released."
            ) from None
        finally:
            with self._lock:
                self._running.discard(cursor)
            cursor.close()

    def _bind(self, sql: str, params: Sequence[Any]) -> None:
        # EXPLAIN binds and plans the statement without reading the data.
        self._execute("EXPLAIN " + sql, params, reads_rows=False)

    def schema(self, derived: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
        key = tuple(derived)
        if key not in self._schema_cache:
            sql, params = self._source(derived)
            rows = self._execute(f"DESCRIBE {sql}", params, reads_rows=False)
            self._remember_schema(key, [(str(r[0]), str(r[1])) for r in rows])
        return dict(self._schema_cache[key])
