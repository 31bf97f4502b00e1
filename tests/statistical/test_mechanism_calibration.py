"""The noise each mechanism adds has exactly the calibrated distribution.

alpha = 1e-6 per check with fixed seeds; every check has a power counterpart that
must reject a scale (or epsilon) 30% off, so a wrong calibration cannot pass.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import dpkit as dp
from dpkit.testing import assert_binomial, assert_cdf, assert_pmf, seeded

N = 100_000


def rejects(check) -> bool:
    try:
        check()
    except AssertionError:
        return True
    return False


@pytest.mark.parametrize(
    ("epsilon", "sensitivity", "x"), [(1.0, 1.0, 0.0), (0.1, 5.0, 1234.5), (3.0, 0.25, -2.0)]
)
def test_laplace_mechanism_noise_scale(epsilon: float, sensitivity: float, x: float) -> None:
    mechanism = dp.Laplace.calibrate(epsilon=epsilon, sensitivity=sensitivity)
    noise = mechanism.release(np.full(N, x), rng=seeded(1)).value - x
    scale = sensitivity / epsilon
    assert_cdf(noise, stats.laplace(scale=scale).cdf)
    for factor in (0.7, 1.3):
        assert rejects(lambda f=factor: assert_cdf(noise, stats.laplace(scale=scale * f).cdf))


@pytest.mark.parametrize(("epsilon", "delta"), [(1.0, 1e-5), (0.3, 1e-8), (4.0, 1e-3)])
def test_gaussian_mechanism_noise_scale(epsilon: float, delta: float) -> None:
    mechanism = dp.Gaussian.calibrate(epsilon=epsilon, delta=delta, sensitivity=2.0)
    noise = mechanism.release(np.full(N, 10.0), rng=seeded(2)).value - 10.0
    sigma = dp.accounting.gaussian_sigma_analytic(epsilon, delta, 2.0)
    assert_cdf(noise, stats.norm(scale=sigma).cdf)
    for factor in (0.7, 1.3):
        assert rejects(lambda f=factor: assert_cdf(noise, stats.norm(scale=sigma * f).cdf))


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(1.0, 1), (0.2, 3)])
def test_discrete_laplace_mechanism_noise_scale(epsilon: float, sensitivity: int) -> None:
    mechanism = dp.DiscreteLaplace.calibrate(epsilon=epsilon, sensitivity=sensitivity)
    noise = mechanism.release(np.full(N, 50), rng=seeded(3)).value - 50

    def pmf(scale: float):
        r = math.exp(-1 / scale)
        return lambda k: (1 - r) / (1 + r) * r ** np.abs(k)

    t = sensitivity / epsilon
    assert_pmf(noise, pmf(t))
    for factor in (0.7, 1.3):
        assert rejects(lambda f=factor: assert_pmf(noise, pmf(t * f)))


def test_discrete_gaussian_mechanism_noise_scale() -> None:
    mechanism = dp.DiscreteGaussian.calibrate(rho=0.125, sensitivity=1.0)  # sigma = 2
    noise = mechanism.release(np.zeros(N, dtype=np.int64), rng=seeded(4)).value

    def pmf(sigma: float):
        grid = np.arange(-400, 401)
        z = np.exp(-(grid**2) / (2 * sigma**2)).sum()
        return lambda k: np.exp(-(k.astype(float) ** 2) / (2 * sigma**2)) / z

    assert_pmf(noise, pmf(2.0))
    for factor in (0.7, 1.3):
        assert rejects(lambda f=factor: assert_pmf(noise, pmf(2.0 * f)))


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
def test_binary_randomized_response_truth_rate(epsilon: float) -> None:
    rr = dp.RandomizedResponse(epsilon=epsilon)
    n = 1_000_000  # epsilon = 0.1 moves p by only 0.0075 at 30% off
    released = rr.release(np.ones(n, dtype=bool), rng=seeded(5)).value
    truthful = int(released.sum())
    p = math.exp(epsilon) / (1 + math.exp(epsilon))
    assert_binomial(truthful, n, p)
    for factor in (0.7, 1.3):
        q = math.exp(epsilon * factor) / (1 + math.exp(epsilon * factor))
        assert rejects(lambda q=q: assert_binomial(truthful, n, q))


def test_k_ary_randomized_response_lies_uniformly() -> None:
    k, epsilon = 5, 1.0
    rr = dp.RandomizedResponse(epsilon=epsilon, categories=list(range(k)))
    released = rr.release(np.full(N, 2), rng=seeded(6)).value.astype(np.int64)
    p_true = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
    expected = {j: (p_true if j == 2 else (1 - p_true) / (k - 1)) for j in range(k)}
    assert_pmf(released, expected)
    wrong = math.exp(1.3 * epsilon) / (math.exp(1.3 * epsilon) + k - 1)
    assert rejects(
        lambda: assert_pmf(
            released, {j: (wrong if j == 2 else (1 - wrong) / (k - 1)) for j in range(k)}
        )
    )


def test_reported_error_bound_has_its_coverage() -> None:
    # check_mechanism's coverage check, at higher resolution for the Laplace bound.
    mechanism = dp.Laplace.calibrate(epsilon=0.5)
    error = mechanism.error(0.9)
    noise = mechanism.release(np.zeros(N), rng=seeded(7)).value
    inside = int(np.sum(np.abs(noise) <= error.half_width))
    assert_binomial(inside, N, 0.9)
