"""Tail probabilities of the discrete Laplace and discrete Gaussian distributions.

Shared by the mechanisms' error bounds (:meth:`DiscreteLaplace.error`,
:meth:`DiscreteGaussian.error`) and by threshold-based key selection
(:func:`dpkit.analytics._accounting.selection_threshold`), which needs the same tails
to bound the probability that a key held by one person is released.
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["discrete_gaussian_tail_upper", "discrete_laplace_tail", "symmetric_half_width"]


def discrete_laplace_tail(t: int, scale: float) -> float:
    """``P[Z >= t]`` for discrete Laplace of scale ``scale``: ``q^t / (1 + q)`` for t >= 1
    with ``q = e^(-1/scale)`` (rounded up slightly)."""
    if t <= 0:
        return 1.0
    q = math.exp(-1.0 / scale)
    return min(1.0, q**t / (1.0 + q) * (1.0 + 1e-12))


#: At most this many terms of the discrete Gaussian tail are added one by one.
_MAX_TERMS = 1 << 22
#: Relative allowance for the rounding of exp, erfc and the sums below (each term's
#: exponent has relative error ~3u, so its exp errs by ~3u |exponent| <= 2.5e-13 where
#: it does not underflow; erfc and exp by a few ulps; pairwise sums by log2(n) u).
_REL = 1e-10
_FLOOR = 1e-300


def _gaussian_log_normaliser_lower(sigma: float) -> float:
    """log of a lower bound on ``Z = sum_z exp(-z^2 / (2 sigma^2))`` (partial sums).

    Poisson summation gives ``Z = sigma sqrt(2 pi) (1 + 2 sum_{k>=1} e^{-2 pi^2 sigma^2
    k^2})``; for small sigma the direct series converges at once. Partial sums of
    positive terms are lower bounds.
    """
    poisson = math.fsum(2.0 * math.exp(-2.0 * math.pi**2 * sigma**2 * k * k) for k in (1, 2, 3))
    log_z = 0.5 * math.log(2.0 * math.pi) + math.log(sigma) + math.log1p(poisson)
    if sigma < 2.0:
        direct = 1.0 + 2.0 * math.fsum(
            math.exp(-(z * z) / (2.0 * sigma * sigma)) for z in range(1, 64)
        )
        log_z = max(log_z, math.log(direct))
    return log_z - _REL


def _gaussian_tail_sum_upper(t: int, sigma: float) -> float:
    """An upper bound on ``sum_{z >= t} f(z)``, ``f(x) = exp(-x^2 / (2 sigma^2))``, ``t >= 1``.

    Terms are added one by one up to ``m`` with ``m^2 >= t^2 + 64 sigma^2``; the rest is
    at most ``f(m) / (1 - e^{-m / sigma^2})`` (``y^2 >= m^2 + 2 m (y - m)``), below
    ``e^-32`` of the sum. When that needs too many terms (sigma > ~5e5), ``f`` being
    convex beyond ``sigma``, each term past ``m' = max(t, ceil(sigma + 1/2))`` is at
    most its mean over ``[z - 1/2, z + 1/2]`` (Jensen), so that part is at most
    ``sigma sqrt(pi/2) erfc((m' - 1/2) / (sigma sqrt 2))`` (relative error O(sigma^-2)).
    ``f(t) + int_t^inf f`` (``f`` decreasing) is the last resort.
    """
    s2 = sigma * sigma
    root = sigma * math.sqrt(2.0)

    def terms(first: int, stop: int) -> float:
        z = np.arange(first, stop, dtype=np.float64)
        return float(np.sum(np.exp(-(z * z) / (2.0 * s2)))) if stop > first else 0.0

    m = math.ceil(math.sqrt(float(t) * t + 64.0 * s2)) + 1
    if m - t <= _MAX_TERMS:
        rest = math.exp(-(m * m) / (2.0 * s2)) / -math.expm1(-m / s2)
        return (terms(t, m) + rest) * (1.0 + _REL)
    m = max(t, math.ceil(sigma + 0.5))
    if m - t <= _MAX_TERMS:
        tail = sigma * math.sqrt(math.pi / 2.0) * math.erfc((m - 0.5) / root)
        return (terms(t, m) + tail) * (1.0 + _REL)
    first = math.exp(-(t * t) / (2.0 * s2))
    return (first + sigma * math.sqrt(math.pi / 2.0) * math.erfc(t / root)) * (1.0 + _REL)


def discrete_gaussian_tail_upper(t: int, sigma: float) -> float:
    """Upper bound on ``P[Z >= t]`` for the discrete Gaussian ``N_Z(0, sigma^2)``, t >= 0.

    The numerator ``sum_{z >= t} f(z)`` is summed term by term with a proven bound on
    the rest (see :func:`_gaussian_tail_sum_upper`); the normaliser is bounded below
    by partial sums of its Poisson summation series. Within a relative 1e-9 of the
    exact tail for sigma up to ~5e5 (and O(sigma^-2) beyond), rounded up; tails below
    1e-300 are reported as (at most) 1e-300 over the normaliser.
    """
    if t <= 0:
        return 1.0
    # Terms below ~1e-308 underflow: 1e-300 is a safe floor for the numerator.
    log_num = math.log(max(_gaussian_tail_sum_upper(t, sigma), _FLOOR))
    return min(1.0, math.exp(log_num - _gaussian_log_normaliser_lower(sigma)) * (1.0 + _REL))


# Memoised: a pure function of public parameters, computed for every released interval
# (two discrete Gaussian tail sums per step of its walk: 0.2 ms, half of a Session
# release's time when an audit or a loop releases the same query again and again).
@functools.lru_cache(maxsize=4096)
def symmetric_half_width(kind: str, width: float, confidence: float) -> int:
    """Smallest integer ``h`` with ``P(|Z| > h) <= 1 - confidence`` for discrete Laplace
    (``kind="laplace"``, scale ``width``: exact, ``P(|Z| > h) = 2 q^(h+1) / (1 + q)``) or
    the discrete Gaussian (``kind="gaussian"``, sigma ``width``: twice
    :func:`discrete_gaussian_tail_upper`, within a relative 1e-9 of the exact tail, so
    ``h`` is the exact quantile unless the tail at ``h + 1`` is within 1e-9 of
    ``1 - confidence``)."""
    alpha = 1.0 - confidence
    if kind == "laplace":
        q = math.exp(-1.0 / width)  # 0.0 below width ~1/745: then Z = 0 and h = 0

        def tail(h: int) -> float:
            # P(|Z| > h) = 2 q^(h+1) / (1 + q), with q^(h+1) as exp(-(h+1)/width): a
            # rounded q raised to a huge power would drift (at width 1e11 by ~1e-7).
            return 2.0 * math.exp(-(h + 1) / width) / (1.0 + q)

        # log q is -1/width (not log(q), which fails once q underflows to 0); the
        # closed form lands within a unit or two, and the loops settle it exactly.
        h = max(0, math.ceil(math.log(alpha * (1.0 + q) / 2.0) * -width - 1.0))
        while h > 0 and tail(h - 1) <= alpha:
            h -= 1
        while tail(h) > alpha:
            h += 1
        return h
    # Start near the continuous Gaussian's quantile; the discrete one is within a few
    # units of it, so the walks are short.
    h = max(0, math.floor(width * math.sqrt(2.0) * _erfcinv(alpha)) - 2)
    while h > 0 and 2.0 * discrete_gaussian_tail_upper(h, width) <= alpha:
        h -= 1
    while 2.0 * discrete_gaussian_tail_upper(h + 1, width) > alpha:
        h += 1
    return h


def _erfcinv(y: float) -> float:
    low, high = 0.0, 40.0
    for _ in range(100):
        mid = 0.5 * (low + high)
        if math.erfc(mid) > y:
            low = mid
        else:
            high = mid
    return low
