"""The SQL every engine runs, written once: :class:`SqlEngine`.

A SQL engine is this class plus a dialect: a subclass sets a handful of spellings
(:class:`SqlEngine`'s "dialect" attributes and methods: identifier quotes, the wide
integer type, integer division, a semi join, array access...) and says how to run a
statement. Everything that carries a privacy argument -- contribution bounding, the
fixed-point sums, the keyed hash -- is here, once, so DuckDB and Spark compute the same
integers from the same rows (tests/engines/test_parity.py compares them bit for bit).

Why not SQLGlot for the whole statement: transpiling the DuckDB statements to Spark
(measured with SQLGlot 30) silently dropped ``arg_min``'s third argument (keep ``m``
values became keep one), kept DuckDB's 1-based list subscript ``e[i]`` in a dialect
where ``e[i]`` is 0-based, kept ``hash`` (a different function in Spark) and emitted a
type (``INT128``) Spark does not have: wrong numbers, not errors. The statements below
use a small, explicit set of dialect hooks instead. SQLGlot is used where it serves --
for the user's expressions (:meth:`SqlEngine.expression`), which come from a small
allowlisted grammar (:mod:`dpkit.analytics._expr`) whose every construct is tested on
both engines.

Contribution bounding (privacy unit ``u``, group ``g``, at most ``k`` groups per unit
and ``m`` rows per unit and group) happens in the engine, and each unit's contribution
depends only on that unit's rows and a secret per-query salt ``s``:

1. ``pairs``: one row per (u, g) with its row count ``c`` and exact integer sums ``S``
   (of the clamped fixed-point values, of their squares, of non-missing values).
2. A pair with ``c <= m`` contributes all its rows. A pair with ``c > m`` is scaled to
   ``m`` rows' worth: count ``m``, each sum ``trunc(S * m / c)`` computed exactly in
   integers -- a person with more than ``m`` rows in a group contributes the average of
   their rows, ``m`` times. Each scaled sum stays in ``m`` times the one-row range, so
   the sensitivities are those of ``m`` kept rows (proof at the SQL). This is the
   expectation of keeping ``m`` rows drawn at random, with less variance, and it needs
   no row-level ranking. Means stay consistent: the sum and the count of values of a
   pair are scaled by the same factor ``m / c``.
3. Each unit keeps its ``k`` groups of smallest ``(H(s, u, g), g)`` where ``H`` is
   dpkit's keyed hash (:mod:`._hash`).
3b. With a total bound ``T`` (rows per unit over all groups), a unit whose kept pairs
   count more than ``T`` rows has them all scaled by the same factor, to ``T`` rows'
   worth in all (:meth:`SqlEngine._total_bounded`).
4. Final ``GROUP BY g``.

Statistics that need real rows (grid histograms for quantiles) keep, for a pair with
more than ``m`` non-missing values, the ``m`` of smallest ``(H(s, u, g, i), i)`` where
``i`` is the value's grid index (rows of one index are interchangeable in a histogram);
their groups are chosen by the same rule as step 3.

Rows whose privacy unit or a group key is NULL are dropped (they cannot be attributed
to a person, and dropping rows one by one is stable). Nothing but per-group aggregates
leaves the engine.

Failures (the Session's threat model, docs/analytics.md): every statement the engine
will run for a query is first *bound* (:meth:`SqlEngine.prepare`), which checks names,
types and functions without reading a row; a failure there depends on the schema and
the query only and is reported before anything is charged. The SQL itself cannot fail
on row values: user expressions are total (:mod:`dpkit.analytics._expr`), keys are of
the column's type (:mod:`dpkit.analytics._keys`), integer widths follow from public
bounds (below), and the hash's arithmetic stays below 2^63. Group, key and partition
columns are read through their canonical SQL form (:meth:`SqlEngine.canonical_key_sql`,
:mod:`dpkit.analytics._canonical`), so only integers and canonical keys come back. What
can still fail while rows are read (out of memory, a disk error) happens after the
charge and fails closed in the Session (the ledger is locked).

Why this module is long (~600 lines): it is the one place where dpkit writes SQL, and
the contribution-bounding statements carry their proofs in comments next to them.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

from dpkit.analytics._canonical import (
    DAYS_RANGE,
    MICROS_RANGE,
    crossing_type,
    from_engine,
    key_category,
    to_engine,
)
from dpkit.analytics._order import OrderSpec, snap_sql
from dpkit.analytics._plan import PartScope, Plan, Statistic
from dpkit.analytics.engines._base import EngineResult
from dpkit.analytics.engines._hash import SMALL_INDEX, HashDialect, KeyedHash, TypedPart
from dpkit.errors import DataError, InvalidParameter

__all__ = ["SqlEngine"]


def _finite_repr(value: float) -> str:
    text = repr(float(value))
    if text in ("inf", "-inf", "nan"):
        raise DataError(f"A bound {text} cannot be used in SQL.")
    return text


def _literal(value: float) -> str:
    return f"CAST({_finite_repr(value)} AS DOUBLE)"


#: Public keys of one column up to this many are bound twice: in the IN list that
#: filters the rows and in a VALUES table of the distinct groups (SqlEngine._rows).
FEW_KEYS = 256
#: Step 2 of the bounding: a pair of more rows than this gets a fixed value for a sum
#: whose one-row summand is below 2^31 (SqlEngine._pair_narrow): below it, the pair's
#: sum is below 2^62 and BIGINT arithmetic is exact on every engine.
PAIR_ROWS = 2**31
#: A packed group key (SqlEngine._packs_groups) is ``rank * PACK + slice``: the keyed
#: hash's group slice lies in [0, p) with p = 2^31 - 1 < PACK, so the two parts come
#: back as ``key // PACK`` and ``key % PACK``; a rank below 2^32 keeps it below 2^63.
PACK = 2**31


def _window_limit(limit: int, column: str) -> str:
    """SQL of ``limit`` for ``row_number() OVER (...) <= limit``, written as
    ``limit + 0 * column`` (``column`` a non-NULL BIGINT of the window's rows): the
    same number, which DuckDB's optimiser does not see as a constant, so it keeps the
    window instead of rewriting it into a top-n aggregate (``arg_min(..., n)``).
    Measured on 10^7 rows, the rewrite made the pairs' ranking 1.5-1.6x slower
    (benchmarks/results/session.md); the _distinct_values ranking was written as a
    window for its memory, which the rewrite also undid."""
    return f"({int(limit)} + 0 * {column})"


def _bin_search(x: str, interior: Sequence[str], low: int = 0, high: int | None = None) -> str:
    """SQL of the bin index of ``x`` among sorted interior edges: the first ``i`` with
    ``x < interior[i]``, or ``len(interior)`` if none (bins ``[e_i, e_(i+1))``).

    A binary search written as nested CASEs: about log2(n) comparisons per row instead
    of up to n for a chain of WHENs (describe's 165 magnitude edges: 8 instead of up to
    165; issue 34 measured the chain at 25-50% of each range query). ``x < e_i`` is
    monotone in ``i`` for sorted edges, so the search finds what the chain found.
    """
    high = len(interior) if high is None else high
    if low == high:
        return str(low)
    middle = (low + high) // 2
    below = _bin_search(x, interior, low, middle)
    above = _bin_search(x, interior, middle + 1, high)
    return f"(CASE WHEN {x} < {interior[middle]} THEN {below} ELSE {above} END)"


def power_ladder(interior: Sequence[float]) -> tuple[int, int] | None:
    """``(lo, hi)`` when ``interior`` is exactly ``-2^hi, ..., -2^lo, 0, 2^lo, ..., 2^hi``
    (consecutive integer exponents; describe's and synthesis' magnitude bins), else None.

    Such edges have an arithmetic bin index (:meth:`SqlEngine._ladder_index`)."""
    half = len(interior) // 2
    if len(interior) < 3 or len(interior) % 2 == 0 or interior[half] != 0.0:
        return None
    positive = [float(e) for e in interior[half + 1 :]]
    lo = math.frexp(positive[0])[1] - 1
    hi = lo + len(positive) - 1
    if lo < -1000 or hi > 1000:  # 2^(lo - 1) and 2^(hi + 1) must be normal doubles
        return None
    for j, edge in enumerate(positive):
        if edge != 2.0 ** (lo + j) or interior[half - 1 - j] != -edge:
            return None
    return lo, hi


class SqlEngine:
    """The SQL of a plan, for an engine that runs SQL (subclasses set the dialect)."""

    # ------------------------------------------------------------------ dialect
    #: Hint on the row-level CTEs read twice by the quantile path (DuckDB would
    #: otherwise materialise every row: 3.4 GB at 10^8 rows; 1.4 GB without).
    cte_hint = ""
    #: An exact integer type wide enough for 2^124 (sums of scaled pair sums).
    wide = "HUGEINT"
    #: A semi join (rows of the left side with a match on the right).
    semi_join = "SEMI JOIN"
    #: An anti join (rows of the left side with no match on the right).
    anti_join = "ANTI JOIN"
    #: The table function expanding a list into rows, in a SELECT list.
    explode = "unnest"
    #: Largest ``n`` of ``min_by(x, key, n)`` (DuckDB takes n below 10^6).
    top_n_limit = 999_999
    #: The string type for CAST.
    text = "VARCHAR"
    #: Step 3 computes the group slice of the keyed hash once per distinct group and
    #: joins it (:meth:`SqlEngine._keep_groups`), instead of once per (unit, group)
    #: pair. Both forms keep the same groups (the parity tests run DuckDB in one form
    #: and Spark in the other); each engine takes the one measured faster on it.
    hash_groups_once = True
    #: Whether several plans' grid histograms run as one statement (engines._batch).
    #: Spark does not: it recomputes the shared rows' CTE in every plan's branch, so 16
    #: quantile plans over 500 rows took 35 s in one statement and 65 ran out of memory
    #: (after the charge); each plan's own statement takes ~0.3 s.
    shares_histograms = True
    #: Whether several row-level ungrouped plans' sums run as one statement
    #: (engines._batch.row_sums_sql). DuckDB does not: one aggregate over the rows with
    #: each plan's filter in a CASE made describe slower at 10^6 rows (2.2 s against
    #: 1.7 s), where each plan's own statement pushes its filter into the scan.
    shares_row_sums = False
    #: Whether several row-level plans' counts per bin run as one statement
    #: (engines._batch.row_bins_sql). DuckDB does not: a statement of its own costs it
    #: milliseconds, and each pushes its filter into the scan.
    shares_row_bins = False
    #: Whether an expression of dpkit's grammar can raise on some value in this engine.
    #: DuckDB's do not (the compiler wraps what could in TRY), so its shared statements
    #: may compute a plan's derived columns on rows the plan's filters drop; on Spark only
    #: those of engines._batch.computes_on_every_row.
    expressions_may_raise = False
    #: Statements of one batch (engines._batch) that need not share run at most this
    #: many at a time. DuckDB runs one statement on every core already, and two
    #: per-person aggregates at once would hold both in memory: one at a time.
    concurrent_statements = 1

    def q(self, name: str) -> str:
        """An identifier in this engine's SQL."""
        return '"' + name.replace('"', '""') + '"'

    def expression(self, sql: str, derived: Sequence[tuple[str, str]] = ()) -> str:
        """A plan expression (dpkit's canonical SQL, DuckDB's dialect) in this dialect,
        over the base columns and the ``derived`` ones."""
        return sql

    def int_div(self, a: str, b: str) -> str:
        """Integer division truncating towards zero."""
        return f"(({a}) // ({b}))"

    def wide_sum(self, x: str) -> str:
        """An exact sum of BIGINT values (no overflow for 2^31 summands below 2^93)."""
        return f"sum({x})"

    def double_array(self, values: Sequence[float]) -> tuple[str, list[Any]]:
        """SQL of a DOUBLE array and its parameters."""
        return "CAST(? AS DOUBLE[])", [list(values)]

    def element(self, array: str, index: str) -> str:
        """The element of ``array`` at 1-based ``index``."""
        return f"{array}[{index}]"

    def integer_range(self, count: int) -> str:
        """SQL of a one-column table of the BIGINTs ``0, ..., count - 1``."""
        return f"SELECT range FROM range(0, {int(count)})"

    def struct_list(self, entries: Sequence[Sequence[tuple[str, str]]]) -> str:
        """SQL of a list of structs, each entry's ``(field, SQL)`` pairs in order (the
        argument of :attr:`explode`)."""
        structs = [
            "struct_pack(" + ", ".join(f"{field} := {sql}" for field, sql in entry) + ")"
            for entry in entries
        ]
        return f"list_value({', '.join(structs)})"

    def constant_double_array(self, values: Sequence[float]) -> str:
        """SQL of a constant DOUBLE array with no parameters (finite values).

        DuckDB: one string literal cast to ``DOUBLE[]``, folded once when the statement
        is planned (its text-to-double conversion is correctly rounded and ``repr``
        round-trips, so each element is the same double). A list of 167 ``CAST``
        literals, named twice in the ladder index, cost 1.6x the planning time."""
        return f"CAST('[{', '.join(_finite_repr(v) for v in values)}]' AS DOUBLE[])"

    def pair(self, first: str, second: str) -> str:
        """An orderable pair, compared first on ``first`` then on ``second``."""
        return f"row({first}, {second})"

    def binary_text(self, sql: str) -> str:
        """A string compared byte by byte, whatever collation the column, the
        connection or the session sets (DuckDB's ``default_collation`` reaches every
        cursor of a database)."""
        return f'(CAST(({sql}) AS VARCHAR) COLLATE "binary")'

    def canonical_key_sql(self, sql: str, type_name: str) -> str:
        """SQL of the canonical form of a key column (:mod:`dpkit.analytics._canonical`):
        what is grouped, compared with bound keys, hashed and returned."""
        category = key_category(type_name)
        if category is None:
            raise InvalidParameter(f"A key column of type {type_name} is not supported.")
        if category == "double":
            x = f"CAST(({sql}) AS DOUBLE)"
            # x + 0.0 is +0.0 for both zeros (IEEE 754 round-to-nearest); NaN is missing.
            return f"(CASE WHEN isnan({x}) THEN NULL ELSE {x} + CAST(0.0 AS DOUBLE) END)"
        if category == "text":
            return self.binary_text(sql)
        dialect = self.hash_dialect()
        if category == "date":
            days, (low, high) = dialect.date_days(f"({sql})"), DAYS_RANGE
        elif category in ("timestamp", "timestamptz"):
            kind = "TIMESTAMP WITH TIME ZONE" if category == "timestamptz" else "TIMESTAMP"
            days, (low, high) = dialect.epoch_micros(f"({sql})", kind), MICROS_RANGE
        else:
            return f"({sql})"
        # Outside Python's years 1..9999 (or infinite): missing, so that turning the
        # integer back into a date or datetime can never fail.
        return f"(CASE WHEN {days} BETWEEN {low} AND {high} THEN {days} END)"

    def hash_dialect(self) -> HashDialect:
        return HashDialect(
            hex_to_bigint=lambda s: f"CAST(('0x' || {s}) AS BIGINT)",
            date_days=lambda s: f"CAST(date_diff('day', DATE '1970-01-01', {s}) AS BIGINT)",
            epoch_micros=lambda s, _type: f"epoch_us({s})",
            shift_right=lambda s, n: f"({s} >> {n})",
            text=self.text,
            decimal_text=lambda s, _scale: f"CAST({s} AS VARCHAR)",
        )

    # ------------------------------------------------------------------ engine hooks
    #: Parameters of :attr:`relation`'s SQL (a joined view's keys), bound first.
    _relation_params: tuple[Any, ...] = ()
    #: Whether :attr:`relation` holds at most one row per value of the privacy unit, in
    #: the engine's own equality (per-person rows grouped by the unit alone:
    #: :func:`dpkit.analytics._per_person.one_row_per_unit`); see :meth:`_ranks_groups`.
    _one_row_per_unit: bool = False

    @property
    def relation(self) -> str:
        """SQL of the source relation (a table, a view or a table function call)."""
        return str(getattr(self, "_relation", ""))

    def with_relation(
        self,
        relation: str,
        params: Sequence[Any] = (),
        schemas: dict[tuple[tuple[str, str], ...], dict[str, str]] | None = None,
        *,
        one_row_per_unit: bool = False,
    ) -> Any:
        """This engine (same connection, same dialect) over another relation: a table
        of a Session over several tables, or a joined view ``(SELECT ...)`` whose
        parameters are ``params`` (:mod:`dpkit.analytics._joins`). ``schemas``: the
        schema cache to use, shared with engines over relations of the same columns
        and types (a joined view drawn with another salt); a new one by default.
        ``one_row_per_unit``: the relation has at most one row per privacy unit, in
        the engine's equality (the caller's guarantee; :meth:`_ranks_groups`)."""
        view = copy.copy(self)
        view._relation = relation  # type: ignore[attr-defined]
        view._relation_params = tuple(params)
        view._one_row_per_unit = one_row_per_unit
        view._schema_cache = {} if schemas is None else schemas  # type: ignore[attr-defined]
        return view

    def schema(self, derived: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
        raise NotImplementedError

    def _remember_schema(
        self, derived: tuple[tuple[str, str], ...], columns: Sequence[tuple[str, str]]
    ) -> dict[str, str]:
        """Cache the schema of the relation with ``derived`` -- ``columns``, the
        ``(name, type)`` pairs the engine describes, in order -- and of each prefix of
        ``derived``; return the first. A derived column sees only the columns before
        it, and the engine lists the relation's columns then the derived ones in order,
        so a prefix's schema is the first columns of the longer one (as a statement of
        that prefix would describe them). The compiler asks for the derived columns with
        the filters, then without them: one ``DESCRIBE`` answers both."""
        cache: dict[tuple[tuple[str, str], ...], dict[str, str]] = self._schema_cache  # type: ignore[attr-defined]
        cache[derived] = dict(columns)
        tail = [name for name, _ in columns[len(columns) - len(derived) :]]
        if len(columns) >= len(derived) and tail == [name for name, _ in derived]:
            for k in range(len(derived)):
                cache.setdefault(derived[:k], dict(columns[: len(columns) - len(derived) + k]))
        return cache[derived]

    # ------------------------------------------------------------------ helpers
    def _hash(self, salt: int) -> KeyedHash:
        return KeyedHash(salt, self.hash_dialect())

    def _types(self, plan: Plan) -> dict[str, str]:
        """Types of the plan's columns (base and derived), binned groups as BIGINT."""
        types = self.schema(plan.derived)
        for name, _source, _edges in plan.bins:
            types[name] = "BIGINT"
        return types

    def _key_types(self, plan: Plan) -> list[str]:
        """The (public) types of the plan's group columns, in order."""
        types = self._types(plan)
        return [types[column] for column in plan.group_columns]

    def _decode_key(self, row: Sequence[Any], categories: Sequence[str]) -> tuple[Any, ...]:
        """A group key as returned by the engine (canonical SQL) -> its Python value."""
        return tuple(from_engine(v, c) for v, c in zip(row, categories, strict=True))

    def _categories(self, plan: Plan) -> list[str]:
        categories = []
        for type_name in self._key_types(plan):
            category = key_category(type_name)
            if category is None:
                raise InvalidParameter(f"A group column of type {type_name} is not supported.")
            categories.append(category)
        return categories

    def _value_sql(self, plan: Plan, stat: Statistic) -> str:
        assert stat.expression is not None
        expression = self.expression(stat.expression, plan.derived)
        x = f"CAST(({expression}) AS DOUBLE)"
        skip = f"{x} IS NULL OR isnan({x})"
        if stat.op == "values":
            return f"CASE WHEN {skip} THEN NULL ELSE 1 END"
        if stat.op == "distinct":
            return f"({expression})"
        clamped = f"LEAST(GREATEST({x}, {_literal(stat.low)}), {_literal(stat.high)})"
        if stat.square:
            r2 = ((stat.high - stat.low) / 2.0) ** 2
            centred = f"({clamped} - {_literal(stat.mid)})"
            clamped = f"LEAST(GREATEST({centred} * {centred}, CAST(0.0 AS DOUBLE)), {_literal(r2)})"
        scaled = f"CAST(ROUND({clamped} * {_literal(stat.inv)}) AS BIGINT) - {int(stat.center)}"
        return f"CASE WHEN {skip} THEN NULL ELSE {scaled} END"

    def _source(
        self,
        derived: Sequence[tuple[str, str]],
        partitions: Sequence[PartScope] = (),
        unit: str | None = None,
    ) -> tuple[str, list[Any]]:
        """SQL of the rows a (sub-)Session sees, with derived columns, and its parameters."""
        sql, params = f"SELECT * FROM {self.relation}", list[Any](self._relation_params)
        types = self.schema() if partitions else {}
        for part in partitions:
            # Each level keeps the rows of the level before it with column = key; with a
            # privacy unit, only the units whose row of smallest (H(salt, unit, column),
            # column) among their rows visible at this level lies in this part: a rule
            # on that unit's rows alone, so adding or removing a unit changes one part
            # only. The tie-break by value makes the rule deterministic, so the part
            # queries, run one by one, agree on every unit's part.
            # The part's key is compared in its canonical form (dpkit.analytics._canonical:
            # binary strings, one zero, temporal keys as integers no time zone touches).
            column_type = types[part.column]
            c = self.canonical_key_sql(self.q(part.column), column_type)
            key = to_engine(part.key, key_category(column_type) or "")
            level = f"SELECT * FROM ({sql}) AS __p WHERE {c} = ?"
            level_params = [*params, key]
            if unit is not None:
                u = self.q(unit)
                keyed = self._hash(part.salt)
                linear = keyed.linear(
                    [TypedPart(u, types[unit]), TypedPart(c, crossing_type(column_type))]
                )
                pairs = (
                    f"(SELECT {u} AS __pu, {c} AS __pc, {linear} AS __hl FROM ({sql}) AS __q "
                    f"WHERE {u} IS NOT NULL AND {c} IS NOT NULL) AS __r0"
                )
                level += (
                    f" AND {u} IN (SELECT __pu FROM ({keyed.finished(pairs, '__hl', '__h')}) "
                    f"AS __r GROUP BY __pu HAVING min_by(__pc, {self.pair('__h', '__pc')}) = ?)"
                )
                level_params += [*params, key]
            sql, params = level, level_params
        for i, (name, expression) in enumerate(derived):
            rendered = self.expression(expression, derived[:i])
            sql = f"SELECT *, ({rendered}) AS {self.q(name)} FROM ({sql})"
        return sql, params

    # ------------------------------------------------------------------ compile
    def compile(self, plan: Plan) -> tuple[str, list[Any]]:
        """The SQL statement and its parameters for ``plan``."""
        values = [
            f"{self._value_sql(plan, stat)} AS __v{i}"
            for i, stat in enumerate(plan.statistics)
            if stat.op in ("values", "fixed_sum", "distinct")
        ]
        packed = self._packs_groups(plan)
        ctes, params, rows_from, groups = self._rows(plan, values, packed=packed)
        if plan.unit is None:
            final = self._row_level(plan, groups, rows_from)
        else:
            final = self._bounded(plan, groups, rows_from, ctes, packed=packed)
        return "WITH " + ", ".join(ctes) + " " + final, params

    def _rows(
        self, plan: Plan, values: list[str], packed: bool = False
    ) -> tuple[list[str], list[Any], str, list[str]]:
        """CTEs of the plan's rows (filters, derived columns, keys), their parameters,
        the name of the last CTE and the group columns' aliases.

        ``packed`` (:meth:`_packs_groups`): the rows are not filtered by the keys here;
        the join to the groups' index in :meth:`_bounded` keeps the same rows. The keys'
        table (``__keys``) is made as without it."""
        groups = [f"__g{i}" for i in range(len(plan.group_columns))]
        select = []
        if plan.unit is not None:
            select.append(f"{self.q(plan.unit)} AS __u")
        for name, column in zip(groups, plan.group_columns, strict=True):
            select.append(f"{self._group_sql(plan, column)} AS {name}")
        select.extend(values)
        where = [f"({self.expression(f, plan.derived)})" for f in plan.filters]
        if plan.unit is not None:
            where.append(f"{self.q(plan.unit)} IS NOT NULL")
        where += [self._group_present_sql(plan, c) for c in plan.group_columns]
        source, params = self._source(plan.derived, plan.partitions, plan.unit)
        base = f"SELECT {', '.join(select) or '1 AS __one'} FROM ({source}) AS __src"
        if where:
            base += " WHERE " + " AND ".join(where)
        ctes = [f"__base AS {self.cte_hint}({base})"]
        # Public keys are bound in the engine's canonical form of their column.
        bound = []
        if plan.keys is not None:
            categories = self._categories(plan)
            bound = [
                tuple(to_engine(v, c) for v, c in zip(key, categories, strict=True))
                for key in plan.keys.keys
            ]
        every_bin = self._keys_are_every_bin(plan)
        if packed and len(groups) == 1:
            # The few keys' table is made below; _bounded joins the rows to it.
            rows_from = "__base"
        elif every_bin:
            # The keys are every bin of a binned column: each row the WHERE keeps
            # (neither NULL nor NaN) has an index among them, so an IN list of them
            # would keep every row. It is left out (166 parameters of describe's range
            # step, bound twice per query, were a third of its planning time).
            rows_from = "__base"
        elif plan.keys is not None and len(groups) == 1:
            # One key column: an IN list (measured faster in DuckDB than a SEMI JOIN
            # with a VALUES table on 10^7 rows; benchmarks/results/session.md).
            params.extend(key[0] for key in bound)
            marks = ", ".join("?" for _ in plan.keys.keys)
            ctes.append(
                f"__kept AS {self.cte_hint}(SELECT * FROM __base WHERE {groups[0]} IN ({marks}))"
            )
            rows_from = "__kept"
        elif plan.keys is not None:
            placeholders = ", ".join(
                "(" + ", ".join("?" for _ in key) + ")" for key in plan.keys.keys
            )
            for key in bound:
                params.extend(key)
            names = ", ".join(f"__k{i}" for i in range(len(groups)))
            ctes.append(f"__keys({names}) AS (VALUES {placeholders})")
            cond = " AND ".join(f"b.{g} = k.__k{i}" for i, g in enumerate(groups))
            if packed:
                # _bounded joins the rows to the keys' index instead.
                rows_from = "__base"
            else:
                ctes.append(
                    f"__kept AS {self.cte_hint}(SELECT b.* FROM __base b {self.semi_join} "
                    f"__keys k ON {cond})"
                )
                rows_from = "__kept"
        else:
            rows_from = "__base"
        if every_bin:
            # The same keys as a table (_distinct_groups), written as a range.
            assert plan.keys is not None
            ctes.append(f"__keys(__k0) AS ({self.integer_range(len(plan.keys.keys))})")
        elif self._few_keys(plan) and len(groups) == 1:
            # A second copy of a few keys, as a table: the distinct groups whose
            # keyed-hash slice step 3 computes once each (_distinct_groups).
            params.extend(key[0] for key in bound)
            rows = ", ".join("(?)" for _ in bound)
            ctes.append(f"__keys(__k0) AS (VALUES {rows})")
        return ctes, params, rows_from, groups

    @staticmethod
    def _few_keys(plan: Plan) -> bool:
        """Public keys few enough to bind twice (DuckDB binds a parameter in ~25 us)."""
        return plan.keys is not None and len(plan.keys.keys) <= FEW_KEYS

    @staticmethod
    def _keys_are_every_bin(plan: Plan) -> bool:
        """Whether the plan groups by one binned column with every bin as its keys
        (what :meth:`~dpkit.analytics.query.Query.group_by_bins` makes)."""
        if plan.keys is None or len(plan.group_columns) != 1:
            return False
        column = plan.group_columns[0]
        edges = next((edges for name, _, edges in plan.bins if name == column), None)
        if edges is None:
            return False
        indices = [key[0] for key in plan.keys.keys]
        return all(type(i) is int for i in indices) and indices == list(range(len(edges) - 1))

    def _pair_parts(self, plan: Plan, groups: list[str]) -> list[TypedPart]:
        """The hash parts of a (unit, groups) pair, typed."""
        assert plan.unit is not None
        types = self._types(plan)
        parts = [TypedPart("__u", types[plan.unit])]
        parts += [
            TypedPart(g, crossing_type(types[column]))
            for g, column in zip(groups, plan.group_columns, strict=True)
        ]
        return parts

    def histogram_sql(self, plan: Plan, spec: OrderSpec) -> tuple[str, list[Any]]:
        """SQL of the per-group grid histogram of ``spec`` (see dpkit.analytics._order)."""
        raw = f"CAST(({self.expression(spec.expression, plan.derived)}) AS DOUBLE)"
        if spec.kind == "min":
            raw = f"(-{raw})"
        value = f"CASE WHEN isnan({raw}) THEN NULL ELSE {raw} END AS __xr"
        ctes, params, rows_from, groups = self._rows(plan, [value])
        gl = "".join(f", {g}" for g in groups)
        unit = "__u, " if plan.unit is not None else ""
        # Every non-missing value's grid index, at row level (the index is monotone in
        # the value, so the index of a person's maximum is the maximum of their indices).
        x, guess = snap_sql(spec, "__xr")
        ctes.append(
            f"__snap AS (SELECT {unit}{x} AS __x{gl} FROM {rows_from} WHERE __xr IS NOT NULL)"
        )
        ctes.append(f"__guess AS (SELECT {unit}__x, {guess} AS __gi{gl} FROM __snap)")
        cuts, cut_params = self.double_array(spec.cuts())
        ctes.append(f"__cuts AS (SELECT {cuts} AS __e)")
        params.extend(cut_params)
        above = self.element("__e", "__gi + 2")
        below = self.element("__e", "__gi + 1")
        index = f"__gi + CAST(__x >= {above} AS BIGINT) - CAST(__x < {below} AS BIGINT)"
        ctes.append(f"__idx AS (SELECT {unit}{index} AS __i{gl} FROM __guess, __cuts)")
        rows_from = "__idx"
        if plan.unit is not None:
            pair_keys = "__u" + gl
            if groups and self._ranks_groups(plan):
                join = " AND ".join(f"r.{c} = p.{c}" for c in ["__u", *groups])
                ctes.append(
                    f"__gpairs AS (SELECT {pair_keys} FROM {rows_from} GROUP BY {pair_keys})"
                )
                kept = self._keep_groups(plan, groups, "__gpairs", rows_from, [], ctes, "__gs")
                ctes.append(
                    f"__grows AS (SELECT r.* FROM {rows_from} r {self.semi_join} {kept} p "
                    f"ON {join})"
                )
                rows_from = "__grows"
            if spec.kind == "quantile":
                ctes.extend(self._kept_values(plan, rows_from, groups))
            else:
                ctes.append(
                    f"__vals AS (SELECT max(__i) AS __i{gl} FROM {rows_from} GROUP BY {pair_keys})"
                )
            rows_from = "__vals"
        keys = "".join(f"{g}, " for g in groups)
        final = f"SELECT {keys}__i, count(*) FROM {rows_from} GROUP BY {keys}__i"
        return "WITH " + ", ".join(ctes) + " " + final, params

    def _kept_values(self, plan: Plan, rows_from: str, groups: list[str]) -> list[str]:
        """CTEs ending in ``__vals``: each (unit, group) pair's ``m`` grid indices of
        smallest ``(H(salt, unit, groups, index), index)`` -- all of them if it has at
        most ``m`` -- a rule on that pair's rows alone, whatever their order.

        Rows with the same index share a hash and are interchangeable in the histogram;
        the tie-break by index makes the choice deterministic, hence the same on every
        engine.
        """
        m = plan.max_rows
        gl = "".join(f", {g}" for g in groups)
        pair_keys = "__u" + gl
        keyed = self._hash(plan.salt)
        # Grid indices lie in [0, size) with size far below p: one limb each.
        linear = keyed.linear([*self._pair_parts(plan, groups), TypedPart("__i", SMALL_INDEX)])
        ctes = [f"__hv AS (SELECT {pair_keys}, __i, {linear} AS __hl FROM {rows_from})"]
        # (hash, index) as one BIGINT: hash < 2^31 and index < 2^26 (MAX_GRID_SIZE), so
        # hash * 2^32 + index < 2^63 orders as the pair does, and is much faster to
        # compare than a struct.
        key = "(__h * 4294967296 + __i)"
        # Pairs with at most m values keep them all: the rule keeps a pair's m values
        # of smallest (hash, index), which is every value when there are at most m, so
        # the kept values -- and the proof: a rule on the pair's own rows and the salt,
        # the split itself decided by the pair's own count -- are those of ranking
        # every pair. Only the rows of pairs with more than m values are ranked
        # (issue 34: with m about the rows a person has, few pairs have more, and
        # ranking every pair's values took 4.6 of 4.8 CPU seconds of describe's
        # percentile histogram at 10^7 rows; this split 2.2, the same counts, 360 MiB
        # peak instead of 900).
        on = " AND ".join(f"r.{c} = p.{c}" for c in ["__u", *groups])
        ctes.append(
            f"__cnt AS (SELECT {pair_keys}, count(*) AS __c FROM __hv GROUP BY {pair_keys})"
        )
        # The light pairs' rows are read as the rows of no heavy pair: every row's pair
        # is in __cnt (its unit and groups are never NULL: _rows keeps only such rows),
        # so the two are the same rows, and the join then holds the few heavy pairs
        # instead of nearly every pair (describe's shared percentile statement at 10^7
        # rows: 8.0 s -> 6.7 s, issue 34).
        small = (
            f"SELECT r.__i{''.join(f', r.{g}' for g in groups)} FROM __hv r "
            f"{self.anti_join} (SELECT {pair_keys} FROM __cnt WHERE __c > {m}) p ON {on}"
        )
        # The hash is finished on these rows only (the others are kept without it).
        big_rows = keyed.finished(
            f"(SELECT r.* FROM __hv r {self.semi_join} (SELECT * FROM __cnt WHERE __c > {m}) "
            f"p ON {on}) AS __b0",
            "__hl",
            "__h",
        )
        if m <= self.top_n_limit:
            # The pairs with more than m values: a bounded aggregate, which holds at
            # most m (key, index) entries per pair, however many rows the pair has; no
            # window over the rows. Measured at 10^8 rows (benchmarks/results/session.md):
            # 1.36 GB for the median histogram, against 1.59 GB for a row_number()
            # window over the kept rows; on the ungrouped private-bounds histogram a
            # window would hold every row of the table. Memory grows with persons x k x
            # m, not with rows.
            ctes.append(
                f"__top AS (SELECT {pair_keys}, min_by(__i, {key}, {m}) AS __is FROM "
                f"({big_rows}) AS __big GROUP BY {pair_keys})"
            )
            ctes.append(
                f"__vals AS ({small} UNION ALL SELECT {self.explode}(__is) AS __i{gl} FROM __top)"
            )
            return ctes
        # m beyond min_by's n -- a person with over 10^5 (Spark) or 10^6 (DuckDB) rows
        # in one group: those pairs' rows go through a window.
        ctes.append(
            f"__vals AS ({small} UNION ALL SELECT __i{gl} FROM ({big_rows}) AS __big "
            f"QUALIFY row_number() OVER (PARTITION BY {pair_keys} "
            f"ORDER BY __h, __i) <= {_window_limit(m, '__hl')})"
        )
        return ctes

    def histograms(self, plan: Plan, spec: OrderSpec) -> dict[tuple[Any, ...], dict[int, int]]:
        """Per group key: grid index -> count (sparse), for ``spec`` (raises EngineError)."""
        sql, params = self.histogram_sql(plan, spec)
        width = len(plan.group_columns)
        categories = self._categories(plan)
        out: dict[tuple[Any, ...], dict[int, int]] = {}
        for row in self._execute(sql, params):
            key = self._decode_key(row[:width], categories)
            out.setdefault(key, {})[int(row[width])] = int(row[width + 1])
        return out

    def _binned_value(self, plan: Plan, column: str) -> str | None:
        """SQL of the DOUBLE value a binned group column bins (None for another
        column). A DOUBLE column is not cast: the same value, and a range query's
        binary search names it ~240 times (the statement's text, which DuckDB parses,
        binds and plans twice, once to bind before the charge)."""
        for name, source, _ in plan.bins:
            if name == column:
                if self.schema(plan.derived).get(source, "").upper() == "DOUBLE":
                    return self.q(source)
                return f"CAST({self.q(source)} AS DOUBLE)"
        return None

    def _group_sql(self, plan: Plan, column: str) -> str:
        x = self._binned_value(plan, column)
        if x is not None:
            edges = next(edges for name, _, edges in plan.bins if name == column)
            interior = edges[1:-1]
            ladder = power_ladder(interior)
            if ladder is not None:
                index = self._ladder_index(x, interior, *ladder)
            else:
                index = _bin_search(x, [_literal(edge) for edge in interior])
            # No CASE mapping NULL and NaN to NULL around the index: the statement's
            # WHERE drops those rows (_group_present_sql, always beside this in _rows),
            # and both forms are total -- only comparisons, LEAST/GREATEST (NaN is the
            # largest double in both engines, so it is clamped like an infinity) and
            # NULL-propagating arithmetic: no value can make them raise, whatever order
            # the engine evaluates the projection and the filter in. The guard cost a
            # range query at 10^7 rows a fifth of its time (1.16 -> 0.92 s).
            return f"({index})"
        return self.canonical_key_sql(self.q(column), self.schema(plan.derived)[column])

    def _ladder_index(self, x: str, interior: Sequence[float], lo: int, hi: int) -> str:
        """SQL of :func:`_bin_search`'s index of ``x`` (a DOUBLE, neither NULL nor NaN)
        among the edges of :func:`power_ladder`, computed arithmetically.

        A guess ``g`` from ``floor(log2 |x|)`` is within one bin of the index: ``log2``
        is accurate to a few ulps in both engines (Spark divides two logarithms), so its
        floor is off by at most one next to a power of two, and ``|x|`` is clamped to
        ``[2^(lo-1), 2^(hi+1)]`` first (no zero, infinity or subnormal reaches it).
        ``g`` is then corrected with exact comparisons against the edges themselves,
        ``g + (x >= interior[g]) - (x < interior[g - 1])`` (the array repeats the first
        and last edge, so that ``g = 0`` and ``g = n`` index it), and clamped to
        ``[0, n]``: this is the first ``i`` with ``x < interior[i]`` (``n`` if none),
        the binary search's answer,
        for every double (the engines compare the same doubles exactly; -0.0 and 0.0
        compare equal in both). So the index is the same integer on both engines, and
        the statement names ``x`` a dozen times, not the search's ~240 nested CASEs: DuckDB
        plans it 2-2.6x faster (twice per query, once to bind before the charge) and
        runs it 1.6x faster at 10^6 rows (benchmarks/bench_bin_index.py).
        """
        n = len(interior)
        negatives = hi - lo + 1
        edges = self.constant_double_array([interior[0], *interior, interior[-1]])
        magnitude = (
            f"LEAST(GREATEST(abs({x}), {_literal(2.0 ** (lo - 1))}), {_literal(2.0 ** (hi + 1))})"
        )
        k = f"CAST(floor(log2({magnitude})) AS BIGINT)"
        # x >= 0 with 2^k <= x < 2^(k+1): the negatives, 0 and 2^lo..2^k are <= x.
        # x < 0 with 2^k < |x| < 2^(k+1): -2^(k+1)..-2^hi are <= x.
        guess = (
            f"LEAST(GREATEST(CASE WHEN {x} >= 0 THEN {negatives + 2 - lo} + {k} "
            f"ELSE {hi} - {k} END, 0), {n})"
        )
        above = self.element(edges, f"{guess} + 2")
        below = self.element(edges, f"{guess} + 1")
        corrected = f"{guess} + CAST({x} >= {above} AS BIGINT) - CAST({x} < {below} AS BIGINT)"
        return f"LEAST(GREATEST({corrected}, 0), {n})"

    def _group_present_sql(self, plan: Plan, column: str) -> str:
        """SQL of the rows that have a group in ``column``: for a binned column, its
        value is neither NULL nor NaN (the binary search gives every other value,
        infinities included, a bin), written without repeating the search. Every
        statement keeps only these rows (:meth:`_rows`): :meth:`_group_sql`'s index
        is not guarded against NULL and NaN itself."""
        x = self._binned_value(plan, column)
        if x is not None:
            return f"NOT ({x} IS NULL OR isnan({x}))"
        return f"{self._group_sql(plan, column)} IS NOT NULL"

    def _aggregates(self, plan: Plan) -> list[str]:
        out = []
        for i, stat in enumerate(plan.statistics):
            if stat.op in ("rows", "units"):
                out.append("count(*)")
            elif stat.op == "values":
                out.append(f"count(__v{i})")
            elif stat.op == "fixed_sum":
                out.append(self.wide_sum(f"__v{i}"))
            else:  # distinct, row level only
                out.append(f"count(DISTINCT __v{i})")
        return out

    def _row_level(self, plan: Plan, groups: list[str], rows_from: str) -> str:
        aggs = ", ".join(self._aggregates(plan))
        if not groups:
            return f"SELECT {aggs} FROM {rows_from}"
        keys = ", ".join(groups)
        return f"SELECT {keys}, {aggs} FROM {rows_from} GROUP BY {keys}"

    def _bounded(
        self, plan: Plan, groups: list[str], rows_from: str, ctes: list[str], packed: bool = False
    ) -> str:
        m = plan.max_rows
        row_source = rows_from
        sums = [i for i, s in enumerate(plan.statistics) if s.op in ("values", "fixed_sum")]
        # The columns the pairs are grouped by besides the unit: the groups, or their
        # packed key (:meth:`_packs_groups`).
        pair_groups = ["__gk"] if packed else groups
        if packed:
            rows_from = self._packed_rows(plan, groups, rows_from, sums, ctes)
        pair_keys = ", ".join(["__u", *pair_groups])
        light = self._light_rows(plan, groups, rows_from, sums, ctes)
        if light is not None:
            rows_from = "__heavy"
        pair_aggs = ["count(*) AS __c"]
        for i in sums:
            summed = (
                f"count(__v{i})"
                if plan.statistics[i].op == "values"
                else self.pair_sum(plan, i, f"__v{i}")
            )
            pair_aggs.append(f"{summed} AS __s{i}")
        ctes.append(
            f"__pairs AS (SELECT {pair_keys}, {', '.join(pair_aggs)} FROM {rows_from} "
            f"GROUP BY {pair_keys})"
        )
        # Step 2 of the module docstring. A pair with c > m rows is scaled to m rows'
        # worth: S -> trunc(S * m / c). Why the per-row bound still holds: every row's
        # integer summand lies in [a, b] (integers, Statistic.unit_range), so
        # S in [c a, c b] and S m / c in [m a, m b]; truncation towards zero maps a real
        # number in an interval with integer ends into the same interval. So the pair's
        # contribution is in [m a, m b], the same range as m kept rows: the per-group
        # sensitivity m * max(|a|, |b|) is unchanged. For counts of values (a = 0,
        # b = 1) it gives trunc(v m / c) <= m.
        #
        # trunc(S m / c) is computed as q m + trunc(r m / c) with S = q c + r (integer
        # division truncates and % takes the dividend's sign, in DuckDB and Spark, so
        # q m and r m / c share S's sign and the truncations add up). Widths, from
        # public bounds only: every summand is below 2^62 in absolute value
        # (Statistic.unit_range, 2^61 steps plus the centre), so |q| < 2^62, |q m| <
        # 2^93 and |r m| < c m < 2^94 (m <= 2^31, c < 2^63): nothing overflows the wide
        # type (2^127 for HUGEINT, 10^38 > 2^126 for DECIMAL(38,0)), on any data.
        #
        # The scaled value lies in [m a, m b] either way (c <= m: S in [c a, c b] with
        # a <= 0 <= b or not, inside m times the one-row range's hull with 0), so where
        # m max(|a|, |b|) <= 2^62 -- public bounds -- it is narrowed to BIGINT, whose
        # pair-level arithmetic and final sum are cheaper than the wide type's; the
        # final sum is then the engine's overflow-free wide sum (:meth:`wide_sum`).
        #
        # Where, moreover, max(|a|, |b|) < 2^31 (:meth:`_pair_narrow`), a pair of more
        # than PAIR_ROWS = 2^31 rows gets the fixed value m clamp(0, a, b) -- in
        # [m a, m b], so the bound above holds for it too, and it is a function of the
        # unit's own rows (their count) -- and the others are computed in BIGINT: their
        # |S| <= c max(|a|, |b|) < 2^62, |q m| <= m max(|a|, |b|) <= 2^62 and
        # |r m| < c m <= 2^62. Spark then sums each pair's rows as BIGINT instead of
        # DECIMAL(38,0), which it computes far more slowly (its BIGINT sum wraps past
        # 2^63, which only a pair of more than 2^31 rows can reach, and that pair's sum
        # is not used). Both engines give every pair the same integer.
        scaled = [f"least(__c, {m}) AS __c"]
        scaled += [f"{self._scaled_sum(plan, i, f'__s{i}', '__c')} AS __s{i}" for i in sums]
        if groups and self._ranks_groups(plan):
            # Step 3: each unit's k groups of smallest (H(salt, unit, groups), groups).
            rows_from = self._keep_groups(
                plan, groups, "__pairs", rows_from, scaled, ctes, "__b", packed=packed
            )
        else:
            ctes.append(f"__bounded AS (SELECT {pair_keys}, {', '.join(scaled)} FROM __pairs)")
            rows_from = "__bounded"
        distinct = [i for i, stat in enumerate(plan.statistics) if stat.op == "distinct"]
        if plan.max_total_rows is not None:
            # Step 3b; the compiler refuses distinct counts with a binding total bound.
            assert not distinct
            rows_from = self._total_bounded(plan, pair_groups, sums, rows_from, ctes)
        if light is not None:
            columns = ", ".join([pair_keys, "__c", *(f"__s{i}" for i in sums)])
            ctes.append(
                f"__all_pairs AS (SELECT {columns} FROM {rows_from} UNION ALL "
                f"SELECT {columns} FROM {light})"
            )
            rows_from = "__all_pairs"
        keys = ", ".join(groups)
        # Only distinct counts: the pairs' aggregate still needs one column (it gives
        # the groups the distinct counts are joined to).
        main_columns = self._main_columns(plan) or ["count(*) AS __pairs"]
        if packed:
            # Aggregated by the packed key, then given back the groups it stands for
            # (one row of the index per key: a join of at most |keys| rows).
            outer = [f"__x.{g}" for g in groups]
            outer += ["__m." + c.rsplit(" AS ", 1)[1] for c in main_columns]
            return (
                f"SELECT {', '.join(outer)} FROM (SELECT __gk, {', '.join(main_columns)} "
                f"FROM {rows_from} GROUP BY __gk) AS __m JOIN __b_gidx AS __x "
                f"ON {self.int_div('__m.__gk', str(PACK))} = __x.__gi"
            )
        main = (
            f"SELECT {keys + ', ' if groups else ''}{', '.join(main_columns)} "
            f"FROM {rows_from}" + (f" GROUP BY {keys}" if groups else "")
        )
        if not distinct:
            return main
        for i in distinct:
            self._distinct_values(plan, groups, row_source, rows_from, ctes, i)
        # Statistics in plan order: distinct counts from their CTEs (0 for a group whose
        # kept persons have no non-NULL value), the others from the pairs' aggregate.
        joins = "".join(
            f" LEFT JOIN __dist{i} AS __d{i} ON "
            + (" AND ".join(f"__m.{g} IS NOT DISTINCT FROM __d{i}.{g}" for g in groups) or "TRUE")
            for i in distinct
        )
        selected = [f"__m.{g}" for g in groups]
        selected += [
            f"coalesce(__d{i}.__n, 0)" if i in distinct else f"__m.__a{i}"
            for i in range(len(plan.statistics))
        ]
        return f"SELECT {', '.join(selected)} FROM ({main}) AS __m{joins}"

    def _light_rows(
        self, plan: Plan, groups: list[str], rows: str, sums: list[int], ctes: list[str]
    ) -> str | None:
        """Where it applies, append CTEs splitting the units of ``rows`` by their number
        of rows ``n``: ``__heavy``, the rows of the units with ``n > L``, which go
        through steps 1-3b as before; and the returned CTE, the rows of the others, each
        already in the shape of a bounded pair (``__c`` = 1, ``__s{i}`` the row's own
        summand). None where it does not apply.

        Why the result is the same: ``L = min(max_rows, max_total_rows)``. A unit with
        ``n <= L`` rows has at most ``max_rows`` rows in every group, so step 2
        leaves each of its pairs as it is (count ``c``, sum ``S``), and at most
        ``max_total_rows`` rows in all, so step 3b does too; with no ranking (step 3
        has nothing to do: :meth:`_ranks_groups`) every pair is kept. Its pairs'
        contributions to each group's total -- ``sum(__c)`` and ``sum(__s{i})`` -- are
        then the sums of its rows' ones and summands: the same integers whether its
        rows are summed in pairs first or one by one. The split is decided by the
        unit's own row count, so the rule stays one on each unit's rows alone, and the
        statistics apply: counts of rows and of values, and sums (not counts of units,
        one per pair, nor distinct counts). Each row's cost is a public constant more
        (one count per unit, two joins holding the heavy units only).

        Measured (issue 34): describe's histogram (22 bins, ``max_rows`` and
        ``max_total_rows`` 16) at 10^7 rows and 10^6 persons, 97% of them with at most
        16 rows: 0.87-1.0 s, against 2.7-2.8 s with every unit through the pair step."""
        if not groups or not plan.statistics or self._ranks_groups(plan):
            # (No statistics: the final aggregate counts pairs, not rows.)
            return None
        if any(stat.op not in ("rows", "values", "fixed_sum") for stat in plan.statistics):
            return None
        limit = min(plan.max_rows, plan.max_total_rows or plan.max_rows)
        heavy = f"(SELECT __u FROM __units WHERE __n > {limit}) AS __h"
        ctes.append(f"__units AS (SELECT __u, count(*) AS __n FROM {rows} GROUP BY __u)")
        ctes.append(
            f"__heavy AS (SELECT __r.* FROM {rows} AS __r {self.semi_join} {heavy} "
            "ON __r.__u = __h.__u)"
        )
        summands = []
        for i in sums:
            # A pair's count of values is count(__v), its sum sum(__v): per row, 0 or 1
            # and the summand (NULL where the value is).
            one = f"CASE WHEN __v{i} IS NULL THEN 0 ELSE 1 END"
            value = one if plan.statistics[i].op == "values" else f"__v{i}"
            kind = "BIGINT" if self._narrow(plan, i) else self.wide
            summands.append(f"CAST({value} AS {kind}) AS __s{i}")
        columns = ", ".join(["__u", *groups, "1 AS __c", *summands])
        ctes.append(
            f"__light AS (SELECT {columns} FROM {rows} AS __r {self.anti_join} {heavy} "
            "ON __r.__u = __h.__u)"
        )
        return "__light"

    def _total_bounded(
        self, plan: Plan, groups: list[str], sums: list[int], pairs: str, ctes: list[str]
    ) -> str:
        """Append the CTEs of step 3b and return the name of the last: each unit's kept
        pairs (``pairs``, after steps 2 and 3) scaled so that the unit's rows over all
        its groups count at most ``T = max_total_rows``.

        With ``C`` the unit's kept rows (the sum of its pairs' counts after step 2, at
        most ``k m``), a unit with ``C > T`` has every pair scaled by ``T / C``: count
        ``floor(c T / C)`` and sums ``trunc(S T / C)`` (exactly, as in step 2). Why the
        sensitivities hold: after step 2 a pair's count is ``w <= m`` and each sum lies
        in ``w [a, b]`` (proof at :meth:`_bounded`); after this step its absolute value is
        at most ``w T / C * max(|a|, |b|)`` (truncation only moves towards zero), and
        ``sum over pairs of w T / C = T``. So one unit's contributions, over its at most
        ``k`` groups, are each at most ``m`` rows' worth and sum to at most ``T`` rows'
        worth: the norms of :func:`dpkit.analytics._accounting.contribution_norms`.
        ``C`` is a function of the unit's own rows and the salt, so the rule stays one
        on each unit's rows alone. Widths: ``C <= k m <= 2^62`` fits a BIGINT, and
        ``c T <= 2^62``. The sums reuse step 2's arithmetic with ``(C, T)`` for ``(c,
        m)``: ``|S| <= w 2^62`` and ``C >= w``, so ``|S div C| <= 2^62`` and its product
        with ``T <= 2^31`` is at most 2^93, as is ``(S mod C) T < C T``: the wide type
        holds them. ``|trunc(S T / C)| <= |S|``, so a sum narrowed to BIGINT in step 2
        stays narrow.
        """
        t = plan.max_total_rows
        assert t is not None
        pair_keys = ", ".join(["__u", *groups])
        carried = "".join(f", __s{i}" for i in sums)
        ctes.append(
            f"__person AS (SELECT {pair_keys}, __c{carried}, CAST(sum(__c) OVER "
            f"(PARTITION BY __u) AS BIGINT) AS __ct FROM {pairs})"
        )
        count = f"CASE WHEN __ct <= {t} THEN __c ELSE {self.int_div(f'__c * {t}', '__ct')} END"
        scaled = [f"{count} AS __c"]
        scaled += [f"{self._scaled_sum(plan, i, f'__s{i}', '__ct', t)} AS __s{i}" for i in sums]
        ctes.append(f"__total AS (SELECT {pair_keys}, {', '.join(scaled)} FROM __person)")
        return "__total"

    def _scaled_sum(
        self, plan: Plan, i: int, total: str, count: str, limit: int | None = None
    ) -> str:
        """SQL of step 2 for statistic ``i``: a pair's sum ``total`` over ``count`` rows,
        scaled to ``max_rows`` rows' worth when ``count`` exceeds it (the proof above,
        in :meth:`_bounded`). ``count`` >= 1, or 0 with ``total`` NULL or 0 (a pair
        with no rows, in :mod:`._batch`): the first branch, no division. ``limit``
        replaces ``max_rows`` (step 3b: a unit's total rows, :meth:`_total_bounded`)."""
        m = plan.max_rows if limit is None else limit
        if limit is None and self._pair_narrow(plan, i):
            # BIGINT arithmetic below PAIR_ROWS rows, a fixed value above (the proof in
            # _bounded). TRY_CAST: a pair of more rows can hold a sum no BIGINT holds,
            # and an engine may compute the cast before it looks at the count.
            low, high = plan.statistics[i].unit_range()
            fixed = m * min(max(0, low), high)
            s = f"TRY_CAST({total} AS BIGINT)"
            quotient = self.int_div(s, count)
            remainder = self.int_div(f"({s} % {count}) * {m}", count)
            return (
                f"CAST(CASE WHEN {count} > {PAIR_ROWS} THEN {fixed} WHEN {count} <= {m} "
                f"THEN {s} ELSE {quotient} * {m} + {remainder} END AS BIGINT)"
            )
        s = f"CAST({total} AS {self.wide})"
        quotient = f"CAST({self.int_div(s, count)} AS {self.wide})"
        remainder = self.int_div(f"({s} % {count}) * {m}", count)
        value = f"CASE WHEN {count} <= {m} THEN {s} ELSE {quotient} * {m} + {remainder} END"
        if self._narrow(plan, i):
            value = f"CAST({value} AS BIGINT)"
        return value

    def pair_sum(self, plan: Plan, i: int, x: str) -> str:
        """SQL of step 1's sum of statistic ``i``'s summands ``x`` over a pair's rows:
        the engine's plain sum where :meth:`_pair_narrow` (exact for the pairs of at
        most PAIR_ROWS rows, the only ones whose sum step 2 uses), else the wide sum."""
        if self._pair_narrow(plan, i):
            return f"sum({x})"
        return self.wide_sum(x)

    def _pair_narrow(self, plan: Plan, i: int) -> bool:
        """Whether statistic ``i`` is a sum whose step 2 runs in BIGINT: one row's
        summand below 2^31 and ``max_rows`` times it at most 2^62 (:meth:`_narrow`)."""
        stat = plan.statistics[i]
        return (
            stat.op == "fixed_sum"
            and stat.row_bound() < 2**31
            and plan.max_rows <= 2**31
            and self._narrow(plan, i)
        )

    def _packs_groups(self, plan: Plan) -> bool:
        """Whether step 3's pairs are grouped by one packed BIGINT instead of the
        groups: ``rank * PACK + slice``, the group's rank among the distinct keys and
        its slice of the keyed hash, looked up once per row in the groups' index (the
        ``__b_gidx`` table of :meth:`_keep_groups`).

        When: the engine hashes groups once, the plan ranks groups (step 3) by public
        keys whose index is made from the keys themselves (:meth:`_distinct_groups`:
        several key columns, or at most :data:`FEW_KEYS` of one), a group column is
        text, and it has no distinct count (whose per-group step reads the rows by
        group). Integer keys are not packed: DuckDB groups (INTEGER, TINYINT), narrowed
        by the column's statistics, faster than (INTEGER, BIGINT) (10^6 rows, 50 keys:
        0.246 s unpacked, 0.265 s packed).

        The same rows, pairs and kept groups: the index has one row per distinct key,
        in the same canonical form as the rows' groups, so a row joins one index row
        iff its groups equal a key -- the engine's own equality, as the keys' filter
        and the pairs' join to the index it replaces (a pair that did not join the
        index was dropped there) -- and the packed key is a one-to-one function of
        the groups. The rank and slice are the integers the other form joins to each
        pair. Why: a (unit, BIGINT) aggregate instead of (unit, text) and no join of
        the pairs; on 10^6 rows with 50 text keys DuckDB's statement ran 0.247 ->
        0.214 s (benchmarks/results/session.md)."""
        return (
            self.hash_groups_once
            and plan.unit is not None
            and plan.keys is not None
            and bool(plan.group_columns)
            and (len(plan.group_columns) > 1 or self._few_keys(plan))
            and not self._keys_are_every_bin(plan)
            and self._ranks_groups(plan)
            and len(plan.keys.keys) < 2**32
            and all(stat.op != "distinct" for stat in plan.statistics)
            and any(key_category(t) == "text" for t in self._key_types(plan))
        )

    def _group_index(
        self, plan: Plan, groups: list[str], rows: str, ctes: list[str], prefix: str
    ) -> str:
        """Append the CTE of the groups' index and return its name: each distinct group
        (:meth:`_distinct_groups`) with its slice of the keyed hash (``__hg``,
        :meth:`KeyedHash.partial`) and its rank in the engine's order (``__gi``)."""
        keyed = self._hash(plan.salt)
        parts = self._pair_parts(plan, groups)
        keys = ", ".join(groups)
        index = f"{prefix}_gidx"
        group_slice = keyed.partial(parts[1:], keyed.limb_count(parts[:1]))
        ctes.append(
            f"{index} AS (SELECT {keys}, {group_slice} AS __hg, row_number() OVER "
            f"(ORDER BY {keys}) AS __gi FROM ({self._distinct_groups(plan, groups, rows)})"
            " AS __dg)"
        )
        return index

    def _packed_rows(
        self, plan: Plan, groups: list[str], rows: str, sums: list[int], ctes: list[str]
    ) -> str:
        """Append the CTEs of the groups' index (``__b_gidx``) and of the rows whose
        groups are a key, each with its packed key ``__gk`` (:meth:`_packs_groups`);
        return the rows' CTE name."""
        index = self._group_index(plan, groups, rows, ctes, "__b")
        on = " AND ".join(f"__r.{g} = __x.{g}" for g in groups)
        carried = "".join(f"__r.__v{i}, " for i in sums)
        ctes.append(
            f"__packed AS {self.cte_hint}(SELECT __r.__u, {carried}"
            f"__x.__gi * {PACK} + __x.__hg AS __gk FROM {rows} AS __r JOIN {index} AS __x "
            f"ON {on})"
        )
        return "__packed"

    def _ranks_groups(self, plan: Plan) -> bool:
        """Whether step 3 has anything to do: not when the public keys are at most
        ``max_groups`` -- every unit then has at most that many groups after the keys'
        filter, and keeps them all (a public fact, the same on any data) -- nor when
        the relation has at most one row per unit (:attr:`_one_row_per_unit`, a fact
        of the relation's SQL, whatever its rows): every unit then has at most one
        pair, in one group, and ``max_groups >= 1`` keeps it. Either way the kept
        pairs are those the ranking would keep, on every table."""
        return not self._one_row_per_unit and (
            plan.keys is None or len(plan.keys.keys) > plan.max_groups
        )

    def _keep_groups(
        self,
        plan: Plan,
        groups: list[str],
        pairs: str,
        rows: str,
        columns: Sequence[str],
        ctes: list[str],
        prefix: str,
        packed: bool = False,
    ) -> str:
        """Append the CTEs of step 3 and return the name of the last: the rows of
        ``pairs`` (one per unit and group, with ``columns`` computed on them) of each
        unit's ``max_groups`` groups of smallest ``(H(salt, unit, groups), groups)``.
        ``rows`` is the row-level CTE the pairs were aggregated from.

        The formulation, measured on DuckDB (benchmarks/results/session.md):

        - ``H``'s group slice (:meth:`KeyedHash.partial`; md5 for a string key) is a
          function of the group alone, so where :attr:`hash_groups_once` it is computed
          once per distinct group and joined, not once per pair. The distinct groups
          (:meth:`_distinct_groups`) are read from ``rows`` (a scan of the group
          columns) or the public keys' table, not from ``pairs``: reading the pairs
          twice made DuckDB materialise them.
        - The tie-break by group is by ``__gi``, the group's rank among the distinct
          groups in the engine's order of the group columns. Two groups' ranks compare
          as the groups do, so the kept set is exactly the one of ``ORDER BY H,
          groups`` -- still a rule on each unit's own pairs and the salt -- while the
          window sorts one integer instead of a string.
        - ``H`` is finished (:meth:`KeyedHash.finish`) in a projection, once per pair,
          not inside the window's sort.
        - With public keys (fewer than 2^32 groups), ``H < 2^31`` and the rank make one
          BIGINT sort key ``H 2^32 + rank``, ordered as the pair ``(H, rank)``.
        - ``packed``: the pairs carry ``__gk`` (:meth:`_packs_groups`) instead of the
          groups, and the rank and slice are read from it, with no join.
        """
        k = plan.max_groups
        keyed = self._hash(plan.salt)
        parts = self._pair_parts(plan, groups)
        keys = ", ".join(groups)
        extra = "".join(f"{c}, " for c in columns)
        if packed:
            rank, group_slice = self.int_div("__gk", str(PACK)), f"(__gk % {PACK})"
            linear = keyed.linear(parts[:1], [group_slice])
            ctes.append(
                f"{prefix}_linear AS (SELECT __u, __gk, {extra}{rank} AS __gi, {linear} "
                f"AS __hl FROM {pairs})"
            )
            small = True
        elif self.hash_groups_once:
            index = self._group_index(plan, groups, rows, ctes, prefix)
            linear = keyed.linear(parts[:1], ["__hg"])
            ctes.append(
                f"{prefix}_linear AS (SELECT __u, {keys}, {extra}__gi, {linear} AS __hl "
                f"FROM {pairs} JOIN {index} USING ({keys}))"
            )
            small = plan.keys is not None and len(plan.keys.keys) < 2**32
        else:
            ctes.append(
                f"{prefix}_linear AS (SELECT __u, {keys}, {extra}{keyed.linear(parts)} AS "
                f"__hl FROM {pairs})"
            )
            small = False
        hashed = keyed.finished(f"{prefix}_linear", "__hl", "__h")
        if small:
            # The sort key computed before the window, which then carries it alone: the
            # window's rows hold neither __h nor __gi (-30% of the window's time on 10^6
            # rows, benchmarks/results/session.md). The same order, so the same pairs.
            key = "__h * 4294967296 + __gi"
            ctes.append(f"{prefix}_hashed AS (SELECT *, {key} AS __k FROM ({hashed}) AS __hk)")
            order, limit = "__k", _window_limit(k, "__k")
        else:
            ctes.append(f"{prefix}_hashed AS ({hashed})")
            order = "__h, __gi" if self.hash_groups_once else f"__h, {keys}"
            limit = _window_limit(k, "__h")
        ctes.append(
            f"{prefix}_kept AS (SELECT * FROM {prefix}_hashed QUALIFY row_number() OVER "
            f"(PARTITION BY __u ORDER BY {order}) <= {limit})"
        )
        return f"{prefix}_kept"

    def _distinct_groups(self, plan: Plan, groups: list[str], rows: str) -> str:
        """SQL of a relation with each group present in ``rows`` at least once and no
        other key (columns named as ``groups``, in their canonical SQL form).

        With public keys over several columns, or at most :data:`FEW_KEYS` of one,
        the keys themselves (the ``__keys`` table of :meth:`_rows`, cast to their
        columns' canonical types, so that they hash and compare as the rows' values
        do; a key no row has only adds a row that no pair joins). Otherwise a scan of
        the group columns of ``rows`` (0.02-0.03 s at 10^7 rows): more keys of one
        column are bound once only, in the IN list, because DuckDB binds a parameter
        in ~25 us (10^5 keys: 2.5 s), and a second copy of them would double that."""
        if plan.keys is None or (len(groups) == 1 and not self._few_keys(plan)):
            return f"SELECT DISTINCT {', '.join(groups)} FROM {rows}"
        types = self._key_types(plan)
        columns = []
        for i, (name, type_name) in enumerate(zip(groups, types, strict=True)):
            target = crossing_type(type_name)
            if key_category(type_name) == "text":
                value = self.binary_text(f"__k{i}")
            else:
                value = f"CAST(__k{i} AS {target})"
            columns.append(f"{value} AS {name}")
        return f"SELECT DISTINCT {', '.join(columns)} FROM __keys"

    def _main_columns(self, plan: Plan) -> list[str]:
        """The per-group aggregates over the bounded pairs, named ``__a{i}``."""
        out = []
        for i, stat in enumerate(plan.statistics):
            if stat.op == "rows":
                out.append(f"sum(__c) AS __a{i}")
            elif stat.op == "units":
                out.append(f"count(*) AS __a{i}")
            elif stat.op in ("values", "fixed_sum"):
                summed = self.wide_sum(f"__s{i}") if self._narrow(plan, i) else f"sum(__s{i})"
                out.append(f"{summed} AS __a{i}")
        return out

    @staticmethod
    def _narrow(plan: Plan, i: int) -> bool:
        """Whether statistic ``i``'s bounded pair values fit a BIGINT with room to
        spare: ``max_rows`` times the largest one-row summand is at most 2^62."""
        return plan.max_rows * plan.statistics[i].row_bound() <= 2**62

    def _distinct_values(
        self, plan: Plan, groups: list[str], row_source: str, pairs: str, ctes: list[str], i: int
    ) -> None:
        """CTE ``__dist{i}``: per group, the number of distinct values of statistic ``i``
        when every person keeps at most ``max_rows`` of its distinct values per group
        (those of smallest keyed hash, ties by value: a rule on that person's rows alone)
        in the groups the pairs kept. A person then changes a group's count by at most
        ``max_rows``."""
        m = plan.max_rows
        pair_keys = ", ".join(["__u", *groups])
        expression = plan.statistics[i].expression
        assert expression is not None
        value_type = self.schema([*plan.derived, ("__dpkit_value", expression)])["__dpkit_value"]
        keyed = self._hash(plan.salt)
        linear = keyed.linear([*self._pair_parts(plan, groups), TypedPart("__v", value_type)])
        ctes.append(
            f"__dva{i} AS (SELECT DISTINCT {pair_keys}, __v{i} AS __v FROM {row_source} "
            f"WHERE __v{i} IS NOT NULL)"
        )
        if groups:
            join = " AND ".join(f"v.{c} = p.{c}" for c in ["__u", *groups])
            ctes.append(
                f"__dvk{i} AS (SELECT v.* FROM __dva{i} v {self.semi_join} {pairs} p ON {join})"
            )
            source = f"__dvk{i}"
        else:
            source = f"__dva{i}"
        # Only the pairs with more than m distinct values are ranked: ranking keeps a
        # pair's m values of smallest (hash, value), which is every value of a pair
        # with at most m, so those are kept as they are, without their hash -- the same
        # kept values, and still a rule on the pair's own rows (the split is decided by
        # its own count). Unit and groups are never NULL here (_rows), so the two joins
        # split the pairs exactly. Measured on describe's pre-check of a text column
        # (10^7 rows, 10^6 persons, no person above m): 1.5 s instead of 3.0-3.6 s, the
        # hash (an md5 per distinct value and person) and the window skipped (issue 34).
        on = " AND ".join(f"__r.{c} = __h.{c}" for c in ["__u", *groups])
        heavy = f"__dvn{i} AS __h ON {on}"
        ctes.append(
            f"__dvn{i} AS (SELECT {pair_keys} FROM {source} GROUP BY {pair_keys} "
            f"HAVING count(*) > {m})"
        )
        ctes.append(
            f"__dv{i} AS (SELECT {pair_keys}, __v, {linear} AS __hl FROM (SELECT __r.* FROM "
            f"{source} AS __r {self.semi_join} {heavy}) AS __d)"
        )
        # A window, not min_by: it ranks the distinct (unit, group, value) triples that
        # the DISTINCT above already holds (not the rows), and orders ties by value. On
        # 10^7 rows with ~10^7 distinct values, arg_min(v, hash, m) used as much memory
        # or more (576-719 MiB against 544-557 MiB) and was no faster.
        ranked = (
            f"SELECT {pair_keys}, __v FROM ({keyed.finished(f'__dv{i}', '__hl', '__h')}) AS "
            f"__dvh QUALIFY row_number() OVER (PARTITION BY {pair_keys} ORDER BY __h, __v) "
            f"<= {_window_limit(m, '__hl')}"
        )
        ctes.append(
            f"__dvb{i} AS (SELECT __r.* FROM {source} AS __r {self.anti_join} {heavy} "
            f"UNION ALL {ranked})"
        )
        keys = ", ".join(groups)
        if groups:
            ctes.append(
                f"__dist{i} AS (SELECT {keys}, count(DISTINCT __v) AS __n FROM __dvb{i} "
                f"GROUP BY {keys})"
            )
        else:
            ctes.append(f"__dist{i} AS (SELECT count(DISTINCT __v) AS __n FROM __dvb{i})")

    # ------------------------------------------------------------------ run
    def _execute(
        self, sql: str, params: Sequence[Any] = (), *, reads_rows: bool = True
    ) -> list[tuple[Any, ...]]:
        """Run ``sql``; raise EngineError (schema-level text only when ``reads_rows`` is
        False, the class name otherwise)."""
        raise NotImplementedError

    def _bind(self, sql: str, params: Sequence[Any]) -> None:
        """Bind ``sql`` without reading a row; raise EngineError if it does not bind."""
        raise NotImplementedError

    def prepare(self, plan: Plan, orders: Sequence[OrderSpec] = ()) -> None:
        # Binding checks names, types and functions without reading the data, so every
        # failure that the query's shape can cause is raised here, before the Session
        # charges anything.
        statements = [self.histogram_sql(plan, spec) for spec in orders]
        if plan.statistics:
            statements.append(self.compile(plan))
        for sql, params in statements:
            self._bind(sql, params)

    def aggregate(self, plan: Plan) -> EngineResult:
        sql, params = self.compile(plan)
        categories = self._categories(plan)
        rows = self._execute(sql, params)
        width = len(plan.group_columns)
        result: EngineResult = {}
        for row in rows:
            key = self._decode_key(row[:width], categories)
            result[key] = [0 if v is None else int(v) for v in row[width:]]
        return result
