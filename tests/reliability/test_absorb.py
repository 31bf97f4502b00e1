"""Absorbing the failure into delta: the proven bound, the post's counterexample, bad input.

The post's ``(epsilon, delta + beta)`` is refuted three ways: exactly on the digest's
two-point example (generalised to ``beta <= 1/2``), by a black-box audit of the
wrapper itself (``dpkit.audit``, confidence 1 - 1e-6), and by a random search over
small instances, where dpkit's ``delta + (1 + e^eps) beta`` always holds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

import dpkit as dp
from dpkit.audit import audit
from dpkit.reliability import MechanismFailed, NeverFail, absorb_failure, never_fail
from dpkit.testing import seeded

ALPHA = 1e-6

# --- the digest's counterexample -------------------------------------------------------
# Outputs 0 = a, 1 = b, 2 = c. M ignores its input (0-DP): a and b with probability
# beta each, c otherwise. Losses: l(a, x) = l(b, x') = 0, l(b, x) = l(a, x') = 10,
# l(c, .) = 0; alpha = 5; the fallback returns a on x and b on x'. Then M~(x) is a or c,
# M~(x') is b or c: P[M~(x) = a] = 2 beta, P[M~(x') = a] = 0.
LOSSES = {"x": (0.0, 10.0, 0.0), "x'": (10.0, 0.0, 0.0)}
FALLBACK = {"x": 0, "x'": 1}


def _counterexample(beta_quarters: int, outcome: int | None = None) -> NeverFail:
    """The wrapper; M draws from 4 equally likely slots (``beta = beta_quarters / 4``)."""

    def mechanism(data: str, rng: dp.Random) -> int:
        slot = rng.integers(4) if outcome is None else outcome
        return 0 if slot < beta_quarters else 1 if slot < 2 * beta_quarters else 2

    return never_fail(
        mechanism,
        loss=lambda y, data: LOSSES[data][y],
        alpha=5.0,
        failure_probability=beta_quarters / 4,
        fallback=lambda data: FALLBACK[data],
        guarantee=dp.PureDP(0.0),
    )


def _exact_law(data: str) -> np.ndarray:
    """The wrapper's output law with beta = 1/4, by running it on each slot of M."""
    law = np.zeros(3)
    for slot in range(4):
        wrapper = _counterexample(1, outcome=slot)
        law[wrapper.release(data, rng=seeded(0)).value] += 0.25
    return law


def _hockey_stick(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    return float(
        max(
            np.maximum(p - math.exp(epsilon) * q, 0).sum(),
            np.maximum(q - math.exp(epsilon) * p, 0).sum(),
        )
    )


def test_counterexample_needs_delta_plus_one_plus_e_eps_beta() -> None:
    beta = 0.25
    wrapper = _counterexample(1)
    needed = _hockey_stick(_exact_law("x"), _exact_law("x'"), 0.0)
    assert needed == 2 * beta  # = delta + (1 + e^0) beta: dpkit's bound is tight here
    assert needed > 0.0 + beta  # the post's (eps, delta + beta) is false
    assert wrapper.guarantee == dp.ApproxDP(0.0, 0.5)


def test_digest_two_point_example_is_refused() -> None:
    # beta = 1/2: the wrapper is not DP at all (M~(x) = a, M~(x') = b always).
    with pytest.raises(dp.InvalidParameter, match="guarantees nothing"):
        _counterexample(2)


def _outputs(wrapper: NeverFail) -> Any:
    def mechanism(data: str, n: int, rng: dp.Random) -> np.ndarray:
        return np.array([wrapper.release(data, rng=rng).value for _ in range(n)])

    return mechanism


def test_audit_refutes_the_posts_bound_and_not_dpkits() -> None:
    wrapper = _counterexample(1)
    samples = 20_000
    post = audit(
        _outputs(wrapper),
        "x",
        "x'",
        delta=0.25,  # the post's delta + beta
        samples=samples,
        attack="histogram",
        confidence=1 - ALPHA,
        rng=seeded(1),
    )
    # true epsilon at delta = beta is ln((1 - beta)/(1 - 2 beta)) = ln 1.5 (test {a})
    assert post.refutes(0.0) and post.epsilon_lower_bound > 0.3
    ours = audit(
        _outputs(wrapper),
        "x",
        "x'",
        delta=wrapper.guarantee.delta,
        samples=samples,
        attack="histogram",
        confidence=1 - ALPHA,
        rng=seeded(2),
    )
    assert not ours.refutes(wrapper.guarantee.epsilon)


def test_random_small_instances_never_exceed_the_proven_bound() -> None:
    """Exact laws of the wrapper on random epsilon-DP pairs over 4 outputs (the digest's
    search): the needed delta is below (1 + e^eps) beta, and above the post's beta often."""
    gen = np.random.default_rng(17)
    above_post = 0
    worst_ratio = 0.0
    for _ in range(3000):
        epsilon = float(gen.choice([0.0, 0.1, 0.5, 1.0, 2.0]))
        p = gen.dirichlet(np.ones(4))
        q = p * np.exp(epsilon * gen.uniform(-0.5, 0.5, 4))
        q /= q.sum()  # every ratio within e^eps: M is epsilon-DP
        loss_x = gen.choice([0.0, 10.0], 4)
        loss_xp = gen.choice([0.0, 10.0], 4)
        beta = max(p[loss_x > 5].sum(), q[loss_xp > 5].sum())
        if beta == 0.0:
            continue
        # fallbacks: a fifth output 4 (loss 0 on both) or any loss-0 output
        fb_x = int(np.flatnonzero(loss_x == 0)[0]) if (loss_x == 0).any() else 4
        fb_xp = int(np.flatnonzero(loss_xp == 0)[0]) if (loss_xp == 0).any() else 4
        law_x = np.append(np.where(loss_x <= 5, p, 0.0), 0.0)
        law_x[fb_x] += p[loss_x > 5].sum()
        law_xp = np.append(np.where(loss_xp <= 5, q, 0.0), 0.0)
        law_xp[fb_xp] += q[loss_xp > 5].sum()
        needed = _hockey_stick(law_x, law_xp, epsilon)
        assert needed <= (1 + math.exp(epsilon)) * beta * (1 + 1e-12)
        above_post += needed > beta * (1 + 1e-9)
        worst_ratio = max(worst_ratio, needed / beta)
    assert above_post > 0 and worst_ratio > 1.5  # the post's bound fails on many


# --- behaviour --------------------------------------------------------------------------


def _laplace_wrapper(beta: float, calls: list[int]) -> NeverFail:
    def fallback(x: float) -> float:
        calls.append(1)
        return x

    return never_fail(
        dp.Laplace.calibrate(epsilon=1.0),
        loss=lambda y, x: abs(y - x),
        alpha=math.log(1 / beta),  # P[|Lap(1)| > ln(1/beta)] = beta exactly
        failure_probability=beta,
        fallback=fallback,
    )


def test_loss_bound_and_fallback_rate() -> None:
    beta, n = 0.1, 5000
    calls: list[int] = []
    wrapper = _laplace_wrapper(beta, calls)
    rng = seeded(3)
    for x in (0.0, -7.5, 1e12):
        for _ in range(n // 3 + 1):
            assert abs(wrapper.release(x, rng=rng).value - x) <= wrapper.loss_bound
    runs = 3 * (n // 3 + 1)
    # the fallback runs exactly when Laplace fails: Binomial(runs, beta), two-sided 1e-6
    low, high = stats.binom.ppf([ALPHA / 2, 1 - ALPHA / 2], runs, beta)
    assert low <= len(calls) <= high
    # power: had the fallback run at a 30%-wrong rate, the interval would reject w.p. > 95%
    assert stats.binom.cdf(high, runs, 1.3 * beta) < 0.05
    assert stats.binom.sf(low - 1, runs, 0.7 * beta) < 0.05
    assert wrapper.guarantee == absorb_failure(dp.PureDP(1.0), failure_probability=beta)
    release = wrapper.release(0.0, rng=rng)
    assert release.event == dp.accounting.ApproxEvent(1.0, wrapper.guarantee.delta)
    assert release.mechanism == "NeverFail" and not release.secure


# --- bad input --------------------------------------------------------------------------

GOOD: dict[str, Any] = {
    "loss": lambda y, x: abs(y - x),
    "alpha": 3.0,
    "failure_probability": 0.01,
    "fallback": lambda x: x,
}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"alpha": -1.0}, "'alpha'"),
        ({"alpha": math.nan}, "'alpha'"),
        ({"alpha": math.inf}, "'alpha'"),
        ({"failure_probability": 1.0}, "'failure_probability'"),
        ({"failure_probability": -0.1}, "'failure_probability'"),
        ({"failure_probability": math.nan}, "'failure_probability'"),
        ({"failure_probability": "0.1"}, "'failure_probability'"),
        ({"failure_probability": 0.3}, "guarantees nothing"),  # (1 + e) 0.3 >= 1
        ({"loss": 3}, "'loss'"),
        ({"fallback": None}, "'fallback'"),
    ],
)
def test_bad_parameters(change: dict[str, Any], match: str) -> None:
    with pytest.raises(dp.InvalidParameter, match=match):
        never_fail(dp.Laplace.calibrate(epsilon=1.0), **{**GOOD, **change})


def test_bad_mechanisms() -> None:
    with pytest.raises(dp.InvalidParameter, match="'mechanism'"):
        never_fail(42, **GOOD)
    with pytest.raises(dp.InvalidParameter, match="declared with its guarantee"):
        never_fail(lambda data, rng: data, **GOOD)
    with pytest.raises(dp.InvalidParameter, match="'guarantee'"):
        never_fail(lambda data, rng: data, **GOOD, guarantee=dp.ZCDP(0.5))  # type: ignore[arg-type]
    with pytest.raises(dp.InvalidParameter, match="'base_guarantee'"):
        absorb_failure(dp.ZCDP(0.5), failure_probability=0.1)  # type: ignore[arg-type]
    laplace = dp.Laplace.calibrate(epsilon=1.0)
    with pytest.raises(dp.InvalidParameter, match="do not declare"):
        never_fail(laplace, **GOOD, guarantee=dp.PureDP(0.5))
    assert never_fail(laplace, **GOOD, guarantee=dp.PureDP(1.0)).base_guarantee == dp.PureDP(1.0)
    gaussian = dp.Gaussian.calibrate(epsilon=1.0, delta=1e-6)
    wrapped = never_fail(gaussian, **{**GOOD, "failure_probability": 1e-9})
    assert wrapped.base_guarantee == gaussian.guarantee


def test_raising_parts_become_charged_failures() -> None:
    def broken(data: float, rng: dp.Random) -> float:
        raise ZeroDivisionError("depends on the data")

    wrapper = never_fail(broken, **GOOD, guarantee=dp.PureDP(1.0))
    with pytest.raises(MechanismFailed) as info:
        wrapper.release(1.0, rng=seeded(0))
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert "depends on the data" not in str(info.value)  # the message never quotes it
    assert info.value.event == wrapper.event and info.value.guarantee == wrapper.guarantee

    def nan_loss(y: float, x: float) -> float:
        return math.nan

    wrapper = never_fail(dp.Laplace.calibrate(epsilon=1.0), **{**GOOD, "loss": nan_loss})
    with pytest.raises(MechanismFailed) as info:
        wrapper.release(1.0, rng=seeded(0))
    assert isinstance(info.value.__cause__, dp.InvalidParameter)

    far = never_fail(
        lambda data, rng: data + 100.0,
        **{**GOOD, "fallback": lambda x: x + 50.0},
        guarantee=dp.PureDP(1.0),
    )
    with pytest.raises(MechanismFailed, match="ValueError"):
        far.release(0.0, rng=seeded(0))  # the fallback misses alpha: never returned
