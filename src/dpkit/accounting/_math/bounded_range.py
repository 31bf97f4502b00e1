"""Renyi DP of bounded-range mechanisms (the exponential mechanism).

A mechanism is ``eps``-bounded range (BR) when, for every pair of neighbours, the
privacy loss ``L = log(P(y) / Q(y))`` takes its values in an interval ``[t, t + eps]``
for some ``t`` that may depend on the pair (Durfee & Rogers 2019). The exponential
mechanism with score sensitivity ``D`` sampled ∝ ``exp(eps u / (2 D))`` is ``eps``-BR: the
loss is ``eps (u(x, y) - u(x', y)) / (2 D)`` plus a constant, and the first part ranges
over ``[-eps/2, eps/2]``; the monotone variant (∝ ``exp(eps u / D)``) is ``eps``-BR too.

Two facts give its RDP curve (Cesar & Rogers 2021, Sec. 3):

1. KL divergence. Over all ``eps``-BR pairs, ``KL(P || Q) <= kappa(eps)`` with
   ``kappa(eps) = x - 1 - log x`` and ``x = eps / (e^eps - 1)``; it is attained by a pair
   whose loss takes only the two values ``t`` and ``t + eps``.
2. Hoeffding's lemma. The loss lies in an interval of width ``eps`` under ``P``, so
   ``log E_P[e^{s (L - E_P L)}] <= s^2 eps^2 / 8`` for all real ``s``. With
   ``s = a - 1`` and ``E_P L = KL(P || Q)``::

       D_a(P || Q) = log E_P[e^{(a-1) L}] / (a - 1) <= kappa(eps) + (a - 1) eps^2 / 8.

The same holds with ``P`` and ``Q`` exchanged (the loss of ``Q`` against ``P`` is
``-L``, also in an interval of width ``eps``). As ``a -> 1`` the bound is ``kappa(eps)``
(0.12330 at ``eps = 1``), below the ``eps^2/8`` of the zCDP statement (0.125); the
gap grows with ``eps`` (``kappa`` is about ``eps - 1 - log eps`` for large ``eps``).
The accountant takes the pointwise minimum with the tight pure-DP curve.

Sources
-------
- D. Durfee, R. Rogers, "Practical differentially private top-k selection with
  pay-what-you-get composition", NeurIPS 2019 (bounded range).
- M. Cesar, R. Rogers, "Bounding, concentrating, and truncating: unifying privacy loss
  composition for data analytics", ALT 2021 (arXiv 2004.07223), Sec. 3.
- J. Dong, D. Durfee, R. Rogers, "Optimal differential privacy composition for
  exponential mechanisms", ICML 2020 (the two-valued worst case).
"""

from __future__ import annotations

import math

from dpkit.accounting._math.rounding import inflate, up

__all__ = ["bounded_range_kl", "bounded_range_rdp"]

# Relative error allowance of kappa(eps) as computed below: a dozen correctly rounded
# or faithfully rounded operations whose condition numbers are at most ~10 in the
# branch where each is used (series below 0.01, closed forms above); 1e-12 is more than
# a thousand times that.
_KAPPA_REL = 1e-12


def _kappa(epsilon: float) -> float:
    """``x - 1 - log x`` with ``x = eps / (e^eps - 1)``, accurate (before inflation)."""
    if epsilon < 0.01:
        # y = x - 1 from the Bernoulli series of eps / (e^eps - 1), which alternates
        # with decreasing terms here: the truncated y is below the true one by at most
        # eps^6 / 30240, and kappa decreases in y (d kappa / dy = y / (1 + y) < 0, of size
        # < 0.06), so the truncation only raises kappa; the bound is added anyway.
        e2 = epsilon * epsilon
        y = -epsilon / 2.0 + e2 / 12.0 - e2 * e2 / 720.0
        # With z = -y in (0, 0.05): y - log1p(y) = sum_{k >= 2} z^k / k, all terms
        # positive; 24 terms leave less than 1e-30 relative.
        z = -y
        total = 0.0
        power = z * z
        for k in range(2, 26):
            total += power / k
            power *= z
        omitted = epsilon**6 / 30240.0
        return total + omitted
    if epsilon <= 1.0:
        x = epsilon / math.expm1(epsilon)
        y = x - 1.0
        return y - math.log1p(y)
    # x = eps e^-eps / (1 - e^-eps) without overflow; no cancellation here (kappa > 0.12).
    tail = math.exp(-epsilon)
    x = epsilon * tail / -math.expm1(-epsilon)
    log_x = math.log(epsilon) - epsilon - math.log1p(-tail)
    return x - 1.0 - log_x


def bounded_range_kl(epsilon: float) -> float:
    """The largest KL divergence of an ``epsilon``-bounded-range pair, rounded up.

    ``kappa(eps) = eps / (e^eps - 1) - 1 - log(eps / (e^eps - 1))`` (Cesar & Rogers
    2021, Sec. 3): 0.12330... at ``eps = 1``, ``~ eps^2 / 8`` as ``eps -> 0``.

    >>> round(bounded_range_kl(1.0), 6)
    0.123302
    """
    if epsilon == 0.0:
        return 0.0
    if math.isinf(epsilon):
        return math.inf
    # Rounded up: relative allowance for the float evaluation (see _KAPPA_REL).
    return inflate(_kappa(epsilon), _KAPPA_REL)


def bounded_range_rdp(epsilon: float, order: float) -> float:
    """RDP epsilon of order ``order`` >= 1 of an ``epsilon``-bounded-range mechanism.

    ``kappa(eps) + (order - 1) eps^2 / 8`` (Cesar & Rogers 2021, Sec. 3: the KL bound
    plus Hoeffding's lemma; see the module docstring), rounded up. At ``order = 1`` it
    is the KL bound. Valid for both directions of the divergence.

    Parameters
    ----------
    epsilon:
        The bounded-range parameter, >= 0 (the exponential mechanism's epsilon).
    order:
        The Renyi order, finite and >= 1.

    Returns
    -------
    float
        An upper bound on the Renyi divergence of that order, rounded up.

    >>> round(bounded_range_rdp(1.0, 2.0), 6)
    0.248302
    """
    if epsilon == 0.0:
        return 0.0
    kappa = bounded_range_kl(epsilon)
    # (order - 1) eps^2 / 8: each product and the sum rounded up by a few ulps.
    slope = up(up(epsilon * epsilon, 1) / 8.0, 1)
    return up(kappa + up((order - 1.0) * slope, 2), 2)
