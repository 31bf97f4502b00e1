"""Ready shifted-inverse estimators: max, min, user-level sum and count, distinct count.

Each is :func:`dpkit.estimators.shifted_inverse_sensitivity` with the exact loss of its
statistic (see ``_monotone_losses.py``), at the level of a *person*: pass
``privacy_unit`` (one person id per row) and a person may have any number of rows --
no contribution bound is needed in advance. Neighbouring datasets differ in all the
rows of one person (add/remove).

What is released (common to all)
--------------------------------
The statistic ``g`` (clamped to the grid's range) rounded *down* to the grid,
``f_Y = max{y in grid : y <= g}``; ``f_Y`` is monotone, and the guarantee of
:class:`~dpkit.mechanisms.DownSensitivityBound` holds for it exactly:
``f_Y(x) >= value >= f_Y(x) - DS^k_{f_Y}(x)`` with probability >= confidence. Since
``f_Y <= g``, the release never exceeds the true (clamped) statistic in that event;
on the low side add one grid step (1% relative for the default geometric grid).

The two sentinels
-----------------
The grid is ``[-inf, lo, ..., hi]``. ``-inf`` (bottom sentinel) is below the statistic
of the empty dataset and is never queried nor released; ``hi`` (top sentinel) is at
or above every value the clamped statistic can take, so values (or totals) above it
are clamped to it -- a loose ``hi`` (say ``1e12``) costs only ``log log`` of the range.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.errors import InvalidParameter
from dpkit.estimators import _monotone_losses as losses
from dpkit.estimators.shifted_inverse import Method, release_monotone
from dpkit.mechanisms._base import Release
from dpkit.random import RandomLike

__all__ = ["count_distinct", "maximum", "minimum", "user_count", "user_sum"]

#: Default top sentinel of the counts: any count up to 2^40 (~1.1e12).
DEFAULT_COUNT_UPPER = float(2**40)


def _codes(privacy_unit: Any, n: int, owner: str) -> tuple[npt.NDArray[np.intp] | None, int]:
    if privacy_unit is None:
        return None, n
    return losses.person_codes(privacy_unit, n, owner)


def _run(
    grid: npt.NDArray[np.float64],
    strict: npt.NDArray[np.float64],
    *,
    epsilon: float | None,
    rho: float | None,
    beta: float,
    method: Any,
    rng: RandomLike | None,
    owner: str,
) -> tuple[Release[float], int]:
    return release_monotone(
        grid,
        losses.snapped_loss(strict),
        lambda: strict,
        epsilon=epsilon,
        rho=rho,
        beta=beta,
        method=method,
        rng=rng,
        owner=owner,
        mechanism="ShiftedInverseSensitivity",
    )


def _max_core(
    values: npt.NDArray[np.float64],
    privacy_unit: Any,
    points: npt.NDArray[np.float64],
    owner: str,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Full grid and strict loss of the per-person maximum clamped to the points' range."""
    codes, slots = _codes(privacy_unit, values.size, owner)
    values, codes = losses.drop_nan(values, codes)
    maxima = losses.group_max(values, codes, slots)
    maxima = np.clip(maxima, points[0], points[-1])
    grid = losses.with_sentinel(points)
    return grid, losses.max_strict_loss(maxima, grid)


def maximum(
    values: npt.ArrayLike,
    *,
    privacy_unit: npt.ArrayLike | None = None,
    bounds: tuple[float, float] | None = None,
    grid: str | npt.ArrayLike = "geometric",
    resolution: float | None = None,
    epsilon: float | None = None,
    rho: float | None = None,
    beta: float = 0.05,
    method: Method = "binary_search",
    rng: RandomLike | None = None,
) -> Release[float]:
    """The maximum of the values, privately, as an under-estimate (``dp.max``).

    Parameters
    ----------
    values:
        1-D numbers, one per row. NaN rows are dropped; values outside ``bounds``
        (``+-inf`` included) are clamped to them.
    privacy_unit:
        None (each row is one person) or one person id per row (ints, strings, ...;
        no missing ids). The statistic is ``max_u m_u`` over the per-person maxima.
    bounds:
        ``(lo, hi)``: ``lo`` is the answer for no data, ``hi`` the top sentinel. ``hi``
        may be very loose: the default geometric grid costs ``log`` of the range.
    grid, resolution:
        ``"geometric"`` (default; relative step ``resolution``, default 1%, in the
        distance from ``lo``), ``"linear"`` (step ``resolution``, default range/1024),
        or an explicit increasing array of points (then no ``bounds``).
    epsilon, rho:
        Exactly one (the exponential method takes only ``epsilon``).
    beta:
        Failure probability of the accuracy statement.
    method:
        ``"binary_search"`` (default) or ``"exponential"`` (see
        :func:`~dpkit.estimators.shifted_inverse_sensitivity`).
    rng:
        Random source.

    Returns
    -------
    Release
        ``value``: a grid point; ``error``: a
        :class:`~dpkit.mechanisms.DownSensitivityBound`. Empty data is a legitimate
        neighbour and gets a private answer (near ``lo``), not an error.

    Privacy
    -------
    ``epsilon``-DP or ``rho``-zCDP for adding or removing one person with all their
    rows. The loss ``#{persons with m_u >= y_{j+1}}`` is the exact eq.-4 loss of the
    grid-rounded maximum, so it has sensitivity 1 (Prop. 3 of the down-sensitivity
    post). It is computed from one histogram of the per-person maxima over the grid,
    ``O(rows + |grid|)`` time and memory.

    Accuracy
    --------
    With probability at least ``error.confidence``: ``max >= value``, and ``value`` is
    at least the grid-rounded ``(k+1)``-th largest per-person maximum,
    ``k = error.removals`` (Fang, Dong & Yi 2022; Thms 4-5 of the post).
    """
    owner = "dp.max"
    array = losses.as_values(values, owner)
    points = losses.grid_points(bounds, grid, resolution, owner)
    full, strict = _max_core(array, privacy_unit, points, owner)
    release, _ = _run(
        full, strict, epsilon=epsilon, rho=rho, beta=beta, method=method, rng=rng, owner=owner
    )
    return release


def minimum(
    values: npt.ArrayLike,
    *,
    privacy_unit: npt.ArrayLike | None = None,
    bounds: tuple[float, float] | None = None,
    grid: str | npt.ArrayLike = "geometric",
    resolution: float | None = None,
    epsilon: float | None = None,
    rho: float | None = None,
    beta: float = 0.05,
    method: Method = "binary_search",
    rng: RandomLike | None = None,
) -> Release[float]:
    """The minimum of the values, privately, as an *over*-estimate (``dp.min``).

    Computed as ``-max(-values)``: the minimum is monotone *decreasing* (adding a
    person can only lower it), ``-min`` is monotone increasing, and the grid is built
    in the original units (finest near ``lo`` for the geometric grid) and mirrored.
    Everything else is as ``maximum``; the empty dataset's answer is ``hi``.

    Privacy
    -------
    As ``maximum`` (same loss on the negated values).

    Accuracy
    --------
    ``error`` describes ``-min``: with probability at least ``error.confidence``,
    ``min <= value``, and ``value`` is at most the grid-rounded (up) ``(k+1)``-th
    smallest per-person minimum, ``k = error.removals``.
    """
    owner = "dp.min"
    array = losses.as_values(values, owner)
    points = losses.grid_points(bounds, grid, resolution, owner)
    mirrored = -points[::-1]
    full, strict = _max_core(-array, privacy_unit, mirrored, owner)
    release, _ = _run(
        full, strict, epsilon=epsilon, rho=rho, beta=beta, method=method, rng=rng, owner=owner
    )
    return dataclasses.replace(release, value=-release.value)


def _as_int(release: Release[float]) -> Release[int]:
    """Counts are released as ints (their grid is integer)."""
    return Release(
        value=int(release.value),
        error=release.error,
        event=release.event,
        guarantee=release.guarantee,
        mechanism=release.mechanism,
        secure=release.secure,
    )


def _sum_release(
    totals: npt.NDArray[np.float64],
    points: npt.NDArray[np.float64],
    *,
    integer: bool,
    epsilon: float | None,
    rho: float | None,
    beta: float,
    method: Any,
    rng: RandomLike | None,
    owner: str,
) -> Release[Any]:
    grid = losses.with_sentinel(points)
    release, _ = _run(
        grid,
        losses.sum_strict_loss(totals, grid),
        epsilon=epsilon,
        rho=rho,
        beta=beta,
        method=method,
        rng=rng,
        owner=owner,
    )
    if integer:
        return _as_int(release)
    return release


def _upper_points(
    upper: float | None, grid: Any, resolution: float | None, owner: str, *, integer: bool
) -> npt.NDArray[np.float64]:
    if isinstance(grid, str):
        if upper is None:
            raise InvalidParameter(f"{owner}: give upper= (an a-priori bound, may be loose).")
        points = losses.grid_points((0.0, upper), grid, resolution, owner, integer=integer)
    else:
        if upper is not None:
            raise InvalidParameter(f"{owner}: give upper= or a grid array, not both.")
        points = losses.grid_points(None, grid, resolution, owner, integer=integer)
        if points[0] != 0.0:
            raise InvalidParameter(
                f"{owner}: a grid array must start at 0 (the statistic of the empty dataset)."
            )
    return points


def user_sum(
    values: npt.ArrayLike,
    privacy_unit: npt.ArrayLike | None = None,
    *,
    upper: float | None = None,
    grid: str | npt.ArrayLike = "geometric",
    resolution: float | None = None,
    epsilon: float | None = None,
    rho: float | None = None,
    beta: float = 0.05,
    method: Method = "binary_search",
    rng: RandomLike | None = None,
) -> Release[float]:
    """The sum of non-negative values with any number of rows per person, privately.

    No per-person contribution bound is needed: the error scales with how much the
    ``k`` largest contributors add, ``k = error.removals``.

    Parameters
    ----------
    values:
        1-D non-negative numbers. NaN rows are dropped; negative values are clamped
        to 0 and values above ``upper`` to ``upper`` (neither changes
        ``min(sum, upper)``, except that negatives no longer cancel positives).
    privacy_unit:
        None (one row per person) or one person id per row.
    upper:
        Top sentinel: an a-priori bound on the *total* (may be very loose, e.g. 1e12);
        a larger total is released as at most ``upper``. The grid runs from 0 (the
        empty dataset's sum) to ``upper``.
    grid, resolution, epsilon, rho, beta, method, rng:
        As ``maximum`` (an explicit grid array must start at 0 and replaces
        ``upper``).

    Privacy
    -------
    ``epsilon``-DP or ``rho``-zCDP for adding or removing one person. The loss is the
    exact eq.-4 loss of the grid-rounded ``min(sum, upper)`` (greedy: remove the
    largest totals first), hence of sensitivity 1 (Prop. 3); one sort of the
    per-person totals and prefix sums, ``O(rows + P log P + |grid| log P)``. Per-person
    totals are float64 sums in row order.

    Accuracy
    --------
    With probability at least ``error.confidence``, ``sum >= value >=`` the grid-rounded
    sum without the ``k`` largest contributors, ``k = error.removals``.
    """
    owner = "dp.user_sum"
    array = losses.as_values(values, owner)
    points = _upper_points(upper, grid, resolution, owner, integer=False)
    codes, slots = _codes(privacy_unit, array.size, owner)
    array, codes = losses.drop_nan(array, codes)
    array = np.clip(array, 0.0, points[-1])
    totals = losses.group_sum(array, codes, slots)
    return _sum_release(
        totals,
        points,
        integer=False,
        epsilon=epsilon,
        rho=rho,
        beta=beta,
        method=method,
        rng=rng,
        owner=owner,
    )


def user_count(
    privacy_unit: npt.ArrayLike,
    *,
    upper: float | None = DEFAULT_COUNT_UPPER,
    grid: str | npt.ArrayLike = "geometric",
    resolution: float | None = None,
    epsilon: float | None = None,
    rho: float | None = None,
    beta: float = 0.05,
    method: Method = "binary_search",
    rng: RandomLike | None = None,
) -> Release[int]:
    """The number of rows, with any number of rows per person, privately.

    :func:`user_sum` of the per-person row counts, on an integer grid (geometric
    points rounded down, so every count below ~100 is a grid point). ``upper``
    defaults to ``2^40``. Returns an int.

    Privacy
    -------
    As :func:`user_sum`: ``epsilon``-DP or ``rho``-zCDP for adding or removing one
    person with all their rows.

    Accuracy
    --------
    With probability at least ``error.confidence``, ``rows >= value >=`` the number of
    rows of everyone but the ``k`` most active persons (grid-rounded),
    ``k = error.removals``.
    """
    owner = "dp.user_count"
    points = _upper_points(upper, grid, resolution, owner, integer=True)
    ids = np.asarray(privacy_unit)
    codes, slots = losses.person_codes(ids, ids.size, owner)
    totals = np.bincount(codes, minlength=slots).astype(np.float64)
    return _sum_release(
        np.minimum(totals, points[-1]),
        points,
        integer=True,
        epsilon=epsilon,
        rho=rho,
        beta=beta,
        method=method,
        rng=rng,
        owner=owner,
    )


def count_distinct(
    values: npt.ArrayLike,
    privacy_unit: npt.ArrayLike | None = None,
    *,
    upper: float | None = DEFAULT_COUNT_UPPER,
    grid: str | npt.ArrayLike = "geometric",
    resolution: float | None = None,
    epsilon: float | None = None,
    rho: float | None = None,
    beta: float = 0.05,
    method: Method = "binary_search",
    rng: RandomLike | None = None,
) -> Release[int]:
    """The number of distinct values, one row per person, privately.

    Parameters
    ----------
    values:
        1-D values (numbers or strings), one row per person. NaN / None are dropped.
    privacy_unit:
        Must be None. With many rows per person the exact loss is a budgeted-coverage
        problem (NP-hard in general) and dpkit has no valid cheap surrogate yet:
        passing ids raises :class:`~dpkit.errors.InvalidParameter`.
    upper, grid, resolution, epsilon, rho, beta, method, rng:
        As :func:`user_count`.

    Privacy
    -------
    ``epsilon``-DP or ``rho``-zCDP for adding or removing one row (= person). The loss
    is exact: to keep fewer than ``y`` distinct values, remove every copy of the
    values with the fewest copies first (optimal: any ``D - y + 1`` values have at
    least the smallest multiplicities' total), so it has sensitivity 1 (Prop. 3).

    Accuracy
    --------
    With probability at least ``error.confidence``, ``distinct >= value >=`` the number
    of distinct values left after removing the ``k`` rows that lower it most
    (grid-rounded), ``k = error.removals``.
    """
    owner = "dp.count_distinct"
    if privacy_unit is not None:
        raise InvalidParameter(
            f"{owner}: privacy_unit= is not supported: with many rows per person the "
            "exact shifted-inverse loss of the distinct count is a budgeted-coverage "
            "problem (NP-hard), and dpkit has no proven cheap surrogate. Deduplicate to "
            "one value per person first, or use a contribution-bounded distinct count."
        )
    points = _upper_points(upper, grid, resolution, owner, integer=True)
    array = np.asarray(values)
    if array.ndim != 1:
        raise InvalidParameter(f"{owner}: 'values' must be 1-dimensional; got {array.ndim} dims.")
    if np.issubdtype(array.dtype, np.floating):
        array = array[~np.isnan(array)]
    elif array.dtype == object:
        present = ~np.frompyfunc(lambda v: v is None or v != v, 1, 1)(array).astype(bool)
        array = array[present] if array.size else array
    _, multiplicities = np.unique(array, return_counts=True)
    grid_full = losses.with_sentinel(points)
    release, _ = _run(
        grid_full,
        losses.distinct_strict_loss(multiplicities.astype(np.float64), grid_full),
        epsilon=epsilon,
        rho=rho,
        beta=beta,
        method=method,
        rng=rng,
        owner=owner,
    )
    return _as_int(release)
