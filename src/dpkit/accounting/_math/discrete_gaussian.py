"""Privacy of the discrete Gaussian mechanism (Canonne, Kamath & Steinke 2020).

The discrete Gaussian ``N_Z(0, sigma^2)`` has ``P[Y = y] = exp(-y^2/(2 sigma^2)) / Z`` on
the integers, ``Z = sum_x exp(-x^2/(2 sigma^2))``. ``M(x) = q(x) + Y`` for an integer
query ``q``.

zCDP ([CKS20] Thm 4 / Prop. 5). For integers ``m, n`` and every order ``a > 1``,
``D_a(N_Z(m, sigma^2) || N_Z(n, sigma^2)) <= a (m - n)^2 / (2 sigma^2)``, with equality at
integer orders. Renyi divergences add over independent coordinates, so the product
mechanism ``q(x) + (Y_1, ..., Y_d)`` with ``Y_j ~ N_Z(0, sigma^2)`` i.i.d. is
``Delta_2^2 / (2 sigma^2)``-zCDP, exactly as the continuous Gaussian (``Delta_2`` the L2
sensitivity of ``q``; [CKS20] Thm 14). No correction term appears: the ``tau`` term of
Kairouz, Liu & Steinke 2021 (arXiv 2102.06387, Prop. 14) is for a *sum of n* discrete
Gaussians, which is not itself a discrete Gaussian, and vanishes for ``n = 1``.

Approximate DP ([CKS20] Thm 7). For a query of integer sensitivity ``D``::

    delta(eps) = P[Y > eps sigma^2/D - D/2] - e^eps P[Y > eps sigma^2/D + D/2]

exactly (the mechanism is (eps, delta)-DP iff delta >= delta(eps)). Substituting
``y -> y + D`` in the second term gives the sum of positive terms
``sum_{y > eps sigma^2/D - D/2} P[Y = y] (1 - exp(eps - (2 y D + D^2)/(2 sigma^2)))``,
which we add in log space (no cancellation), with a proven bound on the part of the
series we do not add and a proven lower bound on ``Z``.

[CKS20] C. Canonne, G. Kamath, T. Steinke, "The discrete Gaussian for differential
privacy", NeurIPS 2020, arXiv 2004.00010.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpkit._validation import check_count, check_delta, check_nonnegative, check_positive
from dpkit.accounting._math.rounding import fraction_up, inflate, settle_up

__all__ = ["discrete_gaussian_delta", "discrete_gaussian_epsilon", "discrete_gaussian_rho"]

FloatArray = npt.NDArray[np.float64]

# Relative error allowance for the floating-point log-sum-exp (at most a few thousand
# ulps even for millions of terms) and for the normaliser.
_REL_ERR = 1e-11
# Beyond this many terms the series is bounded by an integral instead (sigma >~ 3e5).
_MAX_TERMS = 1 << 22
_CHUNK = 1 << 14
#: Unit roundoff of binary64, and an absolute floor for the gap allowance (subnormal
#: results of the subtraction).
_U = 2.0**-53
_TINY = 1e-300
#: At most this many gaps next to the threshold are computed exactly (see _log_terms).
_EXACT_GAPS = 64


def discrete_gaussian_rho(
    sigma: float,
    l2_sensitivity: float,
    l1_sensitivity: float | None = None,
    dimension: int = 1,
) -> float:
    """zCDP rho of the (product) discrete Gaussian mechanism, rounded up.

    ``rho = D^2 / (2 sigma^2)`` with ``D = min(l2_sensitivity, l1_sensitivity)``: the L2
    norm of a shift never exceeds its L1 norm, so a known L1 bound can only help.
    See the module docstring for the proof ([CKS20] Thm 4 and additivity of Renyi
    divergence over independent coordinates; [CKS20] Thm 14). ``dimension`` does not
    enter the bound; it is validated so that callers state the shape they use.

    Parameters
    ----------
    sigma:
        Scale parameter of each coordinate's ``N_Z(0, sigma^2)``, > 0.
    l2_sensitivity:
        L2 sensitivity of the integer-vector query, > 0.
    l1_sensitivity:
        Optional L1 sensitivity, > 0.
    dimension:
        Number of coordinates, an int >= 1.
    """
    owner = "discrete_gaussian_rho"
    sigma = check_positive(sigma, "sigma", owner)
    sens = check_positive(l2_sensitivity, "l2_sensitivity", owner)
    if l1_sensitivity is not None:
        sens = min(sens, check_positive(l1_sensitivity, "l1_sensitivity", owner))
    check_count(dimension, "dimension", owner)
    return fraction_up(Fraction(sens) ** 2 / (2 * Fraction(sigma) ** 2))


def _log_normaliser_lower(sigma: float) -> float:
    """log of a lower bound on ``Z = sum_x exp(-x^2 / (2 sigma^2))`` (partial sums).

    For sigma >= 1 the Poisson summation formula gives
    ``Z = sqrt(2 pi) sigma (1 + 2 sum_{k>=1} exp(-2 pi^2 sigma^2 k^2))``; for small sigma
    the direct series converges at once. Both partial sums are lower bounds.
    """
    if sigma >= 1.0:
        correction = math.fsum(
            2.0 * math.exp(-2.0 * math.pi**2 * sigma**2 * k * k) for k in (1, 2, 3)
        )
        return 0.5 * math.log(2.0 * math.pi) + math.log(sigma) + math.log1p(correction)
    x = np.arange(1, 64, dtype=np.float64)
    return math.log1p(2.0 * math.fsum(np.exp(-(x * x) / (2.0 * sigma * sigma)).tolist()))


def _log_terms(y: FloatArray, sigma: float, epsilon: float, sens: int) -> FloatArray:
    """log[exp(-y^2/(2 s^2)) (1 - exp(-g_y))], ``g_y = (2 y D + D^2)/(2 s^2) - eps``, rounded up.

    For ``y`` above the exact threshold ``g_y > 0``. An atom just above ``eps`` has a tiny
    gap ``g_y`` that the float subtraction gets wrong by up to a few ``u (loss + eps)``,
    far more than ``g_y`` itself when ``g_y`` is ~1e-12 (an optimistic delta if the atom
    dominates). We use an *upper* bound on each gap (conservative: ``1 - e^{-g}``
    increases with ``g``): ``2 y D + D^2`` is an exact integer in binary64,
    ``fl(sigma^2)`` and the division add two relative roundings to the loss and the
    subtraction one relative to the result, hence ``4 u (loss + |gap|)``. Where that
    allowance is not small against the gap (at most :data:`_EXACT_GAPS` atoms next to
    the threshold), the gap is computed exactly in rationals and rounded up.
    """
    sigma2 = sigma * sigma
    loss = (2.0 * y * sens + sens * sens) / (2.0 * sigma2)
    gap = loss - epsilon
    allowance = 4.0 * _U * (loss + np.abs(gap)) + _TINY
    gap_up = gap + allowance
    coarse = np.flatnonzero(allowance > 1e-6 * np.abs(gap))[:_EXACT_GAPS]
    if coarse.size:
        sigma2_q = 2 * Fraction(sigma) ** 2
        eps_q = Fraction(epsilon)
        for i in coarse.tolist():
            yi = int(y[i])
            gap_up[i] = fraction_up(Fraction(2 * yi * sens + sens * sens) / sigma2_q - eps_q)
    with np.errstate(divide="ignore"):
        result: FloatArray = -(y * y) / (2.0 * sigma2) + np.log(-np.expm1(-gap_up))
    return result


def _log_series_upper(sigma: float, epsilon: float, sens: int, first: int) -> float:
    """log of an upper bound on ``sum_{y >= first}`` of the unnormalised terms."""
    sigma2 = sigma * sigma
    peak = -math.inf  # running log-sum-exp: peak + log(acc)
    acc = 0.0
    start = first
    while start - first < _MAX_TERMS:
        y = np.arange(start, start + _CHUNK, dtype=np.float64)
        logs = _log_terms(y, sigma, epsilon, sens)
        chunk_max = float(np.max(logs))
        if chunk_max > peak:
            acc = acc * math.exp(peak - chunk_max) if peak > -math.inf else 0.0
            peak = chunk_max
        if peak > -math.inf:
            acc += math.fsum(np.exp(logs - peak).tolist())
        start += _CHUNK
        # Stop once past the mode, past 0, and the terms are negligible.
        last = float(logs[-1])
        if start > 0 and last < float(logs[-2]) and last < peak + math.log(acc) - 60.0:
            break
    else:
        return _log_series_integral_bound(sigma, epsilon, sens, first)
    # Tail from m = start: each term is at most exp(-y^2/(2 s^2)) and, for y >= m > 0,
    # y^2 >= m^2 + 2 m (y - m), so the tail is at most exp(-m^2/(2 s^2)) / (1 - e^{-m/s^2}).
    m = float(start)
    log_tail = -(m * m) / (2.0 * sigma2) - math.log(-math.expm1(-m / sigma2))
    total = peak + math.log(acc)
    return float(np.logaddexp(total, log_tail))


def _log_series_integral_bound(sigma: float, epsilon: float, sens: int, first: int) -> float:
    """log of an upper bound on the series, by an integral (for very large sigma).

    The terms ``g(y)`` are log-concave in ``y`` (a Gaussian times ``1 - e^{-u}`` with ``u``
    linear in ``y``), hence unimodal with a mode ``p``. Each integer ``y`` with
    ``y + 1 <= p`` has ``g(y) <= int_y^{y+1} g`` and each with ``y - 1 >= p`` has
    ``g(y) <= int_{y-1}^y g``; these intervals are disjoint, so
    ``sum_{y >= first} g(y) <= int_first^inf g + sum of g(y) over integers in (p-1, p+1)``,
    and ``int_first^inf g = sqrt(2 pi) sigma [Q(first/sigma) - e^eps Q((first + D)/sigma)]``.
    """
    from scipy import special  # deferred: SciPy is slow to import

    sigma2 = sigma * sigma
    threshold = epsilon * sigma2 / sens - sens / 2.0  # g > 0 exactly above it

    def slope(y: float) -> float:  # derivative of log g for y > threshold; decreasing
        loss_m_eps = (2.0 * y * sens + sens * sens) / (2.0 * sigma2) - epsilon
        return -y / sigma2 + (sens / sigma2) / math.expm1(loss_m_eps)

    # Bracket the mode p in [lo, hi] with hi - lo < 1e-3 (bisection on the slope).
    lo = threshold + 1e-6 * sigma
    hi = lo
    if slope(lo) <= 0.0:
        lo = threshold
    else:
        hi = max(lo, 0.0) + sigma + 1.0
        while slope(hi) > 0.0:
            hi = 2.0 * hi + 1.0
        while hi - lo > 1e-3:
            mid = 0.5 * (lo + hi)
            if mid in (lo, hi):
                break
            if slope(mid) > 0.0:
                lo = mid
            else:
                hi = mid
    # Every integer in (p - 1, p + 1) lies in [lo - 1, hi + 1].
    near = np.arange(max(first, math.ceil(lo - 1.0)), max(first, math.floor(hi + 1.0) + 1))
    log_near = -math.inf
    if near.size:
        log_near = float(
            special.logsumexp(_log_terms(near.astype(np.float64), sigma, epsilon, sens))
        )

    log_q_a = float(special.log_ndtr(-first / sigma))
    log_q_b = float(special.log_ndtr(-(first + sens) / sigma))
    diff = epsilon + log_q_b - log_q_a
    log_integral = 0.5 * math.log(2.0 * math.pi) + math.log(sigma) + log_q_a
    log_integral += math.log1p(-math.exp(diff)) if diff < 0.0 else -math.inf
    return float(np.logaddexp(log_integral, log_near))


def _first_index(sigma: float, epsilon: float, sens: int) -> int:
    """The first integer ``y`` strictly above ``eps sigma^2 / D - D/2``, computed exactly.

    A float threshold can round up past an integer whose loss sits just above ``eps``
    and drop that atom (an optimistic delta); with fractions no atom is lost.
    """
    sigma_q = Fraction(sigma)
    threshold = Fraction(epsilon) * sigma_q * sigma_q / sens - Fraction(sens, 2)
    return math.floor(threshold) + 1


def _log_delta(sigma: float, epsilon: float, sens: int) -> float:
    first = _first_index(sigma, epsilon, sens)
    return _log_series_upper(sigma, epsilon, sens, first) - _log_normaliser_lower(sigma)


def _delta_upper(sigma: float, epsilon: float, sens: int) -> float:
    """The conservative delta that :func:`discrete_gaussian_delta` reports."""
    log_delta = _log_delta(sigma, epsilon, sens)
    if log_delta == -math.inf:
        return 0.0
    return min(1.0, inflate(math.exp(log_delta), _REL_ERR))


def discrete_gaussian_delta(sigma: float, epsilon: float, sensitivity: int = 1) -> float:
    """Exact delta at ``epsilon`` >= 0 of the 1-D discrete Gaussian mechanism ([CKS20] Thm 7).

    Parameters
    ----------
    sigma:
        Scale parameter of ``N_Z(0, sigma^2)``, > 0.
    epsilon:
        Target epsilon, >= 0.
    sensitivity:
        Integer sensitivity of the integer-valued query, an int >= 1.

    Returns
    -------
    float
        An upper bound on the exact delta that exceeds it only by the proven series tail
        bound (negligible below sigma ~ 3e5) and a relative 1e-11 for rounding.
    """
    owner = "discrete_gaussian_delta"
    sigma = check_positive(sigma, "sigma", owner)
    epsilon = check_nonnegative(epsilon, "epsilon", owner)
    sens = check_count(sensitivity, "sensitivity", owner)
    return _delta_upper(sigma, epsilon, sens)


def discrete_gaussian_epsilon(sigma: float, delta: float, sensitivity: int = 1) -> float:
    """Smallest epsilon for which the 1-D discrete Gaussian mechanism is (eps, ``delta``)-DP.

    Inverts [CKS20] Thm 7 (``delta(eps)`` is continuous and non-increasing: each term of
    the series decreases in ``eps`` and vanishes where it enters or leaves the sum) by
    Brent's method, then moves the answer up until the conservative ``delta(eps)`` is at
    most ``delta``, and rounds up.

    Parameters
    ----------
    sigma:
        Scale parameter of ``N_Z(0, sigma^2)``, > 0.
    delta:
        Target delta in (0, 1).
    sensitivity:
        Integer sensitivity of the query, an int >= 1.
    """
    from scipy import optimize  # deferred: SciPy is slow to import

    owner = "discrete_gaussian_epsilon"
    sigma = check_positive(sigma, "sigma", owner)
    delta = check_delta(delta, owner, allow_zero=False)
    sens = check_count(sensitivity, "sensitivity", owner)
    target = math.log(delta)
    margin = math.log1p(_REL_ERR)

    def excess(eps: float) -> float:  # smooth, for the root finder
        return _log_delta(sigma, eps, sens) + margin - target

    def reported_excess(eps: float) -> float:  # what discrete_gaussian_delta reports
        return _delta_upper(sigma, eps, sens) - delta

    if reported_excess(0.0) <= 0.0:
        return 0.0
    lo, hi = 0.0, 1.0
    while excess(hi) > 0.0 or reported_excess(hi) > 0.0:
        lo, hi = hi, 2.0 * hi
    root = float(optimize.brentq(excess, lo, hi, xtol=1e-14, rtol=1e-15))
    return settle_up(reported_excess, root, hi)
