"""Structural events: no-op, composition, repetition, repeat-and-select."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpkit._validation import (
    check_count,
    check_nonnegative,
    check_positive,
)
from dpkit.accounting._math.rounding import fraction_up, mul_up, sum_up
from dpkit.accounting.events._base import Event, register
from dpkit.errors import InvalidParameter

# --- structure ------------------------------------------------------------------------


@register
@dataclass(frozen=True, slots=True)
class NoOpEvent(Event):
    """Nothing private ran (the output does not depend on the data): 0-DP, 0-zCDP."""

    def _pure_epsilon(self) -> float | None:
        return 0.0

    def _zcdp_rho(self) -> float | None:
        return 0.0


@register
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


@register
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


#: How ``shape = math.inf`` (Poisson repetitions) is written by :meth:`RepeatAndSelectEvent.to_dict`
#: (JSON has no infinity); the constructor accepts it back.
_INF_TOKEN = "inf"


@register
@dataclass(frozen=True, slots=True)
class RepeatAndSelectEvent(Event):
    """``event`` ran a random number K of times and only the best output was released.

    The analogue of dp_accounting's ``RepeatAndSelectDpEvent`` (Papernot & Steinke 2022,
    "Hyperparameter tuning with Renyi DP", arXiv 2110.03620). K is drawn independently of
    the data, every run uses fresh randomness, the outputs are ranked by a score with a
    data-independent tie-break, and only the best one is released (nothing about the other
    runs, not even K, beyond what the best output reveals). A fixed K (grid search) is *not*
    this event: use :class:`RepeatedEvent` (composition) for that.

    ``mean`` is E[K], a finite float >= 1 (as in dp_accounting). ``shape`` selects the law
    of K:

    * ``0 <= shape < inf``: the truncated negative binomial with shape eta = ``shape`` on
      {1, 2, ...} (PS22 Definition 1), whose parameter gamma is the one that gives mean
      ``mean``; ``shape=0`` is the logarithmic distribution and ``shape=1`` the geometric
      one (gamma = 1/mean: LT19 Algorithm 2 with stop probability gamma);
    * ``shape = math.inf``: Poisson with mean ``mean`` (K = 0 releases a fixed default).

    Guarantees: RDP via PS22 Theorem 2 (finite shape) or Theorem 6 (Poisson), see
    :class:`~dpkit.accounting.RDPAccountant`; pure DP ``(2 + shape) * epsilon`` via PS22
    Corollary 3 when ``event`` is epsilon-DP and the shape is finite (shape 1 gives
    LT19 Theorem 3.2's 3 epsilon). The Poisson law has no pure-DP guarantee here.

    Serialisation writes an infinite ``shape`` as the string ``"inf"``.
    """

    event: Event
    mean: float
    shape: float

    def __post_init__(self) -> None:
        owner = "RepeatAndSelectEvent"
        if not isinstance(self.event, Event):
            raise InvalidParameter.for_parameter("event", owner, "an Event", self.event)
        mean = check_positive(self.mean, "mean", owner)
        if mean < 1:
            raise InvalidParameter.for_parameter("mean", owner, "a float in [1, inf)", self.mean)
        shape: object = self.shape
        if isinstance(shape, str) and shape.strip().lower() in {_INF_TOKEN, "infinity"}:
            shape = math.inf
        shape = check_nonnegative(shape, "shape", owner, allow_inf=True)
        object.__setattr__(self, "mean", mean)
        object.__setattr__(self, "shape", shape)

    @property
    def is_poisson(self) -> bool:
        """Whether K is Poisson (``shape`` is infinite)."""
        return math.isinf(self.shape)

    def to_dict(self) -> dict[str, Any]:
        out = Event.to_dict(self)
        if self.is_poisson:
            out["shape"] = _INF_TOKEN
        return out

    def _pure_epsilon(self) -> float | None:
        # PS22 Corollary 3: an epsilon-DP candidate repeated K ~ TNB(eta) times and the best
        # released is (2 + eta) * epsilon-DP (lambda, lambda-hat -> inf in Theorem 2);
        # eta = 1 is LT19 Theorem 3.2's 3 epsilon. No pure bound is proven for Poisson.
        if self.is_poisson:
            return None
        epsilon = self.event._pure_epsilon()
        if epsilon is None:
            return None
        return fraction_up(
            Fraction(2) * Fraction(epsilon) + Fraction(self.shape) * Fraction(epsilon)
        )
