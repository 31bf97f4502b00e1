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
result's ``slack``. For a ``k``-fold power that constant grows like ``k sqrt(N)`` and
swamps small deltas (1.2e-8 at 10^4 DP-SGD steps).

*Tilted* k-fold powers (:func:`self_compose`). The masses are first multiplied by
``e^{lam l_j}`` and normalised (exponential tilting commutes with convolution), the
power is taken on the tilted masses, and the result is multiplied back by
``M^k e^{-lam l_j}``. An error vector ``E`` of the tilted result (``||E||_2 <= B``)
becomes ``E_j M^k e^{-lam l_j}``, so at ``eps`` the hockey-stick moves by at most::

    B M^k sqrt(sum_{l_j > eps} e^{-2 lam l_j}) <= B M^k e^{-lam eps} / sqrt(1 - e^{-2 lam h})

and by at most ``B M^k sqrt(sum_j e^{-2 lam l_j})`` for any eps: the
``min(tilt_cap, tilt_coef e^{-lam eps})`` term of :class:`.pmf.LossPmf`. ``M^k
e^{-lam eps}`` is the Chernoff bound on the mass above ``eps``, so this error is
*relative* to (an estimate of) delta rather than a constant: the smallest delta that
can be certified no longer grows like ``k sqrt(N)``.

Error in the inputs carries over by linearity: with ``delta_a <= delta_â + err_a``
for all real eps, ``delta_{a*b}(eps) <= delta_{â*b̂}(eps) + sum_l b(l) err_a(eps - l)
+ sum_l â(l) err_b(eps - l)``. A constant ``err`` is multiplied by the other side's
total mass; a tilted one ``kappa e^{-lam eps}`` by the other side's moment generating
sum ``sum_l â(l) e^{lam l}`` (computed from the known masses ``â``), infinite losses
weighing it by its cap.
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.accounting._math.pld.discretize import TooManyBuckets
from dpkit.accounting._math.pld.pmf import FloatArray, LossPmf, U, mass_lower, truncate
from dpkit.accounting._math.pld.window import choose_tilt, log_mgf, window

__all__ = ["convolve", "self_compose"]

_FFT_C = 10.0
#: Largest FFT length (2^27 doubles: 1 GiB); above it the grid is too fine.
MAX_FFT = 1 << 27
#: Tilted weights below ``e^-_UNDERFLOW`` (relative to the largest) are not tilted:
#: their mass is moved to ``+inf`` instead (pessimistic; it is below ``e^-400``).
_UNDERFLOW = 700.0


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


def _propagated_error(
    a: LossPmf, b: LossPmf, fft_slack: float
) -> tuple[float, float, float, float]:
    """``(slack, tilt, coef, cap)`` of ``a * b`` from the inputs' errors (module docstring).

    At most one tilted term survives: it is weighted by the *other* operand's computed
    masses (its generating sum), every other error by the other operand's total mass.
    """
    # Keep the tilted term with the larger coefficient; turn the other into its cap.
    keep_b = b.tilt_coef >= a.tilt_coef
    tilted, other = (b, a) if keep_b else (a, b)
    slack = (
        tilted.slack * max(1.0, other.total_mass)
        + (other.slack + other.tilt_cap) * max(1.0, tilted.total_mass)
        + fft_slack
    )
    if tilted.tilt_cap == 0.0:
        return slack * (1.0 + 4.0 * U), 0.0, 0.0, 0.0
    # Infinite losses of `other` shift eps to -inf, where the tilted term is its cap.
    slack += other.infinity_mass * tilted.tilt_cap
    keep = other.masses > 0.0
    log_m = log_mgf(np.log(other.masses[keep]), other.losses[keep], tilted.tilt)
    coef = tilted.tilt_coef * math.exp(log_m) * (1.0 + 16.0 * U) if log_m < 700.0 else math.inf
    cap = tilted.tilt_cap * max(1.0, other.finite_mass)
    return slack * (1.0 + 4.0 * U), tilted.tilt, coef, cap * (1.0 + 4.0 * U)


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
    slack, tilt, coef, cap = _propagated_error(a, b, fft_slack)
    target = a.finite_mass * b.finite_mass * (1.0 - 8.0 * U)
    result = _finish(a.h, a.offset + b.offset, out, _combine_infinity(a, b), slack, target)
    return truncate(result.with_error(result.slack, tilt, coef, cap), tail_mass)


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
    """A bound on the 2-norm error of :func:`_fft_power`'s result (entries sum to ~1).

    The power is analysed as ``|a^k - b^k| <= k |a - b| max(|a|, |b|)^(k-1)`` with
    ``|a| <= sum(weights)``, plus polar rounding ``k u (pi + 2)`` and the inverse FFT.
    """
    gamma = _gamma(n)
    norm_p = _norm2(weights)
    radius = float(np.sum(weights)) * (1.0 + 2.0 * (math.log2(max(2, weights.size)) + 1.0) * U)
    growth = math.exp((count - 1) * math.log(radius + gamma * math.sqrt(n) * norm_p))
    norm_out = _norm2(out)
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
        pmf = LossPmf(pmf.h, pmf.offset, masses, pmf.infinity_mass + moved, pmf.slack)
    scaled = masses * np.exp(tilt * losses - peak)
    log_norm = peak + math.log(float(np.sum(scaled)))
    weights = masses * np.exp(tilt * losses - log_norm)
    # exp within 4 ulp, its argument within (|tilt l| + |log M| + 1) 2u, one product.
    rho = (2.0 * float(np.max(np.abs(tilt * losses))) + 2.0 * abs(log_norm) + 16.0) * U
    return pmf, weights, log_norm, rho


#: Tilts at which the per-entry Chernoff caps of :func:`_untilt` are evaluated.
_CAP_TILTS = np.concatenate((-np.geomspace(256.0, 0.125, 24), np.geomspace(0.125, 256.0, 24)))


def _chernoff_caps(pmf: LossPmf, count: int, losses: FloatArray) -> FloatArray:
    """Upper bounds on the exact ``count``-fold masses at ``losses`` (Chernoff).

    The mass at ``l`` is at most ``mass{S >= l} <= M(lam)^count e^{-lam l}`` for
    ``lam > 0`` and at most ``mass{S <= l}``, the same with ``lam < 0``; the generating
    sums are rigorous upper bounds (:func:`.window.log_mgf`).
    """
    keep = pmf.masses > 0.0
    logm, grid = np.log(pmf.masses[keep]), pmf.losses[keep]
    span = float(np.max(np.abs(grid))) + 1.0
    tilts = _CAP_TILTS[np.abs(_CAP_TILTS) * span <= 600.0]
    psi = np.array([count * log_mgf(logm, grid, float(lam)) for lam in tilts])
    best = np.full(losses.size, np.inf)
    for lam, value in zip(tilts.tolist(), psi.tolist(), strict=True):
        np.minimum(best, value - lam * losses, out=best)
    # exp within 4 ulp; the exponent's rounding (|.| + 1) 4u.
    best += (np.abs(best) + 1.0) * 4.0 * U + 8.0 * U
    return np.asarray(np.exp(np.minimum(best, 0.0)) * (1.0 + 16.0 * U))


def _untilt(
    pmf: LossPmf,
    count: int,
    tilted: FloatArray,
    log_scale: FloatArray,
    log_error: float,
    losses: FloatArray,
    tilt: float,
) -> tuple[FloatArray, float, float]:
    """Masses from the tilted power, and the ``(coef, cap)`` of their error.

    Entry ``j`` is ``max(tilted_j, 0) F_j`` with ``F_j = M^k e^{-tilt l_j}`` (rounded
    up), capped at the Chernoff bound ``C_j >= c_j`` on the exact mass: far left the
    tilted round-off, multiplied by ``F_j``, would otherwise dwarf the true masses.
    Capping keeps the error statement: the shortfall ``(c_j - ĉ_j)_+`` is at most
    ``min(|E_j| F_j, C_j)``. So at ``eps`` the error is at most ``B M^k e^{-tilt eps} /
    sqrt(1 - e^{-2 tilt h})`` (Cauchy-Schwarz, the coefficient) and, for every eps, at
    most ``sum_j min(B F_j, C_j)`` (the cap; ``|E_j| <= ||E||_2 = B``).
    """
    caps = _chernoff_caps(pmf, count, losses)
    scale = np.exp(np.minimum(log_scale, 709.0))
    out = np.minimum(np.maximum(tilted, 0.0) * scale, caps)
    decay = -math.expm1(-2.0 * tilt * pmf.h)
    coef = math.exp(min(log_error - 0.5 * math.log(decay), 709.0)) * (1.0 + 16.0 * U)
    per_entry = np.minimum(np.exp(np.minimum(log_error - tilt * losses, 709.0)), caps)
    cap = float(np.sum(per_entry)) * (1.0 + 1e-12)
    return np.asarray(out), coef, cap


def self_compose(pmf: LossPmf, count: int, tail_mass: float) -> LossPmf:
    """The ``count``-fold composition of ``pmf`` with itself, by a single (tilted) FFT.

    The output window comes from Chernoff bounds (each cut tail has mass at most
    ``tail_mass``; that mass is added back, at the first bucket on the left and at
    ``+inf`` on the right). The input is tilted by :func:`.window.choose_tilt` (see
    the module docstring), folded and transformed once at a fast length ``N`` covering
    the window; the transform is raised to the ``count``-th power in polar form and
    inverted. Mass that falls outside the window wraps around onto it (cyclic
    convolution): that adds non-negative mass, which is pessimistic; the right end of
    the window is extended until the wrapped tilted mass is below ``tail_mass``.
    """
    from scipy import fft as sp_fft  # deferred: SciPy is slow to import

    if count == 1:
        return pmf
    h = pmf.h
    lo, hi, cut_lo, cut_hi = window(pmf, count, tail_mass)
    width = hi - lo + 1
    estimate = count * _gamma(sp_fft.next_fast_len(width, real=True)) * _norm2(pmf.masses)
    tilt = choose_tilt(pmf, count, width, max(estimate, U))
    pmf, weights, log_norm, rho = _tilted_weights(pmf, tilt)
    if tilt > 0.0:
        # Wrapped tilted mass W lands at losses >= lo h with weight M^k e^{-tilt lo h}.
        tilted = LossPmf(h, pmf.offset, weights, 0.0)
        log_target = math.log(tail_mass) + tilt * lo * h - count * log_norm
        hi = max(hi, window(tilted, count, math.exp(max(log_target, -690.0)), True)[1])
    width = hi - lo + 1
    n = sp_fft.next_fast_len(width, real=True)
    if n > MAX_FFT:
        raise TooManyBuckets(n)
    out = _fft_power(weights, count, lo, pmf.offset, width)
    error = _power_error(weights, out, count, n)
    # (1 - rho)^-k: the exact tilted weights are at most the computed ones times it.
    log_inflate = -count * math.log1p(-rho) + 8.0 * U
    losses = (lo + np.arange(width, dtype=np.float64)) * h
    log_scale = count * log_norm - tilt * losses + log_inflate
    # exp within 4 ulp of its argument, the argument within (|.| + 1) 4u: round up.
    log_scale += (np.abs(log_scale) + 1.0) * 4.0 * U + 8.0 * U
    log_error = math.log(error) + count * log_norm + log_inflate + 16.0 * U
    total = pmf.total_mass
    slack = count * pmf.slack * max(1.0, total) ** (count - 1)
    coef = cap = 0.0
    if tilt > 0.0:
        out, coef, cap = _untilt(pmf, count, out, log_scale, log_error, losses, tilt)
    else:
        out = np.maximum(out, 0.0) * np.exp(log_scale)
        slack += math.exp(log_error) * math.sqrt(width) * (1.0 + 16.0 * U)
    m = pmf.infinity_mass
    infinity = -math.expm1(count * math.log1p(-m)) * (1.0 + 8.0 * U) if m < 1.0 else 1.0
    if cut_lo:
        out[0] += tail_mass
    if cut_hi:
        infinity += tail_mass
    # Expected finite mass: |fin|^count less the two cut tails (at most tail_mass each).
    # With a tilt the error allowance already covers every entry's shortfall (far left,
    # where the tilted masses are below the round-off, they may be lost entirely), so
    # nothing is moved to +inf for it.
    finite = pmf.finite_mass
    target = 0.0
    if finite > 0.0 and tilt == 0.0:
        target = math.exp(count * math.log(finite)) * (1.0 - 8.0 * U) - 2.0 * tail_mass
    result = _finish(h, lo, out, infinity, slack, target)
    return truncate(result.with_error(result.slack, tilt, coef, cap), tail_mass)
