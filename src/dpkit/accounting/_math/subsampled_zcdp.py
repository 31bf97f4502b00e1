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
integers (``log A_a`` is convex in ``a``: Hoelder's inequality).

*Addition* (``D_a(M'(D) || M'(D + x))``), any real ``a > 1``, ``s = a - 1``: the
divergence is ``log E_mu0[(1 + u)^{-s}] / s`` with ``u = q (r - 1) >= -q``. Taylor's
theorem at 0 with the Lagrange remainder: ``(1 + u)^{-s} <= 1 - s u + s (s+1) u^2 / 2 +
R`` where ``R <= 0`` for ``u >= 0`` and ``R <= s (s+1) (s+2) (1 - q)^{-s-3} |u|^3 / 6`` for
``u in [-q, 0)``, where also ``|u|^3 <= q u^2``. Since ``E_mu0[u] = 0`` (finite
``D_2`` implies ``mu1 << mu0``) and ``E_mu0[u^2] = q^2 (e^{D_2(mu1 || mu0)} - 1) <=
q^2 (e^{2 rho} - 1)``::

    B_a <= 1 + q^2 (e^{2 rho} - 1) s (s + 1) / 2 * (1 + (s + 2) q (1 - q)^{-s-3} / 3).

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
from dpkit.accounting._math.rounding import down, inflate, up

__all__ = ["poisson_subsampled_zcdp_rdp_curve"]

# Relative error allowance of the few float operations in the addition bound.
_REL = 1e-13


def _addition_log_b(q: float, rho: float, order: float) -> float:
    """Upper bound on ``log B_a`` (module docstring), rounded up; may be inf."""
    s = order - 1.0
    w = math.expm1(2.0 * rho) if rho < 350.0 else math.inf
    try:
        grow = math.exp(-(s + 3.0) * math.log1p(-q))  # (1 - q)^(-s-3)
    except OverflowError:
        return math.inf
    inner = q * q * w * (s * (s + 1.0) / 2.0) * (1.0 + (s + 2.0) * q * grow / 3.0)
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
    plain = [up(rho * a, 2) for a in orders]
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
        addition = _addition_log_b(q, rho, a)
        # Divided by a - 1 rounded down (a > 1, so a - 1 > 0), then rounded up.
        value = up(max(removal, addition) / down(a - 1.0, 1), 2)
        out.append(min(cap, max(0.0, value)))
    return tuple(out)
