"""Tail probabilities of the discrete Laplace and discrete Gaussian distributions.

Shared by the mechanisms' error bounds (:meth:`DiscreteLaplace.error`,
:meth:`DiscreteGaussian.error`) and by threshold-based key selection
(:func:`dpkit.analytics._accounting.selection_threshold`), which needs the same tails
to bound the probability that a key held by one person is released.
"""

from __future__ import annotations

import math

__all__ = ["discrete_gaussian_tail_upper", "discrete_laplace_tail", "symmetric_half_width"]


def discrete_laplace_tail(t: int, scale: float) -> float:
    """``P[Z >= t]`` for discrete Laplace of scale ``scale``: ``q^t / (1 + q)`` for t >= 1
    with ``q = e^(-1/scale)`` (rounded up slightly)."""
    if t <= 0:
        return 1.0
    q = math.exp(-1.0 / scale)
    return min(1.0, q**t / (1.0 + q) * (1.0 + 1e-12))


def discrete_gaussian_tail_upper(t: int, sigma: float) -> float:
    """Upper bound on ``P[Z >= t]`` for the discrete Gaussian ``N_Z(0, sigma^2)``, t >= 0.

    Numerator: ``sum_{z>=t} f(z) <= f(t) + int_t^inf f`` (f decreasing on [0, inf));
    normaliser: ``sum_z f(z) >= sigma sqrt(2 pi)`` (Poisson summation: the sum equals
    ``sigma sqrt(2 pi) (1 + 2 sum_k exp(-2 pi^2 sigma^2 k^2))``). Rounded up slightly.
    """
    if t <= 0:
        return 1.0
    f_t = math.exp(-(t * t) / (2.0 * sigma * sigma))
    integral = sigma * math.sqrt(math.pi / 2.0) * math.erfc(t / (sigma * math.sqrt(2.0)))
    return min(1.0, (f_t + integral) / (sigma * math.sqrt(2.0 * math.pi)) * (1.0 + 1e-12))


def symmetric_half_width(kind: str, width: float, confidence: float) -> int:
    """Smallest integer ``h`` with ``P(|Z| > h) <= 1 - confidence`` for discrete Laplace
    (``kind="laplace"``, scale ``width``: exact, ``P(|Z| > h) = 2 q^(h+1) / (1 + q)``) or
    an upper bound for the discrete Gaussian (``kind="gaussian"``, sigma ``width``:
    twice :func:`discrete_gaussian_tail_upper`)."""
    alpha = 1.0 - confidence
    if kind == "laplace":
        q = math.exp(-1.0 / width)
        h = max(0, math.ceil(math.log(alpha * (1.0 + q) / 2.0) / math.log(q) - 1.0))
        while h > 0 and 2.0 * q**h / (1.0 + q) <= alpha:
            h -= 1
        while 2.0 * q ** (h + 1) / (1.0 + q) > alpha:
            h += 1
        return h
    # Start just below the continuous Gaussian's quantile; the discrete bound is within
    # a few units of it, so the walk is short.
    h = max(0, math.floor(width * math.sqrt(2.0) * _erfcinv(alpha)) - 2)
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
