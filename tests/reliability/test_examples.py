"""The worked examples of docs/reliability.md: a bounded mean and a median, made never-failing.

Mean of ``n`` values in [0, 1] (``n`` public, one value replaced): Laplace noise of
scale ``1/(n eps)`` on the mean; the loss ``n |y - mean|`` has sensitivity 1 and
``P[loss > alpha] = e^(-eps alpha)`` exactly, so ``alpha = ln(1/beta)/eps``.

Median: the coarse inverse-sensitivity median on a grid (``dp.median(..., refine=False)``);
the rank loss has sensitivity 1 and ``P[loss > k] <= beta`` for ``k = rank_target``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import dpkit as dp
from dpkit.reliability import (
    NeverFail,
    ReducedFailure,
    RepeatUntilSuccess,
    check_loss_sensitivity,
    rank_loss,
    rank_target,
)
from dpkit.testing import seeded

ALPHA_TEST = 1e-6
N = 200
EPS = 0.5
DATA = np.random.default_rng(0).beta(2, 5, N)  # values in [0, 1]


def mean_mechanism(data: np.ndarray, rng: dp.Random) -> float:
    exact = float(np.clip(data, 0, 1).mean())
    return float(dp.noise.laplace(exact, scale=1 / (N * EPS), rng=rng))


def mean_loss(y: float, data: np.ndarray) -> float:
    return N * abs(y - float(np.clip(data, 0, 1).mean()))


def test_mean_loss_has_sensitivity_one_on_extreme_neighbours() -> None:
    outputs = [-1.0, 0.0, 0.3, 0.5, 2.0]
    pairs = []
    for i in (0, 1, N - 1):
        for new in (0.0, 1.0, 5.0):  # 5.0 is clamped to 1
            other = DATA.copy()
            other[i] = new
            pairs.append((DATA, other))
    check_loss_sensitivity(mean_loss, outputs, pairs)
    # a loss on the *sum* has sensitivity 1 only per unit; caught:
    with pytest.raises(dp.InvalidParameter, match="pair #"):
        check_loss_sensitivity(lambda y, d: N * mean_loss(y, d), outputs, pairs)


def test_mean_three_ways() -> None:
    exact = float(DATA.mean())
    rng = seeded(5)
    tiny = 1e-9
    absorb = NeverFail(
        mean_mechanism, loss=mean_loss, alpha=math.log(1 / tiny) / EPS,
        failure_probability=tiny, fallback=lambda d: float(d.mean()), guarantee=dp.PureDP(EPS),
    )  # fmt: skip
    beta = 0.05
    repeat = RepeatUntilSuccess(
        mean_mechanism, loss=mean_loss, alpha=math.log(1 / beta) / EPS,
        failure_probability=beta, guarantee=dp.PureDP(EPS),
        loss_guarantee=dp.ApproxDP(EPS, 1e-6),
    )  # fmt: skip
    pure = ReducedFailure(
        mean_mechanism, loss=mean_loss, alpha=math.log(1 / beta) / EPS,
        failure_probability=beta, margin=repeat.margin, loss_epsilon=EPS,
        guarantee=dp.PureDP(EPS),
    )  # fmt: skip
    for wrapper in (absorb, repeat):
        for _ in range(300):
            value = wrapper.release(DATA, rng=rng).value
            assert abs(value - exact) <= wrapper.loss_bound / N
    misses = sum(
        abs(pure.release(DATA, rng=rng).value - exact) > pure.loss_bound / N for _ in range(300)
    )
    assert misses <= stats.binom.ppf(1 - ALPHA_TEST, 300, pure.remaining_failure_probability)
    assert absorb.guarantee.delta < 4e-9 and repeat.guarantee.epsilon < 2.01
    assert pure.guarantee == dp.PureDP(2.0)


GRID = dp.Grid.linear(0, 1, size=201)


def median_mechanism(data: np.ndarray, rng: dp.Random) -> float:
    return dp.median(data, grid=GRID, epsilon=EPS, refine=False, rng=rng).value


def test_rank_target_matches_the_median_release() -> None:
    release = dp.median(DATA, grid=GRID, epsilon=EPS, refine=False, confidence=0.9, rng=seeded(0))
    assert rank_target(GRID, epsilon=EPS, failure_probability=0.1) == release.error.rank_radius
    # the failure bound holds on this data: P[loss > alpha] <= beta (binomial, 1e-6)
    loss = rank_loss(GRID)
    alpha = rank_target(GRID, epsilon=EPS, failure_probability=0.1)
    rng = seeded(1)
    misses = sum(loss(median_mechanism(DATA, rng), DATA) > alpha for _ in range(400))
    assert misses <= stats.binom.ppf(1 - ALPHA_TEST, 400, 0.1)


def test_rank_loss_has_sensitivity_one() -> None:
    loss = rank_loss(GRID)
    base = np.round(DATA[:30], 2)
    pairs = [(base, np.append(base, v)) for v in (0.0, 0.3, 1.0)]
    pairs += [(base, np.delete(base, i)) for i in (0, 5, 29)]
    check_loss_sensitivity(loss, list(GRID.points[::10]), pairs)
    assert loss(float(np.median(base)), base) == 0.0


def test_median_never_fails() -> None:
    beta = 0.05
    alpha = rank_target(GRID, epsilon=EPS, failure_probability=beta)
    loss = rank_loss(GRID)
    wrapper = RepeatUntilSuccess(
        median_mechanism, loss=loss, alpha=alpha, failure_probability=beta,
        guarantee=dp.PureDP(EPS), loss_guarantee=dp.ApproxDP(EPS, 1e-6),
    )  # fmt: skip
    rng = seeded(2)
    for _ in range(100):
        assert loss(wrapper.release(DATA, rng=rng).value, DATA) <= wrapper.loss_bound


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: rank_loss("grid"), "'grid'"),  # type: ignore[arg-type]
        (lambda: rank_loss(GRID, 1.5), "'q'"),
        (lambda: rank_loss(GRID, neighbouring="swap"), "'neighbouring'"),  # type: ignore[arg-type]
        (lambda: rank_target(GRID, epsilon=0.0, failure_probability=0.1), "'epsilon'"),
        (lambda: rank_target(GRID, epsilon=1.0, failure_probability=0.0), "failure_probability"),
        (lambda: check_loss_sensitivity(mean_loss, [0.0], []), "'neighbours'"),
    ],
)
def test_bad_input(call: object, match: str) -> None:
    with pytest.raises(dp.InvalidParameter, match=match):
        call()  # type: ignore[operator]
