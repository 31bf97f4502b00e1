"""The per-person step of a query (:meth:`dpkit.analytics.Query.per_person`): one row per
person (and value of ``by``) holding aggregates of that person's rows, written in SQL
as a relation the rest of the query reads.

Why it is stable
    Neighbouring databases differ by one person with all their rows (the Session's
    relation; ``dpkit.analytics._joins`` for several tables). The step groups the rows
    by the person's privacy unit (and ``by``), in canonical form (rule 2 of the threat
    model: the engine's equality, made in SQL, is the only equality), after dropping the
    rows with no person. So every output row is computed from the rows of exactly one
    person, and its value depends on those rows only: adding or removing a person adds
    or removes that person's output rows and leaves every other row as it was. A person
    has at most as many output rows as input rows (each output row is a non-empty group
    of their rows), and exactly one when ``by`` is empty. The step is therefore a stable
    transformation in the sense the single-table path needs (the same argument as a
    row-by-row map, with "row" read as "group of one person's rows"), and
    :meth:`~dpkit.analytics.Query.bound` then bounds each person's contribution to every
    statistic as usual: the sensitivity is what ``bound`` says, whatever the step
    computed. This is the "per-user aggregation" that GoogleSQL runs before its
    anonymised aggregates (Wilson et al., "Differentially Private SQL with Bounded User
    Contribution", PoPETs 2020) and Qrlew's per-privacy-unit rewriting, exposed as a
    step of its own.

Nothing fails after the charge (rule 1)
    The aggregates are total: ``count`` is an integer; ``sum`` and ``mean`` are exact
    sums of integers (each value clamped and put on a fixed grid, :data:`SUM_GRID`,
    :data:`SUM_LIMIT`: a BIGINT or DECIMAL sum could overflow on some tables only, and
    Spark's BIGINT sum wraps or raises); ``min``/``max`` keep the column's type (DOUBLE
    and text in canonical form) and cannot fail.

One person's row, whatever the order of their rows
    A DOUBLE sum depends on the order of its terms, and a ``min`` of values equal in
    canonical form (``0.0`` and ``-0.0``; ``'a'`` and ``'A'`` under a NOCASE collation)
    returns the spelling of whichever row came first. The order can depend on where
    other persons' rows sit, so either would let another person's presence change this
    person's row. Sums are therefore exact, and DOUBLE and text values are returned in
    canonical form (:func:`_one_spelling`): each output is a function of the multiset
    of the person's rows. Aggregate arguments, filters and derived columns are the builder's total
    expressions (``dpkit.analytics._expr``), checked and costed (rule 3) before
    anything runs, and the whole relation is bound by the engine (DESCRIBE / Spark's
    analysis) before the charge.

Per-row cost (rule 3)
    One GROUP BY over the rows the query reads: its cost is linear in those rows; each
    aggregate's output is one value of a fixed-size type (or the column's own value for
    ``min``/``max``), never a collection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dpkit.analytics._canonical import key_category
from dpkit.analytics._compile import _bounded_size, _check_filter_types, validated_rows
from dpkit.analytics._expr import validate_expression
from dpkit.analytics._joins import JoinedView
from dpkit.analytics._plan import PartScope
from dpkit.analytics._row_cost import check_query_cost
from dpkit.analytics.engines._base import is_numeric
from dpkit.analytics.query import PerPerson
from dpkit.errors import DataError, InvalidParameter

__all__ = ["PersonRows", "person_relation"]

_OWNER = "Query.per_person"


@dataclass(frozen=True)
class PersonRows:
    """What ``explain`` and a result's notes say of the per-person step (public)."""

    unit: str
    by: tuple[str, ...]
    aggregates: tuple[tuple[str, str, str | None], ...]
    joined: JoinedView | None = None

    def _aggregates(self) -> str:
        return ", ".join(
            f"{name} = {kind}({'*' if expression is None else expression})"
            for name, kind, expression in self.aggregates
        )

    def lines(self) -> tuple[str, ...]:
        """``explain``'s description of the rows the query reads."""
        out = list(self.joined.lines()) if self.joined is not None else []
        per = ", ".join([repr(self.unit), *map(repr, self.by)])
        rows = "one row per person" if not self.by else "one row per person and value of by"
        out.append(
            f"per person ({per}): {rows}, computed from that person's rows only; "
            f"{self._aggregates()}"
        )
        out.append("  contribution bounds apply to the per-person rows, per person")
        return tuple(out)

    def summary(self) -> str:
        """One line for a result's notes."""
        first = f"{self.joined.summary()} " if self.joined is not None else ""
        by = f" and {', '.join(self.by)}" if self.by else ""
        return (
            f"{first}Rows aggregated per person{by} first ({self._aggregates()}); "
            "contribution bounds applied to those rows."
        )


def person_relation(
    engine: Any,
    schema: Mapping[str, str],
    unit: str | None,
    step: PerPerson,
    partitions: Sequence[PartScope] = (),
) -> tuple[str, list[Any]]:
    """SQL of the per-person rows of ``step`` over ``engine``'s relation (whose columns
    are ``schema``), and its parameters. ``partitions`` (a single-table Session's) are
    applied to the rows first. Public information only: a refusal here spends nothing."""
    if not isinstance(step, PerPerson):
        raise InvalidParameter.for_parameter("per_person_step", _OWNER, "a PerPerson", step)
    # Checked again here: a frozen dataclass's fields can still be set by hand
    # (object.__setattr__), and the SQL below is written from them.
    step.__post_init__()
    names_seen = [n.casefold() for n, _, _ in step.aggregates] + [b.casefold() for b in step.by]
    if len(set(names_seen)) != len(names_seen):
        raise InvalidParameter(f"{_OWNER}: the names of by and the aggregates must differ.")
    reserved = [c for c in schema if c.casefold().startswith("__dpkit")]
    if reserved:
        # The step names its own columns __dpkit_...: a table column of that name would
        # be read in their place (found by the review).
        raise InvalidParameter(
            f"{_OWNER}: the column {reserved[0]!r} uses the prefix __dpkit, reserved for "
            "dpkit's own columns; rename it."
        )
    if unit is None:
        raise InvalidParameter(
            f"{_OWNER}: the Session has no privacy unit (each row is a person), so there "
            "is nothing to aggregate per person; open the Session with privacy_unit=."
        )
    derived, filters, known, sizes = validated_rows(step.derived, step.filters, schema, _OWNER)
    # Each aggregate's argument is one more derived column (named so no table column can
    # be: the prefix __dpkit is refused above), costed like the others.
    arguments = [
        (f"__dpkit_a{i}", argument)
        for i, (_, _, argument) in enumerate(step.aggregates)
        if argument is not None
    ]
    rendered = list(derived)
    for alias, argument in arguments:
        rendered.append((alias, validate_expression(argument, known, _OWNER)))
        _bounded_size(argument, sizes, _OWNER)
    check_query_cost([*step.derived, *arguments], step.filters, _OWNER)
    _check_filter_types(step.filters, filters, tuple(derived), known, engine.schema)
    types = engine.schema(tuple(rendered))
    for column in step.by:
        if column not in known:
            raise DataError(f"{_OWNER}: unknown column {column!r} in by. Columns: {sorted(known)}.")
        if column.casefold() == unit.casefold():
            raise InvalidParameter(
                f"{_OWNER}: {column!r} is the privacy unit, always grouped; leave it out of by."
            )
        if key_category(types[column]) is None:
            raise InvalidParameter(
                f"{_OWNER}: by column {column!r} has type {types[column]}, which has no "
                "canonical form to group on."
            )
    names = [unit.casefold(), *(c.casefold() for c in step.by)]
    outputs: list[str] = []
    for i, (name, kind, expression) in enumerate(step.aggregates):
        if name.casefold() in names:
            raise InvalidParameter(f"{_OWNER}: {name!r} is also the unit or a by column.")
        names.append(name.casefold())
        if expression is None:
            outputs.append(f"count(*) AS {engine.q(name)}")
            continue
        argument = f"__dpkit_a{i}"
        type_name = types[argument]
        if kind in ("sum", "mean") and not is_numeric(type_name):
            raise DataError(
                f"{_OWNER}: {name} = {kind}({expression}) has type {type_name}, but a "
                "number is needed."
            )
        if kind in ("min", "max") and key_category(type_name) is None:
            raise DataError(
                f"{_OWNER}: {name} = {kind}({expression}) has type {type_name}, which is "
                "not ordered here."
            )
        if kind == "count":
            outputs.append(f"count({argument}) AS {engine.q(name)}")
        elif kind in ("sum", "mean"):
            outputs.append(f"{_exact_sum(engine, argument, kind)} AS {engine.q(name)}")
        else:
            value = _one_spelling(engine, argument, type_name)
            outputs.append(f"{kind}({value}) AS {engine.q(name)}")
    source, params = engine._source(tuple(rendered), partitions, unit)
    unit_sql = engine.canonical_key_sql(engine.q(unit), schema[unit])
    # Group keys in canonical form, computed in an inner projection (so no output name
    # can shadow them); each output column is the min of values equal in that form,
    # written in one spelling (_one_spelling), so the same whatever the rows' order.
    # Where the one spelling is the canonical form itself (integers, booleans, decimals),
    # the output column is the group key, with no min() to compute per row (TPC-H Q18's
    # statement: ~6% faster).
    inner, select, groups = [], [], []
    for i, (column, type_name) in enumerate(
        [(unit, schema[unit]), *((c, types[c]) for c in step.by)]
    ):
        key = engine.canonical_key_sql(engine.q(column), type_name)
        inner.append(f"{key} AS __dpkit_pk{i}")
        groups.append(f"__dpkit_pk{i}")
        if _output_is_key(engine, column, type_name):
            select.append(f"__dpkit_pk{i} AS {engine.q(column)}")
        else:
            value = _one_spelling(engine, engine.q(column), type_name)
            inner.append(f"{value} AS __dpkit_pb{i}")
            select.append(f"min(__dpkit_pb{i}) AS {engine.q(column)}")
    inner += [engine.q(name) for name, _ in arguments]
    where = [f"({engine.expression(f, tuple(rendered))})" for f in filters]
    where.append(f"{unit_sql} IS NOT NULL")
    sql = (
        f"(SELECT {', '.join([*select, *outputs])} FROM (SELECT {', '.join(inner)} FROM "
        f"({source}) AS __dpkit_pp WHERE {' AND '.join(where)}) AS __dpkit_pq GROUP BY "
        f"{', '.join(groups)})"
    )
    return sql, params


def _output_is_key(engine: Any, column: str, type_name: str) -> bool:
    """Whether ``column``'s output in the per-person rows is its group key itself: where
    its one spelling is its canonical form (integers, booleans, decimals)."""
    value = _one_spelling(engine, engine.q(column), type_name)
    return bool(engine.canonical_key_sql(engine.q(column), type_name) == f"({value})")


def one_row_per_unit(engine: Any, schema: Mapping[str, str], unit: str, step: PerPerson) -> bool:
    """Whether the per-person rows of ``step`` (:func:`person_relation`) hold at most one
    row per value of ``unit``, in the engine's own equality -- the fact that lets the
    engine skip ranking a unit's groups (``SqlEngine._ranks_groups``).

    True when ``by`` is empty and the unit's output column is its group key: the rows
    are then grouped by exactly the values the later query groups its units by, with
    the same engine's equality, so no two rows share a unit. (Where the output is a
    spelling of a canonical class -- text, DOUBLE -- two classes the canonical form
    tells apart could still be equal to the engine, under a collation: not claimed.)
    A fact of the SQL, the same on every table."""
    return not step.by and _output_is_key(engine, unit, schema[unit])


#: Per-person sums are exact: each value clamped to +-SUM_LIMIT and rounded to a
#: multiple of 1/SUM_GRID, summed as integers (each below 2^62: no overflow), so the
#: result is a function of the person's values only, not of the order the engine adds
#: them in (a DOUBLE sum is not: 1e16 + 1 - 1e16 is 0 or 1 by order; found by the
#: review). Public constants, stated in docs/analytics.md.
SUM_GRID = 2**16
SUM_LIMIT = 2**46


def _exact_sum(engine: Any, argument: str, kind: str) -> str:
    """SQL of the exact per-person sum (or mean: the exact sum over the count of values)
    of ``argument``, as DOUBLE; NULL and NaN values are skipped, +-inf clamped."""
    x = f"CAST({argument} AS DOUBLE)"
    clamped = f"LEAST(GREATEST({x}, CAST({-SUM_LIMIT} AS DOUBLE)), CAST({SUM_LIMIT} AS DOUBLE))"
    scaled = f"CAST(ROUND({clamped} * {SUM_GRID}) AS BIGINT)"
    value = f"(CASE WHEN {x} IS NULL OR isnan({x}) THEN NULL ELSE {scaled} END)"
    total = f"(CAST({engine.wide_sum(value)} AS DOUBLE) / {SUM_GRID})"
    if kind == "sum":
        return total
    # The count is an integer: no division by zero (NULL when the person has no value).
    return f"(CASE WHEN count({value}) = 0 THEN NULL ELSE {total} / count({value}) END)"


def _one_spelling(engine: Any, sql: str, type_name: str) -> str:
    """``sql`` in one spelling per canonical value: DOUBLE values as their canonical form
    (one zero; NaN as NULL), strings byte-wise (whatever the collation: 'a' and 'A'
    under NOCASE are two values, as in every comparison of dpkit's). Other types have
    one spelling per value already. A min or max over it, or the one value of a group,
    does not depend on which row the engine met first (found by the review)."""
    if key_category(type_name) in ("double", "text"):
        return str(engine.canonical_key_sql(sql, type_name))
    return sql
