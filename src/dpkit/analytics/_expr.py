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

**Per-row cost** (docs/analytics.md, "Timing"): what one row costs to evaluate is
bounded by public constants times the lengths of that row's own values, so a secret
predicate cannot choose between a cheap and an expensive branch of more than a bounded
size. String literals are capped (:data:`MAX_LITERAL_CHARS` each,
:data:`MAX_TOTAL_LITERAL_CHARS` per expression and per query with derived columns
counted where they are used); a string built by concatenation holds at most
:data:`MAX_CONCAT_WIDTH` column values; a regular expression's pattern is a string
literal (compiled once, when the query is bound, never per row) of at most
:data:`MAX_PATTERN_STATES` states, and a query evaluates at most
:data:`MAX_PATTERN_MATCHES` of them per row. What is not closed: the time still depends
on the data (row counts, the lengths of the row's strings, a row whose expression
errors is re-evaluated alone inside ``TRY``: ~3.5 us per failing row on 10^7 rows), and
the bounded residual is measured (benchmarks/timing_residual.py); the per-query
deadline makes the time of an answer public.

SQLGlot is imported lazily: a query without expressions never pays its import.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from functools import lru_cache
from typing import Any

from dpkit.analytics._row_cost import (
    MAX_CONCAT_WIDTH,
    MAX_LITERAL_CHARS,
    MAX_PATTERN_MATCHES,
    MAX_PATTERN_STATES,
    MAX_TOTAL_LITERAL_CHARS,
    RowCost,
    check_query_cost,
    parsed_expression,
    pattern_states,
    row_cost,
)
from dpkit.errors import DataError, InvalidParameter

__all__ = [
    "ALLOWED_FUNCTIONS",
    "MAX_CONCAT_WIDTH",
    "MAX_EXPANDED_SIZE",
    "MAX_LITERAL_CHARS",
    "MAX_PATTERN_MATCHES",
    "MAX_PATTERN_STATES",
    "MAX_TOTAL_LITERAL_CHARS",
    "RowCost",
    "check_query_cost",
    "expanded_size",
    "pattern_states",
    "row_cost",
    "validate_expression",
]

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
        "BOOLEAN", "DATE", "TIMESTAMP", "TIMESTAMPNTZ", "TIMESTAMPTZ", "TIME",
    }
)  # fmt: skip
# SQLGlot (>= 26) reads DuckDB's TIMESTAMP as TIMESTAMPNTZ (and prints it back as
# TIMESTAMP): without that name, CAST(x AS TIMESTAMP) and TIMESTAMP '...' were refused.


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
    if isinstance(node, exp.Literal) and len(str(node.this)) > MAX_LITERAL_CHARS:
        raise InvalidParameter(
            f"{owner}: the expression {_short(expression)} has a literal of "
            f"{len(str(node.this))} characters; a literal may have at most "
            f"{MAX_LITERAL_CHARS} (and the literals of an expression, or of a query, "
            f"{MAX_TOTAL_LITERAL_CHARS} in all): a long literal chosen by a predicate on "
            "one row makes that row slow to evaluate, a timing side channel."
        )
    if isinstance(node, exp.RegexpLike):
        _check_regex(node, expression, owner)
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


def _short(expression: str) -> str:
    """``expression`` quoted for a message, cut to 80 characters (literals may be long)."""
    return repr(expression if len(expression) <= 80 else expression[:77] + "...")


def _check_regex(node: Any, expression: str, owner: str) -> None:
    from sqlglot import exp

    pattern = node.expression
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        # A pattern computed per row is compiled per row: a secret predicate choosing a
        # pattern that is slow to compile makes one row cost milliseconds to seconds
        # (measured: 9 ms for a 40-character pattern), and a pattern read from a column
        # can be malformed on some rows only.
        raise InvalidParameter(
            f"{owner}: the pattern of a regular expression must be a string literal (in "
            f"{_short(expression)}): a pattern computed from the row is compiled once per "
            "row, in a time that depends on the row."
        )
    try:
        states = pattern_states(str(pattern.this))
    except ValueError as err:
        raise InvalidParameter(
            f"{owner}: the regular expression {_short(str(pattern.this))} has {err}."
        ) from None
    if states > MAX_PATTERN_STATES:
        raise InvalidParameter(
            f"{owner}: the regular expression {_short(str(pattern.this))} has about {states} "
            f"states, more than the {MAX_PATTERN_STATES} allowed (each repetition x{{n}} "
            "counts n copies of x): matching time per character grows with the states, "
            "so a large pattern makes a long string slow to match, a timing side channel."
        )


#: Largest size of an expression once the derived columns it uses are substituted
#: (SQLGlot nodes, counted with multiplicity). Engines inline derived columns, so a chain
#: d1 = d0 || d0, d2 = d1 || d1, ... doubles at each step: 20 steps exhausted memory in
#: DuckDB's planner (found by the adversarial review). Refused before anything runs.
MAX_EXPANDED_SIZE = 20_000


def expanded_size(expression: str, sizes: dict[str, int]) -> int:
    """Nodes of ``expression`` with each derived column it names counted at its own
    expanded size (``sizes``: derived column -> expanded size)."""
    from sqlglot import exp

    total = 0
    for node in parsed_expression(expression).walk():
        total += sizes.get(node.name, 1) if isinstance(node, exp.Column) else 1
    return total


def validate_expression(expression: str, columns: Collection[str], owner: str) -> str:
    """Check ``expression`` (:func:`_validate`); an expression nested too deeply for
    the parser (about 40 levels) is refused the same way, before anything is spent.

    The check is a function of the expression, the column names and the owner alone
    (no data, no state), so its results are remembered: a Session compiles each
    query's expressions several times (the batch's compile, the query's own, the SQL
    front door's check), and ``describe`` spent ~15% of its time on a small table
    parsing the same expressions again. Refusals are not remembered (each raises anew).
    """
    if not isinstance(expression, str):
        return _checked(expression, columns, owner)
    return _remembered(expression, frozenset(columns), owner)


@lru_cache(maxsize=4096)
def _remembered(expression: str, columns: frozenset[str], owner: str) -> str:
    return _checked(expression, columns, owner)


def _checked(expression: str, columns: Collection[str], owner: str) -> str:
    try:
        return _validate(expression, columns, owner)
    except RecursionError:
        raise InvalidParameter(
            f"{owner}: the SQL expression {_short(expression)} is nested too deeply."
        ) from None


def _validate(expression: str, columns: Collection[str], owner: str) -> str:
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
    chars = sum(len(str(node.this)) for node in tree.find_all(exp.Literal))
    if chars > MAX_TOTAL_LITERAL_CHARS:
        raise InvalidParameter(
            f"{owner}: the literals of the expression {_short(expression)} have {chars} "
            f"characters in all; at most {MAX_TOTAL_LITERAL_CHARS} are allowed (each at "
            f"most {MAX_LITERAL_CHARS}): a long literal chosen by a predicate on one row "
            "makes that row slow to evaluate, a timing side channel."
        )

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
