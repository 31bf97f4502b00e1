"""TwoStageNoise: guarantee, event, contract, bad input, and the sampled law.

The sampled law is checked against the quadrature CDF of dpkit.groupwise.analysis with
a Kolmogorov-Smirnov test: the DKW inequality with Massart's constant,
P(sup |F_n - F| > eps) <= 2 exp(-2 n eps^2), sets eps for a false-failure rate of 1e-6
(evaluating F_n - F on a grid only lowers the statistic, so the rate still holds).
Power: the same test rejects a first stage whose sigma is 30% off, and a second
stage whose r is 30% off.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpkit as dp
from dpkit.accounting.events import GaussianEvent
from dpkit.errors import DataError, InvalidParameter
from dpkit.groupwise import TwoStageNoise, two_stage_noise
from dpkit.groupwise.analysis import output_cdf
from dpkit.testing import check_mechanism, seeded

FALSE_FAILURE = 1e-6


def dkw_threshold(n: int) -> float:
    return math.sqrt(math.log(2.0 / FALSE_FAILURE) / (2.0 * n))


def ks_on_grid(samples: np.ndarray, count: int, sigma: float, r: float) -> float:
    """max |F_n(y) - F(y)| over 2000 points spread over the sample's quantiles."""
    ordered = np.sort(samples)
    grid = np.unique(np.quantile(ordered, np.linspace(0.0005, 0.9995, 2000)))
    grid = grid[grid != 0.0]
    empirical = np.searchsorted(ordered, grid, side="right") / ordered.size
    exact = output_cdf(grid, count=count, sigma=sigma, relative_error=r)
    return float(np.max(np.abs(empirical - exact)))


def test_guarantee_and_event_are_the_proven_rho_zcdp() -> None:
    mechanism = TwoStageNoise(rho=0.005, relative_error=0.3)
    assert mechanism.guarantee == dp.ZCDP(0.005)
    # sigma rounded up: 1/(2 sigma^2) never exceeds rho
    assert mechanism.sigma >= 10.0 and 1 / (2 * mechanism.sigma**2) <= 0.005
    assert mechanism.event == GaussianEvent(noise_multiplier=mechanism.event.noise_multiplier)
    assert mechanism.event.noise_multiplier <= mechanism.sigma
    assert abs(mechanism.event.noise_multiplier - 10.0) < 1e-12
    release = mechanism.release([10_000, 3, 0], rng=seeded(0))
    assert release.guarantee == dp.ZCDP(0.005) and release.event == mechanism.event
    assert release.error is None and release.secure is False
    assert mechanism.group_guarantee(10**6) == dp.ZCDP(0.005)  # nothing stronger is proven


def test_contract() -> None:
    check_mechanism(TwoStageNoise(rho=0.5, relative_error=0.2), np.array([5, 0, 100]))
    check_mechanism(TwoStageNoise(rho=0.5, relative_error=0.0), 7)


def test_scalar_and_shape_and_wrapper() -> None:
    assert isinstance(
        TwoStageNoise(rho=1.0, relative_error=0.1).release(4, rng=seeded(1)).value, float
    )
    value = two_stage_noise(
        np.ones((2, 3), dtype=int), rho=1.0, relative_error=0.1, rng=seeded(2)
    ).value
    assert value.shape == (2, 3)


def test_zero_relative_error_is_the_gaussian_mechanism() -> None:
    a = TwoStageNoise(rho=0.5, relative_error=0.0).release(np.arange(5), rng=seeded(3)).value
    b = dp.Gaussian.calibrate(rho=0.5).release(np.arange(5.0), rng=seeded(3)).value
    assert np.array_equal(a, b)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"rho": 0.0, "relative_error": 0.3}, "rho"),
        ({"rho": -1.0, "relative_error": 0.3}, "rho"),
        ({"rho": math.nan, "relative_error": 0.3}, "rho"),
        ({"rho": math.inf, "relative_error": 0.3}, "rho"),
        ({"rho": "1", "relative_error": 0.3}, "rho"),
        ({"rho": 0.5, "relative_error": -0.1}, "relative_error"),
        ({"rho": 0.5, "relative_error": math.nan}, "relative_error"),
        ({"rho": 0.5, "relative_error": math.inf}, "relative_error"),
    ],
    ids=["rho0", "rho-neg", "rho-nan", "rho-inf", "rho-str", "r-neg", "r-nan", "r-inf"],
)
def test_bad_parameters(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(InvalidParameter, match=name):
        TwoStageNoise(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "counts",
    [[1, -1], [1.5, 2.0], [1.0, 2.0], [math.nan], [], [True, False], ["a"], 2**60],
    ids=["negative", "fractional", "float-dtype", "nan", "empty", "bool", "str", "huge"],
)
def test_bad_counts_are_refused_without_quoting_them(counts: object) -> None:
    mechanism = TwoStageNoise(rho=0.5, relative_error=0.3)
    with pytest.raises(DataError) as info:
        mechanism.release(counts, rng=seeded(0))
    assert "1.5" not in str(info.value) and "-1" not in str(info.value)


@pytest.mark.parametrize(
    ("count", "sigma", "r"), [(30, 10.0, 0.3), (10_000, 10.0, 0.3)], ids=["skewed", "post"]
)
def test_sampled_law_matches_the_quadrature_with_power(count: int, sigma: float, r: float) -> None:
    n = 10**6
    threshold = dkw_threshold(n)
    rho = 1.0 / (2.0 * sigma**2)
    counts = np.full(n, count)
    samples = TwoStageNoise(rho=rho, relative_error=r).release(counts, rng=seeded(11)).value
    assert ks_on_grid(samples, count, sigma, r) < threshold
    # Power: a first stage with sigma 30% too large, and a second stage with r 30% too
    # large, are both rejected by the same statistic and threshold.
    wrong_sigma = TwoStageNoise(rho=rho / 1.3**2, relative_error=r).release(counts, rng=seeded(12))
    wrong_r = TwoStageNoise(rho=rho, relative_error=1.3 * r).release(counts, rng=seeded(13))
    if count < 100:  # at large counts the first stage is invisible in the output law
        assert ks_on_grid(wrong_sigma.value, count, sigma, r) > threshold
    assert ks_on_grid(wrong_r.value, count, sigma, r) > threshold


@pytest.mark.slow
def test_sampled_law_matches_the_quadrature_1e7() -> None:
    n, count, sigma, r = 10**7, 30, 10.0, 0.3
    samples = TwoStageNoise(rho=0.005, relative_error=r).release(np.full(n, count), rng=seeded(21))
    assert ks_on_grid(samples.value, count, sigma, r) < dkw_threshold(n)
    wrong = TwoStageNoise(rho=0.005 / 1.3**2, relative_error=r).release(
        np.full(n, count), rng=seeded(22)
    )
    assert ks_on_grid(wrong.value, count, sigma, r) > dkw_threshold(n)
