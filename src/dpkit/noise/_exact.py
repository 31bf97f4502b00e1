"""Vectorised exact samplers: discrete Laplace, discrete Gaussian, Bernoulli(exp(-x)),
and continuous Laplace, Gaussian and truncated Laplace rounded exactly to a grid.

All samplers draw through :mod:`dpkit.noise._certified` (inversion on lazily refined
uniforms), so every output follows the stated distribution exactly. They stream in
chunks of ``CHUNK`` draws, so peak memory is the output array plus a few chunk-sized
temporaries.

Exactly rounded continuous noise
--------------------------------
``rounded_*`` functions return ``K = floor(f + 1/2 + X)`` for a noise variable ``X``
(in grid units) and each offset ``f`` in [-1/2, 1/2] of :class:`GridOffsets`. A
mechanism splits its input exactly as ``x = base + g f`` (``base`` on the grid ``g Z``,
``g`` a power of two; :func:`dpkit.noise._grid.split_on_grid`) and releases
``base + g K = g floor(x / g + 1/2 + X)``, rounded once to float64
(:func:`dpkit.noise._grid.add_on_grid`): the exact real number ``x + g X`` rounded to
the grid. That is post-processing of the ideal real-valued mechanism, so it keeps
the ideal guarantee (Laplace: epsilon = sensitivity / scale; Gaussian: the exact
Gaussian privacy profile), and the released float depends on the input only through
that rounded real number -- which is what defeats Mironov's (2012) attack on
``x + rng.laplace(b)``.

Why the discrete Laplace filter is exact
----------------------------------------
The argument, spelled out so that a reviewer can check each step; ``u = 2^-53`` is the
unit roundoff of float64, and every libm / NumPy elementary function (``log``,
``log1p``, ``expm1``) is assumed accurate to 4 ulps, i.e. to a relative error of
``8u = 2^-50`` (glibc documents at most 1-2 ulps for these; NumPy's SIMD ``log`` 4).

*Exact quantity.* ``|Z| = M(U) = max(0, floor(X(U)))`` with ``X(U) = t (c - ln U)``,
``c = ln(2 / (1 + e^{-1/t}))`` and ``U`` uniform on (0, 1); then
``P(M >= m) = P(U <= e^{c - m/t}) = e^{-m/t} 2 / (1 + e^{-1/t})`` for ``m >= 1``, the
discrete Laplace tail. The filter knows ``U`` only to lie in ``[a, a + 2^-53)`` with
``a = k 2^-53``, ``k`` an integer. ``X`` is decreasing, so over that interval ``X`` lies
in ``[X(a) - t ln(1 + 1/k), X(a)]`` and ``t ln(1 + 1/k) <= t / k``. (``k = 0`` gives
``X(a) = inf``: never decided by the filter.)

*The constant.* ``1 + expm1(-1/t) / 2 = (1 + e^{-1/t}) / 2``, so
``c = -log1p(expm1(-1/t) / 2)``, and the float ``c~`` is computed in that form. Errors:
``-1/t`` is one division (relative error ``<= u``); ``expm1`` at ``q < 0`` has
condition number ``|q e^q / expm1(q)| = s / (e^s - 1) <= 1`` (``s = -q``), so its
result carries ``<= u + 8u = 9u``; halving is exact; ``log1p`` at ``y`` in
``[-1/2, 0)`` has condition number ``|y / ((1 + y) log1p(y))| <= 1 / ln 2`` (largest
at ``y = -1/2``), so ``|c~ / c - 1| <= 8u + 9u / ln 2 < 21u < 2^-48``. For ``t`` so
small that ``1/t`` overflows, ``expm1(-inf) = -1`` and ``c~ = fl(ln 2)``, which is
within ``u`` of ``c = ln 2 - O(e^{-1/t})``. The former expression
``ln 2 - log1p(e^{-1/t})`` subtracts two numbers near ``ln 2``: its *absolute* error is
about ``u``, so its relative error grows like ``2 t u`` (2e-10 at t = 10^6) --
far beyond the margin below, which is what made the filter assign about 4e-15 (t =
10^6) and 4e-14 (t = 3 * 10^7) of probability to the wrong magnitude.

*The float value.* ``L~ = -log(a)`` (relative error ``<= 8u``), ``x = fl(t fl(c~ +
L~))``. Both summands are >= 0, so the sum's relative error is at most the larger of
theirs plus ``u``; with the product's ``u``: ``|x - X(a)| <= 2^-47 X(a)``. (Where ``x``
is subnormal it is far below every boundary; see the "small" rule below.)

*The decision.* With ``w = fl(t / k)`` and ``margin = 2^-44 x`` (exact: a power of
two), the filter forms ``low = fl(fl(x - w) - margin)`` and ``high = fl(x + margin)``
and accepts ``j = floor(low)`` when it equals ``floor(high)``: then ``[low, high]``
lies in ``[j, j + 1)``, and the decision is right for every ``U`` of the prefix
interval as soon as ``low <= X(a) - t/k`` and ``X(a) <= high``:

* ``high >= X(a)``: ``high >= x (1 + 2^-44)(1 - u)`` and
  ``X(a) <= x / (1 - 2^-47)``; ``(1 + 2^-44)(1 - 2^-53)(1 - 2^-47) > 1``.
* ``low <= X(a) - t/k``: ``X(a) - t/k >= x (1 - 2^-47) - w (1 + 2u)``, and the two
  rounded subtractions add at most ``2.01 u (x + w)``. Since ``1/k <= 2 ln(2^53 / k)``
  for ``1 <= k < 2^53``, ``w <= 2 (1 + u) t L <= 3x``, so everything to cover is
  ``x (2^-47 + 2.01u * 4 + 2u * 3) < 2^-46.5 x``, less than ``margin = 2^-44 x``: the
  margin covers the float errors with a factor > 5 to spare.

The "small" rule outputs 0 when ``high < 1``, which is right because
``X(a) <= high``. The magnitude is never negative (``X >= t c > 0``).

*Inconclusive draws.* When ``floor(low) != floor(high)`` (``[low, high]``, about
``2^-43 x + t/k`` wide, holds an integer: a fraction of about ``2^-43 t`` of the
draws for large ``t``, far fewer for small) or ``x`` is not finite, the draw goes to
:func:`dpkit.noise._certified.refine`. It appends 64 fresh random bits to ``U``'s
prefix (given its prefix, ``U`` is uniform on the interval, so this *is* drawing
``U`` further) and evaluates ``X`` at both ends of the shrinking interval in
:mod:`decimal` at >= 75 digits, ends rounded outwards and padded by
``10^(6 - precision) (|X| + t + 1)``. There ``c`` is computed as
``ln 2 - ln(1 + e^{-1/t})``; its cancellation costs an absolute ``~10^(1 - precision)``
in ``c``, so ``~t 10^(1 - precision)`` in ``X``, which the ``t`` term of the padding
covers 10^5 times over. It repeats until the padded interval lies between two
integers, which happens with probability 1. So every output is ``M(U)`` for the
real ``U``: exactly the discrete Laplace distribution.

Why this module is long (~510 lines): the margin argument of the float filter is
written out in this docstring so that it can be checked line by line.
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Callable
from decimal import Decimal
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from dpkit.noise._certified import (
    FLOAT_MARGIN,
    decide_floor,
    decide_sign,
    floor_decision,
    refine,
    sign_decision,
    uniform_prefix,
)
from dpkit.noise._grid import GridOffsets
from dpkit.random import Random

CHUNK = 1 << 16

F = TypeVar("F", bound=Callable[..., object])


def _quiet(function: F) -> F:
    """Silence NumPy's inf/nan warnings: the filters mark non-finite values undecided."""

    @functools.wraps(function)
    def wrapper(*args: object, **kwargs: object) -> object:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return function(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def _prefix_int(k: float) -> int:
    return int(k)


def _neg_log(a: FloatArray) -> FloatArray:
    with np.errstate(divide="ignore"):
        result: FloatArray = -np.log(a)
    return result


def _width(scale: float, k: FloatArray) -> FloatArray:
    # -ln U over U in [a, a + 2^-53) spans at most ln(1 + 1/k) <= 1/k.
    with np.errstate(divide="ignore"):
        result: FloatArray = scale / k
    return result


# --------------------------------------------------------------------------- Bernoulli


def _bernoulli_exp_exact(prefix: int, gamma: float, rng: Random) -> bool:
    exact_gamma = Decimal(gamma)

    def evaluate(u: Decimal) -> tuple[Decimal, Decimal]:
        return -u.ln() - exact_gamma, -u.ln() + exact_gamma

    return refine(prefix, evaluate, decide_sign, rng)


@_quiet
def bernoulli_exp(gamma: FloatArray, rng: Random) -> BoolArray:
    """Exact Bernoulli(exp(-gamma)) for each (exact, float) ``gamma >= 0``: ``U < e^-gamma``."""
    gamma = np.ascontiguousarray(gamma, dtype=np.float64)
    out = np.empty(gamma.shape, dtype=np.bool_)
    flat_gamma, flat_out = gamma.reshape(-1), out.reshape(-1)
    for start in range(0, flat_gamma.size, CHUNK):
        g = flat_gamma[start : start + CHUNK]
        k, a = uniform_prefix(rng.uint64(g.size))
        neg_log_u = _neg_log(a)  # decide sign of (-ln U - gamma)
        margin = FLOAT_MARGIN * (neg_log_u + g)
        value = neg_log_u - g
        positive, decided = sign_decision(value - _width(1.0, k) - margin, value + margin)
        for i in np.flatnonzero(~decided):
            positive[i] = _bernoulli_exp_exact(_prefix_int(k[i]), float(g[i]), rng)
        flat_out[start : start + g.size] = positive
    return out


# --------------------------------------------------------------------- discrete Laplace


def _dlap_offset(scale: float) -> float:
    # c = ln(2 / (1 + e^(-1/t))): P(|Z| >= m) = e^{-m/t} * 2/(1 + e^{-1/t}) for m >= 1.
    # Written as -log1p(expm1(-1/t) / 2): relative error < 21u for every t (module
    # docstring). ln 2 - log1p(e^(-1/t)) cancels to ~1/(2t), relative error ~2tu.
    return -math.log1p(math.expm1(-1.0 / scale) / 2.0)


def _dlap_magnitude_exact(prefix: int, scale: float, rng: Random) -> int:
    t = Decimal(scale)

    def evaluate(u: Decimal) -> tuple[Decimal, Decimal]:
        c = Decimal(2).ln() - (1 + (-1 / t).exp()).ln()
        value = t * (c - u.ln())
        return value, abs(value) + t

    def decide(low: Decimal, high: Decimal) -> int | None:
        return 0 if high < 1 else decide_floor(low, high)

    return max(0, refine(prefix, evaluate, decide, rng))


@_quiet
def discrete_laplace_chunk(scale: float, n: int, rng: Random) -> IntArray:
    """``n`` draws with P(z) proportional to ``exp(-|z| / scale)`` on the integers.

    Inversion of the magnitude: ``|Z| = max(0, floor(t (c - ln U)))`` with
    ``c = ln(2 / (1 + e^{-1/t}))``, and an independent fair sign.
    """
    words = rng.uint64(n)
    k, a = uniform_prefix(words)
    negative = (words & np.uint64(1)).astype(np.bool_)
    c = _dlap_offset(scale)
    x = scale * (c + _neg_log(a))
    margin = FLOAT_MARGIN * x
    magnitude, decided = floor_decision(x - _width(scale, k) - margin, x + margin)
    small = (x + margin) < 1
    magnitude[small] = 0
    decided |= small
    np.maximum(magnitude, 0, out=magnitude)
    for i in np.flatnonzero(~decided):
        magnitude[i] = _dlap_magnitude_exact(_prefix_int(k[i]), scale, rng)
    return np.where(negative, -magnitude, magnitude)


def discrete_laplace(scale: float, size: int, rng: Random) -> IntArray:
    """Exact discrete Laplace draws (see :func:`discrete_laplace_chunk`), streamed."""
    out = np.empty(size, dtype=np.int64)
    for start in range(0, size, CHUNK):
        stop = min(start + CHUNK, size)
        out[start:stop] = discrete_laplace_chunk(scale, stop - start, rng)
    return out


# -------------------------------------------------------------------- discrete Gaussian


def _dgauss_accept_exact(prefix: int, y: int, sigma: float, t: int, rng: Random) -> bool:
    s, magnitude = Decimal(sigma), abs(Decimal(y))  # exact conversions

    def evaluate(u: Decimal) -> tuple[Decimal, Decimal]:
        # Every rounded operation happens here, in refine's context, so its padding
        # covers them.
        shift = magnitude - s * s / t
        z = shift * shift / (2 * s * s)
        return -u.ln() - z, -u.ln() + z + magnitude + s

    return refine(prefix, evaluate, decide_sign, rng)


@_quiet
def discrete_gaussian(sigma: float, size: int, rng: Random) -> IntArray:
    """Exact draws with P(z) proportional to exp(-z^2 / (2 sigma^2)) on the integers.

    Canonne, Kamath & Steinke 2020, Algorithm 3: propose ``Y`` from the discrete
    Laplace with ``t = floor(sigma) + 1`` and accept with probability
    ``exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))``; both steps exact.
    """
    t = math.floor(sigma) + 1
    variance = sigma * sigma
    out = np.empty(size, dtype=np.int64)
    filled = 0
    acceptance = 0.5  # refined from the first batch; only affects batch sizes
    while filled < size:
        want = size - filled
        n = min(CHUNK, max(64, int(want / acceptance * 1.1) + 16))
        y = discrete_laplace_chunk(float(t), n, rng)
        k, a = uniform_prefix(rng.uint64(n))
        neg_log_u = _neg_log(a)
        abs_y = np.abs(y).astype(np.float64)
        z = (abs_y - variance / t) ** 2 / (2 * variance)
        margin = FLOAT_MARGIN * (neg_log_u + (abs_y + variance / t) ** 2 / (2 * variance) + 1)
        value = neg_log_u - z
        accept, decided = sign_decision(value - _width(1.0, k) - margin, value + margin)
        for i in np.flatnonzero(~decided):
            accept[i] = _dgauss_accept_exact(_prefix_int(k[i]), int(y[i]), sigma, t, rng)
        accepted = y[accept]
        acceptance = max(0.05, accepted.size / n)
        take = min(accepted.size, want)
        out[filled : filled + take] = accepted[:take]
        filled += take
    return out


# ------------------------------------------------------- exactly rounded continuous noise


def _round_laplace_exact(prefix: int, f: Decimal, sign: int, scale: float, rng: Random) -> int:
    """``floor(f + 1/2 + sign * scale * (-ln U))`` for a ``U`` with known prefix, exactly.

    ``f`` is the exact offset (:meth:`GridOffsets.exact`).
    """
    t = Decimal(scale)

    def evaluate(u: Decimal) -> tuple[Decimal, Decimal]:
        e = -t * u.ln()
        return f + Decimal("0.5") + sign * e, abs(f) + 1 + e

    return refine(prefix, evaluate, decide_floor, rng)


@_quiet
def rounded_laplace(offsets: GridOffsets, scale: float, rng: Random) -> IntArray:
    """``floor(f + 1/2 + X)`` for ``X ~ Laplace(0, scale)``, exactly, for each offset ``f``.

    ``scale`` is in grid units (noise scale / grid step).
    """
    fraction = offsets.fraction
    n = fraction.size
    words = rng.uint64(n)
    k, a = uniform_prefix(words)
    sign = np.where((words & np.uint64(1)).astype(np.bool_), -1.0, 1.0)
    e = scale * _neg_log(a)  # Exponential(scale) = |X|
    value = fraction + 0.5 + sign * e
    margin = FLOAT_MARGIN * (np.abs(fraction) + 1.0 + e)
    width = _width(scale, k)
    low = value - margin - np.where(sign > 0, width, 0.0)
    high = value + margin + np.where(sign < 0, width, 0.0)
    result, decided = floor_decision(low, high)
    for i in np.flatnonzero(~decided):
        result[i] = _round_laplace_exact(
            _prefix_int(k[i]), offsets.exact(int(i)), int(sign[i]), scale, rng
        )
    return result


def _truncation_constants(scale: float, bound: float) -> tuple[float, float]:
    r = math.exp(-bound / scale)
    return r, -math.expm1(-bound / scale)


def _round_truncated_exact(
    prefix: int, f: Decimal, sign: int, scale: float, bound: float, rng: Random
) -> int:
    t, big_a = Decimal(scale), Decimal(bound)

    def evaluate(u: Decimal) -> tuple[Decimal, Decimal]:
        r = (-big_a / t).exp()
        e = -t * (r + u * (1 - r)).ln()
        return f + Decimal("0.5") + sign * e, abs(f) + 1 + e + t

    return refine(prefix, evaluate, decide_floor, rng)


@_quiet
def rounded_truncated_laplace(
    offsets: GridOffsets, scale: float, bound: float, rng: Random
) -> IntArray:
    """``floor(f + 1/2 + X)`` for ``X`` Laplace(0, scale) conditioned on ``|X| <= bound``.

    ``|X| = -scale * ln(r + U (1 - r))`` with ``r = e^{-bound/scale}`` (inversion of
    the exponential truncated to [0, bound]); ``scale`` and ``bound`` in grid units.
    """
    fraction = offsets.fraction
    n = fraction.size
    words = rng.uint64(n)
    k, a = uniform_prefix(words)
    sign = np.where((words & np.uint64(1)).astype(np.bool_), -1.0, 1.0)
    r, one_minus_r = _truncation_constants(scale, bound)
    v_low = r + a * one_minus_r
    e = scale * _neg_log(v_low)
    value = fraction + 0.5 + sign * e
    margin = FLOAT_MARGIN * (np.abs(fraction) + 1.0 + e + scale)
    # ln V moves by at most (1 - r) 2^-53 / V over the prefix interval.
    width = scale * one_minus_r * 2.0**-53 / v_low
    low = value - margin - np.where(sign > 0, width, 0.0)
    high = value + margin + np.where(sign < 0, width, 0.0)
    result, decided = floor_decision(low, high)
    for i in np.flatnonzero(~decided):
        result[i] = _round_truncated_exact(
            _prefix_int(k[i]), offsets.exact(int(i)), int(sign[i]), scale, bound, rng
        )
    return result


def _round_gaussian_exact(
    prefixes: tuple[int, int], f: Decimal, sign: int, sigma: float, rng: Random
) -> int | None:
    """Scalar fallback of :func:`rounded_gaussian`: refine both uniforms of one attempt.

    ``f`` is the exact offset. Returns the rounded value, or None when the attempt is
    rejected.
    """
    s = Decimal(sigma)
    (n1, n2), bits, precision = prefixes, 53, 50
    for _ in range(200):
        n1 = (n1 << 64) | rng.getrandbits(64)
        n2 = (n2 << 64) | rng.getrandbits(64)
        bits, precision = bits + 64, precision + 25
        with decimal.localcontext() as ctx:
            ctx.prec = precision
            ctx.traps[decimal.DivisionByZero] = False
            ctx.traps[decimal.InvalidOperation] = False
            d = Decimal(2) ** bits
            ctx.rounding = decimal.ROUND_FLOOR
            u1_low, u2_low = Decimal(n1) / d, Decimal(n2) / d
            ctx.rounding = decimal.ROUND_CEILING
            u1_high, u2_high = Decimal(n1 + 1) / d, Decimal(n2 + 1) / d
            ctx.rounding = decimal.ROUND_HALF_EVEN
            l1_low, l1_high = -u1_high.ln(), -u1_low.ln()  # L = -ln U is decreasing in U
            l2_low, l2_high = -u2_high.ln(), -u2_low.ln()
            if not (l1_high.is_finite() and l2_high.is_finite()):
                continue
            pad = (l1_high + l2_high + s + abs(f) + 2) * Decimal(10) ** (6 - precision)
            q_ends = ((l1_low - 1) ** 2 / 2, (l1_high - 1) ** 2 / 2)
            q_min = Decimal(0) if l1_low <= 1 <= l1_high else min(q_ends)
            q_max = max(q_ends)
            if l2_high + pad < q_min:
                return None
            if l2_low - pad <= q_max:
                continue
            ends = [f + Decimal("0.5") + sign * s * bound for bound in (l1_low, l1_high)]
            decided = decide_floor(min(ends) - pad, max(ends) + pad)
        if decided is not None:
            return decided
    raise AssertionError("unreachable with probability 1")  # pragma: no cover


# Prefixes below 2^36 (probability 2^-17 per uniform) go to the exact fallback, which
# bounds every quantity of the Gaussian filter: L = -ln U <= 36 ln 2 + 1 < 26 and the
# prefix interval's width in L is 1/k <= 2^-36.
_SMALL_PREFIX = 2.0**36
# |error| of gap = L2 - (L1 - 1)^2/2 in floats: FLOAT_MARGIN * (26 + 26^2/2 + 1) < 2^-34,
# plus the width terms (|L1 - 1| + 1)/k1 + 1/k2 < 27 * 2^-36 < 2^-31.
_GAP_MARGIN = 2.0**-30


@_quiet
def rounded_gaussian(offsets: GridOffsets, sigma: float, rng: Random) -> IntArray:
    """``floor(f + 1/2 + X)`` for ``X ~ N(0, sigma^2)``, exactly, for each offset ``f``.

    Continuous analogue of CKS20 Algorithm 3: propose ``X = S sigma L`` with
    ``L = -ln U1`` (a Laplace of scale sigma) and accept when
    ``-ln U2 > (L - 1)^2 / 2``, i.e. with probability
    ``exp(-(|X| - sigma)^2 / (2 sigma^2))``; the accepted ``X`` is exactly
    N(0, sigma^2) (acceptance rate sqrt(pi / (2e)) ~ 0.76).

    Acceptance does not depend on the offsets, so proposals are drawn in bulk and the
    i-th accepted one serves the i-th output. Float filter: with both 53-bit prefixes
    at least 2^36, every error of the acceptance test is below ``_GAP_MARGIN``; when
    acceptance is decided for the whole prefix box, ``U1`` is still uniform on its
    prefix interval, so the rounding alone may be refined (``_round_scaled_exact``).
    Undecided proposals are settled jointly, in order (``_round_gaussian_exact``).
    ``sigma`` is in grid units.
    """
    fraction = offsets.fraction
    size = fraction.size
    out = np.empty(size, dtype=np.int64)
    filled = 0
    rounding_margin = FLOAT_MARGIN * (2.0 + 26.0 * sigma)
    while filled < size:
        n = int((size - filled) * 1.34) + 64  # 1/0.76 plus slack
        words = rng.uint64(2 * n)
        k1, a1 = uniform_prefix(words[:n])
        k2, a2 = uniform_prefix(words[n:])
        l1 = -np.log(a1)
        d = l1 - 1.0
        gap = -np.log(a2) - 0.5 * d * d
        usable = (k1 >= _SMALL_PREFIX) & (k2 >= _SMALL_PREFIX)
        accept = (gap > _GAP_MARGIN) & usable
        undecided = ~(accept | ((gap < -_GAP_MARGIN) & usable))
        negative = (words[:n] & np.uint64(1)).astype(np.bool_)
        # Settle undecided proposals in order; each knows its output slot once the
        # proposals before it are settled.
        settled: dict[int, int] = {}
        for i in np.flatnonzero(undecided):
            # accept[:i] already counts the earlier proposals settled as accepted.
            slot = filled + int(np.count_nonzero(accept[:i]))
            if slot >= size:
                break
            exact = _round_gaussian_exact(
                (_prefix_int(k1[i]), _prefix_int(k2[i])),
                offsets.exact(slot),
                -1 if negative[i] else 1,
                sigma,
                rng,
            )
            if exact is not None:
                settled[int(i)] = exact
                accept[i] = True
        chosen = np.flatnonzero(accept)[: size - filled]
        slots = slice(filled, filled + chosen.size)
        f = fraction[slots]
        # S sigma L1 lies in S sigma [l1 - 1/k1, l1]: a centre and a half-width.
        half = (0.5 * sigma) / k1[chosen]
        x = sigma * l1[chosen] - half
        np.negative(x, out=x, where=negative[chosen])
        centre = f + 0.5 + x
        half += rounding_margin
        rounded = np.floor(centre - half)
        ok = rounded == np.floor(centre + half)
        result = rounded.astype(np.int64)
        for j in np.flatnonzero(~ok):
            proposal = int(chosen[j])
            if proposal in settled:
                result[j] = settled[proposal]
            else:
                result[j] = _round_laplace_exact(
                    _prefix_int(k1[proposal]),
                    offsets.exact(filled + int(j)),
                    -1 if negative[proposal] else 1,
                    sigma,
                    rng,
                )
        for j in np.flatnonzero(np.isin(chosen, list(settled))):
            result[j] = settled[int(chosen[j])]  # settled jointly, rounding included
        out[slots] = result
        filled += chosen.size
    return out
