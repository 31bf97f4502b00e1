"""Calibration never overshoots: checked in exact or 60-digit arithmetic (hypothesis).

For every calibrated mechanism, the float parameters dpkit chose must satisfy the
privacy condition for the *real numbers they are*, not only approximately.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
from hypothesis import given, settings
from hypothesis import strategies as st

import dpkit as dp

mpmath.mp.dps = 60

epsilons = st.floats(min_value=1e-3, max_value=10.0, allow_nan=False)
sensitivities = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False)
deltas = st.floats(min_value=1e-12, max_value=0.2, allow_nan=False)
SETTINGS = settings(max_examples=150, deadline=None)


@SETTINGS
@given(epsilon=epsilons, sensitivity=sensitivities)
def test_laplace_scale_is_never_below_sensitivity_over_epsilon(epsilon, sensitivity) -> None:
    mechanism = dp.Laplace.calibrate(epsilon=epsilon, sensitivity=sensitivity)
    assert Fraction(mechanism.scale) >= Fraction(sensitivity) / Fraction(epsilon)
    # A mechanism built from a scale never understates its epsilon.
    rebuilt = dp.Laplace(scale=mechanism.scale, sensitivity=sensitivity)
    assert Fraction(rebuilt.epsilon) >= Fraction(sensitivity) / Fraction(mechanism.scale)


@SETTINGS
@given(epsilon=epsilons, sensitivity=st.integers(min_value=1, max_value=1000))
def test_discrete_laplace_scale_is_never_below_sensitivity_over_epsilon(
    epsilon, sensitivity
) -> None:
    mechanism = dp.DiscreteLaplace.calibrate(epsilon=epsilon, sensitivity=sensitivity)
    assert Fraction(mechanism.scale) >= Fraction(sensitivity) / Fraction(epsilon)


def exact_gaussian_delta(sigma: float, epsilon: float, sensitivity: float) -> mpmath.mpf:
    s, e, d = mpmath.mpf(sigma), mpmath.mpf(epsilon), mpmath.mpf(sensitivity)
    return mpmath.ncdf(d / (2 * s) - e * s / d) - mpmath.exp(e) * mpmath.ncdf(
        -d / (2 * s) - e * s / d
    )


@SETTINGS
@given(epsilon=epsilons, delta=deltas, sensitivity=st.floats(min_value=1e-3, max_value=1e3))
def test_analytic_gaussian_meets_delta_exactly(epsilon, delta, sensitivity) -> None:
    mechanism = dp.Gaussian.calibrate(epsilon=epsilon, delta=delta, sensitivity=sensitivity)
    assert exact_gaussian_delta(mechanism.sigma, epsilon, sensitivity) <= delta


@SETTINGS
@given(rho=st.floats(min_value=1e-6, max_value=100.0), sensitivity=sensitivities)
def test_gaussian_rho_calibration_never_overshoots(rho, sensitivity) -> None:
    for mechanism in (
        dp.Gaussian.calibrate(rho=rho, sensitivity=sensitivity),
        dp.DiscreteGaussian.calibrate(rho=rho, sensitivity=sensitivity),
    ):
        achieved = Fraction(sensitivity) ** 2 / (2 * Fraction(mechanism.sigma) ** 2)
        assert achieved <= Fraction(rho)
        assert Fraction(mechanism.rho) >= achieved


@SETTINGS
@given(
    epsilon=epsilons,
    delta=st.floats(min_value=1e-12, max_value=0.49),
    sensitivity=st.floats(min_value=1e-3, max_value=1e3),
    calibration=st.sampled_from(["tight", "post"]),
)
def test_truncated_laplace_reported_delta_is_an_upper_bound(
    epsilon, delta, sensitivity, calibration
) -> None:
    try:
        mechanism = dp.TruncatedLaplace.calibrate(
            epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration=calibration
        )
    except dp.InvalidParameter:
        return  # the post's support can be narrower than the sensitivity: refused
    lam, bound = mpmath.mpf(mechanism.scale), mpmath.mpf(mechanism.bound)
    true_epsilon = mpmath.mpf(sensitivity) / lam
    true_delta = mpmath.expm1(true_epsilon) / (2 * mpmath.expm1(bound / lam))
    assert true_epsilon <= mechanism.guarantee.epsilon
    assert true_delta <= mechanism.guarantee.delta
    if calibration == "tight":
        assert mechanism.guarantee.delta == delta


@SETTINGS
@given(epsilon=epsilons, categories=st.integers(min_value=2, max_value=50))
def test_randomized_response_never_less_private_than_stated(epsilon, categories) -> None:
    rr = dp.RandomizedResponse(epsilon=epsilon, categories=list(range(categories)))
    # The implemented truth probability is 1 - exp(-gamma) for the float gamma.
    truth = -mpmath.expm1(-mpmath.mpf(rr._gamma))
    lie = (1 - truth) / (categories - 1)
    assert truth / lie <= mpmath.exp(mpmath.mpf(epsilon))
