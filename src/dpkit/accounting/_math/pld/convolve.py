"""Composition of discrete PLDs: convolution, and k-fold self-convolution by one FFT.

The PLD of the composition of two mechanisms (adaptive, with the worst-case pairs
fixed in advance) is the convolution of their PLDs; infinite losses absorb
(Sommer, Meiser & Mohammadi 2019, Thm 1; Koskela et al. 2020, Sec. 2). On the grid
``h Z`` this is the convolution of the mass arrays, with offsets adding.

Floating point. For a length-``N`` FFT the computed transform errs by at most
``gamma sqrt(N) ||x||_2`` in the 2-norm with ``gamma = c log2(N) u`` (Higham, *Accuracy
and Stability of Numerical Algorithms*, 2nd ed., Thm 24.2; we take ``c = 10``, above
the ``~6.7`` of that theorem for accurate twiddle factors). Negative round-off is
clipped to 0 (which moves each entry towards its true, non-negative value) and any
total-mass shortfall is moved to ``+inf``.

*Plain* (untilted) FFTs: a mass-array error ``e`` moves ``delta(eps)`` by at most
``|<e, w>| <= ||e||_2 sqrt(N)`` (weights ``w`` in ``[0, 1]``), a constant added to the
result's ``slack``. For a ``k``-fold power that constant would grow like ``k sqrt(N)``.

k-fold self-compositions (:mod:`.power`) are computed on exponentially tilted masses,
so that their round-off is relative to delta rather than a constant; they carry a
decaying error term ``min(tilt_cap, tilt_coef e^{-lam eps})`` and a step
``low_slack`` acting below ``low_until`` (:class:`.pmf.LossPmf`).

Error in the inputs carries over by linearity: with ``delta_a <= delta_â + err_a``
for all real eps, ``delta_{a*b}(eps) <= delta_{â*b̂}(eps) + sum_l b(l) err_a(eps - l)
+ sum_l â(l) err_b(eps - l)``. A constant ``err`` is multiplied by the other side's
total mass; a tilted one ``kappa e^{-lam eps}`` by the other side's moment generating
sum ``sum_l â(l) e^{lam l}`` (computed from the known masses ``â``), infinite losses
weighing it by its cap; a step ``low [eps < until]`` by ``â``'s total, its end moving up
by ``â``'s largest loss. The term weighted by the *exact* other operand (whose
generating sum is not at hand) is first made a constant (its cap).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from dpkit.accounting._math.pld.discretize import TooManyBuckets
from dpkit.accounting._math.pld.pmf import FloatArray, LossPmf, U, exp_up, mass_lower, truncate
from dpkit.accounting._math.pld.window import log_mgf

__all__ = ["convolve"]

_FFT_C = 10.0
#: Largest FFT length (2^27 doubles: 1 GiB); above it the grid is too fine.
MAX_FFT = 1 << 27


def fft_gamma(n: int) -> float:
    return _FFT_C * max(1.0, math.log2(max(n, 2))) * U


def norm2(x: FloatArray) -> float:
    # np.sum (pairwise) rather than np.dot: no BLAS thread wake-up, and at least as
    # accurate.
    return math.sqrt(float(np.sum(x * x)))


def _combine_infinity(a: LossPmf, b: LossPmf) -> float:
    # Infinite loss absorbs: mass(inf) = a_inf |b| + a_fin b_inf, rounded up.
    value = a.infinity_mass * b.total_mass + a.finite_mass * b.infinity_mass
    return value * (1.0 + 8.0 * U)


def finish(
    h: float, offset: int, masses: FloatArray, infinity: float, slack: float, target: float
) -> LossPmf:
    """Clip round-off negatives and send any shortfall against ``target`` to ``+inf``."""
    masses = np.maximum(masses, 0.0)
    deficit = target - mass_lower(masses)
    return LossPmf(h, offset, masses, infinity + max(0.0, deficit), slack)


def _times(value: float, scale: float) -> float:
    """``value * scale`` with ``0 * inf = 0`` (an absent term stays absent)."""
    return value * scale if value > 0.0 else 0.0


def _propagated_error(a: LossPmf, b: LossPmf, fft_slack: float) -> dict[str, float]:
    """The error terms of ``a * b`` from the inputs' errors (module docstring).

    One operand (``kept``) has its decaying and step terms weighted by the *other*
    operand's computed masses (its generating sum; its largest loss for the step).
    The other operand's terms are weighted by ``kept``'s exact measure: through
    ``kept.true_log_mgf`` when it is known and the tilts agree (a step
    ``low [x < until]`` is at most ``low e^{lam (until - x)}``), else as constants.
    """
    keep_b = b.tilt_coef + b.low_slack >= a.tilt_coef + a.low_slack
    kept, other = (b, a) if keep_b else (a, b)
    tilt = kept.tilt if kept.tilt_cap > 0.0 else other.tilt
    weight = max(1.0, kept.total_mass)
    slack = kept.slack * max(1.0, other.total_mass) + other.slack * weight + fft_slack
    # Infinite losses of `other` shift eps to -inf: there both terms act in full.
    slack += other.infinity_mass * (kept.tilt_cap + kept.low_slack)
    coef = cap = 0.0
    # A point mass only shifts kept's step; against a spread-out measure the step's
    # weight sum_l m_l [l > eps - until] <= e^{lam (until - eps)} M(lam) decays.
    step_decays = kept.low_slack > 0.0 and tilt > 0.0 and other.masses.size > 1
    if kept.tilt_cap > 0.0 or step_decays:
        keep = other.masses > 0.0
        log_m = log_mgf(np.log(other.masses[keep]), other.losses[keep], tilt)
        scale = exp_up(log_m)
        coef = _times(kept.tilt_coef, scale)
        cap = kept.tilt_cap * max(1.0, other.finite_mass)
        if step_decays:
            coef += _times(kept.low_slack * exp_up(tilt * kept.low_until), scale)
            cap += kept.low_slack * max(1.0, other.finite_mass)
    # The other operand's terms, weighted by kept's exact measure.
    carried = other.tilt_cap + other.low_slack
    same_tilt = other.tilt_cap == 0.0 or other.tilt == tilt
    if carried > 0.0 and tilt > 0.0 and same_tilt and kept.true_log_mgf is not None:
        scale = exp_up(kept.true_log_mgf(tilt))
        step = other.low_slack * exp_up(tilt * other.low_until) if other.low_slack > 0.0 else 0.0
        coef += _times(other.tilt_coef + step, scale)
        cap += carried * weight
        slack += kept.infinity_mass * carried
    else:
        slack += carried * weight
    terms: dict[str, float] = {"slack": slack * (1.0 + 4.0 * U)}
    if cap > 0.0:
        terms.update(tilt=tilt, tilt_coef=coef * (1.0 + 4.0 * U), tilt_cap=cap * (1.0 + 4.0 * U))
    if kept.low_slack > 0.0 and not step_decays:
        # sum_l m_l [eps - l < until] vanishes once eps >= until + the largest loss.
        terms["low_slack"] = kept.low_slack * max(1.0, other.finite_mass) * (1.0 + 4.0 * U)
        terms["low_until"] = kept.low_until + float(other.losses[-1]) + other.h
    return terms


def convolve(a: LossPmf, b: LossPmf, tail_mass: float) -> LossPmf:
    """The PLD of composing ``a`` and ``b`` (same grid), tails truncated pessimistically."""
    from scipy import fft as sp_fft  # deferred: SciPy is slow to import

    if a.h != b.h:
        raise ValueError("PLDs on different grids")  # internal misuse
    n_out = a.masses.size + b.masses.size - 1
    if a.masses.size == 1 or b.masses.size == 1:  # a shift and scale: exact up to u
        out = np.convolve(a.masses, b.masses)
        fft_slack = 2.0 * U * math.sqrt(n_out) * norm2(out)
    else:
        n = sp_fft.next_fast_len(n_out, real=True)
        if n > MAX_FFT:
            raise TooManyBuckets(n)
        fa = sp_fft.rfft(a.masses, n)
        fb = sp_fft.rfft(b.masses, n)
        out = sp_fft.irfft(fa * fb, n)[:n_out]
        gamma = fft_gamma(n)
        norm_a, norm_b = norm2(a.masses), norm2(b.masses)
        bound = gamma * (norm_a * (1.0 + b.finite_mass) + norm_b * (1.0 + a.finite_mass))
        bound += 3.0 * gamma * norm2(out)
        fft_slack = bound * math.sqrt(n_out)
    terms = _propagated_error(a, b, fft_slack)
    target = a.finite_mass * b.finite_mass * (1.0 - 8.0 * U)
    result = finish(a.h, a.offset + b.offset, out, _combine_infinity(a, b), 0.0, target)
    result = result.with_error(**terms)
    if a.true_log_mgf is not None and b.true_log_mgf is not None:
        result = replace(result, true_log_mgf=_summed(a.true_log_mgf, b.true_log_mgf))
    return truncate(result, tail_mass)


def _summed(
    first: Callable[[float], float], second: Callable[[float], float]
) -> Callable[[float], float]:
    """The generating-sum bound of a composition: the logs add (rounded up)."""

    def value(lam: float) -> float:
        total = first(lam) + second(lam)
        return total + 4.0 * U * abs(total)

    return value
