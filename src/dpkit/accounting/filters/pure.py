"""Pure-DP filter and odometer: basic composition of epsilons.

:class:`PureDPFilter` accepts step ``t`` only if ``sum eps_t <= eps_g``, which gives
``eps_g``-DP under fully adaptive composition (Rogers, Roth, Ullman & Vadhan 2016,
basic composition for adaptively chosen parameters). The privacy loss of each step is
bounded by its own ``eps_t`` with probability one, so the running sum is also a valid
odometer (:class:`PureDPOdometer`).
"""

from __future__ import annotations

import numbers
from fractions import Fraction

from dpkit.accounting.events import Event, pure_epsilon
from dpkit.accounting.filters._base import (
    Cost,
    PrivacyFilter,
    PrivacyOdometer,
    _check_budget,
    _Kind,
    _mismatch,
    _number,
    _rounded,
    _unsupported,
)
from dpkit.accounting.guarantees import ApproxDP, PureDP

__all__ = ["PureDPFilter", "PureDPOdometer"]


class _PureKind(_Kind[PureDP]):
    name = "pure DP"
    _expected = "a PureDP, an ApproxDP with delta 0, an Event with a pure-DP cost or an epsilon"

    def cost(self, spend: object, owner: str) -> Cost:
        if isinstance(spend, PureDP):
            return (Fraction(spend.epsilon),)
        if isinstance(spend, ApproxDP) and spend.delta == 0.0:
            return (Fraction(spend.epsilon),)
        if isinstance(spend, Event):
            epsilon = pure_epsilon(spend)
            if epsilon is None:
                raise _unsupported(spend, owner, "pure-DP")
            return (Fraction(epsilon),)
        if isinstance(spend, numbers.Real) and not isinstance(spend, bool):
            return (_number(spend, owner),)
        raise _mismatch(spend, owner, self._expected)

    def to_guarantee(self, values: Cost, *, round_up: bool) -> PureDP:
        return PureDP(_rounded(values[0], round_up))

    def zero(self) -> Cost:
        return (Fraction(0),)


class PureDPFilter(PrivacyFilter[PureDP]):
    """Filter for pure DP: accepts step ``t`` only if ``sum_{s<=t} eps_s <= eps_g``.

    Parameters
    ----------
    budget:
        :class:`PureDP` (``eps_g``).

    Privacy
    -------
    The interaction is ``eps_g``-DP under fully adaptive choice of mechanisms and
    epsilons (Rogers, Roth, Ullman & Vadhan 2016; basic composition).

    Examples
    --------
    >>> from dpkit.accounting import LaplaceEvent, PureDP
    >>> from dpkit.accounting.filters import PureDPFilter
    >>> budget = PureDPFilter(PureDP(1.0))
    >>> budget.spend(LaplaceEvent(noise_multiplier=4.0))  # a 0.25-DP Laplace release
    PureDP(epsilon=0.25)
    >>> budget.remaining
    PureDP(epsilon=0.75)
    """

    def __init__(self, budget: PureDP) -> None:
        super().__init__(_PureKind(), _check_budget(budget, PureDP, "PureDPFilter"))


class PureDPOdometer(PrivacyOdometer[PureDP]):
    """Running pure-DP loss: after any adaptively chosen steps, the interaction so far is
    ``spent.epsilon``-DP (each step's privacy loss is at most its epsilon, surely).

    Examples
    --------
    >>> from dpkit.accounting import PureDP
    >>> from dpkit.accounting.filters import PureDPOdometer
    >>> odometer = PureDPOdometer()
    >>> _ = odometer.spend(PureDP(0.25)); _ = odometer.spend(0.5)
    >>> odometer.spent
    PureDP(epsilon=0.75)
    """

    def __init__(self) -> None:
        super().__init__(_PureKind())
