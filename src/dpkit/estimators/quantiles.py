"""Private quantiles by the inverse sensitivity mechanism on a grid.

The data are snapped onto a :class:`~dpkit.estimators.Grid` (a histogram, O(n), no
sort), the exact inverse-sensitivity loss of the quantile is computed at every grid
point from the counts in O(1) each (:mod:`dpkit.estimators._quantile_loss`, which
proves the closed forms), and a grid point is drawn exactly with probability
∝ ``exp(-(epsilon/2) loss)``. Total cost O(n + ``|grid|``) time and O(``|grid|``) memory
beyond the data.

Quantile convention: for data ``x_(1) <= ... <= x_(n)`` (snapped to the grid) a
``q``-quantile is any point of ``[x_(lo), x_(hi)]`` with ``lo = max(1, ceil(q n))``
and ``hi = min(n, floor(q n) + 1)``: the whole gap between the two middle records for
the median of an even number of records, else the single order statistic ``x_(lo)``
(the minimum at ``q = 0``, the maximum at ``q = 1``). The loss is 0 on that interval.

Why this module is long (~520 lines): two fifths of it are the public functions'
docstrings (privacy, accuracy, the theorem each implements).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import get_args

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.accounting.events import ExponentialMechanismEvent, RepeatedEvent
from dpkit.accounting.guarantees import PureDP
from dpkit.errors import DataError, InvalidParameter
from dpkit.estimators import _refine
from dpkit.estimators._quantile_loss import Neighbouring, quantile_loss, rational_level
from dpkit.estimators.grid import Grid
from dpkit.estimators.inverse_sensitivity import loss_radius, select_by_loss
from dpkit.mechanisms._base import RankErrorBound, Release
from dpkit.random import RandomLike, as_random
from dpkit.selection.exponential import ExponentialMechanism

__all__ = ["DEFAULT_GRID_SIZE", "median", "quantile", "quantile_from_counts", "quantiles"]

#: Points of the grid built from ``bounds`` when no ``grid_size`` is given.
DEFAULT_GRID_SIZE = 100_001
_NEIGHBOURING: tuple[str, ...] = get_args(Neighbouring)
_MECHANISM = "InverseSensitivityQuantile"
_REFINED = "RefinedInverseSensitivityQuantile"


# ---------------------------------------------------------------------- validation


def _check_neighbouring(value: object, owner: str) -> Neighbouring:
    if value not in _NEIGHBOURING:
        raise InvalidParameter.for_parameter(
            "neighbouring", owner, f"one of {_NEIGHBOURING}", value
        )
    return value  # type: ignore[return-value]


def _check_level(q: object, owner: str, name: str = "q") -> float:
    return check.check_probability(q, name, owner)


def _check_confidence(confidence: object, owner: str) -> float:
    return check.check_probability(confidence, "confidence", owner, open_low=True, open_high=True)


def _resolve_grid(bounds: object, grid: object, grid_size: object, owner: str) -> Grid:
    """The grid from ``grid=`` (a Grid, "linear" or "log") and ``bounds``/``grid_size``."""
    if isinstance(grid, Grid):
        if grid_size is not None:
            raise InvalidParameter(f"{owner}: grid_size= is for grid='linear'/'log', not a Grid.")
        if bounds is not None:
            lower, upper = _check_bounds(bounds, owner)
            if (lower, upper) != (grid.lower, grid.upper):
                raise InvalidParameter(
                    f"{owner}: bounds={bounds!r} differ from the grid's "
                    f"({grid.lower!r}, {grid.upper!r}); pass one or the other."
                )
        return grid
    if grid not in ("linear", "log"):
        raise InvalidParameter.for_parameter("grid", owner, "'linear', 'log' or a dpkit.Grid", grid)
    if bounds is None:
        raise InvalidParameter(
            f"{owner}: bounds=(lower, upper) is required (public bounds of the data; "
            "values outside are clamped), unless grid= is a Grid."
        )
    lower, upper = _check_bounds(bounds, owner)
    size = DEFAULT_GRID_SIZE if grid_size is None else grid_size
    if grid == "linear":
        return Grid.linear(lower, upper, size=size)  # type: ignore[arg-type]
    if lower <= 0:
        raise InvalidParameter(
            f"{owner}: grid='log' needs bounds with lower > 0 (got {lower!r}); for data "
            "with zeros or negative values pass grid=dp.Grid.log(lower, upper, "
            "min_magnitude=..., size=...), a symmetric-log grid."
        )
    return Grid.log(lower, upper, size=size)  # type: ignore[arg-type]


def _check_bounds(bounds: object, owner: str) -> tuple[float, float]:
    try:
        pair: tuple[object, ...] = tuple(bounds)  # type: ignore[arg-type]
        lower, upper = pair
    except (TypeError, ValueError):
        raise InvalidParameter.for_parameter(
            "bounds", owner, "a pair (lower, upper) of finite floats, lower < upper", bounds
        ) from None
    lo = check.check_finite_float(lower, "bounds[0]", owner)
    hi = check.check_finite_float(upper, "bounds[1]", owner)
    if not lo < hi:
        raise InvalidParameter.for_parameter(
            "bounds", owner, "a pair (lower, upper) of finite floats, lower < upper", bounds
        )
    return lo, hi


def _check_refine(refine: object, owner: str) -> bool:
    if not isinstance(refine, bool):
        raise InvalidParameter.for_parameter("refine", owner, "True or False", refine)
    return refine


def _check_counts(counts: object, grid: Grid, owner: str) -> npt.NDArray[np.int64]:
    array = check.check_array(counts, "counts", owner, integer=True, allow_empty=True, ndim=1)
    if array.size != grid.size:
        raise DataError(
            f"{owner}: 'counts' must have one entry per grid point ({grid.size}); got {array.size}."
        )
    if (array < 0).any():
        raise DataError(f"{owner}: 'counts' must be non-negative integers.")
    return array


# ---------------------------------------------------------------------- releases


def quantile_from_counts(
    counts: npt.ArrayLike,
    grid: Grid,
    q: float,
    *,
    epsilon: float,
    neighbouring: Neighbouring = "add_remove",
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> Release[float]:
    """Private ``q``-quantile from the grid histogram (the sufficient statistic).

    The entry point for engines: compute ``counts[i]`` = number of records that snap
    to ``grid.points[i]`` with the rule of :mod:`dpkit.estimators.grid` (NaN
    dropped, values clamped to the bounds), then call this. :func:`quantile` is this
    applied to ``grid.histogram(data)``.

    Parameters
    ----------
    counts:
        Non-negative integer counts, one per grid point.
    grid:
        The public :class:`Grid`.
    q:
        Quantile level in [0, 1] (read as the closest fraction with denominator at
        most 2^20; exact for decimals with up to 6 digits).
    epsilon:
        Privacy parameter, a float in (0, inf).
    neighbouring:
        ``"add_remove"`` (default; n is private) or ``"replace"`` (n is public; the
        loss is the replacement distance).
    confidence:
        Confidence of the reported :class:`~dpkit.mechanisms.RankErrorBound`, in (0, 1).
    rng:
        Random source; None for the secure default.

    Returns
    -------
    Release
        ``value``: a grid point (float); ``error``: ``RankErrorBound(k, confidence)``.

    Notes
    -----
    This is the *coarse* mechanism: it releases one of the grid's own points, so its
    resolution is one grid step. :func:`quantile` on raw data refines the answer to a
    fine grid of 2^20 points per cell (``refine=True``), which needs one more pass
    over the records and so is not available from the histogram alone.

    Privacy
    -------
    ``epsilon``-DP and ``epsilon^2/8``-zCDP for records added/removed (or replaced,
    with ``neighbouring="replace"``): the exponential mechanism on the exact
    inverse-sensitivity loss, which has sensitivity 1 (Asi & Duchi 2020; Thm 2 and
    Lemma 1 of the inverse-sensitivity post). Event: ``ExponentialMechanismEvent``.

    Accuracy
    --------
    With probability ``>= confidence`` the release lies between the snapped order
    statistics ``x_(lo-k)`` and ``x_(hi+k)`` (grid ends beyond the data; ``lo``,
    ``hi`` as in the module docstring), with ``k = floor(ln(|grid| / beta) / c)``,
    ``beta = 1 - confidence``, ``c = epsilon/2`` (rounded down): Lemma 3 bounds the
    loss by ``k``, and ``k`` added/removed (or replaced) records move each order
    statistic by at most ``k`` ranks (Thm 4 with ``LS^k``). Requires at least one
    record.
    """
    owner = "quantile_from_counts"
    epsilon = check.check_epsilon(epsilon, owner)
    level = _check_level(q, owner)
    neighbouring = _check_neighbouring(neighbouring, owner)
    confidence = _check_confidence(confidence, owner)
    if not isinstance(grid, Grid):
        raise InvalidParameter.for_parameter("grid", owner, "a dpkit.Grid", type(grid).__name__)
    counts_array = _check_counts(counts, grid, owner)
    return _release(counts_array, grid, level, epsilon, neighbouring, confidence, rng, owner)


def _release(
    counts: npt.NDArray[np.int64],
    grid: Grid,
    q: float,
    epsilon: float,
    neighbouring: Neighbouring,
    confidence: float,
    rng: RandomLike | None,
    owner: str,
) -> Release[float]:
    loss = quantile_loss(counts, rational_level(q), neighbouring).astype(np.float64)
    index, mechanism, secure = select_by_loss(loss, epsilon=epsilon, rng=rng, owner=owner)
    radius = loss_radius(grid.size, coefficient=mechanism.coefficient, confidence=confidence)
    return Release(
        value=float(grid.points[index]),
        error=RankErrorBound(rank_radius=radius, confidence=confidence),
        event=mechanism.event,
        guarantee=mechanism.guarantee,
        mechanism=_MECHANISM,
        secure=secure,
    )


def _release_refined(
    data: npt.NDArray[np.generic],
    counts: npt.NDArray[np.int64],
    grid: Grid,
    q: float,
    epsilon: float,
    neighbouring: Neighbouring,
    confidence: float,
    random: RandomLike | None,
) -> Release[float]:
    """The exponential mechanism over the fine grid, sampled exactly (:mod:`._refine`)."""
    mechanism = ExponentialMechanism(epsilon=epsilon, sensitivity=1.0)
    source = as_random(random)
    index = _refine.refined_index(
        grid,
        counts,
        data,
        rational_level(q),
        neighbouring,
        mechanism.coefficient,
        source,
    )
    radius = loss_radius(
        _refine.fine_size(grid), coefficient=mechanism.coefficient, confidence=confidence
    )
    return Release(
        value=_refine.fine_value(grid, index),
        error=RankErrorBound(rank_radius=radius, confidence=confidence),
        event=mechanism.event,
        guarantee=mechanism.guarantee,
        mechanism=_REFINED,
        secure=source.secure,
    )


def quantile(
    data: npt.ArrayLike,
    q: float,
    *,
    bounds: tuple[float, float] | None = None,
    epsilon: float,
    grid: Grid | str = "linear",
    grid_size: int | None = None,
    neighbouring: Neighbouring = "add_remove",
    confidence: float = 0.95,
    refine: bool = True,
    rng: RandomLike | None = None,
) -> Release[float]:
    """Private ``q``-quantile of one-dimensional numeric data.

    Parameters
    ----------
    data:
        Numbers (any shape, flattened), one per record. NaN is dropped; values
        outside ``bounds`` (``+-inf`` included) are clamped to them. Empty data is
        allowed and gets a private answer like any other dataset: under add/remove
        the empty dataset is a neighbour of every one-record dataset, and the
        mechanism releases a uniformly random grid point for it (every grid point
        has loss 1), so emptiness is protected exactly as any record is.
    q:
        Quantile level in [0, 1]; the target is the interval ``[x_(lo), x_(hi)]``,
        ``lo = max(1, ceil(q n))``, ``hi = min(n, floor(q n) + 1)``.
    bounds:
        Public ``(lower, upper)``, finite, ``lower < upper``; omit when ``grid`` is
        a Grid.
    epsilon:
        Privacy parameter, a float in (0, inf).
    grid:
        ``"linear"`` (default): ``grid_size`` evenly spaced points over ``bounds``;
        ``"log"``: geometric points (``lower > 0``), for a wide positive range; or
        any :class:`Grid` (e.g. ``Grid.log(-1e3, 1e9, min_magnitude=1e-2, ...)``).
    grid_size:
        Number of points for ``"linear"``/``"log"``; default 100,001. The accuracy
        costs ``(2/epsilon) ln(grid_size)`` ranks, the resolution is one grid step.
    neighbouring:
        ``"add_remove"`` (default, n private) or ``"replace"`` (n public).
    confidence:
        Confidence of the reported :class:`~dpkit.mechanisms.RankErrorBound`.
    refine:
        True (default; linear and log grids): release a point of the *fine grid*
        that splits every grid cell into 2^20 (about a million) equal cells, so the
        answer is not limited by the grid step (effectively continuous); sampled
        exactly by rejection (``dpkit.estimators._refine``, which holds the
        proof), in O(n + ``|grid|``) time with one extra pass over the data. False: the
        coarse mechanism on the grid points (what ``quantile_from_counts``
        does). A symlog grid is always released on its own points.
    rng:
        Random source; None for the secure default.

    Returns
    -------
    Release
        ``value``: a fine-grid point (refined) or a grid point (float);
        ``error``: ``RankErrorBound``.

    Privacy
    -------
    ``epsilon``-DP and ``epsilon^2/8``-zCDP per record (see
    ``quantile_from_counts``; Asi & Duchi 2020, Thm 2 of the post). Refined, it
    is the same theorem on the fine grid ``F``: the exact loss of the fine-snapped
    data has sensitivity 1, and the rejection sampler outputs exactly
    ``P(y) ∝ exp(-c loss(y))`` over ``F``. Snapping (to the grid or to ``F``) is a
    fixed per-record map, so it keeps neighbours neighbours. The running time
    depends on the data (see ``dpkit.estimators._refine``).

    Accuracy
    --------
    With probability ``>= confidence``, between the snapped order statistics
    ``x_(lo-k)`` and ``x_(hi+k)``, ``k = floor((2/epsilon) ln(|Y| / (1 - confidence)))``
    (Lemma 3 and Thm 4 of the inverse-sensitivity post), where ``Y`` is the fine
    grid (``|F| = (|grid| - 1) 2^20``) when refined, else the grid; refined, the
    order statistics are those of the data snapped to ``F`` (within half a fine step,
    i.e. 2^-21 grid steps, of the data).

    Raises
    ------
    DataError
        Non-numeric data.
    InvalidParameter
        ``q`` outside [0, 1]; bounds missing, reversed or not finite; bad epsilon,
        confidence, neighbouring or grid; a grid too large (says how to coarsen).

    Examples
    --------
    >>> import dpkit as dp
    >>> from dpkit.testing import seeded
    >>> incomes = [21_000, 34_500, 38_000, 52_000, 61_000, 75_000, 1_200_000]
    >>> release = dp.median(incomes, bounds=(0, 2_000_000), epsilon=1.0, rng=seeded(1))
    >>> release.error
    RankErrorBound(rank_radius=56, confidence=0.95)
    """
    owner = "quantile"
    epsilon = check.check_epsilon(epsilon, owner)
    level = _check_level(q, owner)
    neighbouring = _check_neighbouring(neighbouring, owner)
    confidence = _check_confidence(confidence, owner)
    refine = _check_refine(refine, owner)
    resolved = _resolve_grid(bounds, grid, grid_size, owner)
    values = Grid._as_values(data, owner)
    counts = resolved.histogram(values)
    if refine and _refine.supports(resolved):
        return _release_refined(
            values, counts, resolved, level, epsilon, neighbouring, confidence, rng
        )
    return _release(counts, resolved, level, epsilon, neighbouring, confidence, rng, owner)


def median(
    data: npt.ArrayLike,
    *,
    bounds: tuple[float, float] | None = None,
    epsilon: float,
    grid: Grid | str = "linear",
    grid_size: int | None = None,
    neighbouring: Neighbouring = "add_remove",
    confidence: float = 0.95,
    refine: bool = True,
    rng: RandomLike | None = None,
) -> Release[float]:
    """Private median: :func:`quantile` at ``q = 1/2`` (for even n, any point between
    the two middle records is a median: the loss is 0 on that whole gap).

    Same parameters, privacy (``epsilon``-DP, ``epsilon^2/8``-zCDP; Asi & Duchi 2020)
    and accuracy (``RankErrorBound``, Thm 4 of the inverse-sensitivity post) as
    :func:`quantile`.
    """
    return quantile(
        data,
        0.5,
        bounds=bounds,
        epsilon=epsilon,
        grid=grid,
        grid_size=grid_size,
        neighbouring=neighbouring,
        confidence=confidence,
        refine=refine,
        rng=rng,
    )


def _split_epsilon(epsilon: float, parts: int) -> float:
    """``epsilon / parts`` rounded down, so ``parts`` shares never sum above ``epsilon``."""
    share = epsilon / parts
    while Fraction(share) * parts > Fraction(epsilon):
        share = math.nextafter(share, 0.0)
    return share


def quantiles(
    data: npt.ArrayLike,
    qs: Sequence[float] | npt.ArrayLike,
    *,
    bounds: tuple[float, float] | None = None,
    epsilon: float,
    grid: Grid | str = "linear",
    grid_size: int | None = None,
    neighbouring: Neighbouring = "add_remove",
    confidence: float = 0.95,
    refine: bool = True,
    rng: RandomLike | None = None,
) -> Release[tuple[float, ...]]:
    """Several private quantiles at once, non-decreasing in ``q``.

    Budget split: each of the ``K = len(qs)`` quantiles gets ``epsilon / K``
    (rounded down) and is released by :func:`quantile` on the same grid histogram;
    basic composition makes the whole ``epsilon``-DP. The values are then sorted in
    the order of ``qs`` (post-processing), so a larger ``q`` never gets a smaller
    value. (The recursive method of Kaplan, Schnapp & Stemmer 2022 spends only
    ``~epsilon / log2(K)`` per level with parallel composition; not implemented
    here, see docs/estimators-quantiles.md.)

    Parameters
    ----------
    data, bounds, epsilon, grid, grid_size, neighbouring, refine, rng:
        As for :func:`quantile`; ``epsilon`` is the total.
    qs:
        Non-empty sequence of levels in [0, 1] (repeats allowed).
    confidence:
        Simultaneous confidence: each quantile uses ``1 - (1 - confidence) / K``, so
        by a union bound all ``K`` are within the reported rank radius at once.

    Returns
    -------
    Release
        ``value``: tuple of floats in the order of ``qs``; ``error``: one
        ``RankErrorBound`` that holds for all of them simultaneously.

    Privacy
    -------
    ``epsilon``-DP (basic composition of ``K`` inverse-sensitivity releases, Dwork
    et al. 2006) and ``K (epsilon/K)^2/8 = epsilon^2/(8K)``-zCDP (bounded range,
    Cesar & Rogers 2021). Event: ``RepeatedEvent(ExponentialMechanismEvent(epsilon/K), K)``.

    Accuracy
    --------
    With probability ``>= confidence``, every released value is between
    ``x_(lo_j - k)`` and ``x_(hi_j + k)`` for its own ranks ``lo_j``, ``hi_j``, with
    ``k = floor((2K/epsilon) ln(K |Y| / (1 - confidence)))`` (``Y`` the fine grid
    when refined, else the grid); sorting keeps this
    (the target intervals are non-decreasing in ``q``).
    """
    owner = "quantiles"
    epsilon = check.check_epsilon(epsilon, owner)
    levels_in = np.asarray(qs, dtype=object).reshape(-1)
    if levels_in.size == 0:
        raise InvalidParameter.for_parameter("qs", owner, "a non-empty sequence", qs)
    levels = [_check_level(q, owner, "qs[i]") for q in levels_in]
    neighbouring = _check_neighbouring(neighbouring, owner)
    confidence = _check_confidence(confidence, owner)
    refine = _check_refine(refine, owner)
    resolved = _resolve_grid(bounds, grid, grid_size, owner)
    parts = len(levels)
    share = _split_epsilon(epsilon, parts)
    each_confidence = 1.0 - (1.0 - confidence) / parts
    records = Grid._as_values(data, owner)
    counts = resolved.histogram(records)
    random = as_random(rng)
    refined = refine and _refine.supports(resolved)
    values = []
    radius = 0
    for level in levels:
        if refined:
            one = _release_refined(
                records, counts, resolved, level, share, neighbouring, each_confidence, random
            )
        else:
            one = _release(
                counts, resolved, level, share, neighbouring, each_confidence, random, owner
            )
        values.append(one.value)
        assert isinstance(one.error, RankErrorBound)
        radius = max(radius, one.error.rank_radius)
    order = np.argsort(levels, kind="stable")
    ordered = np.empty(parts)
    ordered[order] = np.sort(values)
    return Release(
        value=tuple(float(v) for v in ordered),
        error=RankErrorBound(rank_radius=radius, confidence=confidence),
        event=RepeatedEvent(ExponentialMechanismEvent(share), parts),
        guarantee=PureDP(epsilon),
        mechanism=_REFINED if refined else _MECHANISM,
        secure=random.secure,
    )
