"""RDP filter and odometer on a fixed grid of orders.

:class:`RDPFilter` accepts a step only if, at each order ``a`` of the grid, ``sum
eps_t(a) <= B(a)``, which gives ``(a, B(a))``-RDP at every order under fully adaptive
composition (Feldman & Zrnic 2021, "Individual privacy accounting via a Renyi filter",
NeurIPS). A step must fit at *every* order, so at each order the charges never exceed
the budget (refusals are themselves a function of the past). Events are charged their
tight pure-DP RDP curve (Steinke 2024, Thm 4) or ``a * rho``, whichever is smaller.
The grid may end with the order ``inf`` (the max-divergence): there a pure event is
charged its epsilon and a zCDP-only event ``inf`` (no bound), which no budget covers.

:class:`RDPOdometer` is a ledger of charges, not a guarantee at a data-dependent
stopping time (see :mod:`dpkit.accounting.filters._base`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

from dpkit.accounting._math.rounding import fraction_up
from dpkit.accounting.events import (
    ComposedEvent,
    Event,
    NoOpEvent,
    RepeatedEvent,
    pure_epsilon,
    zcdp_rho,
)
from dpkit.accounting.filters._base import (
    Cost,
    PrivacyFilter,
    PrivacyOdometer,
    _check_budget,
    _Kind,
    _mismatch,
    _rounded,
    _unsupported,
)
from dpkit.accounting.guarantees import DEFAULT_ORDERS, RDP, ZCDP, PureDP
from dpkit.errors import InvalidParameter

__all__ = ["RDPFilter", "RDPOdometer"]


def _to_rdp(guarantee: PureDP | ZCDP, orders: tuple[float, ...]) -> tuple[float, ...]:
    """``guarantee.to_rdp(orders)``, with an order ``inf`` (last) allowed.

    At order inf: eps for eps-DP (``D_inf <= eps``), and for rho-zCDP 0 if ``rho = 0``
    (the two laws are equal), else ``inf`` (no bound on ``D_inf`` follows).
    """
    if not orders or not math.isinf(orders[-1]):
        return guarantee.to_rdp(orders).epsilons
    finite = orders[:-1]
    head = guarantee.to_rdp(finite).epsilons if finite else ()
    if isinstance(guarantee, PureDP):
        tail = guarantee.epsilon
    else:
        tail = 0.0 if guarantee.rho == 0.0 else math.inf
    return (*head, tail)


def _event_rdp(event: Event, orders: tuple[float, ...]) -> tuple[float, ...] | None:
    """Per-order RDP of an event from its pure-DP and zCDP costs (summed over a tree)."""
    if isinstance(event, ComposedEvent):
        total = tuple(0.0 for _ in orders)
        for part in event.events:
            curve = _event_rdp(part, orders)
            if curve is None:
                return None
            total = tuple(
                fraction_up(Fraction(a) + Fraction(b)) for a, b in zip(total, curve, strict=True)
            )
        return total
    if isinstance(event, RepeatedEvent):
        curve = _event_rdp(event.event, orders)
        if curve is None:
            return None
        return tuple(fraction_up(event.count * Fraction(e)) for e in curve)
    if isinstance(event, NoOpEvent):
        return tuple(0.0 for _ in orders)
    candidates = []
    epsilon = pure_epsilon(event)
    if epsilon is not None:  # tight pure-to-RDP (Steinke 2024, Thm 4)
        candidates.append(_to_rdp(PureDP(epsilon), orders))
    rho = zcdp_rho(event)
    if rho is not None:  # (a, a rho)-RDP by definition of zCDP
        candidates.append(_to_rdp(ZCDP(rho), orders))
    if not candidates:
        return None
    # Both are valid bounds; the smaller one at each order is too.
    return tuple(min(values) for values in zip(*candidates, strict=True))


class _RDPKind(_Kind[RDP]):
    name = "RDP"

    def __init__(self, orders: tuple[float, ...]) -> None:
        self.orders = orders

    def cost(self, spend: object, owner: str) -> Cost:
        if isinstance(spend, RDP):
            if spend.orders != self.orders:
                raise InvalidParameter(
                    f"{owner}: the RDP spend is on a different order grid than the ledger; "
                    "compute it on the ledger's orders."
                )
            curve = spend.epsilons
        elif isinstance(spend, PureDP | ZCDP):
            curve = _to_rdp(spend, self.orders)
        elif isinstance(spend, Event):
            found = _event_rdp(spend, self.orders)
            if found is None:
                raise _unsupported(spend, owner, "pure-DP or zCDP (hence RDP)")
            curve = found
        else:
            raise _mismatch(
                spend, owner, "an RDP on the ledger's orders, a ZCDP, a PureDP or an Event"
            )
        if any(math.isinf(e) for e in curve):
            raise InvalidParameter(
                f"{owner}: the spend has an infinite RDP epsilon at some order (at order "
                "inf, any event without a pure-DP epsilon), which no budget covers; track "
                "only the orders where it is finite. Nothing was spent."
            )
        return tuple(Fraction(e) for e in curve)

    def to_guarantee(self, values: Cost, *, round_up: bool) -> RDP:
        return RDP(self.orders, tuple(_rounded(v, round_up) for v in values))

    def zero(self) -> Cost:
        return tuple(Fraction(0) for _ in self.orders)


class RDPFilter(PrivacyFilter[RDP]):
    """Filter for RDP on a fixed grid of orders: a step must fit at every order.

    Parameters
    ----------
    budget:
        :class:`RDP` with finite epsilons: the budget ``B(a)`` at each order ``a``.

    Privacy
    -------
    At each order ``a`` the charges never sum past ``B(a)``, so the interaction is
    ``(a, B(a))``-RDP at every order of the grid under fully adaptive composition
    (Feldman & Zrnic 2021). Convert the budget once at the end:
    ``budget.to_approx(delta)``. Events are charged their tight pure-DP RDP curve
    (Steinke 2024, Thm 4) or ``a * rho``, whichever is smaller; an accountant's exact
    curve (e.g. a subsampled Gaussian) can be spent as an :class:`RDP` on the same orders.
    An order ``inf`` on the grid is a pure-DP filter: the epsilons charged there (each
    step's max-divergence bound) never sum past ``B(inf)``, which is ``B(inf)``-DP under
    fully adaptive composition (Rogers, Roth, Ullman & Vadhan 2016, basic composition
    for adaptively chosen parameters, as :class:`~dpkit.accounting.PureDPFilter`).

    Examples
    --------
    >>> from dpkit.accounting import GaussianEvent, ZCDP
    >>> from dpkit.accounting.filters import RDPFilter
    >>> budget = RDPFilter(ZCDP(1.0).to_rdp(orders=(2.0, 8.0, 32.0)))
    >>> budget.spend(GaussianEvent(noise_multiplier=1.0)).epsilons
    (1.0, 4.0, 16.0)
    """

    def __init__(self, budget: RDP) -> None:
        budget = _check_budget(budget, RDP, "RDPFilter")
        if any(math.isinf(e) for e in budget.epsilons):
            raise InvalidParameter.for_parameter(
                "budget", "RDPFilter", "an RDP with a finite epsilon at every order", budget
            )
        super().__init__(_RDPKind(budget.orders), budget)


class RDPOdometer(PrivacyOdometer[RDP]):
    """Running total of RDP charges at fixed orders (a ledger; see the module docstring).

    Parameters
    ----------
    orders:
        The order grid (default ``dpkit.accounting.DEFAULT_ORDERS``).
    """

    def __init__(self, orders: Iterable[float] = DEFAULT_ORDERS) -> None:
        grid = RDP._check_orders(orders, "RDPOdometer", allow_inf=True)
        super().__init__(_RDPKind(grid))
