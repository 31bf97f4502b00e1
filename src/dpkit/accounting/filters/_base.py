"""The machinery every filter and odometer shares: kinds, an exact ledger, base classes.

In *fully adaptive* composition the analyst picks each next mechanism **and its privacy
parameters** after seeing the previous outputs (Rogers, Roth, Ullman & Vadhan 2016,
"Privacy odometers and filters: pay-as-you-go composition"). Ordinary composition
theorems assume the parameters are fixed in advance; they do not automatically cover
this. Two objects do:

- a **filter** (:class:`PrivacyFilter`) has a budget fixed before the interaction and
  refuses (raises :class:`~dpkit.errors.BudgetExceeded`, spending nothing) any step that
  would take the running total past it. The whole interaction then satisfies the budget.
- an **odometer** (:class:`PrivacyOdometer`) has no budget and reports the running
  total (:attr:`~PrivacyOdometer.spent`).

A refused step does not end the interaction: the analyst may go on with smaller steps.
That is still covered by the filter theorems of the family modules, which are stated
for a stopping rule (RRUV16): whether a step is refused is a function of the earlier
steps' parameters, hence of earlier outputs, so an analyst who simulates the refusals
would have asked only for the accepted steps, an adaptive sequence that never crosses
the budget.

An odometer's reading is the running total of charges. For pure and approximate DP
(basic composition) that total is a valid bound at any time. For zCDP and RDP a bound
that holds at a data-dependent stopping time needs more than the sum (RRUV16 show
odometers are strictly weaker than filters; Whitehouse et al. 2023 and Lecuyer 2021
construct them): to get a guarantee, fix a budget in advance and use a filter.

Each family module (:mod:`~dpkit.accounting.filters.pure`,
:mod:`~dpkit.accounting.filters.approx`, :mod:`~dpkit.accounting.filters.zcdp`,
:mod:`~dpkit.accounting.filters.approx_zcdp`, :mod:`~dpkit.accounting.filters.rdp`)
defines a *kind*, which turns a spend into a vector of exact rationals and back into a
guarantee, and its filter and odometer on top of the classes here.

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

import threading
from fractions import Fraction
from typing import Generic, TypeVar

from dpkit import _validation as check
from dpkit.accounting._math.rounding import fraction_down, fraction_up
from dpkit.accounting.events import Event
from dpkit.accounting.guarantees import Guarantee
from dpkit.errors import BudgetExceeded, InvalidParameter, UnsupportedEvent

__all__ = ["Cost", "PrivacyFilter", "PrivacyOdometer", "Spend"]

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
        return self.admits(self._total, cost)

    # ------------------------------------------------------------ persisted state
    # A filter's state is the exact vector of its charges' total. A store that keeps
    # that state elsewhere -- the analytics Session's SQLite ledger, shared by threads
    # and processes -- applies the filter's rule to it through these pure methods,
    # under its own lock, and holds no privacy arithmetic of its own.

    @property
    def budget_cost(self) -> Cost:
        """The budget as the exact vector the state is compared with."""
        return self._budget

    def cost_of(self, spend: Spend) -> Cost:
        """The exact cost vector of ``spend`` (validated as :meth:`spend` does)."""
        return self._kind.cost(spend, self._owner("cost_of"))

    def admits(self, spent: Cost, cost: Cost) -> bool:
        """The filter's stopping rule: whether state ``spent`` can take ``cost``."""
        return all(s + c <= b for s, c, b in zip(spent, cost, self._budget, strict=True))

    def after(self, spent: Cost, cost: Cost) -> Cost:
        """The state after charging ``cost`` to state ``spent``.

        Raises
        ------
        BudgetExceeded
            If the rule refuses it (the caller keeps its state unchanged).
        """
        if not self.admits(spent, cost):
            raise self._refusal(spent, cost)
        return tuple(s + c for s, c in zip(spent, cost, strict=True))

    def as_guarantee(self, amount: Cost, *, round_up: bool) -> G:
        """A cost vector (or state) as a guarantee, rounded up or down."""
        return self._kind.to_guarantee(amount, round_up=round_up)

    def _refusal(self, spent: Cost, cost: Cost) -> BudgetExceeded:
        requested = self._kind.to_guarantee(cost, round_up=True)
        left = tuple(b - s for b, s in zip(self._budget, spent, strict=True))
        remaining = self._kind.to_guarantee(left, round_up=False)
        return BudgetExceeded(
            f"{type(self).__name__}: spending {requested!r} would exceed the "
            f"budget {self._budget_text()}; {remaining!r} remains. Nothing "
            "was spent: ask for less (more noise) or start a new budget.",
            requested=requested,
            remaining=remaining,
        )

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
                raise self._refusal(self._total, amount)
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
