"""Unit tests of dp.selection.noisy_binary_search: query count, calibration, threshold,
laziness, sentinels and bad input. Exact-distribution privacy tests are in
tests/statistical/test_shifted_inverse_privacy.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpkit as dp
from dpkit.accounting.events import pure_epsilon, zcdp_rho
from dpkit.errors import DataError, InvalidParameter
from dpkit.mechanisms import DownSensitivityBound
from dpkit.selection.binary_search import _tail, plan_search, search_steps
from dpkit.testing import seeded


def _max_depth(size: int) -> int:
    """Longest path of the search loop, by enumerating both branches at every query."""

    def depth(lo: int, hi: int) -> int:
        if lo + 1 >= hi:
            return 0
        k = (lo + hi) // 2
        return 1 + max(depth(lo, k), depth(k, hi))

    return depth(0, size - 1)


@pytest.mark.parametrize("size", [*range(1, 70), 127, 128, 129, 1000, 1025], ids=str)
def test_search_steps_is_the_longest_path(size: int) -> None:
    assert search_steps(size) == _max_depth(size)


def test_post_query_count_undercounts() -> None:
    # The post's ceil(log2 J) - 1 is too small for J = 4, and log2 J for J = 6.
    assert search_steps(4) == 2 > math.ceil(math.log2(4)) - 1
    assert search_steps(6) == 3 > math.log2(6)


@pytest.mark.parametrize("size", [3, 6, 100, 2**20 + 3], ids=str)
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.7], ids=lambda e: f"eps{e}")
def test_laplace_plan_spends_at_most_epsilon(size: int, epsilon: float) -> None:
    plan = plan_search(size, epsilon=epsilon, beta=0.05)
    assert plan.steps == search_steps(size)
    spent = pure_epsilon(plan.event)
    assert spent is not None and spent <= epsilon
    assert spent >= epsilon * (1 - 1e-9)  # and not wastefully less
    assert plan.guarantee == dp.PureDP(epsilon)


@pytest.mark.parametrize("size", [3, 6, 100, 2**20 + 3], ids=str)
@pytest.mark.parametrize("rho", [0.01, 0.5, 2.0], ids=lambda r: f"rho{r}")
def test_gaussian_plan_spends_at_most_rho(size: int, rho: float) -> None:
    plan = plan_search(size, rho=rho, beta=0.05)
    spent = zcdp_rho(plan.event)
    assert spent is not None and spent <= rho
    assert spent >= rho * (1 - 1e-9)
    assert pure_epsilon(plan.event) is None


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize("beta", [1e-6, 0.01, 0.05, 0.5], ids=str)
@pytest.mark.parametrize("size", [5, 1000, 10**6], ids=str)
def test_threshold_is_the_smallest_that_meets_beta(noise: str, beta: float, size: int) -> None:
    kwargs = {"epsilon": 1.0} if noise == "laplace" else {"rho": 0.5}
    plan = plan_search(size, beta=beta, **kwargs)  # type: ignore[arg-type]
    t = plan.threshold
    assert plan.failure <= beta
    assert plan.steps * _tail(plan.noise, plan.scale, t + 1) <= beta
    if t > 0:
        assert plan.steps * _tail(plan.noise, plan.scale, t) > beta
    assert plan.removals == 2 * t


def test_discrete_laplace_tail_is_exact() -> None:
    scale = 3.0
    q = math.exp(-1 / scale)
    z = np.arange(0, 400)
    pmf = (1 - q) / (1 + q) * q**z
    for m in (1, 2, 7, 20):
        assert _tail("laplace", scale, m) == pytest.approx(pmf[m:].sum(), rel=1e-10)
        assert _tail("laplace", scale, m) >= pmf[m:].sum()


def test_discrete_gaussian_tail_bound_holds() -> None:
    sigma = 2.5
    z = np.arange(-400, 401)
    weights = np.exp(-(z**2) / (2 * sigma**2))
    pmf = weights / weights.sum()
    for m in (1, 2, 5, 10, 15):
        assert _tail("gaussian", sigma, m) >= pmf[z >= m].sum()


def test_post_threshold_is_never_smaller() -> None:
    # The post: tau = sigma ln(log2|Y| / beta) (two-sided). Ours is one-sided and integer.
    for size in (17, 1000, 2**20):
        plan = plan_search(size, epsilon=1.0, beta=0.05)
        post = plan.scale * math.log(plan.steps / 0.05)
        assert plan.threshold <= post + 1


def test_callable_loss_is_evaluated_only_at_queries() -> None:
    size = 2**60 + 1  # far too big to materialise
    calls: list[int] = []
    answer = 2**40

    def loss(k: int) -> int:
        calls.append(k)
        return 0 if k >= answer else 1000

    release = dp.selection.noisy_binary_search(loss, size, rho=1.0, rng=seeded(0))
    assert len(calls) == len(set(calls)) <= search_steps(size) == 60
    assert all(0 < k < size - 1 for k in calls)  # the sentinels are never queried
    assert answer - 1 <= release.value <= answer  # loss jumps 1000 >> threshold


def test_array_loss_and_release_fields() -> None:
    loss = np.array([np.inf, 50, 40, 30, 20, 10, 5, 0, 0, 0])
    release = dp.selection.noisy_binary_search(loss, epsilon=1.0, beta=0.1, rng=seeded(1))
    assert isinstance(release.value, int) and 1 <= release.value <= 9
    assert isinstance(release.error, DownSensitivityBound)
    assert release.error.confidence >= 0.9
    assert release.mechanism == "NoisyBinarySearch" and release.secure is False


def test_explicit_threshold_reports_its_confidence() -> None:
    release = dp.selection.noisy_binary_search(
        np.zeros(100), epsilon=1.0, threshold=0, rng=seeded(2)
    )
    assert release.error is not None
    assert release.error.removals == 0 and release.error.confidence < 0.5


@pytest.mark.parametrize("size", [1, 2], ids=str)
def test_tiny_grids_need_no_query(size: int) -> None:
    release = dp.selection.noisy_binary_search(lambda k: 1 / 0, size, epsilon=1.0, rng=seeded(3))
    assert release.value == size - 1
    assert isinstance(release.event, dp.accounting.events.NoOpEvent)


def test_infinite_loss_goes_up() -> None:
    loss = np.array([np.inf, np.inf, np.inf, 0.0])
    for seed in range(5):
        assert dp.selection.noisy_binary_search(loss, epsilon=1.0, rng=seeded(seed)).value == 3


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"epsilon": 1.0, "rho": 1.0}, InvalidParameter),
        ({}, InvalidParameter),
        ({"epsilon": -1.0}, InvalidParameter),
        ({"epsilon": float("nan")}, InvalidParameter),
        ({"rho": 0.0}, InvalidParameter),
        ({"epsilon": 1.0, "beta": 0.0}, InvalidParameter),
        ({"epsilon": 1.0, "beta": 1.0}, InvalidParameter),
        ({"epsilon": 1.0, "threshold": -1}, InvalidParameter),
        ({"epsilon": 1.0, "threshold": 1.5}, InvalidParameter),
        ({"epsilon": 1.0, "sensitivity": 0}, InvalidParameter),
        ({"epsilon": 1e-13}, InvalidParameter),
    ],
    ids=[
        "both",
        "neither",
        "negative-eps",
        "nan-eps",
        "zero-rho",
        "beta-0",
        "beta-1",
        "threshold-neg",
        "threshold-float",
        "sensitivity-0",
        "tiny-eps",
    ],
)
def test_bad_parameters(kwargs: dict[str, float], error: type[Exception]) -> None:
    with pytest.raises(error):
        dp.selection.noisy_binary_search(np.zeros(10), rng=seeded(0), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "loss",
    [np.array([np.inf, 1.5, 0.0, 0.0]), np.array([np.inf, -1.0, 0.0, 0.0]), np.zeros((2, 2))],
    ids=["fractional", "negative", "2-d"],
)
def test_bad_losses(loss: np.ndarray) -> None:
    with pytest.raises(DataError):
        dp.selection.noisy_binary_search(loss, epsilon=1.0, rng=seeded(0))


def test_callable_needs_size() -> None:
    with pytest.raises(InvalidParameter):
        dp.selection.noisy_binary_search(lambda k: 0, epsilon=1.0)
