"""Engines compute a :class:`~dpkit.analytics._plan.Plan`'s exact integer aggregates.

:class:`Engine` is the interface (a Spark engine will implement it too); :class:`DuckDBEngine`
compiles a plan to one DuckDB SQL statement. The SQL is written once, in DuckDB's
dialect; other engines can translate it with SQLGlot (``sqlglot.transpile``) instead of
having a generator of their own.

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
3. Each unit keeps its ``k`` groups of smallest ``(hash(s, u, g), g)``.
4. Final ``GROUP BY g``.

Statistics that need real rows (grid histograms for quantiles) keep, for a pair with
more than ``m`` non-missing values, the ``m`` of smallest keyed hash
``hash(hash(s, u, g, x))`` (a bounded ``arg_min`` aggregate per pair, no window over the
rows); their groups are chosen by the same rule as step 3.

Rows whose privacy unit or a group key is NULL are dropped (they cannot be attributed
to a person, and dropping rows one by one is stable). Nothing but per-group aggregates
leaves the engine.

Failures (the Session's threat model, docs/analytics.md): every statement the engine
will run for a query is first *bound* with ``EXPLAIN`` (:meth:`DuckDBEngine.prepare`),
which checks names, types and functions without reading a row; a failure there depends
on the schema and the query only and is reported before anything is charged. The SQL
itself cannot fail on row values: user expressions are total
(:mod:`dpkit.analytics._expr`), keys are of the column's type
(:mod:`dpkit.analytics._keys`), and integer widths follow from public bounds (below).
What can still fail while rows are read (out of memory, a disk error) happens after
the charge, keeps it, and is reported as :class:`~dpkit.errors.EngineError` naming the
error's class only: an engine message can quote row values, so none is shown or chained.

Why this module is long (~560 lines): it is the one place where dpkit writes SQL, and
the contribution-bounding statements carry their proofs in comments next to them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol

from dpkit.analytics._order import OrderSpec, snap_sql
from dpkit.analytics._plan import PartScope, Plan, Statistic
from dpkit.errors import DataError, EngineError

__all__ = ["DuckDBEngine", "Engine", "EngineResult"]

#: Per group key: the exact integer value of each statistic, in plan order.
EngineResult = dict[tuple[Any, ...], list[int]]

#: DuckDB type names (prefixes) of numbers; shared with dpkit.analytics.describe.
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


def is_numeric(type_name: str) -> bool:
    return type_name.upper().startswith(_NUMERIC)


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


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: float) -> str:
    text = repr(float(value))
    if text in ("inf", "-inf", "nan"):
        raise DataError(f"A bound {text} cannot be used in SQL.")
    return f"CAST({text} AS DOUBLE)"


def _value_sql(stat: Statistic) -> str:
    assert stat.expression is not None
    x = f"CAST(({stat.expression}) AS DOUBLE)"
    skip = f"{x} IS NULL OR isnan({x})"
    if stat.op == "values":
        return f"CASE WHEN {skip} THEN NULL ELSE 1 END"
    if stat.op == "distinct":
        return f"({stat.expression})"
    clamped = f"LEAST(GREATEST({x}, {_literal(stat.low)}), {_literal(stat.high)})"
    if stat.square:
        r2 = ((stat.high - stat.low) / 2.0) ** 2
        centred = f"({clamped} - {_literal(stat.mid)})"
        clamped = f"LEAST(GREATEST({centred} * {centred}, CAST(0.0 AS DOUBLE)), {_literal(r2)})"
    scaled = f"CAST(ROUND({clamped} * {_literal(stat.inv)}) AS BIGINT) - {int(stat.center)}"
    return f"CASE WHEN {skip} THEN NULL ELSE {scaled} END"


#: DuckDB's arg_min(x, key, n) takes n below 10^6 (larger row bounds: see _kept_values).
_ARG_MIN_LIMIT = 1_000_000


class DuckDBEngine:
    """DuckDB engine over one table or view of a connection.

    Parameters
    ----------
    connection:
        A ``duckdb.DuckDBPyConnection``; each query runs on its own cursor, so threads
        may share the engine.
    relation:
        SQL of the source relation (a quoted table/view name or a table function call).
    """

    def __init__(self, connection: Any, relation: str) -> None:
        self._connection = connection
        self._relation = relation
        self._lock = threading.Lock()
        self._schema_cache: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}

    def _cursor(self) -> Any:
        with self._lock:
            return self._connection.cursor()

    def _execute(
        self, sql: str, params: Sequence[Any] = (), *, reads_rows: bool = True
    ) -> list[tuple[Any, ...]]:
        import duckdb

        cursor = self._cursor()
        try:
            cursor.execute("SET enable_progress_bar = false")
            return list(cursor.execute(sql, list(params)).fetchall())
        except duckdb.Error as err:
            if not reads_rows and isinstance(
                err, duckdb.BinderException | duckdb.CatalogException | duckdb.ParserException
            ):
                # Binding reads no row: the message names columns, types and functions.
                raise EngineError(f"DuckDB cannot run the query: {err}") from None
            # Anything else may quote a row (DuckDB's "Original Line", a cast's value):
            # the class only, and nothing chained.
            raise EngineError(
                f"DuckDB failed while reading the data ({type(err).__name__}). Its message "
                "is not shown because it may quote row values; nothing was released."
            ) from None
        finally:
            cursor.close()

    def _source(
        self,
        derived: Sequence[tuple[str, str]],
        partitions: Sequence[PartScope] = (),
        unit: str | None = None,
    ) -> tuple[str, list[Any]]:
        """SQL of the rows a (sub-)Session sees, with derived columns, and its parameters."""
        sql, params = f"SELECT * FROM {self._relation}", list[Any]()
        for part in partitions:
            # Each level keeps the rows of the level before it with column = key; with a
            # privacy unit, only the units whose row of smallest keyed hash (among their
            # rows visible at this level) lies in this part: a rule on that unit's rows
            # alone, so adding or removing a unit changes one part only. The outer hash
            # mixes every bit (DuckDB's multi-argument hash XORs the last one in).
            c = quote(part.column)
            level = f"SELECT * FROM ({sql}) AS __p WHERE {c} = ?"
            level_params = [*params, part.key]
            if unit is not None:
                u = quote(unit)
                level += (
                    f" AND {u} IN (SELECT {u} FROM ({sql}) AS __q WHERE {u} IS NOT NULL AND "
                    f"{c} IS NOT NULL GROUP BY {u} HAVING arg_min({c}, "
                    f"hash(hash({int(part.salt)}, {u}, {c}))) = ?)"
                )
                level_params += [*params, part.key]
            sql, params = level, level_params
        for name, expression in derived:
            sql = f"SELECT *, ({expression}) AS {quote(name)} FROM ({sql})"
        return sql, params

    def schema(self, derived: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
        key = tuple(derived)
        if key not in self._schema_cache:
            sql, _ = self._source(derived)
            rows = self._execute(f"DESCRIBE {sql}", reads_rows=False)
            self._schema_cache[key] = {str(r[0]): str(r[1]) for r in rows}
        return dict(self._schema_cache[key])

    # ------------------------------------------------------------------ compile
    def compile(self, plan: Plan) -> tuple[str, list[Any]]:
        """The SQL statement and its parameters for ``plan``."""
        values = [
            f"{_value_sql(stat)} AS __v{i}"
            for i, stat in enumerate(plan.statistics)
            if stat.op in ("values", "fixed_sum", "distinct")
        ]
        ctes, params, rows_from, groups = self._rows(plan, values)
        if plan.unit is None:
            final = self._row_level(plan, groups, rows_from)
        else:
            final = self._bounded(plan, groups, rows_from, ctes)
        return "WITH " + ", ".join(ctes) + " " + final, params

    def _rows(self, plan: Plan, values: list[str]) -> tuple[list[str], list[Any], str, list[str]]:
        """CTEs of the plan's rows (filters, derived columns, keys), their parameters,
        the name of the last CTE and the group columns' aliases."""
        groups = [f"__g{i}" for i in range(len(plan.group_columns))]
        select = []
        if plan.unit is not None:
            select.append(f"{quote(plan.unit)} AS __u")
        for name, column in zip(groups, plan.group_columns, strict=True):
            select.append(f"{self._group_sql(plan, column)} AS {name}")
        select.extend(values)
        where = [f"({f})" for f in plan.filters]
        if plan.unit is not None:
            where.append(f"{quote(plan.unit)} IS NOT NULL")
        where += [f"{self._group_sql(plan, c)} IS NOT NULL" for c in plan.group_columns]
        source, params = self._source(plan.derived, plan.partitions, plan.unit)
        base = f"SELECT {', '.join(select) or '1 AS __one'} FROM ({source}) AS __src"
        if where:
            base += " WHERE " + " AND ".join(where)
        # NOT MATERIALIZED: the row-level CTEs are read twice by the quantile path
        # (group selection, then the rows); DuckDB would otherwise materialise every
        # row (3.4 GB at 10^8 rows; 1.4 GB without, and faster).
        ctes = [f"__base AS NOT MATERIALIZED ({base})"]
        if plan.keys is not None and len(groups) == 1:
            # One key column: an IN list (measured faster in DuckDB than a SEMI JOIN
            # with a VALUES table on 10^7 rows; benchmarks/results/session.md).
            params.extend(key[0] for key in plan.keys.keys)
            marks = ", ".join("?" for _ in plan.keys.keys)
            ctes.append(
                f"__kept AS NOT MATERIALIZED (SELECT * FROM __base WHERE {groups[0]} IN ({marks}))"
            )
            rows_from = "__kept"
        elif plan.keys is not None:
            placeholders = ", ".join(
                "(" + ", ".join("?" for _ in key) + ")" for key in plan.keys.keys
            )
            for key in plan.keys.keys:
                params.extend(key)
            names = ", ".join(f"__k{i}" for i in range(len(groups)))
            ctes.append(f"__keys({names}) AS (VALUES {placeholders})")
            cond = " AND ".join(f"b.{g} = k.__k{i}" for i, g in enumerate(groups))
            ctes.append(
                f"__kept AS NOT MATERIALIZED (SELECT b.* FROM __base b SEMI JOIN __keys k "
                f"ON {cond})"
            )
            rows_from = "__kept"
        else:
            rows_from = "__base"
        return ctes, params, rows_from, groups

    def histogram_sql(self, plan: Plan, spec: OrderSpec) -> tuple[str, list[Any]]:
        """SQL of the per-group grid histogram of ``spec`` (see dpkit.analytics._order)."""
        raw = f"CAST(({spec.expression}) AS DOUBLE)"
        if spec.kind == "min":
            raw = f"(-{raw})"
        value = f"CASE WHEN isnan({raw}) THEN NULL ELSE {raw} END AS __xr"
        ctes, params, rows_from, groups = self._rows(plan, [value])
        gl = "".join(f", {g}" for g in groups)
        if plan.unit is not None:
            pair_keys = "__u" + gl
            if groups:
                join = " AND ".join(f"r.{c} = p.{c}" for c in ["__u", *groups])
                ctes.append(
                    f"__gsel AS (SELECT {pair_keys} FROM (SELECT {pair_keys} FROM {rows_from} "
                    f"GROUP BY {pair_keys}) QUALIFY row_number() OVER (PARTITION BY __u "
                    f"ORDER BY hash({plan.salt}, {pair_keys}){gl}) <= {plan.max_groups})"
                )
                ctes.append(
                    f"__grows AS NOT MATERIALIZED (SELECT r.* FROM {rows_from} r "
                    f"SEMI JOIN __gsel p ON {join})"
                )
                rows_from = "__grows"
            if spec.kind == "quantile":
                ctes.extend(self._kept_values(plan, rows_from, groups))
            else:
                ctes.append(
                    f"__vals AS (SELECT max(__xr) AS __xr{gl} FROM {rows_from} "
                    f"WHERE __xr IS NOT NULL GROUP BY {pair_keys})"
                )
        else:
            ctes.append(f"__vals AS (SELECT __xr{gl} FROM {rows_from} WHERE __xr IS NOT NULL)")
        x, guess = snap_sql(spec, "__xr")
        ctes.append(f"__snap AS (SELECT {x} AS __x{gl} FROM __vals)")
        ctes.append(f"__guess AS (SELECT __x, {guess} AS __gi{gl} FROM __snap)")
        ctes.append("__cuts AS (SELECT CAST(? AS DOUBLE[]) AS __e)")
        params.append(spec.cuts())
        index = "__gi + CAST(__x >= __e[__gi + 2] AS BIGINT) - CAST(__x < __e[__gi + 1] AS BIGINT)"
        keys = "".join(f"{g}, " for g in groups)
        final = f"SELECT {keys}{index} AS __i, count(*) FROM __guess, __cuts GROUP BY {keys}__i"
        return "WITH " + ", ".join(ctes) + " " + final, params

    @staticmethod
    def _kept_values(plan: Plan, rows_from: str, groups: list[str]) -> list[str]:
        """CTEs ending in ``__vals``: each (unit, group) pair's ``m`` non-NULL values of
        smallest keyed hash of ``(salt, unit, groups, value)`` -- all of them if it has
        at most ``m`` -- a rule on that pair's rows alone, whatever their order.

        Rows with the same value share a hash and are interchangeable; distinct values
        of one pair tie only on a 64-bit hash collision, which the window breaks by
        value and ``arg_min`` in an unspecified order (the pair still keeps exactly
        ``min(rows, m)`` values).
        """
        m, salt = plan.max_rows, plan.salt
        gl = "".join(f", {g}" for g in groups)
        pair_keys = "__u" + gl
        # DuckDB's hash(a, ..., x) XORs hash(x) into the hash of the other arguments
        # (CombineHash), so hash(s, u, g, x) orders a pair's values by K xor hash(x)
        # with K fixed per pair: the first values are those sharing K's top bits, and
        # nearby salts often kept the same subset (23 distinct 10-subsets of 100 values
        # for 30 salts). The outer hash of a BIGINT is MurmurHash64's finaliser, a
        # bijection: it keeps ties exactly as they were and mixes every bit of K.
        key = f"hash(hash({salt}, {pair_keys}, __xr))"
        if m < _ARG_MIN_LIMIT:
            # A bounded aggregate: the hash aggregate holds at most m (hash, value)
            # entries per pair, however many rows the pair has; no window over the
            # rows. Measured at 10^8 rows (benchmarks/results/session.md): 1.36 GB for
            # the median histogram, against 1.59 GB for a row_number() window over the
            # kept rows; on the ungrouped private-bounds histogram a window would hold
            # every row of the table (arg_min: 440 MB). The state is ~0.2 kB per kept
            # value, so memory grows with persons x k x m, not with rows.
            groups_out = "".join(f"{g}, " for g in groups)
            return [
                f"__vals AS (SELECT {groups_out}unnest(arg_min(__xr, {key}, {m})) AS __xr "
                f"FROM {rows_from} WHERE __xr IS NOT NULL GROUP BY {pair_keys})"
            ]
        # m >= 10^6 is beyond arg_min's n: pairs with at most m values keep them all
        # (no ranking needed), and only the rows of pairs with more than m values --
        # a person with over a million rows in one group -- go through a window.
        on = " AND ".join(f"r.{c} = p.{c}" for c in ["__u", *groups])
        return [
            f"__cnt AS (SELECT {pair_keys}, count(*) AS __c FROM {rows_from} "
            f"WHERE __xr IS NOT NULL GROUP BY {pair_keys})",
            f"__vals AS (SELECT r.__xr{''.join(f', r.{g}' for g in groups)} FROM {rows_from} r "
            f"SEMI JOIN (SELECT * FROM __cnt WHERE __c <= {m}) p ON {on} "
            f"WHERE r.__xr IS NOT NULL UNION ALL SELECT __xr{gl} FROM (SELECT r.* FROM "
            f"{rows_from} r SEMI JOIN (SELECT * FROM __cnt WHERE __c > {m}) p ON {on} "
            f"WHERE r.__xr IS NOT NULL) QUALIFY row_number() OVER (PARTITION BY {pair_keys} "
            f"ORDER BY {key}, __xr) <= {m})",
        ]

    def histograms(self, plan: Plan, spec: OrderSpec) -> dict[tuple[Any, ...], dict[int, int]]:
        """Per group key: grid index -> count (sparse), for ``spec`` (raises EngineError)."""
        sql, params = self.histogram_sql(plan, spec)
        width = len(plan.group_columns)
        out: dict[tuple[Any, ...], dict[int, int]] = {}
        for row in self._execute(sql, params):
            out.setdefault(tuple(row[:width]), {})[int(row[width])] = int(row[width + 1])
        return out

    def _group_sql(self, plan: Plan, column: str) -> str:
        for name, source, edges in plan.bins:
            if name == column:
                x = f"CAST({quote(source)} AS DOUBLE)"
                cases = " ".join(
                    f"WHEN {x} < {_literal(edge)} THEN {i}" for i, edge in enumerate(edges[1:-1])
                )
                last = len(edges) - 2
                return f"(CASE WHEN {x} IS NULL OR isnan({x}) THEN NULL {cases} ELSE {last} END)"
        return quote(column)

    def _aggregates(self, plan: Plan, *, pair_level: bool) -> list[str]:
        out = []
        for i, stat in enumerate(plan.statistics):
            if stat.op == "rows":
                out.append("count(*)")
            elif stat.op == "units":
                out.append("count(*)" if not pair_level else "1")
            elif stat.op == "values":
                out.append(f"count(__v{i})")
            elif stat.op == "fixed_sum":
                out.append(f"sum(__v{i})")
            else:  # distinct, row level only
                out.append(f"count(DISTINCT __v{i})")
        return out

    def _row_level(self, plan: Plan, groups: list[str], rows_from: str) -> str:
        aggs = ", ".join(self._aggregates(plan, pair_level=False))
        if not groups:
            return f"SELECT {aggs} FROM {rows_from}"
        keys = ", ".join(groups)
        return f"SELECT {keys}, {aggs} FROM {rows_from} GROUP BY {keys}"

    def _bounded(self, plan: Plan, groups: list[str], rows_from: str, ctes: list[str]) -> str:
        m, k, salt = plan.max_rows, plan.max_groups, plan.salt
        row_source = rows_from
        pair_keys = ", ".join(["__u", *groups])
        sums = [i for i, s in enumerate(plan.statistics) if s.op in ("values", "fixed_sum")]
        pair_aggs = ["count(*) AS __c"]
        for i in sums:
            op = "count" if plan.statistics[i].op == "values" else "sum"
            pair_aggs.append(f"{op}(__v{i}) AS __s{i}")
        ctes.append(
            f"__pairs AS (SELECT {pair_keys}, {', '.join(pair_aggs)} FROM {rows_from} "
            f"GROUP BY {pair_keys})"
        )
        # Step 2 of the module docstring. A pair with c > m rows is scaled to m rows'
        # worth: S -> trunc(S * m / c). Why the per-row bound still holds: every row's
        # integer summand lies in [a, b] (integers, Statistic.unit_range), so
        # S in [c a, c b] and S m / c in [m a, m b]; truncation towards zero (DuckDB's
        # integer ``//``) maps a real number in an interval with integer ends into the
        # same interval. So the pair's contribution is in [m a, m b], the same range as
        # m kept rows: the per-group sensitivity m * max(|a|, |b|) is unchanged. For
        # counts of values (a = 0, b = 1) it gives trunc(v m / c) <= m.
        #
        # trunc(S m / c) is computed as q m + trunc(r m / c) with S = q c + r (DuckDB's
        # // truncates and % takes the dividend's sign, so q m and r m / c share S's
        # sign and the truncations add up). Widths, from public bounds only: every
        # summand is below 2^62 in absolute value (Statistic.unit_range, 2^61 steps
        # plus the centre), so |q| < 2^62, |q m| < 2^93 and |r m| < c m < 2^94 (m <=
        # 2^31, c < 2^63): nothing overflows HUGEINT (2^127), on any data.
        scaled = [f"least(__c, {m}) AS __c"]
        for i in sums:
            s = f"CAST(__s{i} AS HUGEINT)"
            scaled.append(
                f"CASE WHEN __c <= {m} THEN __s{i} "
                f"ELSE ({s} // __c) * {m} + (({s} % __c) * {m}) // __c END AS __s{i}"
            )
        ctes.append(f"__bounded AS (SELECT {pair_keys}, {', '.join(scaled)} FROM __pairs)")
        if groups:
            # Step 3: each unit's k groups of smallest keyed hash (ties broken by key).
            # The salt goes first: DuckDB's hash(a, b, ...) mixes later arguments weakly
            # (with the salt last, the same groups won for most salts).
            order = f"hash({salt}, {pair_keys}), {', '.join(groups)}"
            ctes.append(
                f"__ranked AS (SELECT * FROM __bounded QUALIFY row_number() OVER "
                f"(PARTITION BY __u ORDER BY {order}) <= {k})"
            )
            rows_from = "__ranked"
        else:
            rows_from = "__bounded"
        distinct = [i for i, stat in enumerate(plan.statistics) if stat.op == "distinct"]
        keys = ", ".join(groups)
        # Only distinct counts: the pairs' aggregate still needs one column (it gives
        # the groups the distinct counts are joined to).
        main_columns = self._main_columns(plan) or ["count(*) AS __pairs"]
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

    @staticmethod
    def _main_columns(plan: Plan) -> list[str]:
        """The per-group aggregates over the bounded pairs, named ``__a{i}``."""
        out = []
        for i, stat in enumerate(plan.statistics):
            if stat.op == "rows":
                out.append(f"sum(__c) AS __a{i}")
            elif stat.op == "units":
                out.append(f"count(*) AS __a{i}")
            elif stat.op in ("values", "fixed_sum"):
                out.append(f"sum(__s{i}) AS __a{i}")
        return out

    @staticmethod
    def _distinct_values(
        plan: Plan, groups: list[str], row_source: str, pairs: str, ctes: list[str], i: int
    ) -> None:
        """CTE ``__dist{i}``: per group, the number of distinct values of statistic ``i``
        when every person keeps at most ``max_rows`` of its distinct values per group
        (those of smallest keyed hash: a rule on that person's rows alone) in the groups
        the pairs kept. A person then changes a group's count by at most ``max_rows``."""
        m, salt = plan.max_rows, plan.salt
        pair_keys = ", ".join(["__u", *groups])
        ctes.append(
            f"__dv{i} AS (SELECT DISTINCT {pair_keys}, __v{i} AS __v FROM {row_source} "
            f"WHERE __v{i} IS NOT NULL)"
        )
        if groups:
            join = " AND ".join(f"v.{c} = p.{c}" for c in ["__u", *groups])
            ctes.append(f"__dvk{i} AS (SELECT v.* FROM __dv{i} v SEMI JOIN {pairs} p ON {join})")
            source = f"__dvk{i}"
        else:
            source = f"__dv{i}"
        # A window, not arg_min: it ranks the distinct (unit, group, value) triples that
        # the DISTINCT above already holds (not the rows), and orders ties by value. On
        # 10^7 rows with ~10^7 distinct values, arg_min(v, hash, m) used as much memory
        # or more (576-719 MiB against 544-557 MiB) and was no faster.
        ctes.append(
            f"__dvb{i} AS (SELECT * FROM {source} QUALIFY row_number() OVER "
            f"(PARTITION BY {pair_keys} ORDER BY hash({salt}, {pair_keys}, __v), __v) <= {m})"
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
    def prepare(self, plan: Plan, orders: Sequence[OrderSpec] = ()) -> None:
        # EXPLAIN binds and plans each statement (names, types, functions) without
        # reading the data, so every failure that the query's shape can cause is
        # raised here, before the Session charges anything.
        statements = [self.histogram_sql(plan, spec) for spec in orders]
        if plan.statistics:
            statements.append(self.compile(plan))
        for sql, params in statements:
            self._execute("EXPLAIN " + sql, params, reads_rows=False)

    def aggregate(self, plan: Plan) -> EngineResult:
        sql, params = self.compile(plan)
        rows = self._execute(sql, params)
        width = len(plan.group_columns)
        result: EngineResult = {}
        for row in rows:
            key = tuple(row[:width])
            result[key] = [0 if v is None else int(v) for v in row[width:]]
        return result
