"""Composition of discrete PLDs: convolution, and k-fold self-convolution by one FFT.

The PLD of the composition of two mechanisms (adaptive, with the worst-case pairs
fixed in advance) is the convolution of their PLDs; infinite losses absorb
(Sommer, Meiser & Mohammadi 2019, Thm 1; Koskela et al. 2020, Sec. 2). On the grid
``h Z`` this is the convolution of the mass arrays, with offsets adding.

Floating point. Both routines use the FFT and bound its error a priori, adding the
bound to the result's ``slack`` (see :mod:`.pmf`). For a length-``N`` FFT the computed
transform errs by at most ``gamma sqrt(N) ||x||_2`` in the 2-norm with
``gamma = c log2(N) u`` (Higham, *Accuracy and Stability of Numerical Algorithms*,
2nd ed., Thm 24.2; we take ``c = 10``, above the ``~6.7`` of that theorem for accurate
twiddle factors). A mass-array error ``e`` moves ``delta(eps)`` by
``|<e, w>| <= ||e||_2 sqrt(N)`` since the weights ``w`` lie in ``[0, 1]``. Negative
round-off is clipped to 0 (adding mass, pessimistic) and any total-mass shortfall is
moved to ``+inf``.

Error in the inputs' ``slack`` carries over by linearity: if ``delta_a <= delta_â +
s_a`` for all real eps, then ``delta_{a*b} <= delta_{â*b̂} + s_a + s_b |â|``, and for
``k`` copies the slack grows to at most ``k s max(1, |â|)^(k-1)``.
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.accounting._math.pld.discretize import TooManyBuckets
from dpkit.accounting._math.pld.pmf import FloatArray, LossPmf, U, mass_lower, truncate

__all__ = ["convolve", "self_compose"]

_FFT_C = 10.0
#: Largest FFT length (2^27 doubles: 1 GiB); above it the grid is too fine.
MAX_FFT = 1 << 27


def _gamma(n: int) -> float:
    return _FFT_C * max(1.0, math.log2(max(n, 2))) * U


def _norm2(x: FloatArray) -> float:
    # np.sum (pairwise) rather than np.dot: no BLAS thread wake-up, and at least as
    # accurate.
    return math.sqrt(float(np.sum(x * x)))


def _combine_infinity(a: LossPmf, b: LossPmf) -> float:
    # Infinite loss absorbs: mass(inf) = a_inf |b| + a_fin b_inf, rounded up.
    value = a.infinity_mass * b.total_mass + a.finite_mass * b.infinity_mass
    return value * (1.0 + 8.0 * U)


def _finish(
    h: float, offset: int, masses: FloatArray, infinity: float, slack: float, target: float
) -> LossPmf:
    """Clip round-off negatives and send any shortfall against ``target`` to ``+inf``."""
    masses = np.maximum(masses, 0.0)
    deficit = target - mass_lower(masses)
    return LossPmf(h, offset, masses, infinity + max(0.0, deficit), slack)


def convolve(a: LossPmf, b: LossPmf, tail_mass: float) -> LossPmf:
    """The PLD of composing ``a`` and ``b`` (same grid), tails truncated pessimistically."""
    from scipy import fft as sp_fft  # deferred: SciPy is slow to import

    if a.h != b.h:
        raise ValueError("PLDs on different grids")  # internal misuse
    n_out = a.masses.size + b.masses.size - 1
    if a.masses.size == 1 or b.masses.size == 1:  # a shift and scale: exact up to u
        out = np.convolve(a.masses, b.masses)
        fft_slack = 2.0 * U * math.sqrt(n_out) * _norm2(out)
    else:
        n = sp_fft.next_fast_len(n_out, real=True)
        if n > MAX_FFT:
            raise TooManyBuckets(n)
        fa = sp_fft.rfft(a.masses, n)
        fb = sp_fft.rfft(b.masses, n)
        out = sp_fft.irfft(fa * fb, n)[:n_out]
        gamma = _gamma(n)
        norm_a, norm_b = _norm2(a.masses), _norm2(b.masses)
        bound = gamma * (norm_a * (1.0 + b.finite_mass) + norm_b * (1.0 + a.finite_mass))
        bound += 3.0 * gamma * _norm2(out)
        fft_slack = bound * math.sqrt(n_out)
    slack = a.slack + b.slack * max(1.0, a.total_mass) + fft_slack
    target = a.finite_mass * b.finite_mass * (1.0 - 8.0 * U)
    result = _finish(a.h, a.offset + b.offset, out, _combine_infinity(a, b), slack, target)
    return truncate(result, tail_mass)


def _log_mgf(logm: FloatArray, losses: FloatArray, lam: float) -> float:
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


def _proxy_cuts(
    proxy: tuple[FloatArray, FloatArray], count: int, log_tau: float, lambdas: FloatArray
) -> FloatArray:
    logm, centres = proxy
    exponents = lambdas[:, None] * centres[None, :] + logm[None, :]
    peak = exponents.max(axis=1)
    log_m = peak + np.log(np.exp(exponents - peak[:, None]).sum(axis=1))
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
    ``sign = -1``: ``mass{S <= -x'} <= tau`` with the mirrored formula. Any lambda gives
    a valid cut, so lambda is picked on block sums of the masses (a log-spaced grid,
    then a finer one around its best point) and only the chosen one is evaluated on
    the exact masses, with the rigorous rounding allowance of :func:`_log_mgf`.
    """
    coarse = np.geomspace(1e-3, 1e4, 29)
    values = _proxy_cuts(proxy, count, log_tau, sign * coarse)
    i = int(np.argmin(values))
    lo, hi = coarse[max(i - 1, 0)], coarse[min(i + 1, coarse.size - 1)]
    fine = np.geomspace(lo, hi, 17)
    fine_values = _proxy_cuts(proxy, count, log_tau, sign * fine)
    lam = float(fine[int(np.argmin(fine_values))])
    logm, losses = exact
    return (count * _log_mgf(logm, losses, sign * lam) - log_tau) / lam


def _window(pmf: LossPmf, count: int, tail_mass: float) -> tuple[int, int, bool, bool]:
    """Grid indices bounding all but ``tail_mass`` of each tail of the ``count``-fold sum.

    Chernoff: ``mass{S >= x} <= M(lam)^count e^{-lam x}`` for ``lam > 0`` and
    ``mass{S <= x} <= M(-lam)^count e^{lam x}``, with ``M`` the moment generating sum
    of the finite masses. Also returns whether each side was actually cut.
    """
    lo_full = count * pmf.offset
    hi_full = count * (pmf.offset + pmf.masses.size - 1)
    log_tau = math.log(tail_mass)
    keep = pmf.masses > 0.0
    exact = (np.log(pmf.masses[keep]), pmf.losses[keep])
    proxy = _proxy(pmf)
    hi = math.ceil(_chernoff(exact, proxy, count, log_tau, 1.0) / pmf.h) + 1
    lo = math.floor(-_chernoff(exact, proxy, count, log_tau, -1.0) / pmf.h) - 1
    cut_hi, cut_lo = hi < hi_full, lo > lo_full
    hi, lo = min(hi, hi_full), max(lo, lo_full)
    if lo > hi:  # the two bounds cross only when the mass is tiny; keep everything
        lo, hi, cut_lo, cut_hi = lo_full, hi_full, False, False
    return lo, hi, cut_lo, cut_hi


def self_compose(pmf: LossPmf, count: int, tail_mass: float) -> LossPmf:
    """The ``count``-fold composition of ``pmf`` with itself, by a single FFT.

    The output window comes from Chernoff bounds (each cut tail has mass at most
    ``tail_mass``; that mass is added back, at the first bucket on the left and at
    ``+inf`` on the right). The input is folded and transformed once at a fast length
    ``N`` covering the window; the transform is raised to the ``count``-th power in
    polar form and inverted. Mass that falls outside the window wraps around onto it
    (cyclic convolution): that adds non-negative mass, which is pessimistic.
    """
    from scipy import fft as sp_fft  # deferred: SciPy is slow to import

    if count == 1:
        return pmf
    h = pmf.h
    lo, hi, cut_lo, cut_hi = _window(pmf, count, tail_mass)
    width = hi - lo + 1
    n = sp_fft.next_fast_len(width, real=True)
    if n > MAX_FFT:
        raise TooManyBuckets(n)
    folded = np.bincount(np.arange(pmf.masses.size) % n, weights=pmf.masses, minlength=n)
    spectrum = sp_fft.rfft(folded, n)
    radius = np.abs(spectrum)
    with np.errstate(divide="ignore"):
        log_r = np.log(radius)
    magnitude = np.exp(count * log_r)
    # Most high frequencies underflow to 0 for large counts: the angle is needed only
    # where the magnitude is not 0 (elsewhere the powered value is 0 either way).
    live = np.flatnonzero(magnitude)
    # The angle times count is reduced by cos/sin's own argument reduction (accurate).
    angle = np.angle(spectrum[live]) * count
    powered = np.zeros(radius.size, dtype=np.complex128)
    powered.real[live] = magnitude[live] * np.cos(angle)
    powered.imag[live] = magnitude[live] * np.sin(angle)
    cyclic = sp_fft.irfft(powered, n)
    shift = (lo - count * pmf.offset) % n
    out = np.roll(cyclic, -shift)[:width]
    # A priori error (see the module docstring); the power is analysed as
    # |a^k - b^k| <= k |a - b| max(|a|, |b|)^(k-1), plus polar rounding k u (pi + 2).
    gamma = _gamma(n)
    norm_p = _norm2(pmf.masses)
    growth = math.exp((count - 1) * math.log1p(gamma * math.sqrt(n) * norm_p))
    norm_out = _norm2(out)
    err2 = count * growth * gamma * norm_p + (count * U * (math.pi + 2.0) + gamma) * norm_out + U
    fft_slack = err2 * math.sqrt(width) * 1.01
    total = pmf.total_mass
    slack = count * pmf.slack * max(1.0, total) ** (count - 1) + fft_slack
    m = pmf.infinity_mass
    infinity = -math.expm1(count * math.log1p(-m)) * (1.0 + 8.0 * U) if m < 1.0 else 1.0
    if cut_lo:
        out[0] += tail_mass
    if cut_hi:
        infinity += tail_mass
    # Expected finite mass: |fin|^count less the two cut tails (at most tail_mass each).
    finite = pmf.finite_mass
    target = 0.0
    if finite > 0.0:
        target = math.exp(count * math.log(finite)) * (1.0 - 8.0 * U) - 2.0 * tail_mass
    result = _finish(h, lo, out, infinity, slack, target)
    return truncate(result, tail_mass)
