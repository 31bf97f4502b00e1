"""Count, sum, mean, variance and standard deviation of a 1-D array, privately.

The shapes follow :func:`dpkit.quantile` (``bounds=``, ``epsilon=``, ``neighbouring=``,
``confidence=``, ``rng=``) and :func:`dpkit.max` (``epsilon=`` or ``rho=``). Every
statistic is computed exactly on the fixed-point grid of ``dpkit.tools._fixed`` and
released with discrete Laplace (``epsilon=``) or discrete Gaussian (``rho=``) noise.

Neighbouring relations
----------------------
``"add_remove"`` (default): one record added or removed; the number of records is
private, so a mean divides a noisy sum by a noisy count. ``"replace"``: one record's
value replaced by another; the number of non-missing records is public (as for
``dp.quantile(neighbouring="replace")`` and diffprivlib's tools, which read it from the
data), so a mean, variance or standard deviation is one noisy release with the
sensitivity of the statistic itself.

Budget splits (add/remove)
--------------------------
The mean spends half on the count and half on the centred sum ``sum(x - mid)``: to
first order its error variance is ``(Var T + m^2 Var N) / n^2`` with ``m`` the centred
mean, ``|m| <= r = (upper - lower)/2``; the worst case ``|m| = r`` weighs both noises
the same (sensitivities ``r`` and 1), and the equal split minimises that worst case
without spending anything to learn ``m``. The variance spends a third each on the
count, the centred sum and the centred sum of squares ``sum((x - mid)^2 - r^2/2)``
(as the Session does, docs/analytics.md): the three terms' worst-case weights are
within a factor of 4 of each other, where an equal split is within 25% of the
worst-case optimum and again needs nothing private.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpkit.accounting.events import ComposedEvent, Event
from dpkit.errors import InvalidParameter
from dpkit.mechanisms._base import Release
from dpkit.random import Random, RandomLike, as_random
from dpkit.tools import _checks
from dpkit.tools._bound import ClippedErrorBound
from dpkit.tools._checks import Budget, Neighbouring
from dpkit.tools._fixed import Noisy, Snapped, output_step, release, snap

__all__ = ["count", "mean", "std", "sum", "var"]

#: Grid resolution (bits below the range) of sums and means; variances use 30 bits so
#: that squares are summed exactly in int64 (dpkit/tools/_fixed.py).
_SUM_BITS = 40
_SQUARE_BITS = 30


def _name(budget: Budget) -> str:
    return "DiscreteLaplace" if budget.kind == "epsilon" else "DiscreteGaussian"


def _prepare(
    data: object,
    bounds: object,
    epsilon: object,
    rho: object,
    neighbouring: object,
    confidence: object,
    owner: str,
) -> tuple[npt.NDArray[np.float64], tuple[float, float], Budget, Neighbouring, float]:
    budget = _checks.check_budget(epsilon, rho, owner)
    pair = _checks.check_bounds(bounds, owner)
    relation = _checks.check_neighbouring(neighbouring, owner)
    level = _checks.check_confidence(confidence, owner)
    values = _checks.numeric_values(data, owner)
    return values, pair, budget, relation, level


# ---------------------------------------------------------------------- count


def count(
    data: npt.ArrayLike,
    *,
    epsilon: float | None = None,
    rho: float | None = None,
    neighbouring: Neighbouring = "add_remove",
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> Release[int]:
    """Private number of non-missing records (``dp.count``).

    Parameters
    ----------
    data:
        A 1-D array, list or pandas Series of any dtype. Missing values (NaN, None,
        pandas NA/NaT) are not counted, as pandas' ``Series.count()``.
    epsilon, rho:
        Exactly one: ``epsilon`` for ``epsilon``-DP (discrete Laplace noise of scale
        ``1/epsilon``), ``rho`` for ``rho``-zCDP (discrete Gaussian noise,
        ``sigma = 1/sqrt(2 rho)``).
    neighbouring:
        ``"add_remove"`` only: under ``"replace"`` the number of records is public and
        needs no noise (use ``len(data)``).
    confidence:
        Confidence of the interval, in (0, 1).
    rng:
        Random source; None for the secure default.

    Returns
    -------
    Release
        ``value``: an int >= 0 (negative noisy counts are clamped to 0, post-processing
        that never moves the value away from the true count); ``error``: a
        :class:`~dpkit.tools.ClippedErrorBound` (range ``[0, inf)``).

    Privacy
    -------
    ``epsilon``-DP or ``rho``-zCDP under adding or removing one record: the count has
    sensitivity 1 (Ghosh, Roughgarden & Sundararajan 2009; Canonne, Kamath & Steinke
    2020). Event: ``DiscreteLaplaceEvent(1/epsilon, 1)`` or ``DiscreteGaussianEvent``.

    Accuracy
    --------
    ``|value - n| <= half_width`` with probability ``>= confidence``, ``half_width``
    the exact quantile of the integer noise.

    Examples
    --------
    >>> import dpkit as dp
    >>> from dpkit.testing import seeded
    >>> dp.count([3.0, float("nan"), 5.0], epsilon=1.0, rng=seeded(0)).error.half_width
    3.0
    """
    owner = "dp.count"
    budget = _checks.check_budget(epsilon, rho, owner)
    relation = _checks.check_neighbouring(neighbouring, owner)
    if relation == "replace":
        raise InvalidParameter(
            f"{owner}: under neighbouring='replace' the number of records is public and "
            "needs no noise; use len(data), or neighbouring='add_remove' to protect it."
        )
    level = _checks.check_confidence(confidence, owner)
    n = _checks.present_count(data, owner)
    random = as_random(rng)
    noisy = release(n, 1, budget, budget.total, level, random, integer=True)
    return Release(
        value=max(0, round(noisy.value)),
        error=ClippedErrorBound(noisy.standard_deviation, noisy.half_width, level, 0.0, math.inf),
        event=noisy.event,
        guarantee=budget.guarantee,
        mechanism=_name(budget),
        secure=random.secure,
    )


# ---------------------------------------------------------------------- sum


def sum(  # dp.sum shadows the builtin here, as dp.max and dp.min
    data: npt.ArrayLike,
    *,
    bounds: tuple[float, float] | None = None,
    epsilon: float | None = None,
    rho: float | None = None,
    neighbouring: Neighbouring = "add_remove",
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> Release[float]:
    """Private sum of the values clamped to ``bounds`` (``dp.sum``).

    Parameters
    ----------
    data:
        1-D numbers (array, list or pandas Series). NaN is dropped; values outside
        ``bounds`` (``+-inf`` included) are clamped to them. Empty data gets a private
        answer like any other.
    bounds:
        Required public ``(lower, upper)``, finite, ``lower < upper``.
    epsilon, rho:
        Exactly one (pure DP with discrete Laplace noise, or zCDP with discrete
        Gaussian noise).
    neighbouring:
        ``"add_remove"`` (default): sensitivity ``max(|lower|, |upper|)``;
        ``"replace"``: sensitivity ``upper - lower`` (the count is public).
    confidence:
        Confidence of the interval.
    rng:
        Random source.

    Returns
    -------
    Release
        ``value``: float, clamped to the public range of the sum (``>= 0`` when
        ``lower >= 0``, ``<= 0`` when ``upper <= 0``, within ``[n lower, n upper]``
        under replace); ``error``: :class:`~dpkit.tools.ClippedErrorBound`.

    Privacy
    -------
    ``epsilon``-DP or ``rho``-zCDP under the chosen relation. The values are snapped to
    a grid of step ``2^-40`` of the range and summed exactly, so the sensitivity is
    exact (no floating-point sum; Casacuberta et al. 2022); discrete noise of that
    sensitivity on a ``2^-30``-noise-scale output grid (``dpkit.tools._fixed``).

    Accuracy
    --------
    With probability ``>= confidence``, ``|value - sum| <= half_width`` for the sum of
    the clamped values snapped to the grid; snapping moves each value by at most one
    grid step (``2^-40`` of the range), which ``half_width`` includes under replace
    (``n`` public) and which is below ``n 2^-40`` ranges under add/remove.
    """
    owner = "dp.sum"
    values, pair, budget, relation, level = _prepare(
        data, bounds, epsilon, rho, neighbouring, confidence, owner
    )
    grid = snap(values, pair, _SUM_BITS, squares=False)
    exact = grid.n * grid.lower + grid.step * grid.sum
    top = grid.lower + grid.step * grid.top
    random = as_random(rng)
    if relation == "add_remove":
        sensitivity = max(abs(grid.lower), abs(top))
        noisy = release(exact, sensitivity, budget, budget.total, level, random)
        low = 0.0 if pair[0] >= 0 else -math.inf
        high = 0.0 if pair[1] <= 0 else math.inf
        extra = 0.0
    else:
        noisy = release(exact, grid.step * grid.top, budget, budget.total, level, random)
        low, high = grid.n * pair[0], grid.n * pair[1]
        extra = grid.n * float(grid.step)
    value = min(max(noisy.value, low), high)
    return Release(
        value=value,
        error=ClippedErrorBound(
            noisy.standard_deviation, noisy.half_width + extra, level, low, high
        ),
        event=noisy.event,
        guarantee=budget.guarantee,
        mechanism=_name(budget),
        secure=random.secure,
    )


# ---------------------------------------------------------------------- mean


def _ratio_range(numerator: tuple[float, float], count: tuple[float, float]) -> tuple[float, float]:
    """Range of ``s / n`` over the box ``s in numerator``, ``n in count`` (``n > 0``)."""
    corners = [s / n for s in numerator for n in count]
    return min(corners), max(corners)


def _count_range(noisy_count: Noisy) -> tuple[float, float] | None:
    """The count's interval as integers >= 1, or None when it reaches 0."""
    low, high = noisy_count.interval()
    if low <= 0:
        return None
    return max(1.0, math.ceil(low)), math.floor(high)


def _clipped(
    value: float, low: float, high: float, public: tuple[float, float]
) -> tuple[float, float, float]:
    """Cut ``[low, high]`` to ``public``, and the symmetric half-width around ``value``."""
    low, high = max(low, public[0]), min(high, public[1])
    # NaN: an interval overflowed (inf - inf, near the float limits); say the range.
    if not low <= high:  # only on the failure event; keep a valid, non-empty statement
        low, high = public
    return low, high, max(value - low, high - value, 0.0)


def mean(
    data: npt.ArrayLike,
    *,
    bounds: tuple[float, float] | None = None,
    epsilon: float | None = None,
    rho: float | None = None,
    neighbouring: Neighbouring = "add_remove",
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> Release[float]:
    """Private mean of the values clamped to ``bounds`` (``dp.mean``).

    Parameters
    ----------
    data, bounds, epsilon, rho, confidence, rng:
        As for :func:`sum` (``bounds`` required; NaN dropped, infinities clamped).
    neighbouring:
        ``"add_remove"`` (default): noisy centred sum / noisy count, half the budget
        each (see the module docstring for why). ``"replace"``: the count ``n`` is
        public and the mean is released with sensitivity ``(upper - lower)/n``, as
        diffprivlib's ``tools.mean``.

    Returns
    -------
    Release
        ``value``: float in ``[lower, upper]``; ``error``: a
        :class:`~dpkit.tools.ClippedErrorBound` whose ``interval(value)`` is the
        rigorous interval. When the noisy count's interval reaches 0 (too few records
        for a ratio; always for empty data) ``error.uninformative`` is True and the
        interval is the whole ``bounds``.

    Privacy
    -------
    ``epsilon``-DP or ``rho``-zCDP under the chosen relation (basic composition of the
    two releases under add/remove). Event: ``ComposedEvent`` of the count's and the
    sum's events (add/remove) or one discrete-noise event (replace).

    Accuracy
    --------
    With probability ``>= confidence`` the mean of the clamped values lies in
    ``error.interval(value)``. Add/remove: each component's interval holds at
    ``1 - (1 - confidence)/2`` (union bound), and the interval is the range of
    ``mid + s/n`` over both intervals (``n >= 1``), widened by the grid step and cut to
    ``bounds``. Replace: the noise interval plus the grid step, cut to ``bounds``.
    """
    owner = "dp.mean"
    values, pair, budget, relation, level = _prepare(
        data, bounds, epsilon, rho, neighbouring, confidence, owner
    )
    grid = snap(values, pair, _SUM_BITS, squares=False)
    random = as_random(rng)
    g = float(grid.step)
    centre = grid.lower + grid.step * grid.centre
    if relation == "replace":
        n = max(grid.n, 1)
        exact = centre + grid.step * Fraction(grid.centred_sum, n)
        noisy = release(exact, grid.step * grid.top / n, budget, budget.total, level, random)
        value = min(max(noisy.value, pair[0]), pair[1])
        low, high = noisy.interval()
        low, high, half = _clipped(value, low - g, high + g, pair)
        sd = noisy.standard_deviation
        event = noisy.event
        empty = grid.n == 0
    else:
        share = budget.split(2)
        each = 1.0 - (1.0 - level) / 2
        output_step(grid.step * grid.radius, budget, share)  # refused before any noise
        noisy_n = release(grid.n, 1, budget, share, each, random, integer=True)
        centred = grid.step * grid.centred_sum
        noisy_s = release(centred, grid.step * grid.radius, budget, share, each, random)
        n_hat = max(noisy_n.value, 1.0)
        m = noisy_s.value / n_hat
        value = min(max(float(centre) + m, pair[0]), pair[1])
        sd = math.hypot(noisy_s.standard_deviation, m * noisy_n.standard_deviation) / n_hat
        counts = _count_range(noisy_n)
        empty = counts is None
        if counts is None:
            low, high = pair
        else:
            low, high = _ratio_range(noisy_s.interval(), counts)
            low, high = float(centre) + low - g, float(centre) + high + g
        low, high, half = _clipped(value, low, high, pair)
        event = ComposedEvent((noisy_n.event, noisy_s.event))
    return Release(
        value=value,
        error=ClippedErrorBound(min(sd, pair[1] - pair[0]), half, level, low, high, empty),
        event=event,
        guarantee=budget.guarantee,
        mechanism=_name(budget),
        secure=random.secure,
    )


# ---------------------------------------------------------------------- var, std


def _variance(
    data: object,
    bounds: object,
    epsilon: object,
    rho: object,
    neighbouring: object,
    confidence: object,
    rng: RandomLike | None,
    owner: str,
) -> tuple[float, ClippedErrorBound, Event, Budget, bool, float]:
    values, pair, budget, relation, level = _prepare(
        data, bounds, epsilon, rho, neighbouring, confidence, owner
    )
    grid = snap(values, pair, _SQUARE_BITS, squares=True)
    random = as_random(rng)
    r_pub = (pair[1] - pair[0]) / 2
    public = (0.0, r_pub * r_pub)
    g = float(grid.step)
    # Snapping moves each value by at most g: the mean square about mid by at most
    # g (2r + g), the squared mean by as much.
    slack = 2 * g * (2 * r_pub + g)
    assert grid.centred_squares is not None
    if relation == "replace":
        noisy = _variance_replace(grid, budget, level, random)
        value = min(max(noisy.value, public[0]), public[1])
        low, high = noisy.interval()
        low, high, half = _clipped(value, low - slack, high + slack, public)
        bound = ClippedErrorBound(
            min(noisy.standard_deviation, public[1]), half, level, low, high, grid.n == 0
        )
        return value, bound, noisy.event, budget, random.secure, r_pub
    share = budget.split(3)
    each = 1.0 - (1.0 - level) / 3
    radius = grid.step * grid.radius
    q0 = radius * radius / 2
    for sensitivity in (radius, q0):  # refused before any noise
        output_step(sensitivity, budget, share)
    noisy_n = release(grid.n, 1, budget, share, each, random, integer=True)
    noisy_1 = release(grid.step * grid.centred_sum, radius, budget, share, each, random)
    squares = grid.step * grid.step * grid.centred_squares - grid.n * q0
    noisy_2 = release(squares, q0, budget, share, each, random)
    n_hat = max(noisy_n.value, 1.0)
    a = noisy_1.value / n_hat
    b = noisy_2.value / n_hat + float(q0)
    value = min(max(b - a * a, public[0]), public[1])
    sd = (
        math.sqrt(
            noisy_2.standard_deviation**2
            + (2 * a * noisy_1.standard_deviation) ** 2
            + ((2 * a * a - b + float(q0)) * noisy_n.standard_deviation) ** 2
        )
        / n_hat
    )
    counts = _count_range(noisy_n)
    if counts is None:
        low, high = public
    else:
        a_low, a_high = _ratio_range(noisy_1.interval(), counts)
        b_low, b_high = _ratio_range(noisy_2.interval(), counts)
        squares_high = max(a_low * a_low, a_high * a_high)
        squares_low = 0.0 if a_low <= 0 <= a_high else min(a_low * a_low, a_high * a_high)
        low = b_low + float(q0) - squares_high - slack
        high = b_high + float(q0) - squares_low + slack
    low, high, half = _clipped(value, low, high, public)
    bound = ClippedErrorBound(min(sd, public[1]), half, level, low, high, counts is None)
    event = ComposedEvent((noisy_n.event, noisy_1.event, noisy_2.event))
    return value, bound, event, budget, random.secure, r_pub


def _variance_replace(grid: Snapped, budget: Budget, level: float, random: Random) -> Noisy:
    """The exact variance of the snapped values, one release of sensitivity
    ``(n - 1)/n^2 (gM)^2`` (replacing one value in ``[0, w]`` moves the population
    variance by at most ``w^2 (n-1)/n^2``; diffprivlib's ``tools.var`` uses the same)."""
    assert grid.centred_squares is not None
    n = grid.n
    width2 = (grid.step * grid.top) ** 2
    if n >= 2:
        mean_y = Fraction(grid.centred_sum, n)
        exact = grid.step * grid.step * (Fraction(grid.centred_squares, n) - mean_y * mean_y)
        sensitivity = width2 * (n - 1) / (n * n)
    else:  # the variance of 0 or 1 value is 0: any positive sensitivity is valid
        exact = Fraction(0)
        sensitivity = width2 / 4
    return release(exact, sensitivity, budget, budget.total, level, random)


def var(
    data: npt.ArrayLike,
    *,
    bounds: tuple[float, float] | None = None,
    epsilon: float | None = None,
    rho: float | None = None,
    neighbouring: Neighbouring = "add_remove",
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> Release[float]:
    """Private population variance (``ddof=0``) of the values clamped to ``bounds`` (``dp.var``).

    Parameters
    ----------
    data, bounds, epsilon, rho, confidence, rng:
        As for :func:`sum` (``bounds`` required; NaN dropped, infinities clamped).
    neighbouring:
        ``"add_remove"`` (default): noisy count, centred sum and centred sum of
        squares, a third of the budget each, combined as ``E[y^2] - E[y]^2`` and
        clamped to ``[0, ((upper - lower)/2)^2]`` (post-processing). ``"replace"``
        (``n`` public): the exact variance released once with sensitivity
        ``(upper - lower)^2 (n - 1)/n^2``, as diffprivlib's ``tools.var``.

    Returns
    -------
    Release
        ``value``: float in ``[0, ((upper - lower)/2)^2]``; ``error``: a
        :class:`~dpkit.tools.ClippedErrorBound` (``uninformative`` as for
        :func:`mean`).

    Privacy
    -------
    ``epsilon``-DP or ``rho``-zCDP under the chosen relation (basic composition of
    three releases under add/remove).

    Accuracy
    --------
    With probability ``>= confidence`` the variance of the clamped values lies in
    ``error.interval(value)``: interval arithmetic over the three components'
    intervals (each at ``1 - (1 - confidence)/3``, union bound; ``n >= 1``), widened
    for the grid snapping and cut to the public range.
    """
    value, bound, event, budget, secure, _ = _variance(
        data, bounds, epsilon, rho, neighbouring, confidence, rng, "dp.var"
    )
    return Release(
        value=value,
        error=bound,
        event=event,
        guarantee=budget.guarantee,
        mechanism=_name(budget),
        secure=secure,
    )


def std(
    data: npt.ArrayLike,
    *,
    bounds: tuple[float, float] | None = None,
    epsilon: float | None = None,
    rho: float | None = None,
    neighbouring: Neighbouring = "add_remove",
    confidence: float = 0.95,
    rng: RandomLike | None = None,
) -> Release[float]:
    """Private population standard deviation: the square root of :func:`var` (``dp.std``).

    Same parameters, privacy and relations as :func:`var` (the square root is
    post-processing). ``value`` lies in ``[0, (upper - lower)/2]`` and
    ``error.interval(value)`` is the square root of the variance's interval, which
    holds with the same probability (the root is increasing).
    """
    value, bound, event, budget, secure, r_pub = _variance(
        data, bounds, epsilon, rho, neighbouring, confidence, rng, "dp.std"
    )
    root = math.sqrt(value)
    low, high = math.sqrt(max(bound.lower, 0.0)), math.sqrt(max(bound.upper, 0.0))
    low, high, half = _clipped(root, low, high, (0.0, r_pub))
    sd = bound.standard_deviation / (2 * root) if root > 0 else r_pub
    return Release(
        value=root,
        error=ClippedErrorBound(
            min(sd, r_pub), half, bound.confidence, low, high, bound.uninformative
        ),
        event=event,
        guarantee=budget.guarantee,
        mechanism=_name(budget),
        secure=secure,
    )
