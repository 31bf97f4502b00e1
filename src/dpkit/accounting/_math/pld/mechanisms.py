"""PLDs of the mechanisms the PLD accountant supports, as CDFs or atoms.

Additive noise (Gaussian, Laplace) with sensitivity 1 in noise units, possibly
Poisson-subsampled with rate ``q`` (``q = 1``: no subsampling). With ``mu0`` the noise
centred at 0, ``mu1`` centred at 1 and ``r = mu1 / mu0`` (non-decreasing in the
output ``x``), the two worst-case pairs for add/remove neighbours are (Koskela, Jalko &
Honkela 2020, Sec. 6; Zhu, Dong & Wang 2022):

- "remove": ``P = (1-q) mu0 + q mu1``, ``Q = mu0``; ``L = log(1 - q + q r(x))``.
- "add":    ``P = mu0``, ``Q = (1-q) mu0 + q mu1``; ``L = -log(1 - q + q r(x))``.

Both losses are monotone in ``x``, so ``{L <= e}`` is a half-line in ``x`` and its
probability is a CDF value. For ``q = 1`` the two pairs have the same PLD (reflect
``x -> 1 - x``). Pure, approximate and randomized-response PLDs are finite sets of
atoms: ``eps``-DP is dominated by binary randomized response, and (eps, delta)-DP by
the same with an extra mass ``delta`` at ``+inf`` (Kairouz, Oh & Viswanath 2015,
Thm 2.4; Murtagh & Vadhan 2016).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from dpkit.accounting._math.pld.discretize import CdfPair, from_atoms
from dpkit.accounting._math.pld.pmf import FloatArray, LossPmf, mass_lower

__all__ = [
    "GaussianNoise",
    "LaplaceNoise",
    "Noise",
    "approx_pmf",
    "discrete_laplace_pmf",
    "randomized_response_pmf",
    "sampled_cdfs",
]


@dataclass(frozen=True)
class GaussianNoise:
    """``N(0, sigma^2)``; ``log r(x) = (2x - 1) / (2 sigma^2)`` has no flat parts."""

    sigma: float

    def cdf(self, x: FloatArray) -> FloatArray:
        return np.asarray(special.ndtr(x / self.sigma), dtype=np.float64)

    def sf(self, x: FloatArray) -> FloatArray:
        return np.asarray(special.ndtr(-x / self.sigma), dtype=np.float64)

    def x_le(self, t: FloatArray) -> FloatArray:
        """``sup {x : log r(x) <= t}``."""
        return self.sigma * self.sigma * t + 0.5

    def x_lt(self, t: FloatArray) -> FloatArray:
        """``sup {x : log r(x) < t}``."""
        return self.x_le(t)


@dataclass(frozen=True)
class LaplaceNoise:
    """``Lap(0, b)``; ``log r(x) = (|x| - |x - 1|) / b`` is flat at ``-1/b`` and ``1/b``.

    The flat parts are atoms of the loss; ``x_le`` and ``x_lt`` put them on the right
    side of the inequality.
    """

    b: float

    def cdf(self, x: FloatArray) -> FloatArray:
        neg = 0.5 * np.exp(np.minimum(x, 0.0) / self.b)
        pos = -0.5 * np.expm1(-np.maximum(x, 0.0) / self.b) + 0.5
        return np.where(x < 0.0, neg, pos)

    def sf(self, x: FloatArray) -> FloatArray:
        return self.cdf(-x)

    def _inverse(self, t: FloatArray, strict: bool) -> FloatArray:
        inner = np.clip((self.b * t + 1.0) * 0.5, 0.0, 1.0)
        top = 1.0 / self.b
        below = t <= -top if strict else t < -top
        above = t > top if strict else t >= top
        return np.where(below, -np.inf, np.where(above, np.inf, inner))

    def x_le(self, t: FloatArray) -> FloatArray:
        return self._inverse(t, strict=False)

    def x_lt(self, t: FloatArray) -> FloatArray:
        return self._inverse(t, strict=True)


Noise = GaussianNoise | LaplaceNoise


def _log_ratio_threshold(e: FloatArray, q: float) -> FloatArray:
    """``log((e^e - 1 + q) / q)``: ``log(1 - q + q r) <= e  <=>  log r <= this``.

    ``-inf`` where ``e^e <= 1 - q`` (no output has so small a loss).
    """
    if q == 1.0:
        return e
    with np.errstate(over="ignore"):  # e^e overflowing means an infinite threshold
        v = np.expm1(e) + q
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.where(v > 0.0, v, 1.0)) - math.log(q)
    return np.where(v > 0.0, out, -np.inf)


def _mix(noise: Noise, x: FloatArray, q: float, upper: bool) -> FloatArray:
    """``(1-q) mu0 + q mu1`` of ``(-inf, x]`` (or of ``(x, inf)`` when ``upper``)."""
    f = noise.sf if upper else noise.cdf
    if q == 1.0:
        return f(x - 1.0)
    return (1.0 - q) * f(x) + q * f(x - 1.0)


def sampled_cdfs(noise: Noise, q: float, direction: str) -> CdfPair:
    """CDFs of the "remove" or "add" PLD of additive ``noise`` Poisson-sampled at ``q``."""

    def remove(e: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        x = noise.x_le(_log_ratio_threshold(e, q))  # L <= e  <=>  output <= x
        return _mix(noise, x, q, False), _mix(noise, x, q, True), noise.cdf(x), noise.sf(x)

    def add(e: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        x = noise.x_lt(_log_ratio_threshold(-e, q))  # L <= e  <=>  output > x
        return noise.sf(x), noise.cdf(x), _mix(noise, x, q, True), _mix(noise, x, q, False)

    return remove if direction == "remove" else add


def randomized_response_pmf(epsilon: float, categories: int, h: float) -> LossPmf:
    """k-ary randomized response: loss ``eps``, ``-eps`` and (for k > 2) ``0``.

    With ``k = 2`` this is the PLD that dominates every ``eps``-DP mechanism.
    """
    # P[true] = e^eps / (e^eps + k - 1) = 1 / (1 + (k-1) e^{-eps}), stable for large eps.
    scale = 1.0 + (categories - 1) * math.exp(-epsilon)
    p_true = 1.0 / scale
    p_other = math.exp(-epsilon) / scale
    losses = np.array([epsilon, -epsilon, 0.0])
    probs = np.array([p_true, p_other, (categories - 2) * p_other])
    return from_atoms(losses, probs, h)


def approx_pmf(epsilon: float, delta: float, h: float) -> LossPmf:
    """The (eps, delta)-DP worst case: ``delta`` at ``+inf``, the rest as ``eps``-RR."""
    rr = randomized_response_pmf(epsilon, 2, h)
    masses = rr.masses * (1.0 - delta)
    # The deficit rule of from_atoms puts any float shortfall at +inf here too.
    deficit = max(0.0, 1.0 - mass_lower(masses) - delta)
    return LossPmf(h, rr.offset, masses, delta + deficit + rr.infinity_mass, 0.0)


def discrete_laplace_pmf(scale: float, sensitivity: int, h: float) -> LossPmf:
    """Discrete Laplace ``P[y] ∝ e^{-|y|/t}`` with integer shift ``D``.

    ``L(y) = (|y - D| - |y|) / t``: ``D/t`` for ``y <= 0``, ``-D/t`` for ``y >= D`` and
    ``(D - 2y)/t`` in between. Symmetric under ``y -> D - y``: one PLD for both
    directions.
    """
    t, d = scale, sensitivity
    a = math.exp(-1.0 / t)
    norm = (1.0 - a) / (1.0 + a)  # P[y] = norm * a^{|y|}
    ys = np.arange(1, d, dtype=np.float64)
    losses = np.concatenate([[d / t, -d / t], (d - 2.0 * ys) / t])
    probs = np.concatenate(
        [[1.0 / (1.0 + a), math.exp(-d / t) / (1.0 + a)], norm * np.exp(-ys / t)]
    )
    return from_atoms(losses, probs, h)
