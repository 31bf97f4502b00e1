"""The PLD that dominates every ``eps``-bounded-range mechanism (the exponential mechanism).

A mechanism is ``eps``-bounded range (BR) when, for every pair of neighbours, its privacy
loss takes values in an interval ``[-t eps, (1 - t) eps]`` for some ``t`` in ``[0, 1]``
(Durfee & Rogers 2019). The exponential mechanism with parameter ``eps`` is
``eps``-BR (same paper), and so is report-noisy-max with Gumbel noise.

**The worst case for one run.** With ``t`` fixed, ``delta(eps') = E_P[(1 - e^{eps'} Y)_+]``
with ``Y = e^{-L}`` in ``[e^{-(1-t) eps}, e^{t eps}]`` and ``E_P[Y] = 1``; the integrand is
convex in ``Y``, so the two-point law at the ends maximises it (Dong, Durfee & Rogers
2020): ``delta_t(x) = (s - 1)(u - x s) / (s (u - 1))`` with ``u = e^eps``,
``s = e^{t eps}``, ``x = e^{eps'}``. Maximising over ``s`` (at ``s = sqrt(u / x)``,
feasible for ``eps'`` in ``[-eps, eps]``) gives the envelope::

    delta_BR(eps') = (e^{eps/2} - e^{eps'/2})^2 / (e^eps - 1)     for |eps'| <= eps,

``1 - e^{eps'}`` below ``-eps`` and ``0`` above ``eps`` (derived here; checked against
the two-point pairs in the tests). The envelope is convex in ``e^{eps'}``, so it is the
profile of a pair ``(P, Q)`` (Zhu, Dong & Wang 2022), which therefore dominates
every ``eps``-BR mechanism, and composing such pairs dominates the adaptive
composition (ZDW22, composition of dominating pairs). Differentiating,
``Q[L > l] = -delta'(e^l) = (e^{(eps - l)/2} - 1) / (e^eps - 1)``: under ``P`` the
loss has density ``e^{(eps + l)/2} / (2 (e^eps - 1))`` on ``[-eps, eps]``. It is
symmetric (``-L`` under ``Q`` has the same law), so one PLD serves both orderings.

**Tightness.** The envelope is exact for one run. For ``k`` runs the true worst case is
a maximum over two-point pairs with per-run ``t_i`` (DDR20); the composed
envelope is an upper bound on it. Its KL divergence, ``0.16395`` at ``eps = 1`` against
``0.12330`` for the best two-point pair, shows the gap: for the exponential mechanism
alone, the RDP bound of bounded range is tighter from two runs on; the PLD wins when
it is composed with Gaussian or subsampled steps.

**Discretisation.** On a grid interval ``[a, b]`` the pair satisfies
``Q[a, b] = P[a, b] e^{-(a + b)/2}`` exactly, so for connect-the-dots (which only sees
the interval's ``P`` and ``Q`` mass) the interval *is* an atom at ``(a + b)/2``; every
interval becomes such an atom (its loss rounded up, its mass rounded down) and
:func:`.discretize.from_atoms` splits it and sends the shortfall to ``+inf``.
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.accounting._math.pld.discretize import MAX_BUCKETS, TooManyBuckets, from_atoms
from dpkit.accounting._math.pld.pmf import FloatArray, LossPmf, U

__all__ = ["bounded_range_delta", "bounded_range_pmf"]


def bounded_range_delta(epsilon: float, eps_prime: float) -> float:
    """``delta_BR(eps')``: the largest hockey-stick divergence of an ``eps``-BR mechanism.

    Float evaluation (for tests and docs; not rounded in a certified direction).
    """
    if eps_prime >= epsilon:
        return 0.0
    if eps_prime <= -epsilon:
        return -math.expm1(eps_prime)
    # (e^{eps/2} - e^{eps'/2})^2 / (e^eps - 1), scaled by e^{-eps} to avoid overflow.
    diff = -math.expm1((eps_prime - epsilon) / 2.0)
    return diff * diff / -math.expm1(-epsilon)


def _interval_atoms(epsilon: float, h: float) -> tuple[FloatArray, FloatArray]:
    """Each grid interval's ``P``-mass (rounded down) and atom location (rounded up)."""
    first = math.floor(-epsilon / h)
    last = math.ceil(epsilon / h)
    if last - first + 2 > MAX_BUCKETS:
        raise TooManyBuckets(last - first + 2)
    j = np.arange(first, last, dtype=np.float64)
    lower = np.maximum(j * h, -epsilon)
    upper = np.minimum((j + 1.0) * h, epsilon)
    width = upper - lower
    # Interior intervals have width exactly h; the two partial ones carry the float
    # error of j h (at most u |j h| per end) in their width.
    interior = (j * h > -epsilon) & ((j + 1.0) * h < epsilon)
    width = np.where(interior, h, width)
    width_error = np.where(interior, 0.0, 4.0 * U * (np.abs(lower) + np.abs(upper)))
    # P[a, b] = e^{(a - eps)/2} expm1((b - a)/2) / (1 - e^{-eps}): no overflow for a <= eps.
    log_scale = (lower - epsilon) / 2.0 - math.log(-math.expm1(-epsilon))
    with np.errstate(invalid="ignore", divide="ignore"):
        mass = np.exp(log_scale) * np.expm1(np.maximum(width, 0.0) / 2.0)
        # Relative error: the exponent's argument (a few u of |a| + eps, plus log's 8u)
        # moves exp by as much; exp and expm1 8u each; products 2u; the width's own
        # error relative to the width. Round the mass down by all of it (the shortfall
        # goes to +inf in from_atoms, which only raises delta).
        rel = (16.0 + 4.0 * (np.abs(lower) + epsilon)) * U + 24.0 * U
        rel = rel + np.where(width > 0.0, width_error / np.where(width > 0.0, width, 1.0), 1.0)
    mass = np.where(rel < 1e-3, mass * (1.0 - 2.0 * rel), 0.0)
    # The atom at (a + b)/2, rounded up past the float error of a, b and the halving;
    # a larger loss only raises connect-the-dots' delta (its chord grows with the loss).
    centre = lower + width / 2.0
    centre = centre + 8.0 * U * (np.abs(lower) + np.abs(upper) + h) + width_error
    return centre, mass


def bounded_range_pmf(epsilon: float, h: float) -> LossPmf:
    """The discretised PLD dominating every ``epsilon``-bounded-range mechanism.

    Statement: for every real ``eps'``, ``delta_BR(eps') <= delta_pmf(eps') + slack``
    (with ``slack`` 0 here: all float error is absorbed by rounding masses down, losses
    up, and the deficit rule of :func:`.discretize.from_atoms`).
    """
    centre, mass = _interval_atoms(epsilon, h)
    return from_atoms(centre, mass, h)
