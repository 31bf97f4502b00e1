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

A refused step does not end the interaction: the analyst may go on with smaller steps.
That is still covered by the filter theorems below, which are stated for a stopping
rule: whether a step is refused is a function of the earlier steps' parameters, hence
of earlier outputs, so an analyst who simulates the refusals would have asked only for
the accepted steps, an adaptive sequence that never crosses the budget.

What is proven, and what this module implements
-----------------------------------------------
- **Pure DP** (:class:`PureDPFilter`, :class:`PureDPOdometer`): basic composition,
  ``sum eps_t <= eps_g`` gives ``eps_g``-DP (RRUV16). The privacy loss of each step is
  bounded by its own ``eps_t`` with probability one, so the running sum is also a valid
  odometer.
- **Approximate DP by basic composition** (:class:`ApproxDPFilter`,
  :class:`ApproxDPOdometer`): ``sum eps_t <= eps_g`` and ``sum delta_t <= delta_g``
  gives ``(eps_g, delta_g)``-DP (RRUV16 prove basic composition for adaptively chosen
  parameters). Best for a few large steps; loose for many small ones.
- **zCDP** (:class:`ZCDPFilter`, :class:`ZCDPOdometer`): ``sum rho_t <= rho_g`` gives
  ``rho_g``-zCDP. This is the Renyi filter of Feldman & Zrnic 2021 ("Individual privacy
  accounting via a Renyi filter", NeurIPS) applied at every order at once, since
  ``rho``-zCDP is ``(a, a rho)``-RDP for all ``a > 1``. :meth:`ZCDPFilter.from_approx`
  sets ``rho_g`` from an (eps, delta) target with the conversion of Canonne, Kamath &
  Steinke 2020 (Cor. 13), applied once to the budget.
- **Approximate zCDP** (:class:`ApproxZCDPFilter`): steps that are ``delta_t``-approximately
  ``rho_t``-zCDP; ``sum rho_t <= rho_g`` and ``sum delta_t <= delta_g`` gives
  ``delta_g``-approximate ``rho_g``-zCDP (Whitehouse, Ramdas, Rogers & Wu, "Fully-adaptive
  composition in differential privacy", ICML 2023, Theorem 1 -- the numbering and the
  form are those OpenDP's proof of its fully adaptive approximate-zCDP composition
  cites; dpkit could not check them against the paper's text, see
  ``shared/papers/wrrw22-filters.md``).
- **(eps, delta) at advanced-composition rates** (:class:`AdvancedCompositionFilter`):
  the approximate-zCDP filter above with each (eps_t, delta_t)-DP step charged
  ``(eps_t tanh(eps_t/2), delta_t)`` and the budget ``rho_g`` set so that the final
  conversion gives the target (eps_g, delta_g). This is dpkit's corollary of Theorem 1;
  it admits every sequence that the (eps, delta) filter of WRRW23 (as reported, Thm 2:
  ``sqrt(2 log(1/delta') sum eps_t^2) + sum eps_t^2 / 2 <= eps_g``) admits, and more.
  See the class docstring for the proof.
- **RDP at fixed orders** (:class:`RDPFilter`, :class:`RDPOdometer`): at each order ``a``
  of the grid, ``sum eps_t(a) <= B(a)`` gives ``(a, B(a))``-RDP (Feldman & Zrnic 2021).
  A step is accepted only if it fits at *every* order, so at each order the charges
  never exceed the budget (refusals are themselves a function of the past).

Not implemented, on purpose
---------------------------
- **Mixing definitions in one filter by "reordering"** (compose all zCDP steps, convert,
  then add (eps, delta) steps), or accepting a step when *either* of two rules holds.
  Tight for sequential composition, but whether it is valid for fully adaptive filters
  is an open problem ("Open problem(s): how generic can composition results be?",
  differentialprivacy.org 2023). Each filter here charges every step in its own single
  definition, and converts only the final budget.
- **PLD-based filters**: PLD composition is proven for (adaptive) sequential
  composition only; use PLD accountants when parameters are fixed in advance.
- **(eps, delta) statements from zCDP/RDP odometers.** An odometer's reading is the
  running total of charges. For pure and approximate DP (basic composition) that total
  is a valid bound at any time. For zCDP and RDP a bound that holds at a data-dependent
  stopping time needs more than the sum (RRUV16 show odometers are strictly weaker than
  filters; Whitehouse et al. 2023 and Lecuyer 2021 construct them): to get a guarantee,
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
from dataclasses import dataclass
from fractions import Fraction
from typing import Generic, TypeVar

from dpkit import _validation as check
from dpkit.accounting._math import conversions
from dpkit.accounting._math.rounding import fraction_down, fraction_up, sum_up
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
from dpkit.errors import BudgetExceeded, InternalError, InvalidParameter, UnsupportedEvent

__all__ = [
    "AdvancedCompositionFilter",
    "ApproxDPFilter",
    "ApproxDPOdometer",
    "ApproxZCDP",
    "ApproxZCDPFilter",
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


@dataclass(frozen=True, slots=True)
class ApproxZCDP(Guarantee):
    """``delta``-approximate ``rho``-zCDP (Bun & Steinke 2016, Def. 8.1).

    For neighbours x, x' the output distributions split as ``M(x) = (1-delta) L +
    delta E`` and ``M(x') = (1-delta) L' + delta E'`` with ``D_a(L || L') <= a rho`` and
    ``D_a(L' || L) <= a rho`` for every order ``a > 1``. (Bun & Steinke state it with
    events of probability at least ``1 - delta``; an event of probability
    ``1 - delta_1 >= 1 - delta`` gives this split with the same ``L``, by moving
    ``delta - delta_1`` of the event's mass into ``E``.) With ``delta = 0`` it is
    ``rho``-zCDP.

    It is the ledger value of :class:`ApproxZCDPFilter` and
    :class:`AdvancedCompositionFilter`. Nothing else in dpkit composes it.

    Parameters
    ----------
    rho:
        A finite float >= 0.
    delta:
        A float in [0, 1).
    """

    rho: float
    delta: float

    def __post_init__(self) -> None:
        owner = "ApproxZCDP"
        object.__setattr__(self, "rho", check.check_nonnegative(self.rho, "rho", owner))
        object.__setattr__(self, "delta", check.check_delta(self.delta, owner))

    def to_approx(self, delta: float) -> ApproxDP:
        """The (eps, ``self.delta + delta``)-DP guarantee implied, ``delta`` in (0, 1).

        ``eps`` is the conversion of Canonne, Kamath & Steinke 2020 (Cor. 13) of
        ``rho`` at ``delta``. Proof: that corollary is a statement about any pair of
        distributions whose Renyi divergences are at most ``a rho``, so for every set S,
        ``L(S) <= e^eps L'(S) + delta``; then ``M(x)(S) <= (1 - self.delta) L(S) +
        self.delta <= e^eps (1 - self.delta) L'(S) + delta + self.delta <= e^eps
        M(x')(S) + delta + self.delta``.
        """
        owner = "ApproxZCDP.to_approx"
        delta = check.check_delta(delta, owner, allow_zero=False)
        total = sum_up((self.delta, delta))
        if total >= 1.0:
            raise InvalidParameter(
                f"{owner}: delta + self.delta = {total!r} >= 1, which guarantees nothing; "
                "ask for a smaller delta."
            )
        return ApproxDP(conversions.zcdp_epsilon(self.rho, delta), total)


def _approx_zcdp_event_cost(event: Event) -> Cost | None:
    rho = zcdp_rho(event)  # pure-DP parts are charged eps tanh(eps/2) there
    if rho is not None:
        return (Fraction(rho), Fraction(0))
    if isinstance(event, ApproxEvent | TruncatedLaplaceEvent):
        return (Fraction(conversions.pure_to_zcdp_rho(event.epsilon)), Fraction(event.delta))
    if isinstance(event, ComposedEvent):
        total = (Fraction(0), Fraction(0))
        for part in event.events:
            cost = _approx_zcdp_event_cost(part)
            if cost is None:
                return None
            total = (total[0] + cost[0], total[1] + cost[1])
        return total
    if isinstance(event, RepeatedEvent):
        cost = _approx_zcdp_event_cost(event.event)
        return None if cost is None else (event.count * cost[0], event.count * cost[1])
    return None


class _ApproxZCDPKind(_Kind[ApproxZCDP]):
    """Charges in (rho, delta). An (eps, delta)-DP step costs ``(eps tanh(eps/2), delta)``.

    Why: for fixed neighbours, an (eps, delta)-DP pair of output distributions is a
    post-processing of the (eps, delta) randomized response pair (Kairouz, Oh &
    Viswanath 2015, Thm 2.1; Murtagh & Vadhan 2016), which with probability ``delta``
    reveals the input and otherwise runs eps-randomized response. So ``M(x) =
    (1-delta) L + delta E`` with ``L``, ``L'`` post-processings of eps-randomized
    response: an eps-indistinguishable pair, hence ``eps tanh(eps/2)``-zCDP close
    (Steinke 2024, Thm 5).
    """

    name = "approximate zCDP"
    _expected = (
        "an ApproxZCDP, a ZCDP, an ApproxDP, a PureDP, or an Event with a zCDP or "
        "(epsilon, delta) cost"
    )

    def cost(self, spend: object, owner: str) -> Cost:
        if isinstance(spend, ApproxZCDP):
            return (Fraction(spend.rho), Fraction(spend.delta))
        if isinstance(spend, ZCDP):
            return (Fraction(spend.rho), Fraction(0))
        if isinstance(spend, PureDP):
            return (Fraction(conversions.pure_to_zcdp_rho(spend.epsilon)), Fraction(0))
        if isinstance(spend, ApproxDP):
            rho = conversions.pure_to_zcdp_rho(spend.epsilon)
            return (Fraction(rho), Fraction(spend.delta))
        if isinstance(spend, Event):
            cost = _approx_zcdp_event_cost(spend)
            if cost is None:
                raise _unsupported(spend, owner, "zCDP or (epsilon, delta)")
            return cost
        raise _mismatch(spend, owner, self._expected)

    def to_guarantee(self, values: Cost, *, round_up: bool) -> ApproxZCDP:
        delta = _rounded(values[1], round_up)
        if delta >= 1.0:  # a single spend's delta sum: only a composed event can get here
            delta = math.nextafter(1.0, 0.0)
        return ApproxZCDP(_rounded(values[0], round_up), delta)

    def zero(self) -> Cost:
        return (Fraction(0), Fraction(0))


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
                    f"budget {self._budget_text()}; {remaining!r} remains. Nothing "
                    "was spent: ask for less (more noise) or start a new budget.",
                    requested=requested,
                    remaining=remaining,
                )
            return self._charge(amount)

    def _budget_text(self) -> str:
        return repr(self._budget_guarantee)

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
    (Rogers, Roth, Ullman & Vadhan 2016). Best for a few large steps; for many small
    ones :class:`AdvancedCompositionFilter` admits far more (at ``eps_g = 1``,
    ``delta_g = 1e-6``: 99 steps of ``eps = 0.01`` here, 487 there), but for steps of
    ``eps = 0.1`` it admits fewer (9 here, 4 there). Pick one before the interaction
    starts: switching rules on the way is not covered by either theorem.

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


class ApproxZCDPFilter(PrivacyFilter[ApproxZCDP]):
    """Filter for approximate zCDP: ``sum rho_t <= rho_g`` and ``sum delta_t <= delta_g``.

    Step ``t`` may be ``delta_t``-approximately ``rho_t``-zCDP (Bun & Steinke 2016,
    Def. 8.1): a Gaussian release (``delta_t = 0``), threshold-based key selection, or
    any (eps, delta)-DP step, which is charged ``(eps tanh(eps/2), delta)`` (see
    :class:`AdvancedCompositionFilter` for why).

    Parameters
    ----------
    budget:
        :class:`ApproxZCDP` (``rho_g``, ``delta_g``).

    Privacy
    -------
    The interaction is ``delta_g``-approximately ``rho_g``-zCDP under fully adaptive
    composition: Whitehouse, Ramdas, Rogers & Wu, "Fully-adaptive composition in
    differential privacy" (ICML 2023), Theorem 1, the approximate-zCDP filter, whose
    stopping rule is exactly these two sums (this numbering and form are what OpenDP's
    proof of fully adaptive approximate-zCDP composition cites; the paper's own text
    was not available to check, see ``shared/papers/wrrw22-filters.md``).
    ``budget.to_approx(delta)`` then gives (eps, ``delta_g + delta``)-DP.

    Examples
    --------
    >>> from dpkit.accounting import ApproxDP, GaussianEvent
    >>> from dpkit.accounting.filters import ApproxZCDP, ApproxZCDPFilter
    >>> budget = ApproxZCDPFilter(ApproxZCDP(rho=0.5, delta=1e-7))
    >>> budget.spend(GaussianEvent(noise_multiplier=2.0))
    ApproxZCDP(rho=0.125, delta=0.0)
    >>> budget.spend(ApproxZCDP(rho=0.125, delta=5e-8))  # e.g. a key selection
    ApproxZCDP(rho=0.125, delta=5e-08)
    >>> budget.remaining
    ApproxZCDP(rho=0.25, delta=5e-08)
    """

    def __init__(self, budget: ApproxZCDP) -> None:
        super().__init__(_ApproxZCDPKind(), _check_budget(budget, ApproxZCDP, type(self).__name__))


class AdvancedCompositionFilter(ApproxZCDPFilter):
    """Filter for (eps, delta)-DP steps at the rate of advanced composition.

    Step ``t``, an (``eps_t``, ``delta_t``)-DP mechanism chosen adaptively, is charged
    ``rho_t = eps_t tanh(eps_t / 2)`` and ``delta_t`` (zCDP and pure-DP steps: their
    own ``rho``). It is accepted only if::

        sum_s rho_s <= rho_g      and      sum_s delta_s <= delta_g - delta'

    where ``delta' = conversion_delta`` and ``rho_g`` is the largest rho whose
    conversion of Canonne, Kamath & Steinke 2020 (Cor. 13) at ``delta'`` is at most
    ``eps_g`` (found by bisection, rounded down). :attr:`budget` is that ledger budget
    ``ApproxZCDP(rho_g, delta_g - delta')``; :attr:`target` is ``ApproxDP(eps_g, delta_g)``.

    Parameters
    ----------
    target:
        :class:`ApproxDP` (``eps_g`` > 0, ``delta_g`` > 0): what the whole interaction
        must satisfy.
    conversion_delta:
        ``delta'`` in (0, ``delta_g``], the part of ``delta_g`` spent on the final
        conversion; the rest pays for the steps' own deltas. Default ``delta_g / 2``.
        With only pure-DP or zCDP steps, pass ``delta_g``.

    Privacy
    -------
    The interaction is (``eps_g``, ``delta_g``)-DP under fully adaptive composition.
    Proof (a corollary dpkit derives; not a theorem quoted from a paper): each step is
    ``delta_t``-approximately ``rho_t``-zCDP given the past (an (eps, delta)-DP pair is
    a post-processing of (eps, delta) randomized response, Kairouz, Oh & Viswanath
    2015, Thm 2.1, so it splits as ``(1 - delta) L + delta E`` with ``L`` eps-DP close
    to ``L'``, and eps-DP gives ``eps tanh(eps/2)``-zCDP, Steinke 2024, Thm 5). The
    approximate-zCDP filter (Whitehouse, Ramdas, Rogers & Wu, ICML 2023, Thm 1; see
    :class:`ApproxZCDPFilter`) makes the interaction ``(delta_g - delta')``-approximately
    ``rho_g``-zCDP, and :meth:`ApproxZCDP.to_approx` at ``delta'`` gives ``eps_g`` and
    ``delta_g``.

    Whitehouse et al. derive their (eps, delta) filter (Thm 2 as reported:
    ``sqrt(2 log(1/delta') sum eps_t^2) + sum eps_t^2 / 2 <= eps_g``) the same way with
    ``eps^2/2`` and the conversion ``rho + 2 sqrt(rho log(1/delta'))``; since
    ``eps tanh(eps/2) <= eps^2/2`` and the CKS20 conversion is never larger, this filter
    accepts every sequence theirs accepts. For a few large steps basic composition
    (:class:`ApproxDPFilter`) can accept more; choose before the interaction starts.

    Examples
    --------
    >>> from dpkit.accounting import ApproxDP, PureDP
    >>> from dpkit.accounting.filters import AdvancedCompositionFilter
    >>> budget = AdvancedCompositionFilter(ApproxDP(1.0, 1e-6), conversion_delta=1e-6)
    >>> for _ in range(400):
    ...     _ = budget.spend(PureDP(0.01))  # basic composition stops at 99
    >>> budget.can_spend(PureDP(0.01))
    True
    """

    def __init__(self, target: ApproxDP, *, conversion_delta: float | None = None) -> None:
        owner = "AdvancedCompositionFilter"
        if not isinstance(target, ApproxDP) or target.epsilon <= 0.0 or target.delta <= 0.0:
            raise InvalidParameter.for_parameter(
                "target",
                owner,
                "an ApproxDP with epsilon > 0 and delta > 0 (delta pays for the final conversion)",
                target,
            )
        if conversion_delta is None:
            slack = target.delta / 2.0  # halving a float is exact (bar subnormals)
        else:
            slack = check.check_delta(conversion_delta, owner, name="conversion_delta")
            if not 0.0 < slack <= target.delta:
                raise InvalidParameter.for_parameter(
                    "conversion_delta", owner, f"a float in (0, {target.delta!r}]", slack
                )
        if slack <= 0.0:
            raise InvalidParameter.for_parameter(
                "target", owner, "an ApproxDP whose delta / 2 is a positive float", target
            )
        rho = ZCDPFilter.from_approx(epsilon=target.epsilon, delta=slack).budget.rho
        step_delta = fraction_down(Fraction(target.delta) - Fraction(slack))
        # The conversion of the ledger budget must land inside the target; it does by
        # construction (from_approx and the rounding down above), and we check it.
        implied = ApproxZCDP(rho, step_delta).to_approx(slack)
        if implied.epsilon > target.epsilon or implied.delta > target.delta:
            raise InternalError(f"{owner}: the budget conversion overshoots; this is a bug.")
        super().__init__(ApproxZCDP(rho, step_delta))
        self._target = target
        self._conversion_delta = slack

    @property
    def target(self) -> ApproxDP:
        """``ApproxDP(eps_g, delta_g)``, the guarantee of the whole interaction."""
        return self._target

    @property
    def conversion_delta(self) -> float:
        """``delta'``, the part of ``delta_g`` that pays for the final conversion."""
        return self._conversion_delta

    def _budget_text(self) -> str:
        return f"{self._budget_guarantee!r} (the ledger form of {self._target!r})"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(target={self._target!r}, "
            f"conversion_delta={self._conversion_delta!r}, spent={self.spent!r})"
        )


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
) -> (
    PrivacyFilter[PureDP]
    | PrivacyFilter[ApproxDP]
    | PrivacyFilter[ZCDP]
    | PrivacyFilter[ApproxZCDP]
    | PrivacyFilter[RDP]
):
    """The filter for a budget of any kind: :class:`PureDP` -> :class:`PureDPFilter`, etc.

    An :class:`ApproxDP` budget gets the basic-composition :class:`ApproxDPFilter`; for
    many small steps build an :class:`AdvancedCompositionFilter` instead.

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
    if isinstance(budget, ApproxZCDP):
        return ApproxZCDPFilter(budget)
    if isinstance(budget, RDP):
        return RDPFilter(budget)
    raise InvalidParameter.for_parameter(
        "budget",
        "privacy_filter",
        "a PureDP, ApproxDP, ZCDP, ApproxZCDP or RDP guarantee",
        budget,
    )
