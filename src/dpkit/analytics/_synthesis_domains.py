"""Domains found privately for ``Session.synthesize``, inside the run's one charge.

A column with no public domain is given one by the Session's own queries, run on a
*reserve*: a sub-scope of the ledger whose budget is the whole run's, charged to the
Session once when it is opened (``Ledger.open_partition`` with one part and no split --
the interactive-mechanism argument of ``Session.partition``, with one part). Inside it:

* a text (or other categorical) column: private key selection, the query
  ``group_by(column, keys="private").count()`` -- noisy counts of distinct persons per
  value, released when above the threshold that makes the selection
  ``delta``-approximately zCDP (:func:`dpkit.analytics._accounting.selection_threshold`);
  it needs an ApproxDP Session's key-selection delta;
* a numeric column: the range of ``dpkit describe`` -- noisy counts of persons in
  public power-of-two bins, the occupied span is the range
  (:func:`dpkit.analytics._describe_scales.occupied_bins`) -- and then, by default
  (:class:`dpkit.synth.PrivateBins`), the bins' edges: private quantiles of the column
  over that range, the Session's ``Query.quantile`` (inverse sensitivity, the query
  ``dpkit describe`` releases its percentiles with), at levels ``1/B .. (B-1)/B``, and
  the outer edges at ``1/(2B)`` and ``1 - 1/(2B)`` (:func:`outer_edges`).
  The column's share is split :data:`RANGE_PART` to the range, the rest to the
  quantiles; equal-width bins (``PrivateBins(edges="equal")``) spend it all on the
  range. Bins are cut at the released quantiles by :func:`quantile_cuts`, a function
  of the released values and public parameters only (post-processing). When the found
  range holds at most ``B`` integers (an integer column), every integer gets a bin
  and the quantiles are not run: their share is left to the measurements.

What they release are the domains; MST or AIM then measure on the rest of the reserve
(adaptive composition: what each step costs is fixed before it runs, from public
parameters and earlier releases, and the steps add up to at most the reserve).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.analytics._canonical import MICROS_RANGE, from_engine, key_category
from dpkit.analytics._describe_scales import (
    RANGE_FALLBACK_WINDOWS,
    RANGE_WINDOWS,
    _magnitude_edges,
    _occupied,
    _range_z,
    _Scale,
    integer_bins,
)
from dpkit.analytics.engines import quote
from dpkit.analytics.query import KeySelection, Query
from dpkit.errors import InvalidParameter
from dpkit.synth._columns import code_of
from dpkit.synth._specs import Bins, Categories, Cuts, PrivateBins

# A dpkit.analytics.session.Session; not imported, as session.py imports this module.
Session = Any

__all__ = [
    "DISCOVERY_SHARE",
    "RANGE_PART",
    "discover",
    "discovery_queries",
    "outer_edges",
    "private_binning",
    "quantile_cuts",
]

#: The most categories kept of a column found privately (largest noisy counts first).
MAX_DISCOVERED = 1_000
#: Share of the run's budget spent on each column found privately, and at most in all.
DISCOVERY_SHARE = Fraction(1, 20)
DISCOVERY_MAX = Fraction(3, 10)
_NUMERIC = ("integer", "double", "decimal")
#: Timestamps (without and with time zone), binned on their seconds since 1970.
_TIMES = ("timestamp", "timestamptz")
#: Columns given bins (a range, then cut): numbers, dates as whole days since
#: 1970-01-01 (their canonical number line, dpkit.analytics._canonical) and timestamps
#: as seconds since 1970 (``epoch``, read as ``dpkit describe`` reads them).
_BINNED = (*_NUMERIC, "date", *_TIMES)
#: Days since 1970-01-01 that Python's ``datetime.date`` can hold (years 1 to 9999):
#: a date range found privately is clamped into them (post-processing).
_DAY_RANGE = (-719_162.0, 2_932_896.0)
#: Seconds since 1970 that Python's ``datetime.datetime`` can hold (the same years).
_SECOND_RANGE = (MICROS_RANGE[0] / 1e6, MICROS_RANGE[1] / 1e6)
#: Seconds in a day: a timestamp's public year edges are its date edges times this.
_DAY_SECONDS = 86_400.0
#: Found ranges of integer-like columns are clamped into +-LIMIT (the codings' rule).
LIMIT = float(2**53)
#: Of a numeric column's share, the part that finds its range when its bins are cut at
#: private quantiles; the rest releases the quantiles (``dpkit describe`` splits its
#: range and order statistics about so: 0.15 to 0.5).
RANGE_PART = Fraction(1, 4)
#: Quantile grid of an integer column: one point per integer of the found range, up to
#: this many points (then evenly spaced); other columns get describe's decimal grid.
INTEGER_GRID = 2**16 + 1
#: Weight of the two outer quantiles (levels ``1/(2B)`` and ``1 - 1/(2B)``, the bins'
#: outer edges) against the inner quantiles' 1 in a column's quantile query. Chosen
#: among 1/16, 1/4 and 1 on Adult, seeds 0-2, then checked on seeds 3-5
#: (benchmarks/results/synth.md): 3-way error -4% to -7% at eps 3, level at 0.3 and 1.
EDGE_WEIGHT = 0.25


def discovery_share(columns: int) -> Fraction:
    """The share of the run's budget that goes to finding ``columns`` domains."""
    return min(DISCOVERY_SHARE * columns, DISCOVERY_MAX) if columns else Fraction(0)


def _year_edges(scale: float) -> tuple[float, ...]:
    """January 1st of each year 1900-2100 (the span ``dpkit describe`` assumes for
    dates) in days since 1970-01-01 times ``scale``, and beyond it the integer
    magnitude edges: public."""
    epoch = dt.date(1970, 1, 1)
    years = [(dt.date(y, 1, 1) - epoch).days * scale for y in range(1900, 2101)]
    outside = _magnitude_edges(True)
    return (
        *(e for e in outside if e < years[0]),
        *years,
        *(e for e in outside if e > years[-1]),
    )


@functools.cache
def _date_edges() -> tuple[float, ...]:
    """Public bin edges of a date's days (:func:`_year_edges`). A power-of-two ladder
    alone puts 1990-2059 in one bin (days 2^14 to 2^15), so a year of data got a
    70-year range, which the quantiles' exponential mechanism cannot narrow at a small
    budget (most of the grid then has the same utility)."""
    return _year_edges(1.0)


@functools.cache
def _time_edges() -> tuple[float, ...]:
    """Public bin edges of a timestamp's seconds since 1970 (:func:`_year_edges`)."""
    return _year_edges(_DAY_SECONDS)


def _bin_edges(category: str) -> list[float]:
    """The range query's public bin edges for a column of ``category``."""
    if category == "date":
        return list(_date_edges())
    if category in _TIMES:
        return list(_time_edges())
    return _magnitude_edges(category == "integer")


def days_column(name: str, schema: Mapping[str, str], suffix: str = "days") -> str:
    """A derived column's name for ``name``'s days since 1970-01-01 (or its seconds,
    ``suffix="seconds"``), not a column of ``schema`` (public: the schema's names only)."""
    out = f"{name}_{suffix}"
    taken = {c.casefold() for c in schema}
    while out.casefold() in taken:
        out += "_"
    return out


def _query(
    name: str,
    category: str,
    unit: str | None,
    max_rows: int,
    delta: float | None,
    schema: Mapping[str, str],
) -> Query:
    if category == "date":
        # A date's range and quantiles are found on its days since 1970-01-01, an
        # integer column derived in the allowlisted grammar (the same days the coding
        # compares: the canonical DATE number line).
        days = days_column(name, schema)
        query = Query().with_column(days, f"date_diff('day', DATE '1970-01-01', {quote(name)})")
        query = query.group_by_bins(days, _bin_edges("date"))
        query = query.count_distinct() if unit is not None else query.count()
    elif category in _TIMES:
        # A timestamp's on its seconds since 1970 (a DOUBLE, with the fraction: DuckDB's
        # epoch, which the Spark engine computes alike), in public year bins.
        seconds = days_column(name, schema, "seconds")
        query = Query().with_column(seconds, f"epoch({quote(name)})")
        query = query.group_by_bins(seconds, _bin_edges(category))
        query = query.count_distinct() if unit is not None else query.count()
    elif category in _NUMERIC:
        query = Query().group_by_bins(name, _magnitude_edges(category == "integer"))
        query = query.count_distinct() if unit is not None else query.count()
    else:
        selection = KeySelection(delta=delta)
        query = Query().group_by(name, keys="private", selection=selection).count()
    if unit is not None:
        query = query.bound(max_groups=max_rows, max_rows=1)
    return query


def categorical_names(schema: dict[str, str], names: Sequence[str]) -> list[str]:
    """The columns among ``names`` whose domain key selection finds."""
    return [n for n in names if key_category(schema[n]) not in (*_BINNED, None)]


def discovery_queries(
    schema: dict[str, str],
    names: Sequence[str],
    unit: str | None,
    max_rows: int,
    owner: str,
    delta: float | None = None,
) -> dict[str, Query]:
    """The query finding each column's domain (refused here if a type has no way);
    each key selection may cost ``delta`` (fixed here, so the plan is the run)."""
    out = {}
    for name in names:
        category = key_category(schema[name])
        if category is None:
            raise InvalidParameter(
                f"{owner}: column {name!r} ({schema[name]}) has no domain that can be "
                "found privately; leave it out with columns=[...]."
            )
        out[name] = _query(name, category, unit, max_rows, delta, schema)
    return out


def _range(result: Any, name: str, category: str, pure: bool) -> Bins | None:
    """The range of a numeric column (or of a date's days: ``category`` "date", ``name``
    the days column; of a timestamp's seconds likewise) from its range query's release,
    or None when nothing stands out."""
    whole = category in ("integer", "date")
    edges = _bin_edges(category)
    column = f"{name}_bin"
    counts = np.asarray(result.columns["count" if "count" in result.columns else "count_distinct"])
    label = "count" if "count" in result.columns else "count_distinct"
    se = np.asarray(result.columns[f"{label}_se"], dtype=np.float64)
    order = np.argsort(np.asarray(result.columns[column]), kind="stable")
    counts, se = counts[order].astype(np.float64), se[order]
    passes = [list(range(len(counts)))]
    if category in ("double", "decimal"):
        passes.append(integer_bins(edges))
    z = _range_z(pure)
    occupied = _occupied(counts, se, z, passes, RANGE_WINDOWS) or _occupied(
        counts, se, z, passes, RANGE_FALLBACK_WINDOWS
    )
    if not occupied:
        return None
    low, high = edges[occupied[0]], edges[occupied[-1] + 1]
    if category in _TIMES:
        # Within Python's years 1 to 9999 (post-processing, as a date's days are).
        low, high = (min(max(v, _SECOND_RANGE[0]), _SECOND_RANGE[1]) for v in (low, high))
        if not low < high:
            low, high = (high - 1.0, high) if high > _SECOND_RANGE[0] else (low, low + 1.0)
    elif category in ("integer", "decimal", "date"):
        # Integer edges: the occupied bins hold the integers low .. high - 1. Bounds
        # of integer-like columns must lie within +-2^53 (dpkit.synth._columns), and a
        # date's within the years 1 to 9999: the found range is clamped there
        # (post-processing; values beyond are clamped into the end bins like any value
        # outside the bounds).
        high = high - 1.0 if whole else high
        lowest, highest = _DAY_RANGE if category == "date" else (-LIMIT, LIMIT)
        low, high = (min(max(v, lowest), highest) for v in (low, high))
        if not low < high:
            low, high = (high - 1.0, high) if high > lowest else (low, low + 1.0)
    return Bins(low, high)


def private_binning(
    schema: Mapping[str, str], names: Sequence[str], domains: Mapping[str, object] | None
) -> dict[str, PrivateBins]:
    """How each numeric column among ``names`` (domains found privately) is binned:
    its :class:`PrivateBins`, or the default ``PrivateBins()`` for ``"private"`` or
    no domain (public parameters only)."""
    out = {}
    for name in names:
        if key_category(schema[name]) in _BINNED:
            spec = (domains or {}).get(name)
            out[name] = spec if isinstance(spec, PrivateBins) else PrivateBins()
    return out


def range_budget(spec: PrivateBins | None, share: Fraction) -> Fraction:
    """The part of a numeric column's ``share`` its range query gets (the rest goes to
    its quantiles, or is left to the measurements when they are not run)."""
    return share * RANGE_PART if spec is not None and spec.edges == "quantile" else share


def quantile_cuts(
    values: Sequence[float], low: float, high: float, step: float, *, integer: bool
) -> tuple[float, ...]:
    """Inner bin edges from released quantiles (post-processing: a function of the
    released ``values`` and the released or public ``low``, ``high``, ``step`` only).

    ``step`` is the quantile grid's spacing: a released value ``v`` is a grid point,
    standing for the values that snap to it, ``[v - step/2, v + step/2)``. Each
    distinct value cuts at the start of that cell; a value released for two or more
    levels (a point mass: the zeros of a mostly-zero column) also cuts at its end, so it
    gets a bin of its own. Integer columns cut at whole numbers (``ceil``, so with an
    integer grid, step 1, a point mass ``v`` gets the bin ``{v}``); their bins hold
    ``e_i .. e_{i+1} - 1`` and ``high`` is inclusive, so cuts lie in ``(low, high]``;
    other columns' in ``(low, high)``. Values are clipped to ``[low, high]`` and
    non-finite ones ignored first; the cuts are sorted and deduplicated, so they
    increase strictly whatever the values (e.g. not in level order).
    """
    finite = [min(max(float(v), low), high) for v in values if math.isfinite(float(v))]
    repeats = Counter(finite)
    half = step / 2.0
    cuts: set[float] = set()
    for value, times in repeats.items():
        ends = (value - half, value + half) if times > 1 else (value - half,)
        for end in ends:
            cuts.add(float(math.ceil(end)) if integer else end)
    if integer:
        return tuple(sorted(c for c in cuts if low < c <= high))
    return tuple(sorted(c for c in cuts if low < c < high))


def outer_edges(
    smallest: float, largest: float, low: float, high: float, integer: bool
) -> tuple[float, float]:
    """The bins' outer edges from two released outer quantiles within the found range
    ``[low, high]`` (post-processing): the range narrowed to them (whole numbers for an
    integer column), or kept when they are not finite or leave no interval."""
    if not (math.isfinite(smallest) and math.isfinite(largest)):
        return low, high
    if integer:
        smallest, largest = float(math.floor(smallest)), float(math.ceil(largest))
    new_low, new_high = max(low, smallest), min(high, largest)
    return (new_low, new_high) if new_low < new_high else (low, high)


def _quantile_query(
    base: Query, name: str, bounds: tuple[float, float], bins: int, grid: int
) -> Query:
    """The quantiles at ``1/bins .. (bins-1)/bins`` over ``bounds``, on ``base``'s table
    (joins and derived columns: a date's days) and, with a privacy unit, each person's
    at most ``max_rows`` rows (the range query's ``max_groups``), as every measurement
    of the run."""
    levels = tuple(j / bins for j in range(1, bins))
    query = dataclasses.replace(Query(), table=base.table, joins=base.joins, derived=base.derived)
    query = query.quantile(name, levels, bounds=bounds, grid_size=grid, name="q")
    # The outer edges: the found range is a power-of-two span (hours worked 0-99 found
    # as [0, 127]), and the end bins would stretch to it, drawing synthetic values
    # where the data has none. Quantiles at half a bin's mass from each end close them
    # (the rows beyond, 1/(2 bins) at each end, are clamped into the end bins). A
    # private min and max instead (shifted inverse sensitivity, light weight) cut off
    # long tails at small budgets: 3-way error 0.292 -> 0.386 at eps 0.3 on Adult.
    ends = (0.5 / bins, 1 - 0.5 / bins)
    query = query.quantile(
        name, ends, bounds=bounds, grid_size=grid, name="ends", weight=EDGE_WEIGHT
    )
    if base.max_groups is not None:
        query = query.bound(max_groups=1, max_rows=base.max_groups)
    return query


def _grid(low: float, high: float, integer: bool, type_name: str) -> tuple[int, float]:
    """The quantile grid over the found range (points, spacing): public given it."""
    if integer:
        points = int(min(high - low + 1, INTEGER_GRID))
    else:
        points = _Scale.of(type_name, (0.0, 0.0)).grid_size(low, high)
    return points, (high - low) / (points - 1)


def _dated(domain: Any, category: str) -> Any:
    """A date column's Bins or Cuts found on its days, with dates for the bounds and
    edges (as a public date domain is given; post-processing); a timestamp's found on
    its seconds, with datetimes (to the microsecond); others unchanged."""
    if category not in ("date", *_TIMES):
        return domain

    def day(value: float) -> Any:
        if category in _TIMES:
            micros = min(max(round(value * 1e6), MICROS_RANGE[0]), MICROS_RANGE[1])
            return from_engine(micros, category)
        return from_engine(int(value), "date")

    if isinstance(domain, Cuts):
        return Cuts(
            day(domain.low), day(domain.high), tuple(day(c) for c in domain.cuts), domain.nulls
        )
    return Bins(day(domain.low), day(domain.high), domain.bins, domain.nulls)


def _shown(bins: Bins, category: str) -> str:
    """``[low, high]`` of a range found privately, as dates for a date column (and
    datetimes for a timestamp)."""
    if category in ("date", *_TIMES):
        found = _dated(bins, category)
        return f"[{found.low}, {found.high}]"
    return f"[{bins.low:g}, {bins.high:g}]"


def _quantile_bins(
    session: Session,
    query: Query,
    name: str,
    type_name: str,
    found: Bins,
    spec: PrivateBins,
    share: Fraction,
) -> tuple[object, str]:
    """Bins of a numeric column over its found range, per ``spec`` (and a note)."""
    low, high = float(found.low), float(found.high)
    integer = key_category(type_name) in ("integer", "date")
    category = key_category(type_name) or ""
    where = f"{name}: range {_shown(Bins(low, high), category)} found privately"
    if spec.edges == "equal" or spec.bins == 1:
        return Bins(low, high, spec.bins, spec.nulls), f"{where}; {spec.bins} equal-width bins."
    if integer and high - low + 1 <= spec.bins:
        # Few integers: one bin each, no quantiles needed (their share is left over).
        return Bins(low, high, spec.bins, spec.nulls), f"{where}; one bin per integer."
    points, step = _grid(low, high, integer, type_name)
    # A date's quantiles are of its days, a timestamp's of its seconds (the range
    # query's derived column).
    column = query.derived[0][0] if category in ("date", *_TIMES) else name
    try:
        quantiles = _quantile_query(query, column, (low, high), spec.bins, points)
        result = session.evaluate(quantiles, budget=share)
    except InvalidParameter:
        # Refused before it spent anything (its noise cannot run at this budget, a
        # public fact given the released range): equal-width bins instead.
        return Bins(low, high, spec.bins, spec.nulls), f"{where}; {spec.bins} equal-width bins."
    values = [float(result.columns[f"q_{j / spec.bins:g}"][0]) for j in range(1, spec.bins)]
    if spec.bins == 2:
        values = [float(result.columns["q"][0])]
    first, last = (
        float(result.columns[f"ends_{level:g}"][0])
        for level in (0.5 / spec.bins, 1 - 0.5 / spec.bins)
    )
    low, high = outer_edges(first, last, low, high, integer)
    where = f"{name}: range {_shown(Bins(low, high), category)} found privately"
    cuts = quantile_cuts(values, low, high, step, integer=integer)
    if not cuts:
        return Bins(low, high, 1, spec.nulls), f"{where}; one bin (quantiles at its ends)."
    found_cuts = Cuts(low, high, cuts, spec.nulls)
    try:
        # quantile_cuts' edges always pass the coding's checks (tested); should one
        # not, equal-width bins are a post-processing fallback, not a failure.
        code_of(name, type_name, _dated(found_cuts, key_category(type_name) or ""), "synthesize")
    except InvalidParameter:
        return Bins(low, high, spec.bins, spec.nulls), f"{where}; {spec.bins} equal-width bins."
    return found_cuts, f"{where}; {len(cuts) + 1} bins cut at private quantiles."


def discover(
    session: Session,
    queries: dict[str, Query],
    schema: dict[str, str],
    share: Fraction,
    binning: Mapping[str, PrivateBins] | None = None,
) -> tuple[dict[str, object], list[str]]:
    """Run the queries on ``session`` (the reserve), each column with ``share`` of its
    budget (a numeric column's split by :func:`range_budget`); the domains they release
    and a note per column."""
    found: dict[str, object] = {}
    notes = []
    binning = binning or {}
    for name, query in queries.items():
        category = key_category(schema[name]) or ""
        spec = binning.get(name)
        part = range_budget(spec, share) if category in _BINNED else share
        result = session.evaluate(query, budget=part)
        if category in _BINNED:
            # A date's range is of its days column, a timestamp's of its seconds (the
            # query's derived column).
            column = query.derived[0][0] if category in ("date", *_TIMES) else name
            bins = _range(result, column, category, pure=False)
            if bins is None:
                # Nothing above the noise: one bin holding every value (all come back as
                # one synthetic value; post-processing of a release).
                nulls = spec.nulls if spec is not None else True
                found[name] = _dated(Bins(0.0, 1.0, 1, nulls), category)
                notes.append(f"{name}: no range found privately (too few rows); one bin.")
            elif spec is None:
                found[name] = _dated(bins, category)
                notes.append(f"{name}: range {_shown(bins, category)} found privately.")
            else:
                domain, note = _quantile_bins(
                    session, query, name, schema[name], bins, spec, share - part
                )
                found[name] = _dated(domain, category)
                notes.append(note)
            continue
        values = list(result.columns[name])
        counts = np.asarray(result.columns["count"], dtype=np.float64)
        order = np.argsort(-counts, kind="stable")[:MAX_DISCOVERED]
        kept = [values[i] for i in order]
        notes.append(f"{name}: {len(kept)} categories found by private key selection.")
        found[name] = Categories(kept) if kept else Categories([_placeholder(category)])
    return found, notes


def placeholder_domain(type_name: str) -> object:
    """A public domain of the shape the run will find for a column of ``type_name``
    (bins for numbers, dates and timestamps; one category otherwise), so that the
    statement reading the rows can be bound before anything is charged: its columns,
    joins and casts are those of the found domain's statement (public: the type)."""
    category = key_category(type_name) or ""
    if category in _NUMERIC:
        return Bins(0, 1)
    if category == "date":
        return Bins(dt.date(1970, 1, 1), dt.date(1970, 1, 2))
    if category in _TIMES:
        zone = dt.UTC if category == "timestamptz" else None
        return Bins(dt.datetime(1970, 1, 1, tzinfo=zone), dt.datetime(1970, 1, 2, tzinfo=zone))
    return Categories([_placeholder(category)])


def _placeholder(category: str) -> Any:
    """A value standing for 'no category was selected' (every row gets the NULL code)."""
    return {"integer": 0, "double": 0.0, "decimal": 0, "boolean": False}.get(category, "")
