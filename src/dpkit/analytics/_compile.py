"""Compile a :class:`Query` under a budget into a plan plus calibrated noise per statistic.

Budget split (documented in docs/analytics.md): the query's budget is divided between
its aggregations (and the private key selection, if any) in proportion to their
``weight`` (1 each by default); an aggregation's share is divided equally between its
statistics (count: 1; sum: 1; mean: count of values + centred sum; variance: count +
centred sum + centred sum of squares), after setting aside, for an aggregation with
``bounds="private"``, the fraction ``PrivateBounds.share`` (default 0.2) of its share
for releasing its clamping bounds. Everything here uses public information only
(schema, bounds, budget), never data.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from dpkit.accounting._math.conversions import pure_to_zcdp_rho
from dpkit.analytics._accounting import (
    BudgetKind,
    Noise,
    calibrate_noise,
    contribution_norms,
    selection_threshold,
)
from dpkit.analytics._canonical import check_key_type
from dpkit.analytics._expr import (
    MAX_EXPANDED_SIZE,
    check_query_cost,
    expanded_size,
    validate_expression,
)
from dpkit.analytics._keys import canonical_key_tuples
from dpkit.analytics._order import ACCURACY_SUFFIX, ORDER_KINDS, OrderSpec, order_spec
from dpkit.analytics._plan import PartScope, Plan, Statistic
from dpkit.analytics._total_filter import with_total_terms_bare
from dpkit.analytics.engines import is_numeric, quote
from dpkit.analytics.query import Aggregation, KeySet, Query, TableKeys
from dpkit.errors import DataError, InternalError, InvalidParameter

__all__ = ["CompiledQuery", "StatisticSpec", "compile_query", "stages_private_bounds"]

#: Grid points of the private-bounds quantiles: resolution (hi - lo) / 10^4 of the search
#: range, for ln(10001) ~ 9.2 in the rank radius (1001 points: 6.9).
BOUNDS_GRID = 10_001
_TARGET_SCALE_BITS = 30  # noise scale ~2^30 grid steps: rounding bias negligible
_MAX_ROW_BITS = 50  # per-row integers stay exact in a double
#: Every clamped value of a fixed-point statistic satisfies |x * inv| <= 2^61, so its
#: rounded integer fits a BIGINT, and so does that integer minus the (public) centre,
#: whatever the data: the width comes from the public bounds, never from the rows
#: (a (5e12, 5e12 + 1) mean used to overflow INT64 only when a row passed the filter).
_MAX_MAGNITUDE_BITS = 61


@dataclass(frozen=True, slots=True)
class StatisticSpec:
    """A statistic of the plan with its role, noise and value-unit conversion."""

    aggregation: str  # aggregation name, or "__selection"
    role: str  # "count", "sum", "values", "centred_sum", "centred_squares", "units"
    statistic: Statistic
    noise: Noise
    share: Fraction

    @property
    def unit(self) -> float:
        """Value units per integer unit (the grid step for sums, 1 for counts)."""
        return 1.0 / self.statistic.inv if self.statistic.op == "fixed_sum" else 1.0


@dataclass(frozen=True, slots=True)
class CompiledQuery:
    plan: Plan
    specs: tuple[StatisticSpec, ...]
    charge: tuple[Fraction, ...]  # exact ledger amount
    selection_delta: float | None
    selection_noise: Noise | None
    orders: tuple[OrderSpec, ...] = ()
    #: Private clamping bounds: one quantile spec per aggregation with
    #: ``bounds="private"`` (named after it), run on ``bounds_plan`` (ungrouped).
    bound_orders: tuple[OrderSpec, ...] = ()
    bounds_plan: Plan | None = None


def _power_of_two_at_most(x: float) -> float:
    return math.ldexp(1.0, math.frexp(x)[1] - 1)


def _grid_inv(bound: float, noise_factor: float, magnitude: float) -> float:
    """1/step (a power of two) so the noise scale is ~2^30 steps, one row's summand
    (at most ``bound`` in value units) is exact in a double, and every clamped value
    (at most ``magnitude`` in absolute value) is below 2^61 steps."""
    bound = max(bound, 1e-300)
    scale_value = noise_factor * bound
    if not math.isfinite(scale_value):
        raise InvalidParameter(
            f"The noise for bounds of magnitude {bound!r} at this budget overflows a double "
            "(its scale in value units is infinite): give narrower bounds or a larger budget."
        )
    inv = _power_of_two_at_most(2.0**_TARGET_SCALE_BITS / scale_value)
    inv = min(inv, _power_of_two_at_most(2.0**_MAX_ROW_BITS / bound))
    return min(inv, _power_of_two_at_most(2.0**_MAX_MAGNITUDE_BITS / max(magnitude, 1e-300)))


def _laplace_epsilon_for_rho(rho: Fraction) -> Fraction:
    """Largest eps (rounded down) with eps tanh(eps/2) <= rho (Steinke 2024, Thm 5)."""
    low, high = 0.0, math.sqrt(2.0 * float(rho)) * 2.0 + 1.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        if Fraction(pure_to_zcdp_rho(mid)) <= rho:
            low = mid
        else:
            high = mid
    return Fraction(low)


def _check_column(name: str, schema: Mapping[str, str], owner: str, numeric: bool) -> None:
    if name not in schema:
        raise DataError(f"{owner}: unknown column {name!r}. Available columns: {sorted(schema)}.")
    if numeric and not is_numeric(schema[name]):
        raise DataError(
            f"{owner}: column {name!r} has type {schema[name]}, but a number is needed."
        )


def _statistics_of(
    agg: Aggregation, bounds: tuple[float, float] | None
) -> list[tuple[str, Statistic]]:
    if agg.kind == "count":
        return [("count", Statistic("rows"))]
    if agg.kind == "count_distinct":
        if agg.column is None:
            return [("units", Statistic("units"))]
        return [("distinct", Statistic("distinct", quote(agg.column)))]
    assert bounds is not None and agg.column is not None
    low, high = bounds
    expr = quote(agg.column)
    mid = (low + high) / 2.0
    if agg.kind == "sum":
        return [("sum", Statistic("fixed_sum", expr, low, high))]
    out = [
        ("values", Statistic("values", expr)),
        ("centred_sum", Statistic("fixed_sum", expr, low, high, mid=mid)),
    ]
    if agg.kind == "variance":
        out.append(
            ("centred_squares", Statistic("fixed_sum", expr, low, high, square=True, mid=mid))
        )
    return out


def _with_grid(stat: Statistic, role: str, factor: float) -> Statistic:
    if stat.op != "fixed_sum":
        return stat
    magnitude = max(abs(stat.low), abs(stat.high))
    if stat.square:
        half = (stat.high - stat.low) / 2.0
        # half * half is inf on overflow (float ** 2 would raise OverflowError instead).
        r2 = half * half
        if not math.isfinite(r2):
            raise InvalidParameter(
                f"The bounds ({stat.low!r}, {stat.high!r}) are too far apart for a variance: "
                "the squared half-width overflows a double. Use narrower bounds."
            )
        inv = _grid_inv(r2 / 2.0, factor, r2)
        center = round(r2 / 2.0 * inv)
    elif role == "centred_sum":
        inv = _grid_inv((stat.high - stat.low) / 2.0, factor, magnitude)
        center = round(stat.mid * inv)
    else:
        inv = _grid_inv(magnitude, factor, magnitude)
        center = 0
    return Statistic(
        stat.op, stat.expression, stat.low, stat.high, inv, center, stat.square, stat.mid
    )


def _bounded_size(expression: str, sizes: dict[str, int], owner: str) -> int:
    size = expanded_size(expression, sizes)
    if size > MAX_EXPANDED_SIZE:
        raise InvalidParameter(
            f"{owner}: {expression!r} is too large once the derived columns it uses are "
            f"expanded ({size} nodes, at most {MAX_EXPANDED_SIZE}): engines inline derived "
            "columns, so a chain that uses each previous column several times grows "
            "exponentially."
        )
    return size


def validated_rows(
    given_derived: Sequence[tuple[str, str]],
    given_filters: Sequence[str],
    schema: Mapping[str, str],
    owner: str,
) -> tuple[list[tuple[str, str]], tuple[str, ...], set[str], dict[str, int]]:
    """Derived columns and filters checked against the grammar and made total (derived
    columns see the table and the derived columns before them; a name may not repeat
    one in any case: engines resolve names without regard to case, so "X" would read
    the table's "x"), with the columns they may name and each derived column's
    expanded size (refused past :data:`MAX_EXPANDED_SIZE`)."""
    known = set(schema)
    derived: list[tuple[str, str]] = []
    sizes: dict[str, int] = {}
    for name, expression in given_derived:
        if name.casefold() in {k.casefold() for k in known}:
            raise InvalidParameter(f"{owner}: derived column {name!r} already exists.")
        derived.append((name, validate_expression(expression, known, "Query.with_column")))
        sizes[name] = _bounded_size(expression, sizes, "Query.with_column")
        known.add(name)
    # A filter's terms that its column types prove total are written bare, ahead of its
    # TRY form, so the engine can push them into scans (dpkit.analytics._total_filter).
    filters = tuple(
        with_total_terms_bare(validate_expression(f, known, "Query.filter"), f, schema)
        for f in given_filters
    )
    for expression in given_filters:
        _bounded_size(expression, sizes, "Query.filter")
    return derived, filters, known, sizes


def _canonical_keyset(keys: KeySet, types: Mapping[str, str]) -> KeySet:
    """``keys`` with every value of its column's type; aliases refused (dpkit.analytics._keys)."""
    column_types = tuple(types[c] for c in keys.columns)
    canonical = canonical_key_tuples(list(keys.keys), keys.columns, column_types, "Query.group_by")
    return KeySet(keys.columns, tuple(canonical))


def filter_column_names(count: int, known: set[str]) -> list[str]:
    """Names for ``count`` filters typed as derived columns, none equal to a name in
    ``known`` without regard to case (engines resolve names without it)."""
    taken = {k.casefold() for k in known}
    names = []
    for i in range(count):
        name = f"__dpkit_filter_{i}"
        while name.casefold() in taken:
            name = "_" + name
        names.append(name)
    return names


def _check_filter_types(
    given: tuple[str, ...],
    rendered: tuple[str, ...],
    derived: tuple[tuple[str, str], ...],
    known: set[str],
    schema_of: Callable[[tuple[tuple[str, str], ...]], Mapping[str, str]],
) -> None:
    """Refuse a filter that is not a boolean expression, on its type (public).

    The engine converts a filter's value to BOOLEAN outside the expression's ``TRY``: a
    filter ``CASE WHEN <secret> THEN 'x' END`` raised on the rows where the secret holds
    only (found by the property test of issue 27)."""
    if not rendered:
        return
    names = filter_column_names(len(rendered), known)
    types = schema_of((*derived, *zip(names, rendered, strict=True)))
    for expression, name in zip(given, names, strict=True):
        # An engine that cannot type an expression (a recipe's engine without SQL)
        # leaves the filter to its own prepare step.
        if name in types and types[name].upper() != "BOOLEAN":
            raise InvalidParameter(
                f"Query.filter: {expression!r} is of type {types[name]}, not BOOLEAN. A "
                "filter must be a condition (a comparison, IS NULL, IN, LIKE, AND/OR...)."
            )


def _output_names(agg: Aggregation) -> list[str]:
    """The result columns of ``agg``, as :func:`dpkit.analytics._release.release` (and
    the Session, for private bounds) names them."""
    values = [agg.name]
    if agg.kind == "quantile" and len(agg.qs) > 1:
        values = [f"{agg.name}_{q:g}" for q in agg.qs]
    suffixes = ["", "_se", "_low", "_high"]
    if agg.kind in ORDER_KINDS:
        suffixes.append(f"_{ACCURACY_SUFFIX[agg.kind]}")
    if agg.kind in ("mean", "variance"):
        suffixes.append("_note")  # a group too small for a ratio (_release._estimate)
    names = [f"{value}{suffix}" for value in values for suffix in suffixes]
    if agg.private is not None:
        names += [f"{agg.name}_clamp_low", f"{agg.name}_clamp_high"]
    return names


def _check_output_names(query: Query) -> None:
    """Refuse a result column name that is also a group column's (compared without
    case), or another aggregation's result column: the result table holds both, and
    one would silently overwrite the other (public names only)."""
    groups = {c.casefold(): c for c in query.group_columns}
    owners: dict[str, str] = {}
    for agg in query.aggregations:
        for name in _output_names(agg):
            if name.casefold() in groups:
                raise InvalidParameter(
                    f"Session.evaluate: the result column {name!r} of aggregation "
                    f"{agg.name!r} has the name of the group column {groups[name.casefold()]!r}; "
                    "give the aggregation another name (name=...)."
                )
            other = owners.setdefault(name, agg.name)
            if other != agg.name:
                raise InvalidParameter(
                    f"Session.evaluate: the result column {name!r} of aggregation "
                    f"{agg.name!r} is also a result column of aggregation {other!r}; "
                    "give one of them another name (name=...)."
                )


def _binding_total(query: Query, unit: str | None, max_groups: int, max_rows: int) -> int | None:
    """``query.max_total_rows`` where it binds: a privacy unit, several groups per person
    and fewer rows than ``max_groups * max_rows``; otherwise None (the per-group bounds
    already imply it, or, with one group per person, it is the per-group bound).

    Where it binds, only the statistics that the engine scales (counts, sums, means,
    variances: SqlEngine._bounded) honour it; the others -- order statistics and
    distinct counts of a column -- keep values per group and are refused, before
    anything is spent, rather than given a bound they do not keep."""
    total = query.max_total_rows
    if total is None or unit is None or max_groups < 2 or total >= max_groups * max_rows:
        return None
    for agg in query.aggregations:
        if agg.kind in ORDER_KINDS or (agg.kind == "count_distinct" and agg.column is not None):
            what = "distinct count of a column" if agg.kind == "count_distinct" else agg.kind
            raise InvalidParameter(
                f"Query.bound: aggregation {agg.name!r} ({what}) keeps its values per "
                f"group, so max_total_rows={total} cannot bound it: a total bound applies to "
                "counts, sums, means and variances. Drop max_total_rows, set it to at least "
                f"max_groups * max_rows = {max_groups * max_rows}, or run {agg.name!r} in a "
                "query of its own."
            )
    return total


def salt_from(random_bytes: bytes) -> int:
    return int.from_bytes(hashlib.sha256(random_bytes).digest()[:7], "big")


def stages_private_bounds(query: Query) -> bool:
    """Whether :func:`compile_query` gives ``query`` ``bound_orders``: an aggregation
    with ``bounds="private"`` other than an order statistic, whose clamping bounds are
    released first (``Session._release_staged``). The query's shape only."""
    return any(a.private is not None and a.kind not in ORDER_KINDS for a in query.aggregations)


def compile_query(
    query: Query,
    *,
    kind: BudgetKind,
    amount: Fraction,
    selection_delta: float | None,
    noise_kind: str | None = None,
    schema: Mapping[str, str],
    schema_of: Callable[[tuple[tuple[str, str], ...]], Mapping[str, str]],
    unit: str | None,
    salt: int,
    base_filters: tuple[str, ...] = (),
    partitions: tuple[PartScope, ...] = (),
) -> CompiledQuery:
    """Validate ``query`` against the schema and calibrate its noise for ``amount``
    (epsilon for Laplace noise, rho for Gaussian)."""
    owner = "Session.evaluate"
    if not isinstance(query, Query):
        raise InvalidParameter.for_parameter("query", owner, "a dpkit.analytics.Query", query)
    if not query.aggregations:
        raise InvalidParameter(
            f"{owner}: the query has no aggregation (add .count(), .sum(), ...)."
        )
    if query.per_person_step is not None:
        raise InternalError("the Session resolves Query.per_person before compiling; a bug.")
    if query.table is not None or query.joins or isinstance(query.keys, TableKeys):
        # The Session resolves them (Session._view_for) before compiling.
        raise InvalidParameter(
            f"{owner}: Query.from_table, Query.join and KeySet.from_table need a Session "
            "over several tables (Session.from_tables)."
        )
    derived, filters, known, _ = validated_rows(query.derived, query.filters, schema, owner)
    # Per-row cost over the whole query (issue 27, section 3): literal characters,
    # concatenation width and regex matches, each derived column counted where it is
    # used; refused from the text alone, before anything is charged.
    check_query_cost(query.derived, query.filters, owner)
    _check_filter_types(query.filters, filters, tuple(derived), known, schema_of)
    derived_schema = schema_of(tuple(derived)) if derived else schema
    for name, column, _ in query.bins:
        _check_column(column, derived_schema, "Query.group_by_bins", numeric=True)
        known.add(name)
    for column in query.group_columns:
        if column not in known:
            raise DataError(
                f"Query.group_by: unknown column {column!r}. Available columns: {sorted(known)}."
            )
    if unit is not None and unit in query.group_columns:
        raise InvalidParameter(f"{owner}: cannot group by the privacy unit {unit!r}.")
    _check_output_names(query)
    # Group keys cross from the engine in one canonical form (dpkit.analytics._canonical):
    # a type without one is refused here, before the charge, on the schema alone.
    binned = {name for name, _, _ in query.bins}
    for column in query.group_columns:
        if column not in binned:
            check_key_type(derived_schema[column], column, "Query.group_by")
    keys = query.keys
    if keys is not None:
        types = dict(derived_schema)
        types.update({name: "INTEGER" for name, _, _ in query.bins})
        keys = _canonical_keyset(keys, types)
    for agg in query.aggregations:
        if agg.column is not None:
            numeric = agg.kind in ("sum", "mean", "variance", *ORDER_KINDS)
            _check_column(agg.column, derived_schema, f"Query.{agg.kind}", numeric)
            if unit is not None and agg.column == unit:
                raise InvalidParameter(
                    f"{owner}: cannot aggregate the privacy unit column {unit!r}."
                )
    # Contribution bounds.
    grouped = bool(query.group_columns)
    if unit is None:
        max_groups, max_rows = 1, 1
    else:
        needs_rows = any(a.kind not in ("count_distinct", "max", "min") for a in query.aggregations)
        if grouped and query.max_groups is None:
            raise InvalidParameter(
                f"{owner}: with privacy_unit={unit!r} a grouped query needs "
                "query.bound(max_groups=...): how many groups one person may contribute to."
            )
        if needs_rows and query.max_rows is None and query.max_total_rows is None:
            raise InvalidParameter(
                f"{owner}: with privacy_unit={unit!r} the query needs "
                "query.bound(max_rows=...): how many rows one person may contribute per group."
            )
        max_groups = query.max_groups if grouped and query.max_groups else 1
        max_rows = query.max_rows or query.max_total_rows or 1
    max_total_rows = _binding_total(query, unit, max_groups, max_rows)
    if max_total_rows is None and query.max_total_rows is not None and unit is not None:
        # One group per person (or none): the total bound is a per-group bound.
        max_rows = min(max_rows, query.max_total_rows)
    # Budget split.
    selection = query.selection
    if selection is not None and kind.name != "approx":
        raise InvalidParameter(
            f"{owner}: private key selection releases keys with a small probability delta, so "
            "it needs a Session budget ApproxDP(epsilon, delta); with this budget "
            f"({kind.total!r}) give public keys (KeySet)."
        )
    # The private-bounds histograms are ungrouped: a person's rows there are bounded by
    # max_rows and by max_total_rows alike.
    bounds_rows = min(max_rows, query.max_total_rows or max_rows) if unit else max_rows
    weights = [Fraction(a.weight) for a in query.aggregations]
    total_weight = sum(weights) + (Fraction(selection.weight) if selection else 0)
    specs: list[StatisticSpec] = []
    # The noise of the query budget's currency (a PureDP budget in a zCDP Session runs
    # Laplace noise: dpkit.analytics._accounting.BudgetKind.query_amount).
    noise_kind = noise_kind or kind.noise
    orders: list[OrderSpec] = []
    bound_orders: list[OrderSpec] = []
    for agg, weight in zip(query.aggregations, weights, strict=True):
        if agg.kind in ORDER_KINDS:
            assert agg.bounds is not None and agg.column is not None
            orders.append(
                order_spec(
                    agg.name,
                    agg.kind,
                    quote(agg.column),
                    agg.bounds,
                    agg.qs,
                    agg.grid_size,
                    noise=noise_kind,
                    share=amount * weight / total_weight,
                    max_groups=max_groups,
                    max_rows=max_rows,
                )
            )
            continue
        agg_share = amount * weight / total_weight
        bounds = agg.bounds
        if agg.private is not None:
            # Private bounds: a fixed fraction of this aggregation's share releases the
            # quantiles of the column (ungrouped, each person's rows capped at max_rows,
            # so k = 1 in the calibration); the rest runs the statistics clamped to the
            # released bounds -- or, before they are released, to the search range,
            # which gives the same plan shape and upper bounds on the noise scales.
            assert agg.column is not None
            bounds_share = agg_share * Fraction(agg.private.share)
            agg_share -= bounds_share
            bound_orders.append(
                order_spec(
                    agg.name,
                    "quantile",
                    quote(agg.column),
                    agg.private.search_range,
                    agg.private.levels,
                    BOUNDS_GRID,
                    noise=noise_kind,
                    share=bounds_share,
                    max_groups=1,
                    max_rows=bounds_rows,
                )
            )
            if bounds is None:
                bounds = agg.private.search_range
        parts = _statistics_of(agg, bounds)
        share = agg_share / len(parts)
        for role, stat in parts:
            per_row_groups = max_groups
            # The grid's scale: one row's noise in value units (L1 or L2 norm in rows).
            l1_rows, l2_rows_squared = contribution_norms(max_rows, per_row_groups, max_total_rows)
            if noise_kind == "laplace":
                factor = l1_rows / float(share)
            else:
                factor = math.sqrt(l2_rows_squared) / math.sqrt(2.0 * float(share))
            gridded = _with_grid(stat, role, factor)
            # A person adds one unit, at most max_rows rows or values, and (with a
            # privacy unit) at most max_rows distinct values of a column per group;
            # with one row per person, one distinct value.
            one_each = stat.op == "units" or (stat.op == "distinct" and unit is None)
            rows_per_group = 1 if one_each else max_rows
            # With max_total_rows a person's rows over all groups are scaled to at most
            # that many rows' worth (SqlEngine._bounded), so their contributions to the
            # groups sum to at most max_total_rows rows' (not units': one per group).
            total = None
            if max_total_rows is not None and not one_each:
                total = max_total_rows * gridded.row_bound()
            noise = calibrate_noise(
                noise_kind, share, rows_per_group * gridded.row_bound(), max_groups, total
            )
            specs.append(StatisticSpec(agg.name, role, gridded, noise, share))
    selection_noise = None
    charge_delta = Fraction(0)
    if selection is not None:
        share = amount * Fraction(selection.weight) / total_weight
        if selection.mechanism == "gaussian":
            selection_noise = calibrate_noise("gaussian", share, 1, max_groups)
        else:
            selection_noise = calibrate_noise(
                "laplace", _laplace_epsilon_for_rho(share), 1, max_groups
            )
        specs.append(
            StatisticSpec("__selection", "units", Statistic("units"), selection_noise, share)
        )
        if selection_delta is None:
            raise InvalidParameter(f"{owner}: no key-selection delta is left in the budget.")
        # Charge the delta the threshold actually costs (at most the one asked for:
        # the threshold is an integer, so the bound usually lands below the request).
        _, spent_delta = selection_threshold(selection_noise, selection_delta)
        charge_delta = Fraction(spent_delta)
    plan = Plan(
        filters=base_filters + filters,
        derived=tuple(derived),
        group_columns=query.group_columns,
        keys=keys,
        unit=unit,
        max_groups=max_groups,
        max_rows=max_rows,
        salt=salt,
        statistics=tuple(s.statistic for s in specs),
        bins=query.bins,
        partitions=partitions,
        max_total_rows=max_total_rows,
    )
    bounds_plan = None
    assert bool(bound_orders) == stages_private_bounds(query)
    if bound_orders:
        bounds_plan = Plan(
            filters=plan.filters,
            derived=plan.derived,
            group_columns=(),
            keys=None,
            unit=unit,
            max_groups=1,
            max_rows=bounds_rows,
            salt=salt,
            statistics=(),
            partitions=partitions,
        )
    charge = kind.vector(amount, charge_delta, Fraction(0))
    return CompiledQuery(
        plan,
        tuple(specs),
        charge,
        selection_delta,
        selection_noise,
        tuple(orders),
        tuple(bound_orders),
        bounds_plan,
    )
