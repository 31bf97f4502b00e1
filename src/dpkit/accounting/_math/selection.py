"""Renyi DP of repeat-and-select (Papernot & Steinke 2022, arXiv 2110.03620v2).

A candidate algorithm Q runs K times (K random, independent of the data) and only the
best output is released. Two laws of K are analysed:

* truncated negative binomial with shape ``eta >= 0`` and parameter ``gamma`` in (0, 1]
  (PS22 Definition 1; ``eta = 0`` logarithmic, ``eta = 1`` geometric): Theorem 2,
  for any orders ``lam > 1`` and ``lam_hat > 1``::

      eps'(lam) = eps(lam) + (1 + eta) (1 - 1/lam_hat) eps(lam_hat)
                  + (1 + eta) log(1/gamma) / lam_hat + log(E[K]) / (lam - 1)

* Poisson with mean ``mu``: Theorem 6, when Q is also (eps_hat, delta_hat)-DP with
  ``exp(eps_hat) <= 1 + 1/(lam - 1)``::

      eps'(lam) = eps(lam) + mu delta_hat + log(mu) / (lam - 1)

Both are evaluated on a grid of orders from the candidate's own RDP curve (an upper
bound at each order); the right-hand sides are non-decreasing in ``eps``, ``eps_hat``
and ``delta_hat``, so upper bounds in give upper bounds out. Every step rounds up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dpkit.accounting._math.conversions import rdp_delta
from dpkit.accounting._math.rounding import down, inflate, up, up_terms

__all__ = [
    "pure_delta",
    "repeat_and_select_rdp",
    "tnb_gamma",
    "tnb_mean",
]

#: Relative accuracy of the bisection for gamma.
_GAMMA_TOLERANCE = 1e-13
#: Relative step down from the bisection's lower end: covers rounding in tnb_mean and
#: keeps gamma below dp_accounting's estimate too (theirs is within 1e-9 below the root),
#: so dpkit's bound is never below theirs. It costs about (1 + eta) 2e-9 in epsilon.
_GAMMA_MARGIN = 2e-9


def tnb_mean(gamma: float, shape: float) -> float:
    """E[K] for the truncated negative binomial law (PS22 Definition 1).

    ``eta(1 - gamma) / (gamma (1 - gamma^eta))``; ``(1/gamma - 1) / log(1/gamma)`` for
    ``eta = 0`` (logarithmic) and ``1/gamma`` for ``eta = 1`` (geometric); 1 at
    ``gamma = 1`` (K = 1 surely).
    """
    if not 0.0 < gamma <= 1.0 or not shape >= 0.0 or math.isinf(shape):
        raise ValueError(f"tnb_mean: gamma={gamma!r}, shape={shape!r} out of range")
    if gamma == 1.0:
        return 1.0
    if shape == 1.0:
        return 1.0 / gamma
    log_gamma = math.log(gamma)  # < 0
    one_minus = 1.0 - gamma  # exact for gamma >= 1/2 (Sterbenz)
    if shape == 0.0:
        return one_minus / (gamma * -log_gamma)
    return shape * one_minus / (gamma * -math.expm1(shape * log_gamma))


def tnb_gamma(shape: float, mean: float) -> float:
    """A ``gamma`` no larger than the true parameter of the law with E[K] = ``mean``.

    E[K] decreases in gamma from +inf (gamma -> 0) to 1 (gamma = 1). Bisection on the
    bracket (0, min(1, 2 (eta + 1) / mean)] (E[K] <= 2 (eta + 1) / gamma) to a relative
    width of 1e-13, returning the lower end moved down by a further 2e-9 relative
    (rounding in :func:`tnb_mean`; dp_accounting's estimate is within 1e-9 below). A
    smaller gamma only enlarges ``log(1/gamma)`` in Theorem 2: the bound stays valid.
    ``eta = 1``: ``1/mean`` (not used by :func:`repeat_and_select_rdp`, which takes
    ``log(mean)`` directly).
    """
    if not mean >= 1.0 or math.isinf(mean):
        raise ValueError(f"tnb_gamma: mean={mean!r} must be a finite float >= 1")
    if shape == 1.0:
        return down(1.0 / mean, 1)
    low, high = 0.0, min(1.0, 2.0 * (shape + 1.0) / mean)
    if tnb_mean(high, shape) >= mean:  # only when mean is (numerically) 1
        return high * (1.0 - _GAMMA_MARGIN)
    while high > low * (1.0 + _GAMMA_TOLERANCE):
        mid = 0.5 * (low + high)
        if mid <= low or mid >= high:
            break
        if tnb_mean(mid, shape) < mean:
            high = mid
        else:
            low = mid
    return low * (1.0 - _GAMMA_MARGIN)


def _log_inverse_gamma(shape: float, mean: float) -> float:
    """An upper bound on ``log(1/gamma)`` for the law with E[K] = ``mean``."""
    if mean == 1.0:
        return 0.0  # gamma = 1: K = 1 surely
    if shape == 1.0:
        return up(math.log(mean), 2)  # gamma = 1/mean exactly
    return up(-math.log(tnb_gamma(shape, mean)), 2)


def pure_delta(epsilon: float, epsilon_hat: float) -> float:
    """delta at ``epsilon_hat`` of an ``epsilon``-DP mechanism, rounded up.

    ``(e^eps - e^eps_hat) / (1 + e^eps)`` for ``eps_hat < eps``, else 0: every eps-DP
    mechanism is a post-processing of binary randomized response (Kairouz, Oh &
    Viswanath 2015; Murtagh & Vadhan 2016), whose hockey-stick divergence this is.
    """
    if epsilon_hat >= epsilon:
        return 0.0
    # e^eps_hat (e^(eps - eps_hat) - 1) / (1 + e^eps), each factor within a few ulps.
    value = math.exp(epsilon_hat) * math.expm1(epsilon - epsilon_hat) / (1.0 + math.exp(epsilon))
    return min(1.0, inflate(value, 1e-14))


def _monotone(curve: list[float]) -> tuple[float, ...]:
    """``eps(a) := min_{b >= a} eps(b)``: RDP is non-decreasing in the order."""
    out = list(curve)
    for index in range(len(out) - 2, -1, -1):
        out[index] = min(out[index], out[index + 1])
    return tuple(out)


def repeat_and_select_rdp(
    orders: Sequence[float],
    epsilons: Sequence[float],
    mean: float,
    shape: float,
    *,
    pure_epsilon: float | None = None,
) -> tuple[float, ...]:
    """RDP curve on ``orders`` of the best of K runs of a candidate with curve ``epsilons``.

    ``orders``: strictly increasing floats > 1; ``epsilons``: the candidate's RDP upper
    bounds there (``inf`` allowed); ``mean = E[K] >= 1``; ``shape`` in [0, inf) for the
    truncated negative binomial law (Theorem 2), ``inf`` for Poisson (Theorem 6).
    ``pure_epsilon``: a pure-DP epsilon of the candidate, if it has one; it adds
    ``lam_hat -> inf`` to Theorem 2's choices and the randomized-response privacy profile
    to Theorem 6's ``delta_hat``.

    Theorem 2 is used with every grid order as ``lam_hat``, and with the two limits
    ``lam_hat -> 1+`` (the candidate is (lam_hat, eps(a_1))-RDP for lam_hat <= a_1 by
    monotonicity, and the lam_hat-term tends to ``(1 + eta) log(1/gamma)``) and
    ``lam_hat -> inf`` for a pure candidate (tends to ``(1 + eta) eps``); a bound holding
    for every ``lam_hat`` holds for their infimum. Theorem 6 takes ``eps_hat =
    log(1 + 1/(lam - 1))`` (rounded down, so the condition holds) and ``delta_hat`` the
    smallest of the candidate's RDP-to-(eps, delta) conversion (CKS20 Prop. 12 and the KL
    bound, :func:`rdp_delta`) and, for pure candidates, :func:`pure_delta`. Finally the
    curve is made non-decreasing in the order.
    """
    if len(orders) != len(epsilons):
        raise ValueError("repeat_and_select_rdp: orders and epsilons differ in length")
    log_mean = up(math.log(mean), 2) if mean > 1.0 else 0.0
    out: list[float] = []
    if math.isinf(shape):  # Poisson, Theorem 6
        for order, eps in zip(orders, epsilons, strict=True):
            if math.isinf(eps):
                out.append(math.inf)
                continue
            t = order - 1.0
            eps_hat = max(0.0, down(math.log1p(1.0 / t), 2))
            delta_hat = rdp_delta(orders, epsilons, eps_hat)
            if pure_epsilon is not None:
                delta_hat = min(delta_hat, pure_delta(pure_epsilon, eps_hat))
            mu_delta = inflate(mean * delta_hat, 1e-15)
            log_term = inflate(log_mean / t, 1e-15) if log_mean > 0.0 else 0.0
            value = eps + mu_delta + log_term
            out.append(up_terms(value, eps, mu_delta, log_term))
        return _monotone(out)

    # Truncated negative binomial, Theorem 2.
    log_inv_gamma = _log_inverse_gamma(shape, mean)
    choices = [log_inv_gamma]  # lam_hat -> 1+
    for order, eps in zip(orders, epsilons, strict=True):
        if math.isinf(eps):
            continue
        first = (1.0 - 1.0 / order) * eps
        second = log_inv_gamma / order
        choices.append(up_terms(first + second, first, second))
    if pure_epsilon is not None:
        choices.append(pure_epsilon)  # lam_hat -> inf
    c = inflate((1.0 + shape) * min(choices), 1e-15)
    for order, eps in zip(orders, epsilons, strict=True):
        if math.isinf(eps):
            out.append(math.inf)
            continue
        log_term = inflate(log_mean / (order - 1.0), 1e-15) if log_mean > 0.0 else 0.0
        out.append(up_terms(eps + log_term + c, eps, log_term, c))
    return _monotone(out)
