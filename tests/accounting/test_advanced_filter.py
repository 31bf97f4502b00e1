"""The approximate-zCDP filter and the (eps, delta) filter at advanced-composition rates.

What is checked, and why it can fail:

- (a) the stopping rule is exactly ``sum rho_t <= rho_g and sum delta_t <= delta_g``
  (exact rationals, boundary included), with ``rho_t = eps_t tanh(eps_t/2)`` and
  ``rho_g`` the largest rho whose CKS20 conversion at ``delta'`` is at most ``eps_g``;
  it accepts every sequence the WRRW23 (eps, delta) rule (as reported) accepts.
- (b) it admits far more small steps than basic composition.
- (c) a filter's guarantee cannot be tested statistically, but a necessary condition
  can: with FIXED per-step parameters, the admitted count k must be one for which the
  k-fold composition of (eps, delta) randomized response -- which is a valid run of k
  (eps, delta)-DP mechanisms -- is (eps_g, delta_g)-DP. Its exact privacy profile
  (Kairouz, Oh & Viswanath 2015) is computed here. Power: doubling the rho budget or
  raising eps_g by 30% makes the same check fail.
- (d) 8 threads racing never overspend; (e) bad input raises clear errors.
"""

from __future__ import annotations

import math
import threading
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from dpkit.accounting import (
    ZCDP,
    ApproxDP,
    ApproxEvent,
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDP,
    RepeatedEvent,
    TruncatedLaplaceEvent,
)
from dpkit.accounting._math.conversions import pure_to_zcdp_rho, zcdp_epsilon
from dpkit.accounting._math.rounding import sum_up
from dpkit.accounting.composition import advanced_composition, optimal_composition
from dpkit.accounting.filters import (
    AdvancedCompositionFilter,
    ApproxDPFilter,
    ApproxZCDP,
    ApproxZCDPFilter,
    privacy_filter,
)
from dpkit.errors import BudgetExceeded, InvalidParameter, UnsupportedEvent

# ----------------------------------------------------------------------------- helpers


def exact_kfold_delta(epsilon: float, delta: float, k: int, target_epsilon: float) -> float:
    """Hockey-stick divergence at ``target_epsilon`` of k-fold (eps, delta) randomized response.

    Each copy reveals its input with probability ``delta`` (loss +inf), otherwise it is
    eps-randomized response; given no reveal and l flips the loss is ``(k - 2l) eps``.
    So ``delta(e) = 1 - (1-delta)^k + (1-delta)^k sum_l C(k,l) [p^(k-l) q^l -
    e^e p^l q^(k-l)]_+`` with ``p = e^eps / (1 + e^eps)``, ``q = 1 - p``.
    """
    ell = np.arange(k + 1, dtype=np.float64)
    log_comb = (
        special.gammaln(k + 1.0) - special.gammaln(ell + 1.0) - special.gammaln(k - ell + 1.0)
    )
    log_p = epsilon - np.logaddexp(0.0, epsilon)
    log_q = -np.logaddexp(0.0, epsilon)
    log_first = log_comb + (k - ell) * log_p + ell * log_q
    log_second = log_comb + target_epsilon + ell * log_p + (k - ell) * log_q
    keep = log_first > log_second
    nonreveal = 0.0
    if keep.any():
        gap = log_second[keep] - log_first[keep]
        terms = log_first[keep] + np.log(-np.expm1(gap))
        nonreveal = math.exp(float(special.logsumexp(terms)))
    stay = (1.0 - delta) ** k
    return (1.0 - stay) + stay * nonreveal


def admitted(budget: ApproxZCDPFilter, step: object, limit: int = 100_000) -> int:
    """How many copies of ``step`` the filter accepts, spending one at a time."""
    count = 0
    while count < limit:
        try:
            budget.spend(step)  # type: ignore[arg-type]
        except BudgetExceeded:
            return count
        count += 1
    raise AssertionError("the filter never refused")


def wrrw_rule_accepts(epsilons: list[float], target: float, conversion_delta: float) -> float:
    """Slack of the (eps, delta) filter rule of WRRW23 Thm 2 (as reported); >= 0 accepts."""
    squares = math.fsum(e * e for e in epsilons)
    return target - (math.sqrt(2.0 * math.log(1.0 / conversion_delta) * squares) + squares / 2.0)


# ------------------------------------------------------------------------------- (a)


@pytest.mark.parametrize(
    ("epsilon", "delta"),
    [(1.0, 1e-6), (0.5, 1e-9), (3.0, 1e-5), (0.1, 0.01)],
    ids=["eps1-d1e-6", "eps0.5-d1e-9", "eps3-d1e-5", "eps0.1-d0.01"],
)
def test_budget_rho_is_the_largest_that_converts_inside_the_target(
    epsilon: float, delta: float
) -> None:
    budget = AdvancedCompositionFilter(ApproxDP(epsilon, delta))
    slack = budget.conversion_delta
    assert slack == delta / 2
    rho = budget.budget.rho
    assert zcdp_epsilon(rho, slack) <= epsilon
    assert zcdp_epsilon(rho * (1 + 1e-9), slack) > epsilon  # largest, to 1e-9 relative
    assert Fraction(budget.budget.delta) <= Fraction(delta) - Fraction(slack)
    implied = budget.budget.to_approx(slack)
    assert implied.epsilon <= epsilon and implied.delta <= delta
    assert budget.target == ApproxDP(epsilon, delta)


@pytest.mark.parametrize(
    ("step", "rho", "delta"),
    [
        (PureDP(0.3), pure_to_zcdp_rho(0.3), 0.0),
        (ApproxDP(0.3, 1e-8), pure_to_zcdp_rho(0.3), 1e-8),
        (ZCDP(0.02), 0.02, 0.0),
        (ApproxZCDP(0.02, 3e-9), 0.02, 3e-9),
        (GaussianEvent(noise_multiplier=5.0), 0.02, 0.0),
        (LaplaceEvent(noise_multiplier=2.0), pure_to_zcdp_rho(0.5), 0.0),
        (ApproxEvent(0.2, 1e-9), pure_to_zcdp_rho(0.2), 1e-9),
        (TruncatedLaplaceEvent(0.2, 1e-9), pure_to_zcdp_rho(0.2), 1e-9),
    ],
    ids=[
        "pure",
        "approx",
        "zcdp",
        "approx-zcdp",
        "gaussian",
        "laplace",
        "approx-event",
        "trunc-lap",
    ],
)
def test_each_step_is_charged_its_approximate_zcdp_cost(
    step: object, rho: float, delta: float
) -> None:
    budget = AdvancedCompositionFilter(ApproxDP(5.0, 1e-6))
    assert budget.spend(step) == ApproxZCDP(rho, delta)  # type: ignore[arg-type]
    assert budget.spent == ApproxZCDP(rho, delta)


def test_composed_events_add_their_parts_exactly() -> None:
    parts = (GaussianEvent(5.0), ApproxEvent(0.2, 1e-9), TruncatedLaplaceEvent(0.1, 2e-9))
    budget = AdvancedCompositionFilter(ApproxDP(5.0, 1e-6))
    charged = budget.spend(RepeatedEvent(ComposedEvent(parts), 3))
    rho = 3 * (Fraction(0.02) + Fraction(pure_to_zcdp_rho(0.2)) + Fraction(pure_to_zcdp_rho(0.1)))
    delta = 3 * (Fraction(1e-9) + Fraction(2e-9))
    # Exact sums, rounded up once (within one ulp).
    assert rho <= Fraction(charged.rho) < rho * (1 + Fraction(1, 10**15))
    assert delta <= Fraction(charged.delta) < delta * (1 + Fraction(1, 10**15))


@pytest.mark.parametrize(
    ("epsilon", "step_delta", "conversion"),
    [(0.05, 0.0, 1e-6), (0.05, 1e-8, 5e-7), (0.2, 2e-8, 9e-7), (0.01, 1e-9, 1e-7)],
    ids=["pure", "rho-binds", "delta-binds", "delta-binds-small"],
)
def test_stopping_point_is_exactly_the_rule(
    epsilon: float, step_delta: float, conversion: float
) -> None:
    # Accepted k = max k with k rho_t <= rho_g and k delta_t <= delta_g - delta',
    # computed in exact rationals from the filter's own budget.
    budget = AdvancedCompositionFilter(ApproxDP(1.0, 1e-6), conversion_delta=conversion)
    rho_t = Fraction(pure_to_zcdp_rho(epsilon))
    by_rho = int(Fraction(budget.budget.rho) // rho_t)
    by_delta = (
        by_rho if step_delta == 0 else int(Fraction(budget.budget.delta) // Fraction(step_delta))
    )
    expected = min(by_rho, by_delta)
    assert admitted(budget, ApproxDP(epsilon, step_delta)) == expected
    # The refused step spent nothing, and a step that still fits is accepted.
    assert len(budget.history) == expected
    left = budget.remaining  # rounded down, so it always fits
    budget.spend(ApproxZCDP(left.rho, left.delta))
    rest = budget.remaining
    assert rest.rho <= 1e-15 * budget.budget.rho and rest.delta <= 1e-15 * budget.budget.delta
    assert not budget.can_spend(ApproxZCDP(1e-14 * budget.budget.rho, 0.0))


def test_approx_zcdp_filter_checks_both_sums_with_the_boundary_included() -> None:
    budget = ApproxZCDPFilter(ApproxZCDP(0.5, 1e-6))
    budget.spend(ApproxZCDP(0.25, 5e-7))
    with pytest.raises(BudgetExceeded) as info:
        budget.spend(ApproxZCDP(0.1, 6e-7))  # rho fits, delta does not
    assert info.value.requested == ApproxZCDP(0.1, 6e-7)
    assert budget.spent == ApproxZCDP(0.25, 5e-7) and len(budget.history) == 1
    with pytest.raises(BudgetExceeded):
        budget.spend(ApproxZCDP(0.3, 0.0))  # delta fits, rho does not
    budget.spend(ApproxZCDP(0.25, 5e-7))  # exactly the rest
    assert budget.remaining == ApproxZCDP(0.0, 0.0)
    assert privacy_filter(ApproxZCDP(0.5, 1e-6)).budget == ApproxZCDP(0.5, 1e-6)


def test_to_approx_is_the_conversion_plus_the_budget_delta() -> None:
    expected = ApproxDP(zcdp_epsilon(0.5, 1e-5), sum_up((1e-6, 1e-5)))
    assert ApproxZCDP(0.5, 1e-6).to_approx(1e-5) == expected
    assert ApproxZCDP(0.0, 0.0).to_approx(1e-9) == ApproxDP(0.0, 1e-9)


@settings(max_examples=40, deadline=None)
@given(
    epsilons=st.lists(st.floats(1e-3, 0.5), min_size=1, max_size=120),
    target=st.floats(0.2, 4.0),
    log_delta=st.floats(-14.0, -3.0),
)
def test_accepts_every_sequence_the_wrrw_rule_accepts(
    epsilons: list[float], target: float, log_delta: float
) -> None:
    conversion = 10.0**log_delta
    # Pure steps, so all of delta may pay for the conversion in both rules.
    budget = AdvancedCompositionFilter(ApproxDP(target, conversion), conversion_delta=conversion)
    if wrrw_rule_accepts(epsilons, target, conversion) >= 1e-9 * target:
        for epsilon in epsilons:
            budget.spend(PureDP(epsilon))  # never raises


# ------------------------------------------------------------------------------- (b)


def test_admits_far_more_small_steps_than_basic_composition() -> None:
    basic = ApproxDPFilter(ApproxDP(1.0, 1e-6))
    advanced = AdvancedCompositionFilter(ApproxDP(1.0, 1e-6), conversion_delta=1e-6)
    counts = {"basic": 0, "advanced": 0}
    for _ in range(1000):
        for name, budget in (("basic", basic), ("advanced", advanced)):
            try:
                budget.spend(PureDP(0.01))
            except BudgetExceeded:
                continue
            counts[name] += 1
    # The float 0.01 is slightly above 1/100, so exactly 99 fit under basic composition.
    assert counts["basic"] == 99
    # 487 = floor(rho_g / (0.01 tanh(0.005))) with rho_g = 0.024356: the stopping rule.
    assert counts["advanced"] == int(
        Fraction(advanced.budget.rho) // Fraction(pure_to_zcdp_rho(0.01))
    )
    assert counts["advanced"] >= 4.9 * counts["basic"]
    # The fixed-k advanced composition bound (Kairouz-Oh-Viswanath, tighter than
    # Dwork-Rothblum-Vadhan) allows only 393.
    drv = max(k for k in range(1, 1000) if advanced_composition(0.01, 0.0, k, 1e-6).epsilon <= 1.0)
    assert drv < counts["advanced"]


def test_basic_composition_wins_for_a_few_large_steps() -> None:
    # Documented trade-off: with eps = 0.1 steps the zCDP route admits fewer.
    basic = ApproxDPFilter(ApproxDP(1.0, 1e-6))
    basic_count = 0
    while basic.can_spend(PureDP(0.1)):
        basic.spend(PureDP(0.1))
        basic_count += 1
    advanced = AdvancedCompositionFilter(ApproxDP(1.0, 1e-6), conversion_delta=1e-6)
    assert (basic_count, admitted(advanced, PureDP(0.1))) == (9, 4)


# ------------------------------------------------------------------------------- (c)


def test_exact_kfold_delta_matches_kairouz_oh_viswanath() -> None:
    # Cross-check the helper against dpkit's KOV15 Thm 3.3 on its grid of epsilons.
    for epsilon, delta, k, target in [
        (0.1, 1e-6, 50, 1e-3),
        (0.5, 0.0, 20, 1e-4),
        (0.02, 1e-9, 400, 1e-6),
    ]:
        found = optimal_composition(epsilon, delta, k, target)
        assert found is not None
        assert exact_kfold_delta(epsilon, delta, k, found.epsilon) <= target * (1 + 1e-9)
        below = found.epsilon - 2 * epsilon  # the next grid point down fails
        if below >= 0:
            assert exact_kfold_delta(epsilon, delta, k, below) > target
    assert exact_kfold_delta(0.3, 1e-4, 1, 0.3) == pytest.approx(1e-4, rel=1e-12)


def _check_fixed_parameters(
    epsilon: float, step_delta: float, target: ApproxDP, fraction: float
) -> tuple[int, float]:
    conversion = target.delta * fraction
    budget = AdvancedCompositionFilter(target, conversion_delta=conversion)
    k = admitted(budget, ApproxDP(epsilon, step_delta))
    return k, exact_kfold_delta(epsilon, step_delta, k, target.epsilon)


@settings(max_examples=30, deadline=None)
@given(
    epsilon=st.floats(0.01, 0.6),
    step_delta=st.one_of(st.just(0.0), st.floats(1e-10, 1e-7)),
    target_epsilon=st.floats(0.2, 2.0),
    log_delta=st.floats(-10.0, -4.0),
    fraction=st.floats(0.05, 1.0),
)
def test_fixed_parameters_never_beat_the_exact_composition(
    epsilon: float, step_delta: float, target_epsilon: float, log_delta: float, fraction: float
) -> None:
    target = ApproxDP(target_epsilon, 10.0**log_delta)
    if fraction == 1.0:
        step_delta = 0.0  # all of delta goes to the conversion
    _, delta = _check_fixed_parameters(epsilon, step_delta, target, fraction)
    assert delta <= target.delta * (1 + 1e-9)


@pytest.mark.parametrize(
    ("epsilon", "target", "count", "kov_max"),
    [(0.01, ApproxDP(1.0, 1e-6), 487, 562), (0.05, ApproxDP(2.0, 1e-8), 51, 62)],
    ids=["eps0.01", "eps0.05"],
)
def test_margin_to_the_exact_limit_and_power(
    epsilon: float, target: ApproxDP, count: int, kov_max: int
) -> None:
    k, delta = _check_fixed_parameters(epsilon, 0.0, target, 1.0)
    assert (k, delta <= target.delta) == (count, True)
    # kov_max is the exact limit: k-fold randomized response at kov_max + 1 is not
    # (eps_g, delta_g)-DP, so no valid filter may admit that many.
    assert exact_kfold_delta(epsilon, 0.0, kov_max, target.epsilon) <= target.delta
    assert exact_kfold_delta(epsilon, 0.0, kov_max + 1, target.epsilon) > target.delta
    # Power: planted miscalibrations admit more than the limit and the check catches them.
    doubled = ApproxZCDPFilter(
        ApproxZCDP(
            2.0 * AdvancedCompositionFilter(target, conversion_delta=target.delta).budget.rho, 0.0
        )
    )
    assert (
        exact_kfold_delta(epsilon, 0.0, admitted(doubled, PureDP(epsilon)), target.epsilon)
        > target.delta
    )
    loose = AdvancedCompositionFilter(
        ApproxDP(1.3 * target.epsilon, target.delta), conversion_delta=target.delta
    )
    assert (
        exact_kfold_delta(epsilon, 0.0, admitted(loose, PureDP(epsilon)), target.epsilon)
        > target.delta
    )


# ------------------------------------------------------------------------------- (d)


def test_eight_threads_racing_never_overspend() -> None:
    budget = AdvancedCompositionFilter(ApproxDP(1.0, 1e-6))
    steps = [PureDP(0.01), ApproxDP(0.02, 1e-9)]
    costs = [
        (Fraction(pure_to_zcdp_rho(0.01)), Fraction(0)),
        (Fraction(pure_to_zcdp_rho(0.02)), Fraction(1e-9)),
    ]
    accepted = [[0, 0] for _ in range(8)]
    start = threading.Barrier(8)

    def worker(index: int) -> None:
        start.wait()
        for j in range(150):
            which = (index + j) % 2
            try:
                budget.spend(steps[which])
            except BudgetExceeded:
                continue
            accepted[index][which] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    n_pure = sum(a[0] for a in accepted)
    n_approx = sum(a[1] for a in accepted)
    rho = n_pure * costs[0][0] + n_approx * costs[1][0]
    delta = n_pure * costs[0][1] + n_approx * costs[1][1]
    assert rho <= Fraction(budget.budget.rho)
    assert delta <= Fraction(budget.budget.delta)
    assert len(budget.history) == n_pure + n_approx
    assert Fraction(budget.spent.rho) >= rho and Fraction(budget.spent.rho) - rho < Fraction(
        1, 10**15
    )
    assert not budget.can_spend(steps[0])  # 1200 attempts used the budget up


# ------------------------------------------------------------------------------- (e)


@pytest.mark.parametrize(
    ("target", "kwargs"),
    [
        (PureDP(1.0), {}),
        (ZCDP(0.5), {}),
        (ApproxDP(1.0, 0.0), {}),
        (ApproxDP(0.0, 1e-6), {}),
        (ApproxDP(1.0, 1e-6), {"conversion_delta": 0.0}),
        (ApproxDP(1.0, 1e-6), {"conversion_delta": 2e-6}),
        (ApproxDP(1.0, 1e-6), {"conversion_delta": -1e-7}),
        (ApproxDP(1.0, 1e-6), {"conversion_delta": math.nan}),
        (ApproxDP(1.0, 1e-6), {"conversion_delta": True}),
        (ApproxDP(1.0, 1e-6), {"conversion_delta": "1e-7"}),
    ],
    ids=[
        "pure",
        "zcdp",
        "no-delta",
        "no-epsilon",
        "slack0",
        "slack-too-big",
        "slack-neg",
        "slack-nan",
        "slack-bool",
        "slack-str",
    ],
)
def test_bad_construction_is_refused_clearly(target: object, kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidParameter, match="AdvancedCompositionFilter"):
        AdvancedCompositionFilter(target, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rho", "delta"),
    [(-0.1, 0.0), (math.inf, 0.0), (math.nan, 0.0), (0.1, 1.0), (0.1, -1e-9), (0.1, math.nan)],
    ids=["rho-neg", "rho-inf", "rho-nan", "delta-1", "delta-neg", "delta-nan"],
)
def test_bad_approx_zcdp_values_are_refused(rho: float, delta: float) -> None:
    with pytest.raises(InvalidParameter, match="ApproxZCDP"):
        ApproxZCDP(rho, delta)


def test_bad_spends_are_refused_and_spend_nothing() -> None:
    budget = AdvancedCompositionFilter(ApproxDP(1.0, 1e-6))
    with pytest.raises(InvalidParameter, match="spend"):
        budget.spend(0.01)  # type: ignore[arg-type]  # a bare number is ambiguous here
    with pytest.raises(InvalidParameter):
        budget.spend("0.01")  # type: ignore[arg-type]
    sampled = PoissonSampledEvent(GaussianEvent(1.0), sampling_probability=0.01)
    with pytest.raises(UnsupportedEvent, match="nothing was spent"):
        budget.spend(sampled)
    with pytest.raises(InvalidParameter, match="ApproxZCDPFilter"):
        ApproxZCDPFilter(ZCDP(0.5))  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter, match="to_approx"):
        ApproxZCDP(0.1, 0.6).to_approx(0.5)
    with pytest.raises(BudgetExceeded, match="ledger form of ApproxDP"):
        budget.spend(PureDP(1.0))
    assert budget.spent == ApproxZCDP(0.0, 0.0) and budget.history == ()
