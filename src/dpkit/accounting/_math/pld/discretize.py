"""Pessimistic discretisation of a PLD onto the grid ``h Z`` by connect-the-dots.

Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022 ("Connect the dots: tighter
discrete approximations of privacy loss distributions", PETS), Algorithm 1: on grid
points ``e_0 < ... < e_n`` put the masses that make the discrete ``delta(eps)`` agree
with the true one at every grid point and, as a function of ``e^eps``, be linear in
between. Since the true ``delta`` is convex in ``e^eps`` the chord lies above it, so the
result is pessimistic for every real eps (their Thm 4.2); it is tighter than rounding
every loss up ("privacy buckets", Meiser & Mohammadi 2018).

We use the equivalent per-loss form, which never differences two deltas. A loss ``l``
in ``(e_k, e_{k+1}]`` (width ``h``) is split between the two end points, sending::

    b(l) = (1 - e^{e_k - l}) / (1 - e^{-h})     to e_{k+1},   1 - b(l)  to e_k.

This matches ``(1 - e^eps e^{-l})_+`` at ``e^eps = 0`` and at ``e^{e_k}`` and is linear
in ``e^eps`` on ``[e^{e_k}, e^{e_{k+1}}]``: the chord of a convex hinge, so never below
it. Integrated over an interval ``I_k`` with ``P``-mass ``P_k`` and ``Q``-mass ``Q_k``
(on finite losses ``e^{-L} dP = dQ``), the upper point receives::

    (P_k - e^{e_k} Q_k) / (1 - e^{-h})

Atoms (pure DP, randomized response, discrete noise) are split one by one with
``b(l)``; monotone continuous losses (additive noise) use the interval form with CDFs.
Mass below the first grid point is moved up onto it and mass above the last one to
``+inf`` (tail truncation, both pessimistic).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from dpkit.accounting._math.pld.pmf import FloatArray, LossPmf, U, mass_lower

__all__ = ["MAX_BUCKETS", "TooManyBuckets", "from_atoms", "from_interval_cdfs"]

#: Largest number of grid points a single discretised PLD may have (128 MiB of floats).
MAX_BUCKETS = 1 << 24


class TooManyBuckets(ValueError):
    """The PLD's loss range is too wide for the grid width."""


def _check_size(n: int) -> None:
    if n > MAX_BUCKETS:
        raise TooManyBuckets(n)


def _upper_share(lower: FloatArray, losses: FloatArray, h: float) -> FloatArray:
    """``b(l)`` for losses in ``(lower, lower + h]``, rounded up (moving mass up is safe)."""
    share = -np.expm1(lower - losses) / -math.expm1(-h)
    return np.clip(share * (1.0 + 8.0 * U), 0.0, 1.0)


def from_atoms(
    losses: FloatArray, probabilities: FloatArray, h: float, infinity_mass: float = 0.0
) -> LossPmf:
    """Connect-the-dots discretisation of a PLD with finitely many atoms.

    ``losses`` are finite; ``probabilities`` their ``P``-masses. The grid point below
    each loss is found exactly (``floor`` corrected by comparison), so a loss on the
    grid keeps its place and every other one is split with its upper share rounded up.
    """
    losses = np.asarray(losses, dtype=np.float64)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    keep = probabilities > 0.0
    losses, probabilities = losses[keep], probabilities[keep]
    if losses.size == 0:
        return LossPmf(h, 0, np.zeros(1), infinity_mass, 0.0)
    k = np.floor(losses / h)
    k = np.where(k * h > losses, k - 1.0, k)  # division may round up across a point
    k = np.where((k + 1.0) * h <= losses, k + 1.0, k)
    on_grid = k * h == losses
    upper = np.where(on_grid, 0.0, _upper_share(k * h, losses, h)) * probabilities
    lower = probabilities - upper
    ks = k.astype(np.int64)
    offset = int(ks.min())
    n = int(ks.max()) - offset + 2
    _check_size(n)
    masses = np.zeros(n)
    np.add.at(masses, ks - offset, lower)
    np.add.at(masses, ks - offset + 1, upper)
    # The probabilities are computed in floating point; any shortfall below 1 goes to
    # +inf (the most pessimistic place), so the total is never understated.
    deficit = 1.0 - mass_lower(masses) - infinity_mass
    return LossPmf(h, offset, masses, infinity_mass + max(0.0, deficit) + 4.0 * U, 0.0)


#: ``cdfs(edges) -> (F_P, S_P, F_Q, S_Q)``: ``P[L <= e]``, ``P[L > e]`` and the same
#: under ``Q``, each computed accurately (no ``1 - x``) at every edge.
CdfPair = Callable[[FloatArray], tuple[FloatArray, FloatArray, FloatArray, FloatArray]]


def _interval_mass(f: FloatArray, s: FloatArray) -> FloatArray:
    """``P[e_k < L <= e_{k+1}]`` from whichever tail differences cancel less."""
    from_cdf = f[1:] - f[:-1]
    from_sf = s[:-1] - s[1:]
    use_cdf = f[1:] <= s[:-1]
    return np.maximum(np.where(use_cdf, from_cdf, from_sf), 0.0)


def _scalar(cdfs: CdfPair, index: int, h: float) -> tuple[float, float]:
    f_p, s_p, _, _ = cdfs(np.array([index * h]))
    return float(f_p[0]), float(s_p[0])


def _grid_range(cdfs: CdfPair, h: float, tail_mass: float) -> tuple[int, int]:
    """Grid indices ``lo < hi`` with ``P[L <= lo h] <= tail`` and ``P[L > hi h] <= tail``."""

    def search(pred: Callable[[int], bool]) -> int:
        # Smallest index where the monotone predicate holds (it holds far right).
        if pred(0):
            step = -1
            while pred(step):
                step *= 2
                if -step > 1 << 62:
                    raise TooManyBuckets(-step)
            lo, hi = step, step // 2
        else:
            step = 1
            while not pred(step):
                step *= 2
                if step > 1 << 62:
                    raise TooManyBuckets(step)
            lo, hi = step // 2, step
        while hi - lo > 1:  # pred(lo) false, pred(hi) true
            mid = (lo + hi) // 2
            if pred(mid):
                hi = mid
            else:
                lo = mid
        return hi

    # Largest index whose left tail is <= tail_mass: one below the first where it is not.
    first_heavy_left = search(lambda j: _scalar(cdfs, j, h)[0] > tail_mass)
    upper = search(lambda j: _scalar(cdfs, j, h)[1] <= tail_mass)
    lower = min(first_heavy_left - 1, upper - 1)
    _check_size(upper - lower + 1)
    return lower, upper


def from_interval_cdfs(cdfs: CdfPair, h: float, tail_mass: float) -> LossPmf:
    """Connect-the-dots discretisation of a PLD given by its CDFs under ``P`` and ``Q``.

    The grid runs from the largest grid point with left tail at most ``tail_mass`` to
    the smallest with right tail at most ``tail_mass``; beyond, mass moves up to the
    first point or to ``+inf``.
    """
    lower, upper = _grid_range(cdfs, h, tail_mass)
    edges = np.arange(lower, upper + 1, dtype=np.float64) * h
    f_p, s_p, f_q, s_q = cdfs(edges)
    p = _interval_mass(f_p, s_p)
    q = _interval_mass(f_q, s_q)
    # e^{e_k} Q_k without overflow: Q_k <= e^{-e_k} P_k on finite losses.
    with np.errstate(divide="ignore"):
        scaled_q = np.exp(edges[:-1] + np.log(q))
    up_share = np.clip((p - scaled_q) / -math.expm1(-h) * (1.0 + 8.0 * U), 0.0, p)
    masses = np.zeros(edges.size)
    masses[:-1] += p - up_share
    masses[1:] += up_share
    masses[0] += max(0.0, float(f_p[0]))
    infinity = max(0.0, float(s_p[-1]))
    deficit = 1.0 - mass_lower(masses) - infinity
    return LossPmf(h, lower, masses, infinity + max(0.0, deficit) + 4.0 * U, 0.0)
