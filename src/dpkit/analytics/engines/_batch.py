"""Several plans' integers from one statement: the shared scans of ``dpkit describe``.

A Session that evaluates a batch of queries together
(:func:`dpkit.analytics._shared_scan.evaluate_many`) asks its engine for every plan's
exact integers at once. Where plans read the same rows in the same way, one statement
computes them all; it returns, for every plan, *the same integers* as the plan's own
statement (:meth:`SqlEngine.aggregate`, :meth:`SqlEngine.histograms`), so nothing in
the privacy argument changes: each query keeps its own salt, bound and statistics, and
its noise and charge are those of its own compilation. What is shared is the work:
one scan of the table and one aggregate per privacy unit instead of one per query
(issue 34: describe ran ~40 statements, each reading every row and grouping by person).

Four shapes are shared, which is what describe's per-column stages run; the first
three ungrouped (no public keys, no bins, the same partitions):

* **sums** (:func:`aggregate_sql`), with a privacy unit: counts of rows and of values,
  fixed-point sums and counts of units. Each plan's rows are those passing its
  filters; its per-unit pair (step 1 of :mod:`._sql`) is the unit's rows passing
  them, so one ``GROUP BY`` unit computes every plan's pair with ``CASE WHEN filter
  THEN value END`` inside each aggregate -- exactly the plan's own pair, with a unit
  that has no row passing the filter contributing a count of 0 and a NULL sum (as if
  absent: it adds 0 to every final sum, and it is not counted as a unit). Step 2
  (scaling a pair with more than ``max_rows`` rows) is the same SQL
  (:meth:`SqlEngine._scaled_sum`).
* **row-level sums** (:func:`row_sums_sql`), without a privacy unit, on engines where
  it pays (:attr:`SqlEngine.shares_row_sums`: Spark): the same aggregates over the
  rows, each plan's filter in a ``CASE``.
* **order statistics** (:func:`histograms_sql`), with a privacy unit: grid histograms
  of quantiles (and maxima, minima). Every row's grid index for every plan is
  computed in one scan; one ``GROUP BY`` unit counts each plan's values per unit and
  takes each plan's maximum index. A quantile keeps, per unit, the ``max_rows`` values
  of smallest ``(H(salt, unit, index), index)`` -- all of them when the unit has at
  most ``max_rows``, so only the other units' rows are ranked
  (:meth:`SqlEngine._kept_values` does the same for one plan). The maximum's
  histogram counts each unit's largest index.
* **row-level counts per bin** (:func:`row_bins_sql`), without a privacy unit, on
  engines where it pays (:attr:`SqlEngine.shares_row_bins`: Spark): describe's ranges
  and histograms, one binned column each with every bin its keys. Every row's bin
  index for every plan is computed in one projection, and the row expanded into one
  ``(plan, index)`` entry per plan whose filters it passes.

A neighbouring table (one person added or removed) changes, in each plan, only that
person's rows, pair and kept values, exactly as in the plan's own statement: the
statement is a different way of writing the same function of the rows. The parity of
the two ways is tested on DuckDB and Spark (tests/analytics/test_describe_batch.py).

Plans of other shapes, and a plan alone, run as before, one statement each; on Spark
the order statistics too (:attr:`SqlEngine.shares_histograms`). A batch's statements
run in one pool (:func:`compute_many`), and every one is bound (:func:`prepare_many`)
before the Session charges.

Row-level counts per bin in one statement first fell off a cliff on Spark at 10^6
rows (two range plans 0.62 s, three 6.5 s, nine 17 s, against ~0.35 s each alone).
The cause (issue 34): each plan's index was wrapped in ``CASE WHEN filters THEN
index END``, which keeps Spark's subexpression elimination out of the index's
repeated guess, so the projection's generated method grew past the size the JVM
compiles, and ran interpreted. :func:`row_bins_sql` computes the filters beside the
index instead, and :data:`MAX_SHARED_BINS` keeps a statement's method below that size.
On DuckDB, row-level sums in one statement made describe slower at 10^6 rows (2.2 s
against 1.7 s).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, NamedTuple, TypeVar

import sqlglot
from sqlglot import exp

from dpkit.analytics._order import OrderSpec, snap_sql
from dpkit.analytics._plan import Plan
from dpkit.analytics.engines._base import EngineResult
from dpkit.analytics.engines._hash import SMALL_INDEX, TypedPart
from dpkit.analytics.engines._sql import SqlEngine, _window_limit, power_ladder
from dpkit.errors import InternalError

__all__ = [
    "aggregate_many",
    "aggregate_sql",
    "compute_many",
    "histograms_many",
    "histograms_sql",
    "prepare_many",
    "row_bins_sql",
    "row_sums_sql",
    "share_aggregates",
    "share_orders",
    "share_row_bins",
    "share_row_sums",
]

_Item = TypeVar("_Item")
_Out = TypeVar("_Out")

_SUM_OPS = ("rows", "units", "values", "fixed_sum")
#: Row-level statistics a shared statement computes; without a privacy unit "units"
#: counts rows, as "rows" does (SqlEngine._aggregates).
_ROW_SUM_OPS = ("rows", "units", "values", "fixed_sum")
#: Plans per shared sums statement: its per-person aggregate holds every plan's pair
#: sums (HUGEINT states), so its memory grows with persons x plans. Measured at 10^7
#: rows and 10^6 persons: 8 plans in one statement peaked at 1.37 GB (7.1 CPU seconds),
#: against 0.35 GB for one plan alone (1.3 s each).
MAX_SHARED_SUMS = 4
#: Derived columns per shared statement. Each is a nested SELECT of the statement (one
#: may read those before it): on Spark, 40 plans with one derived column each in one
#: statement were bound but then failed, and 65 in describe's sums failed to bind
#: ("Max iterations (100) reached for batch Resolution").
MAX_SHARED_DERIVED = 16
#: Row-level plans per shared statement (:func:`row_sums_sql`): no per-person state, so
#: the bound is the statement's size, which Spark analyses in time growing with it.
MAX_SHARED_ROWS = 16
#: Row-level plans per shared count of bins (:func:`row_bins_sql`). Spark compiles the
#: statement's projection -- every plan's bin index -- into one Java method, and the JVM
#: does not compile a method past 8,000 bytes of bytecode (HotSpot's
#: DontCompileHugeMethods): it runs interpreted, ~10x slower. Measured at 10^6 rows x 24
#: columns (describe's range plans, four statements at a time): 6 plans a statement
#: 1.9-2.1 s, 8 2.2-2.6 s, 12 7.6-8.3 s, 24 14-16 s, each column alone 3.1-4.3 s.
MAX_SHARED_BINS = 6
#: Interior edges of a bin column whose index is a binary search (not
#: :func:`~dpkit.analytics.engines._sql.power_ladder`'s arithmetic index) for its plan to
#: share a count of bins: the search is one nested CASE per edge, which would fill the
#: method above with few plans.
MAX_SHARED_SEARCH_EDGES = 32


#: Expression nodes (SQLGlot's) of a derived column that a shared statement may compute
#: on every row where expressions can raise (:attr:`SqlEngine.expressions_may_raise`):
#: columns, literals, arithmetic without division, comparisons, logic, CASE and rounding,
#: none of which raises on Spark with ANSI off, whatever the value (and the compiler's
#: TRY around them, which adds nothing that could).
_EVERY_ROW_NODES: tuple[type[exp.Expression], ...] = (
    exp.Try,
    exp.Column,
    exp.Identifier,
    exp.Literal,
    exp.Boolean,
    exp.Null,
    exp.Paren,
    exp.Neg,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.And,
    exp.Or,
    exp.Not,
    exp.Is,
    exp.Case,
    exp.If,
    exp.Round,
    exp.Floor,
    exp.Ceil,
    exp.Abs,
)


def computes_on_every_row(plan: Plan) -> bool:
    """Whether every derived column of ``plan`` is made of :data:`_EVERY_ROW_NODES`.

    A shared statement computes each plan's derived columns and values on every row,
    also the rows that plan's filters drop; the plan's own statement filters first. On
    an engine where an expression can raise on some value (Spark: ``date_trunc`` of a
    DATE past the year ~294,000 overflows, "long overflow"), a row that every filter drops
    could then fail the shared statement after the charge -- a one-row oracle, and the
    Session locked (found by an adversarial review, issue 34). Such a plan runs alone
    there (:func:`_statements`)."""
    for _, sql in plan.derived:
        tree = sqlglot.parse_one(sql, read="duckdb")
        if not all(isinstance(node, _EVERY_ROW_NODES) for node in tree.walk()):
            return False
    return True


def _ungrouped_with_unit(plan: Plan) -> bool:
    return (
        plan.unit is not None
        and not plan.group_columns
        and plan.keys is None
        and not plan.bins
        and plan.max_rows >= 1
        # The compiler folds a total bound into max_rows for an ungrouped plan; a plan
        # that still has one is not this module's to run (it has no step 3b).
        and plan.max_total_rows is None
    )


def _merged_derived(plans: Sequence[Plan]) -> tuple[tuple[str, str], ...] | None:
    """The plans' derived columns in one list, or None when two plans derive one name
    (case-insensitively) from different expressions."""
    merged: dict[str, tuple[str, str]] = {}
    for plan in plans:
        for name, expression in plan.derived:
            known = merged.get(name.casefold())
            if known is None:
                merged[name.casefold()] = (name, expression)
            elif known != (name, expression):
                return None
    return tuple(merged.values())


def _compatible(plans: Sequence[Plan]) -> bool:
    first = plans[0]
    return (
        all(p.unit == first.unit and p.partitions == first.partitions for p in plans)
        and _merged_derived(plans) is not None
    )


def share_aggregates(plans: Sequence[Plan]) -> list[int]:
    """Indices of the plans :func:`aggregate_sql` computes together (at least two
    compatible ones, else none)."""
    chosen = [
        i
        for i, plan in enumerate(plans)
        if _ungrouped_with_unit(plan)
        and plan.statistics
        and all(s.op in _SUM_OPS for s in plan.statistics)
    ]
    if len(chosen) < 2:
        return []
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i in chosen:
        groups.setdefault((plans[i].unit, plans[i].partitions), []).append(i)
    best = max(groups.values(), key=len)
    return best if len(best) >= 2 and _compatible([plans[i] for i in best]) else []


def _ungrouped_row_level(plan: Plan) -> bool:
    return (
        plan.unit is None
        and not plan.group_columns
        and plan.keys is None
        and not plan.bins
        and not plan.partitions
        and plan.max_total_rows is None
    )


def share_row_sums(plans: Sequence[Plan]) -> list[int]:
    """Indices of the row-level plans :func:`row_sums_sql` computes together (at least
    two whose derived columns agree, else none)."""
    chosen = [
        i
        for i, plan in enumerate(plans)
        if _ungrouped_row_level(plan)
        and plan.statistics
        and all(s.op in _ROW_SUM_OPS for s in plan.statistics)
    ]
    if len(chosen) < 2 or _merged_derived([plans[i] for i in chosen]) is None:
        return []
    return chosen


def _row_level_bin_count(plan: Plan) -> bool:
    """A row-level count of rows per bin of one column, every bin its keys (describe's
    ranges and histograms without a privacy unit), with a compact bin index."""
    if not (
        plan.unit is None
        and not plan.partitions
        and plan.max_total_rows is None
        and SqlEngine._keys_are_every_bin(plan)
        and plan.statistics
        and all(s.op in ("rows", "units") for s in plan.statistics)
    ):
        return False
    edges = next(edges for name, _, edges in plan.bins if name == plan.group_columns[0])
    interior = edges[1:-1]
    return power_ladder(interior) is not None or len(interior) <= MAX_SHARED_SEARCH_EDGES


def share_row_bins(plans: Sequence[Plan]) -> list[int]:
    """Indices of the row-level plans :func:`row_bins_sql` computes together (at least
    two whose derived columns agree, else none)."""
    chosen = [i for i, plan in enumerate(plans) if _row_level_bin_count(plan)]
    if len(chosen) < 2 or _merged_derived([plans[i] for i in chosen]) is None:
        return []
    return chosen


def share_orders(jobs: Sequence[tuple[Plan, OrderSpec]]) -> list[int]:
    """Indices of the (plan, spec) jobs :func:`histograms_sql` computes together."""
    chosen = [
        i
        for i, (plan, spec) in enumerate(jobs)
        if _ungrouped_with_unit(plan) and spec.kind in ("quantile", "max", "min")
    ]
    if len(chosen) < 2:
        return []
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i in chosen:
        groups.setdefault((jobs[i][0].unit, jobs[i][0].partitions), []).append(i)
    best = max(groups.values(), key=len)
    return best if len(best) >= 2 and _compatible([jobs[i][0] for i in best]) else []


def _chunks(indices: list[int], plans: Sequence[Plan], size: int | None) -> list[list[int]]:
    """``indices`` in statements of at most ``size`` plans (None: any number) and
    :data:`MAX_SHARED_DERIVED` derived columns (a chunk of a single plan runs as one,
    the same SQL shape)."""
    out: list[list[int]] = []
    current: list[int] = []
    names: set[str] = set()
    for i in indices:
        new = {name.casefold() for name, _ in plans[i].derived} - names
        full = size is not None and len(current) >= size
        if current and (full or len(names) + len(new) > MAX_SHARED_DERIVED):
            out.append(current)
            current, names = [], set()
            new = {name.casefold() for name, _ in plans[i].derived}
        current.append(i)
        names |= new
    if current:
        out.append(current)
    return out


def _filtered(engine: SqlEngine, plan: Plan, sql: str) -> str:
    """``sql`` where the plan's filters hold, else NULL (a filter that is NULL does not
    hold, as in a WHERE clause)."""
    if not plan.filters:
        return sql
    condition = " AND ".join(f"({engine.expression(f, plan.derived)})" for f in plan.filters)
    return f"(CASE WHEN {condition} THEN {sql} END)"


def _scan(engine: SqlEngine, plans: Sequence[Plan], columns: list[str]) -> tuple[str, list[Any]]:
    """The shared scan: the unit and ``columns`` over the plans' common source, rows
    whose unit is NULL dropped (as every plan drops them)."""
    derived = _merged_derived(plans)
    assert derived is not None and plans[0].unit is not None
    source, params = engine._source(derived, plans[0].partitions, plans[0].unit)
    u = engine.q(plans[0].unit)
    select = ", ".join([f"{u} AS __u", *columns])
    return (
        f"__base AS {engine.cte_hint}(SELECT {select} FROM ({source}) AS __src "
        f"WHERE {u} IS NOT NULL)",
        params,
    )


# ---------------------------------------------------------------------- sums
def aggregate_sql(engine: SqlEngine, plans: Sequence[Plan]) -> tuple[str, list[Any]]:
    """One statement computing every plan's statistics (one row: plan by plan, the
    statistics in plan order)."""
    columns: list[str] = []
    pair: list[str] = []
    scaled: list[str] = []
    final: list[str] = []
    for j, plan in enumerate(plans):
        m = plan.max_rows
        columns.append(f"{_filtered(engine, plan, '1')} AS __r{j}")
        pair.append(f"count(__r{j}) AS __c{j}")
        scaled.append(f"least(__c{j}, {m}) AS __c{j}")
        for i, stat in enumerate(plan.statistics):
            name = f"{j}_{i}"
            if stat.op in ("values", "fixed_sum"):
                value = _filtered(engine, plan, f"({engine._value_sql(plan, stat)})")
                columns.append(f"{value} AS __v{name}")
                summed = (
                    f"count(__v{name})"
                    if stat.op == "values"
                    else engine.pair_sum(plan, i, f"__v{name}")
                )
                pair.append(f"{summed} AS __s{name}")
                scaled.append(
                    f"{engine._scaled_sum(plan, i, f'__s{name}', f'__c{j}')} AS __s{name}"
                )
            # The final aggregate of the plan's own statement (SqlEngine._main_columns).
            if stat.op == "rows":
                final.append(f"sum(__c{j})")
            elif stat.op == "units":  # units with a row passing the filters
                final.append(f"count(CASE WHEN __c{j} > 0 THEN 1 END)")
            elif engine._narrow(plan, i):
                final.append(engine.wide_sum(f"__s{name}"))
            else:
                final.append(f"sum(__s{name})")
    base, params = _scan(engine, plans, columns)
    sql = (
        f"WITH {base}, __pairs AS (SELECT __u, {', '.join(pair)} FROM __base GROUP BY __u), "
        f"__bounded AS (SELECT {', '.join(scaled)} FROM __pairs) "
        f"SELECT {', '.join(final)} FROM __bounded"
    )
    return sql, params


def row_sums_sql(engine: SqlEngine, plans: Sequence[Plan]) -> tuple[str, list[Any]]:
    """One statement computing every row-level plan's statistics (one row: plan by
    plan, the statistics in plan order).

    A row-level ungrouped plan's own statement (:meth:`SqlEngine.compile`) aggregates
    the rows passing its filters: ``count(*)``, ``count(v)`` and the wide sum of ``v``.
    Here each plan's rows are marked by ``CASE WHEN filters THEN ... END`` (NULL where
    they do not pass, as a WHERE clause drops them) and the same aggregates skip the
    NULLs: ``count`` of the mark, and ``count`` and the wide sum of the value where the
    filters hold -- the same integers, a sum over no value NULL in both (read as 0)."""
    columns: list[str] = []
    final: list[str] = []
    for j, plan in enumerate(plans):
        columns.append(f"{_filtered(engine, plan, '1')} AS __r{j}")
        for i, stat in enumerate(plan.statistics):
            if stat.op in ("rows", "units"):
                final.append(f"count(__r{j})")
                continue
            value = _filtered(engine, plan, f"({engine._value_sql(plan, stat)})")
            columns.append(f"{value} AS __v{j}_{i}")
            summed = f"count(__v{j}_{i})" if stat.op == "values" else engine.wide_sum(f"__v{j}_{i}")
            final.append(summed)
    derived = _merged_derived(plans)
    assert derived is not None
    source, params = engine._source(derived)
    sql = (
        f"WITH __base AS {engine.cte_hint}(SELECT {', '.join(columns)} FROM ({source}) "
        f"AS __src) SELECT {', '.join(final)} FROM __base"
    )
    return sql, params


def row_bins_sql(engine: SqlEngine, plans: Sequence[Plan]) -> tuple[str, list[Any]]:
    """One statement counting every row-level plan's rows per bin (rows of ``(plan,
    bin, count)``, one per plan and bin with a row).

    A plan's own statement (:meth:`SqlEngine.compile`, every bin its keys) is ``SELECT
    index, count(*) FROM rows WHERE filters AND value present GROUP BY index``. Here one
    projection computes, for every row, each plan's bin index and whether the row is
    the plan's (its filters and the value's presence, NULL where a filter is NULL, as
    a WHERE clause reads it); each row is then expanded into one ``(plan, index,
    mine)`` entry per plan and the entries that are the plans' are counted by ``(plan,
    index)``: the same integers, and the bins with no row absent, as there.

    The index is computed for rows that are not the plan's too; it is total
    (:meth:`SqlEngine._group_sql`: comparisons, LEAST/GREATEST and NULL-propagating
    arithmetic, over a column of the table or a derived column of
    :func:`computes_on_every_row`), so no row can make it raise. It is not wrapped in
    the CASE that would make it NULL for those rows: Spark's subexpression elimination
    skips the branches of a CASE, and the index names its first guess three times
    (:meth:`SqlEngine._ladder_index`)."""
    columns: list[str] = []
    entries: list[list[tuple[str, str]]] = []
    for j, plan in enumerate(plans):
        column = plan.group_columns[0]
        mine = [f"({engine.expression(f, plan.derived)})" for f in plan.filters]
        mine.append(f"({engine._group_present_sql(plan, column)})")
        columns.append(f"{engine._group_sql(plan, column)} AS __b{j}")
        columns.append(f"({' AND '.join(mine)}) AS __m{j}")
        entries.append([("__p", str(j)), ("__b", f"__b{j}"), ("__m", f"__m{j}")])
    derived = _merged_derived(plans)
    assert derived is not None
    source, params = engine._source(derived)
    sql = (
        f"WITH __base AS {engine.cte_hint}(SELECT {', '.join(columns)} FROM ({source}) "
        f"AS __src), __entries AS (SELECT {engine.explode}({engine.struct_list(entries)}) "
        f"AS __e FROM __base) SELECT __e.__p, __e.__b, count(*) FROM __entries "
        f"WHERE __e.__m GROUP BY __e.__p, __e.__b"
    )
    return sql, params


def _shared_bins(engine: SqlEngine, plans: Sequence[Plan]) -> list[EngineResult]:
    """The plans' :meth:`SqlEngine.aggregate` results from :func:`row_bins_sql`."""
    sql, params = row_bins_sql(engine, plans)
    results: list[EngineResult] = [{} for _ in plans]
    for j, index, count in engine._execute(sql, params):
        plan = plans[int(j)]
        key = engine._decode_key([index], engine._categories(plan))
        results[int(j)][key] = [int(count)] * len(plan.statistics)
    return results


def _shared_aggregates(
    engine: SqlEngine,
    plans: Sequence[Plan],
    statement: Callable[[SqlEngine, Sequence[Plan]], tuple[str, list[Any]]],
) -> list[EngineResult]:
    """The plans' :meth:`SqlEngine.aggregate` results from their one shared statement
    (:func:`aggregate_sql` or :func:`row_sums_sql`)."""
    sql, params = statement(engine, plans)
    rows = engine._execute(sql, params)
    if len(rows) != 1:
        raise InternalError("a shared aggregate returned other than one row; a bug.")
    values = [0 if v is None else int(v) for v in rows[0]]
    results: list[EngineResult] = []
    start = 0
    for plan in plans:
        width = len(plan.statistics)
        results.append({(): values[start : start + width]})
        start += width
    return results


def aggregate_many(engine: SqlEngine, plans: Sequence[Plan]) -> list[EngineResult]:
    """Every plan's :meth:`SqlEngine.aggregate`, from one statement where they share."""
    return compute_many(engine, plans, [])[1]


# ---------------------------------------------------------------------- orders
def histograms_sql(
    engine: SqlEngine, jobs: Sequence[tuple[Plan, OrderSpec]]
) -> tuple[str, list[Any]]:
    """One statement computing every job's grid histogram: rows ``(job, index,
    count)``. Each job's SQL is that of :meth:`SqlEngine.histogram_sql` for an
    ungrouped plan with a privacy unit, its NULLs guarded explicitly (``LEAST`` and
    ``GREATEST`` skip NULL arguments, where the plan's own statement had dropped the
    row)."""
    raw_columns, snaps, guesses, indices, cuts, counts = [], [], [], [], [], []
    largest: list[int] = []  # the max/min jobs, indexed per unit from its largest value
    cut_params: list[Any] = []
    ctes: list[str] = []
    finals: list[str] = []
    for j, (plan, spec) in enumerate(jobs):
        raw = f"CAST(({engine.expression(spec.expression, plan.derived)}) AS DOUBLE)"
        if spec.kind == "min":
            raw = f"(-{raw})"
        value = _filtered(engine, plan, f"(CASE WHEN isnan({raw}) THEN NULL ELSE {raw} END)")
        raw_columns.append(f"{value} AS __xr{j}")
        x, guess = snap_sql(spec, f"__xr{j}")
        if guess.count("__x ") != 1:
            raise InternalError("the grid index's SQL changed shape; a bug.")
        guess = f"CASE WHEN __x{j} IS NULL THEN NULL ELSE {guess.replace('__x ', f'__x{j} ')} END"
        snaps.append(f"CASE WHEN __xr{j} IS NULL THEN NULL ELSE {x} END AS __x{j}")
        array, array_params = engine.double_array(spec.cuts())
        cuts.append(f"{array} AS __e{j}")
        cut_params.extend(array_params)
        above = engine.element(f"__e{j}", f"__gi{j} + 2")
        below = engine.element(f"__e{j}", f"__gi{j} + 1")
        index = (
            f"CASE WHEN __x{j} IS NULL THEN NULL ELSE __gi{j} + CAST(__x{j} >= {above} AS "
            f"BIGINT) - CAST(__x{j} < {below} AS BIGINT) END"
        )
        guesses.append(f"__x{j}, {guess} AS __gi{j}")
        indices.append(f"{index} AS __i{j}")
        if spec.kind == "quantile":
            # __i{j} is NULL exactly where __x{j} is: the count needs no index.
            counts.append(f"count(__x{j}) AS __c{j}")
            ctes.extend(_kept(engine, plan, j))
            finals.append(f"SELECT {j} AS __job, __i, count(*) AS __n FROM __vals{j} GROUP BY __i")
        else:  # the index of each unit's largest (negated: smallest) value
            # The index is monotone in the value (SqlEngine.histogram_sql), so the
            # index of a unit's largest value is the largest of its indices: computed
            # once per unit, from that value, not once per row.
            counts.append(f"max(__x{j}) AS __x{j}")
            largest.append(j)
            finals.append(
                f"SELECT {j} AS __job, __m{j} AS __i, count(*) AS __n FROM __cnt "
                f"WHERE __m{j} IS NOT NULL GROUP BY __m{j}"
            )
    plans = [plan for plan, _ in jobs]
    base, params = _scan(engine, plans, raw_columns)
    hint = engine.cte_hint
    per_unit = "__per_unit" if largest else "__cnt"
    head = [
        base,
        f"__snap AS {hint}(SELECT __u, {', '.join(snaps)} FROM __base)",
        f"__guess AS {hint}(SELECT __u, {', '.join(guesses)} FROM __snap)",
        f"__cuts AS (SELECT {', '.join(cuts)})",
        f"__idx AS {hint}(SELECT __u, {', '.join(indices)} FROM __guess, __cuts)",
        f"{per_unit} AS (SELECT __u, {', '.join(counts)} FROM __snap GROUP BY __u)",
    ]
    if largest:
        # The rows' guess and index SQL, on each unit's largest value (__x{j} there).
        kept = ", ".join(["__u", *(c.rsplit(" AS ", 1)[1] for c in counts)])
        unit_guesses = ", ".join(guesses[j].split(", ", 1)[1] for j in largest)
        unit_indices = ", ".join(indices[j].replace(f" AS __i{j}", f" AS __m{j}") for j in largest)
        head.append(f"__unit_guess AS (SELECT *, {unit_guesses} FROM __per_unit)")
        head.append(f"__cnt AS (SELECT {kept}, {unit_indices} FROM __unit_guess, __cuts)")
    sql = "WITH " + ", ".join([*head, *ctes]) + " " + " UNION ALL ".join(finals)
    return sql, [*params, *cut_params]


def _kept(engine: SqlEngine, plan: Plan, j: int) -> list[str]:
    """CTEs ending in ``__vals{j}``: each unit's ``max_rows`` grid indices of job ``j``
    of smallest ``(H(salt, unit, index), index)``, all of them for a unit with at most
    ``max_rows`` (the rule of :meth:`SqlEngine._kept_values`, ungrouped: the same
    parts, the same hash of the plan's salt, the same tie-break)."""
    m = plan.max_rows
    keyed = engine._hash(plan.salt)
    linear = keyed.linear([*engine._pair_parts(plan, []), TypedPart("__i", SMALL_INDEX)])
    key = "(__h * 4294967296 + __i)"
    semi = engine.semi_join
    ctes = [
        f"__hv{j} AS (SELECT __u, __i, {linear} AS __hl FROM (SELECT __u, __i{j} AS __i "
        f"FROM __idx WHERE __i{j} IS NOT NULL) AS __o)",
    ]
    # The light units' rows as those of no heavy unit (SqlEngine._kept_values: the
    # same rows, a join holding the few heavy units).
    small = (
        f"SELECT r.__i FROM __hv{j} r {engine.anti_join} (SELECT __u FROM __cnt "
        f"WHERE __c{j} > {m}) p ON r.__u = p.__u"
    )
    big = keyed.finished(
        f"(SELECT r.* FROM __hv{j} r {semi} (SELECT __u FROM __cnt WHERE __c{j} > {m}) p "
        "ON r.__u = p.__u) AS __b0",
        "__hl",
        "__h",
    )
    if m <= engine.top_n_limit:
        ctes.append(
            f"__top{j} AS (SELECT __u, min_by(__i, {key}, {m}) AS __is FROM ({big}) AS __big "
            "GROUP BY __u)"
        )
        ctes.append(
            f"__vals{j} AS ({small} UNION ALL SELECT {engine.explode}(__is) AS __i FROM __top{j})"
        )
    else:
        ctes.append(
            f"__vals{j} AS ({small} UNION ALL SELECT __i FROM ({big}) AS __big QUALIFY "
            f"row_number() OVER (PARTITION BY __u ORDER BY __h, __i) <= "
            f"{_window_limit(m, '__hl')})"
        )
    return ctes


def _shared_histograms(
    engine: SqlEngine, jobs: Sequence[tuple[Plan, OrderSpec]]
) -> list[dict[tuple[Any, ...], dict[int, int]]]:
    """The jobs' :meth:`SqlEngine.histograms` results from their one shared statement."""
    sql, params = histograms_sql(engine, jobs)
    found: list[dict[int, int]] = [{} for _ in jobs]
    for job, index, count in engine._execute(sql, params):
        found[int(job)][int(index)] = int(count)
    # An ungrouped histogram has the one group () -- when a row was counted.
    return [{(): counts} if counts else {} for counts in found]


def histograms_many(
    engine: SqlEngine, jobs: Sequence[tuple[Plan, OrderSpec]]
) -> list[dict[tuple[Any, ...], dict[int, int]]]:
    """Every job's :meth:`SqlEngine.histograms`, from one statement where they share."""
    return compute_many(engine, [], jobs)[0]


class _Statement(NamedTuple):
    """One statement of a batch: the jobs' (``orders``) or plans' (``sums``) indices it
    computes, its SQL, and its run (a list of results, one per index)."""

    kind: str
    indices: list[int]
    sql: Callable[[], tuple[str, list[Any]]]
    run: Callable[[], list[Any]]


def _statements(
    engine: SqlEngine, plans: Sequence[Plan], jobs: Sequence[tuple[Plan, OrderSpec]]
) -> list[_Statement]:
    """The batch's statements, in order: the shared order statistics, the jobs that
    run alone, the shared sums, the plans that run alone."""
    out: list[_Statement] = []
    orders = share_orders(jobs) if engine.shares_histograms else []
    for chunk in _chunks(orders, [plan for plan, _ in jobs], None):
        chosen = [jobs[i] for i in chunk]
        out.append(
            _Statement(
                "orders",
                chunk,
                partial(histograms_sql, engine, chosen),
                partial(_shared_histograms, engine, chosen),
            )
        )
    for i in _alone(orders, len(jobs)):
        out.append(
            _Statement(
                "orders",
                [i],
                partial(engine.histogram_sql, *jobs[i]),
                partial(_listed, engine.histograms, *jobs[i]),
            )
        )
    if engine.expressions_may_raise:
        safe = [computes_on_every_row(plan) for plan in plans]
    else:
        safe = [True] * len(plans)
    sums = [i for i in share_aggregates(plans) if safe[i]]
    rows = [i for i in share_row_sums(plans) if safe[i]] if engine.shares_row_sums else []
    bins = [i for i in share_row_bins(plans) if safe[i]] if engine.shares_row_bins else []
    # Each shared shape: its chosen plans, its SQL, and how its rows become results.
    shapes: list[tuple[list[int], int, Callable[..., Any], Callable[..., Any]]] = [
        (
            sums,
            MAX_SHARED_SUMS,
            aggregate_sql,
            partial(_shared_aggregates, statement=aggregate_sql),
        ),
        (rows, MAX_SHARED_ROWS, row_sums_sql, partial(_shared_aggregates, statement=row_sums_sql)),
        (bins, MAX_SHARED_BINS, row_bins_sql, _shared_bins),
    ]
    for shared, size, sql, run in shapes:
        for chunk in _chunks(shared, plans, size):
            chosen_plans = [plans[i] for i in chunk]
            out.append(
                _Statement(
                    "sums",
                    chunk,
                    partial(sql, engine, chosen_plans),
                    partial(run, engine, chosen_plans),
                )
            )
    for i in _alone([*sums, *rows, *bins], len(plans)):
        out.append(
            _Statement(
                "sums",
                [i],
                partial(engine.compile, plans[i]),
                partial(_listed, engine.aggregate, plans[i]),
            )
        )
    return out


def compute_many(
    engine: SqlEngine, plans: Sequence[Plan], jobs: Sequence[tuple[Plan, OrderSpec]]
) -> tuple[list[dict[tuple[Any, ...], dict[int, int]]], list[EngineResult]]:
    """Every job's :meth:`SqlEngine.histograms` and every plan's
    :meth:`SqlEngine.aggregate`, from shared statements where they share.

    Every statement -- shared or a plan's own, histograms and sums alike -- is one item
    of one :func:`_each`, so on an engine that runs several at once (Spark) a stage's
    short statements run beside its long ones instead of after them (a quantile's
    statement and the sums of the same ``describe`` stage). Each statement computes the
    same integers whenever it runs; the first failure in :func:`_statements`' order is
    raised."""
    statements = _statements(engine, plans, jobs)
    outputs = _each(engine, statements, lambda statement: statement.run())
    found: dict[str, list[Any]] = {"orders": [None] * len(jobs), "sums": [None] * len(plans)}
    for statement, results in zip(statements, outputs, strict=True):
        for i, result in zip(statement.indices, results, strict=True):
            found[statement.kind][i] = result
    return found["orders"], found["sums"]


def prepare_many(
    engine: SqlEngine, plans: Sequence[Plan], jobs: Sequence[tuple[Plan, OrderSpec]]
) -> None:
    """Bind every statement :func:`compute_many` will run -- the shared ones and those
    of the plans and jobs that run alone -- without reading a row; raise EngineError if
    one does not bind (the first in :func:`compute_many`'s order). A plan's own
    statement is not bound where a shared one computes its integers: it never runs."""
    statements = _statements(engine, plans, jobs)
    _each(engine, statements, lambda statement: engine._bind(*statement.sql()))


def _each(engine: SqlEngine, items: Sequence[_Item], work: Callable[[_Item], _Out]) -> list[_Out]:
    """``work`` of every item, in order, up to :attr:`SqlEngine.concurrent_statements`
    at a time. Each item is a statement of its own, computing the same integers
    whenever it runs. The first failure in the items' order is raised, as one after
    the other would raise it, once every statement started has ended (the batch then
    fails before or after its charge exactly as it would sequentially)."""
    workers = min(engine.concurrent_statements, len(items))
    if workers <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(work, item) for item in items]
    return [future.result() for future in futures]


def _listed(work: Callable[..., _Out], *args: Any) -> list[_Out]:
    """``work(*args)`` as a list of one result (a statement computing one plan's)."""
    return [work(*args)]


def _alone(shared: list[int], count: int) -> list[int]:
    """The indices below ``count`` that no shared statement computes."""
    taken = set(shared)
    return [i for i in range(count) if i not in taken]
