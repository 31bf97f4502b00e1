"""Private histograms on public bins: ``dp.histogram`` and ``dp.histogram2d``.

The bins are public: explicit edges, or a number of bins with a ``range`` (never
derived from the data, unlike NumPy's default). Counts follow NumPy's rule (every bin
half-open but the last, which includes its right edge; values outside the edges are
not counted; NaN is dropped) and get discrete Laplace (``epsilon=``) or discrete
Gaussian (``rho=``) noise per bin from dpkit's exact samplers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.errors import InvalidParameter
from dpkit.mechanisms._base import ErrorBound, Release
from dpkit.mechanisms.gaussian import DiscreteGaussian
from dpkit.mechanisms.laplace import DiscreteLaplace
from dpkit.random import RandomLike, as_random
from dpkit.tools import _checks
from dpkit.tools._bound import ClippedErrorBound
from dpkit.tools._checks import Budget, Neighbouring

__all__ = ["histogram", "histogram2d"]

#: Most bins (or cells) one call may release: noise and memory grow with the count.
MAX_BINS = 10_000_000
FloatArray = npt.NDArray[np.float64]


def _edges(bins: object, range_: object, owner: str, axis: str = "") -> FloatArray:
    """Public bin edges from ``bins`` (an int with ``range``, or the edges themselves)."""
    name, range_name = f"bins{axis}", f"range{axis}"
    if isinstance(bins, bool):
        raise InvalidParameter.for_parameter(name, owner, "an int >= 1 or increasing edges", bins)
    if isinstance(bins, int | np.integer):
        count = check.check_count(bins, name, owner)
        if count > MAX_BINS:
            raise InvalidParameter.for_parameter(name, owner, f"at most {MAX_BINS}", bins)
        if range_ is None:
            raise InvalidParameter(
                f"{owner}: bins={bins!r} needs range=(lower, upper), the public span of the "
                "bins (dpkit never takes it from the data); or pass the bin edges as bins."
            )
        low, high = _checks.check_bounds(range_, owner, range_name)
        return np.linspace(low, high, count + 1)
    if range_ is not None:
        raise InvalidParameter(
            f"{owner}: give range= only with a number of bins; {name} already holds edges."
        )
    expected = "an int >= 1 (with range=) or strictly increasing finite bin edges (2 or more)"
    try:
        edges = np.asarray(bins, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameter.for_parameter(name, owner, expected, bins) from None
    if (
        edges.ndim != 1
        or not 2 <= edges.size <= MAX_BINS + 1
        or not np.all(np.isfinite(edges))
        or not np.all(np.diff(edges) > 0)
    ):
        raise InvalidParameter.for_parameter(name, owner, expected, bins)
    return edges


def _noisy_counts(
    counts: npt.NDArray[np.int64],
    budget: Budget,
    relation: Neighbouring,
    level: float,
    rng: RandomLike | None,
) -> Release[Any]:
    """Noise on every cell; clamped at 0 (never further from the true counts)."""
    mechanism: DiscreteLaplace | DiscreteGaussian
    # One record changes one cell by 1 (add/remove) or two cells by 1 (replace).
    if budget.kind == "epsilon":
        mechanism = DiscreteLaplace.calibrate(
            epsilon=budget.total, sensitivity=1 if relation == "add_remove" else 2
        )
    else:
        mechanism = DiscreteGaussian.calibrate(
            rho=budget.total, sensitivity=1.0 if relation == "add_remove" else math.sqrt(2.0)
        )
    random = as_random(rng)
    noisy = mechanism.release(counts.reshape(-1), confidence=level, rng=random)
    assert isinstance(noisy.error, ErrorBound)
    values = np.maximum(np.asarray(noisy.value, dtype=np.int64).reshape(counts.shape), 0)
    return Release(
        value=values,
        error=ClippedErrorBound(
            noisy.error.standard_deviation, noisy.error.half_width, level, 0.0, math.inf
        ),
        event=noisy.event,
        guarantee=budget.guarantee,
        mechanism=noisy.mechanism,
        secure=noisy.secure,
    )


def histogram(
    data: npt.ArrayLike,
    *,
    bins: int | npt.ArrayLike = 10,
    range: tuple[float, float] | None = None,  # numpy's name
    epsilon: float | None = None,
    rho: float | None = None,
    neighbouring: Neighbouring = "add_remove",
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> Release[tuple[npt.NDArray[np.int64], FloatArray]]:
    """Private histogram of 1-D data on public bins (``dp.histogram``).

    Parameters
    ----------
    data:
        1-D numbers (array, list or pandas Series). NaN is dropped; values outside the
        edges (``+-inf`` included) are not counted, as in ``numpy.histogram``.
    bins, range:
        ``bins`` an int with ``range=(lower, upper)`` (equal-width bins), or the bin
        edges themselves (strictly increasing, finite; then no ``range``). Required to
        be public: a missing ``range`` is an error, never read from the data.
    epsilon, rho:
        Exactly one: ``epsilon``-DP with discrete Laplace noise of scale
        ``sensitivity/epsilon`` per bin, or ``rho``-zCDP with discrete Gaussian noise.
    neighbouring:
        ``"add_remove"`` (default; L1 and L2 sensitivity 1) or ``"replace"`` (one
        record moves between two bins: L1 sensitivity 2, L2 ``sqrt(2)``).
    confidence:
        Confidence of the per-bin interval.
    rng:
        Random source.

    Returns
    -------
    Release
        ``value``: ``(counts, edges)`` as ``numpy.histogram`` returns them (counts are
        int64, negative noisy counts clamped to 0); ``error``: a
        :class:`~dpkit.tools.ClippedErrorBound` per bin.

    Privacy
    -------
    ``epsilon``-DP or ``rho``-zCDP under the chosen relation (Dwork et al. 2006; the
    discrete versions by Canonne, Kamath & Steinke 2020). Event: one
    ``DiscreteLaplaceEvent`` (or a ``DiscreteGaussianEvent`` with the bins' dimension).

    Accuracy
    --------
    For each bin, ``|count - true count| <= half_width`` with probability ``>=
    confidence`` (not simultaneously: for all ``k`` bins at once ask for confidence
    ``1 - (1 - c)/k``). Clamping at 0 keeps this.
    """
    owner = "dp.histogram"
    budget = _checks.check_budget(epsilon, rho, owner)
    relation = _checks.check_neighbouring(neighbouring, owner)
    level = _checks.check_confidence(confidence, owner)
    edges = _edges(bins, range, owner)
    values = _checks.numeric_values(data, owner)
    inside = values[(values >= edges[0]) & (values <= edges[-1])]
    counts, _ = np.histogram(inside, bins=edges)
    noisy = _noisy_counts(counts.astype(np.int64), budget, relation, level, rng)
    return Release(
        value=(noisy.value, edges),
        error=noisy.error,
        event=noisy.event,
        guarantee=noisy.guarantee,
        mechanism=noisy.mechanism,
        secure=noisy.secure,
    )


def _pair(value: object, owner: str, name: str) -> tuple[object, object]:
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return value, value
    if isinstance(value, str | bytes):
        raise InvalidParameter.for_parameter(name, owner, "one value per axis", value)
    try:
        items: tuple[object, ...] = tuple(value)  # type: ignore[arg-type]
        first, second = items
    except (TypeError, ValueError):
        raise InvalidParameter.for_parameter(name, owner, "one value per axis", value) from None
    return first, second


def histogram2d(
    x: npt.ArrayLike,
    y: npt.ArrayLike,
    *,
    bins: int | tuple[Any, Any] = 10,
    range: tuple[tuple[float, float], tuple[float, float]] | None = None,
    epsilon: float | None = None,
    rho: float | None = None,
    neighbouring: Neighbouring = "add_remove",
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> Release[tuple[npt.NDArray[np.int64], FloatArray, FloatArray]]:
    """Private 2-D histogram of the pairs ``(x[i], y[i])`` on public bins (``dp.histogram2d``).

    Parameters
    ----------
    x, y:
        1-D numbers of the same length, one pair per record; a pair with NaN in either
        is dropped, pairs outside the edges are not counted (``numpy.histogram2d``).
    bins, range:
        ``bins``: an int (both axes), a pair of ints, or a pair of edge arrays (or one
        of each); ``range=((x_lo, x_hi), (y_lo, y_hi))`` for every axis given by a
        number of bins.
    epsilon, rho, neighbouring, confidence, rng:
        As for :func:`histogram` (a record is one pair: sensitivity 1 or 2 in L1).

    Returns
    -------
    Release
        ``value``: ``(counts, x_edges, y_edges)`` as ``numpy.histogram2d`` returns them
        (int64 counts clamped at 0); ``error``: per-cell
        :class:`~dpkit.tools.ClippedErrorBound`.

    Privacy and accuracy as for :func:`histogram`, per cell.
    """
    owner = "dp.histogram2d"
    budget = _checks.check_budget(epsilon, rho, owner)
    relation = _checks.check_neighbouring(neighbouring, owner)
    level = _checks.check_confidence(confidence, owner)
    bins_x, bins_y = _pair(bins, owner, "bins")
    range_x, range_y = (None, None) if range is None else _pair(range, owner, "range")
    edges_x = _edges(bins_x, range_x, owner, "[0]")
    edges_y = _edges(bins_y, range_y, owner, "[1]")
    if (edges_x.size - 1) * (edges_y.size - 1) > MAX_BINS:
        raise InvalidParameter.for_parameter(
            "bins", owner, f"at most {MAX_BINS} cells", (edges_x.size - 1, edges_y.size - 1)
        )
    raw_x = _checks.numeric_values(x, owner, "x", drop_nan=False)
    raw_y = _checks.numeric_values(y, owner, "y", drop_nan=False)
    if raw_x.size != raw_y.size:
        raise InvalidParameter(
            f"{owner}: x and y must have the same length (one pair per record); got "
            f"{raw_x.size} and {raw_y.size}."
        )
    keep = ~(np.isnan(raw_x) | np.isnan(raw_y))
    keep &= (raw_x >= edges_x[0]) & (raw_x <= edges_x[-1])
    keep &= (raw_y >= edges_y[0]) & (raw_y <= edges_y[-1])
    counts, _, _ = np.histogram2d(raw_x[keep], raw_y[keep], bins=[edges_x, edges_y])
    noisy = _noisy_counts(counts.astype(np.int64), budget, relation, level, rng)
    return Release(
        value=(noisy.value, edges_x, edges_y),
        error=noisy.error,
        event=noisy.event,
        guarantee=noisy.guarantee,
        mechanism=noisy.mechanism,
        secure=noisy.secure,
    )
