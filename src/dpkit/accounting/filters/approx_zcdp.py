"""Approximate zCDP: the guarantee :class:`ApproxZCDP` and its filter.

:class:`ApproxZCDPFilter` takes steps that are ``delta_t``-approximately
``rho_t``-zCDP (Bun & Steinke 2016, Def. 8.1); ``sum rho_t <= rho_g`` and ``sum
delta_t <= delta_g`` gives ``delta_g``-approximate ``rho_g``-zCDP under fully adaptive
composition (Whitehouse, Ramdas, Rogers & Wu, "Fully-adaptive composition in
differential privacy", ICML 2023, Theorem 1 -- the numbering and the form are those
OpenDP's proof of its fully adaptive approximate-zCDP composition cites; dpkit could
not check them against the paper's text, see ``shared/papers/wrrw22-filters.md``).

An (eps, delta)-DP step is charged ``(eps tanh(eps/2), delta)``: such a pair is a
post-processing of (eps, delta) randomized response (Kairouz, Oh & Viswanath 2015,
Thm 2.1), and eps-DP gives ``eps tanh(eps/2)``-zCDP (Steinke 2024, Thm 5).
:meth:`ApproxZCDP.to_approx` converts the budget once at the end (Canonne, Kamath &
Steinke 2020, Cor. 13).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dpkit import _validation as check
from dpkit.accounting._math import conversions
from dpkit.accounting._math.rounding import sum_up
from dpkit.accounting.events import (
    ApproxEvent,
    ComposedEvent,
    Event,
    RepeatedEvent,
    TruncatedLaplaceEvent,
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
from dpkit.accounting.guarantees import ZCDP, ApproxDP, Guarantee, PureDP
from dpkit.errors import InvalidParameter

__all__ = ["ApproxZCDP", "ApproxZCDPFilter"]


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
