"""Filters written without DuckDB's ``TRY`` where their types prove that they cannot raise.

Every analyst expression is made total by wrapping it in ``TRY(...)``
(:mod:`dpkit.analytics._expr`): an error on one row makes that row's value NULL instead of
failing the query, which closes the error oracle of the Session's threat model. ``TRY``
has a price for filters: DuckDB's optimizer treats it as opaque, so a condition inside it
is not pushed into the table scan (no skipping of row groups by their min/max, no
filtering before a join) and two copies of the same subquery whose filters are inside
``TRY`` are not recognised as one (a join's truncation reads its over-cap set twice). On
TPC-H at scale factor 1 the statements of Q3, Q5, Q10 and Q12 ran 19-32% faster with
their filters' comparisons written bare (measured statement against statement in one
process, benchmarks/results/tpch_sql.md).

So a filter's top-level ``AND`` terms that are **total by their types** are written bare,
ahead of the ``TRY`` of the whole filter, which stays unless every term is total::

    TRY(a AND b AND c)    ->    (a) AND (c) AND TRY(a AND b AND c)    (a, c total)
    TRY(a AND c)          ->    (a) AND (c)                          (all total)

**Same rows kept.** A row is kept by ``TRY(F)`` iff ``F`` evaluates to TRUE without an
error. If ``F = t_1 AND ... AND t_n`` is TRUE, every term is TRUE, so a total term ``a``
(which evaluates to TRUE, FALSE or NULL on every row, never an error) adds nothing; and
when every term is total, ``F`` cannot raise and ``TRY(F) = F``. The filter's type is
unchanged too: the bare terms are comparisons (BOOLEAN by construction) and the ``TRY``
part, when present, is the whole filter as before (its type is checked as before).

**Total by its types** (:func:`is_total`) is an allowlist, decided on the parse tree and
the table's column types (public; derived columns, whose types the engine computes, are
never total here):

* ``c IS [NOT] NULL`` for any column ``c``; a BOOLEAN column alone;
* ``c <op> v``, ``v <op> c``, ``c BETWEEN v AND w``, ``c [NOT] IN (v, ...)`` with ``<op>``
  one of ``= <> < <= > >=``, where every literal ``v`` is of a kind that DuckDB compares
  with ``c``'s type without casting ``c`` to a type that can fail:
  an integer literal of at most 2^63 - 1 in magnitude with an integer or floating-point
  column; a decimal or exponent literal with a floating-point column; a string with a
  VARCHAR column; ``DATE '...'`` with a DATE column, ``TIMESTAMP '...'`` with a
  TIMESTAMP column; TRUE or FALSE with a BOOLEAN column;
* ``c <op> d`` for two columns of the same type among those above;
* ``NOT``, ``AND``, ``OR`` and parentheses over total terms.

What is left out, and why (each one raises in DuckDB on some row value, found while
measuring this): a decimal literal against a HUGEINT column (``h < 1.5`` casts ``h`` to
DECIMAL(38,1), which fails above 10^37); a negative literal against an UHUGEINT
(``u > -1`` casts ``u`` to a signed type); an integer literal beyond 64 bits against a
FLOAT (``f > 10^54`` casts ``f`` to an arbitrary-precision integer, which fails on
infinity); DECIMAL columns (the common type of two decimals can be narrower than one of
them); a string literal against a non-VARCHAR column, and a DATE against a TIMESTAMP
(implicit casts of the column). ``tests/analytics/test_total_filter.py`` runs every
combination the allowlist accepts against each type's extreme values (NULL, NaN, the
infinities, the integer types' ends, the largest dates and timestamps) on DuckDB.

The argument takes each row alone, as the engine's own evaluation does. Statistics the
engine did not compute itself can break that: Parquet's row-group min and max leave NaN
out, and both engines pruned row groups by them, so a bare ``f <> 1`` dropped NaN rows
of other persons (found by the adversarial review of this module; the same held inside
``TRY`` for ``isnan(f)``). The sources keep such statistics away from queries: a Parquet
file's floating-point columns are read through ``TRY`` on DuckDB and copied on Spark
(:mod:`dpkit.analytics._sources`, :func:`dpkit.analytics.engines.spark.read_path`).

Spark runs dpkit's session with ANSI mode off (comparisons do not raise) and drops
``TRY`` in its translation, so the bare terms change nothing there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from dpkit.errors import InternalError

__all__ = ["FLOAT_TYPES", "INTEGER_TYPES", "is_total", "with_total_terms_bare"]

#: Integer column types an integer literal of at most 64 bits is compared with exactly
#: (DuckDB casts the literal, or widens the column to another integer type, never fails).
INTEGER_TYPES = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
     "UINTEGER", "UBIGINT"}
)  # fmt: skip
#: Floating-point column types: any numeric literal of at most 64 bits, decimal or not.
FLOAT_TYPES = frozenset({"FLOAT", "DOUBLE"})
#: Types two columns may share for a bare comparison of one with the other.
_PAIR_TYPES = INTEGER_TYPES | FLOAT_TYPES | {"VARCHAR", "DATE", "TIMESTAMP", "BOOLEAN"}
#: Typed string literals (``DATE '...'``) compared bare with a column of the same type.
_TYPED_LITERALS = frozenset({"DATE", "TIMESTAMP"})

_INTEGER_TEXT = re.compile(r"[0-9]+")
_DECIMAL_TEXT = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT64_MAX = 2**63 - 1


def _literal_kind(node: Any) -> str | None:
    """The kind of a literal operand ("integer", "decimal", "string", "boolean", "DATE",
    "TIMESTAMP"), or None for anything else (a column, an expression)."""
    from sqlglot import exp

    negated = isinstance(node, exp.Neg)
    if negated:
        node = node.this
        if not (isinstance(node, exp.Literal) and not node.is_string):
            return None
    if isinstance(node, exp.Boolean) and not negated:
        return "boolean"
    if isinstance(node, exp.Literal):
        text = str(node.this)
        if node.is_string:
            return "string"
        if _INTEGER_TEXT.fullmatch(text):
            return "integer" if int(text) <= _INT64_MAX else None
        if _DECIMAL_TEXT.fullmatch(text):
            return "decimal"
        return None
    if type(node) in (exp.Cast, exp.TryCast):
        operand, to = node.this, node.args.get("to")
        if isinstance(operand, exp.Literal) and operand.is_string and to is not None:
            name = to.sql(dialect="duckdb").upper()
            return name if name in _TYPED_LITERALS else None
    return None


def _column_type(node: Any, types: Mapping[str, str]) -> str | None:
    from sqlglot import exp

    if isinstance(node, exp.Column) and not node.table and node.name in types:
        return types[node.name].strip().upper()
    return None


def _compares_exactly(column_type: str, kind: str) -> bool:
    """Whether DuckDB compares a column of ``column_type`` with a literal of ``kind``
    without a cast of the column that can fail."""
    if column_type in INTEGER_TYPES:
        return kind == "integer"
    if column_type in FLOAT_TYPES:
        return kind in ("integer", "decimal")
    if column_type == "VARCHAR":
        return kind == "string"
    if column_type == "BOOLEAN":
        return kind == "boolean"
    return column_type in _TYPED_LITERALS and kind == column_type


_COMPARISONS = ("EQ", "NEQ", "LT", "LTE", "GT", "GTE")


def is_total(node: Any, types: Mapping[str, str]) -> bool:
    """Whether the condition ``node`` (SQLGlot, DuckDB dialect) evaluates to TRUE, FALSE
    or NULL on every row of a table with column ``types`` (name -> DuckDB type), never
    raising: the allowlist of the module docstring."""
    from sqlglot import exp

    if isinstance(node, exp.Paren | exp.Not):
        return is_total(node.this, types)
    if isinstance(node, exp.And | exp.Or):
        return is_total(node.left, types) and is_total(node.right, types)
    if isinstance(node, exp.Column):
        return _column_type(node, types) == "BOOLEAN"
    if isinstance(node, exp.Is):
        return isinstance(node.expression, exp.Null) and _column_type(node.this, types) is not None
    if type(node).__name__ in _COMPARISONS:
        left, right = node.this, node.expression
        left_type, right_type = _column_type(left, types), _column_type(right, types)
        if left_type is not None and right_type is not None:
            return left_type == right_type and left_type in _PAIR_TYPES
        column_type = left_type or right_type
        literal = right if left_type is not None else left
        kind = _literal_kind(literal)
        return column_type is not None and kind is not None and _compares_exactly(column_type, kind)
    if isinstance(node, exp.Between):
        column_type = _column_type(node.this, types)
        bounds = (node.args.get("low"), node.args.get("high"))
        return column_type is not None and all(
            (kind := _literal_kind(b)) is not None and _compares_exactly(column_type, kind)
            for b in bounds
        )
    if isinstance(node, exp.In):
        column_type = _column_type(node.this, types)
        values = node.expressions
        if column_type is None or not values or node.args.get("query") is not None:
            return False
        return all(
            (kind := _literal_kind(v)) is not None and _compares_exactly(column_type, kind)
            for v in values
        )
    return False


def with_total_terms_bare(whole: str, expression: str, types: Mapping[str, str]) -> str:
    """The filter ``expression`` as dpkit runs it: its total top-level ``AND`` terms bare,
    then ``whole`` (its checked ``TRY(...)`` form, :func:`dpkit.analytics._expr.
    validate_expression`) unless every term is total. See the module docstring."""
    return _bare(whole, expression, tuple(sorted(types.items())))


@lru_cache(maxsize=4096)
def _bare(whole: str, expression: str, types_items: tuple[tuple[str, str], ...]) -> str:
    import sqlglot
    from sqlglot import exp

    types = dict(types_items)
    tree = sqlglot.parse_one(expression, read="duckdb")
    terms = list(tree.flatten()) if isinstance(tree, exp.And) else [tree]
    bare = [term for term in terms if is_total(term, types)]
    if not bare:
        return whole

    def no_raising_cast(node: Any) -> Any:
        if type(node) is exp.Cast:
            return exp.TryCast(this=node.this, to=node.args["to"])
        return node

    pieces = [f"({term.transform(no_raising_cast).sql(dialect='duckdb')})" for term in bare]
    if len(bare) < len(terms):
        pieces.append(whole)
    rendered = " AND ".join(pieces)
    _check_rendered(rendered, whole, types)
    return rendered


def _check_rendered(rendered: str, whole: str, types: Mapping[str, str]) -> None:
    """Defence in depth, as for every expression (``_expr._check_rendered``): the text
    sent must parse back to bare terms that are total on their own parse, optionally
    followed by exactly ``whole``."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(rendered, read="duckdb")
    terms = list(tree.flatten(unnest=False)) if isinstance(tree, exp.And) else [tree]
    if isinstance(terms[-1], exp.Try):
        if f"TRY({terms[-1].this.sql(dialect='duckdb')})" != whole:
            raise InternalError(f"a filter's TRY part does not print back as {whole!r}")
        terms = terms[:-1]
    if not terms or not all(isinstance(t, exp.Paren) and is_total(t, types) for t in terms):
        raise InternalError(f"a filter's bare terms are not all total: {rendered!r}")
