"""The analytics Session: a table, a privacy unit, a budget and a persistent ledger.

A query runs in five steps, in this order:

1. **compile** -- validate the query and split its budget (schema, expressions, keys,
   bounds): public information only, no engine, no randomness;
2. **prepare** -- the engine binds every statement it will run without reading a row
   (names, types, functions);
3. **charge** -- the ledger commits the spend durably (an fsync'd SQLite transaction),
   refusing it if the budget would be exceeded;
4. **run** -- the engine computes exact integer aggregates per group (contribution
   bounding inside the engine);
5. **release** -- exact integer noise is added in Python.

Design rule (docs/analytics.md, "Threat model"): whether a query succeeds, what it
raises and how long it takes to fail depend on the schema and public parameters only,
never on row values. Steps 1-3 read no row, so a failure there spends nothing and
depends on public information only. Steps 4-5 cannot fail on row values (expressions are
total, key types are checked and keys made canonical in SQL, sources are materialised,
integer widths come from public bounds). Anything that fails there anyway (out of
memory, a disk error, an engine bug, a missed ``deadline``) *fails closed*: the scope's
remaining budget is charged, the failure is recorded and the ledger locked, and
:class:`~dpkit.errors.SessionLocked` is raised with no trace of the cause. A crash after
step 3 forgets nothing.

Why this module is long (~650 lines): it is one class, the public face of the
analytics layer, and a third of it is the NumPy docstrings of its public methods (the
privacy statements users read); the work is delegated to _compile, the engine,
_release, _partition and the ledger.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.accounting._math.rounding import fraction_down
from dpkit.accounting.filters import PureApproxZCDPFilter
from dpkit.accounting.guarantees import ApproxDP, Guarantee, PureDP
from dpkit.analytics._accounting import (
    BudgetKind,
    QueryBudget,
    budget_kind,
    selection_threshold,
)
from dpkit.analytics._catalog import Catalog
from dpkit.analytics._compile import CompiledQuery, compile_query, salt_from
from dpkit.analytics._fail_closed import check_deadline, locked_error, run_after_charge
from dpkit.analytics._history import SpendHistory
from dpkit.analytics._joins import JoinedView, joined_view
from dpkit.analytics._ledger import Ledger
from dpkit.analytics._order import release_order, released_bounds
from dpkit.analytics._partition import plan_partition
from dpkit.analytics._per_person import PersonRows, one_row_per_unit, person_relation
from dpkit.analytics._plan import PartScope
from dpkit.analytics._release import Explanation, QueryResult, explain, rehearse, release
from dpkit.analytics._row_cost import check_query_cost
from dpkit.analytics._sql_clause import SqlError
from dpkit.analytics._sql_query import SqlStatement, finish_result
from dpkit.analytics.engines import DuckDBEngine, Engine
from dpkit.analytics.query import KeySet, Query, TableKeys
from dpkit.errors import (
    BudgetExceeded,
    DataError,
    InternalError,
    InvalidParameter,
    SessionLocked,
)
from dpkit.random import Random, RandomLike, as_random

if TYPE_CHECKING:
    from dpkit.synth._result import SyntheticData

__all__ = ["Session"]

_ROOT = "root"
#: Joined views whose schema caches a Session keeps (Session._joined_schemas); each
#: holds a few small dictionaries of column types.
_MAX_JOINED_SCHEMAS = 64


def _fingerprint(source: str, schema: Mapping[str, str]) -> str:
    # Public information only (source description and schema), never the contents:
    # a fingerprint of the rows would make refusals depend on private data.
    text = json.dumps([source, sorted(schema.items())])
    return hashlib.sha256(text.encode()).hexdigest()


class Session:
    """A privacy-budgeted view of one table (use the ``from_*`` constructors).

    Privacy
    -------
    With ``privacy_unit=None`` neighbouring tables differ by one row; with a column
    name they differ by all the rows of one value of that column (one person). Every
    release of the Session, over its whole life (the ledger persists), satisfies the
    Session ``budget`` under fully adaptive choice of queries and query budgets: a
    PureDP budget by the pure-DP filter (epsilons add), a ZCDP budget by the zCDP filter
    (rhos add), an ApproxDP budget by an approximate-zCDP filter converted once with the
    tight zCDP -> (eps, delta) conversion (see ``dpkit.analytics._accounting``).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        source: str,
        privacy_unit: str | None,
        budget: Guarantee,
        ledger: str | Path | Ledger | None,
        rng: RandomLike | None,
        selection_delta: float | None = None,
        _scope: str = _ROOT,
        _kind: BudgetKind | None = None,
        _catalog: Catalog | None = None,
    ) -> None:
        owner = "Session"
        self._engine = engine
        self._kind = _kind if _kind is not None else budget_kind(budget, selection_delta, owner)
        self._catalog = _catalog
        if _catalog is not None:
            # A Session over several tables: queries name their table; the schema and
            # unit are those of the joined view each query reads (dpkit.analytics._joins).
            self._schema = _catalog.fingerprint_schema()
            privacy_unit = None
        else:
            self._schema = engine.schema()
        if privacy_unit is not None:
            if not isinstance(privacy_unit, str):
                raise InvalidParameter.for_parameter(
                    "privacy_unit", owner, "None or a column name", privacy_unit
                )
            if privacy_unit not in self._schema:
                raise DataError(
                    f"{owner}: the privacy unit column {privacy_unit!r} does not exist. "
                    f"Available columns: {sorted(self._schema)}."
                )
        self._unit = privacy_unit
        self._source = source
        self._ledger = ledger if isinstance(ledger, Ledger) else Ledger(ledger)
        self._scope = _scope
        self._fingerprint = _fingerprint(f"{source}|unit={privacy_unit}", self._schema)
        # Set on the view a joined or per-person query reads.
        self._view: JoinedView | PersonRows | None = None
        self._ledger.open_scope(_scope, self._kind.key, self._kind.amount, self._fingerprint)
        self._random: Random = as_random(rng)
        self._partitions: tuple[PartScope, ...] = ()
        self._after_commit: Callable[[], None] | None = None  # test hook (crash tests)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_duckdb(
        cls,
        connection: Any,
        table: str | Sequence[str],
        *,
        privacy_unit: str | Mapping[str, str] | None = None,
        budget: Guarantee,
        ledger: str | Path | None = None,
        selection_delta: float | None = None,
        rng: RandomLike | None = None,
        public: Sequence[str] | None = None,
    ) -> Session:
        """A Session over ``table`` (a table or view name) of a DuckDB ``connection``
        -- or over several: ``table`` a list of private tables and ``public`` a list of
        public ones (then as :meth:`from_tables`, every table copied into one private
        database, ``privacy_unit`` required).

        A plain base table of a database in DuckDB's own format (no generated column)
        is read in place, through cursors of ``connection``. Anything else the name
        resolves to -- a view, a table with a generated column, a table of an attached
        SQLite or Postgres database, a replacement scan -- is evaluated once, now, and
        copied into a private temporary database, because its own expressions (a view's
        ``CAST``) would otherwise run inside each query, below the analyst's filter, and
        could fail on one row. A source that fails on a row fails here, before anything
        is spent. The copy costs about 0.7 s and 30 MB per 10^6 rows of a 6-column view
        (6 s at 10^7 rows), and queries on it are as fast or faster than on the view;
        see ``dpkit.analytics._sources`` for the rule and the measurements.

        Parameters
        ----------
        connection:
            A ``duckdb.DuckDBPyConnection``; only read (through a cursor of its own:
            its settings, results and catalog are untouched).
        table:
            A table or view name, resolved as on a new cursor of ``connection`` (a
            DataFrame registered on the connection, or a temporary table, is visible to
            that connection only: use :meth:`from_pandas` or :meth:`from_arrow`).
        privacy_unit, budget, ledger, selection_delta, rng:
            As for :class:`Session`.

        Raises
        ------
        InvalidParameter
            If ``connection`` is not a DuckDB connection or ``table`` not a name.
        DataError
            If ``table`` does not resolve, or evaluating it fails on its rows (the
            message names DuckDB's error class only: its text can quote rows).
        """
        from dpkit.analytics._duckdb_source import open_duckdb

        owner = "Session.from_duckdb"
        if not isinstance(table, str) or public is not None:
            return cls._from_duckdb_tables(
                connection, table, privacy_unit, public, budget, ledger, selection_delta, rng
            )
        if privacy_unit is not None and not isinstance(privacy_unit, str):
            raise InvalidParameter.for_parameter(
                "privacy_unit", owner, "None or a column name", privacy_unit
            )
        if not table:
            raise InvalidParameter.for_parameter("table", owner, "a table name", table)
        opened = open_duckdb(connection, table, owner=owner)
        engine = DuckDBEngine(opened.connection, opened.relation)
        return cls(
            engine,
            source=f"duckdb:{table}",
            privacy_unit=privacy_unit,
            budget=budget,
            ledger=ledger,
            rng=rng,
            selection_delta=selection_delta,
        )

    @classmethod
    def _from_duckdb_tables(
        cls,
        connection: Any,
        tables: object,
        privacy_unit: object,
        public: object,
        budget: Guarantee,
        ledger: str | Path | None,
        selection_delta: float | None,
        rng: RandomLike | None,
    ) -> Session:
        """:meth:`from_duckdb` over several tables of ``connection``."""
        import duckdb

        from dpkit.analytics._catalog import check_tables, open_duckdb_tables

        owner = "Session.from_duckdb"
        if not isinstance(connection, duckdb.DuckDBPyConnection):
            raise InvalidParameter.for_parameter(
                "connection", owner, "a duckdb.DuckDBPyConnection", connection
            )

        def names(value: object, what: str) -> dict[str, str]:
            if value is None:
                return {}
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise InvalidParameter.for_parameter(what, owner, "a list of table names", value)
            return {str(v): str(v) for v in value}

        private, units, public_tables = check_tables(
            names(tables, "table"), privacy_unit, names(public, "public"), owner
        )
        copied, catalog = open_duckdb_tables(
            private, units, public_tables, owner, connection=connection
        )
        first = catalog.table(catalog.private_names()[0], owner)
        described = json.dumps({"private": sorted(private), "public": sorted(public_tables)})
        return cls._over_catalog(
            DuckDBEngine(copied, first.relation),
            catalog,
            f"duckdb-tables:{described}",
            budget,
            ledger,
            selection_delta,
            rng,
        )

    @classmethod
    def from_path(
        cls,
        path: str | Path,
        *,
        privacy_unit: str | None = None,
        budget: Guarantee,
        ledger: str | Path | None = None,
        selection_delta: float | None = None,
        rng: RandomLike | None = None,
        schema: Mapping[str, str] | None = None,
        engine: str = "duckdb",
        encoding: str | None = None,
        delimiter: str | None = None,
        na_values: Sequence[str] | None = None,
    ) -> Session:
        """A Session over a Parquet (``.parquet``, ``.pq``) or CSV (``.csv``,
        ``.csv.gz``, ``.tsv``, ``.tsv.gz``) file.

        DuckDB reads a CSV file once, now, into a table of a private temporary
        database (never into Python), so that no row value can make a later query
        fail: a value that does not parse as its column's type becomes NULL (missing,
        handled by the Session's NULL rule) and a malformed line is skipped. A Parquet
        file is read in place through a typed view (its footer is read now). A file
        that cannot be opened fails here, before anything is spent. See
        ``dpkit.analytics._sources`` for the reading rules and measurements.

        Parameters
        ----------
        path:
            The file.
        privacy_unit, budget, ledger, selection_delta, rng:
            As for :class:`Session`.
        schema:
            Optional ``{column: DuckDB type}`` (e.g. ``{"age": "BIGINT"}``): these
            columns are converted to these types (``TRY_CAST``; a value that does not
            parse becomes NULL) instead of the sniffed (CSV) or stored (Parquet) ones.
        engine:
            ``"duckdb"`` (default) or ``"spark"``: the file is read by Spark (the active
            SparkSession, or a local one started now; see :meth:`from_spark`), CSV types
            inferred by Spark unless ``schema=`` names them.
        encoding:
            Of a CSV file: ``"utf-8"`` (default), ``"utf-16"`` or ``"latin-1"`` (Python
            spellings such as ``"ISO-8859-1"`` are accepted). A file whose first 64 KiB
            do not decode in it is refused here, naming the encoding to use.
        delimiter:
            Of a CSV file: the field separator, one character (``"tab"`` for a tab);
            default: sniffed.
        na_values:
            Of a CSV file: texts read as missing, besides the empty field (e.g.
            ``["NA"]``).

        Returns
        -------
        Session
            Nothing is spent by opening it.

        Raises
        ------
        InvalidParameter
            If ``schema`` is not a mapping of column names to scalar DuckDB type
            names, or a CSV option is not valid (or is given for a Parquet file);
            checked before the file is touched.
        DataError
            If there is no file, its format is unknown, a CSV file's start is not valid
            in ``encoding``, ``schema`` names a column the file does not have, or DuckDB
            cannot read it (the message names DuckDB's
            error class only: its text can quote rows).

        Notes
        -----
        What is public (may be shown in errors, explanations and reports): the file's
        path and column names, and its column types. Without ``schema=``, a CSV's
        dialect, header and column types are sniffed by DuckDB from a sample of its
        first rows and that sniffed schema is treated as public; a row in the sample
        can change it (``oops`` in an integer column makes the column VARCHAR). Pass
        ``schema=`` when the types themselves are sensitive. Parquet types come from
        the file's metadata.
        """
        from dpkit.analytics._sources import check_csv_options, check_schema, open_file

        owner = "Session.from_path"
        if engine not in ("duckdb", "spark"):
            raise InvalidParameter.for_parameter("engine", owner, "'duckdb' or 'spark'", engine)
        checked = check_schema(schema, owner)
        csv = check_csv_options(
            encoding=encoding, delimiter=delimiter, na_values=na_values, owner=owner
        )
        file = Path(path)
        if not file.exists():
            raise DataError(f"{owner}: no file at {str(file)!r}.")
        chosen: Engine
        if engine == "spark":
            from dpkit.analytics.engines.spark import SparkEngine, read_path, spark_session

            frame = read_path(spark_session(owner), str(file.resolve()), checked, owner, csv)
            chosen = SparkEngine(frame)
        else:
            opened = open_file(file, schema=checked, owner=owner, csv=csv)
            chosen = DuckDBEngine(opened.connection, opened.relation)
        return cls(
            chosen,
            source=f"file:{file.resolve()}",
            privacy_unit=privacy_unit,
            budget=budget,
            ledger=ledger,
            rng=rng,
            selection_delta=selection_delta,
        )

    @classmethod
    def from_spark(
        cls,
        dataframe: Any,
        *,
        privacy_unit: str | Mapping[str, str] | None = None,
        budget: Guarantee,
        ledger: str | Path | None = None,
        selection_delta: float | None = None,
        rng: RandomLike | None = None,
        source: str | None = None,
        public: Mapping[str, Any] | None = None,
    ) -> Session:
        """A Session over a Spark DataFrame, computed on its cluster -- or over several:
        ``dataframe`` a mapping ``{name: DataFrame}`` of private tables and ``public`` one
        of public tables (then as :meth:`from_tables` with ``engine="spark"``).

        Every query runs as Spark SQL (the DuckDB engine's statements in Spark's
        dialect, ``dpkit.analytics.engines.spark``); only per-group aggregates come
        back to the driver, and noise is added here. For the same rows, salt and query,
        the exact aggregates equal the DuckDB engine's.

        The DataFrame is computed once, now, in its own SparkSession, and kept in the
        executors' storage (``localCheckpoint``): its plan carries that session's
        settings (Spark 4's ANSI mode makes a ``CAST`` raise on a bad value) and may
        call Python UDFs, which would otherwise run inside each query, below the
        analyst's filter, and could fail on one row. A DataFrame that fails on a row
        fails here, before anything is spent; queries read the stored rows and call
        none of its expressions. At 10^6 rows of 6 columns (local Spark, 2 cores) this
        takes about 5 s and 134 MB of executor storage; queries then run as fast as on
        the DataFrame or faster. The stored rows are lost if an executor holding them
        is lost (a later query then fails, and the Session locks).

        Parameters
        ----------
        dataframe:
            A ``pyspark.sql.DataFrame`` (PySpark: ``pip install 'dpkit[spark]'``).
        privacy_unit, budget, ledger, selection_delta, rng:
            As for :class:`Session`.
        source:
            The name under which the ledger records this data (default ``"spark"``);
            give a stable name, e.g. the table's path, to resume a ledger.

        Raises
        ------
        InvalidParameter
            If PySpark is not installed or ``dataframe`` is not a Spark DataFrame.
        DataError
            If computing the DataFrame fails (the message names the error's class only).
        """
        from dpkit.analytics.engines.spark import SparkEngine

        owner = "Session.from_spark"
        if isinstance(dataframe, Mapping) or public is not None:
            if privacy_unit is None:
                raise InvalidParameter(
                    f"{owner}: a Session over several tables needs privacy_unit= (the "
                    "person id column of every private table)."
                )
            tables = dataframe if isinstance(dataframe, Mapping) else {"data": dataframe}
            return cls.from_tables(
                tables,
                privacy_unit=privacy_unit,
                public=public,
                budget=budget,
                ledger=ledger,
                selection_delta=selection_delta,
                rng=rng,
                engine="spark",
                source=source,
            )
        if privacy_unit is not None and not isinstance(privacy_unit, str):
            raise InvalidParameter.for_parameter(
                "privacy_unit", owner, "None or a column name", privacy_unit
            )
        if not hasattr(dataframe, "sparkSession") or not hasattr(dataframe, "schema"):
            raise InvalidParameter.for_parameter(
                "dataframe", owner, "a pyspark.sql.DataFrame", dataframe
            )
        return cls(
            SparkEngine(dataframe),
            source=f"spark:{source}" if source is not None else "spark",
            privacy_unit=privacy_unit,
            budget=budget,
            ledger=ledger,
            rng=rng,
            selection_delta=selection_delta,
        )

    @classmethod
    def from_pandas(
        cls,
        dataframe: Any,
        *,
        privacy_unit: str | None = None,
        budget: Guarantee,
        ledger: str | Path | None = None,
        selection_delta: float | None = None,
        rng: RandomLike | None = None,
    ) -> Session:
        """A Session over a pandas DataFrame, copied into a DuckDB table at creation."""
        return cls._from_object(
            dataframe, "pandas", privacy_unit, budget, ledger, selection_delta, rng
        )

    @classmethod
    def from_arrow(
        cls,
        table: Any,
        *,
        privacy_unit: str | None = None,
        budget: Guarantee,
        ledger: str | Path | None = None,
        selection_delta: float | None = None,
        rng: RandomLike | None = None,
    ) -> Session:
        """A Session over a pyarrow Table, copied into a DuckDB table at creation."""
        return cls._from_object(table, "arrow", privacy_unit, budget, ledger, selection_delta, rng)

    @classmethod
    def from_polars(
        cls,
        dataframe: Any,
        *,
        privacy_unit: str | None = None,
        budget: Guarantee,
        ledger: str | Path | None = None,
        selection_delta: float | None = None,
        rng: RandomLike | None = None,
    ) -> Session:
        """A Session over a Polars DataFrame or LazyFrame, copied into a DuckDB table at
        creation.

        DuckDB reads the frame's Arrow buffers directly (the Arrow C stream interface:
        no pandas conversion, no Python objects) and copies them once into its own
        table, as :meth:`from_arrow` does. A LazyFrame is collected once, now, in
        memory: a plan that fails on a row (a strict cast) fails here, before anything
        is spent. To bound memory, collect it yourself (``engine="streaming"``) or
        write it to Parquet (``sink_parquet``) and use :meth:`from_path`.

        Parameters
        ----------
        dataframe:
            A ``polars.DataFrame`` or ``polars.LazyFrame`` (``pip install
            'dpkit[polars]'``). Column types map as for :meth:`from_arrow`: Categorical
            and Enum become VARCHAR, Decimal DECIMAL, Datetime (with or without a time
            zone) TIMESTAMP (WITH TIME ZONE), Date DATE.
        privacy_unit, budget, ledger, selection_delta, rng:
            As for :class:`Session`.

        Raises
        ------
        InvalidParameter
            If ``dataframe`` is not a Polars DataFrame or LazyFrame.
        DataError
            If collecting the frame or reading it fails (an Object column, a LazyFrame
            whose plan fails on a row); the message names the error's class only.
        """
        from dpkit.analytics._sources import polars_stream

        data = polars_stream(dataframe, "Session.from_polars")
        return cls._from_object(data, "polars", privacy_unit, budget, ledger, selection_delta, rng)

    @classmethod
    def _from_object(
        cls,
        data: Any,
        kind: str,
        privacy_unit: str | None,
        budget: Guarantee,
        ledger: str | Path | None,
        selection_delta: float | None,
        rng: RandomLike | None,
    ) -> Session:
        import duckdb

        connection = duckdb.connect()
        try:
            # Registered objects are visible to their connection only, while queries run
            # on cursors (for threads): copy into a DuckDB table (columnar, in memory).
            connection.register("__dpkit_input", data)
            connection.execute("CREATE TABLE __dpkit_data AS SELECT * FROM __dpkit_input")
            connection.unregister("__dpkit_input")
        except Exception as err:
            connection.close()
            # Any failure here comes from converting the caller's rows (DuckDB, pandas,
            # pyarrow: "Could not convert 'x' ..."), and its text can quote them: the
            # class only, and nothing chained (`from None`), so no traceback shows it.
            raise DataError(
                f"Session.from_{kind}: cannot read the data given ({type(err).__name__}). "
                "The message is not shown because it may quote row values."
            ) from None
        return cls(
            DuckDBEngine(connection, "__dpkit_data"),
            source=kind,
            privacy_unit=privacy_unit,
            budget=budget,
            ledger=ledger,
            rng=rng,
            selection_delta=selection_delta,
        )

    @classmethod
    def from_tables(
        cls,
        tables: Mapping[str, Any],
        *,
        privacy_unit: str | Mapping[str, str],
        public: Mapping[str, Any] | None = None,
        budget: Guarantee,
        ledger: str | Path | None = None,
        selection_delta: float | None = None,
        rng: RandomLike | None = None,
        engine: str = "duckdb",
        source: str | None = None,
    ) -> Session:
        """A Session over several tables: private tables of one kind of person, public
        reference tables, one budget and one ledger.

        Queries name their table and joins: ``Query.from_table("visits").join(
        "regions", on="region_id")``; see docs/joins.md and ``dpkit.analytics._joins``
        for what each kind of join guarantees.

        Parameters
        ----------
        tables:
            The private tables, ``{name: data}``: a file path (``.parquet``, ``.csv``...,
            read as :meth:`from_path` reads it), a pandas DataFrame, a pyarrow Table or
            a Polars DataFrame or LazyFrame (copied, as :meth:`from_polars` reads it),
            or, with ``engine="spark"``, a Spark DataFrame.
        privacy_unit:
            The column holding the person's id in every private table (one name for
            all, or ``{table: column}``). The ids are one namespace: the same person
            has the same id in every table.
        public:
            Public tables, ``{name: data}`` (as ``tables``): read once, now, and copied,
            so that a later change to the file cannot influence this Session's
            releases. Their contents are public: key sets, multiplicities and queries
            on them (:meth:`public_query`) spend nothing.
        budget, ledger, selection_delta, rng:
            As for :class:`Session`.
        engine:
            ``"duckdb"`` (default: every table in one private DuckDB database) or
            ``"spark"`` (every table a global temporary view of the active or a new
            local SparkSession; public tables are read by DuckDB and that copy handed
            to Spark).
        source:
            The name under which the ledger records this data (default: the tables'
            names and where they came from).

        Privacy
        -------
        Neighbouring databases differ by one person, with all their rows in every
        private table; public tables are the same. Every release of the Session
        satisfies ``budget`` with respect to that relation, over the Session's life.

        Raises
        ------
        InvalidParameter
            Names, units or sources of the wrong kind (nothing is read).
        DataError
            A file cannot be read, or a unit column is missing.
        """
        from dpkit.analytics._catalog import (
            check_tables,
            kind_of,
            open_duckdb_tables,
            open_spark_tables,
        )

        owner = "Session.from_tables"
        if engine not in ("duckdb", "spark"):
            raise InvalidParameter.for_parameter("engine", owner, "'duckdb' or 'spark'", engine)
        private, units, public_tables = check_tables(tables, privacy_unit, public, owner)
        chosen: Engine
        if engine == "spark":
            chosen, catalog = open_spark_tables(private, units, public_tables, owner)
        else:
            connection, catalog = open_duckdb_tables(private, units, public_tables, owner)
            first = catalog.table(catalog.private_names()[0], owner)
            chosen = DuckDBEngine(connection, first.relation)

        def where(value: Any) -> str:
            kind = kind_of(value)
            return f"file:{Path(value).resolve()}" if kind == "file" else kind

        described = source or json.dumps(
            {
                "private": {n: where(v) for n, v in private.items()},
                "public": {n: where(v) for n, v in public_tables.items()},
            },
            sort_keys=True,
        )
        return cls._over_catalog(
            chosen, catalog, f"tables:{described}", budget, ledger, selection_delta, rng
        )

    @classmethod
    def _over_catalog(
        cls,
        engine: Engine,
        catalog: Catalog,
        source: str,
        budget: Guarantee,
        ledger: str | Path | None,
        selection_delta: float | None,
        rng: RandomLike | None,
    ) -> Session:
        return cls(
            engine,
            source=source,
            privacy_unit=None,
            budget=budget,
            ledger=ledger,
            rng=rng,
            selection_delta=selection_delta,
            _catalog=catalog,
        )

    # ------------------------------------------------------------------ tables
    @property
    def tables(self) -> dict[str, dict[str, Any]]:
        """A Session over several tables: ``{name: {"public": bool, "privacy_unit":
        column or None, "columns": {column: type}}}`` (public information); ``{}`` for
        a single-table Session."""
        if self._catalog is None:
            return {}
        return {
            name: {"public": info.public, "privacy_unit": info.unit, "columns": dict(info.schema)}
            for name, info in self._catalog.tables.items()
        }

    def _require_catalog(self, owner: str) -> Catalog:
        if self._catalog is None:
            raise InvalidParameter(
                f"{owner}: this Session has one table and no public tables; open a Session over "
                "several tables, Session.from_tables(..., public={...}), to use public tables."
            )
        return self._catalog

    def public_query(self, sql: str) -> Any:
        """The exact answer of one ``SELECT`` over the public tables, as a pandas
        DataFrame. Spends nothing: public tables are public. Private tables and files
        cannot be read (the statement runs on a connection holding the public tables
        only, external access off)."""
        import pandas as pd  # type: ignore[import-untyped]

        catalog = self._require_catalog("Session.public_query")
        columns, rows = catalog.public_query(sql, "Session.public_query")
        return pd.DataFrame.from_records(rows, columns=columns)

    def public_keyset(self, sql: str) -> KeySet:
        """A :class:`KeySet` of the distinct rows of one ``SELECT`` over the public
        tables (its columns named as the query names them); spends nothing."""
        owner = "Session.public_keyset"
        catalog = self._require_catalog(owner)
        columns, rows = catalog.public_query(sql, owner)
        kept = [tuple(r) for r in rows if not any(v is None or v != v for v in r)]
        if not kept:
            raise DataError(f"{owner}: the public query returned no key without NULL or NaN.")
        return KeySet.from_tuples(columns, kept)

    # ------------------------------------------------------------------ SQL
    def sql_query(self, sql: str) -> SqlStatement:
        """Translate a ``SELECT WITH DIFFERENTIAL_PRIVACY`` statement into the
        :class:`Query` the Python builder would make, and its budget (docs/sql.md).
        Reads the public schema only; runs nothing, spends nothing."""
        from dpkit.analytics._sql_query import TableView, translate

        if self._catalog is not None:
            tables = {
                n: TableView(i.schema, i.public, i.unit) for n, i in self._catalog.tables.items()
            }
            public = self._catalog.public_names()
        else:
            tables = {"data": TableView(dict(self._schema), False, self._unit)}
            public = []

        def joined_schema(query: Query) -> Mapping[str, str]:
            if self._catalog is None and query.per_person_step is None:
                return dict(self._schema)
            view, _ = self._view_for(query, 0)
            return dict(view._schema)

        def typed(query: Query, derived: tuple[tuple[str, str], ...]) -> Mapping[str, str]:
            view = self
            if self._catalog is not None or query.per_person_step is not None:
                view, _ = self._view_for(query, 0)
            return view._engine.schema(derived)

        return translate(
            sql,
            tables,
            single=self._catalog is None,
            joined_schema=joined_schema,
            public_names=public,
            typed=typed,
        )

    def sql(
        self,
        sql: str,
        *,
        budget: object = None,
        confidence: float | None = None,
        deadline: float | None = None,
    ) -> Any:
        """Run a ``SELECT WITH DIFFERENTIAL_PRIVACY`` statement (GoogleSQL's syntax;
        docs/sql.md) on the one path of :meth:`evaluate`.

        The statement's ``OPTIONS (epsilon = ..., delta = ...)`` is the query's budget,
        charged to this Session; ``budget=`` replaces it. ``EXPLAIN SELECT ...``
        returns :meth:`explain_sql`'s :class:`Explanation` and spends nothing. A plain
        ``SELECT`` over public tables only returns their exact rows (a pandas
        DataFrame), free. Every refusal -- a parse error, an unknown column, bounds
        missing, a non-DP SELECT over a private table -- is a
        :class:`~dpkit.errors.SqlError` with its line and column, before anything is
        spent.

        Returns
        -------
        QueryResult, Explanation or pandas.DataFrame
            As above.
        """
        statement = self.sql_query(sql)
        if statement.query is None:
            if statement.explain:
                raise SqlError("EXPLAIN applies to SELECT WITH DIFFERENTIAL_PRIVACY.", sql, 0)
            return self.public_query(statement.text)
        chosen = self._sql_budget(statement, budget)
        level = confidence or statement.confidence or 0.95
        if statement.explain:
            return self.explain(statement.query, budget=chosen, confidence=level)
        result = self.evaluate(statement.query, budget=chosen, confidence=level, deadline=deadline)
        try:
            # Post-processing of the released values only (names, square roots, ORDER
            # BY, LIMIT), after the charge: it must not lose a paid-for release.
            return finish_result(result, statement)
        except Exception:
            note = "ORDER BY/LIMIT/renames could not be applied; the release is unordered."
            return dataclasses.replace(result, notes=(*result.notes, note))

    def explain_sql(
        self, sql: str, *, budget: object = None, confidence: float | None = None
    ) -> Explanation:
        """:meth:`explain` of a SQL statement (with or without ``EXPLAIN``): the plan,
        the noise and the accuracy, without spending."""
        statement = self.sql_query(sql)
        if statement.query is None:
            raise SqlError(
                "Only SELECT WITH DIFFERENTIAL_PRIVACY statements have a private plan.", sql, 0
            )
        level = confidence or statement.confidence or 0.95
        return self.explain(
            statement.query, budget=self._sql_budget(statement, budget), confidence=level
        )

    @staticmethod
    def _sql_budget(statement: SqlStatement, budget: object) -> object:
        if budget is not None:
            return budget
        if statement.budget is None:
            raise SqlError(
                "The statement has no budget: add OPTIONS (epsilon = ..., delta = ...) or "
                "pass budget=.",
                statement.text,
                0,
            )
        return statement.budget

    def _view_for(self, query: Query, salt: int) -> tuple[Session, Query]:
        """The Session a query runs on, and the query for it: this Session for a
        single-table query; for a query over several tables, a view of this Session
        (same ledger, scope, budget and randomness) whose engine reads the joined view
        of ``dpkit.analytics._joins``, with the query's public key sets read."""
        if not isinstance(query, Query):
            raise InvalidParameter.for_parameter(
                "query", "Session.evaluate", "a dpkit.analytics.Query", query
            )
        # The schema caches live in this Session's dictionary before any view is copied
        # from it, so that every view shares them (_schema_cache).
        self.__dict__.setdefault("_joined_schema_caches", {})
        self.__dict__.setdefault("_person_schema_caches", {})
        if self._catalog is None:
            if query.table is not None or query.joins:
                raise InvalidParameter(
                    "Session.evaluate: this Session has one table; Query.from_table and "
                    "Query.join need a Session over several tables (Session.from_tables)."
                )
            if isinstance(query.keys, TableKeys):
                self._require_catalog("KeySet.from_table")
            if query.per_person_step is None:
                return self, query
            return self._per_person_view(query, None)
        view_sql, schema = joined_view(query, self._catalog, self._engine, self._partitions, salt)
        keys = query.keys
        if isinstance(keys, TableKeys):
            keys = self._catalog.keyset(keys.table, keys.columns, "KeySet.from_table")
        view = copy.copy(self)
        neutral, schemas = self._joined_schemas(query, view_sql, salt)
        view._engine = self._engine.with_relation(  # type: ignore[attr-defined]
            view_sql.relation, view_sql.params, schemas
        )
        # The engine binds the joined view now (names, types; no row read), before
        # any charge, and its DESCRIBE is the view's schema.
        view._schema = view._engine.schema()
        if list(view._schema) != list(schema):
            raise InternalError("the joined view's columns are not those planned; a bug.")
        view._unit = view_sql.unit
        view._partitions = ()  # applied inside the joined view, table by table
        view._catalog = None  # the view is one relation (its schema and unit above)
        view._view = view_sql
        stripped = dataclasses.replace(query, table=None, joins=(), keys=keys)
        if query.per_person_step is None:
            return view, stripped
        return view._per_person_view(stripped, view_sql, neutral)

    def _joined_schemas(
        self, query: Query, view_sql: JoinedView, salt: int
    ) -> tuple[tuple[str, str], dict[tuple[tuple[str, str], ...], dict[str, str]]]:
        """The schema cache of the joined view of ``query``, the same for every salt,
        and its key (the view's SQL and parameters at salt 0).

        The salt enters a joined view only through the keyed hash that orders each
        person's rows for the join's truncation (:mod:`._joins`): the view's columns,
        their types and those of derived columns over them are the same for every
        salt. So the view drawn with the query's salt reuses what was described of it
        with salt 0 (while the SQL statement was translated) instead of describing it
        again. Keyed by the view's SQL at salt 0, which holds every other input (the
        tables, joins, partitions and parameters). Nothing is skipped that the charge
        relies on: every statement that reads rows is still bound before the charge
        (``SqlEngine.prepare``), with the query's own salt."""
        assert self._catalog is not None
        neutral = view_sql
        if salt != 0:
            neutral, _ = joined_view(query, self._catalog, self._engine, self._partitions, 0)
        key = (neutral.relation, repr(neutral.params))
        return key, self._schema_cache("_joined_schema_caches", key)

    def _schema_cache(
        self, name: str, key: tuple[str, str]
    ) -> dict[tuple[tuple[str, str], ...], dict[str, str]]:
        """The schema cache stored under ``key`` in this Session's dictionary ``name``
        (shared by its views, which are shallow copies), the oldest of more than
        :data:`_MAX_JOINED_SCHEMAS` dropped."""
        caches = self.__dict__.setdefault(name, {})
        if key not in caches:
            if len(caches) >= _MAX_JOINED_SCHEMAS:
                caches.pop(next(iter(caches)))  # the oldest first
            caches[key] = {}
        schemas: dict[tuple[tuple[str, str], ...], dict[str, str]] = caches[key]
        return schemas

    def _per_person_view(
        self, query: Query, joined: JoinedView | None, neutral: tuple[str, str] | None = None
    ) -> tuple[Session, Query]:
        """A view of this Session (same ledger, scope, budget and randomness) whose
        engine reads the per-person rows of ``query`` (``dpkit.analytics._per_person``),
        and the query without its per-person step. The relation is bound by the engine
        here (names and types; no row read), before any charge.

        Its schema cache is shared by every view of the same per-person rows: keyed by
        the relation's SQL and parameters over one table (no salt enters them), and
        over a joined view by the joined view's key at salt 0 (``neutral``, from
        :meth:`_joined_schemas`) with the step and the unit, since the salt orders the
        join's truncation only and leaves the columns and types alone. The SQL front
        door described the same rows twice while translating a statement and once
        more to run it (issue 30: 4 of TPC-H Q18's 6 DESCRIBEs, ~0.07 s). Every
        statement that reads rows is still bound before the charge."""
        step = query.per_person_step
        assert step is not None
        # The per-row cost caps hold for the whole query, the step and what reads its
        # rows together: each aggregate's output costs what its argument does (a max of
        # a concatenation is as wide), wherever a later expression names it (found by
        # the review: each part alone within the caps, together past them).
        arguments = [(name, e) for name, _, e in step.aggregates if e is not None]
        check_query_cost(
            [*step.derived, *arguments, *query.derived],
            [*step.filters, *query.filters],
            "Query.per_person",
        )
        relation, params = person_relation(
            self._engine, self._schema, self._unit, step, self._partitions
        )
        if joined is None:
            key = (relation, repr(params))
        else:
            assert neutral is not None
            key = (repr(neutral), repr((step, self._unit)))
        schemas = self._schema_cache("_person_schema_caches", key)
        view = copy.copy(self)
        view._engine = self._engine.with_relation(  # type: ignore[attr-defined]
            relation,
            params,
            schemas,
            one_row_per_unit=self._unit is not None
            and one_row_per_unit(self._engine, self._schema, self._unit, step),
        )
        view._schema = view._engine.schema()
        expected = [self._unit, *step.by, *(name for name, _, _ in step.aggregates)]
        if [c.casefold() for c in view._schema] != [str(c).casefold() for c in expected]:
            raise InternalError("the per-person rows' columns are not those planned; a bug.")
        view._partitions = ()  # applied to the rows before the step
        view._catalog = None
        view._view = PersonRows(
            str(self._unit),
            step.by,
            tuple(step.aggregates),
            joined,
        )
        return view, dataclasses.replace(query, per_person_step=None)

    # ------------------------------------------------------------------ budget
    @property
    def budget(self) -> Guarantee:
        """The Session's total budget."""
        return self._kind.total

    @property
    def remaining(self) -> Guarantee:
        """What remains, rounded down: a PureDP for PureDP budgets, a ZCDP otherwise (for
        ApproxDP budgets the zCDP part; see :attr:`remaining_selection_delta`)."""
        spent = self._ledger.spent(self._scope)
        left = tuple(b - s for b, s in zip(self._kind.amount, spent, strict=True))
        if self._kind.name == "approx":  # the zCDP part that still fits the filter's rule
            left = (self._kind.rho_left(spent), *left[1:])
        return self._kind.as_guarantee(left, round_up=False)

    @property
    def spent(self) -> Guarantee:
        """What was spent so far (rounded up), in the same currency as :attr:`remaining`
        (ApproxDP Sessions: the rho part; pure epsilons charged at face value are in
        :attr:`history` and :attr:`remaining_pure`)."""
        return self._kind.as_guarantee(self._ledger.spent(self._scope), round_up=True)

    @property
    def remaining_selection_delta(self) -> float:
        """Delta left for private key selection (ApproxDP budgets; 0 otherwise)."""
        if self._kind.name != "approx":
            return 0.0
        spent = self._ledger.spent(self._scope)
        return float(max(Fraction(0), self._kind.amount[1] - spent[1]))

    @property
    def remaining_approx(self) -> ApproxDP | None:
        """ApproxDP Sessions: what :attr:`remaining` (a zCDP rho) is worth as
        ``ApproxDP(eps, delta)`` at the Session's conversion delta -- the largest
        ApproxDP query budget of that delta that still fits (epsilon rounded up, so
        it never overstates what is left by more than a rounding). None otherwise."""
        if self._kind.name != "approx":
            return None
        spent = self._ledger.spent(self._scope)
        left = self._kind.rho_left(spent)
        return self._kind.as_approx(Fraction(fraction_down(left)))

    @property
    def remaining_pure(self) -> PureDP | None:
        """ApproxDP Sessions: the largest ``PureDP`` query budget that still fits (its
        epsilon charged at face value, or in rho when that allows more; rounded down).
        Four ``PureDP(0.5)`` queries fit in ``ApproxDP(2, 1e-6)``. None otherwise."""
        if self._kind.name != "approx" or not isinstance(self._kind.rule, PureApproxZCDPFilter):
            return None
        return PureDP(self._kind.rule.pure_left(self._ledger.spent(self._scope)))

    @property
    def history(self) -> SpendHistory:
        """Every committed spend of this Session (its scope of the ledger), oldest first:
        a sequence of records, and ``.to_pandas()`` for one row per spend (time, query
        in words, charge in the budget's units; ``dpkit.analytics._history``)."""
        return SpendHistory(self._ledger.history(self._scope), self._kind)

    @property
    def privacy_unit(self) -> str | None:
        """The privacy unit column (None: one row per person). A Session over several
        tables: the unit column of its private tables if they all name it alike."""
        if self._catalog is not None:
            units = {info.unit for info in self._catalog.tables.values() if not info.public}
            return units.pop() if len(units) == 1 else None
        return self._unit

    @property
    def source(self) -> str:
        """A public description of the data source (e.g. ``file:/path/x.parquet``)."""
        return self._source

    @property
    def columns(self) -> dict[str, str]:
        """The table's public schema: column name -> type. A Session over several
        tables: its only private table's (``{}`` with several; see :attr:`tables`)."""
        if self._catalog is not None:
            names = self._catalog.private_names()
            if len(names) != 1:
                return {}
            return dict(self._catalog.tables[names[0]].schema)
        return dict(self._schema)

    # ------------------------------------------------------------------ queries
    def _compile(self, query: Query, budget: object, salt: int) -> CompiledQuery:
        """Compile ``query`` at ``budget`` (step 1; what tests and audits inspect)."""
        return self._compile_budgeted(query, budget, salt)[0]

    def _compile_budgeted(
        self,
        query: Query,
        budget: object,
        salt: int,
        *,
        fixed: tuple[QueryBudget, float | None] | None = None,
    ) -> tuple[CompiledQuery, QueryBudget]:
        """Compile ``query`` (step 1); ``fixed`` reuses a first compilation's budget."""
        owner = "Session.evaluate"
        if fixed is not None:
            amount, delta = fixed
        else:
            spent = self._ledger.spent(self._scope)
            amount = self._kind.query_amount(budget, spent, owner)
            delta = None
            if query.selection is not None and self._kind.name == "approx":
                left = self._kind.amount[1] - spent[1]
                delta = query.selection.delta
                if delta is None:
                    delta = float(left / 2)
                    if delta <= 0:
                        delta = None
        if amount.noise != self._kind.noise and query.selection is not None:
            raise InvalidParameter(
                f"{owner}: private key selection in this Session needs a ZCDP or ApproxDP "
                "query budget, or a share of the Session budget (a PureDP query budget runs "
                "Laplace noise, which the selection's delta accounting does not cover)."
            )
        compiled = compile_query(
            query,
            kind=self._kind,
            amount=amount.share,
            noise_kind=amount.noise,
            selection_delta=delta,
            schema=self._schema,
            schema_of=self._engine.schema,
            unit=self._unit,
            salt=salt,
            partitions=self._partitions,
        )
        charge = (amount.charge, *compiled.charge[1:])
        if self._kind.name == "approx":
            charge = self._kind.vector(amount.charge, compiled.charge[1], amount.pure)
        return dataclasses.replace(compiled, charge=charge), amount

    def explain(
        self,
        query: Query,
        *,
        budget: object,
        confidence: float = 0.95,
        group_size: int | None = None,
    ) -> Explanation:
        """What ``query`` would run at ``budget``, and its expected error. Spends nothing.

        Shows, per statistic, the mechanism, its sensitivity, noise scale, standard
        deviation and confidence-interval half-width (value units), and for private key
        selection the threshold and the delta it costs. Uses public information only.
        For each mean or variance, ``min_group_rows`` (and a note) gives the fewest rows a
        group needs for its interval to be narrower than its bounds; it warns
        (:class:`~dpkit.analytics.SmallGroupWarning`) when ``group_size`` (the rows you
        expect per group: your guess, nothing is read) is smaller, or, with keys
        selected privately, when a group at the threshold cannot hold that many rows.
        """
        if group_size is not None and (
            isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1
        ):
            raise InvalidParameter.for_parameter(
                "group_size", "Session.explain", "None or an int >= 1", group_size
            )
        view, query = self._view_for(query, salt=0)
        compiled = view._compile(query, budget, salt=0)
        explanation = explain(compiled, query, view._kind, confidence, group_size)
        if view._view is None:
            return explanation
        return dataclasses.replace(explanation, source=view._view.lines())

    def evaluate(
        self,
        query: Query,
        *,
        budget: object,
        confidence: float = 0.95,
        deadline: float | None = None,
    ) -> QueryResult:
        """Run ``query`` privately, charging ``budget`` to the Session.

        Parameters
        ----------
        query:
            A :class:`~dpkit.analytics.Query`.
        budget:
            The query's budget, split between its aggregations by their weights (see
            docs/analytics.md): a share in (0, 1] of the Session's total budget (a float
            or a :class:`fractions.Fraction`), ``"remaining"`` (all that is left), or a
            guarantee. A PureDP Session takes ``PureDP``; a ZCDP or ApproxDP Session
            takes ``ZCDP``, ``ApproxDP(eps, delta)`` (charged the largest rho whose
            zCDP guarantee implies it; Gaussian noise) and ``PureDP(eps)`` (Laplace
            noise, charged the rho ``eps tanh(eps / 2)`` of an eps-DP query). A budget
            that exceeds what remains by at most a relative 1e-12 of the Session's
            total (equal float splits: ten times ``PureDP(0.1)`` in ``PureDP(1.0)``) is
            rounded *down* to what remains, and the noise is calibrated for that.
        confidence:
            Level of the confidence intervals reported, in (0, 1).
        deadline:
            Optional seconds (a public parameter): the call returns exactly this long
            after it started, whatever the data, so the time of an answer says nothing
            about the rows ("predictable transactions", Haeberlen, Pierce & Narayan,
            USENIX Security 2011). A query still running at the deadline is interrupted
            and fails closed (see Raises): choose a deadline well above the query's
            usual time.

        Returns
        -------
        QueryResult
            ``.dataframe`` (pandas): group keys, and per aggregation the estimate, its
            standard error and a confidence interval; ``.releases``: one
            :class:`~dpkit.Release` per noisy statistic (mechanism, event, guarantee).

        Raises
        ------
        InvalidParameter, DataError
            The query or budget is invalid for this schema (nothing spent).
        BudgetExceeded
            The budget does not fit (nothing spent).
        EngineError
            Before the charge: a statement does not bind (a schema-level message;
            nothing spent).
        SessionLocked
            A failure after the charge (out of memory, a disk error, an engine bug, a
            missed deadline): the Session *fails closed* -- the rest of this scope's
            budget is charged, the failure is recorded in the ledger, and this and every
            later query on the ledger raise SessionLocked, naming only the time. Also
            raised by every query on a ledger where this happened before.

        Privacy
        -------
        The release is ``budget``-private w.r.t. the Session's privacy unit (and, with
        private key selection, costs its delta). Whether this call fails, and what it
        raises, depends on the schema and public parameters only (module docstring).
        """
        started = time.monotonic()
        if not (isinstance(confidence, float) and 0.0 < confidence < 1.0):
            raise InvalidParameter.for_parameter(
                "confidence", "Session.evaluate", "a float in (0, 1)", confidence
            )
        checked_deadline = check_deadline(deadline, "Session.evaluate")
        self._check_unlocked()
        random = self._random.spawn(1)[0]
        salt = salt_from(random.bytes(32))
        # 0. the table or joined view the query reads (public information only).
        view, stripped = self._view_for(query, salt)
        result = view._evaluate(
            stripped, budget, confidence, checked_deadline, started, random, salt, repr(query)
        )
        if view._view is None:
            return result
        return dataclasses.replace(result, notes=(view._view.summary(), *result.notes))

    def _evaluate(
        self,
        query: Query,
        budget: object,
        confidence: float,
        checked_deadline: float | None,
        started: float,
        random: Random,
        salt: int,
        described: str,
    ) -> QueryResult:
        """:meth:`evaluate` on the table or joined view this Session reads
        (``described``: the query as the analyst wrote it, for the ledger)."""
        # 1. compile (public information only).
        compiled, amount = self._compile_budgeted(query, budget, salt)
        threshold = None
        if compiled.selection_noise is not None:
            assert compiled.selection_delta is not None
            threshold, _ = selection_threshold(compiled.selection_noise, compiled.selection_delta)
        # A cheap early refusal (the charge below re-checks atomically).
        self._check_fits(compiled.charge)
        # 2. prepare: bind every statement without reading a row. The aggregate of a
        # query with private bounds is bound with the search range as its bounds (the
        # same statement shape as with the bounds released later).
        if compiled.bounds_plan is not None:
            self._engine.prepare(compiled.bounds_plan, compiled.bound_orders)
        self._engine.prepare(compiled.plan, compiled.orders)
        # ... and run every mechanism once on data-free inputs (public parameters only).
        rehearse(compiled, confidence, random.spawn(1)[0])
        # 3. charge (atomic; refuses an overspend). From here on, nothing may fail: a
        # failure fails closed (dpkit.analytics._fail_closed).
        description = json.dumps({"query": described[:2000], "budget": repr(budget)})

        # 4. run and 5. release.
        def run_and_release() -> QueryResult:
            if self._after_commit is not None:
                self._after_commit()
            histograms = [self._engine.histograms(compiled.plan, o) for o in compiled.orders]
            if not compiled.bound_orders:
                exact = self._engine.aggregate(compiled.plan) if compiled.plan.statistics else {}
                return release(compiled, query, exact, threshold, confidence, random, histograms)
            return self._release_staged(
                compiled, amount, query, threshold, confidence, random, histograms, salt
            )

        self._charge(compiled.charge, description)
        return run_after_charge(
            run_and_release,
            deadline=checked_deadline,
            started=started,
            interrupt=getattr(self._engine, "interrupt", None),
            fail_closed=self._fail_closed,
        )

    # ------------------------------------------------------------------ failing closed
    def _check_unlocked(self) -> None:
        """Refuse everything once a query of this ledger has failed after its charge."""
        failure = self._ledger.failure()
        if failure is not None:
            raise locked_error(*failure)

    def _charge(self, charge: tuple[Fraction, ...], description: str) -> None:
        """Step 3. A refusal by the filter (BudgetExceeded) spends nothing; any other
        failure of the ledger may have come after the commit, so it fails closed."""
        failed = False
        try:
            self._ledger.spend(self._scope, charge, description, rule=self._kind.rule)
        except BudgetExceeded:
            raise
        except BaseException:
            failed = True
        if failed:
            raise self._fail_closed()

    def _fail_closed(self) -> SessionLocked:
        try:
            when = self._ledger.fail_closed(self._scope)
        except BaseException:  # the lock holds in memory regardless
            failure = self._ledger.failure()
            when = failure[0] if failure is not None else time.time()
        return locked_error(when, self._scope)

    def _release_staged(
        self,
        compiled: CompiledQuery,
        amount: QueryBudget,
        query: Query,
        threshold: int | None,
        confidence: float,
        random: Random,
        histograms: list[dict[tuple[Any, ...], dict[int, int]]],
        salt: int,
    ) -> QueryResult:
        """After the charge: release the private bounds, then the clamped aggregate.

        The bounds are post-processing of their quantile releases, so compiling the
        aggregate with them (grids and noise scales) uses no further privacy budget;
        the aggregate's statistics were already charged at their share.
        """
        assert compiled.bounds_plan is not None
        released: dict[str, tuple[float, float]] = {}
        bound_releases = []
        for spec in compiled.bound_orders:
            hist = self._engine.histograms(compiled.bounds_plan, spec)
            pair = release_order(spec, hist.get((), {}), random, confidence)
            bound_releases.extend(pair)
            released[spec.aggregation] = released_bounds(spec, pair[0].value, pair[1].value)
        clamped = tuple(
            dataclasses.replace(a, bounds=released[a.name]) if a.name in released else a
            for a in query.aggregations
        )
        final_query = dataclasses.replace(query, aggregations=clamped)
        final, _ = self._compile_budgeted(
            final_query, None, salt, fixed=(amount, compiled.selection_delta)
        )
        if final.charge != compiled.charge or final.plan.salt != compiled.plan.salt:
            raise InternalError("a staged query changed its charge; this is a bug.")
        exact = self._engine.aggregate(final.plan) if final.plan.statistics else {}
        result = release(final, final_query, exact, threshold, confidence, random, histograms)
        n = len(next(iter(result.columns.values()))) if result.columns else 1
        columns = dict(result.columns)
        notes = list(result.notes)
        for name, (low, high) in released.items():
            columns[f"{name}_clamp_low"] = np.full(n, low)
            columns[f"{name}_clamp_high"] = np.full(n, high)
            notes.append(f"{name}: clamped to privately released bounds [{low!r}, {high!r}].")
        return dataclasses.replace(
            result,
            columns=columns,
            releases=(*bound_releases, *result.releases),
            notes=tuple(notes),
        )

    def _check_fits(self, charge: tuple[Fraction, ...]) -> None:
        spent = self._ledger.spent(self._scope)
        if not self._kind.fits(spent, charge):
            raise BudgetExceeded(
                "Cannot answer the query without exceeding the privacy budget. "
                f"Requested: {self._kind.show(charge)}. Remaining: "
                f"{self._kind.show_left(spent)}. "
                "Nothing was spent: ask for a smaller budget or start a new Session.",
            )

    # ------------------------------------------------------------------ synthesis
    def synthesize(
        self,
        *,
        budget: object,
        method: str = "aim",
        columns: Sequence[str] | None = None,
        domains: Mapping[str, object] | None = None,
        rows: int | None = None,
        max_rows: int = 1,
        workload: Sequence[Sequence[str]] | None = None,
        source: Query | None = None,
        max_model_mb: float = 80.0,
        iterations: int = 1000,
        progress: Callable[[str], None] | None = None,
        mst_split: Sequence[float] | None = None,
    ) -> SyntheticData:
        """A private synthetic table by MST or AIM, charged once to this Session.

        Parameters
        ----------
        budget:
            The run's budget, as for :meth:`evaluate` (a share, ``"remaining"``, or a
            ``ZCDP``/``ApproxDP`` guarantee); a ZCDP or ApproxDP Session is needed.
        method:
            ``"aim"`` (McKenna, Mullins, Sheldon & Miklau, PVLDB 2022; adaptive,
            workload-aware) or ``"mst"`` (McKenna, Miklau & Sheldon 2021; a spanning tree
            of pairs, faster).
        columns:
            Columns to synthesize (default: all but the privacy unit).
        domains:
            Public domain per column: a list of values (or a one-column
            :class:`KeySet`), ``(low, high)`` bounds for numbers, dates and timestamps,
            or :class:`dpkit.synth.Categories` / :class:`dpkit.synth.Bins` (bins, and
            whether NULL is kept as a value). Booleans need none; every other column
            does. Domains must not come from the private data.
        rows:
            Rows to sample (default: the model's noisy estimate of the row count).
        max_rows:
            With a privacy unit: the most rows one person contributes (the rest of a
            person's rows are dropped, chosen by a keyed hash).
        workload:
            AIM's workload: the marginals to be accurate on (default: every pair).
        source:
            In a Session over several tables: the table and joins to synthesize,
            ``Query.from_table(name).join(...)``.
        max_model_mb, iterations:
            AIM's model-size limit (the paper's 80 MB) and the fitting iterations.
        progress:
            Called with a line of text at each step (AIM runs for minutes).
        mst_split:
            MST only: the shares of its budget for (1-way marginals, selection of the
            tree's pairs, 2-way marginals), three positive numbers adding up to 1.
            Default ``(0.4, 0.2, 0.4)`` (``benchmarks/synth_split_study.py``); the
            paper's split is ``(1/3, 1/3, 1/3)``. The guarantee is the same either way.

        Returns
        -------
        SyntheticData
            ``.data`` (pandas), ``.guarantee``, ``.measurements`` (the noisy
            marginals), ``.fidelity()`` (synthetic vs measured: private), ``.to_csv``,
            ``.to_parquet``.

        Privacy
        -------
        ``ZCDP(rho)`` for the run's ``rho``, w.r.t. the Session's privacy unit: every
        marginal is measured with discrete Gaussian noise calibrated to the L2
        sensitivity ``max_rows``, every selection is an exponential mechanism, and the
        steps' exact costs add to at most ``rho`` (adaptive composition; see
        :mod:`dpkit.synth`). The ledger is charged once, before any row is read;
        refusals depend on the schema and public parameters only, and a failure after
        the charge fails closed, as for :meth:`evaluate`.
        """
        from dpkit.analytics._synthesis import synthesize

        return synthesize(
            self,
            budget=budget,
            method=method,
            columns=columns,
            domains=domains,
            rows=rows,
            max_rows=max_rows,
            workload=workload,
            source=source,
            max_model_mb=max_model_mb,
            iterations=iterations,
            progress=progress,
            mst_split=mst_split,
        )

    def explain_synthesis(
        self,
        *,
        budget: object,
        method: str = "aim",
        columns: Sequence[str] | None = None,
        domains: Mapping[str, object] | None = None,
        rows: int | None = None,
        max_rows: int = 1,
        workload: Sequence[Sequence[str]] | None = None,
        source: Query | None = None,
        mst_split: Sequence[float] | None = None,
    ) -> str:
        """What :meth:`synthesize` would measure, at which noise, and its charge, as
        text; spends nothing (the same checks run: a refusal here is one there)."""
        from dpkit.analytics._synthesis import plan_synthesis

        plan = plan_synthesis(
            self,
            budget=budget,
            method=method,
            columns=columns,
            domains=domains,
            rows=rows,
            max_rows=max_rows,
            workload=workload,
            source=source,
            max_model_mb=80.0,
            iterations=1000,
            salt=0,
            mst_split=mst_split,
        )
        self._check_fits(plan.charge)
        return plan.describe()

    def _reserve(self, charge: tuple[Fraction, ...], description: str) -> Session:
        """A sub-Session over the same rows whose budget is ``charge``, charged to this
        Session once, now: one mechanism (a synthesis run) spends it through the
        sub-Session's own filter. It is ``Session.partition`` with one part and no
        split (the same concurrent-composition argument; its name is random, so every
        reserve is a new one and is charged)."""
        kind = self._kind.part(charge)
        # Named from the OS's randomness, not the Session's generator: two Sessions seeded
        # alike on one ledger must not name the same reserve (opening an existing one
        # charges nothing and would hand out a spent budget).
        name = f"{self._scope}/reserve:{secrets.token_hex(16)}"
        scope = f"{name}/run"
        failed = False
        try:
            self._ledger.open_partition(
                self._scope,
                name,
                kind.amount,
                [(scope, kind.key, kind.amount)],
                0,
                description,
                rule=self._kind.rule,
                fingerprint=self._fingerprint,
            )
        except BudgetExceeded:
            raise
        except BaseException:
            failed = True
        if failed:
            raise self._fail_closed()
        child = copy.copy(self)
        child._kind = kind
        child._scope = scope
        child._ledger.open_scope(scope, kind.key, kind.amount, self._fingerprint)
        child._random = self._random.spawn(1)[0]
        child._after_commit = None
        return child

    # ------------------------------------------------------------------ partitions
    def partition(
        self,
        column: str,
        keys: Sequence[object],
        budgets: object | Sequence[object],
        *,
        table: str | None = None,
    ) -> dict[object, Session]:
        """Sub-Sessions over the disjoint parts ``column == key``, charged in parallel.

        Parameters
        ----------
        column:
            The column to split on (not the privacy unit).
        keys:
            Public keys, each converted to the column's type first (``1`` and ``1.0``
            of an INTEGER column are one key and are refused together; ``"1"`` is
            refused: see ``dpkit.analytics._keys``).
        budgets:
            One budget for every part or one per key: a share in (0, 1] of the
            Session's total budget (for ApproxDP Sessions the part also gets that share
            of the key-selection delta), or a guarantee of the Session's currency.
            Each part is a privacy filter of its budget, rounded down to a float.

        Returns
        -------
        dict
            ``{key as given: sub-Session}``. A sub-Session sees only its part's rows, at
            every depth (a part of a part sees the rows of both), and is a Session: it
            evaluates queries, explains, and partitions further.
        table:
            In a Session over several tables: the private table holding ``column``
            (default: the only private table). Each person's part is decided on their
            rows of that table; in every private table a part sees only the persons
            assigned to it, and in ``table`` only the rows with ``column == key``.

        Privacy
        -------
        A partition is a stable transformation into disjoint parts, charged **once,
        when it is created**, the largest part budget to this Session (parallel
        composition). With a privacy unit each person belongs to one part -- the part
        of the person's row with the smallest keyed hash among the rows this Session
        sees; the person's rows in other parts are dropped from them -- so adding or
        removing a person changes one part only, and the partition as a whole is as
        private as its largest part's filter allows (the other parts, on identical
        data, are post-processing). Every part is a filter of its own budget.

        The parts and this Session may be used concurrently, in any interleaving: the
        partition is one interactive mechanism charged up front, and a privacy filter
        over non-interactive mechanisms extends to the concurrent composition of
        interactive ones for (eps, delta)-DP and Renyi DP of each fixed order, hence
        zCDP (Haney, Shoemate, Tian, Vadhan, Vyrros, Xu & Zhang, CCS 2023; Vadhan &
        Wang 2021 for pure DP with fixed parameters). This is OpenDP's choice; Tumult
        Analytics instead locks the parent until the parts are closed.

        A partition is identified by its column, canonical keys and part budgets:
        calling ``partition`` again with the same three (in this process, or on a
        reopened persistent ledger) returns the same parts and charges nothing; any
        other partition -- other keys, other budgets -- is a new one and is charged
        again. So is one opened by a dpkit whose keyed hash differs (its version is
        part of the identity): persons are assigned to parts by that hash.
        """
        self._check_unlocked()
        owner = "Session.partition"
        schema, unit, part_table = self._schema, self._unit, None
        if self._catalog is not None:
            names = self._catalog.private_names()
            if table is None and len(names) != 1:
                raise InvalidParameter(
                    f"{owner}: this Session has several private tables ({names}); name the "
                    "one holding the column: partition(..., table=name)."
                )
            info = self._catalog.table(table if table is not None else names[0], owner)
            if info.public:
                raise InvalidParameter(
                    f"{owner}: {info.name!r} is public; a partition splits the persons of a "
                    "private table."
                )
            schema, unit, part_table = info.schema, info.unit, info.name
        elif table is not None:
            raise InvalidParameter(
                f"{owner}: table= applies to a Session over several tables (from_tables)."
            )
        plan = plan_partition(
            self._kind, schema, unit, self._scope, column, keys, budgets, part_table
        )
        salt = self._ledger.open_partition(
            self._scope,
            plan.name,
            plan.charge,
            [(s, k.key, k.amount) for s, k in zip(plan.scopes, plan.kinds, strict=True)],
            salt_from(self._random.spawn(1)[0].bytes(32)),
            plan.description,
            rule=self._kind.rule,
            fingerprint=self._fingerprint,
        )
        parts: dict[object, Session] = {}
        for given, key, scope, kind in zip(
            plan.given, plan.keys, plan.scopes, plan.kinds, strict=True
        ):
            part = copy.copy(self)
            part._kind = kind
            part._scope = scope
            # Re-checks the stored budget against this one (a bug would surface here).
            part._ledger.open_scope(scope, kind.key, kind.amount, self._fingerprint)
            part._random = self._random.spawn(1)[0]
            part._partitions = (
                *self._partitions,
                PartScope(str(column), key, salt, part_table),
            )
            part._after_commit = None
            parts[given] = part
        return parts

    def __repr__(self) -> str:
        approx, pure = self.remaining_approx, self.remaining_pure
        also = "" if approx is None else f" (worth {approx!r})"
        if pure is not None:
            also += f", or {pure!r} for a pure query"
        return (
            f"Session(privacy_unit={self._unit!r}, budget={self.budget!r}, "
            f"remaining={self.remaining!r}{also})"
        )
