"""The calculators: laws they obey (hypothesis), bad input, and ``compare``."""

from __future__ import annotations

import math
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpkit as dp
from dpkit.reliability import (
    absorb_failure,
    compare,
    reduce_failure,
    repeat_until_success,
    truncation,
)
from dpkit.reliability.guarantees import cap_term

epsilons = st.floats(0.01, 5.0)
deltas = st.floats(1e-12, 1e-3)
betas = st.floats(0.0, 0.9)


@settings(max_examples=200, deadline=None)
@given(epsilons, deltas, betas, betas)
def test_repeat_until_success_is_monotone_in_beta(
    epsilon: float, delta: float, beta1: float, beta2: float
) -> None:
    low, high = sorted((beta1, beta2))
    base = dp.ApproxDP(epsilon, delta)
    a = repeat_until_success(base, failure_probability=low)
    b = repeat_until_success(base, failure_probability=high)
    assert a.epsilon <= b.epsilon and a.delta <= b.delta
    # never below Theorem 2's formula evaluated in floats (up to float noise)
    exact_delta = 2 * delta / (1 - low)
    assert a.delta >= exact_delta * (1 - 1e-15)
    assert a.epsilon >= (4 * epsilon - math.log1p(-exact_delta)) * (1 - 1e-15)


@settings(max_examples=200, deadline=None)
@given(epsilons, st.floats(0.0, 1e-3), st.floats(0.0, 0.05), st.integers(1, 200))
def test_a_cap_only_adds_delta(epsilon: float, delta: float, beta: float, cap: int) -> None:
    base = dp.ApproxDP(epsilon, 1e-6) if delta == 0.0 else dp.ApproxDP(epsilon, delta)
    uncapped = repeat_until_success(base, failure_probability=beta)
    try:
        capped = repeat_until_success(base, failure_probability=beta, max_attempts=cap)
    except dp.InvalidParameter:
        assert uncapped.delta + (1 + math.exp(uncapped.epsilon)) * beta**cap >= 1 - 1e-12
        return
    assert capped.epsilon == uncapped.epsilon
    assert capped.delta >= uncapped.delta + (1 + math.exp(capped.epsilon)) * beta**cap * (1 - 1e-12)


@settings(max_examples=200, deadline=None)
@given(epsilons, st.floats(0.0, 1e-3), st.floats(0.0, 1e-4))
def test_absorb_never_below_the_proven_bound(epsilon: float, delta: float, beta: float) -> None:
    base = dp.PureDP(epsilon) if delta == 0.0 else dp.ApproxDP(epsilon, delta)
    got = absorb_failure(base, failure_probability=beta)
    assert got.epsilon == epsilon
    assert got.delta >= delta + (1 + math.exp(epsilon)) * beta * (1 - 1e-15)
    assert got.delta >= delta + beta  # and so never below the post's (wrong) claim


def test_truncation_and_cap_term_values() -> None:
    assert truncation(epsilon=1.0, delta=1e-6, sensitivity=2.0) == pytest.approx(
        2 * math.log1p(math.expm1(1.0) / 2e-6), rel=1e-6
    )
    with pytest.raises(dp.InvalidParameter, match="'delta'"):
        truncation(epsilon=1.0, delta=0.5)
    assert 1.0 <= cap_term(0.0, 0.5, 1) <= 1.0 + 1e-14  # (1 + e^0) / 2, rounded up


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: absorb_failure(dp.PureDP(800.0), failure_probability=1e-9), "'epsilon'"),
        (lambda: absorb_failure(dp.PureDP(1.0), failure_probability=math.inf), "failure_prob"),
        (lambda: absorb_failure("1.0", failure_probability=0.1), "'base_guarantee'"),  # type: ignore[arg-type]
        (
            lambda: repeat_until_success(
                dp.PureDP(1.0), failure_probability=0.1, loss_guarantee=dp.ApproxDP(0.0, 1e-6)
            ),
            "'loss_guarantee'",
        ),
        (
            lambda: repeat_until_success(
                dp.PureDP(1.0),
                failure_probability=0.1,
                loss_guarantee=dp.ZCDP(1.0),  # type: ignore[arg-type]
            ),
            "'loss_guarantee'",
        ),
        (
            lambda: repeat_until_success(
                dp.ApproxDP(1.0, 1e-6), failure_probability=0.1, max_attempts=0
            ),
            "'max_attempts'",
        ),
        (
            lambda: reduce_failure(
                dp.PureDP(1.0), failure_probability=0.1, alpha=1.0, margin=1.0, loss_epsilon=0.0
            ),
            "'loss_epsilon'",
        ),
    ],
)
def test_bad_input(call: object, match: str) -> None:
    with pytest.raises(dp.InvalidParameter, match=match):
        call()  # type: ignore[operator]


def test_weak_loss_epsilon_warns() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(dp.WeakGuaranteeWarning):
            reduce_failure(
                dp.PureDP(1.0), failure_probability=0.1, alpha=1.0, margin=1.0, loss_epsilon=20.0
            )


def test_compare_rows() -> None:
    rows = compare(dp.PureDP(1.0), failure_probability=0.05, alpha=3.0)
    assert [r.construction for r in rows] == [
        "absorb_failure",
        "repeat_until_success",
        "reduce_failure",
    ]
    absorb, repeat, pure = rows
    assert absorb.loss_bound == 3.0 and absorb.failure_probability == 0.0
    assert repeat.loss_bound == pytest.approx(pure.loss_bound, rel=1e-12)  # same target
    assert 0.05**10 < repeat.failure_probability <= 0.05**9 * (1 + 1e-8)  # the default cap, 9
    assert repeat.expected_attempts == pytest.approx(1 / 0.95)
    assert 1.0 <= pure.expected_attempts <= 1 / (0.95 * 0.5)
    # a beta too large to absorb: that row is left out, not faked
    rows = compare(dp.PureDP(1.0), failure_probability=0.5, alpha=0.1)
    assert [r.construction for r in rows] == ["repeat_until_success", "reduce_failure"]
    rows = compare(dp.ApproxDP(1.0, 1e-6), failure_probability=1e-9, alpha=3.0)
    assert [r.construction for r in rows] == ["absorb_failure", "repeat_until_success"]
