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
  (:func:`dpkit.analytics._describe_scales.occupied_bins`).

What they release are the domains; MST or AIM then measure on the rest of the reserve.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.analytics._canonical import key_category
from dpkit.analytics._describe_scales import (
    RANGE_FALLBACK_WINDOWS,
    RANGE_WINDOWS,
    _magnitude_edges,
    _occupied,
    _range_z,
    integer_bins,
)
from dpkit.analytics.query import KeySelection, Query
from dpkit.errors import InvalidParameter
from dpkit.synth._columns import Bins, Categories

# A dpkit.analytics.session.Session; not imported, as session.py imports this module.
Session = Any

__all__ = ["DISCOVERY_SHARE", "discover", "discovery_queries"]

#: The most categories kept of a column found privately (largest noisy counts first).
MAX_DISCOVERED = 1_000
#: Share of the run's budget spent on each column found privately, and at most in all.
DISCOVERY_SHARE = Fraction(1, 20)
DISCOVERY_MAX = Fraction(3, 10)
_NUMERIC = ("integer", "double", "decimal")
#: Found ranges of integer-like columns are clamped into +-LIMIT (the codings' rule).
LIMIT = float(2**53)


def discovery_share(columns: int) -> Fraction:
    """The share of the run's budget that goes to finding ``columns`` domains."""
    return min(DISCOVERY_SHARE * columns, DISCOVERY_MAX) if columns else Fraction(0)


def _query(name: str, category: str, unit: str | None, max_rows: int, delta: float | None) -> Query:
    if category in _NUMERIC:
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
    return [n for n in names if key_category(schema[n]) not in (*_NUMERIC, None)]


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
        if category is None or category in ("date", "timestamp", "timestamptz"):
            raise InvalidParameter(
                f"{owner}: column {name!r} ({schema[name]}) needs public bounds, e.g. "
                f"domains={{{name!r}: (date(2020, 1, 1), date(2025, 1, 1))}}; its domain "
                "cannot be found privately."
            )
        out[name] = _query(name, category, unit, max_rows, delta)
    return out


def _range(result: Any, name: str, category: str, pure: bool) -> Bins | None:
    edges = _magnitude_edges(category == "integer")
    column = f"{name}_bin"
    counts = np.asarray(result.columns["count" if "count" in result.columns else "count_distinct"])
    label = "count" if "count" in result.columns else "count_distinct"
    se = np.asarray(result.columns[f"{label}_se"], dtype=np.float64)
    order = np.argsort(np.asarray(result.columns[column]), kind="stable")
    counts, se = counts[order].astype(np.float64), se[order]
    passes = [list(range(len(counts)))]
    if category != "integer":
        passes.append(integer_bins(edges))
    z = _range_z(pure)
    occupied = _occupied(counts, se, z, passes, RANGE_WINDOWS) or _occupied(
        counts, se, z, passes, RANGE_FALLBACK_WINDOWS
    )
    if not occupied:
        return None
    low, high = edges[occupied[0]], edges[occupied[-1] + 1]
    if category in ("integer", "decimal"):
        # Integer edges: the occupied bins hold the integers low .. high - 1. Bounds
        # of integer-like columns must lie within +-2^53 (dpkit.synth._columns): the
        # found range is clamped there (post-processing; values beyond are clamped into
        # the end bins like any value outside the bounds).
        high = high - 1.0 if category == "integer" else high
        low, high = (min(max(v, -LIMIT), LIMIT) for v in (low, high))
        if not low < high:
            low, high = (high - 1.0, high) if high > -LIMIT else (low, low + 1.0)
    return Bins(low, high)


def discover(
    session: Session, queries: dict[str, Query], schema: dict[str, str], share: Fraction
) -> tuple[dict[str, object], list[str]]:
    """Run the queries on ``session`` (the reserve), each with ``share`` of its budget;
    the domains they release and a note per column."""
    found: dict[str, object] = {}
    notes = []
    for name, query in queries.items():
        result = session.evaluate(query, budget=share)
        category = key_category(schema[name]) or ""
        if category in _NUMERIC:
            bins = _range(result, name, category, pure=False)
            if bins is None:
                # Nothing above the noise: one bin holding every value (all come back as
                # one synthetic value; post-processing of a release).
                bins = Bins(0.0, 1.0, 1)
                notes.append(f"{name}: no range found privately (too few rows); one bin.")
            else:
                notes.append(f"{name}: range [{bins.low:g}, {bins.high:g}] found privately.")
            found[name] = bins
            continue
        values = list(result.columns[name])
        counts = np.asarray(result.columns["count"], dtype=np.float64)
        order = np.argsort(-counts, kind="stable")[:MAX_DISCOVERED]
        kept = [values[i] for i in order]
        notes.append(f"{name}: {len(kept)} categories found by private key selection.")
        found[name] = Categories(kept) if kept else Categories([_placeholder(category)])
    return found, notes


def _placeholder(category: str) -> Any:
    """A value standing for 'no category was selected' (every row gets the NULL code)."""
    return {"integer": 0, "double": 0.0, "decimal": 0, "boolean": False}.get(category, "")
