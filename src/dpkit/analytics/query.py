"""Queries: a fluent builder over a frozen query tree, and public group keys.

A :class:`Query` is an immutable value: every builder method returns a new Query, so a
query can be reused, explained and evaluated many times. Nothing here touches data;
expressions are validated against the table's (public) schema when a Session compiles
the query.

Examples
--------
>>> from dpkit.analytics import KeySet, Query
>>> q = (Query()
...      .filter("age >= 18")
...      .group_by("region", keys=KeySet.from_values(region=["north", "south"]))
...      .bound(max_groups=1, max_rows=5)
...      .count()
...      .sum("income", bounds=(0.0, 100_000.0)))
>>> [a.name for a in q.aggregations]
['count', 'sum_income']

Why this module is long (~570 lines): it is the whole public query vocabulary (one
builder method per aggregation, each validating its public parameters and carrying
its docstring); splitting the builder across modules would scatter one class.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Literal, cast

from dpkit import _validation as check
from dpkit.errors import InvalidParameter

__all__ = [
    "Aggregation",
    "Join",
    "KeySelection",
    "KeySet",
    "PerPerson",
    "PrivateBounds",
    "Query",
    "TableKeys",
]

Key = tuple[Any, ...]

#: Largest max_groups and max_rows (2^31): the engine's integer widths are chosen from it.
MAX_CONTRIBUTION_BOUND = 2**31


def _check_key_value(value: object, owner: str) -> object:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise InvalidParameter(
            f"{owner}: group keys cannot be None or NaN (rows with NULL group keys are "
            "dropped before aggregation)."
        )
    if not isinstance(value, str | int | float | bool | Decimal | dt.date):
        raise InvalidParameter.for_parameter(
            "keys", owner, "str, int, float, bool, Decimal, date or datetime values", value
        )
    return value


@dataclass(frozen=True, slots=True)
class KeySet:
    """A public set of group keys: the groups a query reports, whatever the data holds.

    Keys absent from the data are reported (with noisy zero counts); rows whose keys
    are not in the set are dropped. Keys must not come from the private data. When a
    Session compiles the query, each key is converted to its column's type (an int for
    an INTEGER column, a ``datetime.date`` or ISO string for a DATE column, ...) and a
    key that cannot be of that type is refused (see ``dpkit.analytics._keys``).
    """

    columns: tuple[str, ...]
    keys: tuple[Key, ...]

    def __post_init__(self) -> None:
        owner = "KeySet"
        if not self.columns or len(set(self.columns)) != len(self.columns):
            raise InvalidParameter.for_parameter(
                "columns", owner, "a non-empty sequence of distinct column names", self.columns
            )
        seen: set[Key] = set()
        unique: list[Key] = []
        for key in self.keys:
            if len(key) != len(self.columns):
                raise InvalidParameter(
                    f"KeySet: every key must have {len(self.columns)} values, one per column "
                    f"{list(self.columns)}; got a key with {len(key)}."
                )
            checked = tuple(_check_key_value(v, owner) for v in key)
            if checked not in seen:
                seen.add(checked)
                unique.append(checked)
        if not unique:
            raise InvalidParameter("KeySet: give at least one key.")
        object.__setattr__(self, "keys", tuple(unique))

    @classmethod
    def from_values(cls, **values: Iterable[object]) -> KeySet:
        """The keys of one column, or the cross product of several.

        >>> KeySet.from_values(region=["n", "s"], year=[2023, 2024]).keys
        (('n', 2023), ('n', 2024), ('s', 2023), ('s', 2024))
        """
        if not values:
            raise InvalidParameter("KeySet.from_values: give at least one column=values.")
        columns = tuple(values)
        lists = [list(dict.fromkeys(v)) for v in values.values()]
        return cls(columns, tuple(itertools.product(*lists)))

    @classmethod
    def from_tuples(cls, columns: Sequence[str], keys: Iterable[Sequence[object]]) -> KeySet:
        """Explicit keys: ``KeySet.from_tuples(["a", "b"], [(1, "x"), (2, "y")])``."""
        return cls(tuple(columns), tuple(tuple(k) for k in keys))

    @staticmethod
    def from_table(table: str, *columns: str) -> TableKeys:
        """The distinct keys of ``columns`` in the public table ``table`` of a Session
        (``Session.from_tables(..., public=...)``), read when the query is compiled.

        The keys are public (the table is), so reading them spends nothing; NULL and
        NaN keys are left out. ``KeySet.from_table("regions", "region")``.
        """
        owner = "KeySet.from_table"
        name = _check_name(table, owner, "table")
        if not columns:
            raise InvalidParameter(f"{owner}: give at least one column of {table!r}.")
        cols = tuple(_check_name(c, owner, "columns") for c in columns)
        if len(set(cols)) != len(cols):
            raise InvalidParameter.for_parameter(
                "columns", owner, "distinct column names", list(columns)
            )
        return TableKeys(name, cols)

    def __mul__(self, other: KeySet) -> KeySet:
        """Cross product with another KeySet on other columns."""
        if not isinstance(other, KeySet):
            return NotImplemented
        if set(self.columns) & set(other.columns):
            raise InvalidParameter("KeySet product: the two KeySets share a column.")
        keys = tuple(a + b for a, b in itertools.product(self.keys, other.keys))
        return KeySet(self.columns + other.columns, keys)

    def __len__(self) -> int:
        return len(self.keys)


@dataclass(frozen=True, slots=True)
class TableKeys:
    """Public group keys read from a public table of the Session (build with
    :meth:`KeySet.from_table`): the distinct values of ``columns`` in ``table``."""

    table: str
    columns: tuple[str, ...]

    def __len__(self) -> int:
        raise InvalidParameter(
            "KeySet.from_table: the number of keys is known once a Session reads the "
            "public table (Session.public_keyset reads them now)."
        )


JoinHow = Literal["inner", "left"]

#: Aggregates of one person's rows (:meth:`Query.per_person`).
PersonAggregateKind = Literal["count", "sum", "mean", "min", "max"]
PERSON_AGGREGATES: tuple[str, ...] = ("count", "sum", "mean", "min", "max")


@dataclass(frozen=True, slots=True)
class PerPerson:
    """The per-person step of a query (build with :meth:`Query.per_person`): the rows
    (after the joins, ``filters`` and ``derived`` columns given before the step) are
    replaced by one row per person and value of ``by``, holding the person's privacy
    unit, ``by`` and each ``(name, kind, expression)`` of ``aggregates`` computed over
    that person's rows (``expression`` None: ``count`` of rows). Why it is stable:
    ``dpkit.analytics._per_person``."""

    by: tuple[str, ...]
    aggregates: tuple[tuple[str, PersonAggregateKind, str | None], ...]
    filters: tuple[str, ...] = ()
    derived: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        # Checked however the step is made (the builder, or by hand: a frozen dataclass
        # is public): the Session writes SQL from these fields (found by the review).
        owner = "PerPerson"

        def names(value: object, what: str) -> tuple[str, ...]:
            if not isinstance(value, tuple):
                raise InvalidParameter.for_parameter(what, owner, "a tuple", value)
            return tuple(_check_name(v, owner, what) for v in value)

        names(self.by, "by")
        if not isinstance(self.aggregates, tuple) or not self.aggregates:
            raise InvalidParameter.for_parameter(
                "aggregates",
                owner,
                "a non-empty tuple of (name, kind, expression)",
                self.aggregates,
            )
        for item in self.aggregates:
            if not (isinstance(item, tuple) and len(item) == 3):
                raise InvalidParameter.for_parameter(
                    "aggregates", owner, "(name, kind, expression) triples", item
                )
            name, kind, expression = item
            _check_name(name, owner, "aggregate name")
            if kind not in PERSON_AGGREGATES or (expression is None and kind != "count"):
                raise InvalidParameter.for_parameter(
                    "aggregates", owner, f"a kind of {PERSON_AGGREGATES} (None: count)", item
                )
            if expression is not None and (
                not isinstance(expression, str) or not expression.strip()
            ):
                raise InvalidParameter.for_parameter(
                    "aggregates", owner, "a non-empty SQL expression", item
                )
        if not isinstance(self.filters, tuple) or not all(
            isinstance(f, str) and f.strip() for f in self.filters
        ):
            raise InvalidParameter.for_parameter("filters", owner, "SQL expressions", self.filters)
        if not isinstance(self.derived, tuple):
            raise InvalidParameter.for_parameter("derived", owner, "a tuple", self.derived)
        for pair in self.derived:
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], str)):
                raise InvalidParameter.for_parameter("derived", owner, "(name, expression)", pair)
            _check_name(pair[0], owner, "derived column")


@dataclass(frozen=True, slots=True)
class Join:
    """One join of a query (build with :meth:`Query.join`): the rows so far joined
    with the table ``table`` where each pair ``(left, right)`` of ``on`` is equal.

    ``how`` is ``"inner"`` or ``"left"`` (rows with no match kept, with NULLs);
    ``columns`` the columns of ``table`` brought in (default: all but its join keys and
    its privacy unit); ``truncate`` (a join of two private tables only) how many rows
    of each person in ``table`` a row may meet (per value of the join keys). The
    stability argument of each kind of join is in ``dpkit.analytics._joins``.
    """

    table: str
    on: tuple[tuple[str, str], ...]
    how: JoinHow = "inner"
    columns: tuple[str, ...] | None = None
    truncate: int | None = None


@dataclass(frozen=True, slots=True)
class KeySelection:
    """Private key selection: keep keys whose noisy count of distinct persons is >= T.

    ``mechanism`` is ``"gaussian"`` (discrete Gaussian noise) or ``"laplace"``
    (discrete Laplace); ``delta`` is the delta this selection may cost (None: half of
    what remains of the Session's selection delta); ``weight`` its share of the
    query's budget relative to the aggregations (each of weight 1 by default).
    """

    mechanism: Literal["gaussian", "laplace"] = "gaussian"
    delta: float | None = None
    weight: float = 1.0

    def __post_init__(self) -> None:
        owner = "KeySelection"
        if self.mechanism not in ("gaussian", "laplace"):
            raise InvalidParameter.for_parameter(
                "mechanism", owner, "'gaussian' or 'laplace'", self.mechanism
            )
        if self.delta is not None:
            object.__setattr__(
                self, "delta", check.check_delta(self.delta, owner, allow_zero=False)
            )
        object.__setattr__(self, "weight", check.check_positive(self.weight, "weight", owner))


AggregationKind = Literal[
    "count", "count_distinct", "sum", "mean", "variance", "quantile", "max", "min"
]


@dataclass(frozen=True, slots=True)
class Aggregation:
    """One aggregation of a query (see the :class:`Query` builder methods)."""

    kind: AggregationKind
    name: str
    column: str | None = None
    bounds: tuple[float, float] | None = None
    weight: float = 1.0
    qs: tuple[float, ...] = ()  # quantile levels
    grid_size: int | None = None  # points of the output grid (quantile, max, min)
    #: Clamping bounds found privately (``bounds="private"``); ``bounds`` is then None
    #: until the Session has released them.
    private: PrivateBounds | None = None


#: Default levels and budget share of clamping bounds found privately (docs/analytics.md).
DEFAULT_BOUNDS_LEVELS = (0.01, 0.99)
DEFAULT_BOUNDS_SHARE = 0.2


@dataclass(frozen=True, slots=True)
class PrivateBounds:
    """How a Session finds an aggregation's clamping bounds privately.

    The Session first releases the quantiles of the column at ``levels`` (inverse
    sensitivity on a linear grid of 10001 points over the public ``search_range``),
    spending the fraction ``share`` of the aggregation's budget, then clamps to them.
    """

    search_range: tuple[float, float]
    levels: tuple[float, float] = DEFAULT_BOUNDS_LEVELS
    share: float = DEFAULT_BOUNDS_SHARE


def _check_bounds(bounds: object, owner: str) -> tuple[float, float]:
    expected = "a pair (low, high) of finite floats with low < high"
    if not isinstance(bounds, tuple | list) or len(bounds) != 2:
        raise InvalidParameter.for_parameter("bounds", owner, expected, bounds)
    low = check.check_finite_float(bounds[0], "bounds", owner)
    high = check.check_finite_float(bounds[1], "bounds", owner)
    if not low < high:
        raise InvalidParameter.for_parameter("bounds", owner, expected, bounds)
    if not math.isfinite(high - low):
        raise InvalidParameter.for_parameter(
            "bounds", owner, expected + " whose difference is finite", bounds
        )
    return (low, high)


def _check_private(
    search_range: object, levels: object, share: object, owner: str
) -> PrivateBounds:
    if search_range is None:
        raise InvalidParameter(
            f"{owner}: bounds='private' needs search_range=(low, high): public outer bounds "
            "for the grid on which the clamping bounds are searched (e.g. the column's "
            "possible range from its definition, never from the data)."
        )
    checked = _check_bounds(search_range, owner)
    expected = "a pair (low, high) of levels with 0 <= low < high <= 1"
    if not isinstance(levels, tuple | list) or len(levels) != 2:
        raise InvalidParameter.for_parameter("bounds_levels", owner, expected, levels)
    low = check.check_probability(levels[0], "bounds_levels", owner)
    high = check.check_probability(levels[1], "bounds_levels", owner)
    if not low < high:
        raise InvalidParameter.for_parameter("bounds_levels", owner, expected, levels)
    fraction = check.check_probability(share, "bounds_share", owner, open_low=True, open_high=True)
    return PrivateBounds(checked, (low, high), fraction)


def _check_name(name: object, owner: str, what: str = "name") -> str:
    if not isinstance(name, str) or not name or name.startswith("__"):
        raise InvalidParameter.for_parameter(
            what, owner, "a non-empty string not starting with '__'", name
        )
    return name


@dataclass(frozen=True, slots=True)
class Query:
    """An immutable query: filters, derived columns, grouping, bounds, aggregations.

    Build it with the methods below (each returns a new Query) and run it with
    :meth:`dpkit.Session.evaluate`. The privacy guarantee, sensitivity and accuracy of
    each aggregation are stated there and in :meth:`dpkit.Session.explain`.
    """

    filters: tuple[str, ...] = ()
    derived: tuple[tuple[str, str], ...] = ()
    group_columns: tuple[str, ...] = ()
    keys: KeySet | TableKeys | None = None
    selection: KeySelection | None = None
    bins: tuple[tuple[str, str, tuple[float, ...]], ...] = ()
    max_groups: int | None = None
    max_rows: int | None = None
    #: Rows per person over all groups (:meth:`bound`'s ``max_total_rows``).
    max_total_rows: int | None = None
    aggregations: tuple[Aggregation, ...] = ()
    #: The private table the query reads, in a Session over several tables (None: the
    #: Session's only private table).
    table: str | None = None
    joins: tuple[Join, ...] = ()
    #: Rows aggregated per person before grouping (:meth:`per_person`).
    per_person_step: PerPerson | None = None

    # --------------------------------------------------------------- tables
    @classmethod
    def from_table(cls, table: str) -> Query:
        """A query over the private table ``table`` of a Session over several tables
        (:meth:`dpkit.Session.from_tables`); joins, filters and groups follow."""
        return cls(table=_check_name(table, "Query.from_table", "table"))

    def join(
        self,
        table: str,
        on: str | Sequence[str] | Mapping[str, str],
        *,
        how: JoinHow = "inner",
        columns: Sequence[str] | None = None,
        truncate: int | None = None,
    ) -> Query:
        """Join the rows so far with the table ``table`` (public or private) of the
        Session, before filters, derived columns, groups and contribution bounding.

        Parameters
        ----------
        table:
            A table of the Session.
        on:
            The join keys: a column name or names present on both sides, or a mapping
            ``{left column: column of table}``. Keys are compared in their canonical
            form (``dpkit.analytics._canonical``); NULL and NaN keys never match.
        how:
            ``"inner"`` (rows with a match) or ``"left"`` (every row; the columns of
            ``table`` are NULL where nothing matches).
        columns:
            The columns of ``table`` to bring in (default: all but its join keys and,
            for a private table, its privacy unit). A name already in the rows is
            refused: choose the columns.
        truncate:
            For a private ``table`` only (and then required): each person keeps at most
            this many of their rows of ``table`` per value of the join keys (chosen by a
            keyed hash of the row, a rule on that person's rows alone), so a row meets
            at most ``truncate`` rows and the join's size is bounded by public numbers
            before it runs. ``1`` for a table with one row per person (joined on the
            unit) or one row per person and key.

        Privacy
        -------
        Rows of a private table are joined only with rows of the same person (the
        privacy unit is part of every join of two private tables) or with public rows,
        and every joined row belongs to the person of the query's table; contribution
        bounds (:meth:`bound`) apply to the joined rows, per person, so the sensitivity
        is what ``bound`` says. Details: ``dpkit.analytics._joins``.
        """
        owner = "Query.join"
        name = _check_name(table, owner, "table")
        if self.per_person_step is not None:
            raise InvalidParameter(
                f"{owner}: joins come before Query.per_person (the per-person rows are "
                "computed from the joined rows)."
            )
        if isinstance(on, str):
            pairs: tuple[tuple[str, str], ...] = ((on, on),)
        elif isinstance(on, Mapping):
            pairs = tuple((str(k), str(v)) for k, v in on.items())
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in on.items()):
                raise InvalidParameter.for_parameter("on", owner, "column names (str -> str)", on)
        elif isinstance(on, Sequence) and all(isinstance(c, str) for c in on):
            pairs = tuple((c, c) for c in on)
        else:
            raise InvalidParameter.for_parameter(
                "on", owner, "a column name, a list of names or a mapping of names", on
            )
        if not pairs:
            raise InvalidParameter.for_parameter("on", owner, "at least one join key", on)
        for left, right in pairs:
            _check_name(left, owner, "on")
            _check_name(right, owner, "on")
        if how not in ("inner", "left"):
            raise InvalidParameter.for_parameter("how", owner, "'inner' or 'left'", how)
        chosen = None
        if columns is not None:
            if isinstance(columns, str) or not isinstance(columns, Sequence):
                raise InvalidParameter.for_parameter(
                    "columns", owner, "a list of column names", columns
                )
            chosen = tuple(_check_name(c, owner, "columns") for c in columns)
        cap = None
        if truncate is not None:
            cap = check.check_count(truncate, "truncate", owner)
            if cap > MAX_CONTRIBUTION_BOUND:
                raise InvalidParameter.for_parameter(
                    "truncate", owner, f"an integer in [1, {MAX_CONTRIBUTION_BOUND}]", truncate
                )
        step = Join(name, pairs, how, chosen, cap)
        return replace(self, joins=(*self.joins, step))

    # --------------------------------------------------------------- per person
    def per_person(
        self,
        aggregates: Mapping[str, str | tuple[str, str]] | None = None,
        /,
        *,
        by: str | Sequence[str] = (),
        **named: str | tuple[str, str],
    ) -> Query:
        """Replace the rows by one row per person (and per value of ``by``) that holds
        aggregates of that person's rows; later filters, derived columns, groups, bounds
        and aggregations read these rows.

        This is how a statistic *of persons* is asked: a histogram of the number of
        orders per customer (TPC-H Q13), the number of orders above 300 units (Q18),
        the mean of each person's largest purchase.

        Filters and derived columns added *before* this call apply to the rows the step
        reads (SQL's ``WHERE`` inside the subquery); those added after apply to the
        per-person rows (``HAVING``, and the outer ``WHERE``).

        Parameters
        ----------
        by:
            Columns grouped with the person (default: none, one row per person). Each
            must have a canonical form (numbers, decimals, strings, booleans, dates,
            timestamps); rows are grouped in that form (``dpkit.analytics._canonical``).
        aggregates, **named:
            ``{name: (kind, expression)}`` and/or ``name=(kind, expression)``, with
            ``kind`` one of ``"count"`` (non-NULL values of ``expression``), ``"sum"``,
            ``"mean"`` (exact: each value clamped to +-2^46 and rounded to a multiple
            of 2^-16, summed as integers; returned as DOUBLE), ``"min"``, ``"max"``; or
            ``name="count"`` for the person's number of rows. The expression is a
            public SQL expression over the rows, as in :meth:`with_column`. DOUBLE
            and text values of the unit, ``by``, ``min`` and ``max`` come in their
            canonical form (one zero, NaN as NULL; strings byte-wise).

        Privacy
        -------
        Each output row is a function of one person's rows (the privacy unit is one of
        the grouped columns), so adding or removing a person adds or removes that
        person's output rows only, never more of them than the person had rows: the
        step is stable for the Session's neighbour relation, and :meth:`bound` then
        bounds each person's contribution as usual. With ``by`` empty a person has
        exactly one row (``bound(max_rows=1)`` loses nothing). Details:
        ``dpkit.analytics._per_person``.
        """
        owner = "Query.per_person"
        if self.per_person_step is not None:
            raise InvalidParameter(f"{owner}: the query already has a per-person step.")
        later = [
            what
            for what, given in (
                ("group_by", self.group_columns),
                (
                    "bound",
                    self.max_groups is not None
                    or self.max_rows is not None
                    or self.max_total_rows is not None,
                ),
                ("an aggregation", self.aggregations),
            )
            if given
        ]
        if later:
            raise InvalidParameter(
                f"{owner}: call per_person before {later[0]} (they read the per-person rows)."
            )
        if isinstance(by, str):
            by = (by,)
        if not isinstance(by, Sequence):
            raise InvalidParameter.for_parameter("by", owner, "a column name or names", by)
        columns = tuple(_check_name(c, owner, "by") for c in by)
        if len({c.casefold() for c in columns}) != len(columns):
            raise InvalidParameter.for_parameter("by", owner, "distinct column names", by)
        if aggregates is not None and not isinstance(aggregates, Mapping):
            raise InvalidParameter.for_parameter(
                "aggregates", owner, "a mapping {name: (kind, expression)}", aggregates
            )
        given = [*(aggregates or {}).items(), *named.items()]
        if not given:
            raise InvalidParameter(
                f"{owner}: give at least one aggregate, e.g. orders=('count', 'order_id')."
            )
        steps: list[tuple[str, PersonAggregateKind, str | None]] = []
        for name, spec in given:
            _check_name(name, owner, "aggregate name")
            if spec == "count":
                steps.append((name, "count", None))
                continue
            if (
                not isinstance(spec, tuple)
                or len(spec) != 2
                or spec[0] not in PERSON_AGGREGATES
                or not isinstance(spec[1], str)
                or not spec[1].strip()
            ):
                raise InvalidParameter.for_parameter(
                    name,
                    owner,
                    f"'count' or a pair (kind, expression), kind one of {PERSON_AGGREGATES}",
                    spec,
                )
            kind = cast(PersonAggregateKind, spec[0])
            steps.append((name, kind, spec[1]))
        names = [c.casefold() for c in columns] + [n.casefold() for n, _, _ in steps]
        if len(set(names)) != len(names):
            raise InvalidParameter(
                f"{owner}: the names of by and the aggregates must differ: {names}."
            )
        step = PerPerson(columns, tuple(steps), self.filters, self.derived)
        return replace(self, filters=(), derived=(), per_person_step=step)

    # --------------------------------------------------------------- rows
    def filter(self, expression: str) -> Query:
        """Keep rows where the public SQL ``expression`` is true (e.g. ``"age >= 18"``).

        Only column references, literals, operators and scalar functions are allowed
        (checked with SQLGlot when compiled): no subqueries, tables or aggregates.
        """
        if not isinstance(expression, str) or not expression.strip():
            raise InvalidParameter.for_parameter(
                "expression", "Query.filter", "a non-empty SQL expression", expression
            )
        return replace(self, filters=(*self.filters, expression))

    def with_column(self, name: str, expression: str) -> Query:
        """Add a derived column ``name`` computed by a public SQL ``expression`` per row."""
        name = _check_name(name, "Query.with_column")
        if not isinstance(expression, str) or not expression.strip():
            raise InvalidParameter.for_parameter(
                "expression", "Query.with_column", "a non-empty SQL expression", expression
            )
        return replace(self, derived=(*self.derived, (name, expression)))

    # --------------------------------------------------------------- groups
    def group_by(
        self,
        *columns: str,
        keys: KeySet | TableKeys | Literal["private"],
        selection: KeySelection | None = None,
    ) -> Query:
        """Group by ``columns`` with public ``keys`` (a :class:`KeySet`) or ``"private"``.

        ``keys="private"`` selects keys from the data privately (noisy count of distinct
        persons per key, released only above a threshold; see :class:`KeySelection`).
        It needs a Session budget with a delta (:class:`~dpkit.ApproxDP`).
        """
        owner = "Query.group_by"
        if self.group_columns:
            raise InvalidParameter(f"{owner}: the query is already grouped.")
        if not columns:
            raise InvalidParameter(f"{owner}: give at least one column.")
        cols = tuple(_check_name(c, owner, "columns") for c in columns)
        if isinstance(keys, KeySet | TableKeys):
            if keys.columns != cols:
                raise InvalidParameter(
                    f"{owner}: the KeySet's columns {list(keys.columns)} must be the "
                    f"group-by columns {list(cols)}, in the same order."
                )
            if selection is not None:
                raise InvalidParameter(f"{owner}: selection applies to keys='private' only.")
            return replace(self, group_columns=cols, keys=keys)
        if keys == "private":
            return replace(self, group_columns=cols, selection=selection or KeySelection())
        raise InvalidParameter.for_parameter(
            "keys", owner, "a KeySet, KeySet.from_table(...) or 'private'", keys
        )

    def group_by_bins(self, column: str, edges: Sequence[float]) -> Query:
        """Histogram: group by the bin of numeric ``column`` between public ``edges``.

        Bin ``i`` is ``[edges[i], edges[i+1])``; values below the first edge go to the
        first bin and values at or above the last edge (and +-inf) to the last. NULL and
        NaN values are dropped. The key column is named ``<column>_bin`` (bin index).
        """
        owner = "Query.group_by_bins"
        column = _check_name(column, owner, "column")
        try:
            cuts = tuple(check.check_finite_float(e, "edges", owner) for e in edges)
        except TypeError:
            raise InvalidParameter.for_parameter("edges", owner, "a sequence", edges) from None
        if len(cuts) < 2 or any(b <= a for a, b in itertools.pairwise(cuts)):
            raise InvalidParameter.for_parameter(
                "edges", owner, "at least two strictly increasing finite floats", edges
            )
        name = f"{column}_bin"
        keys = KeySet.from_values(**{name: range(len(cuts) - 1)})
        grouped = self.group_by(name, keys=keys)
        return replace(grouped, bins=(*self.bins, (name, column, cuts)))

    def bound(
        self,
        *,
        max_groups: int | None = None,
        max_rows: int | None = None,
        max_total_rows: int | None = None,
    ) -> Query:
        """Contribution bounds per privacy unit: groups per person, rows per person per
        group, and rows per person in all.

        Enforced inside the engine by rules that depend only on that person's rows
        (keyed-hash ranking with a fresh secret salt per query). Required when the
        Session has a privacy unit.

        Parameters
        ----------
        max_groups:
            Groups one person contributes to at most (those of smallest keyed hash).
        max_rows:
            Rows one person contributes to one group at most: a person with more rows
            in a group contributes the average of them, ``max_rows`` times. Defaults to
            ``max_total_rows`` when only that is given.
        max_total_rows:
            Rows one person contributes over all groups at most: a person with more
            (after ``max_rows`` and ``max_groups``) has every kept group scaled by the
            same factor ``max_total_rows / (their rows)``, so their share across groups
            is kept. The sensitivity of counts and sums over all groups is then
            ``max_total_rows`` rows' worth rather than ``max_groups * max_rows``: use
            it when a person's rows spread over groups unevenly (PipelineDP's
            ``max_contributions``, Tumult's ``MaxRowsPerID``, GoogleSQL's
            ``max_rows_contributed``). Counts, sums, means and variances only:
            quantiles, ``min``/``max`` and distinct counts of a column keep per-group
            bounds, and a query with one of them is refused (before anything is spent)
            when the total binds: several groups per person and ``max_total_rows <
            max_groups * max_rows``.
        """
        owner = "Query.bound"
        groups = None if max_groups is None else check.check_count(max_groups, "max_groups", owner)
        rows = None if max_rows is None else check.check_count(max_rows, "max_rows", owner)
        total = (
            None
            if max_total_rows is None
            else check.check_count(max_total_rows, "max_total_rows", owner)
        )
        # The engine's integer arithmetic is sized from these public bounds (a pair's
        # scaled sum stays below 2^61 * 2^31 in HUGEINT; dpkit.analytics.engines).
        for name, value in (("max_groups", groups), ("max_rows", rows), ("max_total_rows", total)):
            if value is not None and value > MAX_CONTRIBUTION_BOUND:
                raise InvalidParameter.for_parameter(
                    name, owner, f"an integer in [1, {MAX_CONTRIBUTION_BOUND}]", value
                )
        return replace(
            self,
            max_groups=groups if groups is not None else self.max_groups,
            max_rows=rows if rows is not None else self.max_rows,
            max_total_rows=total if total is not None else self.max_total_rows,
        )

    # --------------------------------------------------------------- aggregations
    def _add(self, aggregation: Aggregation) -> Query:
        if any(a.name == aggregation.name for a in self.aggregations):
            raise InvalidParameter(
                f"Query: an aggregation named {aggregation.name!r} already exists; pass name=."
            )
        return replace(self, aggregations=(*self.aggregations, aggregation))

    def count(self, *, name: str = "count", weight: float = 1.0) -> Query:
        """Number of rows (after filters and contribution bounding)."""
        owner = "Query.count"
        w = check.check_positive(weight, "weight", owner)
        return self._add(Aggregation("count", _check_name(name, owner), weight=w))

    def count_distinct(
        self, column: str | None = None, *, name: str | None = None, weight: float = 1.0
    ) -> Query:
        """Number of distinct persons (``column=None``), or of distinct values of ``column``.

        With a privacy unit, each person keeps at most ``max_rows`` of its distinct
        values in each of its kept groups (those of smallest keyed hash, a rule on the
        person's own rows), so one person moves a group's count by at most
        ``max_rows``; with one row per person, by at most 1.
        """
        owner = "Query.count_distinct"
        col = None if column is None else _check_name(column, owner, "column")
        label = name or ("count_distinct" if col is None else f"count_distinct_{col}")
        w = check.check_positive(weight, "weight", owner)
        return self._add(Aggregation("count_distinct", _check_name(label, owner), col, weight=w))

    def _bounded(
        self,
        kind: AggregationKind,
        column: str,
        bounds: object,
        name: str | None,
        weight: float,
        search_range: object = None,
        bounds_levels: object = DEFAULT_BOUNDS_LEVELS,
        bounds_share: object = DEFAULT_BOUNDS_SHARE,
    ) -> Query:
        owner = f"Query.{kind}"
        col = _check_name(column, owner, "column")
        label = _check_name(name or f"{kind}_{col}", owner)
        w = check.check_positive(weight, "weight", owner)
        if isinstance(bounds, str) and bounds == "private":
            private = _check_private(search_range, bounds_levels, bounds_share, owner)
            return self._add(Aggregation(kind, label, col, None, w, private=private))
        if search_range is not None:
            raise InvalidParameter(
                f"{owner}: search_range= applies to bounds='private' only; got bounds={bounds!r}."
            )
        return self._add(Aggregation(kind, label, col, _check_bounds(bounds, owner), w))

    def sum(
        self,
        column: str,
        *,
        bounds: tuple[float, float] | Literal["private"],
        search_range: tuple[float, float] | None = None,
        bounds_levels: tuple[float, float] = DEFAULT_BOUNDS_LEVELS,
        bounds_share: float = DEFAULT_BOUNDS_SHARE,
        name: str | None = None,
        weight: float = 1.0,
    ) -> Query:
        """Sum of ``column`` with each value clamped to ``bounds`` (public).

        ``bounds="private"`` finds the clamping bounds privately inside the same
        ``evaluate``: the quantiles of the column at ``bounds_levels`` (default the
        1st and 99th percentiles), released with the fraction ``bounds_share``
        (default 0.2) of this aggregation's budget on a grid of 10001 points over the
        public ``search_range=(low, high)`` (required then), become the bounds. The
        released bounds are the result's ``<name>_clamp_low``/``_clamp_high``
        columns. See docs/analytics.md.
        """
        return self._bounded(
            "sum", column, bounds, name, weight, search_range, bounds_levels, bounds_share
        )

    def mean(
        self,
        column: str,
        *,
        bounds: tuple[float, float] | Literal["private"],
        search_range: tuple[float, float] | None = None,
        bounds_levels: tuple[float, float] = DEFAULT_BOUNDS_LEVELS,
        bounds_share: float = DEFAULT_BOUNDS_SHARE,
        name: str | None = None,
        weight: float = 1.0,
    ) -> Query:
        """Mean of ``column`` clamped to ``bounds``: a noisy centred sum over a noisy count.

        ``bounds="private"`` finds the clamping bounds privately inside the same
        ``evaluate``: the quantiles of the column at ``bounds_levels`` (default the
        1st and 99th percentiles), released with the fraction ``bounds_share``
        (default 0.2) of this aggregation's budget on a grid of 10001 points over the
        public ``search_range=(low, high)`` (required then), become the bounds. The
        released bounds are the result's ``<name>_clamp_low``/``_clamp_high``
        columns. See docs/analytics.md.
        """
        return self._bounded(
            "mean", column, bounds, name, weight, search_range, bounds_levels, bounds_share
        )

    def variance(
        self,
        column: str,
        *,
        bounds: tuple[float, float] | Literal["private"],
        search_range: tuple[float, float] | None = None,
        bounds_levels: tuple[float, float] = DEFAULT_BOUNDS_LEVELS,
        bounds_share: float = DEFAULT_BOUNDS_SHARE,
        name: str | None = None,
        weight: float = 1.0,
    ) -> Query:
        """Variance of ``column`` clamped to ``bounds`` from noisy count, sum, sum of squares.

        ``bounds="private"`` finds the clamping bounds privately inside the same
        ``evaluate``: the quantiles of the column at ``bounds_levels`` (default the
        1st and 99th percentiles), released with the fraction ``bounds_share``
        (default 0.2) of this aggregation's budget on a grid of 10001 points over the
        public ``search_range=(low, high)`` (required then), become the bounds. The
        released bounds are the result's ``<name>_clamp_low``/``_clamp_high``
        columns. See docs/analytics.md.
        """
        return self._bounded(
            "variance", column, bounds, name, weight, search_range, bounds_levels, bounds_share
        )

    # --------------------------------------------------------------- order statistics
    def _order(
        self,
        kind: AggregationKind,
        column: str,
        bounds: object,
        qs: tuple[float, ...],
        grid_size: int | None,
        name: str | None,
        weight: float,
    ) -> Query:
        owner = f"Query.{kind}"
        col = _check_name(column, owner, "column")
        label = _check_name(name or f"{kind}_{col}", owner)
        w = check.check_positive(weight, "weight", owner)
        size = None if grid_size is None else check.check_count(grid_size, "grid_size", owner)
        if size is not None and not 2 <= size <= 1 << 22:
            raise InvalidParameter.for_parameter(
                "grid_size", owner, "an int in [2, 4194304]", grid_size
            )
        agg = Aggregation(kind, label, col, _check_bounds(bounds, owner), w, qs, size)
        return self._add(agg)

    def quantile(
        self,
        column: str,
        qs: float | Sequence[float],
        *,
        bounds: tuple[float, float],
        grid_size: int | None = None,
        name: str | None = None,
        weight: float = 1.0,
    ) -> Query:
        """Quantile(s) of ``column`` at levels ``qs`` in [0, 1], values clamped to ``bounds``.

        Inverse sensitivity mechanism on a linear grid of ``grid_size`` points over
        ``bounds`` (default 1001); with a privacy unit each person contributes at most
        ``max_rows`` of their rows per group. The result column is ``name`` for one level,
        ``name_<q>`` (e.g. ``quantile_x_0.25``) for several; its accuracy is a rank bound
        (see the release), so the ``_se``/``_low``/``_high`` columns are NaN and the
        rank radius is the integer column ``name_rank_radius`` (``name_<q>_rank_radius``).
        """
        owner = "Query.quantile"
        levels = (qs,) if isinstance(qs, int | float) else tuple(qs)
        if not levels:
            raise InvalidParameter.for_parameter("qs", owner, "at least one level", qs)
        checked = tuple(check.check_probability(q, "qs", owner) for q in levels)
        return self._order("quantile", column, bounds, checked, grid_size, name, weight)

    def median(
        self,
        column: str,
        *,
        bounds: tuple[float, float],
        grid_size: int | None = None,
        name: str | None = None,
        weight: float = 1.0,
    ) -> Query:
        """Median of ``column``: :meth:`quantile` at 0.5."""
        label = name or f"median_{_check_name(column, 'Query.median', 'column')}"
        return self.quantile(
            column, 0.5, bounds=bounds, grid_size=grid_size, name=label, weight=weight
        )

    def max(
        self,
        column: str,
        *,
        bounds: tuple[float, float],
        grid_size: int | None = None,
        name: str | None = None,
        weight: float = 1.0,
    ) -> Query:
        """Maximum of ``column`` clamped to ``bounds``, an under-estimate (shifted inverse).

        Each person contributes their own maximum per group (any number of rows); the
        accuracy is a down-sensitivity bound (see the release), so ``_se``/``_low``/
        ``_high`` are NaN and its number of removals is the integer column
        ``name_removals``. Grid: ``grid_size`` points over ``bounds`` (default 1025).
        """
        return self._order("max", column, bounds, (), grid_size, name, weight)

    def min(
        self,
        column: str,
        *,
        bounds: tuple[float, float],
        grid_size: int | None = None,
        name: str | None = None,
        weight: float = 1.0,
    ) -> Query:
        """Minimum of ``column`` clamped to ``bounds``, an over-estimate (as :meth:`max`)."""
        return self._order("min", column, bounds, (), grid_size, name, weight)
