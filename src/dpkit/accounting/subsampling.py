"""Privacy amplification by Poisson subsampling, its inverse, and its limits.

Setting. ``S_p`` keeps each record independently with probability ``p``; ``M`` is
(eps, delta)-DP with respect to adding or removing one record. Then ``M o S_p`` is
(eps', delta')-DP for the same relation with

    eps' = ln(1 + p (e^eps - 1)),        delta' = p delta,

and the bound is exactly tight: randomized response on the bit "was my record
sampled" attains it (Balle, Barthe & Gaboardi 2018, Thm 8; the differentialprivacy.org
post "Privacy Amplification by Subsampling" (2025), Thm 1, which proves both directions
of the add/remove relation). If people have different inclusion probabilities, use
the largest one. The theorem is *not* about sampling a fixed number of records, nor
about the replace-one relation: those need other statements (see
:class:`~dpkit.accounting.SampledWithoutReplacementEvent`).

Inverse. To make the subsampled mechanism eps'-DP, run ``M`` at

    eps_p = ln(1 + (e^eps' - 1) / p),

which satisfies ``eps'/(p + eps') <= ln(1 + eps'/p) <= eps_p <= eps'/p`` and
``eps_p = eps'/p - (1-p) eps'^2 / (2 p^2) + (2-p)(1-p) eps'^3 / (6 p^3) + O(eps'^4)``
(post, eqs. 5-6).

Limits. For the subsampled Laplace mechanism, the noise added relative to the plain
Laplace mechanism at the same eps is ``1 / noise_ratio`` with
``noise_ratio = p eps_p / eps`` in ``[p/(p + eps), 1]``. Amplification is nearly free
only when ``eps`` is of the order of ``p``: if ``eps <= c p`` then
``noise_ratio >= ln(1 + c) / c`` and this is the infimum ("Limits of Privacy
Amplification by Subsampling" (2025), eq. 8).

Rounding. :func:`amplified_epsilon` and :func:`amplified_delta` round up (they are
privacy bounds); :func:`epsilon_before_sampling` rounds down and is checked against
:func:`amplified_epsilon`, so ``amplified_epsilon(epsilon_before_sampling(e, p), p) <= e``
holds exactly for the floats returned.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, TypeVar

from dpkit import _validation as check
from dpkit.accounting._math.rounding import down, fraction_up, up
from dpkit.accounting.guarantees import ApproxDP, PureDP
from dpkit.errors import DPError, InvalidParameter

__all__ = [
    "OptionalDependencyError",
    "amplified_delta",
    "amplified_epsilon",
    "amplify",
    "epsilon_before_sampling",
    "noise_ratio",
    "noise_ratio_lower_bound",
    "plot_noise_ratio",
]

_G = TypeVar("_G", PureDP, ApproxDP)

# Each libm call (expm1, log1p, log, exp) is within one ulp and log1p does not amplify
# relative error for non-negative arguments (x/(1+x) <= log1p(x)), so four ulps cover
# the chain with room to spare.
_ULPS = 4
# math.expm1 raises OverflowError above ~709.78; switch to the log-space forms first.
_EXP_LIMIT = 700.0


class OptionalDependencyError(DPError, ImportError):
    """A feature needs an optional dependency that is not installed."""


def _rate(sampling_probability: object, owner: str) -> float:
    return check.check_probability(
        sampling_probability, "sampling_probability", owner, open_low=True
    )


def _log1p_rate_expm1(epsilon: float, rate: float) -> float:
    """``ln(1 + rate (e^eps - 1))`` in floating point, accurate for every eps >= 0."""
    if epsilon < _EXP_LIMIT:
        return math.log1p(rate * math.expm1(epsilon))
    # e^eps overflows: ln(1 + r(e^eps - 1)) = eps + ln(r + (1 - r) e^-eps); no
    # cancellation since eps > 709 dominates the second term.
    return epsilon + math.log(rate + (1.0 - rate) * math.exp(-epsilon))


def _log1p_expm1_over_rate(epsilon: float, rate: float) -> float:
    """``ln(1 + (e^eps - 1) / rate)`` in floating point."""
    grown = math.expm1(epsilon) / rate if epsilon < _EXP_LIMIT else math.inf
    if math.isfinite(grown):
        return math.log1p(grown)
    # ln((rate - 1 + e^eps) / rate) = eps - ln(rate) + ln(1 - (1 - rate) e^-eps).
    return epsilon - math.log(rate) + math.log1p(-(1.0 - rate) * math.exp(-epsilon))


def amplified_epsilon(epsilon: float, *, sampling_probability: float) -> float:
    """Epsilon of an ``epsilon``-DP mechanism run on a Poisson sample: ``ln(1 + p(e^eps - 1))``.

    Parameters
    ----------
    epsilon:
        The mechanism's epsilon (w.r.t. adding/removing one record), a float >= 0.
    sampling_probability:
        ``p`` in (0, 1]: each record is kept independently with this probability.

    Returns
    -------
    float
        The amplified epsilon, rounded up, never above ``epsilon``.

    Privacy
    -------
    Balle, Barthe & Gaboardi 2018, Thm 8; "Privacy Amplification by Subsampling"
    (differentialprivacy.org, 2025), Thm 1. Exactly tight. Add/remove neighbours only.

    Examples
    --------
    >>> from dpkit.accounting.subsampling import amplified_epsilon
    >>> round(amplified_epsilon(1.0, sampling_probability=0.1), 6)
    0.158565
    """
    owner = "amplified_epsilon"
    epsilon = check.check_nonnegative(epsilon, "epsilon", owner)
    rate = _rate(sampling_probability, owner)
    if rate == 1.0 or epsilon == 0.0:
        return epsilon
    return min(epsilon, up(_log1p_rate_expm1(epsilon, rate), _ULPS))


def amplified_delta(delta: float, *, sampling_probability: float) -> float:
    """Delta of an (eps, ``delta``)-DP mechanism run on a Poisson sample: ``p * delta``.

    Exact product rounded up. Same theorem and relation as :func:`amplified_epsilon`.

    Examples
    --------
    >>> from dpkit.accounting.subsampling import amplified_delta
    >>> amplified_delta(1e-6, sampling_probability=0.5)
    5e-07
    """
    owner = "amplified_delta"
    delta = check.check_delta(delta, owner)
    rate = _rate(sampling_probability, owner)
    return fraction_up(Fraction(delta) * Fraction(rate))


def amplify(guarantee: _G, *, sampling_probability: float) -> _G:
    """The guarantee of a mechanism with ``guarantee`` run on a Poisson sample.

    Parameters
    ----------
    guarantee:
        :class:`PureDP` or :class:`ApproxDP`, with respect to adding/removing one record.
    sampling_probability:
        ``p`` in (0, 1].

    Returns
    -------
    PureDP or ApproxDP
        Same type: ``eps' = ln(1 + p(e^eps - 1))`` (rounded up), ``delta' = p delta``.

    Privacy
    -------
    See :func:`amplified_epsilon`. zCDP and RDP do not amplify by a closed form of the
    guarantee alone; use an RDP or PLD accountant on a
    :class:`~dpkit.accounting.PoissonSampledEvent` instead.

    Examples
    --------
    >>> from dpkit.accounting import ApproxDP
    >>> from dpkit.accounting.subsampling import amplify
    >>> amplify(ApproxDP(0.0, 1e-5), sampling_probability=0.25)
    ApproxDP(epsilon=0.0, delta=2.5e-06)
    """
    rate = _rate(sampling_probability, "amplify")
    if isinstance(guarantee, PureDP):
        return PureDP(amplified_epsilon(guarantee.epsilon, sampling_probability=rate))
    if isinstance(guarantee, ApproxDP):
        return ApproxDP(
            amplified_epsilon(guarantee.epsilon, sampling_probability=rate),
            amplified_delta(guarantee.delta, sampling_probability=rate),
        )
    raise InvalidParameter.for_parameter(
        "guarantee", "amplify", "a PureDP or ApproxDP guarantee", guarantee
    )


def epsilon_before_sampling(target_epsilon: float, *, sampling_probability: float) -> float:
    """The epsilon to run a mechanism at so that, on a Poisson sample, it is ``target``-DP.

    ``eps_p = ln(1 + (e^target - 1) / p)``, the inverse of :func:`amplified_epsilon`.

    Parameters
    ----------
    target_epsilon:
        The epsilon wanted for the subsampled mechanism, a float >= 0.
    sampling_probability:
        ``p`` in (0, 1].

    Returns
    -------
    float
        ``eps_p`` rounded down, and lowered further if needed so that
        ``amplified_epsilon(eps_p, sampling_probability=p) <= target_epsilon`` holds for
        the floats (the calibrated mechanism never exceeds the target).

    Notes
    -----
    ``target/(p + target) <= ln(1 + target/p) <= eps_p <= target/p``: amplification
    multiplies the budget by at most ``1/p``, and by much less once ``target`` is not
    small compared with ``p`` (see :func:`noise_ratio`).

    Examples
    --------
    >>> from dpkit.accounting.subsampling import epsilon_before_sampling
    >>> round(epsilon_before_sampling(0.1, sampling_probability=0.01), 4)
    2.4438
    """
    owner = "epsilon_before_sampling"
    target = check.check_nonnegative(target_epsilon, "target_epsilon", owner)
    rate = _rate(sampling_probability, owner)
    if rate == 1.0 or target == 0.0:
        return target
    value = max(0.0, down(_log1p_expm1_over_rate(target, rate), _ULPS))
    # The forward map rounds up, so a few ulps may be needed to meet the target; step
    # down by a growing amount (the map is increasing, so this terminates quickly).
    step = 1
    while value > 0.0 and amplified_epsilon(value, sampling_probability=rate) > target:
        value = max(0.0, down(value, step))
        step *= 2
    return value


def noise_ratio(target_epsilon: float, *, sampling_probability: float) -> float:
    """``p * eps_p / eps``: plain Laplace noise over subsampled Laplace noise at equal privacy.

    The subsampled Laplace mean estimator adds noise of scale ``1/(eps_p p n)`` where
    the plain one adds ``1/(eps n)``; this is their ratio ("Limits of Privacy
    Amplification by Subsampling", eq. 7). It lies in ``[p/(p + eps), 1]``; 1 means
    amplification is free, 1/2 means the subsampled mechanism adds twice the noise.

    Parameters
    ----------
    target_epsilon:
        ``eps`` > 0, the privacy of the whole (subsampled) mechanism.
    sampling_probability:
        ``p`` in (0, 1].

    Returns
    -------
    float
        The ratio, computed to a few ulps (a description, not a privacy bound).

    Examples
    --------
    >>> from dpkit.accounting.subsampling import noise_ratio
    >>> round(noise_ratio(0.02, sampling_probability=0.01), 4)  # eps = 2p
    0.5527
    """
    owner = "noise_ratio"
    target = check.check_positive(target_epsilon, "target_epsilon", owner)
    rate = _rate(sampling_probability, owner)
    if rate == 1.0:
        return 1.0
    return min(1.0, rate * _log1p_expm1_over_rate(target, rate) / target)


def noise_ratio_lower_bound(c: float) -> float:
    """``ln(1 + c) / c``: the smallest :func:`noise_ratio` over all ``p`` when ``eps <= c p``.

    "Limits of Privacy Amplification by Subsampling" (2025), eq. 8: if ``eps <= c p``
    the subsampled Laplace mechanism adds at most ``c / ln(1 + c)`` times the noise of
    the plain one, and no smaller factor holds for every ``p`` (the infimum is
    approached as ``p -> 0`` with ``eps = c p``).

    Examples
    --------
    >>> from dpkit.accounting.subsampling import noise_ratio_lower_bound
    >>> round(noise_ratio_lower_bound(2.0), 4)
    0.5493
    """
    c = check.check_positive(c, "c", "noise_ratio_lower_bound")
    return math.log1p(c) / c


def _pyplot() -> Any:
    # Imported by name so that neither the import nor type checking needs matplotlib,
    # an optional dependency (the ``plot`` extra).
    try:
        plt = importlib.import_module("matplotlib.pyplot")
    except ImportError as err:
        raise OptionalDependencyError(
            "Plotting needs matplotlib, which is not installed. Install it with "
            "`pip install 'dpkit[plot]'` (or `pip install matplotlib`)."
        ) from err
    return plt


def plot_noise_ratio(
    sampling_probabilities: Sequence[float] = (0.5, 0.1, 0.01, 0.001),
    *,
    epsilons: Sequence[float] | None = None,
    ax: Any = None,
) -> Any:
    """Plot :func:`noise_ratio` against epsilon, one line per sampling probability.

    Parameters
    ----------
    sampling_probabilities:
        Values of ``p`` in (0, 1], one curve each.
    epsilons:
        Values of the target epsilon (> 0) on the x axis (log scale); default 200
        points from 1e-4 to 10.
    ax:
        Matplotlib axes to draw on; default a new figure.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    OptionalDependencyError
        When matplotlib is not installed (``pip install 'dpkit[plot]'``).
    """
    owner = "plot_noise_ratio"
    rates = [_rate(p, owner) for p in sampling_probabilities]
    if not rates:
        raise InvalidParameter.for_parameter(
            "sampling_probabilities", owner, "a non-empty sequence of floats in (0, 1]", rates
        )
    if epsilons is None:
        grid = [10.0 ** (-4 + 5 * i / 199) for i in range(200)]
    else:
        grid = [check.check_positive(e, "epsilons", owner) for e in epsilons]
        if not grid:
            raise InvalidParameter.for_parameter(
                "epsilons", owner, "a non-empty sequence of floats in (0, inf)", epsilons
            )
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots()
    assert ax is not None
    for rate in rates:
        ratios = [noise_ratio(e, sampling_probability=rate) for e in grid]
        ax.plot(grid, ratios, label=f"p = {rate:g}")
    ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    ax.set_ylim(0.0, 1.05)
    ax.set_xlabel("epsilon of the subsampled mechanism")
    ax.set_ylabel("p * eps_p / eps  (1 = amplification is free)")
    ax.set_title("Noise ratio of subsampled vs plain Laplace")
    ax.legend()
    return ax
