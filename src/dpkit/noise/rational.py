"""Exact samplers for rational parameters, in integer arithmetic only (CKS20, Algs 1-3).

These are the algorithms of Canonne, Kamath & Steinke, "The Discrete Gaussian for
Differential Privacy" (NeurIPS 2020, arXiv 2004.00010), Algorithms 1-3: Bernoulli(p),
Bernoulli(exp(-gamma)), the discrete Laplace and the discrete Gaussian, for parameters
given as exact rationals (:class:`fractions.Fraction` or ``int``), written with Python
integers only: every random decision is a comparison of a uniform random integer with
an integer. They are slow (one Python loop per draw) and serve as the ground truth that
the fast vectorised float-parameter samplers of :mod:`dpkit.noise` are tested against;
they are public for authors who want to check their own samplers.

Examples
--------
>>> import warnings
>>> from fractions import Fraction
>>> import dpkit as dp
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore", dp.InsecureRandomWarning)
...     rng = dp.random.as_random(0)
>>> from dpkit.noise.rational import discrete_gaussian
>>> isinstance(discrete_gaussian(Fraction(4), rng=rng), int)
True
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpkit.errors import InvalidParameter
from dpkit.random import Random, RandomLike, as_random

__all__ = ["bernoulli", "bernoulli_exp", "discrete_gaussian", "discrete_laplace"]


def _rational(value: Fraction | int, name: str, owner: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, Fraction | int):
        raise InvalidParameter.for_parameter(name, owner, "a Fraction or int", value)
    return Fraction(value)


def bernoulli(p: Fraction, *, rng: RandomLike | None = None) -> bool:
    """Exact Bernoulli(p) for rational ``p`` in [0, 1]: a uniform integer below a bound."""
    p = _rational(p, "p", "bernoulli")
    if not 0 <= p <= 1:
        raise InvalidParameter.for_parameter("p", "bernoulli", "a Fraction in [0, 1]", p)
    return as_random(rng).integers(p.denominator) < p.numerator


def _bernoulli_exp_unit(gamma: Fraction, rng: Random) -> bool:
    # CKS20 Algorithm 1, gamma in [0, 1]: K counts successes of Bernoulli(gamma/k)
    # for k = 1, 2, ...; P[K odd] = e^-gamma.
    k = 1
    while True:
        ratio = gamma / k
        if rng.integers(ratio.denominator) >= ratio.numerator:
            break
        k += 1
    return k % 2 == 1


def bernoulli_exp(gamma: Fraction, *, rng: RandomLike | None = None) -> bool:
    """Exact Bernoulli(exp(-gamma)) for rational ``gamma >= 0`` (CKS20 Algorithm 1)."""
    gamma = _rational(gamma, "gamma", "bernoulli_exp")
    if gamma < 0:
        raise InvalidParameter.for_parameter("gamma", "bernoulli_exp", "a Fraction >= 0", gamma)
    random = as_random(rng)
    # e^-gamma = (e^-1)^floor(gamma) * e^-(gamma - floor(gamma)).
    for _ in range(math.floor(gamma)):
        if not _bernoulli_exp_unit(Fraction(1), random):
            return False
    return _bernoulli_exp_unit(gamma - math.floor(gamma), random)


def discrete_laplace(scale: Fraction, *, rng: RandomLike | None = None) -> int:
    """Exact draw with P(z) proportional to ``exp(-|z| / scale)`` (CKS20 Algorithm 2).

    ``scale = t / s`` with positive integers ``s, t``.
    """
    scale = _rational(scale, "scale", "discrete_laplace")
    if scale <= 0:
        raise InvalidParameter.for_parameter("scale", "discrete_laplace", "a Fraction > 0", scale)
    random = as_random(rng)
    t, s = scale.numerator, scale.denominator
    while True:
        u = random.integers(t)
        if not bernoulli_exp(Fraction(u, t), rng=random):
            continue
        v = 0
        while bernoulli_exp(Fraction(1), rng=random):
            v += 1
        magnitude = (u + t * v) // s
        negative = random.getrandbits(1) == 1
        if negative and magnitude == 0:
            continue
        return -magnitude if negative else magnitude


def discrete_gaussian(variance: Fraction, *, rng: RandomLike | None = None) -> int:
    """Exact draw with P(z) proportional to exp(-z^2 / (2 variance)) (CKS20 Algorithm 3)."""
    variance = _rational(variance, "variance", "discrete_gaussian")
    if variance <= 0:
        raise InvalidParameter.for_parameter(
            "variance", "discrete_gaussian", "a Fraction > 0", variance
        )
    random = as_random(rng)
    # floor(sigma) = isqrt(floor(sigma^2)).
    t = math.isqrt(math.floor(variance)) + 1
    while True:
        y = discrete_laplace(Fraction(t), rng=random)
        gap = abs(y) - variance / t
        if bernoulli_exp(gap * gap / (2 * variance), rng=random):
            return y
