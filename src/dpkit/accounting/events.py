"""Events: what a mechanism ran, described for accountants.

A mechanism returns its output together with an event: the parameters that its privacy
analysis needs, and nothing else. Accountants consume events and turn them into the
tightest guarantee they can prove; a ledger is a composed event and its serialised form.
:func:`pure_epsilon` and :func:`zcdp_rho` state the basic cost of any event, so that a
release can say what it spent.

Stability rule
--------------
Events are a persistent vocabulary (ledgers store them), so:

1. An event class is never removed, renamed, or changed in meaning.
2. New parameters of an existing class are optional, with a default that keeps the old
   meaning.
3. A new or different analysis gets a new class, never a new reading of an old one.
4. An accountant that cannot analyse an event says so (``supports(event) is False``)
   instead of guessing; here :func:`pure_epsilon` and :func:`zcdp_rho` return ``None``
   for an event with no guarantee of that kind.

Neighbouring relation
---------------------
Sensitivities in events are computed by the caller for the neighbouring relation of its
privacy unit (add/remove one person, or replace one person's data); the guarantee of
an additive-noise event holds for that same relation. The analyses stated here do not
depend on which relation it is. Events whose analysis does depend on it (subsampling,
for instance) will carry the relation explicitly.

Serialisation
-------------
``event.to_dict()`` gives a JSON-safe dict ``{"type": <class name>, <field>: <value>, ...}``
with nested events as dicts; :func:`event_from_dict` rebuilds the event (validated).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import Any, TypeVar

from dpkit._validation import (
    check_count,
    check_delta,
    check_nonnegative,
    check_positive,
)
from dpkit.accounting._math.conversions import pure_to_zcdp_rho
from dpkit.accounting._math.rounding import div_up, fraction_up, mul_up, sum_up
from dpkit.errors import InvalidParameter

__all__ = [
    "ApproxEvent",
    "ComposedEvent",
    "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent",
    "Event",
    "ExponentialMechanismEvent",
    "GaussianEvent",
    "LaplaceEvent",
    "NoOpEvent",
    "PermuteAndFlipEvent",
    "PureEvent",
    "RandomizedResponseEvent",
    "RepeatedEvent",
    "ReportNoisyMaxEvent",
    "SparseVectorEvent",
    "TruncatedLaplaceEvent",
    "ZCDPEvent",
    "event_from_dict",
    "pure_epsilon",
    "zcdp_rho",
]

_REGISTRY: dict[str, type[Event]] = {}
_E = TypeVar("_E", bound="type[Event]")


def _register(cls: _E) -> _E:
    # Applied after @dataclass: slots=True builds a new class object.
    _REGISTRY[cls.__name__] = cls
    return cls


def _half_squared_ratio(numerator: float, denominator: float) -> float:
    """``numerator^2 / (2 denominator^2)`` exactly, rounded up."""
    return fraction_up(Fraction(numerator) ** 2 / (2 * Fraction(denominator) ** 2))


class Event:
    """Base class of privacy events. Abstract: instantiate a subclass."""

    __slots__ = ()

    def __init__(self) -> None:  # dataclass subclasses generate their own
        raise TypeError("Event is abstract; use one of its subclasses.")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict that :func:`event_from_dict` turns back into this event."""
        out: dict[str, Any] = {"type": type(self).__name__}
        for f in fields(self):  # type: ignore[arg-type]
            out[f.name] = _encode(getattr(self, f.name))
        return out

    # The two hooks below state the event's basic guarantee; composite events combine
    # their children's. ``None`` means "no guarantee of this kind".
    def _pure_epsilon(self) -> float | None:
        return None

    def _zcdp_rho(self) -> float | None:
        epsilon = self._pure_epsilon()
        return None if epsilon is None else pure_to_zcdp_rho(epsilon)


def _encode(value: object) -> object:
    if isinstance(value, Event):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


# --- additive noise -------------------------------------------------------------------


@_register
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


@_register
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
        return _half_squared_ratio(1.0, self.noise_multiplier)


@_register
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


@_register
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
        return _half_squared_ratio(self.sensitivity, self.sigma)


@_register
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


@_register
@dataclass(frozen=True, slots=True)
class RandomizedResponseEvent(Event):
    """k-ary randomized response with privacy parameter ``epsilon``.

    Each person's value in ``{1, ..., categories}`` is reported truthfully with
    probability ``e^eps / (e^eps + k - 1)`` and as each other category with probability
    ``1 / (e^eps + k - 1)`` (Warner 1965; Kairouz, Oh & Viswanath 2016). Under the
    relation "replace one person's value" it is ``eps``-DP; zCDP from the tight pure-DP
    conversion (attained by k = 2). ``categories`` is an int >= 2.
    """

    epsilon: float
    categories: int

    def __post_init__(self) -> None:
        owner = "RandomizedResponseEvent"
        object.__setattr__(self, "epsilon", check_positive(self.epsilon, "epsilon", owner))
        object.__setattr__(
            self, "categories", check_count(self.categories, "categories", owner, minimum=2)
        )

    def _pure_epsilon(self) -> float | None:
        return self.epsilon


@_register
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
        bounded_range = _half_squared_ratio(self.epsilon, 2.0)  # eps^2 / 8
        return min(bounded_range, pure_to_zcdp_rho(self.epsilon))


@_register
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


@_register
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


@_register
@dataclass(frozen=True, slots=True)
class SparseVectorEvent(Event):
    """One run of AboveThreshold (the sparse vector technique), ``epsilon``-DP.

    Perturbs the threshold with Laplace noise of scale ``2 D / eps`` and each query of
    sensitivity ``D`` with scale ``4 D / eps``, and halts after the first query reported
    above the threshold (Dwork & Roth 2014, Alg. 1 and Thm 3.23; Lyu, Su & Li 2017,
    Alg. 1). The whole run, however many queries it answers "below", is ``eps``-DP; for
    ``c`` reported positives compose ``c`` events. zCDP from the pure-DP conversion.
    """

    epsilon: float

    def __post_init__(self) -> None:
        value = check_positive(self.epsilon, "epsilon", "SparseVectorEvent")
        object.__setattr__(self, "epsilon", value)

    def _pure_epsilon(self) -> float | None:
        return self.epsilon


# --- black boxes ----------------------------------------------------------------------


@_register
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


@_register
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


@_register
@dataclass(frozen=True, slots=True)
class ZCDPEvent(Event):
    """A mechanism known only to be ``rho``-zCDP (``rho`` >= 0; Bun & Steinke 2016)."""

    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_nonnegative(self.rho, "rho", "ZCDPEvent"))

    def _zcdp_rho(self) -> float | None:
        return self.rho


# --- structure ------------------------------------------------------------------------


@_register
@dataclass(frozen=True, slots=True)
class NoOpEvent(Event):
    """Nothing private ran (the output does not depend on the data): 0-DP, 0-zCDP."""

    def _pure_epsilon(self) -> float | None:
        return 0.0

    def _zcdp_rho(self) -> float | None:
        return 0.0


@_register
@dataclass(frozen=True, slots=True)
class ComposedEvent(Event):
    """The events in ``events`` ran one after another, each possibly chosen adaptively.

    Adaptive composition: pure epsilons add (Dwork et al. 2006), zCDP rhos add (Bun &
    Steinke 2016, Lemma 2.3); the composition has a guarantee of a kind only if every
    part does. An empty composition is a no-op.
    """

    events: tuple[Event, ...]

    def __post_init__(self) -> None:
        try:
            events = tuple(self.events)
        except TypeError:
            raise InvalidParameter.for_parameter(
                "events", "ComposedEvent", "a sequence of Event", self.events
            ) from None
        for event in events:
            if not isinstance(event, Event):
                raise InvalidParameter.for_parameter(
                    "events", "ComposedEvent", "a sequence of Event", event
                )
        object.__setattr__(self, "events", events)

    def _combine(self, part: Callable[[Event], float | None]) -> float | None:
        values = [part(event) for event in self.events]
        if any(v is None for v in values):
            return None
        return sum_up(v for v in values if v is not None)

    def _pure_epsilon(self) -> float | None:
        return self._combine(lambda e: e._pure_epsilon())

    def _zcdp_rho(self) -> float | None:
        return self._combine(lambda e: e._zcdp_rho())


@_register
@dataclass(frozen=True, slots=True)
class RepeatedEvent(Event):
    """``event`` ran ``count`` times (an int >= 1), possibly adaptively.

    Same as a :class:`ComposedEvent` of ``count`` copies: epsilons and rhos multiply by
    ``count``.
    """

    event: Event
    count: int

    def __post_init__(self) -> None:
        owner = "RepeatedEvent"
        if not isinstance(self.event, Event):
            raise InvalidParameter.for_parameter("event", owner, "an Event", self.event)
        object.__setattr__(self, "count", check_count(self.count, "count", owner))

    def _pure_epsilon(self) -> float | None:
        epsilon = self.event._pure_epsilon()
        return None if epsilon is None else mul_up(self.count, epsilon)

    def _zcdp_rho(self) -> float | None:
        rho = self.event._zcdp_rho()
        return None if rho is None else mul_up(self.count, rho)


# --- functions ------------------------------------------------------------------------


def _check_event(event: object, owner: str) -> Event:
    if not isinstance(event, Event):
        raise InvalidParameter.for_parameter("event", owner, "an Event", event)
    return event


def pure_epsilon(event: Event) -> float | None:
    """The pure-DP epsilon the event guarantees, or ``None`` if it has no pure guarantee.

    Composed and repeated events add up their parts' epsilons (exactly, rounded up).
    """
    return _check_event(event, "pure_epsilon")._pure_epsilon()


def zcdp_rho(event: Event) -> float | None:
    """The zCDP rho the event guarantees, or ``None`` if it has no zCDP guarantee.

    Pure-DP events use the tight conversion ``eps tanh(eps/2)`` per event before adding,
    which is never worse than converting the composed epsilon.
    """
    return _check_event(event, "zcdp_rho")._zcdp_rho()


def _decode(value: object) -> object:
    if isinstance(value, Mapping):
        return event_from_dict(value)
    if isinstance(value, list | tuple):
        return tuple(_decode(v) for v in value)
    return value


def event_from_dict(data: Mapping[str, Any]) -> Event:
    """Rebuild (and validate) an event from :meth:`Event.to_dict` output.

    Raises :class:`~dpkit.errors.InvalidParameter` for an unknown ``type`` or a key the
    class does not have (for example, a ledger written by a newer dpkit).
    """
    owner = "event_from_dict"
    if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
        raise InvalidParameter.for_parameter(
            "data", owner, "a mapping with a string 'type' key", data
        )
    name = data["type"]
    cls = _REGISTRY.get(name)
    if cls is None:
        known = ", ".join(sorted(_REGISTRY))
        raise InvalidParameter(f"{owner}: unknown event type {name!r}. Known types: {known}.")
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    extra = sorted(set(data) - names - {"type"})
    if extra:
        raise InvalidParameter(f"{owner}: {name} has no parameter(s) {extra}.")
    kwargs = {key: _decode(value) for key, value in data.items() if key != "type"}
    try:
        return cls(**kwargs)
    except TypeError as err:  # a required parameter is missing
        raise InvalidParameter(f"{owner}: cannot build {name}: {err}.") from None
