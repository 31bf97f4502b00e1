"""Validation of public SQL expressions (filters, derived columns) with SQLGlot.

An expression may use column references (of the table or earlier derived columns),
literals, arithmetic/comparison/boolean operators, CASE, CAST, IN over literal lists
and scalar functions. Anything that could read other data -- subqueries, table
references, star, aggregates, window functions, table functions, placeholders -- is
refused, as are functions SQLGlot does not know (they could be table or
system functions). The check is a walk over SQLGlot's parse tree.

SQLGlot is imported lazily: a query without expressions never pays its import.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from dpkit.errors import DataError, InvalidParameter

__all__ = ["validate_expression"]

# Unknown-to-SQLGlot scalar functions that DuckDB provides and that only see their row.
_ALLOWED_ANONYMOUS = frozenset({"isnan", "isinf", "isfinite", "hash"})


def validate_expression(expression: str, columns: Collection[str], owner: str) -> str:
    """Parse ``expression`` as a DuckDB scalar expression and return it re-rendered.

    Raises InvalidParameter for disallowed constructs, DataError for unknown columns.
    """
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(expression, read="duckdb")
    except sqlglot.errors.ParseError as err:
        raise InvalidParameter(
            f"{owner}: cannot parse the SQL expression {expression!r}: {err}."
        ) from None
    forbidden: tuple[type[Any], ...] = (
        exp.Query,
        exp.Subquery,
        exp.Table,
        exp.Star,
        exp.AggFunc,
        exp.Window,
        exp.Placeholder,
        exp.Parameter,
        exp.Lambda,
        exp.Command,
        exp.UDTF,
    )
    for node in tree.walk():
        if isinstance(node, forbidden):
            raise InvalidParameter(
                f"{owner}: the expression {expression!r} uses {type(node).__name__}, which is "
                "not allowed: use only columns, literals, operators and scalar functions "
                "(no subqueries, tables, aggregates or window functions)."
            )
        if isinstance(node, exp.Anonymous) and node.name.lower() not in _ALLOWED_ANONYMOUS:
            raise InvalidParameter(
                f"{owner}: the function {node.name!r} in {expression!r} is not a known "
                "scalar function, so it is not allowed."
            )
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
    return str(tree.sql(dialect="duckdb"))
