"""Public SQL expressions (filters, derived columns): validated, then made total.

The Session's threat model (docs/analytics.md, "Threat model") says that whether a query
fails, and what it raises, may depend on the schema and public parameters only, never
on row values. An expression written by the analyst is the easiest way to break that
rule: ``CASE WHEN name = 'alice' AND salary >= 50000 THEN CAST('x' AS INTEGER) ELSE 1
END = 1`` fails only if such a row exists, a free one-bit oracle. So every expression
goes through three steps here, on SQLGlot's parse tree:

1. **A small grammar.** Column references, literals, arithmetic, comparison and boolean
   operators, ``CASE``/``IF``/``COALESCE``, ``IN`` over literals, ``CAST`` to scalar
   types, and an allowlist of scalar functions whose output is one value of bounded
   size computed from the row alone (:data:`ALLOWED_FUNCTIONS`). Everything else is
   refused before anything runs: subqueries, tables, aggregates, windows, table and
   list functions, volatile functions (``random()``, ``now()``), functions that can
   blow up memory from a data-dependent length (``repeat``, ``lpad``, ``replace``) and
   functions SQLGlot does not know.
2. **No casts that raise.** ``CAST(x AS T)`` becomes ``TRY_CAST(x AS T)``: a value that
   does not convert is NULL.
3. **Total.** The whole expression is wrapped in DuckDB's ``TRY(...)``: any other
   row-level error (integer overflow, integer division by zero, a bad regular
   expression read from a column) makes the expression NULL on that row instead of
   failing the query. A NULL filter drops the row; a NULL derived value is missing (the
   Session's NULL rule: skipped by sums, means and quantiles, counted by ``count()``).

The result is an expression that evaluates on every row of every table of the schema
without raising (property-tested in ``tests/adversarial/test_expression_oracles.py``).
What is not closed: the *time* a successful query takes depends on the data (a row
whose expression errors is re-evaluated alone inside ``TRY``; measured at ~3.5 us per
failing row on 10^7 rows), as the time of any query does; docs/analytics.md says so.

SQLGlot is imported lazily: a query without expressions never pays its import.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from dpkit.errors import DataError, InvalidParameter

__all__ = ["ALLOWED_FUNCTIONS", "MAX_EXPANDED_SIZE", "expanded_size", "validate_expression"]

#: Scalar functions allowed in expressions, by SQLGlot class name: deterministic, reading
#: only their row, and with an output no larger than a constant times their input.
ALLOWED_FUNCTIONS = frozenset(
    {
        # numbers
        "Abs", "Sign", "Round", "Floor", "Ceil", "Trunc", "Exp", "Ln", "Log", "Sqrt",
        "Cbrt", "Pow", "Greatest", "Least", "Radians", "Sin", "Cos", "Tan", "Atan2",
        "IsNan", "IsInf",
        # conditionals
        "Case", "If", "Coalesce", "Nullif",
        # strings (no function that repeats or pads by a data-dependent length)
        "Lower", "Upper", "Length", "Substring", "Trim", "Left", "Right", "Concat",
        "StartsWith", "EndsWith", "Contains", "StrPosition", "RegexpLike",
        # dates and times
        "Year", "Month", "Day", "Hour", "Minute", "Second", "Quarter", "Week",
        "DayOfWeek", "DayOfWeekIso", "DayOfYear", "Extract", "TimestampTrunc", "DateTrunc",
        "DateDiff", "TimeToUnix",
        # made total by this module
        "Cast", "TryCast", "Try",
    }
)  # fmt: skip

#: Functions SQLGlot parses as anonymous that DuckDB provides and that see their row only.
_ALLOWED_ANONYMOUS = frozenset({"isnan", "isinf", "isfinite", "hash", "date_part", "strlen"})

#: Operators and leaves of the grammar (SQLGlot class names).
_ALLOWED_NODES = frozenset(
    {
        "Column", "Identifier", "Literal", "Boolean", "Null", "Paren", "Interval",
        "Neg", "Not", "And", "Or", "Xor", "Add", "Sub", "Mul", "Div", "IntDiv", "Mod",
        "EQ", "NEQ", "GT", "GTE", "LT", "LTE", "NullSafeEQ", "NullSafeNEQ", "Is", "In",
        "Between", "Like", "ILike", "DPipe", "DataType",
    }
)  # fmt: skip

#: Scalar target types of CAST (SQLGlot's DataType.Type names); no lists, structs, maps.
_CAST_TYPES = frozenset(
    {
        "TINYINT", "SMALLINT", "INT", "BIGINT", "INT128", "UTINYINT", "USMALLINT", "UINT",
        "UBIGINT", "UINT128", "FLOAT", "DOUBLE", "DECIMAL", "VARCHAR", "TEXT", "CHAR",
        "BOOLEAN", "DATE", "TIMESTAMP", "TIMESTAMPTZ", "TIME",
    }
)  # fmt: skip


#: Date parts accepted as bare words (EXTRACT's and INTERVAL's units).
_DATE_PARTS = frozenset(
    {
        "year", "years", "quarter", "quarters", "month", "months", "week", "weeks", "day",
        "days", "hour", "hours", "minute", "minutes", "second", "seconds", "millisecond",
        "milliseconds", "microsecond", "microseconds", "dow", "isodow", "doy", "epoch",
        "decade", "century", "millennium", "dayofweek", "dayofyear", "yearweek", "isoyear",
    }
)  # fmt: skip
_DATE_PART = re.compile(r"[A-Za-z_]+")


def _refuse(owner: str, expression: str, what: str) -> InvalidParameter:
    return InvalidParameter(
        f"{owner}: the expression {expression!r} uses {what}, which is not allowed. "
        "Expressions may use columns, literals, arithmetic, comparison and boolean "
        "operators, CASE, CAST to a scalar type, IN over literals and the scalar "
        "functions listed in docs/analytics.md (no subqueries, tables, aggregates, "
        "window, list, volatile or unbounded-length functions)."
    )


def _check_node(node: Any, expression: str, columns: Collection[str], owner: str) -> None:
    from sqlglot import exp

    name = type(node).__name__
    if isinstance(node, exp.Anonymous):
        if node.name.lower() not in _ALLOWED_ANONYMOUS:
            raise _refuse(owner, expression, f"the function {node.name!r}")
        return
    if isinstance(node, exp.DataType):
        if node.this.name not in _CAST_TYPES or any(
            isinstance(child, exp.DataType) for child in node.expressions
        ):
            raise _refuse(owner, expression, f"a cast to {node.sql(dialect='duckdb')}")
        return
    if isinstance(node, exp.Column):
        if node.table:
            raise InvalidParameter(
                f"{owner}: qualified column {node.sql()!r} is not allowed; use bare names."
            )
        if node.name not in columns:
            raise DataError(
                f"{owner}: unknown column {node.name!r} in {expression!r}. Available "
                f"columns: {sorted(columns)}."
            )
        return
    if isinstance(node, exp.DataTypeParam):
        # DECIMAL(18, 3), VARCHAR(10): only integer literals. SQLGlot prints other
        # parameters as raw text, so a quoted identifier here would be SQL injected
        # outside TRY (found by the adversarial review).
        value = node.this
        if not (isinstance(value, exp.Literal) and not value.is_string and value.is_int):
            raise _refuse(owner, expression, f"the type parameter {node.sql()!r}")
        return
    if isinstance(node, exp.Var):
        # A date part (EXTRACT(year FROM d), INTERVAL 1 DAY): printed raw, so only a
        # known unit word, never a quoted identifier.
        if not (_DATE_PART.fullmatch(node.name) and node.name.lower() in _DATE_PARTS):
            raise _refuse(owner, expression, f"the date part {node.name!r}")
        return
    if name in _ALLOWED_NODES or name in ALLOWED_FUNCTIONS:
        return
    what = f"the function {node.sql_name()!r}" if isinstance(node, exp.Func) else name
    raise _refuse(owner, expression, what)


#: Largest size of an expression once the derived columns it uses are substituted
#: (SQLGlot nodes, counted with multiplicity). Engines inline derived columns, so a chain
#: d1 = d0 || d0, d2 = d1 || d1, ... doubles at each step: 20 steps exhausted memory in
#: DuckDB's planner (found by the adversarial review). Refused before anything runs.
MAX_EXPANDED_SIZE = 20_000


def expanded_size(expression: str, sizes: dict[str, int]) -> int:
    """Nodes of ``expression`` with each derived column it names counted at its own
    expanded size (``sizes``: derived column -> expanded size)."""
    import sqlglot
    from sqlglot import exp

    total = 0
    for node in sqlglot.parse_one(expression, read="duckdb").walk():
        total += sizes.get(node.name, 1) if isinstance(node, exp.Column) else 1
    return total


def validate_expression(expression: str, columns: Collection[str], owner: str) -> str:
    """Check ``expression`` against the grammar and return its total DuckDB form.

    Parameters
    ----------
    expression:
        A DuckDB scalar expression over ``columns``.
    columns:
        The column names it may use (the table's and earlier derived columns).
    owner:
        Named in error messages (``"Query.filter"``).

    Returns
    -------
    str
        ``TRY(<expression with every CAST made TRY_CAST>)``: it evaluates to a value or
        NULL on every row and never raises.

    Raises
    ------
    InvalidParameter
        The expression cannot be parsed or leaves the grammar (see the module docstring).
    DataError
        It names a column that does not exist.
    """
    import sqlglot
    from sqlglot import exp

    if not isinstance(expression, str) or not expression.strip():
        raise InvalidParameter.for_parameter("expression", owner, "a SQL expression", expression)
    try:
        tree = sqlglot.parse_one(expression, read="duckdb")
    except sqlglot.errors.ParseError as err:
        raise InvalidParameter(
            f"{owner}: cannot parse the SQL expression {expression!r}: {err}."
        ) from None
    for node in tree.walk():
        _check_node(node, expression, columns, owner)

    def no_raising_cast(node: Any) -> Any:
        if type(node) is exp.Cast:
            return exp.TryCast(this=node.this, to=node.args["to"])
        return node

    total = tree.transform(no_raising_cast)
    rendered = f"TRY({total.sql(dialect='duckdb')})"
    _check_rendered(rendered, expression, columns, owner)
    return rendered


def _check_rendered(rendered: str, expression: str, columns: Collection[str], owner: str) -> None:
    """Defence in depth against injection through SQLGlot's printer: the SQL we send
    must parse back to one ``TRY`` whose printing is the same text (a fixed point of
    parse-and-print), and the re-parsed tree must pass the grammar again."""
    import sqlglot
    from sqlglot import exp

    try:
        again = sqlglot.parse_one(rendered, read="duckdb")
    except sqlglot.errors.ParseError:
        again = None
    if not isinstance(again, exp.Try) or f"TRY({again.this.sql(dialect='duckdb')})" != rendered:
        raise _refuse(owner, expression, "text that does not print back as itself")
    for node in again.this.walk():
        _check_node(node, expression, columns, owner)
