"""Unit tests of dpkit.mechanisms: contracts, calibration, guarantees and bad input."""

from __future__ import annotations

import decimal
import math
from decimal import Decimal

import numpy as np
import pytest

import dpkit as dp
from dpkit.accounting import events
from dpkit.testing import check_mechanism, seeded

MECHANISMS = [
    pytest.param(dp.Laplace.calibrate(epsilon=1.0, sensitivity=2.0), 10.0, id="Laplace"),
    pytest.param(dp.Laplace(scale=0.5), [1.0, 2.0, 3.0], id="Laplace-vector"),
    pytest.param(dp.DiscreteLaplace.calibrate(epsilon=0.5, sensitivity=3), 7, id="DiscreteLaplace"),
    pytest.param(dp.Gaussian.calibrate(epsilon=1.0, delta=1e-6), 3.5, id="Gaussian-analytic"),
    pytest.param(dp.Gaussian.calibrate(rho=0.1, sensitivity=2.0), [0.0, 1e6], id="Gaussian-rho"),
    pytest.param(dp.DiscreteGaussian.calibrate(rho=0.2), [5, 6, 7], id="DiscreteGaussian"),
    pytest.param(dp.TruncatedLaplace.calibrate(epsilon=1.0, delta=1e-4), 0.25, id="TruncLaplace"),
    pytest.param(dp.RandomizedResponse(epsilon=1.0), [True, False], id="RandomizedResponse"),
    pytest.param(
        dp.RandomizedResponse(epsilon=2.0, categories=["a", "b", "c"]), ["a", "c"], id="RR-k-ary"
    ),
]


@pytest.mark.parametrize(("mechanism", "value"), MECHANISMS)
def test_mechanism_contract(mechanism: dp.Mechanism, value: object) -> None:
    check_mechanism(mechanism, value, trials=300)


GUARANTEES = [
    (dp.Laplace.calibrate(epsilon=0.7, sensitivity=3.0), dp.PureDP(0.7)),
    (dp.DiscreteLaplace.calibrate(epsilon=0.25, sensitivity=2), dp.PureDP(0.25)),
    (dp.Gaussian.calibrate(epsilon=1.0, delta=1e-5), dp.ApproxDP(1.0, 1e-5)),
    (dp.Gaussian.calibrate(rho=0.5), dp.ZCDP(0.5)),
    (dp.DiscreteGaussian.calibrate(rho=0.5, sensitivity=2.0), dp.ZCDP(0.5)),
    (dp.RandomizedResponse(epsilon=1.5), dp.PureDP(1.5)),
    (dp.TruncatedLaplace.calibrate(epsilon=1.0, delta=1e-6), dp.ApproxDP(1.0, 1e-6)),
]


@pytest.mark.parametrize(("mechanism", "expected"), GUARANTEES, ids=repr)
def test_calibrated_guarantee_is_the_request(mechanism: dp.Mechanism, expected: object) -> None:
    guarantee = mechanism.guarantee
    assert type(guarantee) is type(expected)
    for field in ("epsilon", "delta", "rho"):
        if hasattr(expected, field):
            assert getattr(guarantee, field) == pytest.approx(getattr(expected, field), rel=1e-12)
            # Never optimistic: the stated value is at least the true one.
            assert getattr(guarantee, field) >= getattr(expected, field) * (1 - 1e-15)


def test_laplace_scale_is_sensitivity_over_epsilon_rounded_up() -> None:
    mechanism = dp.Laplace.calibrate(epsilon=0.3, sensitivity=7.0)
    assert mechanism.scale >= 7.0 / 0.3
    assert mechanism.scale == pytest.approx(7.0 / 0.3, rel=1e-15)
    assert mechanism.event == events.LaplaceEvent(noise_multiplier=mechanism.scale / 7.0)


def test_laplace_built_from_scale_reports_epsilon_rounded_up() -> None:
    mechanism = dp.Laplace(scale=3.0, sensitivity=1.0)
    assert mechanism.epsilon >= 1.0 / 3.0
    assert mechanism.guarantee == dp.PureDP(mechanism.epsilon)


# Balle & Wang 2018 analytic Gaussian: sigma(1, 1e-5) = 3.730632 (accounting.md §3.1).
def test_gaussian_analytic_calibration_matches_published_value() -> None:
    sigma = dp.Gaussian.calibrate(epsilon=1.0, delta=1e-5).sigma
    assert sigma == pytest.approx(3.730632, rel=1e-6)
    assert dp.accounting.gaussian_delta(sigma, 1.0) <= 1e-5


def test_gaussian_classic_calibration_is_textbook_and_larger() -> None:
    classic = dp.Gaussian.calibrate(epsilon=0.5, delta=1e-5, method="classic").sigma
    assert classic == pytest.approx(math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5, rel=1e-12)
    assert classic > dp.Gaussian.calibrate(epsilon=0.5, delta=1e-5).sigma


def test_gaussian_classic_calibration_refuses_epsilon_at_least_one() -> None:
    with pytest.raises(dp.InvalidParameter, match="analytic"):
        dp.Gaussian.calibrate(epsilon=1.0, delta=1e-5, method="classic")


def test_gaussian_rho_matches_sigma() -> None:
    mechanism = dp.Gaussian(sigma=2.0, sensitivity=3.0)
    assert mechanism.rho == pytest.approx(9 / 8, rel=1e-15) and mechanism.rho >= 9 / 8
    assert dp.Gaussian.calibrate(rho=9 / 8, sensitivity=3.0).sigma >= 2.0


def test_truncated_laplace_tight_support_and_exact_delta() -> None:
    mechanism = dp.TruncatedLaplace.calibrate(epsilon=1.0, delta=1e-3)
    assert mechanism.bound == pytest.approx(math.log1p((math.e - 1) / 2e-3), rel=1e-12)
    assert exact_truncated_delta(mechanism) <= 1e-3


def exact_truncated_delta(mechanism: dp.TruncatedLaplace) -> float:
    """(e^eps - 1) / (2 (e^{A/lam} - 1)) in 50-digit decimal, for the mechanism's floats."""
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        lam, bound = Decimal(mechanism.scale), Decimal(mechanism.bound)
        eps = Decimal(mechanism.sensitivity) / lam
        return float((eps.exp() - 1) / (2 * ((bound / lam).exp() - 1)))


def test_truncated_laplace_post_calibration_reports_true_delta() -> None:
    # never-fail.md §3.1: tau = (1 + ln(1/(2 delta)))/eps gives delta (e^eps - 1)/(e - 2 delta).
    for epsilon, delta in [(0.5, 1e-3), (1.0, 1e-6), (2.0, 1e-3), (3.0, 0.01)]:
        mechanism = dp.TruncatedLaplace.calibrate(epsilon=epsilon, delta=delta, calibration="post")
        post_formula = delta * math.expm1(epsilon) / (math.e - 2 * delta)
        assert mechanism.guarantee.delta == pytest.approx(post_formula, rel=1e-9)
        assert mechanism.guarantee.delta >= exact_truncated_delta(mechanism)
    assert dp.TruncatedLaplace.calibrate(
        epsilon=2.0, delta=1e-3, calibration="post"
    ).guarantee.delta == pytest.approx(2.35213e-3, rel=1e-5)


def test_truncated_laplace_support_narrower_than_sensitivity_is_refused() -> None:
    # The post's shorthand at epsilon = 3, delta = 0.1 gives a support of 0.87 < 1.
    with pytest.raises(dp.InvalidParameter, match="larger than the sensitivity"):
        dp.TruncatedLaplace.calibrate(epsilon=3.0, delta=0.1, calibration="post")


def test_truncated_laplace_never_exceeds_its_bound() -> None:
    mechanism = dp.TruncatedLaplace.calibrate(epsilon=0.1, delta=1e-2)
    out = mechanism.release(np.zeros(100_000), rng=seeded(3)).value
    assert np.max(np.abs(out)) <= mechanism.bound + mechanism.granularity / 2


def test_randomized_response_truth_probability_never_above_ideal() -> None:
    for epsilon, k in [(0.1, 2), (1.0, 2), (1.0, 5), (5.0, 3)]:
        rr = dp.RandomizedResponse(epsilon=epsilon, categories=list(range(k)))
        ideal = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
        assert rr.truth_probability <= ideal
        assert rr.truth_probability == pytest.approx(ideal, rel=1e-14)


def test_randomized_response_estimates_are_unbiased_on_average() -> None:
    rr = dp.RandomizedResponse(epsilon=1.0, categories=["x", "y", "z"])
    truth = np.array(["x"] * 6000 + ["y"] * 3000 + ["z"] * 1000)
    estimates = rr.estimate_counts(rr.release(truth, rng=seeded(4)).value)
    # Standard error about 90 per category; 6 standard errors keeps this check honest.
    for category, count in {"x": 6000, "y": 3000, "z": 1000}.items():
        assert abs(estimates[category] - count) < 600


def test_function_wrappers_match_classes() -> None:
    assert dp.laplace(1.0, epsilon=1.0, sensitivity=1, rng=seeded(5)) == dp.Laplace.calibrate(
        epsilon=1.0
    ).release(1.0, rng=seeded(5))
    release = dp.gaussian([1.0, 2.0], epsilon=1.0, delta=1e-6, sensitivity=1, rng=seeded(6))
    assert release.guarantee == dp.ApproxDP(1.0, 1e-6) and release.mechanism == "Gaussian"
    assert dp.discrete_laplace(3, epsilon=1.0, sensitivity=1, rng=seeded(7)).value in range(
        -100, 100
    )
    assert dp.discrete_gaussian(3, rho=1.0, sensitivity=1, rng=seeded(7)).guarantee == dp.ZCDP(1.0)
    assert dp.randomized_response([True], epsilon=1.0, rng=seeded(8)).value.shape == (1,)
    assert (
        dp.truncated_laplace(
            0.0, epsilon=1.0, delta=1e-5, sensitivity=1, rng=seeded(9)
        ).guarantee.delta
        > 0
    )


def test_secure_default_release_is_marked_secure() -> None:
    assert dp.laplace(0.0, epsilon=1.0, sensitivity=1).secure is True


def test_release_values_lie_on_a_power_of_two_grid() -> None:
    mechanism = dp.Laplace.calibrate(epsilon=1.0)
    out = mechanism.release(np.full(1000, 0.1), rng=seeded(10)).value
    cells = out / mechanism.granularity
    assert np.array_equal(cells, np.round(cells))
    assert math.frexp(mechanism.granularity)[0] == 0.5


# ------------------------------------------------------------------------- bad input

BAD_NUMBERS = [0.0, -1.0, math.nan, math.inf, -math.inf, "1", None, True]


@pytest.mark.parametrize("bad", BAD_NUMBERS, ids=repr)
@pytest.mark.parametrize(
    "build",
    [
        lambda v: dp.Laplace.calibrate(epsilon=v),
        lambda v: dp.Laplace.calibrate(epsilon=1.0, sensitivity=v),
        lambda v: dp.Laplace(scale=v),
        lambda v: dp.DiscreteLaplace.calibrate(epsilon=v),
        lambda v: dp.Gaussian.calibrate(epsilon=v, delta=1e-5),
        lambda v: dp.Gaussian.calibrate(rho=v),
        lambda v: dp.Gaussian(sigma=v),
        lambda v: dp.DiscreteGaussian(sigma=v),
        lambda v: dp.TruncatedLaplace.calibrate(epsilon=v, delta=1e-5),
        lambda v: dp.RandomizedResponse(epsilon=v),
    ],
    ids=[
        "Laplace.eps",
        "Laplace.sens",
        "Laplace.scale",
        "DLap.eps",
        "Gauss.eps",
        "Gauss.rho",
        "Gauss.sigma",
        "DGauss.sigma",
        "TLap.eps",
        "RR.eps",
    ],
)
def test_invalid_parameters_raise_invalid_parameter(build, bad) -> None:
    with pytest.raises(dp.InvalidParameter):
        build(bad)


@pytest.mark.parametrize("delta", [0.0, -1e-9, 1.0, 1.5, math.nan, math.inf], ids=repr)
def test_invalid_delta_is_rejected(delta: float) -> None:
    with pytest.raises(dp.InvalidParameter):
        dp.Gaussian.calibrate(epsilon=1.0, delta=delta)
    with pytest.raises(dp.InvalidParameter):
        dp.TruncatedLaplace.calibrate(epsilon=1.0, delta=delta)


def test_gaussian_needs_a_complete_target() -> None:
    with pytest.raises(dp.InvalidParameter):
        dp.Gaussian.calibrate(epsilon=1.0)
    with pytest.raises(dp.InvalidParameter):
        dp.Gaussian.calibrate(epsilon=1.0, delta=1e-5, rho=0.1)


def test_discrete_sensitivity_must_be_a_positive_integer() -> None:
    for bad in (0, -2, 1.5, True):
        with pytest.raises(dp.InvalidParameter):
            dp.DiscreteLaplace.calibrate(epsilon=1.0, sensitivity=bad)


@pytest.mark.parametrize(
    "value", [math.nan, [1.0, math.inf], [], "abc", [[1.0], [2.0, 3.0]], None], ids=repr
)
@pytest.mark.parametrize(
    "mechanism",
    [
        dp.Laplace(scale=1.0),
        dp.Gaussian(sigma=1.0),
        dp.TruncatedLaplace.calibrate(epsilon=1.0, delta=1e-5),
    ],
    ids=["Laplace", "Gaussian", "TruncatedLaplace"],
)
def test_bad_data_raises_data_error(mechanism: dp.Mechanism, value: object) -> None:
    with pytest.raises(dp.DataError):
        mechanism.release(value)


@pytest.mark.parametrize("value", [1.5, [1, 2.5], [], "7", True, [True]], ids=repr)
def test_discrete_mechanisms_need_integer_data(value: object) -> None:
    with pytest.raises(dp.DataError):
        dp.DiscreteLaplace(scale=1.0).release(value)


def test_randomized_response_rejects_values_outside_categories() -> None:
    rr = dp.RandomizedResponse(epsilon=1.0, categories=["a", "b"])
    with pytest.raises(dp.DataError, match="2 categories"):
        rr.release(["a", "c"])
    with pytest.raises(dp.InvalidParameter):
        dp.RandomizedResponse(epsilon=1.0, categories=["a"])
    with pytest.raises(dp.InvalidParameter):
        dp.RandomizedResponse(epsilon=1.0, categories=["a", "a"])


def test_data_error_messages_do_not_echo_private_values() -> None:
    with pytest.raises(dp.DataError) as info:
        dp.Laplace(scale=1.0).release([123456.789, math.nan])
    assert "123456" not in str(info.value)


def test_weak_epsilon_warns() -> None:
    with pytest.warns(dp.WeakGuaranteeWarning):
        dp.Laplace.calibrate(epsilon=20.0)


def test_seeded_generator_warns_insecure() -> None:
    with pytest.warns(dp.InsecureRandomWarning):
        dp.as_random(1)


@pytest.mark.parametrize("scale", [1 / 800, 1 / 745, 1e-6])
def test_discrete_laplace_error_at_scales_whose_q_underflows(scale: float) -> None:
    # e^(-1/scale) underflows to 0 below scale ~1/745: the error bound was a math domain
    # error there; the noise is then 0 with probability 1 - 2e^-745/(1+...) ~ 1.
    error = dp.DiscreteLaplace(scale=scale, sensitivity=1).error(0.95)
    assert error is not None and error.half_width == 0.0


@pytest.mark.parametrize("width", [0.5, 10.0, 1e6, 1e11, 1e13])
def test_discrete_laplace_half_width_is_the_exact_quantile_at_any_scale(width: float) -> None:
    # P(|Z| > h) = 2 q^(h+1) / (1 + q): h is the smallest with tail <= 5%, checked at 40
    # digits. A rounded q raised to a huge power drifted below the quantile at 1e11.
    import mpmath

    from dpkit.mechanisms._tails import symmetric_half_width

    h = symmetric_half_width("laplace", width, 0.95)
    with mpmath.workdps(40):
        q = mpmath.e ** (-1 / mpmath.mpf(width))
        assert 2 * q ** (h + 1) / (1 + q) <= mpmath.mpf("0.05")
        assert h == 0 or 2 * q**h / (1 + q) > mpmath.mpf("0.05")
