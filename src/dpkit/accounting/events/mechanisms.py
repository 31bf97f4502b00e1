"""Events of the mechanisms dpkit ships: additive noise, local randomisers, selection,
and black boxes with a stated guarantee."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpkit._validation import (
    check_count,
    check_delta,
    check_nonnegative,
    check_positive,
)
from dpkit.accounting._math.conversions import pure_to_zcdp_rho
from dpkit.accounting._math.rounding import div_up, up
from dpkit.accounting.events._base import Event, half_squared_ratio, register
from dpkit.errors import InvalidParameter

# --- additive noise -------------------------------------------------------------------


@register
@dataclass(frozen=True, slots=True)
class LaplaceEvent(Event):
    """Laplace noise with scale ``noise_multiplier * D1`` added to each coordinate.

    ``D1`` is the L1 sensitivity of the query. The mechanism is ``eps``-DP with
    ``eps = 1 / noise_multiplier`` (Dwork et al. 2006); its RDP is Mironov 2017, Prop. 6
    at that eps (see :func:`dpkit.accounting.laplace_rdp`), and its zCDP is taken from
    the tight pure-DP conversion ``eps tanh(eps/2)``.
    """

    noise_multiplier: float

    def __post_init__(self) -> None:
        value = check_positive(self.noise_multiplier, "noise_multiplier", "LaplaceEvent")
        object.__setattr__(self, "noise_multiplier", value)

    def _pure_epsilon(self) -> float | None:
        return div_up(1.0, self.noise_multiplier)


@register
@dataclass(frozen=True, slots=True)
class GaussianEvent(Event):
    """Gaussian noise ``N(0, sigma^2)`` with ``sigma = noise_multiplier * D2`` per coordinate.

    ``D2`` is the L2 sensitivity of the query. The mechanism is ``rho``-zCDP with
    ``rho = 1 / (2 noise_multiplier^2)`` (Bun & Steinke 2016, Prop. 1.6), equivalently
    ``(a, a rho)``-RDP for all ``a > 1``, and its exact (eps, delta) profile is Balle &
    Wang 2018, Thm 8 (:func:`dpkit.accounting.gaussian_delta`). No pure-DP guarantee.
    """

    noise_multiplier: float

    def __post_init__(self) -> None:
        value = check_positive(self.noise_multiplier, "noise_multiplier", "GaussianEvent")
        object.__setattr__(self, "noise_multiplier", value)

    def _zcdp_rho(self) -> float | None:
        return half_squared_ratio(1.0, self.noise_multiplier)


@register
@dataclass(frozen=True, slots=True)
class DiscreteLaplaceEvent(Event):
    """Discrete Laplace noise ``P[Y = y] ∝ exp(-|y| / scale)`` on the integers.

    Added to an integer-valued query of L1 sensitivity ``sensitivity`` (an int >= 1),
    the mechanism is ``eps``-DP with ``eps = sensitivity / scale`` (Ghosh, Roughgarden &
    Sundararajan 2009; Canonne, Kamath & Steinke 2020, Sec. 2.2). zCDP from the tight
    pure-DP conversion.
    """

    scale: float
    sensitivity: int

    def __post_init__(self) -> None:
        owner = "DiscreteLaplaceEvent"
        object.__setattr__(self, "scale", check_positive(self.scale, "scale", owner))
        object.__setattr__(self, "sensitivity", check_count(self.sensitivity, "sensitivity", owner))

    def _pure_epsilon(self) -> float | None:
        return div_up(float(self.sensitivity), self.scale)


@register
@dataclass(frozen=True, slots=True)
class DiscreteGaussianEvent(Event):
    """Discrete Gaussian noise ``N_Z(0, sigma^2)``, i.i.d. on each of ``dimension`` coordinates.

    ``P[Y = y] ∝ exp(-y^2 / (2 sigma^2))`` on the integers, added to an integer-vector
    query whose L2 sensitivity is ``sensitivity``. For ``dimension == 1`` the sensitivity
    is an integer (an int >= 1) and the exact (eps, delta) profile is Canonne, Kamath &
    Steinke 2020, Thm 7 (:func:`dpkit.accounting.discrete_gaussian_delta`); for more
    coordinates it is a positive real (e.g. ``sqrt(2)``). In every dimension the mechanism
    is ``sensitivity^2 / (2 sigma^2)``-zCDP (CKS20 Thm 4 with additivity over
    coordinates, Thm 14). No pure-DP guarantee.
    """

    sigma: float
    sensitivity: float
    dimension: int = 1

    def __post_init__(self) -> None:
        owner = "DiscreteGaussianEvent"
        object.__setattr__(self, "sigma", check_positive(self.sigma, "sigma", owner))
        dimension = check_count(self.dimension, "dimension", owner)
        object.__setattr__(self, "dimension", dimension)
        if dimension == 1:
            sens: float = check_count(self.sensitivity, "sensitivity", owner)
        else:
            sens = check_positive(self.sensitivity, "sensitivity", owner)
        object.__setattr__(self, "sensitivity", sens)

    def _zcdp_rho(self) -> float | None:
        return half_squared_ratio(self.sensitivity, self.sigma)


@register
@dataclass(frozen=True, slots=True)
class TruncatedDiscreteGaussianEvent(Event):
    """Discrete Gaussian noise truncated to ``[-bound, bound]``, on one integer coordinate.

    ``P[Y = y] ∝ exp(-y^2 / (2 sigma^2))`` for integers ``|y| <= bound`` (renormalised
    over them; dp_accounting's ``from_discrete_gaussian_mechanism(...,
    truncation_bound=bound)``), added to an integer-valued query of sensitivity
    ``sensitivity`` (an int >= 1); ``bound`` is an int >= 0. Approximate DP only: the
    two neighbouring output laws have different supports, so an output outside the
    other's support has infinite privacy loss and the mechanism has no pure-DP, zCDP or
    RDP guarantee. Its exact (eps, delta) profile, given to :class:`PLDAccountant`
    (``dpkit.accounting._math.pld.truncated_discrete``), has ``delta`` at least the mass
    of the shifted-out support, ``P[Y > bound - sensitivity]`` (1 when
    ``sensitivity > 2 bound``: the supports are disjoint).
    """

    sigma: float
    sensitivity: int
    bound: int

    def __post_init__(self) -> None:
        owner = "TruncatedDiscreteGaussianEvent"
        object.__setattr__(self, "sigma", check_positive(self.sigma, "sigma", owner))
        object.__setattr__(self, "sensitivity", check_count(self.sensitivity, "sensitivity", owner))
        object.__setattr__(self, "bound", check_count(self.bound, "bound", owner, minimum=0))

    def _pure_epsilon(self) -> float | None:
        return None

    def _zcdp_rho(self) -> float | None:
        return None


@register
@dataclass(frozen=True, slots=True)
class TruncatedLaplaceEvent(Event):
    """The truncated Laplace mechanism calibrated to (epsilon, delta)-DP.

    Laplace noise of scale ``D1 / epsilon`` conditioned on ``[-A, A]`` with
    ``A = (D1 / epsilon) log(1 + (e^epsilon - 1) / (2 delta))`` (Geng, Ding, Guo & Kumar
    2020, "Tight analysis of privacy and utility tradeoff in approximate differential
    privacy", AISTATS). Approximate DP only: bounded noise has no pure-DP, zCDP or RDP
    guarantee. ``epsilon`` > 0, ``delta`` in (0, 1).
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        owner = "TruncatedLaplaceEvent"
        object.__setattr__(self, "epsilon", check_positive(self.epsilon, "epsilon", owner))
        object.__setattr__(self, "delta", check_delta(self.delta, owner, allow_zero=False))

    def _zcdp_rho(self) -> float | None:
        return None


# --- local randomisers and selection --------------------------------------------------


@register
@dataclass(frozen=True, slots=True)
class RandomizedResponseEvent(Event):
    """k-ary randomized response with privacy parameter ``epsilon``.

    Each person's value in ``{1, ..., categories}`` is reported truthfully with
    probability ``e^eps / (e^eps + k - 1)`` and as each other category with probability
    ``1 / (e^eps + k - 1)`` (Warner 1965; Kairouz, Oh & Viswanath 2016). Under the
    relation "replace one person's value" it is ``eps``-DP; zCDP from the tight pure-DP
    conversion (attained by k = 2). ``categories`` is an int >= 2.

    ``relation="replace_special"`` states it for a person's value replaced by a special
    value on which the output is uniform over the k categories (dp_accounting's
    ``REPLACE_SPECIAL``): the pair ``(R(x), U)``, with privacy losses ``log(k a)`` and
    ``log(k b)`` (``a``, ``b`` the probabilities above), so it is ``eps'``-DP with
    ``eps' = max(log(k a), -log(k b)) < eps``. Every analysis of the default relation
    stays valid for it (``U`` is the average of ``R(y)`` over y, and divergences are
    jointly convex); the PLD accountant uses the tighter pair.
    """

    epsilon: float
    categories: int
    relation: str = "replace"

    def __post_init__(self) -> None:
        owner = "RandomizedResponseEvent"
        object.__setattr__(self, "epsilon", check_positive(self.epsilon, "epsilon", owner))
        object.__setattr__(
            self, "categories", check_count(self.categories, "categories", owner, minimum=2)
        )
        if self.relation not in ("replace", "replace_special"):
            raise InvalidParameter.for_parameter(
                "relation", owner, "'replace' or 'replace_special'", self.relation
            )

    def special_losses(self) -> tuple[float, float, float, float]:
        """``(p_true, loss_true, p_other_total, loss_other)`` of ``R(x)`` against the
        uniform ``U`` (the "remove" ordering of the replace-special pair)."""
        k = self.categories
        scale = 1.0 + (k - 1) * math.exp(-self.epsilon)  # (e^eps + k - 1) / e^eps
        p_true = 1.0 / scale
        p_other = math.exp(-self.epsilon) / scale
        return p_true, math.log(k * p_true), (k - 1) * p_other, math.log(k * p_other)

    def _pure_epsilon(self) -> float | None:
        if self.relation == "replace":
            return self.epsilon
        _, high, _, low = self.special_losses()
        return min(self.epsilon, up(max(high, -low), 4))


@register
@dataclass(frozen=True, slots=True)
class ExponentialMechanismEvent(Event):
    """One run of the exponential mechanism with privacy parameter ``epsilon``.

    Samples candidate ``y`` with probability ∝ ``exp(eps u(x, y) / (2 D))`` for a score of
    sensitivity ``D`` (McSherry & Talwar 2007), or ∝ ``exp(eps u(x, y) / D)`` when every
    score moves in the same direction between neighbours. Either way the mechanism is
    ``eps``-DP and ``eps``-bounded range (Durfee & Rogers 2019), hence ``eps^2/8``-zCDP
    (Cesar & Rogers 2021, Lemma 3.2); we state the smaller of that and the pure-DP
    conversion. Report-noisy-max with Gumbel noise *is* this mechanism (the Gumbel-max
    trick) and should emit this event.
    """

    epsilon: float

    def __post_init__(self) -> None:
        value = check_positive(self.epsilon, "epsilon", "ExponentialMechanismEvent")
        object.__setattr__(self, "epsilon", value)

    def _pure_epsilon(self) -> float | None:
        return self.epsilon

    def _zcdp_rho(self) -> float | None:
        bounded_range = half_squared_ratio(self.epsilon, 2.0)  # eps^2 / 8
        return min(bounded_range, pure_to_zcdp_rho(self.epsilon))


@register
@dataclass(frozen=True, slots=True)
class PermuteAndFlipEvent(Event):
    """One run of permute-and-flip with privacy parameter ``epsilon`` (``eps``-DP).

    Visits candidates in random order and accepts ``y`` with probability
    ``exp(eps (u(x, y) - max_y' u(x, y')) / (2 D))`` (McKenna & Sheldon 2020). It is
    identical to report-noisy-max with exponential noise (Ding et al. 2021), which should
    emit this event. Not known to be bounded range, so zCDP comes from the pure-DP
    conversion.
    """

    epsilon: float

    def __post_init__(self) -> None:
        value = check_positive(self.epsilon, "epsilon", "PermuteAndFlipEvent")
        object.__setattr__(self, "epsilon", value)

    def _pure_epsilon(self) -> float | None:
        return self.epsilon


@register
@dataclass(frozen=True, slots=True)
class ReportNoisyMaxEvent(Event):
    """Report-noisy-max with Laplace noise, calibrated to ``epsilon``-DP.

    Adds independent Laplace noise of scale ``2 D / eps`` to each score of sensitivity
    ``D`` (``D / eps`` suffices when every score moves in the same direction, e.g.
    counts) and reports only the argmax (Dwork & Roth 2014, Claim 3.9). This class is for
    Laplace noise only: with Gumbel noise report-noisy-max is the exponential mechanism
    (emit :class:`ExponentialMechanismEvent`), with exponential noise it is
    permute-and-flip (emit :class:`PermuteAndFlipEvent`). zCDP from the pure-DP conversion.
    """

    epsilon: float

    def __post_init__(self) -> None:
        value = check_positive(self.epsilon, "epsilon", "ReportNoisyMaxEvent")
        object.__setattr__(self, "epsilon", value)

    def _pure_epsilon(self) -> float | None:
        return self.epsilon


@register
@dataclass(frozen=True, slots=True)
class SparseVectorEvent(Event):
    """One run of AboveThreshold (the sparse vector technique), ``epsilon``-DP.

    Perturbs the threshold with Laplace noise of scale ``2 D / eps`` and each query of
    sensitivity ``D`` with scale ``4 D / eps`` (``2 D / eps`` when every query moves in
    the same direction between neighbours: the monotone variant, also ``eps``-DP), and
    halts after the first query reported above the threshold (Dwork & Roth 2014, Alg. 1
    and Thm 3.23; Lyu, Su & Li 2017, Alg. 1). The whole run, however many queries it
    answers "below", is ``eps``-DP; for ``c`` reported positives compose ``c`` events.
    zCDP from the pure-DP conversion.
    """

    epsilon: float

    def __post_init__(self) -> None:
        value = check_positive(self.epsilon, "epsilon", "SparseVectorEvent")
        object.__setattr__(self, "epsilon", value)

    def _pure_epsilon(self) -> float | None:
        return self.epsilon


# --- black boxes ----------------------------------------------------------------------


@register
@dataclass(frozen=True, slots=True)
class PureEvent(Event):
    """A mechanism known only to be ``epsilon``-DP (``epsilon`` >= 0).

    zCDP from the tight conversion ``eps tanh(eps / 2)`` (Steinke 2024, Thm 5).
    """

    epsilon: float

    def __post_init__(self) -> None:
        value = check_nonnegative(self.epsilon, "epsilon", "PureEvent")
        object.__setattr__(self, "epsilon", value)

    def _pure_epsilon(self) -> float | None:
        return self.epsilon


@register
@dataclass(frozen=True, slots=True)
class ApproxEvent(Event):
    """A mechanism known only to be (``epsilon``, ``delta``)-DP.

    ``epsilon`` >= 0 and ``delta`` in [0, 1). With ``delta == 0`` this is pure DP; with
    ``delta > 0`` there is no pure-DP, zCDP or RDP guarantee.
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        owner = "ApproxEvent"
        object.__setattr__(self, "epsilon", check_nonnegative(self.epsilon, "epsilon", owner))
        object.__setattr__(self, "delta", check_delta(self.delta, owner))

    def _pure_epsilon(self) -> float | None:
        return self.epsilon if self.delta == 0.0 else None


@register
@dataclass(frozen=True, slots=True)
class ZCDPEvent(Event):
    """A mechanism known only to be ``rho``-zCDP (``rho`` >= 0; Bun & Steinke 2016)."""

    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_nonnegative(self.rho, "rho", "ZCDPEvent"))

    def _zcdp_rho(self) -> float | None:
        return self.rho
