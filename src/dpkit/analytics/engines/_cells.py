"""The bounded, coded table that private synthesis measures (:mod:`dpkit.synth`).

One statement returns, for every combination of column codes that occurs, the number
of rows with it after contribution bounding: with a privacy unit each person keeps at
most ``max_rows`` rows in all. Everything the engine returns is integers (codes and
counts), computed in SQL from the canonical form of each column, so rule 2 of the
Session's threat model holds (the engine's equality is the only equality).

Contribution bounding
---------------------
Each person's rows are grouped into (person, cell) pairs with their row counts; the
pairs are ordered by a keyed hash of (person, cell) with ties by the cell's codes --
an order that depends on that person's rows and the secret salt only -- and the person
keeps the first ``max_rows`` rows along it (a running sum over the pairs). Adding or
removing one person therefore changes the cell counts by at most ``max_rows`` in L1
norm and in L2 norm (all kept rows in one cell is the worst case), which is the
sensitivity every measurement of :mod:`dpkit.synth` is calibrated to. Rows with a NULL
person are dropped (they belong to nobody the guarantee could protect).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.analytics._canonical import key_category, to_engine
from dpkit.analytics._plan import PartScope
from dpkit.analytics.engines._hash import TypedPart
from dpkit.errors import InternalError

__all__ = ["CellSpec", "cell_counts", "cell_counts_sql"]


@dataclass(frozen=True, slots=True)
class CellSpec:
    """What to count: coded columns (dpkit.synth._columns.ColumnCode), the bound."""

    columns: tuple[Any, ...]  # ColumnCode (kept untyped here to avoid an import cycle)
    unit: str | None
    max_rows: int
    salt: int
    partitions: tuple[PartScope, ...] = ()


def _literal(x: float) -> str:
    # Only finite numbers are written into SQL (repr(inf) is 'inf', which SQL would
    # read as a column name); the codings refuse bounds that would need one.
    if not math.isfinite(x):
        raise InternalError("a non-finite number reached the SQL of a coded table.")
    return f"CAST({float(x)!r} AS DOUBLE)"


def _code_sql(engine: Any, column: Any, types: dict[str, str], i: int) -> tuple[str, str | None]:
    """SQL of column ``i``'s code (NULL when the row is dropped) and a CTE of its keys."""
    # Qualified: the code tables' own columns (__k, __c) are joined in beside the row's,
    # and a table column of that name would make an unqualified reference ambiguous
    # (a failure after the charge; tests/adversarial/test_internal_name_attacks.py).
    canon = engine.canonical_key_sql(f"__src.{engine.q(column.name)}", types[column.name])
    null_code = "NULL" if not column.nulls else str(column.size - 1)
    if column.categorical:
        # A LEFT JOIN on a VALUES table of (canonical key, code): the engine compares.
        return f"coalesce(__d{i}.__c, {null_code})", f"__d{i}"
    last = column.bins - 1
    if column.cuts:
        # Bins cut at released edges: clamp in the column's own type (integers, within
        # +-2^53 as the coding checks) or as DOUBLE (+-inf to an end; NaN's canonical
        # form is NULL), then one comparison per edge, in order: a public number of
        # them per row (at most 1.5 x PrivateBins.bins, 47 for the default 32).
        if column.whole:
            low, high = int(column.low), int(column.high)
            x = f"CAST(least(greatest({canon}, {low}), {high}) AS BIGINT)"
            tests = [f"WHEN {x} < {int(c)} THEN {j}" for j, c in enumerate(column.cuts)]
        else:
            bounded = f"least(greatest(CAST({canon} AS DOUBLE), {_literal(column.low)}), "
            x = f"{bounded}{_literal(column.high)})"
            tests = [f"WHEN {x} < {_literal(c)} THEN {j}" for j, c in enumerate(column.cuts)]
        code = f"CAST(CASE {' '.join(tests)} ELSE {last} END AS INTEGER)"
    elif column.width:
        # Integer-like bins: clamp in the column's own type first, so the arithmetic
        # only ever sees values inside the public bounds (|bounds| <= 2^53, checked by
        # the coding): no row value can overflow it (a BIGINT near 2^63, a UBIGINT).
        low, high = int(column.low), int(column.high)
        clamped = f"CAST(least(greatest({canon}, {low}), {high}) AS BIGINT)"
        code = f"CAST({engine.int_div(f'({clamped} - {low})', str(column.width))} AS INTEGER)"
    else:
        x = f"CAST({canon} AS DOUBLE)"
        scale = column.bins / (column.high - column.low)
        index = f"floor(({x} - {_literal(column.low)}) * {_literal(scale)})"
        # Clamped into [0, bins - 1] before the cast (+-inf and huge values too).
        code = f"CAST(least(greatest({index}, 0), {last}) AS INTEGER)"
    return f"(CASE WHEN {canon} IS NULL THEN {null_code} ELSE {code} END)", None


def cell_counts_sql(engine: Any, spec: CellSpec) -> tuple[str, list[Any]]:
    """The statement and its parameters (see the module docstring)."""
    types = engine.schema()
    source, params = engine._source((), spec.partitions, spec.unit)
    ctes: list[str] = []
    ctes_params: list[Any] = []
    joins: list[str] = []
    codes: list[str] = []
    for i, column in enumerate(spec.columns):
        code, table = _code_sql(engine, column, types, i)
        codes.append(f"{code} AS __c{i}")
        if table is not None:
            category = key_category(types[column.name]) or ""
            rows = ", ".join(f"(?, {j})" for j in range(len(column.values)))
            ctes.append(f"{table}(__k, __c) AS (VALUES {rows})")
            ctes_params.extend(to_engine(v, category) for v in column.values)
            canon = engine.canonical_key_sql(f"__src.{engine.q(column.name)}", types[column.name])
            joins.append(f" LEFT JOIN {table} ON {canon} = {table}.__k")
    names = [f"__c{i}" for i in range(len(spec.columns))]
    unit = f"__src.{engine.q(spec.unit)} AS __u, " if spec.unit is not None else ""
    base = f"SELECT {unit}{', '.join(codes)} FROM ({source}) AS __src{''.join(joins)}"
    where = [f"{n} IS NOT NULL" for n in names]
    if spec.unit is not None:
        where.append("__u IS NOT NULL")
    ctes.append(f"__coded AS (SELECT * FROM ({base}) AS __b WHERE {' AND '.join(where)})")
    cells = ", ".join(names)
    if spec.unit is None:
        final = f"SELECT {cells}, count(*) FROM __coded GROUP BY {cells}"
    else:
        keyed = engine._hash(spec.salt)
        parts = [TypedPart("__u", types[spec.unit])] + [TypedPart(n, "INTEGER") for n in names]
        ctes.append(
            f"__pairs AS (SELECT __u, {cells}, count(*) AS __n FROM __coded GROUP BY __u, {cells})"
        )
        linear = f"(SELECT *, {keyed.linear(parts)} AS __hl FROM __pairs) AS __pl"
        ctes.append(f"__hashed AS ({keyed.finished(linear, '__hl', '__h')})")
        ctes.append(
            f"__run AS (SELECT {cells}, __n, sum(__n) OVER (PARTITION BY __u ORDER BY "
            f"__h, {cells} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS __cum "
            "FROM __hashed)"
        )
        m = int(spec.max_rows)
        # Rows of this pair kept: what is left of the person's max_rows before it.
        kept = f"least(__n, greatest({m} - (__cum - __n), 0))"
        final = (
            f"SELECT {cells}, sum({kept}) AS __kept FROM __run WHERE __cum - __n < {m} "
            f"GROUP BY {cells}"
        )
    # The VALUES tables' parameters come first (their CTEs precede the source's).
    return "WITH " + ", ".join(ctes) + " " + final, [*ctes_params, *params]


def cell_counts(engine: Any, spec: CellSpec) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Run :func:`cell_counts_sql`: ``(codes, counts)``, codes of shape (cells, columns)."""
    sql, params = cell_counts_sql(engine, spec)
    rows: Sequence[tuple[Any, ...]] = engine._execute(sql, params)
    width = len(spec.columns)
    if not rows:
        return np.zeros((0, width), dtype=np.int64), np.zeros(0, dtype=np.int64)
    array = np.array(rows, dtype=np.int64)
    return array[:, :width], array[:, width]


def bind_cell_counts(engine: Any, spec: CellSpec) -> None:
    """Bind the statement without reading a row (before any charge)."""
    sql, params = cell_counts_sql(engine, spec)
    engine._bind(sql, params)
