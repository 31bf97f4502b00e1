"""PLDs of discrete additive noise (discrete Gaussian, discrete Laplace), Poisson-subsampled.

Integer-valued noise ``mu0`` on ``Z`` with an integer sensitivity ``D`` (one coordinate),
``mu1(k) = mu0(k - D)`` and ``r(k) = mu1(k) / mu0(k)`` non-decreasing in ``k``. With
subsampling rate ``q`` (``q = 1``: none) the two worst-case pairs for add/remove
neighbours are those of :mod:`.mechanisms` (Koskela, Jalko & Honkela 2020, Sec. 6; Zhu,
Dong & Wang 2022, Prop. 30: Poisson subsampling of a pair dominated by ``(mu1, mu0)``
is dominated by these mixtures), here on atoms::

    "remove": P = (1-q) mu0 + q mu1, Q = mu0:  loss  log(1 - q + q r(k)),  P-mass P(k)
    "add":    P = mu0, Q = (1-q) mu0 + q mu1:  loss -log(1 - q + q r(k)),  P-mass mu0(k)

For the discrete Gaussian ``mu0(k) ∝ exp(-k^2 / (2 sigma^2))`` (Canonne, Kamath &
Steinke 2020), ``log r(k) = (2 k D - D^2) / (2 sigma^2)``: the normaliser cancels in
the loss but not in the masses. For the discrete Laplace ``mu0(k) ∝ a^{|k|}``,
``a = e^{-1/t}``, ``log r(k) = (|k| - |k - D|) / t`` is constant (``-D/t``) for
``k <= 0`` and (``D/t``) for ``k >= D``: those two half-lines are single atoms with
closed-form masses, so that PLD has ``D + 1`` atoms and no truncation.

**Why the result never lowers delta(eps).** ``delta(eps) = sum_k P(k) (1 - e^{eps - l_k})_+``
(plus the mass at ``+inf``) rises with every ``P(k)`` and every ``l_k``, and a measure
that dominates a PLD at every real eps still dominates after convolution (see
:mod:`.pmf`). So here every mass is an *upper* bound (the normaliser is bounded
*below* by a partial sum of its positive terms, each term rounded up), every loss is
an upper bound (its float error bounded and added), the discrete Gaussian's atoms
outside ``|k| <= K`` are moved to ``+inf`` with a proven bound on their mass, and
:func:`.discretize.from_atoms` splits each atom onto the grid by connect-the-dots
(Doroshenko et al. 2022, Thm 4.2). When there are more than :data:`MAX_ATOMS` atoms
(``sigma`` above ~6e4) consecutive atoms are merged into blocks whose loss is the
largest in the block (privacy-buckets rounding, Meiser & Mohammadi 2018), which only
raises losses: for such ``sigma`` a block spans a loss range below ``1e-9 D``.

We assume, as dpkit does throughout, ``exp``/``log``/``log1p``/``expm1`` within 4 ulp
(8u) of their results and one rounding (u) per arithmetic operation.
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.accounting._math.pld.discretize import TooManyBuckets, from_atoms
from dpkit.accounting._math.pld.pmf import FloatArray, LossPmf, U

__all__ = [
    "MAX_ATOMS",
    "MAX_SIGMA_ATOMS",
    "discrete_gaussian_sampled_pmfs",
    "discrete_gaussian_supported",
    "discrete_laplace_sampled_pmfs",
]

#: Most atoms (after merging into blocks) handed to connect-the-dots per ordering.
MAX_ATOMS = 1 << 20
#: Most integers ``k`` whose masses are evaluated (``2 K + 1``): beyond this (``sigma``
#: above ~4e6, ~5 s) the discrete Gaussian is not given a PLD (``supports`` says so).
MAX_SIGMA_ATOMS = 1 << 26
#: Integers evaluated per vectorised chunk (bounds the memory, ~100 MB at most).
_CHUNK = 1 << 20
#: Relative allowance on each computed ``exp(-k^2 / (2 sigma^2))`` and on the sums of
#: them: the exponent (at most 745 in magnitude where ``exp`` does not underflow) has
#: relative error <= 4u, so ``exp`` errs by <= 4u * 745 + 8u < 4e-13; pairwise sums of
#: at most 2^26 terms add <= 27u. 1e-11 covers all with room.
_REL = 1e-11


def _log_ratio_error(t: FloatArray, numerator_scale: FloatArray | float) -> FloatArray:
    """A bound on ``|t - fl(t)|`` for ``t = (2 k D - D^2) / (2 sigma^2)``.

    ``numerator_scale`` is ``(|2 k D| + D^2) / (2 sigma^2)``: the numerator's terms
    are rounded once each (exact below 2^53) and their difference once, ``sigma^2``
    and the division once each; 8u of ``|t|`` plus 8u of the terms' scale covers them.
    """
    return 8.0 * U * (np.abs(t) + numerator_scale) + 1e-300


def _sampled_loss_upper(t: FloatArray, t_err: FloatArray, q: float, sign: float) -> FloatArray:
    """An upper bound on ``sign * log(1 - q + q e^t)`` given ``fl(t)`` within ``t_err``.

    ``f(t) = log(1 - q + q e^t)`` is non-decreasing and 1-Lipschitz, so an error in ``t``
    moves it by at most as much. ``f`` is computed as ``logaddexp(log1p(-q), log q + t)``,
    1-Lipschitz in both arguments: its error is at most that of the two arguments
    (8u of ``|log1p(-q)|``, 8u of ``|log q|`` and a rounding of the sum) plus 8u of
    ``log 2`` inside and a rounding of the result. 32u of all the magnitudes covers it.
    """
    if q == 1.0:
        return sign * t + t_err
    a = math.log1p(-q)
    log_q = math.log(q)
    with np.errstate(over="ignore"):
        f = np.logaddexp(a, log_q + t)
    pad = 32.0 * U * (abs(a) + abs(log_q) + np.abs(t) + np.abs(f) + 1.0)
    return sign * f + t_err + pad


# ---------------------------------------------------------------- discrete Gaussian


def _log_tail_sum_upper(m: int, sigma: float) -> float:
    """log of an upper bound on ``sum_{k >= m} exp(-k^2 / (2 sigma^2))``, ``m >= 1``.

    ``(m + j)^2 >= m^2 + 2 m j``, so the sum is at most ``e^{-m^2/(2 sigma^2)}`` over
    ``1 - e^{-m / sigma^2}`` (a geometric series). Rounded up by a relative 1e-9.
    """
    s2 = sigma * sigma
    denominator = -math.expm1(-m / s2)
    return -(m * m) / (2.0 * s2) - math.log(denominator) + 1e-9


def _truncation(sigma: float, sensitivity: int, tail: float) -> int:
    """The smallest ``K >= D`` with ``2 G(K + 1 - D) / Z <= tail`` (``G`` the tail sum).

    ``Z`` here is only an estimate (``max(1, sigma sqrt(2 pi))`` rounded down by 1%) to
    choose ``K``; the mass moved to ``+inf`` is then bounded with the certified
    normaliser (:func:`_gaussian_pmf`), so a poor choice costs accuracy, not validity.
    """
    log_z = math.log(max(1.0, 0.99 * sigma * math.sqrt(2.0 * math.pi)))
    target = math.log(tail / 2.0) + log_z

    def small_enough(m: int) -> bool:
        return _log_tail_sum_upper(m, sigma) <= target

    # The bound decreases in m: double, then bisect (a few dozen evaluations at most).
    low, high = 0, 1
    while not small_enough(high):
        low, high = high, 2 * high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if small_enough(mid) else (mid, high)
    return high - 1 + sensitivity


def discrete_gaussian_supported(sigma: float, sensitivity: int, tail: float) -> bool:
    """Whether :func:`discrete_gaussian_sampled_pmfs` evaluates at most MAX_SIGMA_ATOMS."""
    if sigma > MAX_SIGMA_ATOMS:  # K >= sigma here (no need to search)
        return False
    return 2 * _truncation(sigma, sensitivity, tail) + 1 <= MAX_SIGMA_ATOMS


def _blocks(n: int) -> int:
    """Block size so that ``n`` integers make at most :data:`MAX_ATOMS` blocks."""
    return max(1, -(-n // MAX_ATOMS))


def _gaussian_pmf(
    sigma: float, sensitivity: int, q: float, h: float, tail: float, direction: str
) -> LossPmf:
    """The "remove" or "add" PLD of the discrete Gaussian Poisson-sampled at ``q``."""
    d = sensitivity
    k_max = _truncation(sigma, d, tail)
    n = 2 * k_max + 1
    if n > MAX_SIGMA_ATOMS:
        raise TooManyBuckets(n)
    b = _blocks(n)
    chunk = b * max(1, _CHUNK // b)
    two_s2 = 2.0 * (sigma * sigma)
    sign = 1.0 if direction == "remove" else -1.0
    z_parts: list[float] = []
    losses: list[FloatArray] = []
    masses: list[FloatArray] = []
    for start in range(-k_max, k_max + 1, chunk):
        k = np.arange(start, min(start + chunk, k_max + 1), dtype=np.float64)
        w0 = np.exp(-(k * k) / two_s2)
        z_parts.append(float(np.sum(w0)))
        t = (2.0 * d * k - float(d * d)) / two_s2
        t_err = _log_ratio_error(t, (np.abs(2.0 * d * k) + float(d * d)) / two_s2)
        loss = _sampled_loss_upper(t, t_err, q, sign)
        if direction == "remove":
            shifted = k - d
            w1 = np.exp(-(shifted * shifted) / two_s2)
            mass = (1.0 - q) * w0 + q * w1  # exactly w1 when q = 1
        else:
            mass = w0
        if b > 1:  # merge blocks: the block's mass at its largest loss
            starts = np.arange(0, k.size, b)
            loss = np.maximum.reduceat(loss, starts)
            mass = np.add.reduceat(mass, starts)
        losses.append(loss)
        masses.append(mass)
    # Z >= the partial sum of its positive terms: the computed sum, lowered by _REL
    # (terms that underflowed to 0 or to subnormals only lower it further; Z >= 1).
    z_low = max(1.0, math.fsum(z_parts) * (1.0 - _REL))
    scale = (1.0 + 4.0 * _REL) / z_low
    atom_masses = np.concatenate(masses) * scale
    # Mass outside |k| <= K, moved to +inf. Under mu0: 2 G(K + 1); under mu1 (centre
    # D): G(K + 1 - D) + G(K + 1 + D) <= 2 G(K + 1 - D). The mixture's is at most the
    # larger. Subnormal or underflowed terms err by at most 2^-1074 each (< 2^-1048 in
    # all, over Z >= 1): far below the 4u that from_atoms adds at +inf.
    m = k_max + 1 - (d if direction == "remove" else 0)
    log_outside = math.log(2.0) + _log_tail_sum_upper(m, sigma) - math.log(z_low)
    outside = math.exp(log_outside) * (1.0 + 16.0 * U) if log_outside > -745.0 else 1e-300
    return from_atoms(np.concatenate(losses), atom_masses, h, infinity_mass=outside)


def discrete_gaussian_sampled_pmfs(
    sigma: float, sensitivity: int, q: float, h: float, tail: float
) -> tuple[LossPmf, LossPmf | None]:
    """The "remove" PLD of ``N_Z(0, sigma^2)`` with integer shift ``D`` sampled at ``q``,
    and the "add" one (``None`` when ``q = 1``: the two coincide, by ``k -> D - k``).

    ``tail`` bounds the mass moved to ``+inf`` by the truncation to ``|k| <= K``.
    """
    remove = _gaussian_pmf(sigma, sensitivity, q, h, tail, "remove")
    if q == 1.0:
        return remove, None
    return remove, _gaussian_pmf(sigma, sensitivity, q, h, tail, "add")


# ---------------------------------------------------------------- discrete Laplace


def discrete_laplace_sampled_pmfs(
    scale: float, sensitivity: int, q: float, h: float
) -> tuple[LossPmf, LossPmf | None]:
    """Both PLDs of the discrete Laplace ``P[k] ∝ e^{-|k|/t}``, shift ``D``, sampled at ``q``.

    Atoms (``a = e^{-1/t}``, ``mu0(k) = a^{|k|} (1 - a) / (1 + a)``): the half-line
    ``k <= 0`` with ``log r = -D/t``, ``mu0``-mass ``1 / (1 + a)`` and ``mu1``-mass
    ``a^D / (1 + a)``; the half-line ``k >= D`` with ``log r = D/t``, ``mu0``-mass
    ``a^D / (1 + a)`` and ``mu1``-mass ``1 / (1 + a)``; and each ``0 < k < D`` with
    ``log r = (2k - D)/t``. ``None`` for "add" when ``q = 1`` (the two coincide).
    """
    t, d = scale, sensitivity
    a = math.exp(-1.0 / t)
    ks = np.arange(1, d, dtype=np.float64)
    log_r = np.concatenate([[-d / t, d / t], (2.0 * ks - d) / t])
    # Each log r: at most three roundings (2k - D is exact).
    r_err = 4.0 * U * np.abs(log_r) + 1e-300
    inv = 1.0 / (1.0 + a)
    a_d = math.exp(-d / t)
    norm = -math.expm1(-1.0 / t) * inv  # (1 - a) / (1 + a), without cancellation
    mu0 = np.concatenate([[inv, a_d * inv], norm * np.exp(-ks / t)])
    mu1 = np.concatenate([[a_d * inv, inv], norm * np.exp(-(d - ks) / t)])
    # Every mass: at most three exp/expm1 (8u each), four roundings and the mixture's
    # three more, and each exponent's own rounding, which moves exp by up to u times
    # the exponent's magnitude (at most D/t; beyond 746 the mass underflows to 0 and
    # its true value, below 2^-1074, is covered by the 4u that from_atoms puts at +inf).
    up = 1.0 + 16.0 * U * (8.0 + min(d / t, 746.0))
    mu0, mu1 = mu0 * up, mu1 * up
    remove_loss = _sampled_loss_upper(log_r, r_err, q, 1.0)
    remove = from_atoms(remove_loss, (1.0 - q) * mu0 + q * mu1, h)  # mu1 when q = 1
    if q == 1.0:
        return remove, None
    add = from_atoms(_sampled_loss_upper(log_r, r_err, q, -1.0), mu0, h)
    return remove, add
