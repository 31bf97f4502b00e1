"""PLDs of the truncated discrete Gaussian, optionally Poisson-subsampled.

The noise ``mu0(k) = w(k) / Z_T`` on the integers ``|k| <= T``, ``w(k) = exp(-k^2 /
(2 sigma^2))``, ``Z_T = sum_{|k| <= T} w(k)`` (dp_accounting's discrete Gaussian with
``truncation_bound=T``), integer sensitivity ``D >= 1``, ``mu1(k) = mu0(k - D)``
(support ``[D - T, D + T]``). On the overlap ``[D - T, T]`` the log ratio is
``log r(k) = (2 k D - D^2) / (2 sigma^2)`` as for the untruncated noise; below it
``r = 0`` (``mu1 = 0``), above it ``r = +inf`` (``mu0 = 0``). The worst-case pairs, at
subsampling rate ``q`` (``q = 1``: none), are those of :mod:`.discrete_sampled`::

    "remove": P = (1-q) mu0 + q mu1, Q = mu0:  loss  log(1 - q + q r(k))
    "add":    P = mu0, Q = (1-q) mu0 + q mu1:  loss -log(1 - q + q r(k))

so "remove" puts the ``P``-mass ``q mu1((T, T + D])`` at ``+inf`` and, for ``q < 1``,
the atoms with ``r = 0`` at ``log(1 - q)``; "add" puts ``mu0([-T, D - T))`` at ``+inf``
when ``q = 1`` and at ``-log(1 - q)`` otherwise. With ``q = 1`` the two orderings have
the same PLD (``k -> D - k`` maps one pair onto the other), so one is returned.

**Why these pairs dominate.** ``r`` is non-decreasing on the union of the supports
(``[0, inf]``-valued: ``k^2`` is convex and the truncation keeps the law
log-concave), so by Neyman-Pearson the optimal tests between ``mu_d`` and ``mu0`` are
thresholds on ``k``, at which the power ``mu0((c - d, T])`` grows with ``d``: the pair
with shift ``D`` has the lowest tradeoff curve among all shifts ``|d| <= D`` (negative
``d`` by the symmetry of ``mu0``). That is the pair of any two neighbours under
add/remove or replace (a scalar query moving by at most ``D``), and Poisson
subsampling under add/remove of a pair so dominated is dominated by the mixtures
above (Zhu, Dong & Wang 2022, Prop. 30).

**Why the result never lowers delta(eps).** As in :mod:`.discrete_sampled`: every mass
is an upper bound (``Z_T`` is bounded *below* by the computed sum of its evaluated
terms lowered by a relative ``_REL``, every ``w`` raised by it), every loss is an upper
bound (float error bounded and added), ``+inf`` atoms are kept at ``+inf``, and when
``T`` exceeds the truncation ``K`` of :mod:`.discrete_sampled` (the integers beyond
``K`` carry less than ``tail`` of the untruncated law, hence of the truncated one,
whose normaliser is larger than the evaluated partial sum) the integers beyond ``K``
are moved to ``+inf`` with that proven bound. :func:`.discretize.from_atoms` then
splits each atom by connect-the-dots (Doroshenko et al. 2022, Thm 4.2), and consecutive
atoms are merged into blocks at their largest loss beyond ``MAX_ATOMS`` of that module.
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.accounting._math.pld.discrete_sampled import (
    _CHUNK,
    _REL,
    MAX_SIGMA_ATOMS,
    _blocks,
    _log_ratio_error,
    _log_tail_sum_upper,
    _sampled_loss_upper,
    _truncation,
)
from dpkit.accounting._math.pld.discretize import TooManyBuckets, from_atoms
from dpkit.accounting._math.pld.pmf import FloatArray, LossPmf, U

__all__ = ["truncated_discrete_gaussian_pmfs", "truncated_discrete_gaussian_supported"]


def _evaluated_bound(sigma: float, sensitivity: int, bound: int, tail: float) -> int:
    """``min(T, K)``: the integers ``|k| <= min(T, K)`` are evaluated one by one."""
    if bound <= sensitivity:  # K >= D: no search needed
        return bound
    return min(bound, _truncation(sigma, sensitivity, tail))


def truncated_discrete_gaussian_supported(
    sigma: float, sensitivity: int, bound: int, tail: float
) -> bool:
    """Whether :func:`truncated_discrete_gaussian_pmfs` evaluates at most MAX_SIGMA_ATOMS."""
    if 2 * bound < sensitivity:
        return True  # disjoint supports: no atom to evaluate
    if 2 * min(bound, MAX_SIGMA_ATOMS) + 1 <= MAX_SIGMA_ATOMS:
        return True
    if sigma > MAX_SIGMA_ATOMS:  # K >= sigma
        return False
    return 2 * _evaluated_bound(sigma, sensitivity, bound, tail) + 1 <= MAX_SIGMA_ATOMS


def _disjoint_pmfs(q: float, h: float) -> tuple[LossPmf, LossPmf | None]:
    """``D > 2 T``: ``r = 0`` on the support of ``mu0`` and ``+inf`` on that of ``mu1``."""
    if q == 1.0:  # P and Q mutually singular: all of P at +inf
        return from_atoms(np.zeros(0), np.zeros(0), h, infinity_mass=1.0), None
    a = math.log1p(-q)
    pad = 16.0 * U * abs(a) + 1e-300
    one = np.ones(1)
    remove = from_atoms(np.array([a + pad]), one * (1.0 - q) * (1.0 + 4.0 * U), h, q)
    add = from_atoms(np.array([-a + pad]), one, h)
    return remove, add


def _pmf(
    sigma: float, d: int, bound: int, q: float, h: float, tail: float, direction: str
) -> LossPmf:
    k_eval = _evaluated_bound(sigma, d, bound, tail)
    n = 2 * k_eval + 1
    if n > MAX_SIGMA_ATOMS:
        raise TooManyBuckets(n)
    b = _blocks(n)
    chunk = b * max(1, _CHUNK // b)
    two_s2 = 2.0 * (sigma * sigma)
    remove = direction == "remove"
    sign = 1.0 if remove else -1.0
    loss_r0 = 0.0
    if q < 1.0:  # the loss where r = 0, rounded up
        a = math.log1p(-q)
        loss_r0 = sign * a + 16.0 * U * abs(a) + 1e-300
    z_parts: list[float] = []
    inf_parts: list[float] = []
    losses: list[FloatArray] = []
    masses: list[FloatArray] = []
    for start in range(-k_eval, k_eval + 1, chunk):
        k = np.arange(start, min(start + chunk, k_eval + 1), dtype=np.float64)
        w0 = np.exp(-(k * k) / two_s2)
        z_parts.append(float(np.sum(w0)))
        if remove and k_eval == bound:
            # mu1 at (T, T + D] is mu0 at (T - D, T] (both evaluated here): loss +inf.
            inf_parts.append(q * float(np.sum(w0[k > bound - d])))
        overlap = k >= d - bound  # mu1(k) > 0 (k - D <= T holds as k <= T)
        t = (2.0 * d * k - float(d * d)) / two_s2
        t_err = _log_ratio_error(t, (np.abs(2.0 * d * k) + float(d * d)) / two_s2)
        loss = _sampled_loss_upper(t, t_err, q, sign)
        if remove:
            shifted = k - d
            w1 = np.where(overlap, np.exp(-(shifted * shifted) / two_s2), 0.0)
            mass = (1.0 - q) * w0 + q * w1  # exactly w1 when q = 1
        else:
            mass = w0
        if q < 1.0:
            loss = np.where(overlap, loss, loss_r0)
        elif remove:  # r = 0 and q = 1: loss -inf, P-mass 0
            loss, mass = loss[overlap], mass[overlap]
        else:  # r = 0 and q = 1 under "add": loss +inf, P-mass mu0(k)
            inf_parts.append(float(np.sum(mass[~overlap])))
            loss, mass = loss[overlap], mass[overlap]
        if b > 1 and loss.size > 0:  # merge blocks: the block's mass at its largest loss
            starts = np.arange(0, loss.size, b)
            loss = np.maximum.reduceat(loss, starts)
            mass = np.add.reduceat(mass, starts)
        losses.append(loss)
        masses.append(mass)
    # Z_T >= the partial sum of its evaluated positive terms, lowered by _REL (terms
    # that underflowed only lower it further; Z_T >= w(0) = 1).
    z_low = max(1.0, math.fsum(z_parts) * (1.0 - _REL))
    scale = (1.0 + 4.0 * _REL) / z_low
    atom_masses = np.concatenate(masses) * scale
    infinity = math.fsum(inf_parts) * scale
    if k_eval < bound:
        # Integers beyond K = k_eval >= D, all moved to +inf: under mu0 at most
        # 2 G(K + 1), under mu1 at most G(K + 1 - D) + G(K + 1 + D) <= 2 G(K + 1 - D)
        # (G the untruncated tail sum, Z_T >= z_low); the mixture's at most the larger.
        m = k_eval + 1 - (d if remove else 0)
        log_outside = math.log(2.0) + _log_tail_sum_upper(m, sigma) - math.log(z_low)
        if log_outside > -745.0:
            infinity += math.exp(log_outside) * (1.0 + 16.0 * U)
        else:
            infinity += 1e-300
    # Subnormal or underflowed terms err by at most 2^-1074 each (< 2^-1048 in all):
    # far below the 4u that from_atoms adds at +inf.
    infinity = min(1.0, infinity * (1.0 + 8.0 * U))
    return from_atoms(np.concatenate(losses), atom_masses, h, infinity_mass=infinity)


def truncated_discrete_gaussian_pmfs(
    sigma: float, sensitivity: int, bound: int, q: float, h: float, tail: float
) -> tuple[LossPmf, LossPmf | None]:
    """The "remove" PLD of the truncated ``N_Z(0, sigma^2)`` on ``|k| <= bound`` with
    integer shift ``sensitivity``, Poisson-sampled at ``q``, and the "add" one (``None``
    when ``q = 1``: the two coincide).

    ``tail`` bounds the mass moved to ``+inf`` where ``bound`` exceeds the truncation
    of :mod:`.discrete_sampled` (the integers beyond it are not evaluated).
    """
    if 2 * bound < sensitivity:
        return _disjoint_pmfs(q, h)
    remove = _pmf(sigma, sensitivity, bound, q, h, tail, "remove")
    if q == 1.0:
        return remove, None
    return remove, _pmf(sigma, sensitivity, bound, q, h, tail, "add")
