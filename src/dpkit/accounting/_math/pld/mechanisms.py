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
import numpy.typing as npt

from dpkit.accounting._math.pld.discretize import (
    CDF_REL,
    CdfPair,
    CdfValues,
    from_atoms,
    product_error,
)
from dpkit.accounting._math.pld.pmf import FloatArray, LossPmf, U, mass_lower

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

    @property
    def slope(self) -> float:
        """``dx/dt`` of :meth:`x_le` (for its rounding allowance)."""
        return self.sigma * self.sigma

    def max_density(self, distance: FloatArray) -> FloatArray:
        """An upper bound on the density at any point at least ``distance`` from 0.

        ``1 / (sigma sqrt(2 pi)) < 0.4 / sigma``; the exponent ``-(d / sigma)^2 / 2``
        is raised by 8u relative (three roundings) and ``exp`` allowed 8u (16u here).
        """
        z = distance / self.sigma
        peak = 0.4 / self.sigma * (1.0 + 2.0 * U)
        return np.exp(-0.5 * (z * z) * (1.0 - 8.0 * U)) * (peak * (1.0 + 16.0 * U))

    def cdf(self, x: FloatArray) -> FloatArray:
        from scipy import special  # deferred: SciPy is slow to import

        return np.asarray(special.ndtr(x / self.sigma), dtype=np.float64)

    def sf(self, x: FloatArray) -> FloatArray:
        from scipy import special  # deferred: SciPy is slow to import

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

    @property
    def slope(self) -> float:
        """``dx/dt`` of :meth:`x_le` on its linear part (for its rounding allowance)."""
        return 0.5 * self.b

    def max_density(self, distance: FloatArray) -> FloatArray:
        """An upper bound on the density at any point at least ``distance`` from 0.

        ``e^{-d/b} / (2 b)``; the exponent is raised by 8u relative and ``exp`` allowed
        8u (16u here).
        """
        peak = 0.5 / self.b * (1.0 + 2.0 * U)
        return np.exp(-(distance / self.b) * (1.0 - 8.0 * U)) * (peak * (1.0 + 16.0 * U))

    def cdf(self, x: FloatArray) -> FloatArray:
        neg = 0.5 * np.exp(np.minimum(x, 0.0) / self.b)
        pos = -0.5 * np.expm1(-np.maximum(x, 0.0) / self.b) + 0.5
        return np.where(x < 0.0, neg, pos)

    def sf(self, x: FloatArray) -> FloatArray:
        return self.cdf(-x)

    def _inverse(self, t: FloatArray, strict: bool) -> FloatArray:
        inner = np.clip((self.b * t + 1.0) * 0.5, 0.0, 1.0)
        # Compare b t with -1 and 1 exactly (TwoProduct), so that a loss on the atom
        # +-1/b lands on the right side even where 1/b is not a float.
        bt = self.b * t
        err = product_error(t, self.b)
        if strict:
            below = (bt < -1.0) | ((bt == -1.0) & (err <= 0.0))
            above = (bt > 1.0) | ((bt == 1.0) & (err > 0.0))
        else:
            below = (bt < -1.0) | ((bt == -1.0) & (err < 0.0))
            above = (bt > 1.0) | ((bt == 1.0) & (err >= 0.0))
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


def _threshold_range(
    e: FloatArray, de: FloatArray, q: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``_log_ratio_threshold`` at the computed edges, and an interval around the exact one.

    ``e`` holds the computed grid points ``fl(j h)`` (within ``de`` of ``j h``). The
    interval ``[lo, hi]`` contains the threshold of the *exact* grid point ``j h``,
    assuming ``expm1``/``log`` within 4 ulp (8u) of their results, as dpkit assumes of
    libm throughout, and one rounding (u) per arithmetic operation.
    """
    if q == 1.0:  # t = e: exact where the grid point is a float
        return e, e - de * (1.0 + 4.0 * U), e + de * (1.0 + 4.0 * U)
    with np.errstate(over="ignore", invalid="ignore"):
        m = np.expm1(e)
        v = m + q
        with np.errstate(divide="ignore"):  # as _log_ratio_threshold, sharing expm1(e)
            t = np.where(v > 0.0, np.log(np.where(v > 0.0, v, 1.0)) - math.log(q), -np.inf)
        # |v_computed - v_exact|: the edge error through e^e, expm1's error, the addition.
        dv = (np.exp(e + de) * de + 8.0 * U * np.abs(m) + U * np.abs(v)) * (1.0 + 4.0 * U)
        log_q = math.log(q)
        with np.errstate(divide="ignore"):
            lo = np.log(np.maximum(v - dv, 0.0)) - log_q
            hi = np.log(np.maximum(v + dv, 0.0)) - log_q
        # The two logs and the subtraction above, each a few ulp of its result.
        pad_lo = 16.0 * U * (np.abs(lo) + abs(log_q) + 1.0)
        pad_hi = 16.0 * U * (np.abs(hi) + abs(log_q) + 1.0)
        # NaN only where e^e overflowed (inf - inf): widen to everything there.
        lo = np.where(np.isfinite(lo), lo - pad_lo, np.where(np.isnan(lo), -np.inf, lo))
        hi = np.where(np.isfinite(hi), hi + pad_hi, np.where(np.isnan(hi), np.inf, hi))
    return t, lo, hi


def _x_range(
    noise: Noise, inverse: str, t: FloatArray, lo: FloatArray, hi: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The output ``x`` at ``t``, and an interval containing the exact ``x`` at the true t.

    ``x_le``/``x_lt`` are non-decreasing, so ``[x(lo), x(hi)]`` holds it up to the
    rounding of the affine map and of the CDF's own scaling (a few u of ``|x|``,
    ``slope |t|`` and 1).
    """
    f = noise.x_le if inverse == "le" else noise.x_lt
    x, x_lo, x_hi = f(t), f(lo), f(hi)
    with np.errstate(invalid="ignore"):
        pad = 8.0 * U * (np.abs(x) + noise.slope * np.abs(t) + 1.0)
        pad = np.where(np.isfinite(pad), pad, 0.0)
    with np.errstate(invalid="ignore"):
        x_lo = np.where(np.isfinite(x_lo), x_lo - pad - 8.0 * U * np.abs(x_lo), x_lo)
        x_hi = np.where(np.isfinite(x_hi), x_hi + pad + 8.0 * U * np.abs(x_hi), x_hi)
    return x, x_lo, x_hi


def _loss_spread(
    noise: Noise, t: FloatArray, lo: FloatArray, hi: FloatArray, x_lo: FloatArray, x_hi: FloatArray
) -> FloatArray:
    """A bound on ``|L(x) - e|`` over ``x`` in ``[x_lo, x_hi]`` (``inf`` if unbounded).

    On the linear part ``t = log r(x)`` moves by ``dx / slope``, and the loss moves by at
    most as much as ``t`` (``|dL/dt| = q r / (1 - q + q r) <= 1``).
    """
    with np.errstate(invalid="ignore"):
        width = (hi - lo) + (x_hi - x_lo - (noise.x_le(hi) - noise.x_le(lo))) / noise.slope
        width = np.abs(width) * (1.0 + 1e-6) + 4.0 * U * np.abs(t)
    return np.where(np.isfinite(width), width, np.inf)


def _bound(small: FloatArray, big: FloatArray) -> FloatArray:
    """An upper bound on ``big - small`` for computed tail values (each within CDF_REL)."""
    return np.maximum(big - small + CDF_REL * (big + small), 0.0) * (1.0 + 4.0 * U)


def _spread(
    noise: Noise, q: float, x_lo: FloatArray, x_hi: FloatArray, use_cdf: npt.NDArray[np.bool_]
) -> tuple[FloatArray, FloatArray]:
    """Upper bounds on the mixture's and the noise's measure of ``(x_lo, x_hi]``.

    Where both ends are finite: the measure is at most ``(x_hi - x_lo)`` times the
    largest density on the interval, which for noise centred at ``mu`` is bounded by
    ``noise.max_density`` of the interval's distance from ``mu`` (both noise densities
    decrease away from their centre); the mixture's is ``(1-q)`` times that for
    ``mu = 0`` plus ``q`` times that for ``mu = 1``. Distances are lowered by 4u (one
    rounding each) and the products raised by 8u. Elsewhere the measure is a
    difference of two CDF values or of two survival values (each within CDF_REL);
    either gives a valid bound, and ``use_cdf`` picks per point the tail that cancels
    less (chosen by the caller from the values at the computed threshold). The
    mixture is ``(1-q) mu0 + q mu1``, sharing ``mu0``'s values with the noise's own.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        width = np.maximum(x_hi - x_lo, 0.0) * (1.0 + 8.0 * U)
        finite = np.isfinite(width)
        width = np.where(finite, width, 0.0)
        lo_f, hi_f = np.where(finite, x_lo, 0.0), np.where(finite, x_hi, 0.0)
        keep = 1.0 - 4.0 * U
        d0 = np.maximum(np.maximum(lo_f, -hi_f), 0.0)  # distance from 0: exact
        w_noise = width * noise.max_density(d0)
        d1 = np.maximum(np.maximum(lo_f - 1.0, 1.0 - hi_f), 0.0) * keep  # from 1
        if q == 1.0:
            w_mix = width * noise.max_density(d1)
        else:
            w_mix = width * ((1.0 - q) * noise.max_density(d0) + q * noise.max_density(d1))
            w_mix *= 1.0 + 4.0 * U
    if finite.all():
        return w_mix, w_noise
    for mask, f, by_cdf in (
        (~finite & use_cdf, noise.cdf, True),
        (~finite & ~use_cdf, noise.sf, False),
    ):
        if not mask.any():
            continue
        lo, hi = x_lo[mask], x_hi[mask]
        n_lo, n_hi = f(lo), f(hi)
        if q == 1.0:
            m_lo, m_hi = f(lo - 1.0), f(hi - 1.0)
        else:
            m_lo = (1.0 - q) * n_lo + q * f(lo - 1.0)
            m_hi = (1.0 - q) * n_hi + q * f(hi - 1.0)
        if by_cdf:  # F(hi) - F(lo)
            w_mix[mask], w_noise[mask] = _bound(m_lo, m_hi), _bound(n_lo, n_hi)
        else:  # S(lo) - S(hi)
            w_mix[mask], w_noise[mask] = _bound(m_hi, m_lo), _bound(n_hi, n_lo)
    return w_mix, w_noise


def _mixed(
    noise: Noise, x: FloatArray, q: float
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """The mixture's CDF and survival at ``x``, then the noise's own."""
    c0, s0 = noise.cdf(x), noise.sf(x)
    c1, s1 = noise.cdf(x - 1.0), noise.sf(x - 1.0)
    if q == 1.0:
        return c1, s1, c0, s0
    return (1.0 - q) * c0 + q * c1, (1.0 - q) * s0 + q * s1, c0, s0


def sampled_cdfs(noise: Noise, q: float, direction: str) -> CdfPair:
    """CDFs of the "remove" or "add" PLD of additive ``noise`` Poisson-sampled at ``q``.

    Besides the four CDF values, each call returns per edge a bound on the ``P``- and
    ``Q``-mass between the computed output threshold ``x`` and the exact one (the effect
    of float error in the edge and in ``x``; see :func:`.discretize.from_interval_cdfs`).
    """

    def remove(e: FloatArray, de: FloatArray) -> CdfValues:
        t, lo, hi = _threshold_range(e, de, q)
        x, x_lo, x_hi = _x_range(noise, "le", t, lo, hi)  # L <= e  <=>  output <= x
        mix_f, mix_s, f, s = _mixed(noise, x, q)
        w_p, w_q = _spread(noise, q, x_lo, x_hi, mix_f <= mix_s)
        eta = _loss_spread(noise, t, lo, hi, x_lo, x_hi)
        return mix_f, mix_s, f, s, w_p, w_q, eta

    def add(e: FloatArray, de: FloatArray) -> CdfValues:
        t, lo, hi = _threshold_range(-e, de, q)
        x, x_lo, x_hi = _x_range(noise, "lt", t, lo, hi)  # L <= e  <=>  output > x
        mix_f, mix_s, f, s = _mixed(noise, x, q)
        w_q, w_p = _spread(noise, q, x_lo, x_hi, mix_f <= mix_s)
        eta = _loss_spread(noise, t, lo, hi, x_lo, x_hi)
        return s, f, mix_s, mix_f, w_p, w_q, eta

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
