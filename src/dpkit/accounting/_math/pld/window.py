"""Chernoff windows for k-fold compositions, and the choice of an exponential tilt.

The ``count``-fold composition of a PLD is the law of a sum of ``count`` i.i.d. losses.
Its finite masses beyond a Chernoff cut are at most ``tail_mass``:
``mass{S >= x} <= M(lam)^count e^{-lam x}`` for ``lam > 0`` and
``mass{S <= x} <= M(-lam)^count e^{lam x}``, with ``M(lam) = sum_j m_j e^{lam l_j}`` the
moment generating sum of the finite masses. Any ``lam`` gives a valid cut, so ``lam``
is chosen on a coarse proxy (block sums) and only the chosen one is evaluated on the
exact masses, with a rigorous rounding allowance.

The same generating sums pick the tilt of :func:`.power.self_compose` (a heuristic:
every tilt gives a valid bound; this one keeps it small across the deltas users ask).
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.accounting._math.pld.pmf import FloatArray, LossPmf

__all__ = ["choose_tilt", "log_mgf", "window"]


def log_mgf(logm: FloatArray, losses: FloatArray, lam: float) -> float:
    """An upper bound on ``log sum_j m_j e^{lambda l_j}`` (``logm = log m_j``, any sign)."""
    exponents = lam * losses + logm
    peak = float(exponents.max())
    out = peak + math.log(float(np.exp(exponents - peak).sum()))
    # Relative 1e-12 covers the log/exp/sum rounding (and |l| u in each loss).
    return out + 1e-12 * (1.0 + abs(out))


#: Blocks of the coarse proxy used only to *choose* lambda (see :func:`_chernoff`).
_PROXY_BLOCKS = 1024


def _proxy(pmf: LossPmf) -> tuple[FloatArray, FloatArray]:
    """Block sums of the masses at the block centres: a cheap stand-in for the MGF search."""
    n = pmf.masses.size
    size = max(1, -(-n // _PROXY_BLOCKS))
    blocks = -(-n // size)
    padded = np.zeros(blocks * size)
    padded[:n] = pmf.masses
    sums = padded.reshape(blocks, size).sum(axis=1)
    centres = (pmf.offset + np.arange(blocks) * size + 0.5 * (min(size, n) - 1)) * pmf.h
    keep = sums > 0.0
    with np.errstate(divide="ignore"):
        return np.log(sums[keep]), centres[keep]


def _proxy_log_mgf(proxy: tuple[FloatArray, FloatArray], lambdas: FloatArray) -> FloatArray:
    logm, centres = proxy
    exponents = lambdas[:, None] * centres[None, :] + logm[None, :]
    peak = exponents.max(axis=1)
    return np.asarray(peak + np.log(np.exp(exponents - peak[:, None]).sum(axis=1)))


def _proxy_cuts(
    proxy: tuple[FloatArray, FloatArray], count: int, log_tau: float, lambdas: FloatArray
) -> FloatArray:
    log_m = _proxy_log_mgf(proxy, lambdas)
    return np.asarray((count * log_m - log_tau) / np.abs(lambdas), dtype=np.float64)


def _chernoff(
    exact: tuple[FloatArray, FloatArray],
    proxy: tuple[FloatArray, FloatArray],
    count: int,
    log_tau: float,
    sign: float,
) -> float:
    """A Chernoff cut ``x`` for one tail, lambda chosen on a coarse proxy.

    ``sign = 1``: ``mass{S >= x} <= tau`` for ``x = (count log M(lam) - log tau)/lam``;
    ``sign = -1``: ``mass{S <= -x'} <= tau`` with the mirrored formula. Lambda is picked
    on block sums of the masses (a log-spaced grid, then a finer one around its best
    point) and only the chosen one is evaluated on the exact masses.
    """
    coarse = np.geomspace(1e-3, 1e4, 29)
    values = _proxy_cuts(proxy, count, log_tau, sign * coarse)
    i = int(np.argmin(values))
    lo, hi = coarse[max(i - 1, 0)], coarse[min(i + 1, coarse.size - 1)]
    fine = np.geomspace(lo, hi, 17)
    fine_values = _proxy_cuts(proxy, count, log_tau, sign * fine)
    lam = float(fine[int(np.argmin(fine_values))])
    logm, losses = exact
    return (count * log_mgf(logm, losses, sign * lam) - log_tau) / lam


def window(
    pmf: LossPmf, count: int, tail_mass: float, right_only: bool = False
) -> tuple[int, int, bool, bool]:
    """Grid indices bounding all but ``tail_mass`` of each tail of the ``count``-fold sum.

    ``pmf`` may carry any non-negative masses (tilted ones too: the bound is on their
    sum). Also returns whether each side was actually cut. ``right_only`` skips the
    left cut (it returns the full left end).
    """
    lo_full = count * pmf.offset
    hi_full = count * (pmf.offset + pmf.masses.size - 1)
    log_tau = math.log(max(tail_mass, 1e-300))
    keep = pmf.masses > 0.0
    exact = (np.log(pmf.masses[keep]), pmf.losses[keep])
    proxy = _proxy(pmf)
    hi = math.ceil(_chernoff(exact, proxy, count, log_tau, 1.0) / pmf.h) + 1
    lo = lo_full
    if not right_only:
        lo = math.floor(-_chernoff(exact, proxy, count, log_tau, -1.0) / pmf.h) - 1
    cut_hi, cut_lo = hi < hi_full, lo > lo_full
    hi, lo = min(hi, hi_full), max(lo, lo_full)
    if lo > hi:  # the two bounds cross only when the mass is tiny; keep everything
        lo, hi, cut_lo, cut_hi = lo_full, hi_full, False, False
    return lo, hi, cut_lo, cut_hi


#: Deltas at which the tilt is chosen to keep the tilted error small (relative to the
#: Chernoff estimate of delta there); 1 stands for eps = 0.
_REFERENCE_LOG_DELTAS = np.log(np.array([1.0, 1e-3, 1e-6, 1e-9, 1e-12]))
#: Candidate tilts (0: no tilt).
_TILTS = np.concatenate(([0.0], np.geomspace(0.25, 256.0, 41)))


def choose_tilt(pmf: LossPmf, count: int, width: int, error: float, floor: float) -> float:
    """A tilt ``lam >= 0`` for the ``count``-fold composition (0: compose untilted).

    ``error`` estimates the FFT's relative error ``E`` (about ``count gamma ||m||_2``)
    and ``floor`` the smallest delta the result can certify (its mass at ``+inf``).
    The tilted round-off at ``eps`` is about ``E M(lam)^count e^{-lam eps} /
    sqrt(2 lam h)`` and the untilted one ``E sqrt(width)``. With ``eps_r`` the Chernoff
    estimate of the eps where delta is ``delta_r`` (reference deltas above 10 ``floor``),
    the worst ratio of that error to ``delta_r`` is the candidate's predicted error.
    Larger tilts spread the tilted masses (wider windows, slower FFTs), so we take the
    smallest tilt predicted within 1e-6 of delta, else the one predicted best. Tilts
    whose weights would span more than ``e^300`` over the grid are not considered (the
    tilted masses must stay within the float range).
    """
    if count < 2 or pmf.masses.size < 2:
        return 0.0
    span = float(pmf.masses.size * pmf.h)
    tilts = _TILTS[1:][_TILTS[1:] * span <= 300.0]
    if tilts.size == 0:
        return 0.0
    # count log M(lam) on the exact masses (the block proxy is too coarse when the
    # losses are much narrower than a block, as for small sampling rates).
    keep = pmf.masses > 0.0
    logm, losses = np.log(pmf.masses[keep]), pmf.losses[keep]
    psi = count * np.array([log_mgf(logm, losses, float(lam)) for lam in tilts])
    # Chernoff eps at each reference delta: min over lam of (psi - log delta) / lam. The
    # first reference is eps = 0 (delta at most 1); references beyond the largest
    # finite loss (delta there is only the mass at +inf) are dropped.
    eps_r = np.min((psi[:, None] - _REFERENCE_LOG_DELTAS[None, :]) / tilts[:, None], axis=0)
    eps_r = np.maximum(eps_r, 0.0)
    eps_r[0] = 0.0
    above_floor = np.greater(_REFERENCE_LOG_DELTAS, math.log(10.0 * floor + 1e-300))
    reachable = (eps_r <= count * float(pmf.losses[-1])) & above_floor
    reachable[0] = True
    log_deltas = _REFERENCE_LOG_DELTAS[reachable]
    eps_r = eps_r[reachable]
    plain = math.log(error) + 0.5 * math.log(width) - float(log_deltas.min())
    # log of (error / delta_r).
    log_tilted = (
        math.log(error)
        + psi[:, None]
        - tilts[:, None] * eps_r[None, :]
        - 0.5 * np.log(-np.expm1(-2.0 * tilts[:, None] * pmf.h))
        - log_deltas[None, :]
    )
    worst = log_tilted.max(axis=1)
    good_enough = math.log(1e-6)
    if plain <= good_enough:
        return 0.0
    adequate = np.flatnonzero(worst <= good_enough)
    if adequate.size:
        return float(tilts[adequate[0]])
    best = int(np.argmin(worst))
    return float(tilts[best]) if worst[best] < plain else 0.0
