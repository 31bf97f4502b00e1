"""The DuckDB engine: dpkit's SQL (:mod:`._sql`) on a DuckDB connection.

DuckDB is the default engine: embedded, no server, one table or view of a connection
(a file read by :mod:`dpkit.analytics._sources`, a pandas or Arrow table copied in, or
the caller's own table). Statements are bound (names, types and functions checked, no
row read: :meth:`DuckDBEngine._bind`) before the Session charges anything.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from dpkit.analytics.engines._sql import SqlEngine
from dpkit.errors import EngineError

__all__ = ["DuckDBEngine"]

_Result = TypeVar("_Result")


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
        return self._on_cursor(
            lambda cursor: list(cursor.execute(sql, list(params)).fetchall()), reads_rows
        )

    def _bind(self, sql: str, params: Sequence[Any]) -> None:
        # A relation made from a SELECT is parsed and bound at once (names, types and
        # functions: DuckDB raises its Binder, Catalog or Parser error here) and runs
        # only when its rows are asked for, which they never are: no row is read. This
        # is the binder that EXPLAIN ran, without the optimiser and physical planner
        # that EXPLAIN ran next and rendered as text, which on small tables cost as
        # much as running the statement (issue 34: 13 -> 5 ms for an aggregate's
        # statement, 35 -> 10 ms for a median's). A failure of those later stages
        # (none is known) comes after the charge and fails closed; a value that does
        # not convert was never caught by either (DuckDB defers it to the run).
        self._on_cursor(lambda cursor: cursor.sql(sql, params=list(params)), reads_rows=False)

    def _on_cursor(self, action: Callable[[Any], _Result], reads_rows: bool) -> _Result:
        """``action`` on a new cursor of the engine's connection, with DuckDB's errors
        made EngineErrors whose text cannot quote a row."""
        import duckdb

        cursor = self._cursor()
        try:
            cursor.execute("SET enable_progress_bar = false")
            # Division by zero is an error (made NULL by the expressions' TRY), not an
            # infinity: the meaning Spark gives it, so both engines agree (a cursor's
            # settings are its own; the caller's connection is untouched).
            cursor.execute("SET ieee_floating_point_ops = false")
            return action(cursor)
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

    def schema(self, derived: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
        key = tuple(derived)
        if key not in self._schema_cache:
            sql, params = self._source(derived)
            rows = self._execute(f"DESCRIBE {sql}", params, reads_rows=False)
            self._remember_schema(key, [(str(r[0]), str(r[1])) for r in rows])
        return dict(self._schema_cache[key])
