"""How a Session's budget is kept, split and turned into calibrated integer noise.

Budget kinds (the ledger's currency)
------------------------------------
``PureDP(eps)``
    Ledger in epsilon; every statistic gets discrete Laplace noise; epsilons add
    (basic composition, valid under fully adaptive choice: Rogers, Roth, Ullman &
    Vadhan 2016, pure-DP filter).
``ZCDP(rho)``
    Ledger in rho; discrete Gaussian noise; rhos add (Bun & Steinke 2016, Lemma 2.3;
    fully adaptive: the zCDP filter, Feldman & Zrnic 2021 / Whitehouse, Ramdas, Rogers
    & Wu 2022).
``ApproxDP(eps, delta)``
    Ledger in (rho, delta_sel, eps_pure): queries run discrete Gaussian noise charged in
    rho; a query given a ``PureDP`` budget runs discrete Laplace noise and is charged its
    epsilon at face value in ``eps_pure``, or ``eps tanh(eps/2)`` in rho when that leaves
    more (:class:`~dpkit.accounting.filters.PureApproxZCDPFilter`, whose module proves
    the rule below extended by the pure sum: ``eps_pure <= eps`` while no rho is spent,
    ``eps_pure + eps_a(rho) <= eps`` after, at one order ``a`` fixed in advance);
    threshold-based key selection is ``delta_q``-approximately ``rho_q``-zCDP and is
    charged both. A share ``delta_sel`` of delta (default half) is set aside for key
    selection when the Session is created; the rest, ``delta - delta_sel``, converts
    the zCDP budget: ``rho_g`` is the largest rho with
    ``ZCDP(rho).to_approx(delta - delta_sel).epsilon <= eps`` (Canonne, Kamath &
    Steinke 2020, Cor. 13 -- never the loose ``eps^2/2`` bounds). Why the Session is
    then ``(eps, delta)``-DP:

    1. Each query is ``rho_q``-zCDP and each key selection ``delta_q``-approximately
       ``rho_q``-zCDP (Bun & Steinke 2016, Def. 8.1; see :func:`selection_threshold`),
       given everything released before.
    2. Refusing any query that would take ``sum rho`` past ``rho_g`` or ``sum delta``
       past ``delta_sel`` is the approximate-zCDP privacy filter of Whitehouse,
       Ramdas, Rogers & Wu, "Fully-adaptive composition in differential privacy"
       (ICML 2023), Theorem 1: with budgets fixed in advance it makes the whole
       interaction ``delta_sel``-approximately ``rho_g``-zCDP, however the analyst
       chooses queries and budgets. (Theorem number and form as OpenDP's proof of
       fully adaptive approximate-zCDP composition cites them; the paper's text
       could not be checked here, see ``shared/papers/wrrw22-filters.md``.) The
       theorem stops the interaction at the first crossing; a refused query here
       does not, but refusals depend only on earlier budgets, so the accepted
       queries are themselves an adaptive sequence that never crosses, which the
       theorem covers.
    3. ``delta_sel``-approximate ``rho_g``-zCDP implies ``(eps, delta)``-DP with
       ``eps`` the CKS20 conversion of ``rho_g`` at ``delta - delta_sel``: write
       ``M(x) = (1 - delta_sel) L + delta_sel E`` (same for ``x'``, with ``L`` and
       ``L'`` ``rho_g``-zCDP close); then ``M(x)(S) <= (1 - delta_sel) (e^eps L'(S)
       + delta - delta_sel) + delta_sel <= e^eps M(x')(S) + delta``
       (:meth:`dpkit.accounting.filters.ApproxZCDP.to_approx`).

    The split is fixed before any query: a data-dependent, moving split would not be
    covered by that theorem. With pure epsilons in the ledger, 2. and 3. are replaced by
    the theorem of :mod:`dpkit.accounting.filters.pure_approx_zcdp` (same split, same
    ``rho_g``; a Session that never spends pure epsilon accepts exactly what it did).

Noise and errors are integer: counts are integers, and sums are exact integer sums of
values clamped and rounded to a fixed-point grid (see :mod:`dpkit.analytics.engines`),
so the exact samplers of :mod:`dpkit.noise` apply with no floating-point leak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpkit.accounting._math.conversions import pure_to_zcdp_rho, zcdp_epsilon
from dpkit.accounting._math.rounding import fraction_down, fraction_up
from dpkit.accounting.events import DiscreteGaussianEvent, Event
from dpkit.accounting.filters import (
    PrivacyFilter,
    PureApproxZCDP,
    PureApproxZCDPBox,
    PureApproxZCDPFilter,
    PureDPFilter,
    ZCDPFilter,
)
from dpkit.accounting.guarantees import ZCDP, ApproxDP, Guarantee, PureDP
from dpkit.errors import BudgetExceeded, InternalError, InvalidParameter
from dpkit.mechanisms._tails import discrete_gaussian_tail_upper, discrete_laplace_tail
from dpkit.mechanisms.gaussian import DiscreteGaussian
from dpkit.mechanisms.laplace import DiscreteLaplace
from dpkit.noise import MAX_SCALE

__all__ = [
    "SPLIT_TOLERANCE",
    "BudgetKind",
    "Noise",
    "QueryBudget",
    "budget_kind",
    "calibrate_noise",
    "contribution_norms",
    "selection_threshold",
]

Amount = tuple[Fraction, ...]


@dataclass(frozen=True, slots=True)
class BudgetKind:
    """The currency of a Session's ledger, its filter, and how query budgets map into it.

    ``rule`` is the :mod:`dpkit.accounting.filters` filter of this (sub-)Session's
    budget -- :class:`PureDPFilter`, :class:`ZCDPFilter`, :class:`PureApproxZCDPFilter`
    (an ApproxDP Session) or :class:`PureApproxZCDPBox` (a part of one) -- whose exact
    state the ledger persists and locks: the ledger applies ``rule.after(spent, cost)``
    and holds no privacy arithmetic of its own. ``amount`` is the filter's budget
    vector ``(eps,)``, ``(rho,)`` or ``(rho, delta_sel, eps_pure)``. ``total`` is the
    Session's whole budget as the user gave it.
    """

    total: Guarantee
    name: str  # "pure" | "zcdp" | "approx"
    rule: PrivacyFilter[Any]

    @property
    def amount(self) -> Amount:
        return self.rule.budget_cost

    @property
    def noise(self) -> str:
        return "laplace" if self.name == "pure" else "gaussian"

    @property
    def key(self) -> str:
        """Identifies the budget in a ledger (a different total is refused)."""
        return repr(self.total)

    def fits(self, spent: Amount, charge: Amount) -> bool:
        """The filter's rule: whether ``charge`` fits on top of ``spent``."""
        return self.rule.admits(spent, charge)

    def part(self, amount: Amount) -> BudgetKind:
        """The kind of a partition's part whose budget is ``amount`` of this currency,
        rounded down to floats (a part never gets more than it was given)."""
        return BudgetKind(self.total, self.name, _filter(self.name, amount))

    def vector(self, charge: Fraction, delta: Fraction, pure: Fraction) -> Amount:
        """A ledger amount: ``charge`` in the currency (and, ApproxDP Sessions only, the
        key-selection ``delta`` and the ``pure`` epsilon charged at face value)."""
        return (charge,) if self.name != "approx" else (charge, delta, pure)

    def rho_left(self, spent: Amount) -> Fraction:
        """What a zCDP (or pure) query may still charge in the currency, exactly."""
        if isinstance(self.rule, PureApproxZCDPFilter):
            return self.rule.rho_left(spent)
        return max(Fraction(0), self.amount[0] - spent[0])

    def show_left(self, spent: Amount) -> str:
        """What remains after ``spent``, in the units of the Session's budget."""
        left = tuple(b - s for b, s in zip(self.amount, spent, strict=True))
        if not isinstance(self.rule, PureApproxZCDPFilter):
            return self.show(left)
        rho = self.rule.rho_left(spent)
        return (
            f"PureDP(epsilon={self.rule.pure_left(spent)!r}) for a pure query, or "
            f"ZCDP(rho={fraction_down(rho)!r}) (worth {self.as_approx(rho)!r} on its own), "
            f"and key-selection delta {fraction_down(max(left[1], Fraction(0)))!r}"
        )

    def show(self, amount: Amount) -> str:
        if self.name == "pure":
            return f"PureDP(epsilon={fraction_up(amount[0])!r})"
        if self.name == "approx" and amount[0] == 0 and amount[2] > 0:
            text = f"PureDP(epsilon={fraction_up(amount[2])!r})"
        else:
            text = f"ZCDP(rho={fraction_up(amount[0])!r})"
        if self.name == "approx":
            if amount[0] > 0:
                text += f" (worth {self.as_approx(amount[0])!r} on its own)"
                if amount[2] > 0:
                    text += f" and PureDP(epsilon={fraction_up(amount[2])!r})"
            if amount[1] > 0:
                text += f" and key-selection delta {fraction_up(amount[1])!r}"
        return text

    @property
    def conversion_delta(self) -> float:
        """ApproxDP budgets: the delta of the final zCDP -> (eps, delta) conversion."""
        assert isinstance(self.total, ApproxDP)
        return fraction_down(Fraction(self.total.delta) - self.amount[1])

    def as_approx(self, rho: Fraction) -> ApproxDP:
        """ApproxDP budgets: what ``rho`` of zCDP is worth in (eps, delta), at the
        Session's conversion delta (CKS20; epsilon rounded up)."""
        delta = self.conversion_delta
        if rho <= 0:
            return ApproxDP(0.0, delta)
        return ApproxDP(zcdp_epsilon(fraction_up(rho), delta), delta)

    def as_guarantee(self, amount: Amount, *, round_up: bool) -> PureDP | ZCDP:
        value = fraction_up(amount[0]) if round_up else fraction_down(max(amount[0], Fraction(0)))
        return PureDP(value) if self.name == "pure" else ZCDP(value)

    def query_amount(self, budget: object, spent: Amount, owner: str) -> QueryBudget:
        """What a query's ``budget`` runs and costs, given what was ``spent``.

        See :meth:`dpkit.analytics.Session.evaluate` for the forms accepted. Same-currency
        budgets above what remains by at most :data:`SPLIT_TOLERANCE` of the total are
        rounded down to what remains (never up: the noise is calibrated for the amount
        charged).
        """
        currency = "PureDP" if self.name == "pure" else "ZCDP, ApproxDP or PureDP"
        expected = (
            f"a share in (0, 1] of the Session budget (float or Fraction), 'remaining', or "
            f"a {currency} guarantee"
        )
        left = self.rho_left(spent)
        share = _share_of(budget, owner, expected)
        if share is not None:
            return self._rounded(share * self.amount[0], left)
        if isinstance(budget, str) and budget == "remaining":
            if left <= 0:
                pure = (
                    self.rule.pure_left(spent)
                    if isinstance(self.rule, PureApproxZCDPFilter)
                    else 0.0
                )
                also = (
                    f" A PureDP query of epsilon up to {pure!r} still fits (pure epsilon at "
                    "face value): pass budget=dp.PureDP(...)."
                    if pure > 0
                    else ""
                )
                raise BudgetExceeded(
                    "The Session's budget is spent: nothing remains for budget='remaining'." + also
                )
            return QueryBudget(left, self.noise, left)
        if isinstance(budget, PureDP) and budget.epsilon > 0:
            epsilon = Fraction(budget.epsilon)
            if self.name == "pure":
                return self._rounded(epsilon, left)
            # An eps-DP query (discrete Laplace noise) is eps tanh(eps/2)-zCDP (Steinke
            # 2024, Thm 5; a sum of such costs over a split of eps is at most this, the
            # function being superadditive): charged that rho, rounded up -- or, in an
            # ApproxDP Session, its epsilon at face value when that leaves more budget
            # (PureApproxZCDPFilter.cheaper; a choice made from public state only).
            as_rho = Fraction(pure_to_zcdp_rho(budget.epsilon))
            if isinstance(self.rule, PureApproxZCDPFilter):
                route = self.rule.cheaper(spent, budget.epsilon)
                return QueryBudget(epsilon, "laplace", route[0], route[2])
            if isinstance(self.rule, PureApproxZCDPBox):  # a part: face value if it fits
                face = (Fraction(0), Fraction(0), epsilon)
                if self.rule.admits(spent, face) or not self.rule.admits(
                    spent, (as_rho, Fraction(0), Fraction(0))
                ):
                    return QueryBudget(epsilon, "laplace", Fraction(0), epsilon)
            return QueryBudget(epsilon, "laplace", as_rho)
        if self.name != "pure" and isinstance(budget, ZCDP) and budget.rho > 0:
            return self._rounded(Fraction(budget.rho), left)
        if self.name != "pure" and isinstance(budget, ApproxDP) and budget.epsilon > 0:
            if budget.delta == 0:
                return self.query_amount(PureDP(budget.epsilon), spent, owner)
            # The largest rho whose zCDP guarantee implies (eps, delta) (CKS20, Cor. 13).
            rho = ZCDPFilter.from_approx(epsilon=budget.epsilon, delta=budget.delta).budget.rho
            return self._rounded(Fraction(rho), left)
        raise InvalidParameter.for_parameter("budget", owner, expected, budget)

    def _rounded(self, amount: Fraction, left: Fraction) -> QueryBudget:
        if left < amount <= left + SPLIT_TOLERANCE * self.amount[0]:
            amount = left  # equal float splits: the last one is rounded down to what is left
        return QueryBudget(amount, self.noise, amount)


#: Relative tolerance (of the Session's total) within which a query budget larger than
#: what remains is rounded down to it (ten times PureDP(0.1) in PureDP(1.0): the float
#: 0.1 is 0.1000000000000000055...).
SPLIT_TOLERANCE = Fraction(1, 10**12)


@dataclass(frozen=True, slots=True)
class QueryBudget:
    """A query's budget as it runs and as it is charged.

    ``share`` is split between the query's statistics in the currency of ``noise``
    (epsilon for ``"laplace"``, rho for ``"gaussian"``); ``charge`` is the ledger
    amount (its currency), at least what runs; ``pure`` (ApproxDP Sessions) the
    epsilon charged at face value instead (``charge`` is then 0).
    """

    share: Fraction
    noise: str
    charge: Fraction
    #: ApproxDP Sessions: the epsilon of a Laplace query charged at face value.
    pure: Fraction = Fraction(0)


def _share_of(budget: object, owner: str = "", expected: str = "") -> Fraction | None:
    """A share in (0, 1] as an exact Fraction; None if ``budget`` is not a number."""
    if isinstance(budget, bool) or not isinstance(budget, float | int | Fraction):
        return None
    if isinstance(budget, float) and not math.isfinite(budget):
        raise InvalidParameter.for_parameter("budget", owner, expected, budget)
    share = Fraction(budget)
    if not 0 < share <= 1:
        raise InvalidParameter.for_parameter("budget", owner, expected, budget)
    return share


def _filter(name: str, amount: Amount) -> PrivacyFilter[Any]:
    values = [fraction_down(a) for a in amount]
    if name == "pure":
        return PureDPFilter(PureDP(values[0]))
    if name == "zcdp":
        return ZCDPFilter(ZCDP(values[0]))
    return PureApproxZCDPBox(PureApproxZCDP(epsilon=values[2], rho=values[0], delta=values[1]))


def budget_kind(budget: object, selection_delta: float | None, owner: str) -> BudgetKind:
    """Validate a Session budget and set up its ledger currency and filter."""
    if isinstance(budget, PureDP) and budget.epsilon > 0:
        return BudgetKind(budget, "pure", PureDPFilter(budget))
    if isinstance(budget, ZCDP) and budget.rho > 0:
        return BudgetKind(budget, "zcdp", ZCDPFilter(budget))
    if isinstance(budget, ApproxDP) and budget.epsilon > 0 and budget.delta > 0:
        share = 0.5 * budget.delta if selection_delta is None else selection_delta
        if not (0.0 <= share < budget.delta):
            raise InvalidParameter.for_parameter(
                "selection_delta", owner, f"a float in [0, {budget.delta!r})", selection_delta
            )
        rule = PureApproxZCDPFilter(budget, selection_delta=share)
        rho = float(rule.budget_cost[0])
        if zcdp_epsilon(rho, rule.conversion_delta) > budget.epsilon:  # from_approx's promise
            raise InternalError("zCDP budget conversion overshoots; this is a bug.")
        return BudgetKind(budget, "approx", rule)
    raise InvalidParameter.for_parameter(
        "budget",
        owner,
        "a PureDP(epsilon > 0), ZCDP(rho > 0) or ApproxDP(epsilon > 0, delta > 0) guarantee",
        budget,
    )


# ----------------------------------------------------------------------------- noise


@dataclass(frozen=True, slots=True)
class Noise:
    """The mechanism that releases one statistic (in the statistic's integer units).

    ``mechanism`` is a :class:`~dpkit.DiscreteLaplace` (L1 sensitivity ``groups *
    sensitivity``) or a :class:`~dpkit.DiscreteGaussian` (L2 sensitivity ``sqrt(groups)
    * sensitivity``), or the smaller norms a ``total`` gives (:func:`contribution_norms`);
    the Session releases through it, so the mechanism self-audits
    cover what the Session runs. ``cost`` is its exact currency cost (epsilon or rho).
    """

    kind: str  # "laplace" | "gaussian"
    sensitivity: int  # per-group integer sensitivity (one group)
    groups: int  # max groups one privacy unit touches
    mechanism: DiscreteLaplace | DiscreteGaussian
    cost: Fraction  # exact currency cost (epsilon or rho), <= the share given
    #: A bound on one person's contributions summed over all groups (``Query.bound``'s
    #: ``max_total_rows`` times the one-row bound), below ``groups * sensitivity``; None
    #: when there is none. See :func:`contribution_norms`.
    total: int | None = None

    @property
    def scale(self) -> float:
        """The discrete Laplace scale t, or the discrete Gaussian sigma."""
        m = self.mechanism
        return m.scale if isinstance(m, DiscreteLaplace) else m.sigma

    @property
    def event(self) -> Event:
        """The event of one release over ``groups`` groups. The mechanism's own
        ``event`` is that of a scalar release (a Gaussian's L2 sensitivity floored to an
        integer shift); a person here moves up to ``groups`` coordinates, so the
        Gaussian event keeps the real L2 sensitivity and the dimension."""
        m = self.mechanism
        if isinstance(m, DiscreteGaussian) and self.groups > 1:
            return DiscreteGaussianEvent(
                sigma=m.sigma, sensitivity=m.sensitivity, dimension=self.groups
            )
        return m.event

    def standard_deviation(self) -> float:
        error = self.mechanism.error(0.95)
        assert error is not None  # additive mechanisms always state their error
        return error.standard_deviation

    def half_width(self, confidence: float) -> int:
        """Smallest integer h with P(|noise| > h) <= 1 - confidence (exact or upper bound)."""
        error = self.mechanism.error(confidence)
        assert error is not None
        return int(error.half_width)


def contribution_norms(sensitivity: int, groups: int, total: int | None) -> tuple[int, int]:
    """The L1 norm and the squared L2 norm of the largest contribution of one person.

    A person changes at most ``groups`` coordinates (groups), each by at most
    ``sensitivity``; with ``total``, the changes' absolute values also sum to at most
    ``total``. L1 is then ``min(groups * sensitivity, total)``. The squared L2 norm
    ``sum x_g^2`` is convex, so its maximum over that polytope is at a vertex: as many
    coordinates as possible at ``sensitivity`` (``q = min(groups, total //
    sensitivity)``), then the remainder ``total - q * sensitivity`` in one more if a
    group is left -- ``q s^2 + r^2``, which is ``groups * s^2`` without ``total``.
    """
    sensitivity = max(1, sensitivity)
    if total is None or total >= groups * sensitivity:
        return groups * sensitivity, groups * sensitivity * sensitivity
    full = min(groups, total // sensitivity)
    rest = total - full * sensitivity if full < groups else 0
    return total, full * sensitivity * sensitivity + rest * rest


def calibrate_noise(
    kind: str, share: Fraction, sensitivity: int, groups: int, total: int | None = None
) -> Noise:
    """The mechanism for a per-group integer ``sensitivity`` over ``groups`` groups
    (and, with ``total``, at most ``total`` summed over the groups).

    Pure DP: the vector's L1 sensitivity is ``groups * sensitivity`` (at most
    ``total``; :func:`contribution_norms`), and a :class:`DiscreteLaplace` of scale
    ``t >= L1 / share`` (the smallest such float) is ``L1 / t``-DP (Ghosh, Roughgarden &
    Sundararajan 2009). zCDP: the L2 sensitivity is ``sqrt(groups) * sensitivity``
    (or the smaller norm that ``total`` allows), rounded up, and
    :meth:`DiscreteGaussian.calibrate` at rho ``share`` (rounded down) gives sigma with
    ``L2^2 / (2 sigma^2) <= share`` (Canonne, Kamath & Steinke 2020, Thm 4 and 14). The
    exact rational cost is checked against the share, so the charge covers what runs.
    """
    if share <= 0:
        raise InternalError("a statistic got no budget; this is a bug, please report it.")
    sensitivity = max(1, sensitivity)
    if total is not None and total >= groups * sensitivity:
        total = None
    l1, l2_squared_int = contribution_norms(sensitivity, groups, total)
    target = fraction_down(share)
    try:
        if kind == "laplace":
            # The smallest float scale >= l1 / share: its exact cost is at most the share.
            laplace = DiscreteLaplace(scale=fraction_up(Fraction(l1) / share), sensitivity=l1)
            mechanism: DiscreteLaplace | DiscreteGaussian = laplace
            cost = Fraction(l1) / Fraction(laplace.scale)
        else:
            l2_squared = Fraction(l2_squared_int)
            l2 = math.sqrt(float(l2_squared))
            while Fraction(l2) ** 2 < l2_squared:
                l2 = math.nextafter(l2, math.inf)
            mechanism = DiscreteGaussian.calibrate(rho=target, sensitivity=l2)
            cost = Fraction(l2) ** 2 / (2 * Fraction(mechanism.sigma) ** 2)
    except InvalidParameter:
        # Refused here, at compile time, before anything is charged: the exact samplers
        # take scales up to 2^40 (dpkit.noise), and a query that would fail after its
        # charge for a public reason is a budget lost for nothing.
        raise InvalidParameter(
            f"The query's budget is too small: a statistic of sensitivity {l1}"
            f" at {kind} budget {float(share):.3g} would need noise above the exact "
            f"samplers' limit 2^40 ({MAX_SCALE:.4g}). Give the query a larger budget, fewer "
            "statistics or smaller contribution bounds."
        ) from None
    if cost > share:
        raise InternalError("noise calibration overshoots its share; this is a bug.")
    return Noise(kind, sensitivity, groups, mechanism, cost, total)


# ---------------------------------------------------------------------- key selection


def selection_threshold(noise: Noise, delta: float) -> tuple[int, float]:
    """Threshold T and the delta it costs for releasing keys whose noisy count is >= T.

    Theorem (Korolova, Kenthapadi, Mishra & Ntoulas 2009; Desfontaines, Voss, Gipson &
    Mandayam 2022 for the general form): with add/remove neighbours, a person adds 1 to
    the distinct-person count of at most ``k = noise.groups`` keys. Keys present in both
    neighbours get noisy counts whose release is post-processing of the noisy-count
    vector (``eps = k / t`` for discrete Laplace, ``rho = k / (2 sigma^2)`` for discrete
    Gaussian). A key present in only the larger dataset has count exactly 1 there, and
    is released with probability ``p = P[1 + Z >= T] = P[Z >= T - 1]`` -- the mass at
    the threshold itself is included since the rule is ``>=``. Conditioned on none of
    those (at most k) keys being released, an event of probability at least
    ``(1 - p)^k``, the output is distributed as for the smaller dataset with shifted
    counts, so the mechanism is ``delta``-approximately (eps-DP | rho-zCDP) with
    ``delta = 1 - (1 - p)^k`` (Bun & Steinke 2016, approximate zCDP). Wilkins, Kifer,
    Zhang & Karrer 2024 give the exact (eps, delta) profile of the Gaussian version,
    which is tighter than this accounting; ours is a valid upper bound.

    Returns the smallest integer T >= 2 with ``1 - (1 - p(T))^k <= delta`` and that delta.
    """
    k = noise.groups
    tail = discrete_laplace_tail if noise.kind == "laplace" else discrete_gaussian_tail_upper
    target_p = -math.expm1(math.log1p(-delta) / k)  # largest p with 1-(1-p)^k <= delta
    # Bracket then bisect on T (p(T) is non-increasing in T).
    low, high = 2, 4
    while tail(high - 1, noise.scale) > target_p:
        low, high = high, high * 2
        if high > 2**62:
            raise InvalidParameter(
                f"Key selection cannot reach delta = {delta!r} with noise scale "
                f"{noise.scale!r}; give a larger selection delta."
            )
    while low < high:
        mid = (low + high) // 2
        if tail(mid - 1, noise.scale) <= target_p:
            high = mid
        else:
            low = mid + 1
    p = tail(low - 1, noise.scale)
    spent = -math.expm1(k * math.log1p(-p)) if p < 1.0 else 1.0
    spent = math.nextafter(spent, 1.0)
    if spent > delta:  # p <= target_p, so only rounding could do this
        spent = delta
    return low, spent


def selection_cost_rho(noise: Noise) -> Fraction:
    """The zCDP charge of the selection's noisy counts (Laplace via eps tanh(eps/2))."""
    if noise.kind == "gaussian":
        return noise.cost
    return Fraction(pure_to_zcdp_rho(fraction_up(noise.cost)))
