"""Mironov's floating-point attack on the textbook Laplace mechanism (Mironov, CCS 2012).

The textbook mechanism ``x + rng.laplace(scale=b)`` in double precision can output
only the doubles its sampler reaches: NumPy's ``Generator.laplace(loc, scale)`` draws
``U = k 2^-53`` (``next_double``, ``0 < k < 2^53``) and returns
``loc + scale * log(U + U)`` if ``U < 0.5``, else ``loc - scale * log(2.0 - U - U)``
(numpy ``random/src/distributions/distributions.c``, ``random_laplace``), every
operation rounded to double. The set of outputs reachable from ``loc = 0`` and from
``loc = 1`` differ: an output of M(0) that no ``U`` produces from 1 proves the input
was 0, so the mechanism is not (epsilon, delta)-DP for *any* epsilon when delta is
below the probability of such outputs.

:func:`reachable_from` decides reachability exactly, by binary search over ``k`` on
the forward computation (which is non-decreasing in ``k``), with libm's ``log`` (the
function NumPy's C code calls, as Python's :func:`math.log` does). dpkit's Laplace
releases the exact ``x + X`` rounded to a power-of-two grid: every grid point has
positive probability from every input, so the same attack finds nothing
(:func:`reachable_on_grid`).

An attack's result is a lower bound on epsilon at a confidence -- here infinite when
it succeeds -- never a certificate of privacy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.audit.bounds import clopper_pearson_lower
from dpkit.random import RandomLike, as_random

__all__ = [
    "ReachabilityResult",
    "reachability_attack",
    "reachable_from",
    "reachable_on_grid",
    "textbook_laplace",
    "textbook_laplace_from_uniform",
]

FloatArray = npt.NDArray[np.float64]
_TWO_M53 = 2.0**-53
_K_MAX = 2**53 - 1  # largest k with U = k 2^-53 < 1


def _libm_log(values: FloatArray) -> FloatArray:
    # NumPy's vectorised np.log may use SIMD code whose last bit differs from libm's
    # log, which the sampler calls; math.log is libm's, so it reproduces the sampler.
    return np.fromiter((math.log(v) for v in values.tolist()), dtype=np.float64, count=values.size)


def textbook_laplace_from_uniform(loc: npt.ArrayLike, scale: float, u: npt.ArrayLike) -> FloatArray:
    """NumPy's ``random_laplace`` on given uniforms ``u`` in (0, 1), bit for bit.

    ``loc + scale * log(u + u)`` where ``u < 0.5``, ``loc - scale * log(2.0 - u - u)``
    elsewhere, each operation rounded to double as in the C source.
    """
    uu = np.asarray(u, dtype=np.float64).reshape(-1)
    centre = np.broadcast_to(np.asarray(loc, dtype=np.float64), uu.shape)
    lower = uu < 0.5
    argument = np.where(lower, uu + uu, (2.0 - uu) - uu)
    term = scale * _libm_log(argument)
    out: FloatArray = np.where(lower, centre + term, centre - term)
    return out


def textbook_laplace(
    loc: float, *, scale: float, size: int, rng: RandomLike | None = None
) -> FloatArray:
    """``size`` draws of the textbook (leaky) mechanism ``loc + Laplace(scale)``.

    Same computation as NumPy's ``Generator.laplace(loc, scale)``, with ``U`` from
    53-bit words of a dpkit generator (``(w >> 11) * 2^-53``, NumPy's ``next_double``),
    rejecting ``U = 0`` as NumPy does. Only for audits: this is the mechanism dpkit's
    samplers exist to replace.
    """
    owner = "textbook_laplace"
    loc = check.check_finite_float(loc, "loc", owner)
    scale = check.check_positive(scale, "scale", owner)
    n = check.check_count(size, "size", owner, minimum=0)
    random = as_random(rng)
    k = (random.uint64(n) >> np.uint64(11)).astype(np.int64)
    while np.any(k == 0):  # probability 2^-53 per draw
        zero = k == 0
        k[zero] = (random.uint64(int(zero.sum())) >> np.uint64(11)).astype(np.int64)
    return textbook_laplace_from_uniform(loc, scale, k.astype(np.float64) * _TWO_M53)


def _forward(k: npt.NDArray[np.int64], loc: float, scale: float) -> FloatArray:
    return textbook_laplace_from_uniform(loc, scale, k.astype(np.float64) * _TWO_M53)


def reachable_from(y: npt.ArrayLike, loc: float, *, scale: float) -> npt.NDArray[np.bool_]:
    """Whether each double ``y`` is an output of the textbook sampler at ``loc``.

    True iff some ``k`` in ``[1, 2^53)`` gives exactly ``y`` through
    :func:`textbook_laplace_from_uniform`. The forward map is non-decreasing in
    ``k`` (``log`` and correctly rounded arithmetic are monotone), so a binary search
    finds the first ``k`` reaching at least ``y``; a few neighbours are checked too,
    which covers a last-bit non-monotonicity of libm's ``log``.
    """
    owner = "reachable_from"
    loc = check.check_finite_float(loc, "loc", owner)
    scale = check.check_positive(scale, "scale", owner)
    target = check.check_array(y, "y", owner, allow_empty=True).reshape(-1)
    lo = np.ones(target.size, dtype=np.int64)
    hi = np.full(target.size, _K_MAX, dtype=np.int64)
    # Invariant: the first k with forward(k) >= y lies in [lo, hi] (or y is above all).
    while np.any(lo < hi):
        mid = lo + (hi - lo) // 2
        below = _forward(mid, loc, scale) < target
        lo = np.where(below, mid + 1, lo)
        hi = np.where(below, hi, mid)
    hit = np.zeros(target.size, dtype=np.bool_)
    for offset in (-2, -1, 0, 1, 2):
        k = np.clip(lo + offset, 1, _K_MAX)
        hit |= _forward(k, loc, scale) == target
    return hit


def reachable_on_grid(y: npt.ArrayLike, *, granularity: float) -> npt.NDArray[np.bool_]:
    """Whether each ``y`` is a multiple of ``granularity``: the support of dpkit's
    Laplace (exact ``x + X`` rounded to the grid) from *every* input on the grid."""
    values = np.asarray(y, dtype=np.float64).reshape(-1)
    quotient = values / granularity  # exact: granularity is a power of two
    on_grid: npt.NDArray[np.bool_] = np.isfinite(quotient) & (quotient == np.round(quotient))
    return on_grid


@dataclass(frozen=True, slots=True)
class ReachabilityResult:
    """The outcome of a reachability attack on a neighbouring pair (x, x').

    Attributes
    ----------
    samples:
        Draws of M(x) examined.
    unreachable:
        How many of them M(x') cannot output (exactly: no randomness produces them).
    unreachable_lower:
        Clopper-Pearson lower bound, at ``confidence``, on the probability ``p`` that
        M(x) outputs something M(x') cannot.
    epsilon_lower_bound:
        ``inf`` when ``unreachable_lower > delta`` (no finite epsilon satisfies
        ``p <= e^eps * 0 + delta``), else 0: a lower bound on epsilon at
        ``confidence``; never a certificate of privacy.
    delta, confidence:
        As requested.
    """

    samples: int
    unreachable: int
    unreachable_lower: float
    epsilon_lower_bound: float
    delta: float
    confidence: float

    @property
    def unreachable_fraction(self) -> float:
        """The observed share of M(x)'s outputs that M(x') never produces."""
        return self.unreachable / self.samples


def reachability_attack(
    outputs_x: npt.ArrayLike,
    reachable_from_x_prime: Callable[[FloatArray], npt.NDArray[np.bool_]],
    *,
    delta: float = 0.0,
    confidence: float = 0.95,
) -> ReachabilityResult:
    """Bound epsilon from outputs of M(x) that M(x') provably cannot produce.

    Parameters
    ----------
    outputs_x:
        Independent draws of M(x).
    reachable_from_x_prime:
        An *exact* support test for M(x') (e.g. ``lambda y: reachable_from(y, 1.0,
        scale=b)``); the probability that M(x') lands outside its support is 0, not an
        estimate, so one side of the test needs no samples.
    delta, confidence:
        The delta audited; the confidence of the bound.
    """
    owner = "reachability_attack"
    delta = check.check_delta(delta, owner)
    confidence = check.check_probability(
        confidence, "confidence", owner, open_low=True, open_high=True
    )
    values = check.check_array(outputs_x, "outputs_x", owner).reshape(-1)
    reachable = np.asarray(reachable_from_x_prime(values), dtype=np.bool_).reshape(-1)
    unreachable = int(values.size - np.count_nonzero(reachable))
    lower = float(clopper_pearson_lower(unreachable, values.size, 1.0 - confidence))
    return ReachabilityResult(
        samples=int(values.size),
        unreachable=unreachable,
        unreachable_lower=lower,
        epsilon_lower_bound=math.inf if lower > delta else 0.0,
        delta=delta,
        confidence=confidence,
    )
