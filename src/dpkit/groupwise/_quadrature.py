"""Quadrature for the output law of Algorithm 1 (numerical analysis only, no privacy use).

The output is a product of independent normals: ``Y = X + r|X|Z = X W`` with
``X ~ N(x, sigma^2)`` and ``W = 1 + r sign(X) Z ~ N(1, r^2)`` independent of ``X`` (the
sign of ``X`` times an independent standard normal is again standard normal). Hence::

    p_x(y) = int f_X(t) f_W(y / t) dt / |t|,     F_x(y) = P(X W <= y)

How the integrals are discretised (and why the error is tiny):

* Over ``t`` (each sign separately): the trapezoid rule on a uniform grid in
  ``u = ln|t| / r + |t| / sigma``. Near ``t = 0`` the steps are uniform in ``ln|t|``
  (width ``r/c``: the factor ``f_W(y/t)`` is a bump of width ``~r`` in ``ln|t|``), far
  from 0 uniform in ``t`` (width ``sigma/c``: ``f_X`` has width ``sigma``, and the
  tail saddle of ``X W`` has width ``sigma/2`` in ``t``). For smooth integrands that
  decay at both ends the trapezoid rule converges exponentially (Trefethen & Weideman
  2014, SIAM Review 56(3)); ``c = 8`` points per scale leaves a discretisation error
  far below 1e-12, which the tests check by halving the step.
* Truncation: ``|t - x| <= 60 sigma + t_tail`` (``f_X`` below ``e^-1800`` of its
  peak outside), with ``t_tail = sqrt(sigma y_max / r)`` the tail saddle of ``X W`` at
  the largest ``|y|`` on the grid (the tail ``P(|XW| > y) ~ exp(-y/(r sigma))`` is
  carried by ``|X| ~ t_tail``), and ``|t| >= y_min / (1 + 45 r)`` (``f_W(y/t)`` below
  ``e^-1000`` inside).
* Over ``y`` (each sign): trapezoid on a uniform grid in
  ``v = ln|y| / r + (2/a)(s - sigma ln(1 + s/sigma))``, ``s = sqrt(a|y|)``,
  ``a = r sigma``: steps ``~r|y|/c`` near 0 (the density has a logarithmic spike at
  ``y = 0`` when ``X`` can be near 0) and ``~(sigma + sqrt(r sigma |y|))/c`` further
  out (the width of the tilted tails ``p^a q^(1-a)``). ``|y| >= 1e-20 sigma``: the
  mass left out near 0 is below 1e-17.

Everything is in log space (``logsumexp``), so deep tails neither underflow nor
lose relative accuracy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: Points per local scale of the integrand (the trapezoid rule's resolution).
STEPS_PER_SCALE = 8
#: First-stage cut: |t - x| <= X_WIDTH sigma.
X_WIDTH = 60.0
#: Second-stage cut: |w - 1| <= W_WIDTH r.
W_WIDTH = 45.0
#: Smallest |y| on the output grid, relative to sigma.
Y_FLOOR = 1e-20
_LOG_2PI = math.log(2.0 * math.pi)
_CHUNK = 1 << 22  # matrix entries per block: bounds memory, keeps numpy vectorised


@dataclass(frozen=True)
class Nodes:
    """Quadrature nodes with log weights: ``sum(exp(log_weights) f(points)) ~ int f``."""

    points: FloatArray
    log_weights: FloatArray


def _invert_log_linear(target: FloatArray, log_scale: float, lin_scale: float) -> FloatArray:
    """Solve ``ln(t)/log_scale + t/lin_scale = target`` for ``t > 0`` (Newton on ``ln t``).

    ``F(l) = l/log_scale + e^l/lin_scale - target`` is convex and increasing; Newton
    started right of the root decreases monotonically to it.
    """
    ell = log_scale * target  # F >= 0 there
    positive = target * lin_scale > 1.0
    ell[positive] = np.minimum(ell[positive], np.log(lin_scale * target[positive]))
    for _ in range(200):
        value = ell / log_scale + np.exp(ell) / lin_scale - target
        slope = 1.0 / log_scale + np.exp(ell) / lin_scale
        step = value / slope
        ell = ell - step
        if np.all(np.abs(step) <= 1e-15 * np.maximum(1.0, np.abs(ell))):
            break
    return np.exp(ell)


def _half_line_t(lo: float, hi: float, sigma: float, r: float, steps: int) -> Nodes:
    """Nodes on ``[lo, hi] (lo > 0)`` for ``int g(t) dt`` (weights include ``dt/du``)."""
    if hi <= lo:
        return Nodes(np.empty(0), np.empty(0))
    u_lo = math.log(lo) / r + lo / sigma
    u_hi = math.log(hi) / r + hi / sigma
    h = 1.0 / steps
    count = math.ceil((u_hi - u_lo) / h) + 1
    u = u_lo + h * np.arange(count, dtype=np.float64)
    t = _invert_log_linear(u, r, sigma)
    # dt/du = 1 / (1/(r t) + 1/sigma) = r sigma t / (sigma + r t)
    log_weights = math.log(h) + np.log(r * sigma * t / (sigma + r * t))
    return Nodes(t, log_weights)


def t_nodes(count: float, sigma: float, r: float, y_max: float, steps: int) -> Nodes:
    """Signed nodes for ``int g(t) dt`` over the first stage ``X ~ N(count, sigma^2)``."""
    t_lo = Y_FLOOR * sigma / (1.0 + W_WIDTH * r)
    tail = math.sqrt(sigma * y_max / r)  # tail saddle of X W at |y| = y_max
    reach = X_WIDTH * sigma
    positive = _half_line_t(max(t_lo, count - reach), max(count, tail) + reach, sigma, r, steps)
    # |t - x| <= tail + reach on the negative side too: X < 0 is that far from x.
    negative = _half_line_t(t_lo, tail + reach - count, sigma, r, steps)
    return Nodes(
        np.concatenate([-negative.points[::-1], positive.points]),
        np.concatenate([negative.log_weights[::-1], positive.log_weights]),
    )


def _v_of_y(y: FloatArray | float, r: float, sigma: float) -> FloatArray:
    a = r * sigma
    s = np.sqrt(a * np.asarray(y))
    result: FloatArray = np.log(y) / r + (2.0 / a) * (s - sigma * np.log1p(s / sigma))
    return result


def y_nodes(count: float, sigma: float, r: float, y_max: float, steps: int) -> Nodes:
    """Signed output nodes for ``int g(y) dy`` over ``1e-20 sigma <= |y| <= y_max``."""
    y_min = Y_FLOOR * sigma
    v_lo, v_hi = float(_v_of_y(y_min, r, sigma)), float(_v_of_y(y_max, r, sigma))
    h = 1.0 / steps
    n = math.ceil((v_hi - v_lo) / h) + 1
    v = v_lo + h * np.arange(n)
    # Newton on ln y (v is increasing and concave in ln y): start from the log part.
    ell = np.minimum(r * v, math.log(y_max))
    for _ in range(200):
        y = np.exp(ell)
        slope = 1.0 / r + y / (sigma + np.sqrt(r * sigma * y))  # dv / d(ln y)
        step = (_v_of_y(y, r, sigma) - v) / slope
        ell = ell - step
        if np.all(np.abs(step) <= 1e-15 * np.maximum(1.0, np.abs(ell))):
            break
    y = np.exp(ell)
    log_weights = math.log(h) - np.log(1.0 / y / r + 1.0 / (sigma + np.sqrt(r * sigma * y)))
    return Nodes(np.concatenate([-y[::-1], y]), np.concatenate([log_weights[::-1], log_weights]))


def output_y_max(count: float, sigma: float, r: float, max_order: float) -> float:
    """Largest ``|y|`` needed: the bulk of ``X W`` and the tilted tails up to ``max_order``.

    Bulk: ``|X| <= |x| + 60 sigma`` times ``|W| <= 1 + 45 r``. Tails: the Renyi
    integrand of order ``a`` peaks near ``y ~ a^2 r / (4 sigma)`` (where the tail
    saddle ``t ~ a/2``); 32 times that leaves its decay far behind (checked by the edge
    share of every Renyi integral).
    """
    bulk = (abs(count) + X_WIDTH * sigma) * (1.0 + W_WIDTH * r)
    tilted = 8.0 * max_order**2 * r / sigma + X_WIDTH * sigma
    return max(bulk, tilted)


def log_sum_exp(terms: FloatArray, axis: int | None = None) -> FloatArray:
    """``ln sum exp(terms)`` along ``axis``, shifted by the largest term (no overflow,
    and no underflow of the largest); a slice of -inf only gives -inf.

    SciPy's ``logsumexp`` computes the same, with array-API dispatch that made it 2-5x
    slower on these blocks (most of the groupwise analyses' time).
    """
    top = np.max(terms, axis=axis, keepdims=True)
    shift = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(terms - shift), axis=axis, keepdims=True)) + shift
    return np.asarray(np.squeeze(out, axis=axis) if axis is not None else out.reshape(()))


def log_density_on(y: FloatArray, count: float, sigma: float, r: float, nodes: Nodes) -> FloatArray:
    """``ln p_count(y)`` for ``y != 0`` by the trapezoid rule on the given ``t`` nodes."""
    t = nodes.points
    # ln f_X(t) + ln(weight / |t|); the 1/|t| of the change of variables w = y/t
    base = (
        -0.5 * ((t - count) / sigma) ** 2
        - math.log(sigma)
        - 0.5 * _LOG_2PI
        + nodes.log_weights
        - np.log(np.abs(t))
        - math.log(r)
        - 0.5 * _LOG_2PI
    )
    out = np.empty(y.size)
    rows = max(1, _CHUNK // max(1, t.size))
    for start in range(0, y.size, rows):
        block = y[start : start + rows, None]
        w = block / t[None, :]
        out[start : start + rows] = log_sum_exp(base[None, :] - 0.5 * ((w - 1.0) / r) ** 2, axis=1)
    return out


def cdf_on(y: FloatArray, count: float, sigma: float, r: float, nodes: Nodes) -> FloatArray:
    """``P(X W <= y)`` on the given ``t`` nodes: ``E[Phi((y/X - 1)/r)]`` for ``X > 0``,
    ``E[1 - Phi((y/X - 1)/r)]`` for ``X < 0``."""
    from scipy.special import log_ndtr  # deferred: SciPy is slow to import

    t = nodes.points
    base = -0.5 * ((t - count) / sigma) ** 2 - math.log(sigma) - 0.5 * _LOG_2PI + nodes.log_weights
    sign = np.where(t > 0, 1.0, -1.0)
    out = np.empty(y.size)
    rows = max(1, _CHUNK // max(1, t.size))
    for start in range(0, y.size, rows):
        z = (y[start : start + rows, None] / t[None, :] - 1.0) / r
        out[start : start + rows] = np.exp(log_sum_exp(base[None, :] + log_ndtr(sign * z), axis=1))
    return out
