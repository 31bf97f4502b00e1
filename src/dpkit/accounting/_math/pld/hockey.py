"""The hockey-stick divergence of a discrete PLD, and its inverse.

For a PLD ``w`` (finite masses ``m_j`` at losses ``l_j``, mass ``w_inf`` at ``+inf``) the
pair is ``(eps, delta)``-DP exactly when ``delta >= delta(eps)`` with::

    delta(eps) = w_inf + sum_{l_j > eps} m_j (1 - e^{eps - l_j})

(Meiser & Mohammadi 2018, Sommer, Meiser & Mohammadi 2019, Lemma 5; Koskela et al.
2020, eq. (2.2)). ``delta`` is continuous and non-increasing; between consecutive
grid points it equals ``A - B e^eps``. So the smallest eps with ``delta(eps) <= target``
is found exactly: bisect over grid points, then solve ``A - B e^eps = target`` on the
last interval, then nudge up until the directly evaluated (and inflated) delta agrees.
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.accounting._math.pld.pmf import FloatArray, LossPmf
from dpkit.accounting._math.rounding import inflate, settle_up

__all__ = ["hockey_stick", "smallest_epsilon"]

# Pairwise summation of n non-negative terms errs by at most ~log2(n) u relative; each
# term -expm1(.) * m errs by a few u, and the grid point j h by u |j h| (which moves the
# term by at most m u |l|). 1e-12 covers all of it for n up to 2^40 and |l| < 1e3.
_SUM_REL = 1e-12


def _excess_terms(pmf: LossPmf, epsilon: float, losses: FloatArray | None = None) -> float:
    if losses is None:
        losses = pmf.losses
    start = int(np.searchsorted(losses, epsilon, side="right"))  # first loss > epsilon
    if start == losses.size:
        return 0.0
    terms = pmf.masses[start:] * -np.expm1(epsilon - losses[start:])
    return float(np.sum(terms))


def _first_below(pmf: LossPmf, target: float, start: int) -> int:
    """An estimate of the first index ``>= start`` whose finite delta is at most ``target``.

    With ``r = e^{-h}``, the finite part of ``delta`` at grid point ``i`` is
    ``(1 - r) sum_{k > i} U_k`` where ``U_k = m_k + r U_{k+1}`` (all terms non-negative,
    no cancellation). Only a hint for the bracket search: the caller confirms it.
    """
    from scipy.signal import lfilter  # deferred: scipy.signal is slow to import

    masses = pmf.masses[start:]
    if masses.size < 2:
        return start
    r = math.exp(-pmf.h)
    u = np.asarray(lfilter([1.0], [1.0, -r], masses[::-1]), dtype=np.float64)
    # tail[j] = sum_{k > j} U_k, from the back (u is reversed already).
    tail = np.concatenate((np.cumsum(u)[-2::-1], [0.0])) * -math.expm1(-pmf.h)
    below = np.flatnonzero(tail <= target)
    return start + int(below[0]) if below.size else start + masses.size - 1


def hockey_stick(pmf: LossPmf, epsilon: float, losses: FloatArray | None = None) -> float:
    """``delta(epsilon)`` of ``pmf`` plus its float-error allowance, rounded up.

    Valid for every real ``epsilon``; the result is capped at 1 only when the pmf's
    own total is at most 1 (it may exceed 1 by pessimistic additions). ``losses`` may
    pass ``pmf.losses`` precomputed.
    """
    finite = inflate(_excess_terms(pmf, epsilon, losses), _SUM_REL)
    total = finite + pmf.infinity_mass + pmf.error_at(epsilon)
    # Three roundings in the sums above: move up so the reported float is not below.
    for _ in range(3):
        total = math.nextafter(total, math.inf)
    return min(1.0, total)


def smallest_epsilon(pmf: LossPmf, delta: float) -> float:
    """The smallest ``eps >= 0`` with ``hockey_stick(pmf, eps) <= delta`` (``inf`` if none).

    Exact on the piecewise form of ``delta(eps)`` up to the final upward nudge.
    """
    floor = pmf.infinity_mass + pmf.slack
    if floor >= delta:
        return math.inf
    if hockey_stick(pmf, 0.0) <= delta:
        return 0.0
    losses = pmf.losses
    if losses[-1] <= 0.0 or hockey_stick(pmf, float(losses[-1]), losses) > delta:
        return math.inf  # only the float guard above the floor is left: cannot certify
    # Grid points at or above 0; the last one has delta == floor < target.
    start = int(np.searchsorted(losses, 0.0, side="left"))
    lo, hi = start - 1, losses.size - 1  # delta(max(0, l_lo)) > target >= delta(l_hi)

    def ok(index: int) -> bool:
        return hockey_stick(pmf, float(losses[index]), losses) <= delta

    # One O(n) pass estimates delta at every grid point; the estimate only narrows the
    # bracket, each end of which is confirmed by an exact hockey_stick call.
    hint = _first_below(pmf, delta - floor, start)
    if lo < hint < hi:
        if ok(hint):
            hi = hint
            if hint - 1 > lo and not ok(hint - 1):
                lo = hint - 1
        else:
            lo = hint
            if hint + 1 < hi and ok(hint + 1):
                hi = hint + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    left = 0.0 if lo < start else float(losses[lo])
    right = float(losses[hi])
    # On (left, right] delta(eps) = A - e^eps B + err(eps) with the masses at indices
    # >= hi and err the pmf's (non-increasing) float-error allowance.
    masses = pmf.masses[hi:]
    finite = float(np.sum(masses))
    b_scaled = float(np.sum(masses * np.exp(right - losses[hi:])))  # B e^{right}

    def root(error: float) -> float:
        """The root of the A - B e^eps form with the allowance frozen at ``error``."""
        a = pmf.infinity_mass + error + finite
        guess = right
        if b_scaled > 0.0 and a > delta:
            guess = right + math.log((a - delta) / b_scaled)
        # Step a hair above the exact root of the uninflated form, so that the inflated
        # evaluation below usually agrees at once (a relative 1e-12 on delta moves eps
        # far less than this).
        guess = min(right, max(left, guess))
        return min(right, guess + 1e-10 * max(1.0, abs(guess)))

    def excess(eps: float) -> float:
        return hockey_stick(pmf, eps, losses) - delta

    # err(right) is the smallest allowance on the interval, so this first root is at
    # or below the true one; the allowance there is at least the one at the true root,
    # so the second is at or above it (up to rounding, which settle_up absorbs).
    guess = root(pmf.error_at(right))
    if excess(guess) > 0.0:
        guess = root(pmf.error_at(guess))
    return settle_up(excess, guess, right)
