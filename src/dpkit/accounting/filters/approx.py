"""(eps, delta)-DP filters: basic composition, and the rate of advanced composition.

- :class:`ApproxDPFilter` and :class:`ApproxDPOdometer`: ``sum eps_t <= eps_g`` and
  ``sum delta_t <= delta_g`` gives ``(eps_g, delta_g)``-DP (Rogers, Roth, Ullman &
  Vadhan 2016 prove basic composition for adaptively chosen parameters). Best for a few
  large steps; loose for many small ones. The running sums are a valid odometer.
- :class:`AdvancedCompositionFilter`: the approximate-zCDP filter of
  :mod:`dpkit.accounting.filters.approx_zcdp` (Whitehouse, Ramdas, Rogers & Wu,
  "Fully-adaptive composition in differential privacy", ICML 2023, Theorem 1) with
  each (eps_t, delta_t)-DP step charged ``(eps_t tanh(eps_t/2), delta_t)`` (Kairouz, Oh
  & Viswanath 2015, Thm 2.1; Steinke 2024, Thm 5) and the budget ``rho_g`` set so that
  the final conversion (Canonne, Kamath & Steinke 2020, Cor. 13) gives the target
  (eps_g, delta_g). This is dpkit's corollary of Theorem 1; it admits every sequence
  that the (eps, delta) filter of WRRW23 (as reported, Thm 2: ``sqrt(2 log(1/delta')
  sum eps_t^2) + sum eps_t^2 / 2 <= eps_g``) admits, and more. See the class docstring
  for the proof.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpkit import _validation as check
from dpkit.accounting._math.rounding import fraction_down
from dpkit.accounting.events import (
    ApproxEvent,
    ComposedEvent,
    Event,
    RepeatedEvent,
    TruncatedLaplaceEvent,
    pure_epsilon,
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
from dpkit.accounting.filters.approx_zcdp import ApproxZCDP, ApproxZCDPFilter
from dpkit.accounting.filters.zcdp import ZCDPFilter
from dpkit.accounting.guarantees import ApproxDP, PureDP
from dpkit.errors import InternalError, InvalidParameter

__all__ = ["AdvancedCompositionFilter", "ApproxDPFilter", "ApproxDPOdometer"]


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


class ApproxDPOdometer(PrivacyOdometer[ApproxDP]):
    """Running (eps, delta) loss by basic composition (sums of epsilons and of deltas)."""

    def __init__(self) -> None:
        super().__init__(_ApproxKind())


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
