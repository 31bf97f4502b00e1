"""The mixture-of-Gaussians mechanism: ``N(0, z^2)`` against ``sum_i p_i N(c_i, z^2)``.

With ``c_i >= 0`` (some positive) the log-likelihood ratio of the mixture to ``N(0)``,
``ell(x) = log sum_i p_i exp((2 c_i x - c_i^2) / (2 z^2))``, increases in ``x``. The
"remove" pair (mixture first) has loss ``ell(x)`` and the "add" pair (``N(0)`` first)
``-ell(x)``; both are half-lines in ``x`` (dp_accounting's
``MixtureGaussianPrivacyLoss``; Choquette-Choo, Ganesh, Steinke & Thakurta 2024).
``ell`` is at least ``log p_0`` (``p_0``: the weight of zero shifts), which bounds the
losses near the left end. The threshold is found by bisection and then certified
(:func:`.monotone.certified_bracket`).
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.accounting._math.pld.discretize import CDF_REL, CdfPair, CdfValues
from dpkit.accounting._math.pld.monotone import certified_bracket
from dpkit.accounting._math.pld.pmf import FloatArray, U

__all__ = ["MAX_COMPONENTS", "mixture_gaussian_cdfs"]

#: Pairwise sums of at most 64 CDF terms keep the mixture's CDF within CDF_REL
#: (ndtr 8u, product u, pairwise sum 6u).
MAX_COMPONENTS = 64
_NEWTON = 200


class _Mixture:
    def __init__(self, z: float, shifts: tuple[float, ...], probs: tuple[float, ...]) -> None:
        total = math.fsum(probs)
        keep = [(c, p / total) for c, p in zip(shifts, probs, strict=True) if p > 0.0]
        self.z = z
        self.c = np.array([c for c, _ in keep])
        self.p = np.array([p for _, p in keep])
        self.log_p = np.log(self.p)
        zero = float(self.p[self.c == 0.0].sum())
        # ell > log p_0 everywhere; rounded down past log's and the sum's error.
        self.floor = math.log(zero) - 16.0 * U * (abs(math.log(zero)) + 1.0) if zero else -math.inf

    def ell(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``ell(x)`` and a bound on its absolute float error.

        Where every exponent is below 700 in size: ``log1p(y)``, ``y = sum_i p_i
        expm1(a_i)`` (the ``p_i`` sum to 1). Each term errs by ``(12 + 3(|a_i| + 1)) u``
        relative (expm1, the product, ``a_i``'s own rounding), the sum by ``K u`` of the
        absolute terms; ``log1p`` turns an absolute error ``d`` of ``y`` into
        ``d / (1 + y)`` plus ``8u`` of its result. This stays tiny where ``ell`` is flat
        (a heavy zero shift), keeping the certified brackets narrow. Elsewhere a
        log-sum-exp, within ``16u`` of its terms' sizes.
        """
        c = self.c[:, np.newaxis]
        k = float(self.c.size)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            a = (2.0 * c * x[np.newaxis, :] - c * c) / (2.0 * self.z * self.z)
            terms = self.log_p[:, np.newaxis] + a
            top = np.max(terms, axis=0)
            top_f = np.where(np.isfinite(top), top, 0.0)
            far = top_f + np.log(np.sum(np.exp(terms - top_f), axis=0))
            err_far = 16.0 * U * (np.max(np.abs(a), axis=0) + float(np.max(np.abs(self.log_p))))
            err_far = err_far + 16.0 * U * (np.abs(far) + 1.0 + math.log2(k + 1.0))
            near = np.max(np.abs(a), axis=0) < 700.0
            an = np.where(near[np.newaxis, :], a, 0.0)
            parts = self.p[:, np.newaxis] * np.expm1(an)
            y = np.sum(parts, axis=0)
            rel = (12.0 + 3.0 * (np.abs(an) + 1.0)) * U
            err_y = np.sum(np.abs(parts) * (rel + k * U), axis=0) * (1.0 + 1e-9)
            value = np.log1p(y)
            err_near = err_y / (1.0 + y) * (1.0 + 1e-9) + 8.0 * U * np.abs(value)
            # Trust the near form only where 1 + y is far from 0 relative to its error.
            near &= (1.0 + y) > 4.0 * err_y
        return np.where(near, value, far), np.where(near, err_near, err_far)

    def _value_and_slope(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``ell(x)`` (the accurate form of :meth:`ell`) and ``ell'(x)``."""
        c = self.c[:, np.newaxis]
        with np.errstate(over="ignore", invalid="ignore"):
            terms = self.log_p[:, np.newaxis] + (2.0 * c * x - c * c) / (2.0 * self.z * self.z)
            top = np.max(terms, axis=0)
            weights = np.exp(terms - top)
            slope = np.sum(weights * c, axis=0) / np.sum(weights, axis=0) / (self.z * self.z)
        return self.ell(x)[0], slope

    def threshold(self, t: FloatArray) -> FloatArray:
        """``sup {x : ell(x) <= t}`` by Newton's method (approximate; certified later).

        ``ell`` is convex (a log-sum-exp of affine maps) and increasing, so Newton's
        iterates from a point where ``ell >= t`` decrease monotonically to the root.
        """
        positive = self.c > 0.0
        cp, lp = self.c[positive][:, np.newaxis], self.log_p[positive][:, np.newaxis]
        zz = self.z * self.z
        # ell(x) >= log p_k + a_k(x) for each k: where one term alone reaches t.
        x = np.min(zz * (t[np.newaxis, :] - lp) / cp + cp / 2.0, axis=0)
        todo = np.flatnonzero(np.isfinite(x) & (t > self.floor))
        for _ in range(_NEWTON):  # iterate on the points not yet converged only
            if todo.size == 0:
                break
            xs = x[todo]
            value, slope = self._value_and_slope(xs)
            with np.errstate(divide="ignore", invalid="ignore"):
                step = (value - t[todo]) / slope
            step = np.where(np.isfinite(step), step, 0.0)
            x[todo] = xs - step
            todo = todo[np.abs(step) > 1e-15 * (np.abs(xs) + 1.0)]
        return np.asarray(x, dtype=np.float64)

    def cdf(self, x: FloatArray, shifted: bool, lower: bool) -> FloatArray:
        from scipy import special  # deferred: SciPy is slow to import

        sign = 1.0 if lower else -1.0
        if not shifted:
            return np.asarray(special.ndtr(sign * x / self.z), dtype=np.float64)
        parts = self.p[:, np.newaxis] * special.ndtr(
            sign * (x[np.newaxis, :] - self.c[:, np.newaxis]) / self.z
        )
        return np.asarray(np.sum(parts, axis=0), dtype=np.float64)


def _mass(mix: _Mixture, shifted: bool, x_lo: FloatArray, x_hi: FloatArray) -> FloatArray:
    """An upper bound on the measure of ``[x_lo, x_hi]`` (density bound, or CDFs)."""
    with np.errstate(invalid="ignore"):
        width = np.maximum(x_hi - x_lo, 0.0) * (1.0 + 4.0 * U)
        by_density = np.where(np.isfinite(width), width * 0.4 / mix.z * (1.0 + 4.0 * U), np.inf)
    lo_f = mix.cdf(x_lo, shifted, True)  # exact 0 or 1 at infinite ends
    hi_f = mix.cdf(x_hi, shifted, True)
    by_cdf = np.maximum(hi_f - lo_f + CDF_REL * (hi_f + lo_f), 0.0) * (1.0 + 4.0 * U)
    return np.minimum(np.minimum(by_density, by_cdf), 1.0)


def mixture_gaussian_cdfs(
    z: float, shifts: tuple[float, ...], probs: tuple[float, ...], direction: str
) -> CdfPair:
    """The "remove" (mixture first) or "add" PLD's CDFs, with misplacement bounds."""
    mix = _Mixture(z, shifts, probs)

    def at(t: FloatArray, de: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        x = mix.threshold(t)
        # Provably below the floor (no output has so small a loss): x = -inf exactly.
        x = np.where(t + de < mix.floor, -np.inf, x)
        scale = z * z * (np.abs(t) + 1.0) / float(np.max(mix.c))
        x_lo, x_hi, eta = certified_bracket(t, de, x, mix.ell, scale, mix.floor)
        return x, x_lo, x_hi, eta

    def remove(e: FloatArray, de: FloatArray) -> CdfValues:
        x, x_lo, x_hi, eta = at(e, de)
        f_p, s_p = mix.cdf(x, True, True), mix.cdf(x, True, False)
        f_q, s_q = mix.cdf(x, False, True), mix.cdf(x, False, False)
        return f_p, s_p, f_q, s_q, _mass(mix, True, x_lo, x_hi), _mass(mix, False, x_lo, x_hi), eta

    def add(e: FloatArray, de: FloatArray) -> CdfValues:
        x, x_lo, x_hi, eta = at(-e, de)
        # L = -ell <= e  <=>  output >= x: P = N(0), Q = the mixture.
        f_p, s_p = mix.cdf(x, False, False), mix.cdf(x, False, True)
        f_q, s_q = mix.cdf(x, True, False), mix.cdf(x, True, True)
        return f_p, s_p, f_q, s_q, _mass(mix, False, x_lo, x_hi), _mass(mix, True, x_lo, x_hi), eta

    return remove if direction == "remove" else add
