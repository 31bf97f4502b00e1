"""Conversions between privacy definitions, as pure functions on floats.

Inputs are assumed validated (the public guarantee classes validate them). Every value
returned is an upper bound on the quantity named, rounded up (see :mod:`.rounding`).

Sources
-------
- [S24] T. Steinke, "Tight RDP & zCDP bounds from pure DP", differentialprivacy.org,
  2024, Theorems 4 and 5.
- [BS16] M. Bun, T. Steinke, "Concentrated differential privacy: simplifications,
  extensions, and lower bounds", TCC 2016 (arXiv 1605.02065), Prop. 1.3.
- [CKS20] C. Canonne, G. Kamath, T. Steinke, "The discrete Gaussian for differential
  privacy", NeurIPS 2020 (arXiv 2004.00010v3), Prop. 12 and Cor. 13.
- [AC+20] S. Asoodeh et al., "Three variants of differential privacy: lossless
  conversion and applications" (arXiv 2008.06529); Balle et al. 2020 (arXiv
  2001.05990, eq. 20): the same RDP-to-(epsilon, delta) conversion as [CKS20] Prop. 12.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from dpkit.accounting._math.rounding import up, up_terms

__all__ = [
    "pure_to_rdp_epsilon",
    "pure_to_zcdp_rho",
    "rdp_delta",
    "rdp_epsilon",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_epsilon_at_order",
    "zcdp_epsilon_order",
    "zcdp_epsilon_simple",
]


def pure_to_rdp_epsilon(epsilon: float, order: float) -> float:
    """Tight RDP epsilon at ``order`` > 1 of an ``epsilon``-DP mechanism ([S24] Thm 4).

    ``eps_hat(a) = eps - log((1 + e^-eps) / (1 + e^-(2a-1)eps)) / (a - 1)``, attained by
    binary randomized response. The ratio inside the log is written as
    ``1 + e^-eps (1 - e^-2(a-1)eps) / (1 + e^-(2a-1)eps)`` so that ``log1p`` and
    ``expm1`` keep full precision as ``a -> 1``. Also ``eps_hat(a) <= eps``.
    """
    if epsilon == 0.0:
        return 0.0
    t = order - 1.0  # exact for order in (1, 2] (Sterbenz), tiny error above
    ratio_m1 = math.exp(-epsilon) * -math.expm1(-2.0 * t * epsilon)
    ratio_m1 /= 1.0 + math.exp(-(2.0 * order - 1.0) * epsilon)
    value = epsilon - math.log1p(ratio_m1) / t
    # The two terms are at most eps and cancel as a -> 1: the error is a few ulps of eps.
    return min(epsilon, max(0.0, up_terms(value, epsilon)))


def pure_to_zcdp_rho(epsilon: float) -> float:
    """Tight zCDP rho of an ``epsilon``-DP mechanism: ``eps * tanh(eps / 2)`` ([S24] Thm 5).

    Never above the classical ``eps**2 / 2`` ([BS16] Prop. 3.3); tight as the order
    goes to 1 for randomized response.
    """
    return min(up(epsilon * math.tanh(epsilon / 2.0), 4), up(epsilon * epsilon / 2.0, 2))


def zcdp_epsilon_simple(rho: float, delta: float) -> float:
    """``rho + 2 sqrt(rho log(1/delta))`` ([BS16] Prop. 1.3), for ``delta`` in (0, 1)."""
    return up(rho + 2.0 * math.sqrt(rho * -math.log(delta)), 4)


def _zcdp_epsilon_at(rho: float, log_delta: float, t: float) -> float:
    # [CKS20] Prop. 12 applied to the curve eps(a) = a * rho, at order a = 1 + t:
    # eps = a*rho + log(1 - 1/a) - (log(delta) + log(a)) / (a - 1), rounded up.
    # log(1 - 1/a) = log(t / (1 + t)) = -log1p(1/t).
    terms = ((1.0 + t) * rho, -math.log1p(1.0 / t), -(log_delta + math.log1p(t)) / t)
    return up_terms(math.fsum(terms), *terms, log_delta / t)


def zcdp_epsilon_order(rho: float, delta: float) -> float | None:
    """The order ``a - 1 = t`` at which [CKS20] Prop. 12 gives its smallest epsilon for
    ``rho``-zCDP at ``delta`` in (0, 1), or None (``rho`` 0, or above ~1e300).

    The derivative in ``t`` vanishes where ``rho * t**2 + log(1 + t) = log(1/delta)``,
    which has exactly one root ``t > 0`` (the left side increases from 0 to inf); it is
    found by bisection (:func:`_increasing_root`). Every order gives a valid bound, so
    the root finder's tolerance only affects tightness, never validity.
    """
    if rho == 0.0:
        return None
    log_delta = math.log(delta)

    def stationary(t: float) -> float:
        return rho * t * t + math.log1p(t) + log_delta

    # rho * t_hi**2 = log(1/delta), so stationary(t_hi) = log1p(t_hi) > 0 up to rounding
    # (doubled until it is). The square roots are taken apart: log(1/delta) / rho
    # overflows to infinity for a rho below ~1e-306 (a subnormal one: 5e-324), and
    # halving an infinite t_lo below never ended. Apart, t_hi < 27.3 / 2.2e-162.
    t_hi = math.sqrt(-log_delta) / math.sqrt(rho)
    while stationary(t_hi) < 0.0 and math.isfinite(t_hi):
        t_hi *= 2.0
    if not math.isfinite(t_hi):  # pragma: no cover - not reachable for a finite rho
        return None
    t_lo = t_hi
    while stationary(t_lo) >= 0.0 and t_lo > 1e-300:
        t_lo /= 2.0
    if stationary(t_lo) >= 0.0:  # pragma: no cover - needs rho above ~1e300
        return None
    return _increasing_root(stationary, t_lo, t_hi)


def _increasing_root(f: Callable[[float], float], low: float, high: float) -> float:
    """The root of an increasing ``f`` with ``f(low) < 0 <= f(high)``: bisection until
    ``low`` and ``high`` are adjacent doubles, returning ``high``. About 53 halvings
    per octave the bracket spans; no tolerance to choose, and no SciPy (importing
    ``scipy.optimize`` for Brent's method was ~0.15 s of every Session with an
    ``ApproxDP`` budget: issue 34). The result differs from Brent's at 1e-15 only in
    the last bits of the order, which moves the bound by rounding (either way)."""
    while True:
        middle = 0.5 * (low + high)
        if not low < middle < high:
            return high
        if f(middle) < 0.0:
            low = middle
        else:
            high = middle


def zcdp_epsilon_at_order(rho: float, delta: float, t: float) -> float:
    """The epsilon of [CKS20] Prop. 12 for ``rho``-zCDP at ``delta`` and the one order
    ``a = 1 + t`` (``t > 0``), rounded up: ``a rho + log(1 - 1/a) - (log delta + log a)
    / (a - 1)``. Valid at every order; :func:`zcdp_epsilon` picks the best one."""
    return _zcdp_epsilon_at(rho, math.log(delta), t)


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Smallest epsilon that ``rho``-zCDP implies at ``delta`` in (0, 1) ([CKS20] Cor. 13).

    The bound of [CKS20] Prop. 12 holds at every order ``a > 1``; we minimise over a
    continuous ``a`` (:func:`zcdp_epsilon_order`). The result is never above the simple
    bound of [BS16] (we return the smaller of the two), is clamped at 0, and is rounded
    up.
    """
    if rho == 0.0:
        return 0.0
    simple = zcdp_epsilon_simple(rho, delta)
    t_star = zcdp_epsilon_order(rho, delta)
    if t_star is None:  # pragma: no cover - needs rho above ~1e300
        return simple
    value = _zcdp_epsilon_at(rho, math.log(delta), t_star)
    return max(0.0, min(value, simple))


def zcdp_delta(rho: float, epsilon: float) -> float:
    """Smallest delta that ``rho``-zCDP implies at ``epsilon`` >= 0 ([CKS20] Cor. 13).

    ``delta = inf_{a > 1} exp((a-1)(a rho - eps) + a log(1 - 1/a)) / (a - 1)``. The
    minimising order solves ``(2a - 1) rho - eps + log(1 - 1/a) = 0`` (increasing in
    ``a``, one root), found by bisection (:func:`_increasing_root`); any order is
    valid, so only tightness depends on the root. The result is also capped by the simple tail bound
    ``exp(-(eps - rho)^2 / (4 rho))`` for ``eps >= rho`` ([BS16]) and by 1, and rounded up.
    """
    if rho == 0.0:
        return 0.0

    def stationary(t: float) -> float:
        return (2.0 * t + 1.0) * rho - epsilon - math.log1p(1.0 / t)

    t_hi = 1.0
    while stationary(t_hi) <= 0.0:
        t_hi *= 2.0
    t_lo = t_hi
    while stationary(t_lo) >= 0.0 and t_lo > 1e-300:
        t_lo /= 2.0
    if stationary(t_lo) >= 0.0:  # pragma: no cover - needs rho above ~1e300
        best = 0.0
    else:
        t = _increasing_root(stationary, t_lo, t_hi)
        terms = (t * ((1.0 + t) * rho - epsilon), -(1.0 + t) * math.log1p(1.0 / t), -math.log(t))
        best = up_terms(math.fsum(terms), *terms, t * (1.0 + t) * rho, t * epsilon)
    log_delta = best
    if epsilon >= rho:
        simple = -((epsilon - rho) ** 2) / (4.0 * rho)
        log_delta = min(log_delta, up_terms(simple, simple, epsilon, rho))
    if log_delta >= 0.0:
        return 1.0
    return min(1.0, up(math.exp(log_delta), 4))


def rdp_epsilon(orders: Sequence[float], epsilons: Sequence[float], delta: float) -> float:
    """Smallest epsilon at ``delta`` in [0, 1) implied by an RDP curve on a grid of orders.

    For each finite order ``a`` ([CKS20] Prop. 12, equal to [AC+20] / Balle et al. eq. 20)::

        eps = eps(a) + log(1 - 1/a) - (log(delta) + log(a)) / (a - 1)

    and, because every Renyi divergence of order > 1 bounds the KL divergence, the
    Bretagnolle-Huber bound ``TV <= sqrt(1 - exp(-KL))`` gives ``eps = 0`` when
    ``delta >= sqrt(1 - exp(-eps(a)))`` (as dp_accounting does). At order ``a = inf``
    the value ``eps(inf)`` bounds the max-divergence both ways, which is
    ``eps(inf)``-DP: it is a candidate at every ``delta``, 0 included (the limit of the
    formula above as ``a -> inf``; computed directly, the formula is NaN there). Returns
    the best over the grid, at least 0, rounded up; ``inf`` when every order is infinite
    (or ``delta = 0`` and the order-inf value is missing or infinite).
    """
    a = np.asarray(orders, dtype=np.float64)
    eps = np.asarray(epsilons, dtype=np.float64)
    if a.shape != eps.shape:
        raise ValueError("orders and epsilons differ in length")
    finite = np.isfinite(eps)
    at_inf = np.isinf(a) & finite
    # D_inf <= eps(inf) is eps(inf)-DP (delta 0); the value is already rounded up.
    pure = float(eps[at_inf].min()) if at_inf.any() else math.inf
    if delta == 0.0:
        return max(0.0, pure)
    log_delta = math.log(delta)
    # Largest KL value for which (0, delta) follows; shrunk slightly so that rounding in
    # log1p cannot let a borderline curve through (KL <= D_a for every a, inf included).
    kl_limit = -math.log1p(-delta * delta) * (1.0 - 1e-12)
    if not finite.any():
        return math.inf
    if (eps[finite] <= kl_limit).any():
        return 0.0
    usable = finite & np.isfinite(a)
    if not usable.any():
        return max(0.0, pure)
    a, eps = a[usable], eps[usable]
    # Vectorised over the grid (this runs at every get_epsilon). Each term is within a
    # few ulps; the three-term sum adds at most two roundings of its partial sums. So
    # 16 ulps of the largest term (including log(delta)/t, whose cancellation with
    # log(a)/t is the usual source of error), then one more float up, bound the error.
    t = a - 1.0
    terms = (eps, -np.log1p(1.0 / t), -(log_delta + np.log(a)) / t)
    value = terms[0] + terms[1] + terms[2]
    scale = np.maximum.reduce([np.abs(x) for x in (*terms, log_delta / t)])
    bounded = np.nextafter(value + 16.0 * np.spacing(scale), np.inf)
    return max(0.0, min(pure, float(bounded.min())))


def rdp_delta(orders: Sequence[float], epsilons: Sequence[float], epsilon: float) -> float:
    """Smallest delta at ``epsilon`` >= 0 implied by an RDP curve on a grid of orders.

    For each finite order ``a`` ([CKS20] Prop. 12)::

        log(delta) = (a - 1) (eps(a) - eps + log(1 - 1/a)) - log(a)

    and the Bretagnolle-Huber bound ``delta <= sqrt(1 - exp(-eps(a)))``. At order
    ``a = inf``: ``eps(inf) <= eps`` gives delta 0 (``D_inf <= eps`` both ways is
    eps-DP); otherwise only the KL bound (``KL <= D_inf``). Returns the best over the
    grid, at most 1, rounded up.
    """
    best = 0.0  # log of the trivial bound delta <= 1
    for order, eps_a in zip(orders, epsilons, strict=True):
        if math.isinf(eps_a):
            continue
        kl_bound = 0.5 * math.log(-math.expm1(-eps_a)) if eps_a > 0.0 else -math.inf
        kl_bound = up_terms(kl_bound, kl_bound) if kl_bound > -math.inf else kl_bound
        if math.isinf(order):
            prop12 = -math.inf if eps_a <= epsilon else 0.0
        else:
            t = order - 1.0
            inner = (eps_a, -epsilon, -math.log1p(1.0 / t))
            prop12 = t * math.fsum(inner) - math.log(order)
            prop12 = up_terms(prop12, t * max(map(abs, inner)), math.log(order))
        best = min(best, kl_bound, prop12)
    if best == -math.inf:
        return 0.0
    if best >= 0.0:
        return 1.0
    return min(1.0, up(math.exp(best), 4))
