"""Pure epsilon at face value next to approximate zCDP, in one (eps, delta) filter.

An ``ApproxDP(eps_g, delta_g)`` budget spent on zCDP steps alone is best kept in rho
(:class:`~dpkit.accounting.filters.ApproxZCDPFilter`, converted once at the end). A pure
``eps``-DP step charged there costs ``eps tanh(eps/2)`` in rho, and after the
conversion a few such steps can be worth far more than their epsilons: in
``ApproxDP(2, 1e-6)`` one ``PureDP(0.5)`` step costs as much as epsilon 2.46 on its own.
:class:`PureApproxZCDPFilter` keeps a third sum, the epsilons of pure steps charged at
face value, and proves the whole interaction ``(eps_g, delta_g)``-DP with the rule below.

The rule
--------
The state is ``(rho, delta, eps)``: the rho of zCDP steps, the delta of approximate
steps, and the epsilons of pure steps (at face value). With ``delta_g = delta_c +
delta_s`` split once in advance (``delta_s`` for approximate steps such as key
selection) and one order ``a = 1 + t`` fixed in advance, a step is accepted when the
state after it satisfies

1. ``delta <= delta_s`` and ``rho <= rho_g`` (``rho_g``: the budget of the zCDP-only
   filter, so a Session that never spends pure epsilon behaves exactly as before), and
2. ``eps <= eps_g`` if ``rho = 0``; otherwise ``eps + eps_a(rho) <= eps_g``, where
   ``eps_a(rho) = a rho + log(1 - 1/a) - (log delta_c + log a) / (a - 1)`` is the
   conversion of Canonne, Kamath & Steinke 2020 (Prop. 12) at the *fixed* order ``a``.

``a`` is the order that is optimal for ``rho_g`` at ``delta_c`` (so 2. and ``rho <=
rho_g`` agree when ``eps = 0``). Each pure step may be charged either way -- ``(0, 0,
eps)`` or ``(eps tanh(eps/2), 0, 0)`` (Steinke 2024, Thm 5) -- as long as the choice is
made from public information before it runs; :meth:`PureApproxZCDPFilter.cheaper`
picks the one that leaves the smaller epsilon-equivalent (:meth:`epsilon_used`).

Theorem (fully adaptive)
------------------------
However the analyst picks each step and its parameters from earlier outputs, the
interaction is ``(eps_g, delta_c + delta_s)``-DP. Proof, for fixed neighbours x, x'
and P, Q the laws of the whole transcript on x and on x':

a. *Good parts.* Step t is ``delta_t``-approximately (``eps_t``-DP or
   ``rho_t``-zCDP): its kernels split as ``P_t = (1 - delta_t) A_t + delta_t B_t`` and
   ``Q_t = (1 - delta_t) A'_t + delta_t B'_t`` with ``(A_t, A'_t)`` an ``eps_t``-DP or
   ``rho_t``-zCDP pair (Bun & Steinke 2016, Def. 8.1; an (eps, delta)-DP pair has this
   form with an eps-DP good part, Kairouz, Oh & Viswanath 2015, Thm 2.1). Let the
   A-process run every step from its good kernel under the same stopping rule, ``W =
   prod (1 - delta_t)`` and ``L = log dA/dA'`` the privacy loss of the A-process
   transcript. Then ``P(S) <= E_A[W 1_S] + E_A[1 - W]``, ``E_A[1 - W] <= E_A[sum
   delta_t] <= delta_s`` (rule 1, pointwise), ``Q(S) >= E_A'[W 1_S] = E_A[W 1_S
   e^-L]``, hence ``P(S) - e^eps_g Q(S) <= delta_s + E_A[(1 - e^(eps_g - L))+]``.
b. *Pure steps are bounded pointwise.* Split ``L = L_P + L_Z`` into the pure steps'
   and the zCDP steps' losses (which kind a step is, is fixed before it runs). An
   eps_t-DP pair has ``|log dA_t/dA'_t| <= eps_t`` everywhere, so ``L_P <= eps``, the
   final pure sum, on every transcript.
c. *One order, one supermartingale.* ``M = exp(sum over zCDP steps of ((a - 1) L_t -
   a (a - 1) rho_t))`` is a non-negative supermartingale under the A-process (each
   step's Renyi divergence of order a is at most ``a rho_t``, and ``rho_t`` is known
   before the step; pure steps leave M unchanged), so ``E_A[M] <= 1`` at the stopping
   time (optional stopping, Fatou). This is the argument of Feldman & Zrnic 2021
   (Renyi filters) at the single order a.
d. *The conversion, pointwise.* For every real ``e`` and x, ``(1 - e^(e - x))+ <=
   c_a(e) e^((a - 1) x)`` with ``c_a(e) = e^(-(a - 1) e) (1 - 1/a)^a / (a - 1)`` (the
   maximum of the ratio, Canonne, Kamath & Steinke 2020, proof of Prop. 12). Where the
   final ``rho = 0`` there are no zCDP losses and ``(1 - e^(eps_g - L))+ <= (1 -
   e^(eps_g - eps))+ = 0`` by rule 2. Where ``rho > 0``, with ``e = eps_g - eps``: ``(1 -
   e^(eps_g - L))+ <= (1 - e^(e - L_Z))+ <= c_a(e) e^(a (a - 1) rho) M <= delta_c M``,
   because rule 2 says exactly ``c_a(e) e^(a (a - 1) rho) <= delta_c``. Taking
   expectations, ``E_A[(1 - e^(eps_g - L))+] <= delta_c E_A[M] <= delta_c``.

Swapping x and x' gives the other direction. The order must be one and fixed: the
bound of d. at a different order per final state would need ``E_A[M_a]`` of several
martingales at once (a union bound over orders, as odometers pay), so a rule that
converts each final state at its own best order is not covered by this proof.
``tests/accounting/test_pure_approx_zcdp.py`` checks the theorem on exact laws of
adaptive two-branch interactions, and that two natural wrong rules (the epsilons and
``a rho`` added without the conversion's constant; the larger instead of the sum) fail
there.

Partitions (parallel composition) and reserves charge a part's whole budget ``(rho, delta,
eps)`` to this filter up front; inside the part a plain componentwise filter
(:class:`PureApproxZCDPBox`) keeps the part's own sums below that charge, so the true
final state is componentwise below an accepted state, and the rule is monotone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dpkit import _validation as check
from dpkit.accounting._math import conversions
from dpkit.accounting._math.rounding import fraction_down, fraction_up
from dpkit.accounting.events import (
    ApproxEvent,
    ComposedEvent,
    Event,
    RepeatedEvent,
    TruncatedLaplaceEvent,
    pure_epsilon,
    zcdp_rho,
)
from dpkit.accounting.filters._base import (
    Cost,
    PrivacyFilter,
    _check_budget,
    _Kind,
    _mismatch,
    _rounded,
    _unsupported,
)
from dpkit.accounting.filters.approx_zcdp import ApproxZCDP
from dpkit.accounting.filters.zcdp import ZCDPFilter
from dpkit.accounting.guarantees import ZCDP, ApproxDP, Guarantee, PureDP
from dpkit.errors import InternalError, InvalidParameter

__all__ = ["PureApproxZCDP", "PureApproxZCDPBox", "PureApproxZCDPFilter"]


@dataclass(frozen=True, slots=True)
class PureApproxZCDP(Guarantee):
    """A charge or state of :class:`PureApproxZCDPFilter`: pure ``epsilon`` at face value
    next to ``delta``-approximate ``rho``-zCDP.

    Its meaning is the step's (or interaction's) good part as in the theorem of
    :mod:`dpkit.accounting.filters.pure_approx_zcdp`: outside an event of probability
    ``delta`` the privacy loss is a pointwise-bounded part (at most ``epsilon``) plus a
    part with Renyi divergences at most ``a rho`` at every order ``a``.
    """

    epsilon: float
    rho: float
    delta: float

    def __post_init__(self) -> None:
        owner = "PureApproxZCDP"
        object.__setattr__(self, "epsilon", check.check_nonnegative(self.epsilon, "epsilon", owner))
        object.__setattr__(self, "rho", check.check_nonnegative(self.rho, "rho", owner))
        object.__setattr__(self, "delta", check.check_delta(self.delta, owner))


def _event_cost(event: Event) -> Cost | None:
    """An event as ``(rho, delta, eps)``: pure events at face value, else zCDP/(eps, delta)."""
    epsilon = pure_epsilon(event)
    if epsilon is not None:
        return (Fraction(0), Fraction(0), Fraction(epsilon))
    rho = zcdp_rho(event)
    if rho is not None:
        return (Fraction(rho), Fraction(0), Fraction(0))
    if isinstance(event, ApproxEvent | TruncatedLaplaceEvent):
        # delta-approximately eps-DP (Kairouz, Oh & Viswanath 2015, Thm 2.1).
        return (Fraction(0), Fraction(event.delta), Fraction(event.epsilon))
    if isinstance(event, ComposedEvent):
        total = (Fraction(0), Fraction(0), Fraction(0))
        for part in event.events:
            cost = _event_cost(part)
            if cost is None:
                return None
            total = (total[0] + cost[0], total[1] + cost[1], total[2] + cost[2])
        return total
    if isinstance(event, RepeatedEvent):
        cost = _event_cost(event.event)
        return None if cost is None else tuple(event.count * c for c in cost)
    return None


class _PureApproxZCDPKind(_Kind[PureApproxZCDP]):
    """Charges in ``(rho, delta, eps)``; pure epsilons at face value."""

    name = "pure epsilon next to approximate zCDP"
    _expected = (
        "a PureApproxZCDP, an ApproxZCDP, a ZCDP, an ApproxDP, a PureDP, or an Event "
        "with a pure, zCDP or (epsilon, delta) cost"
    )

    def cost(self, spend: object, owner: str) -> Cost:
        if isinstance(spend, PureApproxZCDP):
            return (Fraction(spend.rho), Fraction(spend.delta), Fraction(spend.epsilon))
        if isinstance(spend, ApproxZCDP):
            return (Fraction(spend.rho), Fraction(spend.delta), Fraction(0))
        if isinstance(spend, ZCDP):
            return (Fraction(spend.rho), Fraction(0), Fraction(0))
        if isinstance(spend, PureDP):
            return (Fraction(0), Fraction(0), Fraction(spend.epsilon))
        if isinstance(spend, ApproxDP):
            return (Fraction(0), Fraction(spend.delta), Fraction(spend.epsilon))
        if isinstance(spend, Event):
            cost = _event_cost(spend)
            if cost is None:
                raise _unsupported(spend, owner, "pure, zCDP or (epsilon, delta)")
            return cost
        raise _mismatch(spend, owner, self._expected)

    def to_guarantee(self, values: Cost, *, round_up: bool) -> PureApproxZCDP:
        delta = _rounded(values[1], round_up)
        if delta >= 1.0:  # only a composed event's delta sum can get here
            delta = math.nextafter(1.0, 0.0)
        return PureApproxZCDP(
            epsilon=_rounded(values[2], round_up), rho=_rounded(values[0], round_up), delta=delta
        )

    def zero(self) -> Cost:
        return (Fraction(0), Fraction(0), Fraction(0))


class PureApproxZCDPBox(PrivacyFilter[PureApproxZCDP]):
    """Componentwise filter on ``(rho, delta, eps)``: each sum stays below its budget.

    The filter of a part (a partition's part, a reserve) whose whole budget was charged
    up front to a :class:`PureApproxZCDPFilter`: it keeps the part's true state below
    that charge, which is all the parent's theorem needs (its rule is monotone).

    Parameters
    ----------
    budget:
        :class:`PureApproxZCDP` (the part's ``epsilon``, ``rho`` and ``delta``).
    """

    def __init__(self, budget: PureApproxZCDP) -> None:
        super().__init__(
            _PureApproxZCDPKind(), _check_budget(budget, PureApproxZCDP, type(self).__name__)
        )


class PureApproxZCDPFilter(PureApproxZCDPBox):
    """An ``ApproxDP(eps_g, delta_g)`` budget over pure, zCDP and approximate steps.

    See :mod:`dpkit.accounting.filters.pure_approx_zcdp` for the rule and the proof that
    the interaction is ``(eps_g, delta_g)``-DP under fully adaptive composition.

    Parameters
    ----------
    budget:
        The ``ApproxDP(eps_g, delta_g)`` budget (both > 0).
    selection_delta:
        The share ``delta_s`` of ``delta_g`` kept for approximate steps (in ``[0,
        delta_g)``); the rest converts the zCDP part.

    Examples
    --------
    >>> from dpkit.accounting import ApproxDP, PureDP, ZCDP
    >>> from dpkit.accounting.filters import PureApproxZCDPFilter
    >>> budget = PureApproxZCDPFilter(ApproxDP(2.0, 1e-6), selection_delta=5e-7)
    >>> for _ in range(4):
    ...     _ = budget.spend(PureDP(0.5))  # at face value: 4 x 0.5 = 2
    >>> budget.epsilon_used(budget.state)
    2.0
    """

    def __init__(self, budget: ApproxDP, *, selection_delta: float) -> None:
        owner = type(self).__name__
        total = _check_budget(budget, ApproxDP, owner)
        if not (total.epsilon > 0 and total.delta > 0):
            raise InvalidParameter.for_parameter(
                "budget", owner, "an ApproxDP(epsilon > 0, delta > 0)", budget
            )
        share = check.check_finite_float(selection_delta, "selection_delta", owner)
        if not 0.0 <= share < total.delta:
            raise InvalidParameter.for_parameter(
                "selection_delta", owner, f"a float in [0, {total.delta!r})", selection_delta
            )
        self.total = total
        self.conversion_delta = fraction_down(Fraction(total.delta) - Fraction(share))
        rho = ZCDPFilter.from_approx(epsilon=total.epsilon, delta=self.conversion_delta).budget.rho
        order = conversions.zcdp_epsilon_order(rho, self.conversion_delta)
        if order is None:  # pragma: no cover - rho above ~1e300
            raise InvalidParameter(f"{owner}: the budget {budget!r} is too large to convert.")
        self.order = order  # a - 1, fixed for the whole interaction
        # rho_g must satisfy the rule at the fixed order (it does when CKS20's bound
        # at its optimal order gave from_approx; the simple bound might have won).
        while rho > 0 and self._epsilon_at(rho) > total.epsilon:
            rho = math.nextafter(rho, 0.0)
        super().__init__(PureApproxZCDP(epsilon=total.epsilon, rho=rho, delta=share))
        self._epsilon_budget = Fraction(total.epsilon)

    def _epsilon_at(self, rho: float) -> float:
        """``eps_a(rho)`` at the filter's fixed order, rounded up."""
        return conversions.zcdp_epsilon_at_order(rho, self.conversion_delta, self.order)

    def _zcdp_epsilon(self, rho: Fraction) -> Fraction:
        if rho <= 0:
            return Fraction(0)
        return Fraction(self._epsilon_at(fraction_up(rho)))

    @property
    def state(self) -> Cost:
        """The exact state ``(rho, delta, eps)`` of this in-memory filter."""
        with self._lock:
            return self._total

    def epsilon_used(self, state: Cost) -> float:
        """The epsilon-equivalent of ``state``: ``eps`` if ``rho = 0``, else ``eps +
        eps_a(rho)`` (rounded up). The rule admits a state iff this is at most
        ``eps_g`` (and the box holds)."""
        return fraction_up(state[2] + self._zcdp_epsilon(state[0]))

    def admits(self, spent: Cost, cost: Cost) -> bool:
        if not super().admits(spent, cost):
            return False
        after = tuple(s + c for s, c in zip(spent, cost, strict=True))
        return after[2] + self._zcdp_epsilon(after[0]) <= self._epsilon_budget

    def cheaper(self, spent: Cost, epsilon: float) -> Cost:
        """How to charge a pure ``epsilon``-DP step on top of ``spent``: at face value
        ``(0, 0, eps)`` or as ``(eps tanh(eps/2), 0, 0)`` -- whichever the rule admits and
        leaves the smaller :meth:`epsilon_used` (face value on a tie or when neither
        fits, so a refusal names the step's own epsilon)."""
        face = (Fraction(0), Fraction(0), Fraction(epsilon))
        as_rho = (Fraction(conversions.pure_to_zcdp_rho(epsilon)), Fraction(0), Fraction(0))
        options = [c for c in (face, as_rho) if self.admits(spent, c)]
        if not options:
            return face

        def used(cost: Cost) -> Fraction:
            after = tuple(s + c for s, c in zip(spent, cost, strict=True))
            return after[2] + self._zcdp_epsilon(after[0])

        return min(options, key=used)  # min keeps the first (face value) on a tie

    def rho_left(self, spent: Cost) -> Fraction:
        """The largest rho a zCDP step may still charge on top of ``spent`` (rounded
        down to a float, exact as a Fraction)."""
        box = Fraction(fraction_down(self._budget[0] - spent[0]))
        if box <= 0 or spent[2] > self._epsilon_budget:
            return Fraction(0)
        if self.admits(spent, (box, Fraction(0), Fraction(0))):
            return box
        # eps_a is increasing in rho: bisect on floats for the largest admitted rho.
        low, high = 0.0, float(box)
        for _ in range(200):
            mid = (low + high) / 2.0
            if mid in (low, high):
                break
            if self.admits(spent, (Fraction(mid), Fraction(0), Fraction(0))):
                low = mid
            else:
                high = mid
        return Fraction(low)

    def epsilon_left(self, spent: Cost) -> float:
        """The largest epsilon a pure step may still charge at face value (rounded down)."""
        left = self._epsilon_budget - spent[2] - self._zcdp_epsilon(spent[0])
        return fraction_down(max(left, Fraction(0)))

    def pure_left(self, spent: Cost) -> float:
        """The largest epsilon of a pure step that still fits on top of ``spent``, by
        the better of its two charges (rounded down)."""
        face = self.epsilon_left(spent)
        rho = self.rho_left(spent)
        # eps tanh(eps/2) <= rho: bisect (the function increases; eps <= sqrt(2 rho)
        # would do for eps^2/2, and eps tanh(eps/2) <= eps^2/2 allows a bit more).
        low, high = 0.0, 2.0 * math.sqrt(float(rho)) + 1.0
        for _ in range(200):
            mid = (low + high) / 2.0
            if mid in (low, high):
                break
            cost = (Fraction(conversions.pure_to_zcdp_rho(mid)), Fraction(0), Fraction(0))
            if self.admits(spent, cost):
                low = mid
            else:
                high = mid
        return max(face, low)

    def _budget_text(self) -> str:
        return f"{self.total!r} (pure epsilon at face value next to zCDP)"

    def guarantee(self) -> ApproxDP:
        """The interaction's guarantee: the budget ``ApproxDP(eps_g, delta_g)``."""
        if self.conversion_delta <= 0:  # pragma: no cover - checked at construction
            raise InternalError("conversion delta not positive; this is a bug.")
        return self.total
