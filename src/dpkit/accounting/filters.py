"""Privacy filters and odometers: budgets that hold under fully adaptive composition.

In *fully adaptive* composition the analyst picks each next mechanism **and its privacy
parameters** after seeing the previous outputs (Rogers, Roth, Ullman & Vadhan 2016,
"Privacy odometers and filters: pay-as-you-go composition"). Ordinary composition
theorems assume the parameters are fixed in advance; they do not automatically cover
this. Two objects do:

- a **filter** has a budget fixed before the interaction and refuses (raises
  :class:`~dpkit.errors.BudgetExceeded`, spending nothing) any step that would take the
  running total past it. The whole interaction then satisfies the budget.
- an **odometer** has no budget and reports the running total (:attr:`spent`).

What is proven, and what this module implements
-----------------------------------------------
- **Pure DP** (:class:`PureDPFilter`, :class:`PureDPOdometer`): basic composition,
  ``sum eps_t <= eps_g`` gives ``eps_g``-DP (RRUV16). The privacy loss of each step is
  bounded by its own ``eps_t`` with probability one, so the running sum is also a valid
  odometer.
- **Approximate DP** (:class:`ApproxDPFilter`, :class:`ApproxDPOdometer`): basic
  composition, ``sum eps_t <= eps_g`` and ``sum delta_t <= delta_g`` gives
  ``(eps_g, delta_g)``-DP (RRUV16 prove basic composition for adaptively chosen
  parameters). It is loose for many steps; for those, charge pure-DP, Gaussian and
  other zCDP steps to a :class:`ZCDPFilter` and convert once at the end.
- **zCDP** (:class:`ZCDPFilter`, :class:`ZCDPOdometer`): ``sum rho_t <= rho_g`` gives
  ``rho_g``-zCDP. This is the Renyi filter of Feldman & Zrnic 2021 ("Individual privacy
  accounting via a Renyi filter", NeurIPS) applied at every order at once, since
  ``rho``-zCDP is ``(a, a rho)``-RDP for all ``a > 1``; Whitehouse, Ramdas, Rogers & Wu
  2022 also give zCDP and approximate-zCDP filters. :meth:`ZCDPFilter.from_approx` sets
  ``rho_g`` from an (eps, delta) target with the conversion of Canonne, Kamath & Steinke
  2020 (Cor. 13), applied once to the budget.
- **RDP at fixed orders** (:class:`RDPFilter`, :class:`RDPOdometer`): at each order ``a``
  of the grid, ``sum eps_t(a) <= B(a)`` gives ``(a, B(a))``-RDP (Feldman & Zrnic 2021).
  A step is accepted only if it fits at *every* order, so at each order the charges
  never exceed the budget (refusals are themselves a function of the past).

Not implemented, on purpose
---------------------------
- **The advanced-composition-style (eps, delta) filter** of Whitehouse et al. 2022
  (rate ``sqrt(2 log(1/delta) sum eps_t^2) + sum eps_t^2 / 2``). Its exact statement
  (constants, and how delta splits) is not verified in our sources, so dpkit does not
  ship it; :class:`ZCDPFilter` on pure-DP steps achieves the same asymptotics with a
  proven statement.
- **Mixing definitions in one filter by "reordering"** (compose all zCDP steps, convert,
  then add (eps, delta) steps). Tight for sequential composition, but whether it is
  valid for fully adaptive filters is an open problem ("Open problem(s): how generic can
  composition results be?", differentialprivacy.org 2023). Each filter here charges every
  step in its own single definition, and converts only the final budget.
- **PLD-based filters**: PLD composition is proven for (adaptive) sequential
  composition only; use PLD accountants when parameters are fixed in advance.
- **(eps, delta) statements from zCDP/RDP odometers.** An odometer's reading is the
  running total of charges. For pure and approximate DP (basic composition) that total
  is a valid bound at any time. For zCDP and RDP a bound that holds at a data-dependent
  stopping time needs more than the sum (RRUV16 show odometers are strictly weaker than
  filters; Whitehouse et al. 2022 and Lecuyer 2021 construct them): to get a guarantee,
  fix a budget in advance and use a filter.

Ledger arithmetic
-----------------
Charges are added exactly as :class:`fractions.Fraction` (the floats given are exact
rationals). :attr:`spent` reports the total rounded up, :attr:`remaining` reports
``budget - spent`` rounded down, so "never overspent" is exact, not approximate. A
filter's ``spend`` checks and records under one lock: concurrent spends from many
threads never overspend, and a refused spend records nothing.

Charges accepted by ``spend``: a guarantee of the filter's kind or one that converts to
it (a :class:`PureDP` in a zCDP filter is charged the tight ``eps tanh(eps/2)``), or an
event (its cost via :func:`pure_epsilon` / :func:`zcdp_rho`, walking composed events),
or, for pure-DP and zCDP ledgers, a plain number in the ledger's own unit.
"""

from __future__ import annotations

import math
import numbers
import threading
from collections.abc import Iterable
from fractions import Fraction
from typing import Generic, TypeVar

from dpkit import _validation as check
from dpkit.accounting._math import conversions
from dpkit.accounting._math.rounding import fraction_down, fraction_up
from dpkit.accounting.events import (
    ApproxEvent,
    ComposedEvent,
    Event,
    NoOpEvent,
    RepeatedEvent,
    TruncatedLaplaceEvent,
    pure_epsilon,
    zcdp_rho,
)
from dpkit.accounting.guarantees import DEFAULT_ORDERS, RDP, ZCDP, ApproxDP, Guarantee, PureDP
from dpkit.errors import BudgetExceeded, InvalidParameter, UnsupportedEvent

__all__ = [
    "ApproxDPFilter",
    "ApproxDPOdometer",
    "PrivacyFilter",
    "PrivacyOdometer",
    "PureDPFilter",
    "PureDPOdometer",
    "RDPFilter",
    "RDPOdometer",
    "ZCDPFilter",
    "ZCDPOdometer",
    "privacy_filter",
]

G = TypeVar("G", bound=Guarantee)
Cost = tuple[Fraction, ...]
Spend = Guarantee | Event | float


# ----------------------------------------------------------------------------- kinds
# A kind turns a spend into a vector of exact rationals and back into a guarantee.


class _Kind(Generic[G]):
    name: str

    def cost(self, spend: object, owner: str) -> Cost:
        raise NotImplementedError

    def to_guarantee(self, values: Cost, *, round_up: bool) -> G:
        raise NotImplementedError

    def zero(self) -> Cost:
        raise NotImplementedError


def _rounded(value: Fraction, round_up: bool) -> float:
    return fraction_up(value) if round_up else fraction_down(max(value, Fraction(0)))


def _number(spend: object, owner: str) -> Fraction:
    value = check.check_nonnegative(spend, "spend", owner)  # rejects NaN, inf, < 0, bool
    return Fraction(value)


def _mismatch(spend: object, owner: str, expected: str) -> InvalidParameter:
    return InvalidParameter.for_parameter("spend", owner, expected, spend)


def _unsupported(event: Event, owner: str, kind: str) -> UnsupportedEvent:
    return UnsupportedEvent(
        f"{owner}: {event!r} has no {kind} guarantee, so it cannot be charged here; "
        "nothing was spent."
    )


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


def _approx_event_cost(event: Event) -> Cost | None:
    epsilon = pure_epsilon(event)
    if epsilon is not None:
        return (Fraction(epsilon), Fraction(0))
    if isinstance(event, ApproxEvent | TruncatedLaplaceEvent):
        return (Fraction(event.epsilon), Fraction(event.delta))
    if isinstance(event, ComposedEvent):
        total = (Fraction(0), Fraction(0))
        for part in event.events:
            cost = _approx_event_cost(part)
            if cost is None:
                return None
            total = (total[0] + cost[0], total[1] + cost[1])
        return total
    if isinstance(event, RepeatedEvent):
        cost = _approx_event_cost(event.event)
        return None if cost is None else (event.count * cost[0], event.count * cost[1])
    return None


class _ApproxKind(_Kind[ApproxDP]):
    name = "approximate DP"
    _expected = "an ApproxDP, a PureDP, or an Event with a pure or (epsilon, delta) cost"

    def cost(self, spend: object, owner: str) -> Cost:
        if isinstance(spend, ApproxDP):
            return (Fraction(spend.epsilon), Fraction(spend.delta))
        if isinstance(spend, PureDP):
            return (Fraction(spend.epsilon), Fraction(0))
        if isinstance(spend, Event):
            cost = _approx_event_cost(spend)
            if cost is None:
                raise _unsupported(spend, owner, "pure or (epsilon, delta)")
            return cost
        raise _mismatch(spend, owner, self._expected)

    def to_guarantee(self, values: Cost, *, round_up: bool) -> ApproxDP:
        delta = _rounded(values[1], round_up)
        if delta >= 1.0:  # only reachable by an odometer: basic composition gives nothing
            delta = math.nextafter(1.0, 0.0)
        return ApproxDP(_rounded(values[0], round_up), delta)

    def zero(self) -> Cost:
        return (Fraction(0), Fraction(0))


class _ZCDPKind(_Kind[ZCDP]):
    name = "zCDP"
    _expected = "a ZCDP, a PureDP, an Event with a zCDP cost or a rho"

    def cost(self, spend: object, owner: str) -> Cost:
        if isinstance(spend, ZCDP):
            return (Fraction(spend.rho),)
        if isinstance(spend, PureDP) or (isinstance(spend, ApproxDP) and spend.delta == 0.0):
            # Steinke 2024, Thm 5: eps-DP implies eps tanh(eps/2)-zCDP (rounded up).
            return (Fraction(conversions.pure_to_zcdp_rho(spend.epsilon)),)
        if isinstance(spend, Event):
            rho = zcdp_rho(spend)
            if rho is None:
                raise _unsupported(spend, owner, "zCDP")
            return (Fraction(rho),)
        if isinstance(spend, numbers.Real) and not isinstance(spend, bool):
            return (_number(spend, owner),)
        raise _mismatch(spend, owner, self._expected)

    def to_guarantee(self, values: Cost, *, round_up: bool) -> ZCDP:
        return ZCDP(_rounded(values[0], round_up))

    def zero(self) -> Cost:
        return (Fraction(0),)


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
        candidates.append(PureDP(epsilon).to_rdp(orders).epsilons)
    rho = zcdp_rho(event)
    if rho is not None:  # (a, a rho)-RDP by definition of zCDP
        candidates.append(ZCDP(rho).to_rdp(orders).epsilons)
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
            curve = spend.to_rdp(self.orders).epsilons
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
                f"{owner}: the spend has an infinite RDP epsilon at some order, which no "
                "budget covers; track only the orders where it is finite. Nothing was spent."
            )
        return tuple(Fraction(e) for e in curve)

    def to_guarantee(self, values: Cost, *, round_up: bool) -> RDP:
        return RDP(self.orders, tuple(_rounded(v, round_up) for v in values))

    def zero(self) -> Cost:
        return tuple(Fraction(0) for _ in self.orders)


# --------------------------------------------------------------------------- ledgers


class _Ledger(Generic[G]):
    """Exact running total of charges of one kind, guarded by a lock."""

    def __init__(self, kind: _Kind[G]) -> None:
        self._kind = kind
        self._lock = threading.Lock()
        self._total: Cost = kind.zero()
        self._history: list[G] = []

    @property
    def spent(self) -> G:
        """The total charged so far, rounded up."""
        with self._lock:
            return self._kind.to_guarantee(self._total, round_up=True)

    @property
    def history(self) -> tuple[G, ...]:
        """Each accepted charge, in order, as a guarantee (rounded up)."""
        with self._lock:
            return tuple(self._history)

    def _owner(self, method: str) -> str:
        return f"{type(self).__name__}.{method}"

    def _charge(self, cost: Cost) -> G:
        # Called under the lock.
        self._total = tuple(a + b for a, b in zip(self._total, cost, strict=True))
        charged = self._kind.to_guarantee(cost, round_up=True)
        self._history.append(charged)
        return charged


class PrivacyOdometer(_Ledger[G]):
    """Base class of odometers: ``spend`` always records; :attr:`spent` is the total.

    See the module docstring for when the reading is itself a guarantee (pure and
    approximate DP) and when it is only a ledger (zCDP, RDP).
    """

    def spend(self, cost: Spend) -> G:
        """Record ``cost`` and return what was charged (as a guarantee, rounded up)."""
        amount = self._kind.cost(cost, self._owner("spend"))
        with self._lock:
            return self._charge(amount)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(spent={self.spent!r})"


class PrivacyFilter(_Ledger[G]):
    """Base class of filters: a budget fixed up front that ``spend`` never exceeds."""

    def __init__(self, kind: _Kind[G], budget: G) -> None:
        super().__init__(kind)
        self._budget_guarantee = budget
        self._budget = kind.cost(budget, f"{type(self).__name__}")

    @property
    def budget(self) -> G:
        """The budget fixed at construction."""
        return self._budget_guarantee

    @property
    def remaining(self) -> G:
        """``budget - spent``, computed exactly and rounded down."""
        with self._lock:
            left = tuple(b - s for b, s in zip(self._budget, self._total, strict=True))
            return self._kind.to_guarantee(left, round_up=False)

    def _fits(self, cost: Cost) -> bool:
        return all(s + c <= b for s, c, b in zip(self._total, cost, self._budget, strict=True))

    def can_spend(self, cost: Spend) -> bool:
        """Whether ``cost`` fits now (advisory: another thread may spend in between)."""
        amount = self._kind.cost(cost, self._owner("can_spend"))
        with self._lock:
            return self._fits(amount)

    def spend(self, cost: Spend) -> G:
        """Charge ``cost`` if it fits in what remains; otherwise raise and charge nothing.

        Returns the charge as a guarantee (rounded up).

        Raises
        ------
        BudgetExceeded
            If the total would exceed the budget; ``requested`` and ``remaining`` hold
            guarantees. Nothing is recorded.
        InvalidParameter, UnsupportedEvent
            For a spend of the wrong type, a bad number, or an event with no guarantee
            of this filter's kind. Nothing is recorded.
        """
        amount = self._kind.cost(cost, self._owner("spend"))
        with self._lock:
            if not self._fits(amount):
                requested = self._kind.to_guarantee(amount, round_up=True)
                left = tuple(b - s for b, s in zip(self._budget, self._total, strict=True))
                remaining = self._kind.to_guarantee(left, round_up=False)
                raise BudgetExceeded(
                    f"{type(self).__name__}: spending {requested!r} would exceed the "
                    f"budget {self._budget_guarantee!r}; {remaining!r} remains. Nothing "
                    "was spent: ask for less (more noise) or start a new budget.",
                    requested=requested,
                    remaining=remaining,
                )
            return self._charge(amount)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(budget={self.budget!r}, spent={self.spent!r})"


def _check_budget(budget: object, expected_type: type[G], owner: str) -> G:
    if not isinstance(budget, expected_type):
        raise InvalidParameter.for_parameter(
            "budget", owner, f"a {expected_type.__name__} guarantee", budget
        )
    return budget


# ------------------------------------------------------------------- concrete classes


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


class ApproxDPFilter(PrivacyFilter[ApproxDP]):
    """Filter for (eps, delta)-DP by basic composition of epsilons and of deltas.

    Accepts step ``t`` only if ``sum eps_s <= eps_g`` and ``sum delta_s <= delta_g``.

    Parameters
    ----------
    budget:
        :class:`ApproxDP` (``eps_g``, ``delta_g``).

    Privacy
    -------
    The interaction is (``eps_g``, ``delta_g``)-DP under fully adaptive composition
    (Rogers, Roth, Ullman & Vadhan 2016). Loose for many small steps: for those, charge
    a :class:`ZCDPFilter` (see the module docstring for why the advanced-composition
    filter and mixed "reordered" accounting are not offered).

    Examples
    --------
    >>> from dpkit.accounting import ApproxDP, PureDP
    >>> from dpkit.accounting.filters import ApproxDPFilter
    >>> budget = ApproxDPFilter(ApproxDP(1.0, 1e-6))
    >>> _ = budget.spend(ApproxDP(0.5, 5e-7))
    >>> _ = budget.spend(PureDP(0.5))
    >>> budget.remaining
    ApproxDP(epsilon=0.0, delta=5e-07)
    """

    def __init__(self, budget: ApproxDP) -> None:
        super().__init__(_ApproxKind(), _check_budget(budget, ApproxDP, "ApproxDPFilter"))


class ZCDPFilter(PrivacyFilter[ZCDP]):
    """Filter for zCDP: accepts step ``t`` only if ``sum_{s<=t} rho_s <= rho_g``.

    Parameters
    ----------
    budget:
        :class:`ZCDP` (``rho_g``).

    Privacy
    -------
    The interaction is ``rho_g``-zCDP under fully adaptive composition (Feldman & Zrnic
    2021, Renyi filter, at every order; Whitehouse et al. 2022). Pure-DP steps are
    charged ``eps tanh(eps/2)`` (Steinke 2024, Thm 5). Convert the *budget* once at the
    end: ``budget.to_approx(delta)`` (Canonne, Kamath & Steinke 2020, Cor. 13).

    Examples
    --------
    >>> from dpkit.accounting import GaussianEvent, ZCDP
    >>> from dpkit.accounting.filters import ZCDPFilter
    >>> budget = ZCDPFilter(ZCDP(0.5))
    >>> budget.spend(GaussianEvent(noise_multiplier=2.0))
    ZCDP(rho=0.125)
    >>> budget.remaining
    ZCDP(rho=0.375)
    """

    def __init__(self, budget: ZCDP) -> None:
        super().__init__(_ZCDPKind(), _check_budget(budget, ZCDP, "ZCDPFilter"))

    @classmethod
    def from_approx(cls, *, epsilon: float, delta: float) -> ZCDPFilter:
        """The zCDP filter whose budget implies (``epsilon``, ``delta``)-DP.

        ``rho_g`` is the largest rho (to ~1e-15 relative, found by bisection) whose
        conversion ``ZCDP(rho).to_approx(delta)`` is at most ``epsilon``, so the
        interaction is (``epsilon``, ``delta``)-DP whatever is spent.

        Examples
        --------
        >>> from dpkit.accounting.filters import ZCDPFilter
        >>> budget = ZCDPFilter.from_approx(epsilon=1.0, delta=1e-6)
        >>> budget.budget.to_approx(1e-6).epsilon <= 1.0
        True
        """
        owner = "ZCDPFilter.from_approx"
        epsilon = check.check_positive(epsilon, "epsilon", owner)
        delta = check.check_delta(delta, owner, allow_zero=False)
        low, high = 0.0, epsilon  # zcdp_epsilon(eps, delta) > eps: high is infeasible
        for _ in range(200):
            mid = 0.5 * (low + high)
            if mid in (low, high):
                break
            if conversions.zcdp_epsilon(mid, delta) <= epsilon:
                low = mid
            else:
                high = mid
        return cls(ZCDP(low))


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


class ApproxDPOdometer(PrivacyOdometer[ApproxDP]):
    """Running (eps, delta) loss by basic composition (sums of epsilons and of deltas)."""

    def __init__(self) -> None:
        super().__init__(_ApproxKind())


class ZCDPOdometer(PrivacyOdometer[ZCDP]):
    """Running total of zCDP charges (a ledger; see the module docstring).

    The total is a guarantee only when compared against a budget fixed in advance,
    which is what :class:`ZCDPFilter` does.
    """

    def __init__(self) -> None:
        super().__init__(_ZCDPKind())


class RDPOdometer(PrivacyOdometer[RDP]):
    """Running total of RDP charges at fixed orders (a ledger; see the module docstring).

    Parameters
    ----------
    orders:
        The order grid (default :data:`~dpkit.accounting.DEFAULT_ORDERS`).
    """

    def __init__(self, orders: Iterable[float] = DEFAULT_ORDERS) -> None:
        grid = RDP._check_orders(orders, "RDPOdometer")
        super().__init__(_RDPKind(grid))


def privacy_filter(
    budget: Guarantee,
) -> PrivacyFilter[PureDP] | PrivacyFilter[ApproxDP] | PrivacyFilter[ZCDP] | PrivacyFilter[RDP]:
    """The filter for a budget of any kind: :class:`PureDP` -> :class:`PureDPFilter`, etc.

    Examples
    --------
    >>> from dpkit.accounting import ZCDP
    >>> from dpkit.accounting.filters import privacy_filter
    >>> privacy_filter(ZCDP(0.5))
    ZCDPFilter(budget=ZCDP(rho=0.5), spent=ZCDP(rho=0.0))
    """
    if isinstance(budget, PureDP):
        return PureDPFilter(budget)
    if isinstance(budget, ApproxDP):
        return ApproxDPFilter(budget)
    if isinstance(budget, ZCDP):
        return ZCDPFilter(budget)
    if isinstance(budget, RDP):
        return RDPFilter(budget)
    raise InvalidParameter.for_parameter(
        "budget", "privacy_filter", "a PureDP, ApproxDP, ZCDP or RDP guarantee", budget
    )
