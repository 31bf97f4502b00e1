"""The accountant interface every dpkit accountant shares.

An accountant turns a sequence of events into the tightest guarantee it can prove::

    accountant.compose(event, count=1) -> accountant   # chains
    accountant.supports(event) -> bool
    accountant.get_epsilon(delta) -> float
    accountant.get_delta(epsilon) -> float
    accountant.ledger -> ComposedEvent

Validate, then mutate: :meth:`Accountant.compose` first checks the whole event tree
(``ComposedEvent`` and ``RepeatedEvent`` are walked here; every other event is a
*leaf* that the subclass either supports or not) and only then changes the state, so
a compose that fails leaves the accountant exactly as it was. An unsupported leaf
raises :class:`~dpkit.errors.UnsupportedEvent` naming it. Calls are serialised by a
lock, so an accountant may be shared between threads.

Subclasses write three hooks: ``_supports_leaf(event)``, ``_compose_leaf(event,
count)`` and the two queries ``_epsilon(delta)`` / ``_delta(epsilon)``.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from typing import Self

from dpkit import _validation as check
from dpkit.accounting.events import ComposedEvent, Event, NoOpEvent, RepeatedEvent
from dpkit.errors import InvalidParameter, UnsupportedEvent

__all__ = ["Accountant"]


class Accountant(ABC):
    """Base class of accountants (see the module docstring for the contract)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._events: list[Event] = []

    # ------------------------------------------------------------------ public API

    def supports(self, event: Event) -> bool:
        """Whether every leaf of ``event`` can be analysed by this accountant."""
        return self._first_unsupported(event) is None

    def compose(self, event: Event, *, count: int = 1) -> Self:
        """Add ``count`` runs of ``event`` (validated in full before any change)."""
        owner = f"{type(self).__name__}.compose"
        if not isinstance(event, Event):
            raise InvalidParameter.for_parameter("event", owner, "an Event", event)
        count = check.check_count(count, "count", owner)
        unsupported = self._first_unsupported(event)
        if unsupported is not None:
            raise UnsupportedEvent(
                f"{type(self).__name__} cannot analyse {unsupported!r}"
                + ("" if unsupported is event else f" (inside {type(event).__name__})")
                + "; nothing was composed."
            )
        with self._lock:
            self._compose_tree(event, count)
            self._events.append(event if count == 1 else RepeatedEvent(event, count))
        return self

    def get_epsilon(self, delta: float) -> float:
        """The smallest epsilon this accountant proves at ``delta`` (an upper bound)."""
        delta = check.check_delta(delta, f"{type(self).__name__}.get_epsilon")
        with self._lock:
            return self._epsilon(delta)

    def get_delta(self, epsilon: float) -> float:
        """The smallest delta this accountant proves at ``epsilon`` (an upper bound)."""
        epsilon = check.check_nonnegative(epsilon, "epsilon", f"{type(self).__name__}.get_delta")
        with self._lock:
            return self._delta(epsilon)

    @property
    def ledger(self) -> ComposedEvent:
        """Everything composed so far, as one event."""
        with self._lock:
            return ComposedEvent(tuple(self._events))

    # ------------------------------------------------------------------ the walk

    def _first_unsupported(self, event: Event) -> Event | None:
        if isinstance(event, ComposedEvent):
            for part in event.events:
                found = self._first_unsupported(part)
                if found is not None:
                    return found
            return None
        if isinstance(event, RepeatedEvent):
            return self._first_unsupported(event.event)
        if isinstance(event, NoOpEvent) or self._supports_leaf(event):
            return None
        return event

    def _compose_tree(self, event: Event, count: int) -> None:
        if isinstance(event, ComposedEvent):
            for part in event.events:
                self._compose_tree(part, count)
        elif isinstance(event, RepeatedEvent):
            self._compose_tree(event.event, count * event.count)
        elif not isinstance(event, NoOpEvent):
            self._compose_leaf(event, count)

    # ------------------------------------------------------------------ hooks

    @abstractmethod
    def _supports_leaf(self, event: Event) -> bool:
        """Whether a non-structural event can be analysed."""

    @abstractmethod
    def _compose_leaf(self, event: Event, count: int) -> None:
        """Add ``count`` runs of a supported leaf event (called under the lock)."""

    @abstractmethod
    def _epsilon(self, delta: float) -> float:
        """Epsilon at a validated delta."""

    @abstractmethod
    def _delta(self, epsilon: float) -> float:
        """Delta at a validated epsilon."""
