"""Noisy binary search over a monotone, integer-valued loss (Blum, Ligett & Roth 2008).

The candidates are sorted indices ``0 .. J-1`` and the loss ``l(k)`` is non-increasing
in ``k``, integer-valued and changes by at most ``sensitivity`` between neighbouring
datasets (the shifted-inverse loss of Fang, Dong & Yi 2022 is the main example). The
search keeps ``lo < hi`` (starting at the two ends), queries the midpoint ``k``, and
moves ``hi`` to ``k`` when ``l(k) + Z <= t`` and ``lo`` to ``k`` otherwise; it returns
``hi``. The two ends are never queried (only indices strictly between ``lo`` and
``hi`` are), so they act as *sentinels*: index 0 stands for "too low for every
dataset" and index ``J-1`` for "high enough for every dataset".

Noise. The loss is an integer, so dpkit adds exact *discrete* Laplace noise (pure DP;
each query ``sensitivity/scale``-DP) or exact discrete Gaussian noise (zCDP; each query
``sensitivity^2 / (2 sigma^2)``-zCDP, Canonne, Kamath & Steinke 2020, Thm 4). Both are
sampled exactly by :mod:`dpkit.noise`; the comparison ``l(k) + Z <= t`` is an integer
comparison, so nothing is rounded.

Number of queries. The interval length ``d = hi - lo`` starts at ``J - 1`` and becomes
``ceil(d/2)`` or ``floor(d/2)`` per query, stopping at ``d = 1``; the longest path has
``ceil(log2(J - 1))`` queries (``J >= 3``; none for ``J <= 2``). This is what dpkit
charges. (The down-sensitivity post states ``ceil(log2 J) - 1`` queries and charges
``log2 J``; both undercount for some ``J``: ``J = 4`` needs 2 queries and ``J = 6``
needs 3 > log2 6. The tests check the count by enumerating every path.)

Accuracy (one-sided union bound). Call a query *bad* if it moves ``lo`` onto an index
with ``l = 0`` (needs ``Z >= t + 1``) or ``hi`` onto an index with ``l > 2t`` (needs
``Z <= t - l <= -(t + 1)``). For a given query only one of the two can happen (the loss
at the queried index is fixed by the path so far), and the noise is symmetric, so a
query is bad with probability at most ``P[Z >= t + 1]``; over at most ``T`` queries
the search goes wrong with probability at most ``T P[Z >= t + 1]`` -- half the
two-sided union bound of the post. If no query is bad, ``l(lo) > 0`` and
``l(hi) <= 2t`` throughout (both hold at the start when ``l(0) > 0`` and
``l(J-1) = 0``), so the result ``hi = lo + 1`` has ``l(hi) <= 2t`` and ``l(hi - 1) > 0``.

Tails used (exact or proven bounds, rounded up):

* discrete Laplace of scale ``s``: ``P[Z >= m] = q^m / (1 + q)``, ``q = e^{-1/s}``
  (sum of the geometric series of the pmf ``(1-q)/(1+q) q^|z|``);
* discrete Gaussian of parameter ``sigma``: ``P[Z >= m] <= e^{-m^2 / (2 sigma^2)}``
  (it is sub-Gaussian with variance proxy ``sigma^2``: CKS20, Cor. 9).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.accounting._math.rounding import fraction_down, fraction_up
from dpkit.accounting.events import (
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    Event,
    NoOpEvent,
    RepeatedEvent,
    pure_epsilon,
    zcdp_rho,
)
from dpkit.accounting.guarantees import ZCDP, PureDP
from dpkit.errors import DataError, InvalidParameter
from dpkit.mechanisms._base import DownSensitivityBound, Release
from dpkit.noise import discrete_gaussian, discrete_laplace
from dpkit.random import Random, RandomLike, as_random

__all__ = ["SearchPlan", "noisy_binary_search", "plan_search", "search_steps"]

Noise = Literal["laplace", "gaussian"]
#: Noise scales the exact integer samplers accept.
_MAX_SCALE = 2.0**40


def search_steps(size: int) -> int:
    """The largest number of noisy queries of a search over ``size`` candidates.

    ``ceil(log2(size - 1))`` for ``size >= 3``, else 0 (see the module docstring).
    """
    return 0 if size <= 2 else (size - 2).bit_length()


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """Everything about a noisy binary search that depends on public parameters only.

    Attributes
    ----------
    size:
        Number of candidates ``J``.
    steps:
        The largest number of noisy queries, ``ceil(log2(J - 1))``.
    noise:
        ``"laplace"`` (discrete Laplace, pure DP) or ``"gaussian"`` (discrete Gaussian, zCDP).
    scale:
        The discrete Laplace scale or the discrete Gaussian ``sigma``.
    threshold:
        The integer threshold ``t``: a query goes low when ``loss + noise <= t``.
    failure:
        An upper bound (rounded up) on the probability that some query is bad,
        ``steps * P[Z >= t + 1]``.
    event, guarantee:
        The privacy event and guarantee of one search.
    """

    size: int
    steps: int
    noise: Noise
    scale: float
    threshold: int
    failure: float
    event: Event
    guarantee: PureDP | ZCDP

    @property
    def confidence(self) -> float:
        """``1 - failure``, rounded down."""
        return fraction_down(1 - Fraction(self.failure))

    @property
    def removals(self) -> int:
        """``2 t``: with probability ``1 - failure`` the result has loss at most this."""
        return 2 * self.threshold


def _tail(noise: Noise, scale: float, m: int) -> float:
    """An upper bound on ``P[Z >= m]`` for ``m >= 1`` (see the module docstring), rounded up."""
    if noise == "laplace":
        q = math.exp(-1.0 / scale)
        log_tail = -m / scale - math.log1p(q)
    else:
        log_tail = -(m * m) / (2.0 * scale * scale)
    # exp/log errors are a few ulps: inflate by 1e-12 relative to stay conservative.
    return min(1.0, math.exp(log_tail) * (1.0 + 1e-12))


def _calibrate(
    noise: Noise, steps: int, epsilon: float | None, rho: float | None, sensitivity: int, owner: str
) -> tuple[float, Event]:
    """The smallest float scale whose ``steps``-fold event is within the budget."""
    if noise == "laplace":
        assert epsilon is not None
        scale = fraction_up_ratio(steps * sensitivity, epsilon)

        def make(s: float) -> Event:
            return RepeatedEvent(DiscreteLaplaceEvent(s, sensitivity), steps)

        def spent(e: Event) -> float:
            value = pure_epsilon(e)
            assert value is not None
            return value

        budget = epsilon
    else:
        assert rho is not None
        scale = math.sqrt(steps / (2.0 * rho)) * sensitivity

        def make(s: float) -> Event:
            return RepeatedEvent(DiscreteGaussianEvent(s, sensitivity), steps)

        def spent(e: Event) -> float:
            value = zcdp_rho(e)
            assert value is not None
            return value

        budget = rho
    if not scale <= _MAX_SCALE:
        raise InvalidParameter(
            f"{owner}: the budget is too small for {steps} noisy queries (noise scale "
            f"{scale:.3g} > 2^40); raise epsilon/rho or use a coarser grid."
        )
    scale = max(scale, 2.0**-40)
    event = make(scale)
    # Round the scale up until the exact (rounded-up) cost of the event is in budget.
    while spent(event) > budget:
        scale = math.nextafter(scale, math.inf)
        event = make(scale)
    return scale, event


def fraction_up_ratio(numerator: int, denominator: float) -> float:
    """``numerator / denominator`` exactly, rounded up."""
    return fraction_up(Fraction(numerator) / Fraction(denominator))


def _threshold_for(noise: Noise, scale: float, steps: int, beta: float) -> int:
    """The smallest integer ``t >= 0`` with ``steps * P[Z >= t + 1] <= beta``."""
    if steps == 0:
        return 0
    if noise == "laplace":
        q = math.exp(-1.0 / scale)
        m = scale * (math.log(steps / beta) - math.log1p(q))
    else:
        m = scale * math.sqrt(2.0 * max(math.log(steps / beta), 0.0))
    t = max(0, math.ceil(m) - 1)
    while steps * _tail(noise, scale, t + 1) > beta:  # float rounding: step up
        t += 1
    while t > 0 and steps * _tail(noise, scale, t) <= beta:
        t -= 1
    return t


def plan_search(
    size: int,
    *,
    epsilon: float | None = None,
    rho: float | None = None,
    threshold: int | None = None,
    beta: float = 0.05,
    sensitivity: int = 1,
    owner: str = "noisy_binary_search",
) -> SearchPlan:
    """Validate the public parameters of a search and derive its noise and threshold.

    Exactly one of ``epsilon`` (discrete Laplace, pure DP) and ``rho`` (discrete
    Gaussian, zCDP) must be given. With ``threshold=None`` the threshold is the
    smallest integer ``t`` with ``steps * P[Z >= t + 1] <= beta``; otherwise ``t`` is
    the given one and ``failure`` says how likely the search is to go wrong.
    """
    size = check.check_count(size, "size", owner)
    sensitivity = check.check_count(sensitivity, "sensitivity", owner)
    if (epsilon is None) == (rho is None):
        raise InvalidParameter(
            f"{owner}: give exactly one of epsilon= (pure DP, Laplace noise) and rho= "
            f"(zCDP, Gaussian noise); got epsilon={epsilon!r}, rho={rho!r}."
        )
    noise: Noise
    guarantee: PureDP | ZCDP
    if epsilon is not None:
        epsilon = check.check_epsilon(epsilon, owner)
        noise, guarantee = "laplace", PureDP(epsilon)
    else:
        rho = check.check_positive(rho, "rho", owner)
        noise, guarantee = "gaussian", ZCDP(rho)
    beta = check.check_probability(beta, "beta", owner, open_low=True, open_high=True)
    steps = search_steps(size)
    if steps == 0:
        t = 0 if threshold is None else check.check_count(threshold, "threshold", owner, minimum=0)
        return SearchPlan(size, 0, noise, 0.0, t, 0.0, NoOpEvent(), guarantee)
    scale, event = _calibrate(noise, steps, epsilon, rho, sensitivity, owner)
    if threshold is None:
        t = _threshold_for(noise, scale, steps, beta)
    else:
        t = check.check_count(threshold, "threshold", owner, minimum=0)
    failure = min(1.0, fraction_up(steps * Fraction(_tail(noise, scale, t + 1))))
    return SearchPlan(size, steps, noise, scale, t, failure, event, guarantee)


def _loss_value(value: Any, owner: str) -> float:
    """A loss value must be a non-negative integer or +inf (a data-independent sentinel)."""
    try:
        v = float(value)
    except (TypeError, ValueError) as err:
        raise DataError(f"{owner}: the loss must return numbers.") from err
    if not (v == math.inf or (v >= 0 and math.isfinite(v) and v == math.floor(v))):
        raise DataError(
            f"{owner}: the loss must return non-negative integers (or +inf for a candidate "
            "that is too low for every dataset)."
        )
    return v


def run_search(plan: SearchPlan, loss: Callable[[int], Any], rng: Random, owner: str) -> int:
    """Run the search of ``plan`` on ``loss`` (called only at the queried indices)."""
    lo, hi = 0, plan.size - 1
    t = plan.threshold
    while lo + 1 < hi:
        k = (lo + hi) // 2
        value = _loss_value(loss(k), owner)
        if plan.noise == "laplace":
            z = discrete_laplace(plan.scale, rng=rng)
        else:
            z = discrete_gaussian(plan.scale, rng=rng)
        # Draw the noise even for an infinite loss, so that the random stream does not
        # depend on the data; an infinite loss (data-independent) always goes up.
        if value != math.inf and int(value) + z <= t:
            hi = k
        else:
            lo = k
    return hi


def as_loss_function(
    loss: Callable[[int], Any] | npt.ArrayLike, size: int | None, owner: str
) -> tuple[Callable[[int], Any], int]:
    """A loss given as a callable of the index (with ``size``) or as a 1-D array."""
    if callable(loss):
        if size is None:
            raise InvalidParameter(
                f"{owner}: give size= (the number of candidates) with a callable loss."
            )
        n = check.check_count(size, "size", owner)
        return loss, n
    array = np.asarray(loss, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise DataError(
            f"{owner}: the loss array must be 1-D and non-empty; got shape {array.shape}."
        )
    if size is not None and check.check_count(size, "size", owner) != array.size:
        raise InvalidParameter.for_parameter("size", owner, f"the loss length {array.size}", size)
    return (lambda k: array[k]), int(array.size)


def noisy_binary_search(
    loss: Callable[[int], Any] | npt.ArrayLike,
    size: int | None = None,
    *,
    epsilon: float | None = None,
    rho: float | None = None,
    threshold: int | None = None,
    beta: float = 0.05,
    sensitivity: int = 1,
    rng: RandomLike | None = None,
) -> Release[int]:
    """Find, privately, an index where a non-increasing integer loss crosses a threshold.

    Parameters
    ----------
    loss:
        Either a callable ``loss(k)`` for an index ``k`` in ``0 .. size-1`` (called only
        at the at most ``ceil(log2(size-1))`` queried indices, so the grid can be huge),
        or a 1-D array of the losses. Contract: non-negative integers (``+inf`` only
        where it is so for *every* dataset), non-increasing in ``k``, and changing by at
        most ``sensitivity`` between neighbouring datasets.
    size:
        Number of candidates ``J`` (required with a callable).
    epsilon, rho:
        Exactly one: ``epsilon`` for pure DP with discrete Laplace noise, ``rho`` for
        zCDP with discrete Gaussian noise.
    threshold:
        The integer threshold ``t`` (the shift ``tau``); default: the smallest ``t``
        with ``steps * P[Z >= t + 1] <= beta``.
    beta:
        Failure probability used for the default threshold and the reported accuracy.
    sensitivity:
        Integer sensitivity of the loss (1 for a count of persons).
    rng:
        Random source (see :func:`dpkit.random.as_random`).

    Returns
    -------
    Release
        ``value`` is the index ``hi`` (an int in ``1 .. J-1``; ``J-1`` when ``J <= 2``);
        ``error`` is a :class:`~dpkit.mechanisms.DownSensitivityBound` with
        ``removals = 2t``: with probability at least ``confidence``,
        ``loss(value) <= 2t`` and ``loss(value - 1) > 0``.

    Sentinels
    ---------
    Index 0 and index ``J-1`` are never queried. The accuracy statement needs
    ``loss(0) > 0`` (index 0 is below every answer, e.g. ``-inf``) and
    ``loss(J-1) = 0`` (the last candidate is at or above every possible answer).

    Privacy
    -------
    ``epsilon``-DP (each of at most ``T = ceil(log2(J-1))`` queries is ``epsilon/T``-DP
    with discrete Laplace noise of scale ``T sensitivity / epsilon``, basic composition)
    or ``rho``-zCDP (discrete Gaussian with ``sigma = sensitivity sqrt(T / (2 rho))``,
    CKS20 Thm 4, and zCDP composition). Event: ``RepeatedEvent`` of
    ``DiscreteLaplaceEvent`` or ``DiscreteGaussianEvent`` ``T`` times (``NoOpEvent``
    when ``J <= 2``: nothing is queried).

    Accuracy
    --------
    With probability at least ``1 - T P[Z >= t + 1]`` every query is "good" and the
    invariants ``loss(lo) > 0``, ``loss(hi) <= 2t`` hold (module docstring; the
    down-sensitivity post, Thm 5, with a one-sided union bound).

    References
    ----------
    Blum, Ligett & Roth, STOC 2008; Fang, Dong & Yi, CCS 2022; "Beyond Local Sensitivity
    via Down Sensitivity", differentialprivacy.org, 2023.
    """
    owner = "noisy_binary_search"
    function, n = as_loss_function(loss, size, owner)
    plan = plan_search(
        n, epsilon=epsilon, rho=rho, threshold=threshold, beta=beta, sensitivity=sensitivity
    )
    random = as_random(rng)
    index = run_search(plan, function, random, owner)
    return Release(
        value=index,
        error=DownSensitivityBound(removals=plan.removals, confidence=plan.confidence),
        event=plan.event,
        guarantee=plan.guarantee,
        mechanism="NoisyBinarySearch",
        secure=random.secure,
    )
