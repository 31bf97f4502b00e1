"""Repeat until success (Steinke 2025, Theorems 1 and 2): output law, guarantee, cap, bad input.

The output law of the wrapper is, by construction, the base mechanism's law conditioned
on the noisy loss being at most ``alpha + tau``. It is computed in closed form for an
exponential-mechanism base on 9 outputs (truncated-Laplace CDF), checked against
releases of the real wrapper (chi-square, false-failure rate 1e-6), and the same test
rejects a wrapper whose margin is 30% too small (power). The exact law also satisfies
Theorem 1's guarantee, capped and uncapped.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pytest

import dpkit as dp
from dpkit.reliability import (
    AttemptsExhausted,
    MechanismFailed,
    RepeatUntilSuccess,
    repeat_until_success,
)
from dpkit.reliability.guarantees import cap_term
from dpkit.reliability.repeat import CAP_SHARE
from dpkit.testing import assert_pmf, seeded

ALPHA_TEST = 1e-6
OUTPUTS = np.arange(9)
EPSILON = 1.0
LOSS_GUARANTEE = dp.ApproxDP(1.0, 0.05)  # a thick truncated edge: tau ~ 2.9
TARGET = 3.0


def loss(y: int, x: int) -> float:
    """Sensitivity 1 in x in {0, 1}: l(y, 0) = y, l(y, 1) = max(y - 1, 0)."""
    return float(max(y - x, 0))


def losses(x: int) -> np.ndarray:
    return np.maximum(OUTPUTS - x, 0).astype(float)


def base_law(x: int) -> np.ndarray:
    weights = np.exp(-EPSILON * losses(x) / 2)
    return weights / weights.sum()


BETA = max(base_law(x)[losses(x) > TARGET].sum() for x in (0, 1))


@functools.cache
def _base_cdf(x: int) -> np.ndarray:
    cdf = np.cumsum(base_law(x))
    cdf[-1] = 1.0  # so that every uniform in [0, 1) falls in a cell
    return cdf


def base(x: int, rng: dp.Random) -> int:
    """The exponential mechanism on scores -l(y, x): epsilon-DP, law base_law(x).

    Sampled by inverting its CDF at a 53-bit uniform drawn from ``rng``: the wrapper is
    what these tests check, and dp.ExponentialMechanism's own sampler (tested against
    the same softmax in tests/statistical/test_selection_statistics.py) took about a
    third of the sampling tests' time here.
    """
    u = rng.getrandbits(53) / 2.0**53
    return int(np.searchsorted(_base_cdf(x), u, side="right"))


def wrapper(**change: Any) -> RepeatUntilSuccess:
    options: dict[str, Any] = {
        "loss": loss,
        "alpha": TARGET,
        "failure_probability": BETA,
        "guarantee": dp.PureDP(EPSILON),
        "loss_guarantee": LOSS_GUARANTEE,
    }
    options.update(change)
    return RepeatUntilSuccess(base, **options)


def tlap_cdf(c: np.ndarray, scale: float, bound: float) -> np.ndarray:
    """P[X <= c] for X with density proportional to exp(-|x|/scale) on [-bound, bound]."""
    c = np.clip(c, -bound, bound)
    edge = math.exp(-bound / scale)
    half = 2 * (1 - edge)
    below = (np.exp(c / scale) - edge) / half
    above = 1 - (np.exp(-c / scale) - edge) / half
    return np.where(c <= 0, below, above)


def wrapper_law(x: int, w: RepeatUntilSuccess, cap: int | None = None) -> np.ndarray:
    """Exact law of the release (and, with a cap, a last entry for AttemptsExhausted)."""
    accept = tlap_cdf(w.threshold - losses(x), w.loss_noise.scale, w.loss_noise.bound)
    joint = base_law(x) * accept
    a = joint.sum()
    if cap is None:
        return joint / a
    stop = (1 - a) ** cap
    return np.append(joint / a * (1 - stop), stop)


def hockey_stick(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    e = math.exp(epsilon)
    return float(max(np.maximum(p - e * q, 0).sum(), np.maximum(q - e * p, 0).sum()))


def test_guarantee_is_theorem_1() -> None:
    w = wrapper()
    bar_eps, bar_delta = EPSILON + 1.0, 0.05
    uncapped_eps = 2 * bar_eps - math.log1p(-bar_delta / (1 - BETA))
    assert w.guarantee.epsilon == pytest.approx(uncapped_eps, rel=1e-12)
    assert w.guarantee.epsilon >= uncapped_eps
    uncapped_delta = bar_delta / (1 - BETA)
    assert uncapped_delta < w.guarantee.delta <= uncapped_delta * (1 + CAP_SHARE) * (1 + 1e-12)
    assert w.guarantee == repeat_until_success(
        dp.PureDP(EPSILON),
        failure_probability=BETA,
        loss_guarantee=LOSS_GUARANTEE,
        max_attempts=w.max_attempts,
    )
    # tau from the exact truncated-Laplace support, not the post's shorthand
    support = math.log1p(math.expm1(1.0) / (2 * 0.05))
    assert w.loss_noise.bound == pytest.approx(support, rel=1e-12)
    assert w.margin == pytest.approx(support + w.loss_noise.granularity, rel=1e-12)
    assert w.loss_bound >= TARGET + 2 * support


def test_equal_split_is_theorem_2() -> None:
    eps, delta, beta = 0.5, 1e-6, 0.2
    w = RepeatUntilSuccess(
        lambda x, rng: x, loss=loss, alpha=1.0, failure_probability=beta,
        guarantee=dp.ApproxDP(eps, delta),
    )  # fmt: skip
    assert w.loss_guarantee == dp.ApproxDP(eps, delta)
    theorem_2 = repeat_until_success(dp.ApproxDP(eps, delta), failure_probability=beta)
    assert theorem_2.epsilon == pytest.approx(4 * eps - math.log1p(-2 * delta / (1 - beta)))
    assert theorem_2.delta == pytest.approx(2 * delta / (1 - beta), rel=1e-15)


@pytest.mark.parametrize("x", [0, 1])
def test_output_law_matches_and_a_small_margin_is_caught(x: int) -> None:
    n = 12_000
    w = wrapper()
    rng = seeded(10 + x)
    draws = [w.release(x, rng=rng).value for _ in range(n)]
    exact = wrapper_law(x, w)
    assert_pmf(draws, dict(enumerate(exact)), alpha=ALPHA_TEST)
    # power: the margin tau 30% too small (accept z <= alpha + 0.7 tau)
    wrong = wrapper()
    wrong.threshold = TARGET + 0.7 * wrong.margin
    rng = seeded(20 + x)
    wrong_draws = [wrong.release(x, rng=rng).value for _ in range(n)]
    with pytest.raises(AssertionError):
        assert_pmf(wrong_draws, dict(enumerate(exact)), alpha=ALPHA_TEST)


@pytest.mark.parametrize("cap", [None, 4, 8, 20])
def test_exact_law_within_theorem_1(cap: int | None) -> None:
    w = wrapper() if cap is None else wrapper(max_attempts=cap)
    if cap is None:
        stated = repeat_until_success(
            dp.PureDP(EPSILON), failure_probability=BETA, loss_guarantee=LOSS_GUARANTEE
        )
    else:
        stated = w.guarantee
    p, q = wrapper_law(0, w, cap), wrapper_law(1, w, cap)
    assert hockey_stick(p, q, stated.epsilon) <= stated.delta
    # the acceptance probability is at least 1 - beta at both inputs (Theorem 1's premise)
    for x in (0, 1):
        accept = tlap_cdf(w.threshold - losses(x), w.loss_noise.scale, w.loss_noise.bound)
        assert (base_law(x) * accept).sum() >= 1 - BETA


def test_cap_term_and_default_cap() -> None:
    w = wrapper()
    uncapped = repeat_until_success(
        dp.PureDP(EPSILON), failure_probability=BETA, loss_guarantee=LOSS_GUARANTEE
    )
    target = CAP_SHARE * uncapped.delta
    assert cap_term(uncapped.epsilon, BETA, w.max_attempts) <= target
    assert cap_term(uncapped.epsilon, BETA, w.max_attempts - 1) > target  # the smallest
    exact = (1 + math.exp(uncapped.epsilon)) * BETA**w.max_attempts
    assert exact <= cap_term(uncapped.epsilon, BETA, w.max_attempts) <= exact * (1 + 1e-12)
    assert cap_term(1.0, 0.0, 5) == 0.0
    assert 0 < cap_term(1.0, 0.5, 10_000) < 1e-300  # underflow stays a (tiny) upper bound


def test_wrong_alpha_stops_at_the_cap_loudly() -> None:
    calls: list[int] = []

    def always_bad(x: int, rng: dp.Random) -> int:
        calls.append(1)
        return 8  # loss 8 or 7, far above alpha = 0

    w = RepeatUntilSuccess(
        always_bad, loss=loss, alpha=0.0, failure_probability=0.01,
        guarantee=dp.PureDP(1.0), loss_guarantee=dp.ApproxDP(1.0, 0.05), max_attempts=7,
    )  # fmt: skip
    with pytest.raises(AttemptsExhausted, match="probably wrong") as info:
        w.release(0, rng=seeded(1))
    assert len(calls) == 7
    assert info.value.event == w.event and info.value.guarantee == w.guarantee
    # what still holds when alpha is wrong: basic composition of the 7 attempts
    assert w.guarantee_if_alpha_is_wrong == dp.ApproxDP(14.0, 0.35000000000000003)
    w_long = RepeatUntilSuccess(
        always_bad, loss=loss, alpha=0.0, failure_probability=0.01,
        guarantee=dp.PureDP(1.0), loss_guarantee=dp.ApproxDP(1.0, 0.05), max_attempts=30,
    )  # fmt: skip
    assert w_long.guarantee_if_alpha_is_wrong is None  # 30 x 0.05 >= 1


def test_release_fields() -> None:
    release = wrapper().release(0, rng=seeded(2))
    assert release.mechanism == "RepeatUntilSuccess" and not release.secure
    assert release.event == dp.accounting.ApproxEvent(*_pair(wrapper().guarantee))
    assert release.error is None and loss(release.value, 0) <= wrapper().loss_bound


def _pair(g: dp.ApproxDP) -> tuple[float, float]:
    return g.epsilon, g.delta


def test_loss_sensitivity_scales_the_estimate() -> None:
    w1 = wrapper()
    w3 = wrapper(loss_sensitivity=3.0)
    assert w3.loss_noise.sensitivity == 3.0
    assert w3.margin == pytest.approx(3 * w1.margin, rel=1e-6)
    assert w3.guarantee == w1.guarantee


# --- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"alpha": -0.5}, "'alpha'"),
        ({"alpha": math.nan}, "'alpha'"),
        ({"failure_probability": 0.95}, "Theorem 1 needs"),  # beta >= 1 - delta_bar
        ({"failure_probability": 1.0}, "'failure_probability'"),
        ({"loss_guarantee": dp.PureDP(1.0)}, "needs delta > 0"),
        ({"loss_guarantee": dp.ZCDP(1.0)}, "'loss_guarantee'"),
        ({"loss_sensitivity": 0.0}, "'loss_sensitivity'"),
        ({"loss_sensitivity": math.inf}, "'loss_sensitivity'"),
        ({"max_attempts": 0}, "'max_attempts'"),
        ({"max_attempts": 2.5}, "'max_attempts'"),
        ({"max_attempts": True}, "'max_attempts'"),
        ({"max_attempts": 1, "failure_probability": 0.5}, "guarantees nothing"),
        ({"loss": "abs"}, "'loss'"),
    ],
)
def test_bad_parameters(change: dict[str, Any], match: str) -> None:
    with pytest.raises(dp.InvalidParameter, match=match):
        wrapper(**change)


def test_pure_base_needs_a_loss_guarantee() -> None:
    with pytest.raises(dp.InvalidParameter, match="needs delta > 0"):
        RepeatUntilSuccess(dp.Laplace.calibrate(epsilon=1.0), loss=loss, alpha=1.0,
                           failure_probability=0.1)  # fmt: skip
    with pytest.raises(dp.InvalidParameter, match="needs delta > 0"):
        repeat_until_success(dp.PureDP(1.0), failure_probability=0.1)


def test_theorem_2_condition_boundary() -> None:
    delta = 0.01
    repeat_until_success(dp.ApproxDP(1.0, delta), failure_probability=0.979)
    with pytest.raises(dp.InvalidParameter, match="Theorem 1 needs"):
        repeat_until_success(dp.ApproxDP(1.0, delta), failure_probability=0.98)  # = 1 - 2 delta


def test_raising_mechanism_or_loss() -> None:
    def broken(x: int, rng: dp.Random) -> int:
        raise RuntimeError("secret row 42")

    w = RepeatUntilSuccess(broken, loss=loss, alpha=1.0, failure_probability=0.1,
                           guarantee=dp.ApproxDP(1.0, 1e-6))  # fmt: skip
    with pytest.raises(MechanismFailed) as info:
        w.release(0, rng=seeded(0))
    assert "secret" not in str(info.value) and isinstance(info.value.__cause__, RuntimeError)
    assert info.value.event == w.event

    w = wrapper(loss=lambda y, x: "far")
    with pytest.raises(MechanismFailed) as info:
        w.release(0, rng=seeded(0))
    assert isinstance(info.value.__cause__, dp.InvalidParameter)
