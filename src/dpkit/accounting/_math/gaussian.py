"""Privacy of the (continuous) Gaussian mechanism.

``M(x) = q(x) + N(0, sigma^2 I)`` for a query ``q`` of L2 sensitivity ``D``:

- zCDP: ``rho = D^2 / (2 sigma^2)``, i.e. ``(a, a rho)``-RDP for every order ``a > 1``
  (Bun & Steinke 2016, Prop. 1.6; Mironov 2017, Prop. 7). Tight.
- Exact privacy profile (Balle & Wang 2018, Thm 8; arXiv 1805.06530, eq. (6))::

      delta(eps) = Phi(D/(2 sigma) - eps sigma/D) - e^eps Phi(-D/(2 sigma) - eps sigma/D)

  The mechanism is (eps, delta)-DP if and only if ``delta >= delta(eps)``.

All functions validate their arguments and round the bound they return in the
conservative direction: deltas and epsilons up, calibrated sigmas up.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from dpkit._validation import (
    check_delta,
    check_epsilon,
    check_nonnegative,
    check_positive,
)
from dpkit.accounting._math.rounding import fraction_up, inflate, product_up, settle_up, up
from dpkit.errors import InvalidParameter

__all__ = [
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_rho",
    "gaussian_sigma_analytic",
    "gaussian_sigma_classic",
]

FloatArray = npt.NDArray[np.float64]

# Relative error allowance for delta. Against 60-digit mpmath, over sigma/D in
# [1e-3, 1e6] and deltas down to 1e-300, _log_delta was off by at most 5e-13.
_REL_ERR = 1e-11


def gaussian_rho(sigma: float, sensitivity: float = 1.0) -> float:
    """zCDP rho ``sensitivity^2 / (2 sigma^2)`` of the Gaussian mechanism (exact, rounded up).

    Bun & Steinke 2016, Prop. 1.6. ``sigma`` is the noise standard deviation and
    ``sensitivity`` the L2 sensitivity of the query.
    """
    owner = "gaussian_rho"
    sigma = check_positive(sigma, "sigma", owner)
    sensitivity = check_positive(sensitivity, "sensitivity", owner)
    return fraction_up(Fraction(sensitivity) ** 2 / (2 * Fraction(sigma) ** 2))


# Gauss-Legendre rule for the log-ratio integral below (exact for polynomials of degree
# 47; the integrand is analytic with derivatives of order 1 on panels of width <= 1).
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(24)
# Above this width the direct difference of log_ndtr values is well conditioned enough
# (the two terms then differ by at least ~width^2/2) and quadrature would be slow.
_MAX_QUADRATURE_WIDTH = 64.0


def _inverse_mills(x: FloatArray) -> FloatArray:
    """``phi(x) / Phi(x)``, the derivative of ``log Phi``, without cancellation.

    For ``x <= 0`` it equals ``sqrt(2/pi) / erfcx(-x/sqrt(2))`` (scaled complementary
    error function, accurate far into the tail); for ``x > 0`` neither factor is small.
    """
    from scipy import special  # deferred: SciPy is slow to import

    out = np.empty_like(x)
    neg = x <= 0.0
    out[neg] = math.sqrt(2.0 / math.pi) / special.erfcx(-x[neg] / math.sqrt(2.0))
    pos = ~neg
    out[pos] = np.exp(-0.5 * x[pos] ** 2) / (math.sqrt(2.0 * math.pi) * special.ndtr(x[pos]))
    return out


def _log_ndtr_ratio(t: float, h: float) -> float:
    """``log Phi(h/2 - t) - log Phi(-h/2 - t)``, accurate to about 1e-15 relative.

    The difference of two nearly equal ``log_ndtr`` values loses up to
    ``|log Phi| / difference`` in relative accuracy, which is ruinous for large sigma
    (tiny ``h``). Instead we integrate ``d/dx log Phi(x) = phi(x)/Phi(x)`` over the
    interval with a composite Gauss-Legendre rule (panels of width <= 1).
    """
    from scipy import special  # deferred: SciPy is slow to import

    if h > _MAX_QUADRATURE_WIDTH:
        return float(special.log_ndtr(0.5 * h - t) - special.log_ndtr(-0.5 * h - t))
    panels = max(1, math.ceil(h))
    half = 0.5 * h / panels
    centres = -t - 0.5 * h + half * (2.0 * np.arange(panels) + 1.0)
    x = centres[:, None] + half * _GL_NODES[None, :]
    values = _inverse_mills(x.ravel()) * np.tile(_GL_WEIGHTS, panels)
    return half * math.fsum(values.tolist())


def _log_delta(s: float, epsilon: float) -> float:
    """log delta(eps) for the Gaussian mechanism with sigma / sensitivity = ``s``.

    With ``h = 1/s`` and ``t = eps * s`` (so ``eps = t h``),
    ``delta = Phi(h/2 - t) (1 - exp(eps - log Phi(h/2 - t) + log Phi(-h/2 - t)))``; the
    log-ratio comes from :func:`_log_ndtr_ratio`, so deltas far below 1e-300 and the
    near-cancellation at large sigma both stay accurate.
    """
    from scipy import special  # deferred: SciPy is slow to import

    h = 1.0 / s
    t = epsilon * s
    diff = t * h - _log_ndtr_ratio(t, h)  # eps + log Phi(b) - log Phi(a) < 0
    if diff >= 0.0:  # only by rounding
        return -math.inf
    return float(special.log_ndtr(0.5 * h - t)) + math.log(-math.expm1(diff))


def _delta_upper(s: float, epsilon: float) -> float:
    """The conservative delta that :func:`gaussian_delta` reports, for ``s = sigma / D``."""
    log_delta = _log_delta(s, epsilon)
    if log_delta == -math.inf:
        return 0.0
    return min(1.0, inflate(math.exp(log_delta), _REL_ERR))


def gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """Exact delta at ``epsilon`` >= 0 of the Gaussian mechanism (Balle & Wang 2018, eq. 6).

    Parameters
    ----------
    sigma:
        Noise standard deviation, > 0.
    epsilon:
        Target epsilon, >= 0 (0 gives the total variation distance).
    sensitivity:
        L2 sensitivity of the query, > 0.

    Returns
    -------
    float
        The smallest delta for which the mechanism is (epsilon, delta)-DP, computed in log
        space (``scipy.special.log_ndtr``, and a quadrature for the ratio of the two
        normal CDFs, which nearly cancel when sigma is large) and rounded up by a
        relative 1e-11.
    """
    owner = "gaussian_delta"
    sigma = check_positive(sigma, "sigma", owner)
    epsilon = check_nonnegative(epsilon, "epsilon", owner)
    sensitivity = check_positive(sensitivity, "sensitivity", owner)
    return _delta_upper(sigma / sensitivity, epsilon)


def gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest epsilon for which the Gaussian mechanism is (epsilon, ``delta``)-DP.

    Inverts the exact profile of Balle & Wang 2018 (eq. 6), which decreases in epsilon:
    Brent's method on ``log delta(eps) - log delta``, then the answer is moved up until
    :func:`gaussian_delta` at it is at most ``delta``, and nudged up two ulps.

    Parameters
    ----------
    sigma:
        Noise standard deviation, > 0.
    delta:
        Target delta in (0, 1).
    sensitivity:
        L2 sensitivity of the query, > 0.
    """
    from scipy import optimize  # deferred: SciPy is slow to import

    owner = "gaussian_epsilon"
    sigma = check_positive(sigma, "sigma", owner)
    delta = check_delta(delta, owner, allow_zero=False)
    sensitivity = check_positive(sensitivity, "sensitivity", owner)
    s = sigma / sensitivity
    target = math.log(delta)
    margin = math.log1p(_REL_ERR)

    def excess(eps: float) -> float:  # smooth, for the root finder
        return _log_delta(s, eps) + margin - target

    def reported_excess(eps: float) -> float:  # what gaussian_delta reports, for safety
        return _delta_upper(s, eps) - delta

    if reported_excess(0.0) <= 0.0:
        return 0.0
    lo, hi = 0.0, 1.0
    while excess(hi) > 0.0 or reported_excess(hi) > 0.0:
        lo, hi = hi, 2.0 * hi
    root = float(optimize.brentq(excess, lo, hi, xtol=1e-14, rtol=1e-15))
    return settle_up(reported_excess, root, hi)


def gaussian_sigma_analytic(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest noise sigma for which the Gaussian mechanism is (``epsilon``, ``delta``)-DP.

    The analytic Gaussian mechanism (Balle & Wang 2018, Alg. 1 / Thm 8): the root in
    sigma of the exact profile ``delta(eps; sigma) = delta`` (decreasing in sigma), found
    by Brent's method in log space and then moved up until the profile, evaluated
    conservatively, is at most ``delta``; the returned sigma is therefore private.
    Valid for every epsilon > 0 (unlike :func:`gaussian_sigma_classic`).

    Parameters
    ----------
    epsilon:
        Target epsilon, > 0 (warns above 10).
    delta:
        Target delta in (0, 1).
    sensitivity:
        L2 sensitivity of the query, > 0.

    Returns
    -------
    float
        sigma, rounded up. Accuracy: each coordinate of the release has standard
        deviation sigma.
    """
    owner = "gaussian_sigma_analytic"
    epsilon = check_epsilon(epsilon, owner)
    delta = check_delta(delta, owner, allow_zero=False)
    sensitivity = check_positive(sensitivity, "sensitivity", owner)
    return _sigma_analytic(epsilon, delta, sensitivity)


@lru_cache(maxsize=1024)
def _sigma_analytic(epsilon: float, delta: float, sensitivity: float) -> float:
    """:func:`gaussian_sigma_analytic` on checked floats: a pure function of public
    parameters, remembered (model fitting and tuning calibrate the same few settings
    again and again; each is a root search)."""
    from scipy import optimize  # deferred: SciPy is slow to import

    target = math.log(delta)
    margin = math.log1p(_REL_ERR)

    # Work with s = sigma / sensitivity; both functions are non-increasing in s.
    def excess(s: float) -> float:  # smooth, for the root finder
        return _log_delta(s, epsilon) + margin - target

    def reported_excess(sigma: float) -> float:  # what gaussian_delta reports, for safety
        return _delta_upper(sigma / sensitivity, epsilon) - delta

    lo, hi = 0.5, 1.0
    while excess(lo) <= 0.0:
        lo, hi = lo / 2.0, lo
    while excess(hi) > 0.0 or reported_excess(product_up(hi, sensitivity)) > 0.0:
        lo, hi = hi, 2.0 * hi
    root = float(optimize.brentq(excess, lo, hi, xtol=1e-15, rtol=1e-15))
    # Settle on sigma itself, checked exactly as gaussian_delta(sigma, ...) computes it.
    guess, safe = product_up(root, sensitivity), product_up(hi, sensitivity)
    return settle_up(reported_excess, guess, safe)


def gaussian_sigma_classic(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Classical Gaussian calibration ``sqrt(2 log(1.25/delta)) * sensitivity / epsilon``.

    Dwork & Roth 2014, Thm A.1: for epsilon in (0, 1) this sigma gives
    (epsilon, delta)-DP. It is never smaller than the analytic sigma and the theorem
    says nothing for epsilon >= 1, so that case raises; use
    :func:`gaussian_sigma_analytic`, which is exact for every epsilon.
    """
    owner = "gaussian_sigma_classic"
    epsilon = check_epsilon(epsilon, owner)
    delta = check_delta(delta, owner, allow_zero=False)
    sensitivity = check_positive(sensitivity, "sensitivity", owner)
    if epsilon >= 1.0:
        raise InvalidParameter(
            f"The 'epsilon' parameter of {owner} must be a float in (0, 1): the classical "
            f"calibration is proven only there. Got {epsilon!r} instead. Use "
            "gaussian_sigma_analytic (Balle & Wang 2018), which is exact for every epsilon."
        )
    # The theorem needs c^2 > 2 log(1.25/delta) strictly; rounding up makes it strict.
    c = up(math.sqrt(up(2.0 * math.log(1.25 / delta), 4)), 2)
    return up(c * sensitivity / epsilon, 4)
