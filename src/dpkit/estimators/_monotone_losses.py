"""Grids, per-person aggregation and exact shifted-inverse losses for the ready estimators.

Every estimator here releases ``f_Y(x)``: the largest grid point at or below the
(clamped) statistic ``g(x)``. ``f_Y`` is monotone whenever ``g`` is, and its losses
come from the *strict* loss of ``g`` at the grid points alone:

* ``lbar_Y(x, y_j) = lbar_g(x, y_j)`` (``f_Y < y_j`` iff ``g < y_j`` for a grid point);
* ``l_Y(x, y_j) = lbar_g(x, y_{j+1})`` (``f_Y <= y_j`` iff ``g < y_{j+1}``), and 0 at
  the top sentinel.

So each statistic only needs ``lbar_g`` on the grid, computed below in
``O(rows + |grid|)`` (max) or with one sort of the per-person totals (sums, counts).
The grid always starts with the bottom sentinel ``-inf`` (below ``g`` of the empty
dataset, so its loss is infinite for every dataset); its last point is the top
sentinel (the upper bound; the statistic is clamped to it).
"""

from __future__ import annotations

import contextlib
import importlib
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.errors import DataError, InvalidParameter

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

#: Largest grid accepted (memory O(|grid|)); beyond it the user should coarsen.
MAX_GRID = 10_000_000
#: The geometric grid reaches down to this fraction of the range above ``lo``.
GEOMETRIC_DEPTH = 2.0**-40
DEFAULT_RELATIVE_STEP = 0.01
DEFAULT_LINEAR_POINTS = 1024


# --------------------------------------------------------------------------- grids


def _check_bounds(bounds: Any, owner: str) -> tuple[float, float]:
    expected = "a pair (lo, hi) of finite floats with lo < hi"
    try:
        lo_raw, hi_raw = bounds
    except (TypeError, ValueError) as err:
        raise InvalidParameter.for_parameter("bounds", owner, expected, bounds) from err
    lo = check.check_finite_float(lo_raw, "bounds[0]", owner)
    hi = check.check_finite_float(hi_raw, "bounds[1]", owner)
    if not lo < hi:
        raise InvalidParameter.for_parameter("bounds", owner, expected, bounds)
    return lo, hi


def grid_points(
    bounds: Any, grid: Any, resolution: float | None, owner: str, *, integer: bool = False
) -> FloatArray:
    """The ascending candidate points ``lo .. hi`` (without the bottom sentinel).

    ``grid="geometric"``: ``lo`` and ``lo + (hi - lo) (1 + r)^-k`` for ``k = 0, 1, ...``
    down to ``2^-40 (hi - lo)``, with relative step ``r = resolution`` (default 0.01):
    ~2,800 points whatever the range, relative accuracy ``r`` in the distance from
    ``lo``. ``grid="linear"``: ``lo, lo + step, ...`` and ``hi``, ``step = resolution``
    (default ``(hi - lo) / 1024``). An array: those points (strictly increasing,
    finite). ``integer=True`` rounds the points down to integers (counts).
    """
    if isinstance(grid, str):
        if bounds is None:
            raise InvalidParameter(f"{owner}: give bounds= (or an explicit grid array).")
        lo, hi = _check_bounds(bounds, owner)
        width = hi - lo
        if grid == "geometric":
            r = DEFAULT_RELATIVE_STEP if resolution is None else resolution
            r = check.check_positive(r, "resolution", owner)
            count = math.ceil(-math.log(GEOMETRIC_DEPTH) / math.log1p(r)) + 1
            if count > MAX_GRID:
                raise InvalidParameter(
                    f"{owner}: resolution={resolution!r} gives more than {MAX_GRID} grid "
                    "points; use a larger relative step."
                )
            offsets = width * np.exp(-np.arange(count, dtype=np.float64)[::-1] * math.log1p(r))
            points = np.concatenate(([lo], lo + offsets))
        elif grid == "linear":
            step = width / DEFAULT_LINEAR_POINTS if resolution is None else resolution
            step = check.check_positive(step, "resolution", owner)
            count = math.ceil(width / step)
            if count + 1 > MAX_GRID:
                raise InvalidParameter(
                    f"{owner}: resolution={resolution!r} gives more than {MAX_GRID} grid "
                    "points; use a larger step."
                )
            points = np.concatenate((lo + step * np.arange(count, dtype=np.float64), [hi]))
        else:
            raise InvalidParameter.for_parameter(
                "grid", owner, "'geometric', 'linear' or an array of points", grid
            )
        points[-1] = hi
        points = np.minimum(points, hi)
    else:
        if resolution is not None:
            raise InvalidParameter(f"{owner}: resolution= applies to a named grid, not an array.")
        try:
            points = np.asarray(grid, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise InvalidParameter(f"{owner}: 'grid' must be a 1-D array of numbers.") from err
        if points.ndim != 1 or points.size == 0 or not np.isfinite(points).all():
            raise InvalidParameter(f"{owner}: a grid array must be 1-D, non-empty and finite.")
        if points.size > MAX_GRID:
            raise InvalidParameter(
                f"{owner}: the grid has more than {MAX_GRID} points; coarsen it."
            )
        if not np.all(np.diff(points) > 0):
            raise InvalidParameter(f"{owner}: a grid array must be strictly increasing.")
        if bounds is not None:
            raise InvalidParameter(f"{owner}: give bounds= or a grid array, not both.")
    if integer:
        points = np.floor(points)
    return np.unique(points)


def with_sentinel(points: FloatArray) -> FloatArray:
    """Prepend the bottom sentinel ``-inf``."""
    return np.concatenate(([-np.inf], points))


# ----------------------------------------------------------------- data handling


def as_values(values: Any, owner: str, name: str = "values") -> FloatArray:
    """A 1-D float64 array (NaN and inf allowed here; the estimators drop or clamp them)."""
    try:
        array = np.asarray(values)
    except (TypeError, ValueError) as err:
        raise DataError(f"{owner}: {name!r} could not be read as a numeric array.") from err
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    ):
        raise DataError(f"{owner}: {name!r} must hold numbers; got dtype {array.dtype}.")
    if array.ndim != 1:
        raise DataError(f"{owner}: {name!r} must be 1-dimensional; got {array.ndim} dims.")
    return array.astype(np.float64, copy=False)


def person_codes(privacy_unit: Any, n: int, owner: str) -> tuple[IntArray, int]:
    """Integer codes ``0 .. K-1`` of the persons of each row, and ``K``.

    Dense integer ids are used as they are (offset by their minimum, ``O(n)``, no sort);
    other ids are factorised with :func:`numpy.unique`. Some codes may be unused
    (absent persons); the estimators treat them like persons with no effect on ``g``.
    Missing ids (None, NaN) are a :class:`DataError`: such rows belong to no person.
    """
    try:
        ids = np.asarray(privacy_unit)
    except (TypeError, ValueError) as err:
        raise DataError(f"{owner}: 'privacy_unit' could not be read as an array.") from err
    if ids.ndim != 1:
        raise DataError(f"{owner}: 'privacy_unit' must be 1-dimensional; got {ids.ndim} dims.")
    if ids.size != n:
        raise DataError(
            f"{owner}: 'privacy_unit' has {ids.size} entries but the data has {n} rows; "
            "give one person id per row."
        )
    if n == 0:
        return np.zeros(0, dtype=np.intp), 0
    if np.issubdtype(ids.dtype, np.integer) and ids.dtype != np.bool_:
        low, high = int(ids.min()), int(ids.max())
        if high - low < 2 * n + 1024:
            codes = ids.astype(np.intp, copy=False)
            if low != 0:
                codes = codes - low
            return codes, high - low + 1
    elif np.issubdtype(ids.dtype, np.floating):
        if np.isnan(ids).any():
            raise DataError(f"{owner}: 'privacy_unit' has missing (NaN) person ids.")
    elif ids.dtype == object:
        missing = np.frompyfunc(lambda v: v is None or v != v, 1, 1)(ids).astype(bool)
        if missing.any():
            raise DataError(f"{owner}: 'privacy_unit' has missing (None/NaN) person ids.")
    return _factorize(ids, owner)


def _factorize(ids: npt.NDArray[Any], owner: str) -> tuple[IntArray, int]:
    """Codes of arbitrary ids: pandas' hash-based factorize when pandas is installed
    (several times faster than sorting), else :func:`numpy.unique`. Only the grouping
    matters (the losses do not depend on how persons are numbered), so both give the
    same release."""
    pd: Any = None
    # Optional: not a dpkit dependency (imported by name, so no stubs are needed).
    with contextlib.suppress(ImportError):
        pd = importlib.import_module("pandas")
    if pd is not None:
        codes, uniques = pd.factorize(ids)
        return np.asarray(codes, dtype=np.intp), len(uniques)
    try:
        _, inverse = np.unique(ids, return_inverse=True)
    except TypeError as err:
        raise DataError(f"{owner}: 'privacy_unit' ids must be comparable (one type).") from err
    inverse = inverse.reshape(-1).astype(np.intp, copy=False)
    return inverse, int(inverse.max()) + 1


def group_max(values: FloatArray, codes: IntArray | None, slots: int) -> FloatArray:
    """Per-person maximum (``-inf`` for unused codes); rows as persons when ``codes`` is None."""
    if codes is None:
        return values
    out = np.full(slots, -np.inf)
    np.maximum.at(out, codes, values)
    return out


def group_sum(values: FloatArray, codes: IntArray | None, slots: int) -> FloatArray:
    """Per-person total (0 for unused codes), summed in row order."""
    if codes is None:
        return values
    totals: FloatArray = np.bincount(codes, weights=values, minlength=slots).astype(np.float64)
    return totals


def drop_nan(values: FloatArray, codes: IntArray | None) -> tuple[FloatArray, IntArray | None]:
    """Rows with a NaN value are dropped (documented): they carry no value."""
    keep = ~np.isnan(values)
    if keep.all():
        return values, codes
    return values[keep], (None if codes is None else codes[keep])


# ----------------------------------------------------------------------- losses


def max_strict_loss(maxima: FloatArray, grid: FloatArray) -> FloatArray:
    """``lbar(y_j) = #{persons with m_u >= y_j}`` of the maximum, from a histogram.

    ``maxima`` are the per-person maxima, already clamped to ``[grid[1], grid[-1]]``.
    ``g`` of the empty dataset is ``lo = grid[1]``, so ``lbar = inf`` at ``y <= lo``.
    """
    size = grid.size
    # Full-grid index of the largest grid point <= m (>= 1 as m >= lo).
    index = np.searchsorted(grid[1:], maxima, side="right")
    counts = np.bincount(index, minlength=size)[:size]
    strict = np.cumsum(counts[::-1])[::-1].astype(np.float64)
    strict[:2] = np.inf
    return strict


def sum_strict_loss(totals: FloatArray, grid: FloatArray) -> FloatArray:
    """``lbar(y) = min{k : sum of all but the k largest totals < y}`` (``inf`` if ``y <= 0``).

    Removing the largest totals first is optimal: any ``k`` removals leave at least
    the sum of the ``P - k`` smallest. With ``C_m`` the sum of the ``m`` smallest
    totals (non-decreasing in ``m``), ``lbar(y) = #{m in 0..P : C_m >= y}``. ``C`` is a
    sequential float cumulative sum of sorted non-negative numbers; float addition is
    monotone in each argument, so the computed ``C`` of neighbouring datasets
    interlace as the exact ones do, and the computed loss keeps sensitivity 1.
    """
    positive = np.sort(totals[totals > 0])
    prefix = np.concatenate(([0.0], np.cumsum(positive)))
    below = np.searchsorted(prefix, grid, side="left")
    strict = (prefix.size - below).astype(np.float64)
    strict[grid <= 0] = np.inf
    return strict


def distinct_strict_loss(multiplicities: FloatArray, grid: FloatArray) -> FloatArray:
    """``lbar(y)`` of the number of distinct values, one row per person.

    To keep fewer than ``y`` distinct values, at least ``D - (ceil(y) - 1)`` values must
    lose every copy, and removing the values with the fewest copies is optimal (any
    set of that many values has at least the smallest multiplicities' total).
    """
    counts = np.sort(multiplicities)
    distinct = counts.size
    prefix = np.concatenate(([0.0], np.cumsum(counts)))
    with np.errstate(invalid="ignore"):
        keep = np.ceil(grid) - 1.0
    remove = np.clip(distinct - np.nan_to_num(keep, neginf=-1.0), 0, distinct).astype(np.intp)
    strict = prefix[remove]
    strict[grid <= 0] = np.inf
    return strict


def snapped_loss(strict: FloatArray) -> FloatArray:
    """``l_Y(y_j) = lbar(y_{j+1})`` and 0 at the top sentinel (module docstring)."""
    loss = np.empty_like(strict)
    loss[:-1] = strict[1:]
    loss[-1] = 0.0
    return loss
