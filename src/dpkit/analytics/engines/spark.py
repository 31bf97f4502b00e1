"""The Spark engine: dpkit's SQL (:mod:`._sql`) on a Spark DataFrame.

The statements are the DuckDB engine's, in Spark's spelling (the dialect attributes of
:class:`SparkEngine`): the same contribution bounding, fixed-point integer sums, keyed
hash and grid histograms, computed on the cluster; only per-group aggregates come back
to the driver. For the same rows, salt and plan both engines return the same integers
(tests/engines/test_parity.py).

No data-dependent failure (docs/analytics.md, "Threat model"): Spark 4 runs in ANSI
mode by default, where a bad CAST, a division by zero or an integer overflow raises on
the row that causes it -- a one-bit oracle on row values. dpkit's queries run in a
session of their own (``newSession()``: the same cluster and cache, its own SQL
configuration) with ``spark.sql.ansi.enabled=false``, and user expressions are
translated to the ``try_`` forms (``TRY_CAST``, ``try_add``, ``try_divide``...), which
return NULL where DuckDB's ``TRY`` does. The caller's own session and configuration
are untouched. Statements are bound (analysed, no row read) before the Session charges
anything; Spark's errors while reading rows are reported by class only, and Spark's
structured query-context log (which prints failing SQL with values) is switched off
for dpkit's session.

Differences from DuckDB that the user can see: integer overflow in an expression makes
only the failing operation NULL (DuckDB's ``TRY`` makes the whole expression NULL);
``min_by``'s ``n`` stops at 10^5, so ``max_rows`` above it uses the window branch.
"""

from __future__ import annotations

import functools
import os
import shutil
import uuid
from collections.abc import Sequence
from typing import Any

from dpkit.analytics.engines._hash import HashDialect
from dpkit.analytics.engines._sql import SqlEngine
from dpkit.errors import DataError, EngineError, InvalidParameter

__all__ = ["SparkEngine", "spark_session", "spark_type"]

#: Spark's simple type names -> dpkit's type vocabulary (DuckDB's names).
_TYPES = {
    "tinyint": "TINYINT",
    "smallint": "SMALLINT",
    "int": "INTEGER",
    "bigint": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "string": "VARCHAR",
    "boolean": "BOOLEAN",
    "date": "DATE",
    "timestamp": "TIMESTAMP WITH TIME ZONE",  # an instant, shown in the session time zone
    "timestamp_ntz": "TIMESTAMP",
    "binary": "BLOB",
}


def spark_type(simple: str) -> str:
    """dpkit's name for a Spark type (``simpleString()``)."""
    name = simple.lower()
    if name in _TYPES:
        return _TYPES[name]
    if name.startswith("decimal"):
        return name.upper()
    if name.startswith(("varchar", "char")):
        return "VARCHAR"
    return name.upper()


def _require_pyspark(owner: str) -> Any:
    try:
        import pyspark.sql
    except ImportError:
        raise InvalidParameter(
            f"{owner}: the Spark engine needs PySpark: pip install 'dpkit[spark]'."
        ) from None
    return pyspark.sql


def spark_session(owner: str = "dpkit") -> Any:
    """The active SparkSession, or a local one started now (``local[*]``).

    Raises
    ------
    InvalidParameter
        If PySpark is not installed, or Java (which Spark runs on) is not found.
    """
    sql = _require_pyspark(owner)
    active = sql.SparkSession.getActiveSession()
    if active is not None:
        return active
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        raise InvalidParameter(
            f"{owner}: Spark runs on Java, and no Java was found (no JAVA_HOME, no `java` "
            "on PATH). Install a Java 17 runtime (Debian/Ubuntu: apt install "
            "openjdk-17-jre-headless) or set JAVA_HOME."
        )
    cores = os.cpu_count() or 2
    return (
        sql.SparkSession.builder.master("local[*]")
        .appName("dpkit")
        .config("spark.ui.enabled", "false")
        # Spark's default of 200 shuffle partitions is for clusters; one machine's
        # cores are enough and much faster on tables that fit one machine.
        .config("spark.sql.shuffle.partitions", str(2 * cores))
        .getOrCreate()
    )


_INTEGER_TARGETS = ("TINYINT", "SMALLINT", "INT", "BIGINT")


def _cast_source_types(sql: str, types: tuple[tuple[str, str], ...]) -> list[str | None]:
    """The type of each CAST's operand in ``sql`` (in ``find_all`` order), from SQLGlot's
    type annotation over the columns' types; None where unknown."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.optimizer.annotate_types import annotate_types
    from sqlglot.optimizer.qualify import qualify

    schema: dict[str, object] = {"__t": dict(types)}
    try:
        tree = sqlglot.parse_one(f"SELECT {sql} AS __e FROM __t", read="duckdb")
        tree = qualify(tree, schema=schema, dialect="duckdb", validate_qualify_columns=False)
        tree = annotate_types(tree, schema=schema, dialect="duckdb")
    except Exception:
        return []
    out: list[str | None] = []
    for cast in tree.find_all(exp.Cast):
        kind = cast.this.type
        out.append(None if kind is None else kind.this.name)
    return out


@functools.lru_cache(maxsize=4096)
def _translate(sql: str, types: tuple[tuple[str, str], ...] = ()) -> str:
    """A plan expression (DuckDB dialect, wrapped in TRY by dpkit.analytics._expr) in
    Spark SQL with DuckDB's meaning: the try_ forms where ANSI mode would raise, and
    DuckDB's rounding where a CAST to an integer type would truncate in Spark (a DOUBLE
    or FLOAT rounds half to even, ``bround``; a DECIMAL half away from zero, ``round``).
    ``types`` are the columns' types (dpkit's vocabulary)."""
    import sqlglot
    from sqlglot import exp

    total = {
        exp.Add: "try_add",
        exp.Sub: "try_subtract",
        exp.Mul: "try_multiply",
        exp.Div: "try_divide",
        exp.Mod: "try_mod",
    }
    tree = sqlglot.parse_one(sql, read="duckdb")
    for match in tree.find_all(exp.RegexpLike):
        # Spark compiles a pattern when it first meets it and raises on a bad one: a
        # pattern read from a row would fail on some tables only. Literals are checked
        # once at binding (SparkEngine.expression).
        if not (isinstance(match.expression, exp.Literal) and match.expression.is_string):
            raise EngineError(
                "Spark cannot run the query: a regular expression pattern must be a string "
                f"literal on the Spark engine (in {sql!r})."
            )
    sources = _cast_source_types(sql, types)
    casts = list(tree.find_all(exp.Cast))
    rounding: dict[int, str] = {}
    for cast, source in zip(casts, sources, strict=False):
        target = cast.args["to"].this.name
        if source is not None and target in _INTEGER_TARGETS:
            if source in ("DOUBLE", "FLOAT"):
                rounding[id(cast)] = "bround"
            elif source == "DECIMAL":
                rounding[id(cast)] = "round"

    def fix(node: Any) -> Any:
        if isinstance(node, exp.Try):
            return node.this
        if isinstance(node, exp.Cast):
            operand = node.this
            how = rounding.get(id(node))
            if how is not None:
                operand = exp.Anonymous(this=how, expressions=[operand])
            return exp.TryCast(this=operand, to=node.args["to"], safe=True)
        name = total.get(type(node))
        if name is not None:
            return exp.Anonymous(this=name, expressions=[node.left, node.right])
        return node

    # In place and children first (SQLGlot's transform copies the tree by default, and
    # does not descend into a node that replaced another).
    for node in list(tree.walk(bfs=False))[::-1]:
        replacement = fix(node)
        if replacement is not node:
            if node is tree:
                tree = replacement
            else:
                node.replace(replacement)
    return str(tree.sql(dialect="spark"))


def _patterns(sql: str) -> list[str]:
    """The literal patterns of the regular expressions in ``sql``."""
    if "regexp" not in sql.lower():
        return []
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql, read="duckdb")
    return [str(m.expression.this) for m in tree.find_all(exp.RegexpLike)]


class SparkEngine(SqlEngine):
    """Spark engine over one DataFrame.

    Parameters
    ----------
    dataframe:
        A ``pyspark.sql.DataFrame``. It is registered as a global temporary view
        (visible to the sessions of its Spark application) under a random name, and
        queried from a session of dpkit's own with ANSI mode off (module docstring).
    """

    # --- dialect (see SqlEngine)
    wide = "DECIMAL(38,0)"
    semi_join = "LEFT SEMI JOIN"
    explode = "explode"
    top_n_limit = 100_000  # Spark's min_by(x, key, k) takes k <= 10^5
    text = "STRING"

    def q(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def expression(self, sql: str, derived: Sequence[tuple[str, str]] = ()) -> str:
        translated = _translate(sql, tuple(self.schema(derived).items()))
        for pattern in _patterns(sql):
            self._check_pattern(pattern)
        return translated

    @functools.lru_cache(maxsize=256)  # noqa: B019 - one engine per Session, few patterns
    def _check_pattern(self, pattern: str) -> None:
        """Compile a literal pattern on one constant row: a bad pattern fails here,
        before any charge, whatever the table holds."""
        self._execute("SELECT regexp_like('', ?)", [pattern], reads_rows=True, binding=True)

    def int_div(self, a: str, b: str) -> str:
        return f"(({a}) DIV ({b}))"

    def wide_sum(self, x: str) -> str:
        # Spark's sum of BIGINT is a BIGINT, which wraps (ANSI off) past 2^63.
        return f"sum(CAST({x} AS DECIMAL(38,0)))"

    def double_array(self, values: Sequence[float]) -> tuple[str, list[Any]]:
        # Spark's parameters take scalars; the cuts are public, written as literals
        # (repr round-trips: CAST of the text is the same double).
        items = ", ".join(f"CAST('{float(v)!r}' AS DOUBLE)" for v in values)
        return f"array({items})", []

    def element(self, array: str, index: str) -> str:
        return f"element_at({array}, CAST({index} AS INT))"

    def pair(self, first: str, second: str) -> str:
        return f"struct({first}, {second})"

    def hash_dialect(self) -> HashDialect:
        return HashDialect(
            hex_to_bigint=lambda s: f"CAST(conv({s}, 16, 10) AS BIGINT)",
            date_days=lambda s: f"CAST(unix_date({s}) AS BIGINT)",
            epoch_micros=lambda s: f"unix_micros(CAST({s} AS TIMESTAMP))",
            int_div=self.int_div,
            text=self.text,
        )

    # --- the engine
    def __init__(self, dataframe: Any) -> None:
        _require_pyspark("SparkEngine")
        owner = dataframe.sparkSession
        self._spark = owner.newSession()
        self._spark.conf.set("spark.sql.ansi.enabled", "false")
        self._quiet_query_context_log()
        self._view = f"dpkit_{uuid.uuid4().hex}"
        dataframe.createOrReplaceGlobalTempView(self._view)
        database = owner.conf.get("spark.sql.globalTempDatabase", "global_temp")
        self._relation = f"{self.q(database)}.{self.q(self._view)}"
        self._schema_cache: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}

    def _quiet_query_context_log(self) -> None:
        """Spark 4 logs a failing statement's context (the SQL, and for a runtime error
        the offending value) at ERROR through this logger, whatever setLogLevel says;
        dpkit's errors say what is safe to say."""
        try:
            jvm = self._spark.sparkContext._jvm
            level = jvm.org.apache.logging.log4j.Level.OFF
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
                "SQLQueryContextLogger", level
            )
        except Exception:  # pragma: no cover - a Spark without log4j 2 (Spark Connect)
            pass

    @property
    def relation(self) -> str:
        return self._relation

    def _dataframe(self, sql: str, params: Sequence[Any]) -> Any:
        return self._spark.sql(sql, args=list(params) if params else None)

    def _execute(
        self,
        sql: str,
        params: Sequence[Any] = (),
        *,
        reads_rows: bool = True,
        binding: bool = False,
    ) -> list[tuple[Any, ...]]:
        """Run ``sql``. ``binding``: a statement over constants only (no table), whose
        errors are about the query and may be shown."""
        from pyspark.errors import AnalysisException, ParseException

        try:
            frame = self._dataframe(sql, params)
            if not reads_rows:
                frame.schema  # noqa: B018 - analysis only
                return []
            return [tuple(row) for row in frame.collect()]
        except Exception as err:
            if binding:
                raise EngineError(f"Spark cannot run the query: {_first_line(err)}") from None
            if not reads_rows and isinstance(err, AnalysisException | ParseException):
                # Analysis reads no row: the message names columns, types and functions.
                raise EngineError(f"Spark cannot run the query: {_first_line(err)}") from None
            raise EngineError(_reading_error(err)) from None

    def _bind(self, sql: str, params: Sequence[Any]) -> None:
        # Analysis resolves names, types and functions without reading the data.
        self._execute(sql, params, reads_rows=False)

    def schema(self, derived: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
        key = tuple(derived)
        if key not in self._schema_cache:
            sql, params = self._source(derived)
            try:
                fields = self._dataframe(sql, params).schema.fields
            except Exception as err:
                raise EngineError(f"Spark cannot run the query: {_first_line(err)}") from None
            self._schema_cache[key] = {
                f.name: spark_type(f.dataType.simpleString()) for f in fields
            }
        return dict(self._schema_cache[key])

    def close(self) -> None:
        """Drop the global temporary view (the DataFrame itself is the caller's)."""
        self._spark.catalog.dropGlobalTempView(self._view)


def _first_line(err: Exception) -> str:
    text = str(getattr(err, "getMessage", lambda: str(err))())
    return text.splitlines()[0] if text else type(err).__name__


def _reading_error(err: Exception) -> str:
    return (
        f"Spark failed while reading the data ({type(err).__name__}). Its message is not "
        "shown because it may quote row values; nothing was released."
    )


def read_path(spark: Any, path: str, schema: dict[str, str] | None, owner: str) -> Any:
    """A DataFrame over a Parquet or CSV file (CSV: header row, types inferred by Spark
    from the whole file unless ``schema`` names them; a malformed value is NULL)."""
    lower = path.lower()
    reader = spark.read
    try:
        if lower.endswith((".parquet", ".pq")):
            frame = reader.parquet(path)
        elif lower.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")):
            separator = "\t" if ".tsv" in lower else ","
            frame = reader.csv(
                path, header=True, inferSchema=True, sep=separator, mode="PERMISSIVE"
            )
        else:
            raise DataError(
                f"{owner}: cannot tell the format of {path!r} (expected .parquet, .pq, "
                ".csv, .csv.gz, .tsv or .tsv.gz)."
            )
    except DataError:
        raise
    except Exception as err:
        raise DataError(
            f"{owner}: Spark cannot read {path!r} ({type(err).__name__}). The message is "
            "not shown because it may quote row values."
        ) from None
    if schema:
        from pyspark.sql import functions

        missing = sorted(set(schema) - set(frame.columns))
        if missing:
            raise DataError(f"{owner}: schema= names column(s) {missing} the file does not have.")
        for column, type_name in schema.items():
            frame = frame.withColumn(column, functions.expr(f"try_cast(`{column}` AS {type_name})"))
    return frame
