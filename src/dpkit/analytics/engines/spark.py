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

The source itself must not fail either. A DataFrame keeps, in its analysed plan, the
settings of the session that built it (a ``CAST`` analysed in ANSI mode raises, whatever
the session that runs it) and may call the caller's Python UDFs: a view of it queried
from dpkit's session fails iff the one bad row passes the analyst's filter (measured:
``CAST(age_raw AS INT)`` with ``'n/a'`` on alice's row, under Spark 4.3's defaults). So
:class:`SparkEngine` first computes the DataFrame once (:func:`materialise`,
``localCheckpoint(eager=True)``: a failure is a DataError at creation, nothing spent),
and queries a plan that holds none of the caller's expressions. Only a Parquet file
opened by :func:`read_path` is read in place: its scan parses no text, the columns
``schema=`` converts use ``try_cast``, and a session whose Parquet rebase mode is
EXCEPTION (which raises on an ancient date, on some rows only) gets a copy instead.
Its every value is still read once at creation (:func:`read_every_value`, Spark's
``noop`` writer): the reader's conversion can fail on one value of an ordinary file
(a ``TIMESTAMP(MILLIS)`` of 2^62 ms, partition folders whose files disagree on a
type), which queries would meet after their charge, for some filters only.
Cost at 10^6 rows of 6 columns (local[2], a loaded 2-core machine, two runs): 4.1-5.0 s
at creation instead of 0.3-0.4 s, 134 MB of executor storage, and then 5 Session
queries in 35-37 s instead of 40-41 s (the caller's expressions are not recomputed).

Differences from DuckDB that the user can see: integer overflow in an expression makes
only the failing operation NULL (DuckDB's ``TRY`` makes the whole expression NULL);
``min_by``'s ``n`` stops at 10^5, so ``max_rows`` above it uses the window branch;
regular expressions and LIKE patterns that Java's backtracking matcher could run in
more than linear time are refused before the charge (:func:`_backtracks`,
:func:`_linear_like`: a timing side channel, issue 27). Functions whose Spark
namesake means something else are rewritten to DuckDB's meaning
(:func:`_duckdb_meaning`); the differences still open are the failing cases of
tests/adversarial/test_spark_attacks.py.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
import sys
import threading
import uuid
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dpkit.analytics._row_cost import PatternItem, parse_pattern
from dpkit.analytics.engines._hash import HashDialect
from dpkit.analytics.engines._sql import SqlEngine
from dpkit.errors import DataError, EngineError, InvalidParameter

if TYPE_CHECKING:
    from dpkit.analytics._sources import CsvOptions

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
    # Local Python workers (UDFs, pandas conversions) run `python3` from PATH unless
    # told otherwise; in a virtual environment run without activation that is another
    # interpreter, without this one's packages. Use this interpreter, unless set.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    started = (
        sql.SparkSession.builder.master("local[*]")
        .appName("dpkit")
        .config("spark.ui.enabled", "false")
        # Spark's default of 200 shuffle partitions is for clusters; one machine's
        # cores are enough and much faster on tables that fit one machine.
        .config("spark.sql.shuffle.partitions", str(2 * cores))
        .getOrCreate()
    )
    _quiet_task_failures(started)
    return started


def _quiet_task_failures(spark: Any) -> None:
    """A failing task's message can quote a row value, and Spark's executor and task
    scheduler log it at ERROR on standard error in local mode. In the Spark dpkit
    starts for the user, those loggers are off (dpkit's EngineError names the failure's
    class); a SparkSession the user started keeps the user's logging."""
    try:
        jvm = spark.sparkContext._jvm
        level = jvm.org.apache.logging.log4j.Level.OFF
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        for name in (
            "org.apache.spark.executor.Executor",
            "org.apache.spark.scheduler.TaskSetManager",
        ):
            configurator.setLevel(name, level)
    except Exception:  # pragma: no cover - a Spark without log4j 2 (Spark Connect)
        pass


_INTEGER_TARGETS = ("TINYINT", "SMALLINT", "INT", "BIGINT")
#: SQLGlot's names of the signed integer types Spark has, and their widths.
_INTEGER_BITS = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}


def _operand_types(sql: str, types: tuple[tuple[str, str], ...], kind: Any) -> list[Any]:
    """The type of the operand of each ``kind`` node (``exp.Cast``, ``exp.Neg``...) in
    ``sql`` (in ``find_all`` order), from SQLGlot's type annotation over the columns'
    types (SQLGlot DataTypes); None where unknown."""
    import sqlglot
    from sqlglot.optimizer.annotate_types import annotate_types
    from sqlglot.optimizer.qualify import qualify

    schema: dict[str, object] = {"__t": dict(types)}
    try:
        tree = sqlglot.parse_one(f"SELECT {sql} AS __e FROM __t", read="duckdb")
        tree = qualify(tree, schema=schema, dialect="duckdb", validate_qualify_columns=False)
        tree = annotate_types(tree, schema=schema, dialect="duckdb")
    except Exception:
        return []
    return [node.this.type for node in tree.find_all(kind)]


def _cast_source_types(sql: str, types: tuple[tuple[str, str], ...]) -> list[str | None]:
    """The type of each CAST's operand in ``sql`` (in ``find_all`` order)."""
    from sqlglot import exp

    return [
        None if kind is None else kind.this.name for kind in _operand_types(sql, types, exp.Cast)
    ]


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

    # Unary minus and abs: Spark's wrap at the integer types' ends with ANSI off (DuckDB
    # gives NULL), and Spark's unary minus (and abs) of a DECIMAL above ~16 digits goes
    # through a double: a wrong value, or an ArithmeticException while reading on the
    # rows whose rounded value no longer fits (found by the adversarial review). Minus
    # becomes a try_subtract from zero (exact, an integer operand's type kept, NULL on
    # overflow); abs of an integer is NULL at the type's minimum, abs of a DECIMAL drops
    # the sign of its text. Each writes its operand once (no growth with nesting).
    # Known left: Spark's round(x, -n) of an integer wraps at the type's ends.
    signs = {
        id(node): source
        for node, source in zip(
            list(tree.find_all(exp.Neg, exp.Abs)),
            _operand_types(sql, types, (exp.Neg, exp.Abs)),
            strict=False,
        )
        if source is not None
        and source.this.name in (*_INTEGER_BITS, "DECIMAL")
        # A negative literal stays one (Spark wants literal scales: round(x, -1)).
        and not isinstance(node.this.unnest(), exp.Literal)
    }

    def sign_fix(node: Any) -> Any:
        source = signs[id(node)]
        operand = node.this
        if isinstance(node, exp.Neg):
            zero: Any = exp.Literal.number(0)
            if source.this.name != "DECIMAL":
                zero = exp.Cast(this=zero, to=source.copy())
            return exp.Anonymous(this="try_subtract", expressions=[zero, operand])
        if source.this.name == "DECIMAL":
            text = exp.Cast(this=operand, to=exp.DataType.build("STRING"))
            unsigned = exp.Trim(this=text, expression=exp.Literal.string("-"), position="LEADING")
            return exp.TryCast(this=unsigned, to=source.copy(), safe=True)
        lowest = exp.Cast(
            this=exp.Literal.number(-(2 ** (_INTEGER_BITS[source.this.name] - 1))), to=source.copy()
        )
        return exp.Nullif(this=node.copy(), expression=lowest)

    # left(s, -k) and right(s, -k): all but the last (first) k characters on DuckDB, ''
    # on Spark. Rewritten where k is a literal (read before the children change).
    drops = {
        id(node): int(count.this.this)
        for node in tree.find_all(exp.Left, exp.Right)
        for count in [node.expression]
        if isinstance(count, exp.Neg) and isinstance(count.this, exp.Literal) and count.this.is_int
    }

    # epoch(x): SQLGlot writes Spark's UNIX_TIMESTAMP, whole seconds cut toward zero
    # (and of a TIMESTAMP_NTZ through the session's time zone); DuckDB's is a DOUBLE
    # with the fraction. Rewritten to DuckDB's own arithmetic where the operand's type
    # is known (:func:`_epoch_seconds`).
    epochs = {
        id(node): source.this.name
        for node, source in zip(
            list(tree.find_all(exp.TimeToUnix)),
            _operand_types(sql, types, exp.TimeToUnix),
            strict=False,
        )
        if source is not None and source.this.name in _EPOCH_KINDS
    }

    def fix(node: Any) -> Any:
        if isinstance(node, exp.Try):
            return node.this
        if id(node) in signs:
            return sign_fix(node)
        if id(node) in epochs:
            operand = node.this.sql(dialect="spark")
            kind = _EPOCH_KINDS[epochs[id(node)]]
            return _keep_unix_date(sqlglot.parse_one(_epoch_seconds(operand, kind), read="spark"))
        meaning = _duckdb_meaning(node, drops)
        if meaning is not None:
            return meaning
        if isinstance(node, exp.Like | exp.ILike):
            return _linear_like(node, sql)
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


def _linear_like(node: Any, sql: str) -> Any:
    """``x [NOT] LIKE/ILIKE 'pattern'`` as Spark's linear string functions, or an
    EngineError (raised while the query is prepared, before any charge, from its text).

    Spark runs LIKE as a Java regular expression ('%' -> '.*', matched whole) unless
    its optimizer (LikeSimplification) rewrites the pattern into =, StartsWith,
    EndsWith or Contains. Java backtracks: '%a%a%a...' is O(n^k) on a row of length n
    (4-6 s per row, issue 27), and a pattern computed from the row is compiled per row
    (and raised on a trailing backslash). So the pattern must be a string literal of
    one of the shapes that rewrite covers -- 'abc', 'abc%', '%abc', '%abc%', 'ab%cd'
    (runs of '%' count as one; no '_', no backslash) -- and dpkit writes the rewrite
    itself, so it holds whatever the optimizer's settings (tests/adversarial/
    test_timing_attacks.py checks the optimized plan holds no LIKE). Each function is
    linear (Contains: O(n m), m <= 1000 the literal). ILIKE is Spark's Like(lower(x),
    lower(p)), written the same way. 'ab%cd' needs x three times, so only on a column
    (nesting copies would grow exponentially)."""
    from sqlglot import exp

    pattern = node.expression
    text = str(pattern.this) if isinstance(pattern, exp.Literal) and pattern.is_string else None
    shape = None if text is None else _like_shape(text)
    if shape == "both" and not isinstance(node.this, exp.Column | exp.Literal):
        shape = None
    if text is None or shape is None:
        shown = "a pattern that is not a string literal" if text is None else repr(text)
        raise EngineError(
            f"Spark cannot run the query: {shown} in LIKE/ILIKE (in {sql[:200]!r}) would run "
            "as a Java regular expression, which backtracks: its time on a row can grow "
            "polynomially with the row's length, a timing side channel. On Spark a LIKE "
            "pattern must be a string literal 'abc', 'abc%', '%abc', '%abc%' or (on a "
            "column) 'ab%cd', without '_' or backslash, which run as =, startswith, "
            "endswith or contains. Use the DuckDB engine for other patterns (its LIKE and "
            "RE2 regular expressions run in linear time)."
        )
    first, *middle, last = text.split("%") if "%" in text else (text, text)
    middle = [m for m in middle if m]
    lower = isinstance(node, exp.ILike)

    def text_of(value: Any) -> Any:
        return _call("lower", value) if lower else value

    subject = text_of(exp.Cast(this=node.this, to=exp.DataType.build("STRING")))
    head, tail = text_of(exp.Literal.string(first)), text_of(exp.Literal.string(last))
    out: Any
    if shape == "equal":
        out = exp.EQ(this=subject, expression=head)
    elif shape == "contains":
        out = _call("contains", subject, text_of(exp.Literal.string(middle[0])))
    elif shape == "ends":
        out = _call("endswith", subject, tail)
    elif shape == "starts":
        out = _call("startswith", subject, head)
    else:  # 'ab%cd' on a column: long enough for both, starts and ends so
        both = exp.Add(this=_call("length", head.copy()), expression=_call("length", tail.copy()))
        out = exp.And(
            this=exp.GTE(this=_call("length", subject.copy()), expression=both),
            expression=exp.And(
                this=_call("startswith", subject.copy(), head),
                expression=_call("endswith", subject, tail),
            ),
        )
    out = exp.Paren(this=out)
    return exp.Not(this=out) if node.args.get("negate") else out


def _like_shape(text: str) -> str | None:
    """Which linear function a LIKE pattern is ("equal", "starts", "ends", "contains",
    "both" for 'ab%cd'), or None (a '_', a backslash, or more than one literal run
    between '%'s: a regular expression on Spark). Runs of '%' count as one."""
    if "_" in text or "\\" in text:
        return None
    if "%" not in text:
        return "equal"
    first, *middle, last = text.split("%")
    middle = [m for m in middle if m]
    if not middle:
        return "both" if first and last else "ends" if last else "starts"
    if len(middle) == 1 and not first and not last:
        return "contains"
    return None


def _call(name: str, *args: Any) -> Any:
    from sqlglot import exp

    return exp.Anonymous(this=name, expressions=list(args))


def _duckdb_meaning(node: Any, drops: dict[int, int]) -> Any:
    """Spark SQL with DuckDB's meaning for the functions whose Spark namesake (as SQLGlot
    writes it) answers differently on the same row (found by the adversarial review);
    None for every other node. No rewrite can fail on a row, and each writes its
    operands once."""
    from sqlglot import exp

    def number(value: int) -> Any:
        return exp.Literal.number(value)

    def sunday_zero(day: Any) -> Any:  # DuckDB's dayofweek: Sunday 0 .. Saturday 6
        return exp.Mod(
            this=exp.Paren(this=exp.Add(this=_call("weekday", day), expression=number(1))),
            expression=number(7),
        )

    def monday_one(day: Any) -> Any:  # DuckDB's isodow: Monday 1 .. Sunday 7
        return exp.Paren(this=exp.Add(this=_call("weekday", day), expression=number(1)))

    if isinstance(node, exp.DayOfWeek):
        return sunday_zero(node.this)
    if isinstance(node, exp.DayOfWeekIso):
        return monday_one(node.this)
    if isinstance(node, exp.Extract) and isinstance(node.this, exp.Var):
        unit = node.this.name.lower()
        if unit in ("dow", "dayofweek"):
            return sunday_zero(node.expression)
        if unit == "isodow":
            return monday_one(node.expression)
    if isinstance(node, exp.Anonymous) and node.name.lower() == "date_part":
        unit, day = [*node.expressions, None, None][:2]
        if isinstance(unit, exp.Literal) and unit.is_string and day is not None:
            if unit.this.lower() in ("dow", "dayofweek"):
                return sunday_zero(day)
            if unit.this.lower() == "isodow":
                return monday_one(day)
    if isinstance(node, exp.Log):
        # DuckDB's log(x) is base 10 (Spark's is e); log(10, x) and log(2, x) as the C
        # library's log10 and log2 (Spark's LOG(b, x) divides two logarithms).
        base, value = (None, node.this) if node.expression is None else (node.this, node.expression)
        if base is None or (isinstance(base, exp.Literal) and base.this in ("10", "10.0")):
            return _call("log10", value)
        if isinstance(base, exp.Literal) and base.this in ("2", "2.0"):
            return _call("log2", value)
    if isinstance(node, exp.DateDiff) and isinstance(node.args.get("unit"), exp.Var):
        # DuckDB counts the boundaries crossed (date_part_boundary); Spark's DATEDIFF of
        # a unit counts whole units.
        unit = node.args["unit"].name.lower()
        end, start = node.this, node.expression
        if unit in ("year", "quarter", "month"):
            # Whole months between the starts of the two periods: exact integers.
            months = exp.Cast(
                this=_call(
                    "months_between",
                    exp.DateTrunc(this=end, unit=exp.Literal.string(unit.upper())),  # type: ignore[no-untyped-call]
                    exp.DateTrunc(this=start, unit=exp.Literal.string(unit.upper())),  # type: ignore[no-untyped-call]
                ),
                to=exp.DataType.build("BIGINT"),
            )
            if unit == "month":
                return months
            per = 12 if unit == "year" else 3
            return exp.Paren(this=exp.IntDiv(this=months, expression=number(per)))
        if unit == "day":
            date = exp.DataType.build("DATE")
            return _call(
                "datediff",
                exp.TryCast(this=end, to=date, safe=True),
                exp.TryCast(this=start, to=date.copy(), safe=True),
            )
    if isinstance(node, exp.IsNan):
        # DuckDB's isnan(NULL) is NULL, Spark's false (so `NOT isnan(x)` kept Spark's
        # NULL rows; found by an adversarial review). signum(x) * 0.0 is NULL for NULL,
        # NaN for NaN and a zero for every other value (infinities included); nanvl
        # turns NaN into 1.0 and passes NULL and the zeros: equal to 1.0 exactly where
        # DuckDB's isnan is true, NULL where it is NULL.
        zeroed = exp.Paren(
            this=exp.Mul(this=_call("signum", node.this), expression=exp.Literal.number("0.0"))
        )
        one = exp.Literal.number("1.0")
        return exp.Paren(this=exp.EQ(this=_call("nanvl", zeroed, one), expression=one.copy()))
    if isinstance(node, exp.Left | exp.Right) and id(node) in drops:
        skip = number(drops[id(node)] + 1)
        if isinstance(node, exp.Right):
            return exp.Substring(this=node.this, start=skip)
        return _call("reverse", exp.Substring(this=_call("reverse", node.this), start=skip))
    return None


def _patterns(sql: str) -> list[str]:
    """The literal patterns of the regular expressions in ``sql``."""
    if "regexp" not in sql.lower():
        return []
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql, read="duckdb")
    return [str(m.expression.this) for m in tree.find_all(exp.RegexpLike)]


def _flat(branch: Sequence[PatternItem]) -> list[PatternItem]:
    """``branch`` with its one-branch, unrepeated groups spliced in, zero-width flags
    dropped: the items in the order Java's matcher meets them."""
    out: list[PatternItem] = []
    for item in branch:
        if item.kind == "group" and len(item.branches) == 1 and item.quantifiers == 0:
            out.extend(_flat(item.branches[0]))
        elif item.kind != "flags":
            out.append(item)
    return out


def _backtracks(pattern: str) -> str | None:
    """Why Java's matcher may take more than linear time on ``pattern``, or None when
    it is in the class the Spark engine accepts.

    Spark's RLIKE is ``Pattern.matcher(s).find(0)``, a backtracking search that tries
    every start position. Exponential on '([a-z]*)*', polynomial of any degree on
    '[a-z]*' repeated k times (O(n^k): 4-6 s per row for k = 8, issue 27), and
    quadratic already on one unanchored '[a-z]*x' (every start re-scans the run). The
    accepted class, with ``m`` the pattern's states (at most MAX_PATTERN_STATES):

    * no back-reference and no look-around (they re-scan; back-references are NP-hard);
    * no repeated group, not even '(ab){2}' (Java recurses once per repetition of a
      group, a stack overflow on long values, and each repetition multiplies choices);
    * at most **one choice point** in the whole pattern: one alternation '(a|b|c)', or
      one quantifier other than an exact count 'x{n}' (which has one way to match);
    * if that choice is a quantifier that may take more than two counts ('*', '+',
      '{n,}', '{n,m}' with m > n + 1), the pattern starts with '^' or the quantified
      item is the last one (nothing after it, not even '$').

    Why this is linear: without a choice point, a start position costs at most m
    steps, so find() costs O(n m). One alternation or a '?' (at most two ways per
    item) multiplies a start's cost by the number of ways, at most m. One run-length
    quantifier costs O(n m) at the one start position '^' allows (Java's Begin node
    refuses every other start in O(1)); as the last item it never backtracks (the
    match is complete as soon as it stops), so every start costs O(m) until the first
    match, whose run costs O(n). Every case is O(n m) per row, m <= MAX_PATTERN_STATES.
    """
    branches = parse_pattern(pattern)

    def walk(items: Sequence[PatternItem]) -> Iterator[PatternItem]:
        for item in items:
            yield item
            for branch in item.branches:
                yield from walk(branch)

    items = [item for branch in branches for item in walk(branch)]
    if any(item.kind in ("backref", "lookaround") for item in items):
        return "uses a back-reference or a look-around"
    # Where Java reads the text otherwise than parse_pattern: comments mode (?x)
    # (whitespace and '#' ignored), multi-line mode (?m) ('^' at every line), nested
    # classes and intersections ('[a[b]]', '[a&&b]', '[]a]').
    if any(set(item.flags) & {"x", "m", "c"} for item in items):
        return "sets the flag (?x), (?m) or (?c)"
    if any(item.nested_class for item in items):
        return "nests a character class ('[a[b]]', '[a&&[b]]', '[]...]')"
    if any(item.kind == "group" and item.quantifiers for item in items):
        return "repeats a group ('(...)*', '(...)+', '(...){n}')"
    choices = [item for item in items if item.kind == "group" and len(item.branches) > 1]
    choices += [item for item in items if item.low != item.high]
    alternatives = len(branches) > 1
    if len(choices) + alternatives > 1:
        return "has more than one choice point (alternations and variable repetitions)"
    runs = [item for item in choices if item.high is None or item.high > item.low + 1]
    if runs:
        flat = _flat(branches[0])
        anchored = bool(flat) and flat[0].kind == "start" and not flat[0].quantifiers
        if not anchored and (not flat or flat[-1] is not runs[0]):
            return (
                "repeats an item a variable number of times with something after it, "
                "and does not start with '^'"
            )
    return None


class SparkEngine(SqlEngine):
    """Spark engine over one DataFrame.

    Parameters
    ----------
    dataframe:
        A ``pyspark.sql.DataFrame``. Unless :func:`read_path` returned it to be read in
        place, it is first materialised (:func:`materialise`: computed once, now, in
        the caller's session, so that its own expressions cannot fail during a query).
        It is registered as a global temporary view (visible to the sessions of its
        Spark application) under a random name, and queried from a session of dpkit's
        own with ANSI mode off (module docstring).

    Raises
    ------
    DataError
        If computing the DataFrame fails (the error's class only); nothing is spent.
    """

    # --- dialect (see SqlEngine)
    wide = "DECIMAL(38,0)"
    semi_join = "LEFT SEMI JOIN"
    anti_join = "LEFT ANTI JOIN"
    explode = "explode"
    top_n_limit = 100_000  # Spark's min_by(x, key, k) takes k <= 10^5
    # The group slice of the keyed hash per pair, not joined from the distinct groups:
    # the join's extra stages cost more on Spark than the hashing saves (10^6 rows,
    # local[2], alternated: 2.07-2.16 s per pair against 2.32-2.49 s joined).
    hash_groups_once = False
    # One statement per plan's histograms (SqlEngine.shares_histograms: shared, Spark
    # recomputed the common rows in every plan's branch).
    shares_histograms = False
    # Row-level plans' sums in one statement (SqlEngine.shares_row_sums): on a small
    # table a Spark statement costs ~0.1-0.2 s whatever it computes; nine describe sums
    # of a 6,366-row table took 0.55-0.67 s four at a time and 0.16-0.22 s as one.
    shares_row_sums = True
    # Row-level counts per bin of several plans in one statement
    # (SqlEngine.shares_row_bins): describe's ranges of diabetes' 11 columns took
    # 0.86-1.27 s four at a time and 0.28-0.40 s as one (warm, in process); at 10^6 rows
    # x 24 columns 3.1-4.3 s against 1.9-2.4 s in statements of six.
    shares_row_bins = True
    # date_trunc of a DATE past the year ~294,000 overflows ("long overflow"), with ANSI
    # off too (SqlEngine.expressions_may_raise; docs/spark.md, a known failure).
    expressions_may_raise = True
    # A batch's own statements run four at a time: on a small table a statement's time
    # is the driver's (analysis, planning, scheduling a job), which threads overlap
    # (each Python thread has its JVM thread, with its own job group property).
    concurrent_statements = 4
    text = "STRING"

    def q(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def expression(self, sql: str, derived: Sequence[tuple[str, str]] = ()) -> str:
        translated = _translate(sql, tuple(self.schema(derived).items()))
        for pattern in _patterns(sql):
            why = _backtracks(pattern)
            if why is not None:
                raise EngineError(
                    f"Spark cannot run the query: the regular expression {pattern!r} {why}. "
                    "Spark matches with Java's backtracking regex engine, whose time on a "
                    "row can grow polynomially or exponentially with the row's length, a "
                    "timing side channel (or a stack overflow on some rows only), so on "
                    "Spark a pattern has at most one choice point (one alternation or one "
                    "variable repetition, the latter only if the pattern starts with '^' "
                    "or it is the last item), no repeated group, no back-reference or "
                    "look-around. Use the DuckDB engine for other patterns (RE2: linear "
                    "time)."
                )
            self._check_pattern(pattern)
        return translated

    @functools.lru_cache(maxsize=256)  # noqa: B019 - one engine per Session, few patterns
    def _check_pattern(self, pattern: str) -> None:
        """Compile a literal pattern on one constant row: a bad pattern fails here,
        before any charge, whatever the table holds."""
        self._execute("SELECT regexp_like('', ?)", [pattern], reads_rows=True, binding=True)

    def int_div(self, a: str, b: str) -> str:
        return f"(({a}) DIV ({b}))"

    def binary_text(self, sql: str) -> str:
        # A Spark string with a collation other than UTF8_BINARY has another type name
        # ("string collate UTF8_LCASE") and is refused as a key column before this runs;
        # dpkit's own session keeps the default (binary) collation for literals.
        return f"({sql})"

    def wide_sum(self, x: str) -> str:
        # Spark's sum of BIGINT is a BIGINT, which wraps (ANSI off) past 2^63.
        return f"sum(CAST({x} AS DECIMAL(38,0)))"

    def double_array(self, values: Sequence[float]) -> tuple[str, list[Any]]:
        # Spark's parameters take scalars; the cuts are public, written in the text.
        return _double_array_sql(values), []

    def element(self, array: str, index: str) -> str:
        return f"element_at({array}, CAST({index} AS INT))"

    def constant_double_array(self, values: Sequence[float]) -> str:
        return _double_array_sql(values)  # no parameters

    def integer_range(self, count: int) -> str:
        return f"SELECT id FROM range(0, {int(count)})"

    def struct_list(self, entries: Sequence[Sequence[tuple[str, str]]]) -> str:
        structs = [
            "named_struct(" + ", ".join(f"'{field}', {sql}" for field, sql in entry) + ")"
            for entry in entries
        ]
        return f"array({', '.join(structs)})"

    def pair(self, first: str, second: str) -> str:
        return f"struct({first}, {second})"

    def hash_dialect(self) -> HashDialect:
        return HashDialect(
            hex_to_bigint=lambda s: f"CAST(conv({s}, 16, 10) AS BIGINT)",
            date_days=lambda s: f"CAST(unix_date({s}) AS BIGINT)",
            epoch_micros=_epoch_micros,
            shift_right=lambda s, n: f"shiftright({s}, {n})",
            text=self.text,
            decimal_text=_plain_decimal,
        )

    # --- the engine
    def __init__(self, dataframe: Any) -> None:
        _require_pyspark("SparkEngine")
        owner = dataframe.sparkSession
        self._spark = owner.newSession()
        self._spark.conf.set("spark.sql.ansi.enabled", "false")
        # Spark's constant propagation substitutes a WHERE clause's `x = 0` into the
        # clause's other conditions as the literal 0.0, which is wrong for -0.0 rows
        # (`x = 0 AND CAST(x AS STRING) = '-0.0'` kept no row; DuckDB keeps them, and so
        # does Spark with the condition in a CASE, as the shared statements write it):
        # the rule is off in dpkit's session (found by an adversarial review, issue 34).
        self._spark.conf.set("spark.sql.optimizer.excludedRules", _EXCLUDED_RULES)
        # Subexpression elimination hoisted an expression that two filters share out
        # of the right-hand side of their ANDs in a shared statement (engines._batch),
        # so it ran on rows the left-hand side drops: `"ok" AND date_trunc('week', "d")
        # > ...` failed on a date that overflows it in a row with ok false, after the charge,
        # where each query's own statement never evaluates it (found by an adversarial
        # review, issue 34). AND, OR and COALESCE keep their short-circuit.
        self._spark.conf.set("spark.sql.subexpressionElimination.skipForShortcutExpr", "true")
        self._quiet_query_context_log()
        # After the logs are quiet: a failure's context would quote the row.
        if dataframe not in _IN_PLACE:
            dataframe = materialise(dataframe)
        else:
            read_every_value(dataframe)
        self._view = f"dpkit_{uuid.uuid4().hex}"
        dataframe.createOrReplaceGlobalTempView(self._view)
        database = owner.conf.get("spark.sql.globalTempDatabase", "global_temp")
        self._relation = f"{self.q(database)}.{self.q(self._view)}"
        self._schema_cache: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        self._interrupted = False
        self._extra_views: list[str] = []
        # Statements bound (analysed) and not yet run: the run reuses Spark's analysed
        # DataFrame instead of parsing and analysing the same text again (~40 ms each;
        # describe binds every statement before its charge, then runs it).
        self._analysed: dict[tuple[str, tuple[Any, ...]], Any] = {}
        self._analysed_lock = threading.Lock()

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
        # PySpark 4 logs again, in Python, every SQL error it converts (a logger of its
        # own with its own stream handler, pyspark.errors.exceptions.base): the whole
        # failing statement, with the keyed hash's round keys, on stderr (found by the
        # adversarial review).
        import logging

        try:
            from pyspark.logger import PySparkLogger
        except ImportError:  # pragma: no cover - PySpark 3 has no such log
            return
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)

    def register(self, dataframe: Any, *, in_place: bool = False) -> str:
        """Another table of a Session over several tables: ``dataframe`` materialised
        (unless ``in_place``: a copy dpkit made) and registered as a global temporary
        view of its own; returns the SQL naming it."""
        if not in_place:
            if dataframe in _IN_PLACE:
                read_every_value(dataframe)  # a file read_path opened (as __init__)
            else:
                dataframe = materialise(dataframe)
        view = f"dpkit_{uuid.uuid4().hex}"
        dataframe.createOrReplaceGlobalTempView(view)
        database = self._spark.conf.get("spark.sql.globalTempDatabase", "global_temp")
        self._extra_views.append(view)
        return f"{self.q(database)}.{self.q(view)}"

    def spark_frame(self, arrow_table: Any) -> Any:
        """A DataFrame of this engine's Spark session holding ``arrow_table`` (a public
        table dpkit read), stored in the executors (``localCheckpoint``)."""
        return self._spark.createDataFrame(arrow_table).localCheckpoint(eager=True)

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

        key = _statement_key(sql, params)
        try:
            frame = self._take_analysed(key) if reads_rows else None
            if frame is None:
                frame = self._dataframe(sql, params)
            if not reads_rows:
                frame.schema  # noqa: B018 - analysis only
                self._keep_analysed(key, frame)
                return []
            # Jobs of this engine run in one job group, so a missed deadline can
            # cancel them (interrupt) without touching the caller's jobs.
            self._spark.sparkContext.setJobGroup(self._view, "dpkit query", True)
            if self._interrupted:
                raise EngineError("interrupted")
            return _collect(frame)
        except Exception as err:
            if binding:
                raise EngineError(f"Spark cannot run the query: {_first_line(err)}") from None
            if not reads_rows and isinstance(err, AnalysisException | ParseException):
                # Analysis reads no row: the message names columns, types and functions.
                raise EngineError(f"Spark cannot run the query: {_first_line(err)}") from None
            raise EngineError(_reading_error(err)) from None

    def _take_analysed(self, key: tuple[str, tuple[Any, ...]] | None) -> Any:
        """The DataFrame analysed when ``key``'s statement was bound, once (or None)."""
        if key is None:
            return None
        with self._analysed_lock:
            return self._analysed.pop(key, None)

    def _keep_analysed(self, key: tuple[str, tuple[Any, ...]] | None, frame: Any) -> None:
        """Keep a bound statement's analysed DataFrame for its run (the oldest of more
        than :data:`_MAX_ANALYSED` dropped: a bound statement may never run)."""
        if key is None:
            return
        with self._analysed_lock:
            self._analysed[key] = frame
            while len(self._analysed) > _MAX_ANALYSED:
                del self._analysed[next(iter(self._analysed))]

    def interrupt(self) -> None:
        """Cancel every job this engine is running, and any it would start (a missed
        deadline; the Session is locked after it). A job submitted while this runs
        could escape one cancellation, so the group is cancelled again after 1 and 5 s."""
        import threading

        self._interrupted = True
        context = self._spark.sparkContext
        context.cancelJobGroup(self._view)
        for delay in (1.0, 5.0):
            timer = threading.Timer(delay, context.cancelJobGroup, (self._view,))
            timer.daemon = True
            timer.start()

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
            self._remember_schema(
                key, [(f.name, spark_type(f.dataType.simpleString())) for f in fields]
            )
        return dict(self._schema_cache[key])

    def close(self) -> None:
        """Drop the global temporary views (the DataFrames themselves are the caller's)."""
        self._spark.catalog.dropGlobalTempView(self._view)
        for view in self._extra_views:
            self._spark.catalog.dropGlobalTempView(view)


#: Dates and timestamps that PySpark turns into Python values on every machine (a
#: day's margin for a TIMESTAMP shown in the driver's local time zone).
_PYTHON_RANGE = {
    "date": ("DATE '0001-01-01'", "DATE '9999-12-31'"),
    "timestamp": ("TIMESTAMP '0001-01-02 00:00:00'", "TIMESTAMP '9999-12-30 00:00:00'"),
    "timestamp_ntz": (
        "TIMESTAMP_NTZ '0001-01-01 00:00:00'",
        "TIMESTAMP_NTZ '9999-12-31 23:59:59.999999'",
    ),
}


def _double_literal(value: float) -> str:
    """``value`` as a Spark DOUBLE literal that denotes exactly that double.

    A finite value is written as Python's ``repr`` with Spark's ``D`` suffix
    (``-0.0005D``, ``1E-05D``): Spark parses it with Java's correctly rounded
    ``Double.parseDouble``, and ``repr`` round-trips under correct rounding, so the
    literal is the same double (``-0.0`` included). A typed literal, not a ``CAST``
    of text: Spark's analyser and optimiser then see one node instead of a cast to
    fold, which made a median's 1,001 grid cuts cost seconds to analyse. Infinities and
    NaN have no literal syntax and stay casts of text.
    """
    value = float(value)
    if not math.isfinite(value):
        return f"CAST('{value!r}' AS DOUBLE)"
    return f"{value!r}".upper() + "D"


#: Optimiser rules off in dpkit's Spark session (SparkEngine.__init__).
_EXCLUDED_RULES = "org.apache.spark.sql.catalyst.optimizer.ConstantPropagation"

#: Arrays of at least this many doubles are written as JSON text (_double_array_sql).
JSON_ARRAY_LENGTH = 32


def _double_array_sql(values: Sequence[float]) -> str:
    """SQL of a constant ARRAY<DOUBLE> holding exactly ``values``.

    A short array is a list of typed literals (:func:`_double_literal`). A long one --
    a quantile's grid of up to ~10^4 cuts -- is one string literal parsed by
    ``from_json``, with each non-finite value (no JSON spelling) a literal array of its
    own between the JSON runs, joined by ``concat``. Exactness: each finite value is
    written as Python's ``repr``, which is valid JSON and round-trips under correct
    rounding, and Spark's JSON reader parses numbers with Java's correctly rounded
    ``Double.parseDouble`` (``-0.0`` stays negative), so every element is the same
    double (tests/engines/test_spark_double_literals.py compares them bit for bit). Spark's
    optimiser folds the expression into one array constant, as it folds the literals
    (the same test checks the optimised plan holds no ``from_json``). Why: 9,601
    literals made a quantile's statement 114 KB, which Spark took ~0.45 s to parse and
    analyse against ~0.06 s for the JSON text, on every such statement of ``describe``
    (benchmarks/results/describe.md).
    """
    values = [float(v) for v in values]
    if len(values) < JSON_ARRAY_LENGTH:
        return f"array({', '.join(_double_literal(v) for v in values)})"
    parts: list[str] = []
    run: list[str] = []
    for value in values:
        if math.isfinite(value):
            run.append(repr(value))
            continue
        if run:
            parts.append(f"from_json('[{','.join(run)}]', 'array<double>')")
            run = []
        parts.append(f"array({_double_literal(value)})")
    if run:
        parts.append(f"from_json('[{','.join(run)}]', 'array<double>')")
    return parts[0] if len(parts) == 1 else f"concat({', '.join(parts)})"


#: Bound statements whose analysed DataFrames a SparkEngine keeps for their run.
_MAX_ANALYSED = 256


def _statement_key(sql: str, params: Sequence[Any]) -> tuple[str, tuple[Any, ...]] | None:
    """``(sql, params)`` as a dictionary key, or None when a parameter is unhashable.
    The text and the parameters' values and types (``1`` and ``1.0`` bind alike in a
    dictionary, not in Spark) name the statement."""
    key = (sql, tuple((type(p), p) for p in params))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _collect(frame: Any) -> list[tuple[Any, ...]]:
    """The rows of ``frame`` as Python tuples. A date or timestamp outside Python's
    range (year 10000: a valid Spark date) makes PySpark raise ValueError while
    converting it -- on the tables that hold one only (a derived group key
    ``d + INTERVAL 1 DAY``, found by the adversarial review). Such values come back as
    their text, as DuckDB's Python client returns them."""
    schema = frame.schema
    fields = [] if schema is None else schema.fields
    temporal = {
        i: _PYTHON_RANGE[f.dataType.simpleString()]
        for i, f in enumerate(fields)
        if f.dataType.simpleString() in _PYTHON_RANGE
    }
    if not temporal:
        return [tuple(row) for row in frame.collect()]
    names = [f"__c{i}" for i in range(len(fields))]
    columns = []
    for i, name in enumerate(names):
        if i in temporal:
            low, high = temporal[i]
            columns.append(f"CASE WHEN {name} BETWEEN {low} AND {high} THEN {name} END")
            columns.append(f"CAST({name} AS STRING)")
        else:
            columns.append(name)
    out = []
    for row in frame.toDF(*names).selectExpr(*columns).collect():
        values, j = [], 0
        for i in range(len(fields)):
            if i in temporal:
                inside, text = row[j], row[j + 1]
                values.append(inside if inside is not None or text is None else text.lstrip("+"))
                j += 2
            else:
                values.append(row[j])
                j += 1
        out.append(tuple(values))
    return out


#: Operand types (SQLGlot's names) of ``epoch(x)`` rewritten for Spark, by what they are.
_EPOCH_KINDS = {
    "DATE": "DATE",
    "TIMESTAMP": "TIMESTAMP",
    "TIMESTAMPNTZ": "TIMESTAMP",
    "TIMESTAMPTZ": "TIMESTAMPTZ",
}


def _epoch_seconds(sql: str, kind: str) -> str:
    """DuckDB's ``epoch(x)`` in Spark SQL, the same DOUBLE: ``kind`` is the operand's
    type (DATE, TIMESTAMP or TIMESTAMPTZ, DuckDB's names). A DATE is its days times
    86,400; a TIMESTAMP (Spark's TIMESTAMP_NTZ) its wall clock's microseconds over 10^6
    (one division, as DuckDB: equal on 10^6 random instants); a TIMESTAMPTZ (Spark's
    TIMESTAMP) goes through milliseconds, as DuckDB's ICU extension computes it: ``u``
    microseconds give ``floor(u / 1000) / 1e3 + mod(u, 1000) / 1e6`` (floor division;
    equal on 20,000 random instants either side of 1970 with DuckDB 2.0, where a single
    division differs in the last bit on a quarter of them). Each step is exact in
    BIGINT, then IEEE double arithmetic, as in DuckDB (tests/engines/test_spark_epoch.py)."""
    x = f"({sql})"
    if kind == "DATE":
        return f"(CAST(unix_date({x}) AS DOUBLE) * CAST(86400 AS DOUBLE))"
    if kind == "TIMESTAMP":
        micros = _epoch_micros(x, "TIMESTAMP")
        return f"(CAST({micros} AS DOUBLE) / CAST(1000000 AS DOUBLE))"
    micros = f"unix_micros({x})"
    rest = f"pmod({micros}, CAST(1000 AS BIGINT))"
    millis = f"(({micros} - {rest}) div CAST(1000 AS BIGINT))"
    return (
        f"(CAST({millis} AS DOUBLE) / CAST(1000 AS DOUBLE)"
        f" + CAST({rest} AS DOUBLE) / CAST(1000000 AS DOUBLE))"
    )


def _keep_unix_date(tree: Any) -> Any:
    """``tree`` with Spark's ``unix_date(d)`` kept as written: SQLGlot writes it back
    as ``DATEDIFF(DAY, DATE '1970-01-01', d)``, which Spark computes through
    microseconds and which raised "long overflow" on a DATE past the year ~294,000
    (found by an adversarial review, issue 34: a failure after the charge on one
    row's value). ``unix_date`` counts days, for every DATE Spark holds."""
    from sqlglot import exp

    def keep(node: Any) -> Any:
        if isinstance(node, exp.UnixDate):
            return exp.Anonymous(this="unix_date", expressions=[node.this])
        return node

    return tree.transform(keep)


def _epoch_micros(sql: str, type_name: str) -> str:
    """Microseconds since the epoch: of the instant for Spark's TIMESTAMP (DuckDB's
    TIMESTAMP WITH TIME ZONE), of the wall clock for TIMESTAMP_NTZ (DuckDB's TIMESTAMP)
    -- not through the session's time zone, which ``unix_micros`` would apply."""
    if "TIME ZONE" in type_name.upper():
        return f"unix_micros({sql})"
    # From the wall clock's fields, which are zone-free for TIMESTAMP_NTZ. Spark's
    # timestampdiff goes through the session time zone even between two NTZ values:
    # in America/New_York, 02:30 and 03:30 of 2021-03-14 came out equal (a key that
    # selected another key's rows; found by the adversarial tests of issue 27).
    x = f"({sql})"
    return (
        f"(CAST(unix_date(CAST({x} AS DATE)) AS BIGINT) * 86400000000"
        f" + CAST(hour({x}) AS BIGINT) * 3600000000 + CAST(minute({x}) AS BIGINT) * 60000000"
        f" + CAST(date_part('SECOND', {x}) * 1000000 AS BIGINT))"
    )


def _plain_decimal(sql: str, scale: int) -> str:
    """A DECIMAL as DuckDB writes it: plain, every place of its scale. Spark's CAST to
    STRING writes a value below 1e-6 as ``1E-10`` (Java's ``BigDecimal.toString``);
    ``format_number`` formats the exact value (US symbols, half-even rounding at
    ``scale`` places: none happens) with thousands separators, which are removed."""
    return f"replace(format_number({sql}, {scale}), ',', '')"


def _first_line(err: Exception) -> str:
    text = str(getattr(err, "getMessage", lambda: str(err))())
    return text.splitlines()[0] if text else type(err).__name__


def _reading_error(err: Exception) -> str:
    return (
        f"Spark failed while reading the data ({type(err).__name__}). Its message is not "
        "shown because it may quote row values; nothing was released."
    )


#: Glob characters of Hadoop's path patterns (read_path escapes them).
_GLOB = re.compile(r"([\[\]{}*?\\])")
#: A float or double type anywhere in a schema's JSON (nested fields included).
_FLOATING = re.compile(r'"(?:type|elementType|keyType|valueType)": "(?:float|double)"')

#: The DataFrames :func:`read_path` returned to be read in place (by identity: a frame
#: derived from one is another object, and is materialised).
_IN_PLACE: weakref.WeakSet[Any] = weakref.WeakSet()

#: Settings under which Spark's Parquet reader raises on some values: EXCEPTION fails on
#: a date before 1582-10-15 or a timestamp before 1900 in a file not written by Spark 3+
#: (pyarrow's, Hive's), a value a filter can skip (row-group statistics). A file scan
#: keeps the settings of the session it was read in.
_PARQUET_REBASE = (
    "spark.sql.parquet.datetimeRebaseModeInRead",
    "spark.sql.parquet.int96RebaseModeInRead",
)


def read_every_value(dataframe: Any) -> None:
    """Read every value of a frame :func:`read_path` opened in place, once, keeping
    nothing (Spark's ``noop`` writer: each row is decoded, then dropped).

    Spark's Parquet reader can fail on one value of a file pyarrow writes without
    complaint -- a ``TIMESTAMP(MILLIS)`` of 2^62 ms overflows its conversion to
    microseconds, a decimal beyond its precision, partition folders whose files
    disagree on a type. Read in place, that failure would come in the first query that
    reads the value, after its charge, and only when the query's filter keeps its row
    group or partition (a bisection on a row value; tests/adversarial/
    test_source_attacks.py). Here it is a DataError at creation, nothing spent.
    Decoding is a function of the files alone, so once every value converted here, the
    same values convert in every query. Cost: one scan, no storage.

    Raises
    ------
    DataError
        If reading a value fails (the error's class only: its message can quote it).
    """
    try:
        dataframe.write.format("noop").mode("overwrite").save()
    except Exception as err:
        raise DataError(
            f"Spark failed while reading every value of the file once, at creation "
            f"({type(err).__name__}; e.g. a value its Parquet reader cannot convert). Its "
            "message is not shown because it may quote row values; nothing was spent."
        ) from None


def materialise(dataframe: Any) -> Any:
    """``dataframe`` computed once, now, as a DataFrame whose plan holds no expression of
    the caller's.

    ``localCheckpoint(eager=True)`` runs the DataFrame's plan in its own session (with
    that session's settings, ANSI mode included, and its Python UDFs) and keeps the rows
    in the executors' block managers (memory, spilling to disk); the DataFrame returned
    is a scan of those blocks (``LogicalRDD``): a query of it evaluates no expression
    and calls no UDF of the caller's. So a row that makes one of them fail makes this
    fail, once, before anything is spent, and never a query.

    Raises
    ------
    DataError
        If computing the DataFrame fails; the message names the error's class only (a
        failed CAST quotes its value).
    """
    try:
        return dataframe.localCheckpoint(eager=True)
    except Exception as err:
        raise DataError(
            f"Spark failed while computing the DataFrame once, to copy it "
            f"({type(err).__name__}; e.g. one of its own expressions -- a CAST in ANSI "
            "mode, a Python UDF -- fails on a row). Its message is not shown because it "
            "may quote row values; nothing was spent."
        ) from None


def read_path(
    spark: Any,
    path: str,
    schema: Mapping[str, str] | None,
    owner: str,
    csv: CsvOptions | None = None,
) -> Any:
    """A DataFrame over a Parquet or CSV file (CSV: header row, types inferred by Spark
    from the whole file unless ``schema`` names them; a malformed value is NULL).

    ``csv`` (optional) fixes the encoding, the separator and one text read as missing
    (Spark's CSV reader takes a single ``nullValue``).

    A Parquet file is read in place by :class:`SparkEngine` (typed by its footer: its
    scan parses no text; ``schema`` converts with ``try_cast``), unless ``spark`` reads
    ancient dates with a rebase mode of EXCEPTION (:data:`_PARQUET_REBASE`) or the file
    has a floating-point column (whose row-group statistics leave NaN out). A CSV file
    is materialised, as any DataFrame: Spark's CSV reader can fail on a line (one with
    more fields than ``maxColumns``, 20,480: a task failure in every mode), and the
    copy makes every later query cheaper.

    A local CSV file whose first 64 KiB are not valid in the chosen encoding is refused
    before Spark reads it (:mod:`dpkit.analytics._csv_encoding`)."""
    lower = path.lower()
    if lower.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")) and os.path.isfile(path):
        from pathlib import Path

        from dpkit.analytics._csv_encoding import check_encoding

        check_encoding(Path(path), "utf-8" if csv is None else csv.encoding, owner)
    reader = spark.read
    # Spark's reader takes a path as a glob pattern: t[1].parquet read t1.parquet instead
    # (found by the adversarial review). An existing local file is read by its own name,
    # its pattern characters escaped (Hadoop's glob takes a backslash escape).
    source = _GLOB.sub(r"\\\1", path) if os.path.exists(path) else path
    options: dict[str, str] = {}
    if csv is not None:
        if len(csv.na_values) > 1:
            raise InvalidParameter(
                f"{owner}: Spark's CSV reader reads one text as missing; got "
                f"{len(csv.na_values)} (--na-values). Give one, or use the DuckDB engine."
            )
        options["encoding"] = csv.encoding
        if csv.delimiter is not None:
            options["sep"] = csv.delimiter
        if csv.na_values:
            options["nullValue"] = csv.na_values[0]
    try:
        if lower.endswith((".parquet", ".pq")):
            frame = reader.parquet(source)
        elif lower.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz")):
            options.setdefault("sep", "\t" if ".tsv" in lower else ",")
            frame = reader.csv(source, header=True, inferSchema=True, mode="PERMISSIVE", **options)
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
    # Parquet's min/max statistics leave NaN out, and Spark's reader prunes row groups
    # by them: read in place, `f <> 1` dropped a group's NaN rows whenever its other
    # values were all 1, so one person's value decided how other rows were counted
    # (found by the adversarial review; DuckDB's side: _sources._parquet_read). A file
    # with a floating-point column anywhere in its schema -- as stored, whatever schema=
    # converts it to -- is copied (materialised) like any DataFrame: no statistic
    # reaches a query of the copy.
    floating = _FLOATING.search(json.dumps(frame.schema.jsonValue())) is not None
    if schema:
        from pyspark.sql import functions

        missing = sorted(set(schema) - set(frame.columns))
        if missing:
            raise DataError(f"{owner}: schema= names column(s) {missing} the file does not have.")
        for column, type_name in schema.items():
            # Spark's VARCHAR needs a length; its text type is STRING.
            if type_name.strip().upper() in ("VARCHAR", "TEXT"):
                type_name = "STRING"
            try:
                converted = functions.expr(f"try_cast(`{column}` AS {type_name})")
                frame = frame.withColumn(column, converted)
            except Exception:  # Spark's parser or analyser: the type name alone
                raise InvalidParameter(
                    f"{owner}: schema= gives column {column!r} the type {type_name!r}, "
                    "which Spark has no spelling for (UBIGINT, TIMESTAMP WITH TIME ZONE "
                    "...); use a Spark type (BIGINT, DECIMAL(20,0), TIMESTAMP, STRING, "
                    "DOUBLE, DATE, BOOLEAN) or the DuckDB engine."
                ) from None
    if (
        lower.endswith((".parquet", ".pq"))
        and not floating
        and all(
            str(spark.conf.get(key, "CORRECTED")).upper() != "EXCEPTION" for key in _PARQUET_REBASE
        )
    ):
        _IN_PLACE.add(frame)
    return frame
