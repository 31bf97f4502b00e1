"""f-DP: privacy as hypothesis testing (trade-off curves, Gaussian DP).

An adversary who sees a mechanism's output tests ``H0: the input was D`` against
``H1: it was D'``. A mechanism is ``f``-DP when every such test with type I error
(false-positive rate) ``alpha`` has type II error (false-negative rate) at least
``f(alpha)`` (Dong, Roth & Su 2022): its power ``1 - f(alpha)`` is the
largest true-positive rate any membership-inference attack can reach at that FPR.

- ``(eps, delta)``-DP is exactly ``f``-DP with ``f_{eps,delta}(alpha) =
  max(0, 1 - delta - e^eps alpha, e^{-eps} (1 - delta - alpha))`` (DRS22;
  Wasserman & Zhou 2010), and a mechanism that is ``(eps, delta(eps))``-DP for every
  ``eps`` in a set is ``f``-DP with the pointwise maximum of those curves (each
  statement alone holds, so their conjunction does). :func:`tradeoff_curve` applies
  this to an accountant's privacy profile: since the accountant's deltas are upper
  bounds and only finitely many eps are used, the curve is a *lower* bound on the true
  trade-off function, the safe side (it overstates the adversary's power).
- ``mu``-Gaussian DP (GDP): ``G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)``, the
  trade-off of ``N(0, 1)`` against ``N(mu, 1)`` (DRS22). The Gaussian
  mechanism with noise multiplier ``sigma`` is exactly ``1/sigma``-GDP and ``k`` runs
  compose to ``sqrt(k)/sigma`` (DRS22). :func:`gdp_mu` states it;
  the central-limit "GDP accountant" for subsampled steps (DRS22) is an
  approximation, not a bound, and dpkit does not offer it.
- Back to (eps, delta): ``mu``-GDP holds exactly when ``(eps, delta_mu(eps))``-DP holds
  for every ``eps >= 0``, ``delta_mu(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu -
  mu/2)`` (DRS22, Cor. 2.13): :func:`gdp_delta` and :func:`gdp_epsilon`.
  :func:`fit_gdp` finds a ``mu`` that an accountant's privacy profile certifies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.accounting._math.gaussian import gaussian_delta, gaussian_epsilon
from dpkit.accounting._math.rounding import div_down
from dpkit.accounting.accountant import Accountant
from dpkit.errors import InvalidParameter

__all__ = [
    "GDPFit",
    "approx_dp_tradeoff",
    "fit_gdp",
    "gaussian_tradeoff",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu",
    "max_true_positive_rate",
    "tradeoff_curve",
]

FloatArray = npt.NDArray[np.float64]

# Float error of the curves below is a few ulp of values in [0, 1]; we lower every
# curve by this much (a lower trade-off curve is the safe side).
_GUARD = 1e-12


def _alphas(alpha: float | Sequence[float] | FloatArray, owner: str) -> FloatArray:
    values = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    if values.ndim != 1 or values.size == 0:
        raise InvalidParameter.for_parameter("alpha", owner, "a non-empty 1-d array", alpha)
    bad = ~np.isfinite(values) | (values < 0.0) | (values > 1.0)
    if bad.any():
        first = float(values[np.flatnonzero(bad)[0]])
        raise InvalidParameter.for_parameter("alpha", owner, "values in [0, 1]", first)
    return values


def _hinge(epsilon: FloatArray, delta: FloatArray, alphas: FloatArray) -> FloatArray:
    """``max_i f_{eps_i, delta_i}(alpha)`` for every alpha (rows: alphas)."""
    eps = epsilon[np.newaxis, :]
    rest = (1.0 - delta)[np.newaxis, :]
    a = alphas[:, np.newaxis]
    with np.errstate(over="ignore", invalid="ignore"):
        first = rest - np.exp(eps) * a
        second = np.exp(-eps) * (rest - a)
    best = np.max(np.maximum(first, second), axis=1, initial=0.0)
    lowered: FloatArray = np.maximum(best - _GUARD, 0.0)
    return lowered


def approx_dp_tradeoff(
    alpha: float | Sequence[float] | FloatArray, *, epsilon: float, delta: float
) -> FloatArray:
    """The trade-off curve of ``(epsilon, delta)``-DP at type I errors ``alpha``.

    ``f(alpha) = max(0, 1 - delta - e^eps alpha, e^{-eps} (1 - delta - alpha))``
    (Dong, Roth & Su 2022): a mechanism is (epsilon, delta)-DP exactly when
    no test has type II error below this at type I error ``alpha``. Lowered by 1e-12
    against float error (a lower curve is the safe side).

    Examples
    --------
    >>> float(approx_dp_tradeoff(0.1, epsilon=1.0, delta=0.0)[0]).__round__(4)
    0.7282
    """
    owner = "approx_dp_tradeoff"
    eps = check.check_nonnegative(epsilon, "epsilon", owner)
    dlt = check.check_delta(delta, owner)
    alphas = _alphas(alpha, owner)
    return _hinge(np.array([eps]), np.array([dlt]), alphas)


def gaussian_tradeoff(alpha: float | Sequence[float] | FloatArray, *, mu: float) -> FloatArray:
    """``G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)``: the ``mu``-GDP trade-off curve.

    Dong, Roth & Su 2022. Lowered by 1e-12 (the safe side).

    Examples
    --------
    >>> round(float(gaussian_tradeoff(0.05, mu=1.0)[0]), 4)
    0.7405
    """
    owner = "gaussian_tradeoff"
    m = check.check_nonnegative(mu, "mu", owner)
    alphas = _alphas(alpha, owner)
    from scipy import special  # deferred: SciPy is slow to import

    # Phi^{-1}(1 - alpha) = -Phi^{-1}(alpha), exact for small alpha.
    values = special.ndtr(-special.ndtri(alphas) - m)
    return np.asarray(np.maximum(values - _GUARD, 0.0), dtype=np.float64)


def gdp_mu(*, noise_multiplier: float, count: int = 1) -> float:
    """``mu`` of ``count`` runs of the Gaussian mechanism: exactly ``sqrt(count) / sigma``.

    Dong, Roth & Su 2022 (one run; under composition ``mu`` adds in
    quadrature). Rounded up (a larger mu is the safe side).

    Examples
    --------
    >>> gdp_mu(noise_multiplier=2.0, count=4)
    1.0000000000000002
    """
    owner = "gdp_mu"
    sigma = check.check_positive(noise_multiplier, "noise_multiplier", owner)
    k = check.check_count(count, "count", owner)
    mu = math.sqrt(k) / sigma
    return math.nextafter(mu, math.inf) if mu > 0 else mu


def _epsilon_grid(accountant: Accountant, points: int) -> FloatArray:
    """Epsilons from 0 to where the accountant's delta is negligible (1e-12), or, when
    its delta never gets that small, to where it stops falling (:func:`_plateau`)."""
    top = accountant.get_epsilon(1e-12)
    if not math.isfinite(top) or top <= 0.0:
        top = max(1.0, accountant.get_epsilon(1e-6) * 2.0)
    if not math.isfinite(top):
        top = _plateau(accountant)
    return np.linspace(0.0, top, points)


#: The largest epsilon :func:`_plateau` looks at (delta(eps) of any mechanism with a
#: delta floor has long reached it: e^-1024 is below every float).
_PLATEAU_LIMIT = 1024.0


def _plateau(accountant: Accountant) -> float:
    """An epsilon from which the accountant's delta no longer falls (by 1e-12).

    Composed ``(eps_i, delta_i)`` events have a delta that never falls below a floor
    (ApproxDP(1, 0.1) with ApproxDP(2, 0.2): 0.28, reached at eps = 3), so the epsilon
    at delta 1e-6 is infinite; the trade-off curve is then the maximum over an epsilon
    grid up to the floor's start. Any grid gives a valid (lower) curve; this one loses
    nothing beyond it, since larger epsilons only repeat the floor's delta."""
    eps, delta = 1.0, accountant.get_delta(1.0)
    while eps < _PLATEAU_LIMIT:
        lower = accountant.get_delta(2.0 * eps)
        if delta - lower <= 1e-12:
            break
        eps, delta = 2.0 * eps, lower
    return 2.0 * eps


def tradeoff_curve(
    accountant: Accountant,
    alpha: float | Sequence[float] | FloatArray,
    *,
    epsilons: Sequence[float] | FloatArray | None = None,
) -> FloatArray:
    """A lower bound on the trade-off function of what ``accountant`` has composed.

    The maximum over ``epsilons`` (default: 400 points from 0 to the epsilon at delta
    1e-12) of ``f_{eps, delta(eps)}`` with ``delta(eps) = accountant.get_delta(eps)``.
    Privacy guarantee: every membership test on the composed mechanisms with type I
    error ``alpha`` has type II error at least the returned value (Dong, Roth & Su
    2022, applied at each eps). Tight when the grid is fine and the
    accountant is (the PLD accountant's profile determines the exact curve of a
    symmetric pair).

    Examples
    --------
    >>> from dpkit.accounting import GaussianEvent
    >>> from dpkit.accounting.pld import PLDAccountant
    >>> accountant = PLDAccountant().compose(GaussianEvent(1.0))
    >>> lower = tradeoff_curve(accountant, [0.01, 0.1])
    >>> bool(np.all(lower <= gaussian_tradeoff([0.01, 0.1], mu=1.0)))
    True
    """
    owner = "tradeoff_curve"
    if not isinstance(accountant, Accountant):
        raise InvalidParameter.for_parameter("accountant", owner, "an Accountant", accountant)
    alphas = _alphas(alpha, owner)
    if epsilons is None:
        grid = _epsilon_grid(accountant, 400)
    else:
        grid = np.asarray(epsilons, dtype=np.float64)
        if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid) & (grid >= 0)):
            raise InvalidParameter.for_parameter(
                "epsilons", owner, "a non-empty 1-d array of finite values >= 0", epsilons
            )
    deltas = np.array([min(1.0, accountant.get_delta(float(e))) for e in grid])
    return _hinge(grid, deltas, alphas)


def max_true_positive_rate(
    accountant: Accountant,
    false_positive_rate: float | Sequence[float] | FloatArray,
    *,
    epsilons: Sequence[float] | FloatArray | None = None,
) -> FloatArray:
    """The largest TPR any membership-inference attack can reach at a given FPR.

    ``1 - f(FPR)`` with ``f`` from :func:`tradeoff_curve`: an upper bound on the
    attack's power (the safe side), e.g. for reporting "TPR at 0.1% FPR".

    Examples
    --------
    >>> from dpkit.accounting import GaussianEvent
    >>> from dpkit.accounting.pld import PLDAccountant
    >>> tpr = max_true_positive_rate(PLDAccountant().compose(GaussianEvent(2.0)), 0.001)
    >>> round(float(tpr[0]), 4)
    0.0048
    """
    curve = tradeoff_curve(accountant, false_positive_rate, epsilons=epsilons)
    return np.asarray(1.0 - curve, dtype=np.float64)


def gdp_delta(*, mu: float, epsilon: float) -> float:
    """The smallest delta with ``mu``-GDP implying (``epsilon``, delta)-DP, rounded up.

    ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Dong, Roth & Su
    2022, Cor. 2.13), for ``epsilon >= 0``; at ``epsilon = 0`` it is the total variation
    distance ``2 Phi(mu/2) - 1`` of ``N(0, 1)`` and ``N(mu, 1)``. This is the Gaussian
    mechanism's exact profile at noise ``1/mu`` (Balle & Wang 2018, Thm 8), computed by
    :func:`dpkit.accounting.gaussian_delta` (certified upper bound).

    Examples
    --------
    >>> round(gdp_delta(mu=1.0, epsilon=1.0), 6)
    0.126937
    """
    owner = "gdp_delta"
    m = check.check_positive(mu, "mu", owner)
    eps = check.check_nonnegative(epsilon, "epsilon", owner)
    # Noise 1/mu at sensitivity 1, 1/mu rounded down (less noise: a larger delta).
    return gaussian_delta(div_down(1.0, m), eps)


def gdp_epsilon(*, mu: float, delta: float) -> float:
    """The smallest epsilon with ``mu``-GDP implying (epsilon, ``delta``)-DP, rounded up.

    The inverse of :func:`gdp_delta` (Dong, Roth & Su 2022, Cor. 2.13): the Gaussian
    mechanism's exact epsilon at noise ``1/mu``, by
    :func:`dpkit.accounting.gaussian_epsilon`. ``delta`` in (0, 1).

    Examples
    --------
    >>> round(gdp_epsilon(mu=1.0, delta=1e-5), 4)
    4.3772
    """
    owner = "gdp_epsilon"
    m = check.check_positive(mu, "mu", owner)
    dlt = check.check_delta(delta, owner, allow_zero=False)
    return gaussian_epsilon(div_down(1.0, m), dlt)


@dataclass(frozen=True, slots=True)
class GDPFit:
    """A Gaussian-DP statement certified from a privacy profile (see :func:`fit_gdp`).

    The mechanism is ``(eps, delta_mu(eps) + slack)``-DP for every ``eps >= 0``, and so
    its trade-off function is at least ``G_mu(alpha) - slack`` for every ``alpha``.
    ``slack == 0`` means exactly ``mu``-GDP.
    """

    mu: float
    slack: float


# gaussian_delta is within a relative 5e-13 of the exact delta (its own allowance is
# 1e-11): this factor turns its upper bound into a lower bound of delta_mu.
_GDP_LOWER = 1.0 - 1e-10


def _gdp_deltas(mu: float, eps: FloatArray) -> FloatArray:
    """``delta_mu(eps)`` for many eps (float estimate, for the search only)."""
    from scipy import special

    la = special.log_ndtr(mu / 2.0 - eps / mu)
    lb = special.log_ndtr(-mu / 2.0 - eps / mu)
    with np.errstate(over="ignore", invalid="ignore"):
        values = np.exp(la) * -np.expm1(eps + lb - la)
    return np.asarray(np.maximum(values, 0.0), dtype=np.float64)


def fit_gdp(
    accountant: Accountant,
    *,
    epsilons: Sequence[float] | FloatArray | None = None,
    mu_max: float = 1e3,
) -> GDPFit:
    """The smallest ``mu`` (on the grid's terms) such that ``accountant`` certifies mu-GDP.

    Let ``d(eps) = accountant.get_delta(eps)``, an upper bound on the true privacy
    profile ``delta(eps)``, on the grid ``e_0 = 0 < ... < e_N``. "Everywhere" is
    checked with convexity: as a function of ``t = e^eps``, ``delta(t) = sup_S P(S) -
    t Q(S)`` is a supremum of affine functions, hence convex, so on ``[t_i, t_{i+1}]``
    it lies below the chord of ``d(e_i)``, ``d(e_{i+1})``; ``delta_mu`` is convex in
    ``t`` too, so it lies above its tangent at the interval's midpoint ``m`` (slope
    ``-Phi(-log(m)/mu - mu/2)``). The tangent clearing the chord (less ``slack``) at
    both ends of every interval gives ``delta(eps) <= delta_mu(eps) + slack`` on
    ``[0, e_N]``; beyond, ``delta(eps) <= d(e_N)`` (profiles fall with eps), so
    ``slack = d(e_N)`` (a PLD's truncated tail, ~1e-14, or 0) covers the rest. By Dong,
    Roth & Su 2022, Cor. 2.13 the mechanism's trade-off function is then at least
    ``G_mu - slack`` (exactly mu-GDP when ``slack`` is 0). ``delta_mu(m)`` is
    :func:`gdp_delta` lowered by a relative 1e-10 (a lower bound); ``mu`` is the
    smallest passing value found by bisection, to a relative 1e-9, rounded up.

    Parameters
    ----------
    accountant:
        Any accountant (tightest with :class:`~dpkit.accounting.PLDAccountant`).
    epsilons:
        The grid, increasing, starting at 0 (default: 400 points from 0 to the epsilon
        at delta 1e-12). A finer grid gives a smaller mu.
    mu_max:
        The largest mu searched, > 0.

    Raises
    ------
    InvalidParameter
        When no ``mu <= mu_max`` passes.

    Examples
    --------
    >>> from dpkit.accounting import GaussianEvent
    >>> from dpkit.accounting.pld import PLDAccountant
    >>> fit = fit_gdp(PLDAccountant().compose(GaussianEvent(2.0)))
    >>> 0.5 <= fit.mu < 0.501, fit.slack < 1e-10
    (True, True)
    """
    owner = "fit_gdp"
    if not isinstance(accountant, Accountant):
        raise InvalidParameter.for_parameter("accountant", owner, "an Accountant", accountant)
    top_mu = check.check_positive(mu_max, "mu_max", owner)
    if epsilons is None:
        grid = _epsilon_grid(accountant, 400)
    else:
        grid = np.asarray(epsilons, dtype=np.float64)
        ok = grid.ndim == 1 and grid.size >= 2 and bool(np.all(np.isfinite(grid)))
        if not ok or grid[0] != 0.0 or bool(np.any(np.diff(grid) <= 0.0)):
            raise InvalidParameter.for_parameter(
                "epsilons", owner, "an increasing 1-d array of finite values from 0", epsilons
            )
    bounds = np.array([min(1.0, accountant.get_delta(float(e))) for e in grid])
    slack = float(bounds[-1])
    t = np.exp(grid)
    mid = 0.5 * (t[:-1] + t[1:])
    eps_mid = np.log(mid)
    # Per interval, the tangent of delta_mu at the midpoint must clear the chord of the
    # accountant's bounds (less the slack) at both ends: a margin for the float error
    # of the slope and of t (a relative 1e-12 of |slope| t).
    need_left = bounds[:-1] - slack
    need_right = bounds[1:] - slack
    dl, dr = t[:-1] - mid, t[1:] - mid

    def clears(values: FloatArray, slope: FloatArray) -> bool:
        margin = 1e-12 * np.abs(slope) * (t[1:] + mid)
        left = values + slope * dl - margin >= need_left
        right = values + slope * dr - margin >= need_right
        return bool(np.all(left & right))

    def slopes(mu: float) -> FloatArray:
        from scipy import special

        # d delta_mu / d t = -Phi(-eps/mu - mu/2) at t = e^eps (DRS22, Cor. 2.13).
        return np.asarray(-special.ndtr(-eps_mid / mu - mu / 2.0), dtype=np.float64)

    def passes_estimate(mu: float) -> bool:
        return clears(_gdp_deltas(mu, eps_mid) * (1.0 - 1e-6), slopes(mu))

    def passes(mu: float) -> bool:  # certified: gdp_delta is a rigorous upper bound
        lower = np.array([gdp_delta(mu=mu, epsilon=float(e)) for e in eps_mid]) * _GDP_LOWER
        return clears(lower, slopes(mu))

    if not passes(top_mu):
        raise InvalidParameter(
            f"{owner}: no mu <= mu_max={top_mu!r} is certified by this accountant's "
            "profile; raise mu_max or refine the epsilon grid."
        )
    low, high = 0.0, top_mu
    while high - low > 1e-9 * high:
        middle = 0.5 * (low + high)
        if passes_estimate(middle):
            high = middle
        else:
            low = middle
    while not passes(high):  # the float estimate erred: step up until certified
        high = min(top_mu, high * (1.0 + 1e-6))
    return GDPFit(math.nextafter(high, math.inf), slack)
