"""Structural events: no-op, composition, repetition."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dpkit._validation import (
    check_count,
)
from dpkit.accounting._math.rounding import mul_up, sum_up
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
