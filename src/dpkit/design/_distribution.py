"""A piecewise-uniform noise distribution with exact dyadic masses."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit import noise
from dpkit.design import _exact
from dpkit.design._losses import Loss
from dpkit.random import Random

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class PiecewiseUniform:
    """Noise that picks interval ``[i beta, (i + 1) beta)`` w.p. ``counts[i - first] / 2^60``
    and is uniform on it.

    Parameters
    ----------
    counts:
        Non-negative integers summing to ``2^60`` (see :func:`dpkit.design._exact.quantize`).
    first:
        Index of the first interval.
    beta:
        Interval width.
    """

    def __init__(self, counts: IntArray, first: int, beta: float) -> None:
        self.counts = counts
        self.first = first
        self.beta = beta
        self._cumulative = np.cumsum(counts)
        #: Grid of the releases: a power of two about 2^-20 beta.
        self.step = noise.default_granularity(beta)

    @property
    def masses(self) -> FloatArray:
        """Probability of each interval (``counts / 2^60`` rounded to float)."""
        return self.counts.astype(np.float64) / float(_exact.TOTAL)

    @property
    def edges(self) -> FloatArray:
        """Interval ends, ``len(masses) + 1`` of them."""
        return np.asarray(
            (self.first + np.arange(self.counts.size + 1)) * self.beta, dtype=np.float64
        )

    def pdf(self, x: npt.ArrayLike) -> Any:
        """Density at ``x`` (``masses[i] / beta`` on interval ``i``, 0 outside)."""
        points = np.asarray(x, dtype=np.float64)
        index = np.floor(points / self.beta).astype(np.int64) - self.first
        inside = (index >= 0) & (index < self.counts.size)
        density = np.where(inside, self.masses[np.clip(index, 0, self.counts.size - 1)], 0.0)
        result = density / self.beta
        return float(result) if result.ndim == 0 else result

    def cdf(self, x: npt.ArrayLike) -> Any:
        """``P(X <= x)`` (piecewise linear)."""
        points = np.asarray(x, dtype=np.float64)
        edges = self.edges
        # exact integer sums, rounded once (a float cumsum drifts: a symmetric noise
        # would not give exactly 1/2 at 0)
        cumulative = np.concatenate([[0.0], self._cumulative.astype(np.float64) / _exact.TOTAL])
        result = np.interp(points, edges, cumulative, left=0.0, right=1.0)
        return float(result) if np.ndim(result) == 0 else result

    def expected(self, loss: Loss) -> float:
        """``E[c(X)]`` for the exact masses (interval averages of ``c``)."""
        edges = self.edges
        return float(self.masses @ loss.average(edges[:-1], edges[1:]))

    def moments(self) -> tuple[float, float]:
        """Mean and standard deviation of the noise."""
        left, right = self.edges[:-1], self.edges[1:]
        mean = float(self.masses @ ((left + right) / 2))
        second = float(self.masses @ ((left**2 + left * right + right**2) / 3))
        return mean, math.sqrt(max(second - mean**2, 0.0))

    def half_width(self, confidence: float) -> float:
        """Smallest ``h`` (to 1e-12 of the support) with ``P(|X| <= h) >= confidence``."""
        low, high = 0.0, float(np.max(np.abs(self.edges)))
        for _ in range(100):
            middle = (low + high) / 2
            if middle in (low, high):
                break
            if self.cdf(middle) - self.cdf(-middle) >= confidence:
                high = middle
            else:
                low = middle
        return high  # the upper end of the bracket: never below the true half-width

    def release(self, values: FloatArray, rng: Random) -> FloatArray:
        """``values + X`` (independent ``X`` per entry), exactly rounded to the grid."""
        positions = _exact.choose_intervals(self._cumulative, values.size, rng)
        return _exact.release(values, positions + self.first, self.beta, self.step, rng)

    def plot_on(self, ax: Any, **style: Any) -> Any:
        """Draw the density as steps on a matplotlib axis."""
        edges = self.edges
        density = self.masses / self.beta
        return ax.stairs(density, edges, **style)
