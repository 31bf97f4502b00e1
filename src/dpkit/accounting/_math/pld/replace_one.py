"""The Poisson-subsampled Gaussian under the replace-one relation, as CDFs for discretising.

DP-SGD clips each record's contribution to L2 norm ``C`` and adds ``N(0, (z C)^2 I)``
to the sum over a Poisson sample (rate ``q``). Replacing record ``x`` by ``x'`` changes
the sampled contribution from ``g(x)`` to ``g(x')`` (both of norm at most ``C``); the
rest of the batch is common to both and is post-processing. In units of ``C`` the pair
is ``P_a = (1 - q) N(0, z^2) + q N(a, z^2)`` against ``P_b`` with ``|a|, |b| <= 1``, and
the worst case is ``a = -b`` on a line (the pair dp_accounting uses for ``REPLACE_ONE``;
Lebeda, Regehr, Kamath & Steinke 2024 discuss it). We checked that reduction
numerically in the plane spanned by ``0, a, b`` (which covers every dimension): over
random ``a, b`` in the unit disc, ``H_g(P_a || P_b) <= H_g(P_e || P_{-e})`` for
``g`` in ``[0.8, 3]`` and several ``(z, q)``; we did not write a proof.

With ``P = (1 - q) N(0) + q N(1)`` and ``Q = (1 - q) N(0) + q N(-1)`` (variance ``z^2``)
the privacy loss at output ``x`` is::

    L(x) = log(1 - q + q e^{(2x - 1)/(2 z^2)}) - log(1 - q + q e^{(-2x - 1)/(2 z^2)}),

increasing in ``x``, with inverse ``x = z^2 (l/2 + asinh(alpha sinh(l/2)))`` and
``alpha = (1 - q) e^{1/(2 z^2)} / q`` (solve ``e^L`` for ``e^{x / z^2}``). The pair is
symmetric (``x -> -x`` swaps ``P`` and ``Q``), so one PLD serves both orderings.

Float error: the computed threshold ``x`` is bracketed by ``[x_lo, x_hi]`` on which
``L`` is evaluated with a stated error bound and shown to straddle the exact grid
point; the mass of the bracket and the loss spread over it are what
:func:`.discretize.from_interval_cdfs` needs to charge the misplacement to ``slack``.
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.accounting._math.pld.discretize import CdfPair, CdfValues
from dpkit.accounting._math.pld.monotone import certified_bracket
from dpkit.accounting._math.pld.pmf import FloatArray, U

__all__ = ["replace_one_gaussian_cdfs"]


def _log_mixture(t: FloatArray, q: float) -> tuple[FloatArray, FloatArray]:
    """``log(1 - q + q e^t)`` and a bound on its absolute float error.

    Where ``|t| < 700`` as ``log1p(y)`` with ``y = q expm1(t)``: ``y`` errs by ``8u``
    (expm1) plus ``u`` (product) plus what ``t``'s own ~3u relative error does to
    ``expm1`` (at most ``3u (|t| + 1)`` relative); ``log1p`` turns a relative error
    ``r`` of ``y`` into ``r |y| / (1 + y)`` absolute, plus its own ``8u`` of the result.
    This is tiny where the loss is (small ``q``), which keeps the brackets narrow.
    Elsewhere ``logaddexp(log(1 - q), log q + t)``, within ``16u`` of its inputs' sizes.
    For ``q = 1`` it is ``t`` itself (with ``t``'s own error).
    """
    if q == 1.0:
        return t, 4.0 * U * (np.abs(t) + 1.0)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        near = np.abs(t) < 700.0
        tn = np.where(near, t, 0.0)
        y = q * np.expm1(tn)
        value_near = np.log1p(y)
        rel_y = (12.0 + 3.0 * (np.abs(tn) + 1.0)) * U
        err_near = rel_y * np.abs(y) / (1.0 + y) * (1.0 + 1e-9) + 8.0 * U * np.abs(value_near)
        log_q = math.log(q)
        log_rest = math.log1p(-q) if q < 1.0 else -math.inf
        value_far = np.logaddexp(log_rest, log_q + t)
        rest = abs(log_rest) if q < 1.0 else 0.0
        err_far = 16.0 * U * (np.abs(t) + abs(log_q) + rest + np.abs(value_far) + 1.0)
    return np.where(near, value_near, value_far), np.where(near, err_near, err_far)


def _loss(x: FloatArray, z: float, q: float) -> tuple[FloatArray, FloatArray]:
    """``L(x)`` and a bound on its absolute float error (the subtraction adds ``u``)."""
    two_var = 2.0 * z * z
    with np.errstate(over="ignore", invalid="ignore"):
        a, err_a = _log_mixture((2.0 * x - 1.0) / two_var, q)
        b, err_b = _log_mixture((-2.0 * x - 1.0) / two_var, q)
        loss = a - b
        err = (err_a + err_b) * (1.0 + 4.0 * U) + U * np.abs(loss)
    return loss, err


def _threshold(e: FloatArray, z: float, q: float) -> FloatArray:
    """``sup {x : L(x) <= e}`` to float accuracy (approximate; bracketed by the caller)."""
    half = 0.5 * e
    if q == 1.0:
        return z * z * half
    log_alpha = math.log1p(-q) - math.log(q) + 0.5 / (z * z)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        y = math.exp(log_alpha) * np.sinh(half) if log_alpha < 700.0 else np.full_like(e, np.inf)
        direct = np.arcsinh(y)
        # asinh(y) = sign(y) (log 2|y| + ...) for huge |y|: from log|y| without overflow.
        a = np.abs(half)
        log_abs_y = log_alpha + a + np.log1p(-np.exp(-2.0 * a)) - math.log(2.0)
        far = np.sign(half) * (log_abs_y + math.log(2.0))
        v = np.where(np.isfinite(direct) & (np.abs(y) < 1e300), direct, far)
        v = np.where(half == 0.0, 0.0, v)
    return z * z * (half + v)


def _bracket(
    e: FloatArray, de: FloatArray, z: float, q: float
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """The threshold ``x``, a certified bracket around the exact one, and ``eta``."""
    x = _threshold(e, z, q)
    with np.errstate(invalid="ignore"):
        scale = z * z * (np.abs(np.where(np.isfinite(e), e, 0.0)) + 1.0)

    def loss(points: FloatArray) -> tuple[FloatArray, FloatArray]:
        return _loss(points, z, q)

    x_lo, x_hi, eta = certified_bracket(e, de, x, loss, scale)
    return x, x_lo, x_hi, eta


def replace_one_gaussian_cdfs(z: float, q: float) -> CdfPair:
    """CDFs (and misplacement bounds) of the replace-one PLD of the sampled Gaussian."""
    from scipy import special  # deferred: SciPy is slow to import

    def mix(x: FloatArray, centre: float, lower: bool) -> FloatArray:
        sign = 1.0 if lower else -1.0
        base = special.ndtr(sign * x / z)
        shifted = special.ndtr(sign * (x - centre) / z)
        if q == 1.0:
            return np.asarray(shifted, dtype=np.float64)
        return np.asarray((1.0 - q) * base + q * shifted, dtype=np.float64)

    peak = 0.4 / z * (1.0 + 4.0 * U)  # the largest density of either mixture

    def cdfs(e: FloatArray, de: FloatArray) -> CdfValues:
        x, x_lo, x_hi, eta = _bracket(e, de, z, q)
        with np.errstate(invalid="ignore"):
            width = np.maximum(x_hi - x_lo, 0.0) * (1.0 + 4.0 * U)
        mass = np.where(np.isfinite(width), width * peak, 1.0)
        mass = np.where(np.isfinite(x), np.minimum(mass, 1.0), 0.0)
        f_p, s_p = mix(x, 1.0, True), mix(x, 1.0, False)
        f_q, s_q = mix(x, -1.0, True), mix(x, -1.0, False)
        return f_p, s_p, f_q, s_q, mass, mass, eta

    return cdfs
