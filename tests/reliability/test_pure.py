"""The pure-DP variant (Laplace loss estimate + thresholding): guarantee and remaining failure.

A base mechanism with losses exactly at ``alpha`` (success) or just above
``alpha + 2t`` (failure, probability ``beta``) makes the module's failure bound nearly
tight: a failure is released only when the Laplace noise is below ``-t``. The failure
rate of the real wrapper is checked against its exact value (two-sided binomial test,
false-failure rate 1e-6) and against the stated bound; the same test rejects a margin
30% off (power).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from scipy import stats

import dpkit as dp
from dpkit.accounting.events import PureEvent
from dpkit.reliability import (
    AttemptsExhausted,
    MechanismFailed,
    ReducedFailure,
    reduce_failure,
)
from dpkit.selection import thresholding_event
from dpkit.testing import seeded

ALPHA_TEST = 1e-6
ALPHA, BETA, MARGIN, EPS_Z = 2.0, 0.3, 1.5, 1.0
BAD = ALPHA + 2 * MARGIN + 1e-6


def base(x: float, rng: dp.Random) -> float:
    """Loss alpha w.p. 0.7, just above alpha + 2t w.p. 0.3 (the output is its loss)."""
    return BAD if rng.integers(10) < 3 else ALPHA


def wrapper(**change: Any) -> ReducedFailure:
    options: dict[str, Any] = {
        "loss": lambda y, x: y,
        "alpha": ALPHA,
        "failure_probability": BETA,
        "margin": MARGIN,
        "loss_epsilon": EPS_Z,
        "guarantee": dp.PureDP(0.5),
    }
    options.update(change)
    return ReducedFailure(base, **options)


def exact_failure_rate(margin: float) -> float:
    """P[released loss > alpha + 2t] for this base: noise N ~ Lap(1/eps_z) per draw."""
    below = 0.5 * math.exp(-EPS_Z * (BAD - ALPHA - margin))  # bad accepted: N <= -(...)
    good = 1 - 0.5 * math.exp(-EPS_Z * margin)  # good accepted: N <= t
    return BETA * below / (BETA * below + (1 - BETA) * good)


def test_guarantee_is_twice_the_candidate() -> None:
    w = wrapper()
    assert w.guarantee == dp.PureDP(3.0)  # 2 (0.5 + 1.0), LT19 Thm 3.1
    assert w.event == thresholding_event(PureEvent(1.5), stop_probability=1e-6)
    capped = wrapper(max_attempts=10**7)
    # T >= 1 + 1/(e gamma): 2 eps + 2 e^(-T gamma) as dp.selection states it
    assert capped.guarantee.epsilon == pytest.approx(3.0 + 2 * math.exp(-10), rel=1e-9)
    plan = reduce_failure(
        dp.PureDP(0.5), failure_probability=BETA, alpha=ALPHA, margin=MARGIN, loss_epsilon=EPS_Z
    )
    assert plan.guarantee == w.guarantee and plan.loss_bound == w.loss_bound
    assert w.loss_bound == pytest.approx(ALPHA + 2 * MARGIN)


def test_failure_rate_exact_within_bound_and_power() -> None:
    n = 12_000
    w = wrapper()
    rng = seeded(4)
    failures = sum(w.release(0.0, rng=rng).value > w.loss_bound for _ in range(n))
    rate = exact_failure_rate(MARGIN)
    low, high = stats.binom.ppf([ALPHA_TEST / 2, 1 - ALPHA_TEST / 2], n, rate)
    assert low <= failures <= high
    # the stated bound is valid (and within 10% of the exact rate here)
    assert rate <= w.remaining_failure_probability <= 1.1 * rate
    assert failures <= stats.binom.ppf(1 - ALPHA_TEST, n, w.remaining_failure_probability)
    # power: a margin 30% off changes the rate enough for the same interval to reject
    for wrong in (0.7 * MARGIN, 1.3 * MARGIN):
        other = exact_failure_rate(wrong)
        assert stats.binom.cdf(high, n, other) - stats.binom.cdf(low - 1, n, other) < 1e-3


def test_stop_raises_and_counts_as_failure() -> None:
    def always_bad(x: float, rng: dp.Random) -> float:
        return 1e6

    w = ReducedFailure(
        always_bad, loss=lambda y, x: y, alpha=0.0, failure_probability=0.1, margin=1.0,
        loss_epsilon=1.0, stop_probability=0.5, guarantee=dp.PureDP(1.0),
    )  # fmt: skip
    with pytest.raises(AttemptsExhausted) as info:
        w.release(0.0, rng=seeded(0))
    assert info.value.event == w.event and info.value.guarantee == w.guarantee
    capped = ReducedFailure(
        always_bad, loss=lambda y, x: y, alpha=0.0, failure_probability=0.1, margin=1.0,
        loss_epsilon=1.0, max_attempts=3, guarantee=dp.PureDP(1.0),
    )  # fmt: skip
    with pytest.raises(AttemptsExhausted):
        capped.release(0.0, rng=seeded(1))
    assert capped.guarantee == dp.PureDP(6.0)  # T = 3 < 1 + 1/(e gamma): composition 3 x 2


def test_raising_mechanism() -> None:
    def broken(x: float, rng: dp.Random) -> float:
        raise KeyError("row 7")

    w = ReducedFailure(
        broken, loss=lambda y, x: y, alpha=0.0, failure_probability=0.1, margin=1.0,
        loss_epsilon=1.0, guarantee=dp.PureDP(1.0),
    )  # fmt: skip
    with pytest.raises(MechanismFailed) as info:
        w.release(0.0, rng=seeded(0))
    assert isinstance(info.value.__cause__, KeyError) and "row 7" not in str(info.value)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"guarantee": dp.ApproxDP(0.5, 1e-6)}, "pure-DP"),
        ({"margin": 0.0}, "'margin'"),
        ({"margin": math.nan}, "'margin'"),
        ({"loss_epsilon": -1.0}, "'loss_epsilon'"),
        ({"stop_probability": 0.0}, "'stop_probability'"),
        ({"failure_probability": 1.0}, "'failure_probability'"),
        ({"alpha": -1.0}, "'alpha'"),
        ({"max_attempts": 0}, "'max_attempts'"),
    ],
)
def test_bad_parameters(change: dict[str, Any], match: str) -> None:
    with pytest.raises(dp.InvalidParameter, match=match):
        wrapper(**change)


def test_reduce_failure_refuses_approximate_bases() -> None:
    with pytest.raises(dp.InvalidParameter, match="pure-DP"):
        reduce_failure(
            dp.ApproxDP(1.0, 1e-6), failure_probability=0.1, alpha=1.0, margin=1.0,
            loss_epsilon=1.0,
        )  # fmt: skip
