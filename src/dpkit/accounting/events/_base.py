"""The event base class, its registry and (de)serialisation; see :mod:`dpkit.accounting.events`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from fractions import Fraction
from typing import Any, TypeVar

from dpkit.accounting._math.conversions import pure_to_zcdp_rho
from dpkit.accounting._math.rounding import fraction_up
from dpkit.errors import InvalidParameter

__all__ = [
    "Event",
    "event_from_dict",
    "half_squared_ratio",
    "pure_epsilon",
    "register",
    "zcdp_rho",
]

_REGISTRY: dict[str, type[Event]] = {}
_E = TypeVar("_E", bound="type[Event]")


def register(cls: _E) -> _E:
    # Applied after @dataclass: slots=True builds a new class object.
    _REGISTRY[cls.__name__] = cls
    return cls


def half_squared_ratio(numerator: float, denominator: float) -> float:
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
