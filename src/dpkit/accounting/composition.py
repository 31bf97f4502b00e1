"""Composition theorems for approximate and pure differential privacy.

- :func:`advanced_composition`: Kairouz, Oh & Viswanath 2015 (Thm 3.4), the closed
  form that improves Dwork, Rothblum & Vadhan 2010 (Dwork & Roth 2014, Thm 3.20), for
  k adaptively chosen (eps, delta)-DP mechanisms with parameters fixed in advance.
- :func:`optimal_composition`: the exact k-fold composition of (eps, delta)-DP
  (Kairouz, Oh & Viswanath 2015, Thm 3.3), on its natural grid of epsilons.
- :func:`compose_pure_via_zcdp`: pure-DP mechanisms composed in zCDP and converted once.

For basic composition add guarantees: ``ApproxDP(e1, d1) + ApproxDP(e2, d2)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpkit._validation import check_count, check_delta, check_positive
from dpkit.accounting._math.conversions import (
    pure_to_zcdp_rho,
    zcdp_epsilon,
    zcdp_epsilon_simple,
)
from dpkit.accounting._math.rounding import fraction_up, inflate, mul_up, sum_up, up
from dpkit.accounting.guarantees import ApproxDP
from dpkit.errors import InvalidParameter

__all__ = ["advanced_composition", "compose_pure_via_zcdp", "optimal_composition"]


def _total_delta(parts: Iterable[float], owner: str) -> float:
    total = sum_up(parts)
    if total >= 1.0:
        raise InvalidParameter(
            f"{owner}: the composed delta is {total!r} >= 1, which guarantees nothing. "
            "Use smaller deltas or fewer compositions."
        )
    return total


def advanced_composition(epsilon: float, delta: float, count: int, delta_prime: float) -> ApproxDP:
    """The advanced composition theorem in Kairouz, Oh & Viswanath's form (KOV 2015).

    ``count`` adaptively composed (``epsilon``, ``delta``)-DP mechanisms (parameters
    fixed in advance) are (eps', ``1 - (1 - delta)^k (1 - delta_prime)``)-DP with
    (Kairouz, Oh & Viswanath 2015, Thm 3.4; Thm 3.5 with equal parameters)::

        eps' = min(k eps,
                   k eps tanh(eps/2) + eps sqrt(2 k log(e + sqrt(k eps^2) / delta')),
                   k eps tanh(eps/2) + eps sqrt(2 k log(1 / delta')))

    (``k eps tanh(eps/2) = k eps (e^eps - 1) / (e^eps + 1)``). This is never above the
    Dwork, Rothblum & Vadhan bound ``sqrt(2 k log(1/delta')) eps + k eps (e^eps - 1)``
    (Dwork & Roth 2014, Thm 3.20) and about 10% below it for small eps; its delta is
    never above DRV's ``k delta + delta'``. diffprivlib's ``BudgetAccountant`` uses the
    same bound. :func:`optimal_composition` (exact, KOV Thm 3.3) is never worse. (We
    could not check the theorem's numbering against the paper's text here; the
    statement is checked numerically against the exact region of Thm 3.3, in
    ``tests/golden/test_kov_composition_golden.py``.)

    It is *not* a filter: the parameters must be fixed in advance (for adaptively
    chosen parameters see :class:`~dpkit.accounting.AdvancedCompositionFilter`).

    Parameters
    ----------
    epsilon:
        Per-mechanism epsilon, > 0.
    delta:
        Per-mechanism delta, in [0, 1).
    count:
        Number of mechanisms ``k``, an int >= 1.
    delta_prime:
        The extra delta the theorem spends, in (0, 1).
    """
    owner = "advanced_composition"
    epsilon = check_positive(epsilon, "epsilon", owner)
    delta = check_delta(delta, owner)
    k = check_count(count, "count", owner)
    delta_prime = check_delta(delta_prime, owner, name="delta_prime", allow_zero=False)
    basic_delta = _total_delta((mul_up(k, delta), delta_prime), owner)
    # 1 - (1 - delta)^k (1 - delta'): a few roundings in log1p/expm1 (relative, all
    # below 16u); inflated, and never above the exact sum k delta + delta'.
    kov_delta = inflate(-math.expm1(k * math.log1p(-delta) + math.log1p(-delta_prime)), 1e-13)
    total_delta = min(basic_delta, kov_delta)
    drift = k * epsilon * math.tanh(epsilon / 2.0)
    root_k_eps = math.sqrt(k) * epsilon
    # Each closed form is a handful of correctly rounded operations plus tanh, log and
    # sqrt (within a few ulps): 16 ulps up covers it. math.e is below e (by 1.4e-16),
    # which the same margin covers.
    near = drift + epsilon * math.sqrt(2.0 * k * math.log(math.e + root_k_eps / delta_prime))
    far = drift + epsilon * math.sqrt(2.0 * k * -math.log(delta_prime))
    return ApproxDP(min(up(near, 16), up(far, 16), mul_up(k, epsilon)), total_delta)


def _log_delta_i(i: int, k: int, epsilon: float, log_comb: npt.NDArray[np.float64]) -> float:
    """log of KOV's ``delta_i`` as a sum of positive terms (no cancellation).

    ``delta_i = sum_{l < i} C(k, l) e^{(k-l) eps} (1 - e^{-2 (i-l) eps}) / (1 + e^eps)^k``.
    """
    from scipy import special  # deferred: SciPy is slow to import

    if i == 0:
        return -math.inf
    ell = np.arange(i, dtype=np.float64)
    log_norm = k * float(np.logaddexp(0.0, epsilon))  # k log(1 + e^eps), stable
    logs = log_comb[:i] + (k - ell) * epsilon - log_norm
    logs = logs + np.log(-np.expm1(-2.0 * (i - ell) * epsilon))
    return float(special.logsumexp(logs))


def optimal_composition(
    epsilon: float, delta: float, count: int, target_delta: float
) -> ApproxDP | None:
    """Exact homogeneous composition (Kairouz, Oh & Viswanath 2015, Thm 3.3).

    The ``count``-fold adaptive composition of (``epsilon``, ``delta``)-DP mechanisms is
    ((k - 2i) eps, 1 - (1 - delta)^k (1 - delta_i))-DP for every ``i`` in 0..k//2, with
    ``delta_i = sum_{l=0}^{i-1} C(k, l) (e^{(k-l) eps} - e^{(k-2i+l) eps}) / (1 + e^eps)^k``,
    and this region is exactly the composition's privacy region. We return the smallest
    ``(k - 2i) eps`` whose delta is at most ``target_delta``, as
    ``ApproxDP(epsilon_total, target_delta)``, or ``None`` when even ``i = 0`` fails
    (``target_delta < 1 - (1 - delta)^k``: no epsilon works).

    ``delta_i`` is non-decreasing in ``i`` (it is the privacy profile of k-fold
    randomized response at a decreasing epsilon), so ``i`` is found by bisection; each
    ``delta_i`` is a log-sum-exp of positive terms, so ``count`` of 10**6 is fine. The
    floating-point error of exponents of size ``M ~ k (eps + log(1 + e^eps)) + log k!``
    is covered by inflating each delta by a relative ``1e-14 M`` before comparing.

    Parameters
    ----------
    epsilon:
        Per-mechanism epsilon, > 0.
    delta:
        Per-mechanism delta, in [0, 1).
    count:
        Number of mechanisms ``k``, an int >= 1.
    target_delta:
        The overall delta wanted, in [0, 1).
    """
    from scipy import special  # deferred: SciPy is slow to import

    owner = "optimal_composition"
    epsilon = check_positive(epsilon, "epsilon", owner)
    delta = check_delta(delta, owner)
    k = check_count(count, "count", owner)
    target_delta = check_delta(target_delta, owner, name="target_delta")

    log_keep = k * math.log1p(-delta)  # log (1 - delta)^k
    magnitude = k * (epsilon + float(np.logaddexp(0.0, epsilon))) + math.lgamma(k + 1.0)
    rel = 1e-14 * (magnitude + 1.0) + 1e-13

    def total_delta(log_delta_i: float) -> float:
        # 1 - (1 - delta)^k (1 - delta_i), with delta_i inflated for rounding.
        delta_i = inflate(math.exp(log_delta_i), rel) if log_delta_i > -math.inf else 0.0
        if delta_i >= 1.0:
            return 1.0
        return inflate(-math.expm1(log_keep + math.log1p(-delta_i)), rel)

    if total_delta(-math.inf) > target_delta:
        return None
    half = k // 2
    ell = np.arange(half + 1, dtype=np.float64)
    log_comb = (
        special.gammaln(k + 1.0) - special.gammaln(ell + 1.0) - special.gammaln(k - ell + 1.0)
    )
    lo, hi = 0, half  # invariant: i = lo satisfies the target
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if total_delta(_log_delta_i(mid, k, epsilon, log_comb)) <= target_delta:
            lo = mid
        else:
            hi = mid - 1
    return ApproxDP(mul_up(k - 2 * lo, epsilon), target_delta)


def compose_pure_via_zcdp(epsilons: Iterable[float], delta: float) -> ApproxDP:
    """(eps, ``delta``)-DP of adaptively composed ``epsilons``-DP mechanisms, via zCDP.

    Each eps_j-DP mechanism is ``eps_j tanh(eps_j / 2)``-zCDP (Steinke 2024, Thm 5); the
    rhos add and the total is converted once with the optimal conversion of Canonne,
    Kamath & Steinke 2020 (Cor. 13). The result is never larger than the textbook
    ``(1/2) sum eps_j^2 + sqrt(2 log(1/delta) sum eps_j^2)`` (Bun & Steinke 2016) nor
    than basic composition ``sum eps_j``: we return the smallest of the three.

    Parameters
    ----------
    epsilons:
        The mechanisms' epsilons, a non-empty sequence of floats > 0.
    delta:
        Target delta in (0, 1).
    """
    owner = "compose_pure_via_zcdp"
    try:
        raw = list(epsilons)
    except TypeError:
        raise InvalidParameter.for_parameter(
            "epsilons", owner, "a non-empty sequence of floats in (0, inf)", epsilons
        ) from None
    if not raw:
        raise InvalidParameter.for_parameter(
            "epsilons", owner, "a non-empty sequence of floats in (0, inf)", epsilons
        )
    eps = [check_positive(e, "epsilons", owner) for e in raw]
    delta = check_delta(delta, owner, allow_zero=False)
    rho = sum_up(pure_to_zcdp_rho(e) for e in eps)
    half_square_sum = fraction_up(sum((Fraction(e) ** 2 for e in eps), Fraction(0)) / 2)
    textbook = zcdp_epsilon_simple(half_square_sum, delta)
    best = min(zcdp_epsilon(rho, delta), textbook, sum_up(eps))
    return ApproxDP(best, delta)
