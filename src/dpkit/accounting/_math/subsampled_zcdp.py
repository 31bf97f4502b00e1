"""Renyi DP of a Poisson-subsampled zCDP mechanism (the discrete Gaussian, any rho-zCDP).

Setting: add/remove-one neighbours; a mechanism ``M`` that is ``rho``-zCDP, i.e.
``D_l(M(S) || M(S')) <= rho l`` for all neighbours (both directions) and orders
``l > 1``, is run on a Poisson sample (each record kept with probability ``q``). For
datasets ``D`` and ``D + x`` write ``mu0 = M(S)``, ``mu1 = M(S + x)`` for a sample ``S``
of ``D``, and ``r = mu1 / mu0``. Both directions are bounded separately; the
functional ``(P, Q) -> int Q (P/Q)^a`` is jointly convex, so the mixture over ``S``
costs no more than the worst ``S``, and for that ``S``:

*Removal* (``D_a(M'(D + x) || M'(D))``), integer ``a = n``: expanding
``((1 - q) + q r)^n`` binomially and using ``E_mu0[r^l] = e^{(l-1) D_l(mu1 || mu0)}
<= e^{l (l-1) rho}``::

    A_n <= sum_{l=0}^{n} C(n, l) (1 - q)^{n-l} q^l e^{l (l - 1) rho},

the same sum as the subsampled Gaussian with ``sigma^2 = 1 / (2 rho)`` (Mironov, Talwar &
Zhang 2019, Sec. 3.2; equality for the Gaussian and for the one-dimensional discrete
Gaussian with integer sensitivity, whose integer moments are the Gaussian's: Canonne,
Kamath & Steinke 2020, proof of Prop. 5). Fractional orders interpolate ``log A`` between
integers (``log A_a`` is convex in ``a``: Hoelder's inequality). For ``1 < a < 2`` also
``A_a <= 1 + ((1 - q)^a - 1 + a q)(e^{2 rho} - 1)``, by the quadratic-majorant argument
below applied to ``(1 + u)^a`` (whose second derivative decreases when ``a < 2``).

*Addition* (``D_a(M'(D) || M'(D + x))``), any real ``a > 1``, ``s = a - 1``: the
divergence is ``log E_mu0[f(u)] / s`` with ``f(u) = (1 + u)^{-s}`` and ``u = q (r - 1)
>= -q``. By Taylor's formula with integral remainder, ``(f(u) - 1 + s u) / u^2 =
int_0^1 (1 - t) f''(t u) dt``, which decreases in ``u`` because ``f''`` does; so on
``u >= -q`` it is at most its value at ``-q``, ``c = ((1 - q)^{-s} - 1 - s q) / q^2``
(the smallest quadratic majorant of ``f`` there). Since ``E_mu0[u] = 0`` (finite
``D_2`` implies ``mu1 << mu0``) and ``E_mu0[u^2] = q^2 (e^{D_2(mu1 || mu0)} - 1) <=
q^2 (e^{2 rho} - 1)``::

    B_a <= 1 + ((1 - q)^{-s} - 1 - s q) (e^{2 rho} - 1).

The RDP epsilon of order ``a`` is at most ``max(log A_a, log B_a) / (a - 1)``, and at
most ``rho a`` (subsampling never hurts: joint quasi-convexity of Renyi divergence).
For the continuous Gaussian the exact analysis (MTZ19) is used instead; this module is
for the other zCDP mechanisms. The addition bound is our derivation from the two
standard facts cited; it is checked against exact divergences in the tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dpkit.accounting._math.rdp import _MAX_TERMS, _log_a_int_many
from dpkit.accounting._math.rounding import down, inflate, product_up, up

__all__ = ["poisson_subsampled_zcdp_rdp_curve"]

# Relative error allowance of the few float operations in the addition bound.
_REL = 1e-13


def _binomial_excess(q: float, s: float) -> float:
    """``(1 - q)^{-s} - 1 - s q`` for 0 < q < 1 and s > 0 or -2 < s < -1, rounded up.

    May be inf. For ``-2 < s < -1`` (``(1 - q)^a - 1 + a q`` with ``a = -s``) the terms
    below are positive as well.

    The negative binomial series ``sum_{k >= 2} s (s+1) ... (s+k-1) / k! q^k`` has
    positive terms, so it keeps full relative precision when ``q`` is small (the closed
    form cancels there). The ratio of consecutive terms, ``(s + k) q / (k + 1)``, moves
    monotonically towards ``q`` as ``k`` grows, so the terms after the current one
    ``t`` add up to at most ``t / (1 - max(ratio, q))``; the sum stops once that is below
    1e-17 of the total, and it is added.
    """
    log_direct = -s * math.log1p(-q)
    if log_direct > 700.0:
        return math.inf
    if s * q > 30.0:  # (1 - q)^{-s} > e^30: the closed form does not cancel
        return inflate(math.expm1(log_direct) - s * q, _REL)
    term = s * (s + 1.0) / 2.0 * q * q
    total = 0.0
    k = 2
    while True:
        total += term
        ratio = (s + k) * q / (k + 1)
        term *= ratio
        k += 1
        if ratio < 1.0:
            tail = term / (1.0 - max(ratio, q))
            if tail <= 1e-17 * total:
                break
        if k > 100_000:  # only for q close to 1; the closed form is then accurate
            return inflate(math.expm1(log_direct) - s * q, 1e-9)
    # Positive terms: relative rounding error below k ulps; the tail bound is added.
    return inflate(total + tail, 1e-14 + k * 2.3e-16)


def _addition_log_b(q: float, rho: float, order: float) -> float:
    """Upper bound on ``log B_a`` (module docstring), rounded up; may be inf."""
    s = order - 1.0
    w = math.expm1(2.0 * rho) if rho < 350.0 else math.inf
    inner = _binomial_excess(q, s) * inflate(w, _REL)
    if math.isinf(inner) or math.isnan(inner):
        return math.inf
    return inflate(math.log1p(inflate(inner, _REL)), _REL)


def _removal_below_two(q: float, rho: float, order: float) -> float:
    """Upper bound on ``log A_a`` for ``1 < a < 2`` (module docstring), rounded up."""
    w = math.expm1(2.0 * rho) if rho < 350.0 else math.inf
    # (1 - q)^a - 1 + a q: the same positive series as for the addition bound, s = -a.
    inner = _binomial_excess(q, -order) * inflate(w, _REL)
    if math.isinf(inner) or math.isnan(inner):
        return math.inf
    return inflate(math.log1p(inflate(inner, _REL)), _REL)


def poisson_subsampled_zcdp_rdp_curve(
    sampling_probability: float, rho: float, orders: Sequence[float]
) -> tuple[float, ...]:
    """RDP epsilons at ``orders`` (> 1) of a ``rho``-zCDP mechanism on a Poisson sample.

    Add/remove-one neighbours; the bound of the module docstring at each order,
    rounded up: ``min(rho a, max(removal, addition))``.

    Parameters
    ----------
    sampling_probability:
        ``q`` in [0, 1].
    rho:
        The mechanism's zCDP parameter, >= 0 (``sensitivity^2 / (2 sigma^2)`` for the
        discrete Gaussian).
    orders:
        Renyi orders > 1.

    >>> curve = poisson_subsampled_zcdp_rdp_curve(0.01, 0.5, (2.0, 8.0))
    >>> [round(v, 6) for v in curve]
    [0.000174, 0.000894]
    """
    q = sampling_probability
    plain = [product_up(rho, a) for a in orders]  # rho * a exactly, rounded up
    if q == 0.0 or rho == 0.0:
        return tuple(0.0 for _ in orders)
    if q == 1.0:
        return tuple(plain)
    # The Gaussian with sigma = 1/sqrt(2 rho) has the same removal sum; a smaller sigma
    # only raises it, so sigma is rounded down.
    sigma = down(1.0 / up(math.sqrt(up(2.0 * rho, 1)), 1), 1)
    ints: set[int] = set()
    for a in orders:
        n = math.floor(a)
        ints.update((n, n + 1))
    wanted = sorted(n for n in ints if 2 <= n <= _MAX_TERMS)
    log_a = dict(zip(wanted, _log_a_int_many(q, sigma, wanted), strict=True))
    log_a[1] = 0.0
    out = []
    for a, cap in zip(orders, plain, strict=True):
        n = math.floor(a)
        theta = a - n
        if n + (theta > 0) > _MAX_TERMS:
            out.append(cap)
            continue
        if theta == 0.0:
            removal = log_a[n]
        else:
            # Hoelder: log A_a <= (1 - theta) log A_n + theta log A_{n+1}, rounded up.
            removal = up((1.0 - theta) * log_a[n] + theta * log_a[n + 1], 4)
        if n == 1:
            removal = min(removal, _removal_below_two(q, rho, a))
        addition = _addition_log_b(q, rho, a)
        # Divided by a - 1 rounded down (a > 1, so a - 1 > 0), then rounded up.
        value = up(max(removal, addition) / down(a - 1.0, 1), 2)
        out.append(min(cap, max(0.0, value)))
    return tuple(out)
