"""Noise calibrated per size bucket, the bucket chosen from a bounded-noise count.

An alternative to Algorithm 1 with a *proven* per-group guarantee that improves with
the group's size. For every group ``i`` with count ``x_i``:

1. ``S_i = x_i + T_i`` with ``T_i`` truncated Laplace noise on ``[-A, A]``
   ((eps_1, delta_1)-DP; Geng, Ding, Guo & Kumar 2020). ``S_i`` is not released.
2. A noise level from ``S_i`` alone: ``sigma_j = sigma_0 g^j`` with the largest ``j >= 0``
   such that ``sigma_j <= kappa (S_i - A - 1)``, ``kappa = r sqrt(pi/2) (1 - 1e-9)``
   (``sigma_0 = 1/sqrt(2 rho)``, ``g`` the bucket ratio).
3. Release ``Y_i = x_i + N(0, sigma_j^2)`` (a fresh Gaussian measurement of ``x_i``).

Why it works (our derivation, every step a textbook theorem):

* Accuracy: ``S_i <= x_i + A``, so ``sigma_j < kappa x_i`` and
  ``E|Y_i - x_i| = sigma_j sqrt(2/pi) < r x_i`` whenever ``j >= 1``; at ``j = 0`` the
  error is ``sigma_0 sqrt(2/pi)``. The relative-error target holds for every count
  ``x > sigma_0 sqrt(2/pi) / r``.
* Privacy for one group (neighbours ``x`` and ``x +- 1``): ``S`` always lies in
  ``[x - 1 - A, x + 1 + A]`` (up to the output grid, < 1), so the level used is at
  least ``j(x) = level(x - 2 - A)`` whatever ``S`` is, and step 3 is the Gaussian
  mechanism with ``sigma >= sigma_j(x)``: ``rho_2(x) = 1 / (2 sigma_j(x)^2)``-zCDP,
  hence ``(eps_G(sigma_j(x), delta_2), delta_2)``-DP for every ``delta_2`` (Balle &
  Wang 2018, Thm 8). Adaptive composition with step 1 (Dwork, Rothblum & Vadhan
  2010; Dwork & Roth 2014, Thm 3.16, which only needs the second guarantee for every
  first output that can occur) gives the per-group guarantee
  ``(eps_1 + eps_G(sigma_j(x), delta_2), delta_1 + delta_2)``-DP, non-increasing in
  ``x`` and depending on ``x`` only, as the problem of Pujol & Desfontaines asks.
* For the whole release (any group): ``sigma_j >= sigma_0``, so the event is the
  truncated Laplace event composed with ``GaussianEvent(sigma_0)``.

Why bounded noise in step 1: with full-support noise the smallest level has positive
probability for every count. For a pure eps_1-DP step 1 (Laplace), ``(q/p)^(a-1) >=
e^-(a-1) eps_1`` gives ``D_a >= a rho_max - eps_1 + ln P(lowest level) / (a - 1)`` for
the pair (bucket, release), so ``D_a / a`` tends to the worst level's cost ``rho_max``
and no per-group zCDP bound below it can hold (see ``docs/groupwise.md``). Truncated
noise rules those levels out; the price is delta_1.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit import noise
from dpkit.accounting._math.gaussian import gaussian_epsilon
from dpkit.accounting._math.rounding import down, sum_up
from dpkit.accounting.events import ComposedEvent, Event, GaussianEvent
from dpkit.accounting.guarantees import ZCDP, ApproxDP
from dpkit.errors import InvalidParameter
from dpkit.groupwise._counts import check_counts
from dpkit.mechanisms._base import Mechanism, Release
from dpkit.mechanisms.gaussian import Gaussian
from dpkit.mechanisms.truncated_laplace import TruncatedLaplace
from dpkit.random import Random, RandomLike

__all__ = ["BucketedNoise", "bucketed_noise"]

# E|N(0, s^2)| = s sqrt(2/pi): a level s <= kappa x has expected error < r x. The
# factor 1 - 1e-9 absorbs the rounding of the float products (a few ulps).
_KAPPA_MARGIN = 1.0 - 1e-9


class BucketedNoise(Mechanism):
    """Per-group Gaussian noise whose scale is picked from a truncated-Laplace count.

    Parameters
    ----------
    rho:
        zCDP of the smallest noise level ``sigma_0 = 1/sqrt(2 rho)`` (rounded up).
    relative_error:
        ``r > 0``: ``E|Y_i - x_i| < r x_i`` for every count ``x_i > sigma_0 sqrt(2/pi)/r``.
    size_epsilon, size_delta:
        The (epsilon, delta)-DP of the bucketing count (truncated Laplace, "tight"
        calibration).
    growth:
        Ratio ``g > 1`` between consecutive noise levels.
    delta:
        The total delta at which :attr:`guarantee` and :meth:`group_guarantee` state
        their (epsilon, delta); must exceed ``size_delta``.

    Privacy
    -------
    Whole release: ``(size_epsilon + eps_G(sigma_0, delta - size_delta), delta)``-DP;
    event ``ComposedEvent((TruncatedLaplaceEvent, GaussianEvent(sigma_0)))``. Per group
    of size ``x``: :meth:`group_guarantee` (see the module docstring for the proof).

    Accuracy
    --------
    :meth:`expected_absolute_error` (exact, from the truncated Laplace law). No
    public error bound is attached to a release (the scale depends on the data).

    Examples
    --------
    >>> import dpkit as dp
    >>> m = dp.groupwise.BucketedNoise(rho=0.005, relative_error=0.3)
    >>> round(m.group_guarantee(10).epsilon, 3), round(m.group_guarantee(10**5).epsilon, 3)
    (0.497, 0.1)
    >>> m.expected_absolute_error(1000) < 0.3 * 1000
    True
    """

    def __init__(
        self,
        *,
        rho: float,
        relative_error: float,
        size_epsilon: float = 0.1,
        size_delta: float = 1e-9,
        growth: float = 2.0**0.25,
        delta: float = 1e-6,
    ) -> None:
        owner = "BucketedNoise"
        self.rho = check.check_positive(rho, "rho", owner)
        self.relative_error = check.check_positive(relative_error, "relative_error", owner)
        self.growth = check.check_positive(growth, "growth", owner)
        if self.growth <= 1.0:
            raise InvalidParameter.for_parameter("growth", owner, "a float > 1", growth)
        self.delta = check.check_delta(delta, owner, allow_zero=False)
        self._bucketing = TruncatedLaplace.calibrate(epsilon=size_epsilon, delta=size_delta)
        self.size_epsilon = self._bucketing.epsilon
        self.size_delta = self._bucketing.delta
        if self.delta <= self.size_delta:
            raise InvalidParameter.for_parameter(
                "delta", owner, f"a float in ({self.size_delta!r}, 1)", delta
            )
        self.sigma = Gaussian.calibrate(rho=self.rho).sigma
        self.bound = self._bucketing.bound
        self._kappa = self.relative_error * math.sqrt(math.pi / 2.0) * _KAPPA_MARGIN

    # -- the levels ---------------------------------------------------------------
    def level(self, size: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """The level ``j`` used for a bucketing count ``S`` (public function of ``S``)."""
        s = np.asarray(size, dtype=np.float64)
        ratio = self._kappa * (s - self.bound - 1.0) / self.sigma
        with np.errstate(divide="ignore", invalid="ignore"):
            j = np.floor(np.log(np.maximum(ratio, 1.0)) / math.log(self.growth))
        j = j.astype(np.int64)
        # float log/floor may land one level too high: step down until sigma_j fits
        too_high = self.sigma * self.growth**j > np.maximum(ratio, 1.0) * self.sigma
        return np.where(too_high & (j > 0), j - 1, j)

    def level_sigma(self, level: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """``sigma_j = sigma_0 g^j``."""
        return np.asarray(self.sigma * self.growth ** np.asarray(level, dtype=np.float64))

    def group_rho(self, count: int) -> float:
        """zCDP of the measurement step for a member of a group of size ``count``:
        ``1 / (2 sigma_j(x)^2)`` with ``j(x)`` the lowest level reachable from ``x`` or a
        neighbour. (The bucketing step adds ``(size_epsilon, size_delta)``-DP.)"""
        x = check.check_count(count, "count", "BucketedNoise.group_rho", minimum=0)
        lowest = float(self.level_sigma(self.level(x - 2.0 - self.bound)))
        # rounded up: a larger rho only overstates the cost
        return float(np.nextafter(1.0 / (2.0 * lowest * lowest), math.inf))

    def group_guarantee(self, count: int) -> ApproxDP:
        """The proven per-group guarantee at ``delta``:
        ``(size_epsilon + eps_G(sigma_j(x), delta - size_delta), delta)``-DP."""
        x = check.check_count(count, "count", "BucketedNoise.group_guarantee", minimum=0)
        lowest = float(self.level_sigma(self.level(x - 2.0 - self.bound)))
        gaussian = gaussian_epsilon(lowest, self._gaussian_delta())
        return ApproxDP(sum_up((self.size_epsilon, gaussian)), self.delta)

    def _gaussian_delta(self) -> float:
        # rounded down: a smaller delta_2 only overstates the Gaussian's epsilon
        return down(self.delta - self.size_delta)

    def expected_absolute_error(self, count: int) -> float:
        """``E|Y - x| = sqrt(2/pi) E[sigma_j(S)]`` with ``S = x + T``, exactly: the
        levels are piecewise constant in ``S`` and ``T``'s law has a closed-form CDF."""
        x = check.check_count(count, "count", "BucketedNoise.expected_absolute_error", minimum=0)
        a, b = self.bound, self._bucketing.scale
        lo, hi = int(self.level(x - a)), int(self.level(x + a))
        # level j >= 1 starts where kappa (S - A - 1) = sigma_j
        starts = [float(self.level_sigma(j)) / self._kappa + a + 1.0 for j in range(lo + 1, hi + 1)]
        edges = [x - a, *(min(max(s, x - a), x + a) for s in starts), x + a]

        def cdf(z: float) -> float:  # truncated Laplace on [-a, a], scale b
            mass = -math.expm1(-a / b)
            u = min(max(z, -a), a)
            if u < 0:
                return (math.exp(u / b) - math.exp(-a / b)) / (2 * mass)
            return 0.5 + (-math.expm1(-u / b)) / (2 * mass)

        total = 0.0
        for j, (left, right) in zip(range(lo, hi + 1), itertools.pairwise(edges), strict=True):
            total += float(self.level_sigma(j)) * (cdf(right - x) - cdf(left - x))
        return math.sqrt(2.0 / math.pi) * total

    # -- the mechanism ------------------------------------------------------------
    @property
    def event(self) -> Event:
        return ComposedEvent((self._bucketing.event, GaussianEvent(noise_multiplier=self.sigma)))

    @property
    def guarantee(self) -> ApproxDP | ZCDP:
        gaussian = gaussian_epsilon(self.sigma, self._gaussian_delta())
        return ApproxDP(sum_up((self.size_epsilon, gaussian)), self.delta)

    def release(
        self, value: Any, *, confidence: float = 0.95, rng: RandomLike | None = None
    ) -> Release[Any]:
        """Release noisy per-group counts (non-negative integers, scalar or array).

        ``confidence`` is accepted for the common interface and unused.
        """
        return super().release(value, confidence=confidence, rng=rng)

    def _check_value(self, value: Any) -> npt.NDArray[np.float64]:
        return check_counts(value, "BucketedNoise.release")

    def _sample(self, value: npt.NDArray[np.float64], rng: Random) -> Any:
        bucketing = self._bucketing
        sizes = np.asarray(
            noise.truncated_laplace(
                value,
                scale=bucketing.scale,
                bound=bucketing.bound,
                granularity=bucketing.granularity,
                rng=rng,
            ),
            dtype=np.float64,
        )
        levels = self.level(sizes)
        out = np.empty_like(value)
        # one exact Gaussian draw per group, at its level's scale (dpkit.noise)
        for j in np.unique(levels):
            chosen = levels == j
            sigma = float(self.level_sigma(j))
            out[chosen] = noise.gaussian(value[chosen], sigma=sigma, rng=rng)
        return out

    def _repr_fields(self) -> tuple[str, ...]:
        return ("rho", "relative_error", "size_epsilon", "size_delta", "growth", "delta")


def bucketed_noise(
    counts: npt.ArrayLike,
    *,
    rho: float,
    relative_error: float,
    rng: RandomLike | None = None,
) -> Release[Any]:
    """Release per-group counts with :class:`BucketedNoise` (default bucketing parameters)."""
    return BucketedNoise(rho=rho, relative_error=relative_error).release(counts, rng=rng)
