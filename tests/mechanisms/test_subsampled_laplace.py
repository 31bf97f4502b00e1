"""The subsampled Laplace mechanism: contract, privacy bookkeeping and distribution."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest
from scipy import stats

from dpkit.accounting import LaplaceEvent, PoissonSampledEvent, pure_epsilon
from dpkit.accounting.subsampling import amplified_epsilon, epsilon_before_sampling
from dpkit.errors import DataError, InvalidParameter
from dpkit.mechanisms.subsampled_laplace import (
    SubsampledLaplace,
    poisson_sample_mask,
    subsampled_laplace,
)
from dpkit.testing import assert_binomial, assert_cdf, check_mechanism, seeded


def test_contract() -> None:
    mechanism = SubsampledLaplace.calibrate(epsilon=0.5, sampling_probability=0.2, bounds=(-1, 2))
    check_mechanism(mechanism, np.linspace(-3.0, 3.0, 50), trials=50)


@pytest.mark.parametrize("epsilon", [0.01, 0.3, 1.0, 4.0])
@pytest.mark.parametrize("p", [0.001, 0.05, 0.5, 1.0])
def test_calibration_never_exceeds_the_target(epsilon: float, p: float) -> None:
    mechanism = SubsampledLaplace.calibrate(
        epsilon=epsilon, sampling_probability=p, bounds=(0.0, 3.0)
    )
    assert mechanism.guarantee.epsilon == epsilon
    event = mechanism.event
    assert isinstance(event, PoissonSampledEvent) and isinstance(event.event, LaplaceEvent)
    event_epsilon = pure_epsilon(event)
    assert event_epsilon is not None and event_epsilon <= epsilon
    # The scale is the sensitivity over eps_p (rounded up, a hair at most).
    inner = epsilon_before_sampling(epsilon, sampling_probability=p)
    assert mechanism.scale >= 3.0 / inner
    assert mechanism.scale == pytest.approx(3.0 / inner, rel=1e-14)
    assert amplified_epsilon(3.0 / mechanism.scale, sampling_probability=p) <= epsilon


def test_scale_constructor_states_its_amplified_epsilon() -> None:
    mechanism = SubsampledLaplace(scale=2.0, sampling_probability=0.1, bounds=(-1.0, 1.0))
    assert mechanism.epsilon >= math.log1p(0.1 * math.expm1(0.5))
    assert mechanism.epsilon == pytest.approx(math.log1p(0.1 * math.expm1(0.5)), rel=1e-14)


def test_error_and_mean_squared_error() -> None:
    mechanism = SubsampledLaplace(scale=1.0, sampling_probability=0.25, bounds=(0.0, 1.0))
    error = mechanism.error(0.9)
    assert error is not None
    assert error.half_width >= 4.0 * math.log(10.0)
    assert error.standard_deviation >= 4.0 * math.sqrt(2.0)
    # (1-p)/p n D^2 + 2 b^2 / p^2 = 3 * 100 + 32
    assert mechanism.mean_squared_error(100) == pytest.approx(332.0)


def _sampling_bits(p: float, draws: int, seed: int) -> int:
    return int(poisson_sample_mask(draws, p, seeded(seed)).sum())


@pytest.mark.parametrize("p", [0.3, 1e-3, 0.1 + 2**-60])
def test_poisson_mask_is_bernoulli_p(p: float) -> None:
    draws = 400_000
    successes = _sampling_bits(p, draws, seed=11)
    assert_binomial(successes, draws, p, alpha=1e-6)
    with pytest.raises(AssertionError):  # power: a 30% wrong rate is rejected
        assert_binomial(successes, draws, p * 1.3, alpha=1e-6)


def test_poisson_mask_ties_use_the_remaining_bits() -> None:
    # A rate whose binary expansion is longer than 64 bits: P = head/2^64 + tail exactly.
    assert poisson_sample_mask(10, 1.0, seeded(0)).all()
    assert not poisson_sample_mask(10, 0.0, seeded(0)).any()
    assert poisson_sample_mask(0, 0.5, seeded(0)).shape == (0,)


def test_noise_is_laplace_with_the_calibrated_scale() -> None:
    # All-zero data: the sample sum is 0, so p * release is the Laplace noise alone.
    p = 0.2
    mechanism = SubsampledLaplace.calibrate(epsilon=0.5, sampling_probability=p, bounds=(0, 1))
    rng = seeded(3)
    data = np.zeros(5)
    noise = np.array([mechanism.release(data, rng=rng).value * p for _ in range(3000)])
    assert_cdf(noise, lambda x: stats.laplace.cdf(x, scale=mechanism.scale), alpha=1e-6)
    with pytest.raises(AssertionError):  # power: 30% wrong scale
        assert_cdf(noise, lambda x: stats.laplace.cdf(x, scale=1.3 * mechanism.scale), alpha=1e-6)


def _mixture_cdf(n: int, p: float, scale: float) -> object:
    # p * release = Binomial(n, p) + Laplace(scale) when every value is 1.
    weights = stats.binom.pmf(np.arange(n + 1), n, p)

    def cdf(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        x = np.asarray(x, dtype=np.float64)
        parts = [w * stats.laplace.cdf(x - k, scale=scale) for k, w in enumerate(weights)]
        result: npt.NDArray[np.float64] = np.sum(parts, axis=0)
        return result

    return cdf


def test_release_is_sampled_sum_plus_noise_over_p() -> None:
    n, p = 6, 0.4
    mechanism = SubsampledLaplace.calibrate(epsilon=2.0, sampling_probability=p, bounds=(0, 1))
    rng = seeded(5)
    values = np.array([mechanism.release(np.ones(n), rng=rng).value for _ in range(3000)])
    assert_cdf(values * p, _mixture_cdf(n, p, mechanism.scale), alpha=1e-6)  # type: ignore[arg-type]
    with pytest.raises(AssertionError):  # power: a 30% wrong sampling rate is rejected
        assert_cdf(values * p, _mixture_cdf(n, 1.3 * p, mechanism.scale), alpha=1e-6)  # type: ignore[arg-type]
    # Unbiased for the full sum (n): a loose 6-sigma check of the mean.
    sd = math.sqrt(mechanism.mean_squared_error(n) / values.size)
    assert abs(values.mean() - n) < 6 * sd


def test_values_are_clamped_to_the_bounds() -> None:
    mechanism = SubsampledLaplace(scale=1e-2, sampling_probability=1.0, bounds=(-1.0, 2.0))
    value = mechanism.release([10.0, -10.0, 0.5], rng=seeded(0)).value
    assert value == pytest.approx(1.5, abs=0.2)
    # A tiny scale (inner epsilon above e^709) still states a finite guarantee.
    tiny = SubsampledLaplace(scale=1e-3, sampling_probability=0.5, bounds=(-1.0, 2.0))
    assert tiny.epsilon == pytest.approx(2000.0 + math.log(0.5), rel=1e-12)


def test_function_wrapper() -> None:
    release = subsampled_laplace(
        np.ones(100), epsilon=1.0, sampling_probability=0.5, bounds=(0, 1), rng=seeded(1)
    )
    assert release.guarantee.epsilon == 1.0
    assert release.mechanism == "SubsampledLaplace" and release.secure is False


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 0.0, "sampling_probability": 0.5},
        {"epsilon": 1.0, "sampling_probability": 0.0},
        {"epsilon": 1.0, "sampling_probability": 1.1},
        {"epsilon": 1.0, "sampling_probability": 0.5, "bounds": (2.0, 1.0)},
        {"epsilon": 1.0, "sampling_probability": 0.5, "bounds": (0.0, 0.0)},
        {"epsilon": 1.0, "sampling_probability": 0.5, "bounds": (0.0, math.inf)},
        {"epsilon": 1.0, "sampling_probability": 0.5, "bounds": 1.0},
    ],
)
def test_bad_parameters(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidParameter):
        SubsampledLaplace.calibrate(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("data", [[[1.0, 2.0]], [1.0, math.nan], ["a"]])
def test_bad_data(data: object) -> None:
    mechanism = SubsampledLaplace.calibrate(epsilon=1.0, sampling_probability=0.5)
    with pytest.raises(DataError):
        mechanism.release(data, rng=seeded(0))
