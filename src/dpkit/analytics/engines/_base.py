"""What every engine shares: the :class:`Engine` interface and dpkit's type vocabulary.

An engine computes a :class:`~dpkit.analytics._plan.Plan`'s exact integer aggregates
and never draws noise. Types are named in one vocabulary, DuckDB's (``BIGINT``,
``DOUBLE``, ``VARCHAR``, ``DATE``, ``TIMESTAMP``, ``TIMESTAMP WITH TIME ZONE``,
``DECIMAL(p,s)``, ``BOOLEAN``...): an engine whose own names differ maps them in
:meth:`Engine.schema` (Spark's ``bigint`` is ``BIGINT``), so the compiler reasons about
one set of names. Expressions in a plan are in dpkit's canonical SQL, DuckDB's dialect
(as :mod:`dpkit.analytics._expr` renders them); an engine with another dialect
translates them (the Spark engine uses SQLGlot).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

from dpkit.analytics._order import OrderSpec
from dpkit.analytics._plan import Plan

__all__ = ["NUMBER_TYPES", "Engine", "EngineResult", "is_numeric", "quote"]

#: Per group key: the exact integer value of each statistic, in plan order.
EngineResult = dict[tuple[Any, ...], list[int]]

#: Type names (prefixes) of numbers; shared with dpkit.analytics.describe.
NUMBER_TYPES = (
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "UHUGEINT",
    "FLOAT",
    "DOUBLE",
    "REAL",
    "DECIMAL",
)
# Booleans aggregate as 0/1 in sums and means.
_NUMERIC = (*NUMBER_TYPES, "BOOLEAN")
_DECIMAL_TYPE = re.compile(r"DECIMAL\(\d+,\s*\d+\)")


def is_numeric(type_name: str) -> bool:
    """Whether a column of this type is a number (or a boolean, counted 0/1).

    The whole name must be a number type: ``INTEGER[]`` (a list) and
    ``STRUCT(a INTEGER)`` are not, although they start like one (a list passed as a
    sum's column bound, then failed on tables with rows: found by the property test
    of issue 27)."""
    upper = type_name.upper().strip()
    return upper in _NUMERIC or _DECIMAL_TYPE.fullmatch(upper) is not None


def quote(name: str) -> str:
    """An identifier in dpkit's canonical SQL (double quotes, as DuckDB and ANSI)."""
    return '"' + name.replace('"', '""') + '"'


class Engine(Protocol):
    """What a Session needs from an engine: schema, bind-only checks, exact aggregates."""

    def schema(self, derived: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
        """Column name -> type name, after adding ``derived`` columns (public metadata)."""
        ...

    def prepare(self, plan: Plan, orders: Sequence[OrderSpec] = ()) -> None:
        """Bind, without reading a row, every statement :meth:`aggregate` (if the plan
        has statistics) and :meth:`histograms` (one per spec) would run; raise
        EngineError (a schema-level message) if one does not bind."""
        ...

    def aggregate(self, plan: Plan) -> EngineResult:
        """The plan's exact integer statistics per group key (raises EngineError)."""
        ...

    def histograms(self, plan: Plan, spec: OrderSpec) -> dict[tuple[Any, ...], dict[int, int]]:
        """Per group key, the sparse grid histogram of an order statistic."""
        ...
