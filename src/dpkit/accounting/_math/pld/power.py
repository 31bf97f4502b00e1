"""The k-fold self-composition of a discrete PLD: one FFT power, tilted where it helps.

A plain FFT power ``c = F^-1[(F m)^k]`` errs by a vector ``E`` whose 2-norm is a small
multiple of ``k gamma ||m||_2`` (see :func:`_power_error`) but which may sit anywhere:
bounded only through ``|<E, w>| <= ||E||_2 sqrt(N)`` it costs delta a *constant*
(1.2e-8 at 10^4 DP-SGD steps), which swamps small deltas.

Exponential tilting. Multiplying the masses by ``e^{lam l_j}`` (and normalising by any
``M``) commutes with convolution: the k-fold power of the tilted masses, multiplied by
``M^k e^{-lam l_j}``, is the k-fold power of the masses. Round-off ``E`` of the tilted
power becomes ``E_j M^k e^{-lam l_j}``; at ``eps`` the hockey-stick moves by at most
(Cauchy-Schwarz over the entries above ``eps``)::

    ||E||_2 M^k sqrt(sum_{l_j > eps} e^{-2 lam l_j})
        <= ||E||_2 M^k e^{-lam eps} / sqrt(1 - e^{-2 lam h})

and ``M^k e^{-lam eps}`` is the Chernoff bound on the mass above ``eps``: the error is
now *relative* to (an estimate of) delta. At small losses the factor ``M^k e^{-lam l}``
is large and the tilted masses are useless, so we also take the plain power and
splice: entries below the loss ``l_s`` where the two per-entry bounds cross come from
the plain power. Its error acts only for ``eps < l_s`` (the ``low_slack`` step of
:class:`.pmf.LossPmf`); the tilted part gives ``min(tilt_cap, tilt_coef e^{-lam eps})``.

The input's own float error (discretisation, :class:`.pmf.ErrorProfile`) is treated
the same way: located errors ``located_j`` give ``k E_lam M^(k-1) e^{-lam eps}`` with
``E_lam = sum_j located_j e^{lam l_j}`` (see :func:`_input_error`), so that too no
longer grows like ``k`` times a constant.

Windows and tails: the output window comes from Chernoff bounds (:mod:`.window`); each
cut tail has mass at most ``tail_mass``, added back at the first bucket on the left
and at ``+inf`` on the right. Mass outside the window wraps around (cyclic
convolution), which only adds non-negative mass.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from dpkit.accounting._math.pld.convolve import MAX_FFT, fft_gamma, finish, norm2
from dpkit.accounting._math.pld.discretize import TooManyBuckets
from dpkit.accounting._math.pld.pmf import (
    ErrorProfile,
    FloatArray,
    LossPmf,
    U,
    exp_up,
    truncate,
)
from dpkit.accounting._math.pld.window import choose_tilt, log_mgf, window

__all__ = ["k_fold", "self_compose"]

#: Tilted weights below ``e^-_UNDERFLOW`` (relative to the largest) are not tilted:
#: their mass is moved to ``+inf`` instead (pessimistic; it is below ``e^-400``).
_UNDERFLOW = 700.0


def _fft_power(weights: FloatArray, count: int, lo: int, offset: int, width: int) -> FloatArray:
    """``count``-fold cyclic self-convolution of ``weights`` at a fast length, on the window.

    The window is ``width`` entries from grid index ``lo``; ``weights[0]`` sits at grid
    index ``offset``. Everything outside the window wraps onto it (non-negative mass).
    """
    from scipy import fft as sp_fft  # deferred: SciPy is slow to import

    n = sp_fft.next_fast_len(width, real=True)
    folded = np.bincount(np.arange(weights.size) % n, weights=weights, minlength=n)
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
    shift = (lo - count * offset) % n
    return np.asarray(np.roll(cyclic, -shift)[:width])


def _power_error(weights: FloatArray, out: FloatArray, count: int, n: int) -> float:
    """A bound on the 2-norm error of :func:`_fft_power`'s result.

    The transform errs by at most ``gamma sqrt(n) ||w||_2`` (Higham 2002, Thm 24.2);
    the power is analysed as ``|a^k - b^k| <= k |a - b| max(|a|, |b|)^(k-1)`` with
    ``|a| <= sum(w)``, plus polar rounding ``k u (pi + 2)`` and the inverse FFT.
    """
    gamma = fft_gamma(n)
    norm_p = norm2(weights)
    radius = float(np.sum(weights)) * (1.0 + 2.0 * (math.log2(max(2, weights.size)) + 1.0) * U)
    growth = math.exp((count - 1) * math.log(radius + gamma * math.sqrt(n) * norm_p))
    norm_out = norm2(out)
    err2 = count * growth * gamma * norm_p + (count * U * (math.pi + 2.0) + gamma) * norm_out + U
    return err2 * 1.01


def _tilted_weights(pmf: LossPmf, tilt: float) -> tuple[LossPmf, FloatArray, float, float]:
    """``pmf`` with negligible masses moved to ``+inf``, its tilted weights, ``log M``, rho.

    The weights are ``fl(m_j e^{tilt l_j - log M})`` (``M`` any normaliser; we take their
    float sum), each within a relative ``rho`` of the exact value.
    """
    losses = pmf.losses
    with np.errstate(divide="ignore"):
        log_w = np.log(pmf.masses) + tilt * losses
    peak = float(log_w.max())
    tiny = log_w < peak - _UNDERFLOW
    masses = pmf.masses
    if tiny.any():  # untilted masses below e^-400: move them up to +inf
        moved = float(np.sum(masses[tiny])) * (1.0 + 1e-12)
        masses = np.where(tiny, 0.0, masses)
        infinity = pmf.infinity_mass + moved
        pmf = LossPmf(pmf.h, pmf.offset, masses, infinity, pmf.slack, profile=pmf.profile)
    scaled = masses * np.exp(tilt * losses - peak)
    log_norm = peak + math.log(float(np.sum(scaled)))
    weights = masses * np.exp(tilt * losses - log_norm)
    # exp within 4 ulp, its argument within (|tilt l| + |log M| + 1) 2u, one product.
    rho = (2.0 * float(np.max(np.abs(tilt * losses))) + 2.0 * abs(log_norm) + 16.0) * U
    return pmf, weights, log_norm, rho


def _input_error(
    pmf: LossPmf, profile: ErrorProfile, count: int, tilt: float
) -> tuple[float, float, float]:
    """The input's own float error after ``count`` compositions: ``(slack, coef, cap)``.

    With ``a = â + d`` (exact = computed + error), ``a^k - â^k = sum_i a^i * d *
    â^(k-1-i)``, and ``d``'s hockey-stick is at most ``sum_{l_j > x} located_j <=
    min(E_0, E_lam e^{-lam x})`` (:class:`.pmf.ErrorProfile`). Weighted by the other
    factors this is at most ``k E_lam M^(k-1) e^{-lam eps}`` with ``M`` bounding the
    generating sums of both ``a`` and ``â`` (``sum_j (m_j + mass_error_j) e^{lam l_j}``),
    and at most ``k E_0 T^(k-1)`` with ``T`` bounding both totals; ``base`` acts at
    every eps and is carried as slack, as is the part of the other factors at
    ``+inf`` (which shifts eps to ``-inf``, where ``d``'s allowance is ``E_0``).
    """
    losses = pmf.losses
    total = max(1.0, pmf.total_mass) + float(np.sum(profile.mass_error)) * (1.0 + 1e-12)
    slack = count * profile.base * total ** (count - 1) * (1.0 + 4.0 * U)
    keep = profile.located > 0.0
    if not keep.any():
        return slack, 0.0, 0.0
    located = float(np.sum(profile.located)) * (1.0 + 1e-12)
    # The factors' mass at +inf: at most 1 - (1 - m_inf)^(k-1) of each.
    m_inf = pmf.infinity_mass
    infinite = 1.0 if m_inf >= 1.0 else -math.expm1((count - 1) * math.log1p(-m_inf))
    slack += count * min(1.0, infinite * (1.0 + 8.0 * U)) * located * total ** (count - 1)
    log_e = log_mgf(np.log(profile.located[keep]), losses[keep], tilt)
    if pmf.true_log_mgf is not None:
        log_m = pmf.true_log_mgf(tilt)
    else:
        bound = pmf.masses + profile.mass_error
        live = bound > 0.0
        log_m = log_mgf(np.log(bound[live]), losses[live], tilt) + 4.0 * U
    log_coef = math.log(count) + log_e + (count - 1) * log_m
    coef = exp_up(log_coef + 1e-12 * (1.0 + abs(log_coef)))
    log_cap = math.log(count * located) + (count - 1) * math.log(total)
    cap = exp_up(log_cap + 1e-12 * (1.0 + abs(log_cap)))
    return slack, coef, cap


def _spliced(
    pmf: LossPmf, count: int, lo: int, width: int, n: int, tilt: float
) -> tuple[FloatArray, dict[str, float]]:
    """Masses of the k-fold power on the window, plain below ``l_s`` and tilted above.

    Returns the masses and the error terms from the round-off of both powers (module
    docstring): ``low_slack = B_0 sqrt(s)`` below ``l_s`` (``s`` plain entries) and
    ``min(tilt_cap, tilt_coef e^{-lam eps})`` with ``tilt_coef = B M^k (1 - rho)^-k /
    sqrt(1 - e^{-2 lam h})``, ``tilt_cap = tilt_coef e^{-lam l_s}``.
    """
    h = pmf.h
    plain = _fft_power(pmf.masses, count, lo, pmf.offset, width)
    plain_error = _power_error(pmf.masses, plain, count, n)
    _, weights, log_norm, rho = _tilted_weights(pmf, tilt)
    tilted = _fft_power(weights, count, lo, pmf.offset, width)
    # (1 - rho)^-k: the exact tilted weights are at most the computed ones times it.
    log_inflate = -count * math.log1p(-rho) + 8.0 * U
    log_power = count * log_norm
    log_error = math.log(_power_error(weights, tilted, count, n)) + log_power + log_inflate
    # Each term of the exponent is rounded (relative u): allow 4u of their sizes.
    log_error += (abs(log_error) + 2.0 * abs(log_power) + 1.0) * 4.0 * U
    # Per entry the tilted error is e^{log_error - tilt l_j}, the plain one B_0: the
    # first entry where the tilted one is smaller starts the tilted part.
    cross = (log_error - math.log(plain_error)) / (tilt * h) - lo
    losses = (lo + np.arange(width, dtype=np.float64)) * h
    log_scale = log_power - tilt * losses + log_inflate
    # exp within 4 ulp; the argument's terms (the grid losses too: |tilt l| u) are
    # rounded relative to their own sizes, which may cancel: allow 4u of each.
    log_scale += (np.abs(log_power) + np.abs(tilt * losses) + 1.0) * 4.0 * U + 8.0 * U
    # Entries whose factor would overflow stay plain (log_scale decreases with l).
    huge = int(np.count_nonzero(log_scale > 700.0))
    s = min(width, max(0, math.ceil(cross), huge))
    out = np.empty(width)
    out[:s] = np.maximum(plain[:s], 0.0)
    out[s:] = np.maximum(tilted[s:], 0.0) * np.exp(log_scale[s:])
    terms: dict[str, float] = {"tilt": tilt}
    decay = -math.expm1(-2.0 * tilt * h)
    log_coef = log_error - 0.5 * math.log(decay)
    terms["tilt_coef"] = exp_up(log_coef)
    split = (lo + s) * h  # the first tilted loss (the tilted terms act above it)
    terms["tilt_cap"] = exp_up(log_coef - tilt * split)
    if s > 0:
        terms["low_slack"] = plain_error * math.sqrt(s) * (1.0 + 16.0 * U)
        terms["low_until"] = split
    return out, terms


def k_fold(pmf: LossPmf, count: int, tail_mass: float) -> LossPmf:
    """The ``count``-fold composition of ``pmf`` with itself (module docstring).

    The tilt comes from :func:`.window.choose_tilt` (0: one plain power, its error a
    constant as before); the right end of the window is extended until the wrapped
    tilted mass is below ``tail_mass``.
    """
    from scipy import fft as sp_fft  # deferred: SciPy is slow to import

    if count == 1:
        return pmf
    h = pmf.h
    lo, hi, cut_lo, cut_hi = window(pmf, count, tail_mass)
    width = hi - lo + 1
    estimate = count * fft_gamma(sp_fft.next_fast_len(width, real=True)) * norm2(pmf.masses)
    floor = count * pmf.infinity_mass + 2.0 * tail_mass
    tilt = choose_tilt(pmf, count, width, max(estimate, U), floor)
    if tilt > 0.0:
        pmf, weights, log_norm, _ = _tilted_weights(pmf, tilt)
        # Tilted mass beyond the window wraps to its start. Landing below the splice
        # (where F = M^k e^{-tilt l} >~ 1 and the plain power is used) it is discarded;
        # further on it would add about its own size. So the window reaches the
        # tilted Chernoff cut at tail_mass less the (estimated) plain part.
        tilted = LossPmf(h, pmf.offset, weights, 0.0)
        plain_part = max(0, math.floor(count * log_norm / (tilt * h)) - lo)
        hi = max(hi, window(tilted, count, tail_mass, True)[1] - plain_part)
    width = hi - lo + 1
    n = sp_fft.next_fast_len(width, real=True)
    if n > MAX_FFT:
        raise TooManyBuckets(n)
    total = pmf.total_mass
    slack = count * pmf.slack * max(1.0, total) ** (count - 1)
    terms: dict[str, float] = {}
    target = 0.0
    if tilt > 0.0:
        out, terms = _spliced(pmf, count, lo, width, n, tilt)
        if pmf.profile is not None:
            slack, coef, cap = _input_error(pmf, pmf.profile, count, tilt)
            terms["tilt_coef"] = (terms["tilt_coef"] + coef) * (1.0 + 4.0 * U)
            terms["tilt_cap"] = (terms["tilt_cap"] + cap) * (1.0 + 4.0 * U)
        # The error terms cover every entry's shortfall: no deficit rule.
    else:
        out = _fft_power(pmf.masses, count, lo, pmf.offset, width)
        slack += _power_error(pmf.masses, out, count, n) * math.sqrt(width) * (1.0 + 16.0 * U)
        # Expected finite mass: |fin|^count less the two cut tails (at most tail_mass
        # each); a float shortfall against it goes to +inf.
        finite = pmf.finite_mass
        if finite > 0.0:
            target = math.exp(count * math.log(finite)) * (1.0 - 8.0 * U) - 2.0 * tail_mass
    m = pmf.infinity_mass
    infinity = -math.expm1(count * math.log1p(-m)) * (1.0 + 8.0 * U) if m < 1.0 else 1.0
    if cut_lo:
        out[0] += tail_mass
    if cut_hi:
        infinity += tail_mass
    result = finish(h, lo, out, infinity, slack, target)
    result = result.with_error(slack=result.slack, **terms)
    if pmf.true_log_mgf is not None:
        result = replace(result, true_log_mgf=_scaled(pmf.true_log_mgf, count))
    return truncate(result, tail_mass)


def _scaled(log_mgf_bound: Callable[[float], float], count: int) -> Callable[[float], float]:
    """The generating-sum bound of ``count`` independent copies."""

    def value(lam: float) -> float:
        return count * log_mgf_bound(lam)

    return value


def self_compose(pmf: LossPmf, count: int, tail_mass: float) -> LossPmf:
    """The ``count``-fold composition of ``pmf`` with itself: :func:`k_fold`."""
    return k_fold(pmf, count, tail_mass)
