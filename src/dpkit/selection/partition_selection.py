"""Partition selection as in Google's DP libraries: which keys (partitions) to release.

A partition (a group-by key) is released only if enough privacy units contribute to
it; each unit contributes to at most ``k = max_partitions_contributed`` partitions.
Google's libraries (C++ ``partition-selection.h``, Go, Java ``PreAggSelectPartition``,
PipelineDP) offer three strategies, each ``(epsilon, delta)``-DP for the set of kept
partitions under add/remove-one-unit neighbours. :class:`PartitionSelection` computes
each strategy's keep probability ``p(n)`` of a partition with ``n`` units, and the
threshold and noise of the thresholding strategies, as the paper and the library
define them:

* ``"truncated_geometric"`` -- the optimal partition selection of Desfontaines, Voss,
  Gipson & Mandayam 2022 (PoPETs 2022(1), "Differentially private partition
  selection", Thm 1 / Def. 5): with ``e = epsilon / k`` and ``d = 1 - (1 - delta)^(1/k)``,
  ``p(0) = 0`` and ``p(n) = min(e^e p(n-1) + d, 1 - e^-e (1 - p(n-1) - d), 1)``, the
  largest keep probabilities that satisfy the per-partition (``e``, ``d``)-DP
  constraints. Closed form (their Thm 1; the libraries' formula): ``p(n) = d (e^(n e)
  - 1) / (e^e - 1)`` up to the crossover ``n1 = 1 + floor(ln(1 + tanh(e/2) (1/d - 1))
  / e)``, then ``1 - p(n1 + m) = e^(-m e) (1 - p(n1)) - d (1 - e^(-m e)) / (e^e - 1)``
  up to ``n2 = n1 + floor(ln(1 + (e^e - 1) (1 - p(n1)) / d) / e)``, and 1 beyond.
  Its output law is close to thresholding with truncated geometric noise (their Thm 5).
* ``"laplace"`` -- keep when ``n + Lap(b) > T`` with ``b = k / epsilon`` (the noisy
  counts of all partitions, L1 sensitivity ``k``, are ``epsilon``-DP) and ``T`` such
  that a partition with one unit is kept with probability ``d`` (the same ``d``):
  ``T = 1 - b ln(2 d)`` for ``d <= 1/2``, ``T = 1 + b ln(2 (1 - d))`` otherwise.
* ``"gaussian"`` -- keep when ``n + N(0, sigma^2) > T``; half of ``delta`` pays for the
  noise (``sigma`` the analytic Gaussian calibration of Balle & Wang 2018 for
  (``epsilon``, ``delta / 2``) and L2 sensitivity ``sqrt(k)``), the other half for the
  partitions only one neighbour has: ``T = 1 - sigma Phi^-1(d')`` with ``d' = 1 - (1
  - delta / 2)^(1/k)``.

Why ``d = 1 - (1 - delta)^(1/k)`` suffices for ``k`` partitions: the ``k`` partitions a
unit touches are decided independently, each (``epsilon / k``, ``d``)-DP (truncated
geometric) or kept with probability at most ``d`` when present on one side only
(thresholding), and ``k`` independent (``e``, ``d``)-DP decisions compose to
(``k e``, ``1 - (1 - d)^k``)-DP (Kairouz, Oh & Viswanath 2015, Thm 3.3, its ``i = 0``
term).

``pre_threshold = m`` (Google's option) drops partitions with fewer than ``m`` units
before the strategy runs on ``n - m + 1`` units; the guarantee is unchanged.

Differences from the libraries, all on the conservative side: the Laplace branch is
chosen on ``d`` (the C++ code tests the unadjusted ``delta > 0.5``, which for ``k > 1``
and ``delta > 1/2 > d`` keeps one-unit partitions with probability ``1 / (4 (1 - d))
> d``); the Gaussian ``sigma`` is dpkit's analytic calibration, rounded up, where the
libraries bisect to a relative 1e-3 (so dpkit's threshold can be lower by up to that
much); thresholds are rounded up.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.accounting._math.gaussian import gaussian_sigma_analytic
from dpkit.accounting._math.rounding import up
from dpkit.accounting.guarantees import ApproxDP
from dpkit.errors import InvalidParameter

__all__ = ["PartitionSelection", "laplace_partition_delta"]

Strategy = Literal["truncated_geometric", "laplace", "gaussian"]
_STRATEGIES: tuple[Strategy, ...] = ("truncated_geometric", "laplace", "gaussian")
FloatArray = npt.NDArray[np.float64]


def _adjusted_delta(delta: float, k: int) -> float:
    """``1 - (1 - delta)^(1/k)``, the per-partition delta (computed stably)."""
    return 1.0 if delta == 1.0 else -math.expm1(math.log1p(-delta) / k)


def _laplace_threshold(epsilon: float, delta: float, k: int) -> float:
    """``T`` with ``P(1 + Lap(k / epsilon) > T) = 1 - (1 - delta)^(1/k)``, rounded up."""
    b = k / epsilon
    d = _adjusted_delta(delta, k)
    threshold = 1.0 - b * math.log(2.0 * d) if d <= 0.5 else 1.0 + b * math.log(2.0 * (1.0 - d))
    return up(threshold, 4)


class PartitionSelection:
    """Which partitions to release: Google's three pre-aggregation strategies.

    Parameters
    ----------
    strategy:
        ``"truncated_geometric"`` (optimal; Google's default "magic" partition
        selection), ``"laplace"`` or ``"gaussian"`` thresholding.
    epsilon:
        Privacy parameter, a float in (0, inf).
    delta:
        Privacy parameter, a float in (0, 1).
    max_partitions_contributed:
        ``k``, the most partitions one privacy unit contributes to (an int >= 1).
    pre_threshold:
        Partitions with fewer units are never kept (an int >= 1; 1 = no pre-threshold).

    Privacy
    -------
    Releasing the set of kept partitions -- and, for the thresholding strategies, their
    noisy counts -- is (``epsilon``, ``delta``)-DP under add/remove-one-unit neighbours
    when each unit contributes to at most ``k`` partitions (module docstring;
    Desfontaines et al. 2022, Thm 1; Kairouz, Oh & Viswanath 2015, Thm 3.3).

    Examples
    --------
    >>> selection = PartitionSelection("truncated_geometric", epsilon=0.5, delta=0.02)
    >>> round(selection.keep_probability(6), 11)  # Google's C++ test value
    0.58840484458
    >>> round(PartitionSelection("laplace", epsilon=0.5, delta=0.02).threshold, 4)
    7.4378
    """

    def __init__(
        self,
        strategy: Strategy = "truncated_geometric",
        *,
        epsilon: float,
        delta: float,
        max_partitions_contributed: int = 1,
        pre_threshold: int = 1,
    ) -> None:
        owner = "PartitionSelection"
        if strategy not in _STRATEGIES:
            raise InvalidParameter.for_parameter(
                "strategy", owner, "one of " + ", ".join(map(repr, _STRATEGIES)), strategy
            )
        self.strategy: Strategy = strategy
        self.epsilon = check.check_epsilon(epsilon, owner)
        self.delta = check.check_delta(delta, owner, allow_zero=False)
        k = check.check_count(max_partitions_contributed, "max_partitions_contributed", owner)
        self.max_partitions_contributed = k
        self.pre_threshold = check.check_count(pre_threshold, "pre_threshold", owner)
        #: Per-partition epsilon of the truncated geometric strategy (``epsilon / k``).
        self.adjusted_epsilon = self.epsilon / k
        #: Probability of keeping a partition with one unit, ``1 - (1 - delta')^(1/k)``
        #: with ``delta' = delta`` (``delta / 2`` for the Gaussian strategy).
        share = self.delta / 2.0 if strategy == "gaussian" else self.delta
        if share == 0.0:
            raise InvalidParameter.for_parameter(
                "delta", owner, "a float in (0, 1) whose half is not 0", delta
            )
        self.adjusted_delta = _adjusted_delta(share, k)
        #: Noise scale: Laplace ``b`` or Gaussian ``sigma`` (None for truncated geometric).
        self.scale: float | None = None
        #: Keep when ``n + noise > threshold`` (None for truncated geometric).
        self.threshold: float | None = None
        if strategy == "laplace":
            self.scale = up(k / self.epsilon, 1)
            self.threshold = _laplace_threshold(self.epsilon, self.delta, k)
        elif strategy == "gaussian":
            self.scale = gaussian_sigma_analytic(self.epsilon, self.delta / 2.0, math.sqrt(k))
            from scipy import special  # deferred: SciPy is slow to import

            quantile = float(special.ndtri(self.adjusted_delta))
            self.threshold = up(1.0 - self.scale * quantile, 4)
        if self.threshold is not None:
            self.threshold += self.pre_threshold - 1
        else:
            self._set_crossovers()

    @property
    def guarantee(self) -> ApproxDP:
        """(``epsilon``, ``delta``)-DP for the set of kept partitions."""
        return ApproxDP(self.epsilon, self.delta)

    # ------------------------------------------------------------ truncated geometric

    def _set_crossovers(self) -> None:
        e, d = self.adjusted_epsilon, self.adjusted_delta
        shift = self.pre_threshold - 1
        # Thm 1 of Desfontaines et al. 2022, as the libraries compute it.
        n1 = 1 + math.floor(math.log1p(math.tanh(e / 2) * (1 / d - 1)) / e) + shift
        self.first_crossover = n1
        rest = 1.0 - self._geometric_rise(n1)
        self.second_crossover = n1 + math.floor(math.log1p(math.expm1(e) / d * rest) / e)

    def _geometric_rise(self, n: float) -> float:
        e, d = self.adjusted_epsilon, self.adjusted_delta
        return math.expm1((n - self.pre_threshold + 1) * e) / math.expm1(e) * d

    def _geometric(self, n: float) -> float:
        if n < self.pre_threshold:
            return 0.0
        if n <= self.first_crossover:
            return self._geometric_rise(n)
        if n <= self.second_crossover:
            e, d = self.adjusted_epsilon, self.adjusted_delta
            m = n - self.first_crossover
            p1 = self._geometric_rise(self.first_crossover)
            return min(1.0, p1 - (1.0 - p1 + d / math.expm1(e)) * math.expm1(-m * e))
        return 1.0

    # ----------------------------------------------------------------------- public

    def keep_probability(self, n: float) -> float:
        """Probability that a partition with ``n`` privacy units is kept.

        Truncated geometric: the closed form of Desfontaines et al. 2022, Thm 1 (the
        libraries' ``ProbabilityOfKeep``); thresholding: ``P(n + noise > threshold)``.
        """
        n = check.check_nonnegative(n, "n", "PartitionSelection.keep_probability")
        if self.threshold is None:
            return self._geometric(n)
        if n < self.pre_threshold:
            return 0.0
        assert self.scale is not None
        gap = self.threshold - n
        if self.strategy == "gaussian":
            from scipy import special  # deferred: SciPy is slow to import

            return float(special.ndtr(-gap / self.scale))
        if gap >= 0:
            return 0.5 * math.exp(-gap / self.scale)
        return -0.5 * math.expm1(gap / self.scale) + 0.5

    def keep_probabilities(self, n_max: int) -> FloatArray:
        """``[p(0), p(1), ..., p(n_max)]``."""
        n_max = check.check_count(n_max, "n_max", "PartitionSelection", minimum=0)
        return np.array([self.keep_probability(n) for n in range(n_max + 1)])

    def __repr__(self) -> str:
        return (
            f"PartitionSelection({self.strategy!r}, epsilon={self.epsilon!r}, "
            f"delta={self.delta!r}, max_partitions_contributed="
            f"{self.max_partitions_contributed!r}, pre_threshold={self.pre_threshold!r})"
        )


def laplace_partition_delta(
    *, epsilon: float, threshold: float, max_partitions_contributed: int = 1
) -> float:
    """The delta that Laplace thresholding at ``threshold`` costs (inverse of the threshold).

    ``1 - (1 - P(1 + Lap(k / epsilon) > threshold))^k`` (Google's
    ``LaplacePartitionSelection::CalculateDelta``), rounded up.
    """
    owner = "laplace_partition_delta"
    epsilon = check.check_epsilon(epsilon, owner)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise InvalidParameter.for_parameter("threshold", owner, "a float", threshold)
    if math.isnan(threshold):
        raise InvalidParameter.for_parameter("threshold", owner, "a float, not NaN", threshold)
    k = check.check_count(max_partitions_contributed, "max_partitions_contributed", owner)
    b = k / epsilon
    gap = threshold - 1.0
    d = 0.5 * math.exp(-gap / b) if gap >= 0 else 1.0 - 0.5 * math.exp(gap / b)
    if d >= 1.0:
        return 1.0
    delta = -math.expm1(k * math.log1p(-d))
    return min(1.0, up(delta, 4)) if delta > 0 else 0.0
