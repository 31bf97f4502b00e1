"""What the three wrappers share: the base mechanism, the loss, and how a run ends badly.

The base mechanism is a dpkit :class:`~dpkit.mechanisms.Mechanism` (run as
``mechanism.release(data, rng=rng).value``) or any callable ``mechanism(data, rng)``
declared with its guarantee. The loss is a callable ``loss(output, data) -> float``.

A run that cannot return a successful output never returns quietly: it raises a
:class:`ReleaseFailed` (:class:`AttemptsExhausted` at the attempt cap,
:class:`MechanismFailed` when the mechanism, loss or fallback raised). The exception
is an output of the wrapper, so it carries the wrapper's event and guarantee, to be
charged like a release; it never reports how many attempts ran (that is private).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

from dpkit import _validation as check
from dpkit.accounting.events import Event
from dpkit.accounting.guarantees import ApproxDP, PureDP
from dpkit.errors import DPError, InvalidParameter
from dpkit.mechanisms._base import Mechanism
from dpkit.random import Random

__all__ = ["AttemptsExhausted", "MechanismFailed", "ReleaseFailed"]

BaseFunction = Callable[[Any, Random], Any]
Loss = Callable[[Any, Any], Any]


class ReleaseFailed(DPError):
    """A never-fail wrapper stopped without a successful output.

    The exception is the wrapper's output on this run: ``event`` and
    ``guarantee`` are those of the whole wrapper and must be charged.
    """

    def __init__(self, message: str, *, event: Event, guarantee: PureDP | ApproxDP) -> None:
        super().__init__(message)
        self.event = event
        self.guarantee = guarantee


class AttemptsExhausted(ReleaseFailed):
    """Every attempt up to the cap was rejected: ``alpha`` or ``beta`` is probably wrong.

    With a valid ``(alpha, beta)`` this happens with probability at most ``beta^T``.
    """


class MechanismFailed(ReleaseFailed):
    """The base mechanism, the loss or the fallback raised (chained as ``__cause__``)."""


def as_base(
    mechanism: object, guarantee: object, owner: str
) -> tuple[BaseFunction, PureDP | ApproxDP]:
    """The base mechanism as ``function(data, rng)`` and its guarantee (validated)."""
    if isinstance(mechanism, Mechanism):
        own = mechanism.guarantee
        if guarantee is not None and isinstance(own, PureDP | ApproxDP) and guarantee != own:
            # A dpkit mechanism states its own (epsilon, delta); a different declaration
            # is a mistake (and an understated one would be a privacy bug).
            raise InvalidParameter(
                f"{owner}: the mechanism's guarantee is {own!r}; do not declare "
                f"guarantee={guarantee!r} for it (guarantee= is for callables, or to state "
                "an (epsilon, delta) guarantee of a zCDP mechanism)."
            )
        if guarantee is not None and not isinstance(own, PureDP | ApproxDP):
            _check_conversion(own, guarantee, owner)
        declared = own if guarantee is None else guarantee
        base = mechanism

        def function(data: Any, rng: Random) -> Any:
            return base.release(data, rng=rng).value

    elif callable(mechanism):
        if guarantee is None:
            raise InvalidParameter(
                f"{owner}: a callable mechanism must be declared with its guarantee "
                "(guarantee=dp.PureDP(...) or dp.ApproxDP(...)): what one call costs, "
                "including any exception it raises."
            )
        declared = guarantee
        function = mechanism
    else:
        raise InvalidParameter.for_parameter(
            "mechanism", owner, "a dpkit Mechanism or a callable mechanism(data, rng)", mechanism
        )
    if not isinstance(declared, PureDP | ApproxDP):
        raise InvalidParameter.for_parameter(
            "guarantee",
            owner,
            "a dp.PureDP or dp.ApproxDP guarantee (convert zCDP with .to_approx(delta))",
            declared,
        )
    return function, declared


def _check_conversion(own: object, declared: object, owner: str) -> None:
    """A declared (epsilon, delta) for a mechanism stated in another form (zCDP) must be
    implied by it: ``declared.epsilon >= own.to_approx(declared.delta).epsilon``."""
    to_approx = getattr(own, "to_approx", None)
    if (
        not isinstance(declared, ApproxDP)
        or declared.delta <= 0.0
        or to_approx is None
        or declared.epsilon < to_approx(declared.delta).epsilon
    ):
        raise InvalidParameter(
            f"{owner}: the mechanism's guarantee is {own!r}; guarantee={declared!r} does "
            "not follow from it. Declare own.to_approx(delta) (or something weaker)."
        )


def check_callable(value: object, name: str, owner: str, expected: str) -> Any:
    if not callable(value):
        raise InvalidParameter.for_parameter(name, owner, expected, value)
    return value


def check_alpha(value: object, owner: str) -> float:
    """The target loss ``alpha``: a finite float >= 0."""
    return check.check_nonnegative(value, "alpha", owner)


def check_beta(value: object, owner: str) -> float:
    return check.check_probability(value, "failure_probability", owner, open_high=True)


def evaluate_loss(loss: Loss, output: Any, data: Any, owner: str) -> float:
    """``loss(output, data)`` as a finite float.

    A loss that is not a finite real number breaks the contract; the message never shows
    the value (it depends on the data).
    """
    value = loss(output, data)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidParameter(
            f"{owner}: the loss must return a real number; got {type(value).__name__}."
        )
    result = float(value)
    if not math.isfinite(result):
        raise InvalidParameter(f"{owner}: the loss returned NaN or an infinite value.")
    return result
