"""Unit tests for the mechanism analyses: Laplace RDP, Gaussian and discrete Gaussian."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, special, stats

from dpkit.accounting import (
    PureDP,
    discrete_gaussian_delta,
    discrete_gaussian_epsilon,
    discrete_gaussian_rho,
    gaussian_delta,
    gaussian_epsilon,
    gaussian_rho,
    gaussian_sigma_analytic,
    gaussian_sigma_classic,
    laplace_rdp,
)
from dpkit.errors import InvalidParameter, WeakGuaranteeWarning

NAN = float("nan")
INF = float("inf")

# --- Laplace ----------------------------------------------------------------------------


def _laplace_rdp_by_integration(epsilon: float, order: float) -> float:
    # D_a(Lap(0, 1/eps) || Lap(1, 1/eps)) by quadrature, split at the kinks 0 and 1.
    b = 1.0 / epsilon

    def integrand(x: float) -> float:
        log_p = -abs(x) / b
        log_q = -abs(x - 1.0) / b
        return math.exp(order * log_p + (1.0 - order) * log_q) / (2.0 * b)

    total = sum(
        integrate.quad(integrand, lo, hi, epsabs=0, epsrel=1e-13, limit=200)[0]
        for lo, hi in ((-np.inf, 0.0), (0.0, 1.0), (1.0, np.inf))
    )
    return math.log(total) / (order - 1.0)


def test_laplace_rdp_vector() -> None:
    assert laplace_rdp(1.0, 3.0) == pytest.approx(0.7468281, rel=1e-6)


@pytest.mark.parametrize(
    ("epsilon", "order"),
    [
        pytest.param(1.0, 3.0, id="eps1-a3"),
        pytest.param(0.1, 1.05, id="series-region"),
        pytest.param(2.0, 1.5, id="eps2-a1.5"),
        pytest.param(0.5, 20.0, id="large-order"),
    ],
)
def test_laplace_rdp_matches_numerical_integration(epsilon: float, order: float) -> None:
    assert laplace_rdp(epsilon, order) == pytest.approx(
        _laplace_rdp_by_integration(epsilon, order), rel=1e-9
    )


def test_laplace_rdp_order_one_is_kl() -> None:
    for eps in (1e-3, 0.5, 4.0):
        assert laplace_rdp(eps, 1.0) == pytest.approx(eps + math.expm1(-eps), rel=1e-12)
        # continuity from above
        assert laplace_rdp(eps, 1.0 + 1e-8) == pytest.approx(laplace_rdp(eps, 1.0), rel=1e-6)


def test_laplace_rdp_is_at_most_the_tight_pure_bound() -> None:
    for eps in (0.01, 0.7, 3.0):
        pure = PureDP(eps).to_rdp((1.01, 1.5, 2.0, 8.0, 100.0))
        for order, bound in zip(pure.orders, pure.epsilons, strict=True):
            assert laplace_rdp(eps, order) <= bound
            assert laplace_rdp(eps, order) <= eps


def test_laplace_rdp_edges() -> None:
    assert laplace_rdp(0.0, 2.0) == 0.0
    assert laplace_rdp(5.0, 1e6) == pytest.approx(5.0, rel=1e-5)


@pytest.mark.parametrize(
    ("epsilon", "order"),
    [
        pytest.param(-1.0, 2.0, id="negative-eps"),
        pytest.param(NAN, 2.0, id="nan-eps"),
        pytest.param(INF, 2.0, id="inf-eps"),
        pytest.param(1.0, 0.5, id="order-below-one"),
        pytest.param(1.0, INF, id="order-inf"),
        pytest.param(1.0, True, id="order-bool"),
        pytest.param("1", 2.0, id="eps-str"),
    ],
)
def test_laplace_rdp_invalid(epsilon: object, order: object) -> None:
    with pytest.raises(InvalidParameter):
        laplace_rdp(epsilon, order)  # type: ignore[arg-type]


# --- Gaussian ---------------------------------------------------------------------------


def test_gaussian_vectors() -> None:
    assert gaussian_sigma_analytic(1.0, 1e-5) == pytest.approx(3.730632, rel=1e-6)
    assert gaussian_epsilon(1.0, 1e-5) == pytest.approx(4.377178, rel=1e-6)
    # the classical formula at eps = 0.5 is twice the digest's eps = 1 value (4.844805)
    assert gaussian_sigma_classic(0.5, 1e-5) == pytest.approx(2 * 4.844805, rel=1e-6)


def test_gaussian_rho() -> None:
    assert gaussian_rho(1.0) == 0.5
    assert gaussian_rho(2.0, sensitivity=3.0) == 9.0 / 8.0
    assert gaussian_rho(3.0) >= 1.0 / 18.0


@pytest.mark.parametrize(
    ("sigma", "epsilon", "sensitivity"),
    [
        pytest.param(1.0, 1.0, 1.0, id="unit"),
        pytest.param(3.0, 0.2, 1.0, id="small-eps"),
        pytest.param(0.5, 4.0, 2.0, id="sensitivity-2"),
        pytest.param(10.0, 0.0, 1.0, id="eps-zero-is-tv"),
    ],
)
def test_gaussian_delta_matches_plain_formula(
    sigma: float, epsilon: float, sensitivity: float
) -> None:
    a = sensitivity / (2 * sigma) - epsilon * sigma / sensitivity
    b = -sensitivity / (2 * sigma) - epsilon * sigma / sensitivity
    expected = stats.norm.cdf(a) - math.exp(epsilon) * stats.norm.cdf(b)
    got = gaussian_delta(sigma, epsilon, sensitivity)
    assert got == pytest.approx(expected, rel=1e-9)
    assert got >= expected * (1 - 1e-14)


def test_gaussian_delta_far_tail_stays_positive() -> None:
    # Log space keeps deltas far below what a plain difference of CDFs can represent.
    delta = gaussian_delta(1.0, 30.0)
    assert 0.0 < delta < 1e-150


@pytest.mark.parametrize(
    ("epsilon", "delta", "sensitivity"),
    [
        pytest.param(1.0, 1e-5, 1.0, id="eps1"),
        pytest.param(0.1, 1e-9, 1.0, id="eps0.1"),
        pytest.param(8.0, 1e-3, 5.0, id="eps8-sens5"),
        pytest.param(0.01, 0.5, 1.0, id="large-delta"),
    ],
)
def test_gaussian_sigma_analytic_is_private_and_tight(
    epsilon: float, delta: float, sensitivity: float
) -> None:
    sigma = gaussian_sigma_analytic(epsilon, delta, sensitivity)
    assert gaussian_delta(sigma, epsilon, sensitivity) <= delta
    assert gaussian_delta(sigma * (1 - 1e-9), epsilon, sensitivity) > delta


@pytest.mark.parametrize(
    ("sigma", "delta"),
    [
        pytest.param(1.0, 1e-5, id="sigma1"),
        pytest.param(20.0, 1e-10, id="sigma20"),
        pytest.param(0.3, 1e-2, id="sigma0.3"),
    ],
)
def test_gaussian_epsilon_is_valid_and_tight(sigma: float, delta: float) -> None:
    eps = gaussian_epsilon(sigma, delta)
    assert gaussian_delta(sigma, eps) <= delta
    assert gaussian_delta(sigma, eps * (1 - 1e-9)) > delta


def test_gaussian_epsilon_zero_when_delta_exceeds_tv() -> None:
    assert gaussian_epsilon(100.0, 0.5) == 0.0


def test_classic_calibration_is_never_below_analytic() -> None:
    for eps in (0.05, 0.5, 0.99):
        for delta in (1e-3, 1e-8):
            assert gaussian_sigma_classic(eps, delta) >= gaussian_sigma_analytic(eps, delta)


def test_classic_calibration_refuses_epsilon_at_least_one() -> None:
    with pytest.raises(InvalidParameter, match="gaussian_sigma_analytic"):
        gaussian_sigma_classic(1.0, 1e-5)


def test_weak_epsilon_warns_in_calibration() -> None:
    with pytest.warns(WeakGuaranteeWarning):
        sigma = gaussian_sigma_analytic(12.0, 1e-5)
    assert gaussian_delta(sigma, 12.0) <= 1e-5


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: gaussian_sigma_analytic(0.0, 1e-5), id="sigma-eps-zero"),
        pytest.param(lambda: gaussian_sigma_analytic(-1.0, 1e-5), id="sigma-eps-negative"),
        pytest.param(lambda: gaussian_sigma_analytic(NAN, 1e-5), id="sigma-eps-nan"),
        pytest.param(lambda: gaussian_sigma_analytic(INF, 1e-5), id="sigma-eps-inf"),
        pytest.param(lambda: gaussian_sigma_analytic(1.0, 0.0), id="sigma-delta-zero"),
        pytest.param(lambda: gaussian_sigma_analytic(1.0, 1.0), id="sigma-delta-one"),
        pytest.param(lambda: gaussian_sigma_analytic(True, 1e-5), id="sigma-eps-bool"),
        pytest.param(lambda: gaussian_sigma_analytic("1", 1e-5), id="sigma-eps-str"),
        pytest.param(lambda: gaussian_sigma_analytic(1.0, 1e-5, 0.0), id="sensitivity-zero"),
        pytest.param(lambda: gaussian_sigma_classic(0.5, 1.5), id="classic-delta"),
        pytest.param(lambda: gaussian_sigma_classic(-0.5, 1e-5), id="classic-eps"),
        pytest.param(lambda: gaussian_delta(0.0, 1.0), id="delta-sigma-zero"),
        pytest.param(lambda: gaussian_delta(1.0, -1.0), id="delta-eps-negative"),
        pytest.param(lambda: gaussian_delta(1.0, NAN), id="delta-eps-nan"),
        pytest.param(lambda: gaussian_epsilon(1.0, 0.0), id="epsilon-delta-zero"),
        pytest.param(lambda: gaussian_epsilon(INF, 1e-5), id="epsilon-sigma-inf"),
        pytest.param(lambda: gaussian_rho(-1.0), id="rho-sigma-negative"),
    ],
)
def test_gaussian_invalid(call: object) -> None:
    assert callable(call)
    with pytest.raises(InvalidParameter):
        call()


# --- discrete Gaussian -------------------------------------------------------------------


def _discrete_gaussian_pmf(sigma: float, center: int, support: np.ndarray) -> np.ndarray:
    weights = np.exp(-((support - center) ** 2) / (2 * sigma * sigma))
    full = np.exp(-(np.arange(-support.size, support.size + 1) ** 2) / (2 * sigma * sigma))
    return weights / full.sum()


def _brute_force_delta(sigma: float, epsilon: float, sensitivity: int) -> float:
    # Hockey-stick divergence by enumeration of a wide support, both orderings.
    support = np.arange(-int(60 * sigma) - 60, int(60 * sigma) + 61)
    p = _discrete_gaussian_pmf(sigma, 0, support)
    q = _discrete_gaussian_pmf(sigma, sensitivity, support)
    forward = np.maximum(p - math.exp(epsilon) * q, 0.0).sum()
    backward = np.maximum(q - math.exp(epsilon) * p, 0.0).sum()
    return float(max(forward, backward))


@pytest.mark.parametrize(
    ("sigma", "epsilon", "sensitivity"),
    [
        pytest.param(1.0, 1.0, 1, id="sigma1"),
        pytest.param(3.0, 0.5, 1, id="sigma3"),
        pytest.param(2.0, 1.0, 2, id="sensitivity2"),
        pytest.param(0.5, 2.0, 1, id="small-sigma"),
        pytest.param(10.0, 0.3, 3, id="sensitivity3"),
        pytest.param(5.0, 0.0, 1, id="eps-zero"),
        pytest.param(30.0, 0.2, 1, id="small-delta"),
    ],
)
def test_discrete_gaussian_delta_matches_enumeration(
    sigma: float, epsilon: float, sensitivity: int
) -> None:
    expected = _brute_force_delta(sigma, epsilon, sensitivity)
    got = discrete_gaussian_delta(sigma, epsilon, sensitivity)
    assert got == pytest.approx(expected, rel=1e-9)
    assert got >= expected * (1 - 1e-12)


def test_discrete_gaussian_close_to_continuous_for_large_sigma() -> None:
    for sigma in (50.0, 400.0):
        for eps in (0.005, 0.02):
            d = discrete_gaussian_delta(sigma, eps)
            c = gaussian_delta(sigma, eps)
            assert d == pytest.approx(c, rel=0.05)


def test_discrete_gaussian_very_large_sigma_uses_a_valid_close_bound() -> None:
    # Above ~3e5 the series is bounded by an integral: still >= the continuous value's
    # neighbourhood and within a relative 1e-4 of it.
    sigma, eps = 1e6, 1e-6
    d = discrete_gaussian_delta(sigma, eps)
    c = gaussian_delta(sigma, eps)
    assert d == pytest.approx(c, rel=1e-4)


@pytest.mark.parametrize(
    ("sigma", "delta", "sensitivity"),
    [
        pytest.param(3.0, 1e-5, 1, id="sigma3"),
        pytest.param(1.0, 1e-2, 1, id="sigma1"),
        pytest.param(12.0, 1e-8, 4, id="sensitivity4"),
    ],
)
def test_discrete_gaussian_epsilon_is_valid_and_tight(
    sigma: float, delta: float, sensitivity: int
) -> None:
    eps = discrete_gaussian_epsilon(sigma, delta, sensitivity)
    assert discrete_gaussian_delta(sigma, eps, sensitivity) <= delta
    assert discrete_gaussian_delta(sigma, eps * (1 - 1e-8), sensitivity) > delta


def test_discrete_gaussian_epsilon_zero_when_delta_exceeds_tv() -> None:
    assert discrete_gaussian_epsilon(100.0, 0.5) == 0.0


def _renyi_1d(sigma: float, shift: int, order: float) -> float:
    # D_a(N_Z(0, s^2) || N_Z(shift, s^2)) by summation in log space (same normaliser).
    support = np.arange(-200, 201, dtype=np.float64)
    log_p = -(support**2) / (2 * sigma * sigma)
    log_q = -((support - shift) ** 2) / (2 * sigma * sigma)
    log_z = float(special.logsumexp(log_p))
    log_sum = float(special.logsumexp(order * log_p + (1 - order) * log_q)) - log_z
    return log_sum / (order - 1)


@pytest.mark.parametrize("order", [1.5, 2.0, 3.0, 7.3])
def test_discrete_gaussian_rho_bounds_renyi_divergence_in_two_dimensions(order: float) -> None:
    # Shift (1, 1): L2 sensitivity sqrt(2). The product's divergence is the sum over
    # coordinates; it must be at most order * rho, with equality at integer orders.
    sigma = 0.8
    divergence = 2 * _renyi_1d(sigma, 1, order)
    rho = discrete_gaussian_rho(sigma, math.sqrt(2.0), dimension=2)
    assert divergence <= order * rho * (1 + 1e-12)
    if float(order).is_integer():
        assert divergence == pytest.approx(order * rho, rel=1e-9)
    else:
        assert divergence < order * rho


def test_discrete_gaussian_rho_values() -> None:
    assert discrete_gaussian_rho(1.0, 1.0) == 0.5
    assert discrete_gaussian_rho(2.0, 3.0, l1_sensitivity=2.0, dimension=4) == 0.5
    assert discrete_gaussian_rho(2.0, 3.0, dimension=4) == 9.0 / 8.0


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: discrete_gaussian_delta(0.0, 1.0, 1), id="delta-sigma-zero"),
        pytest.param(lambda: discrete_gaussian_delta(1.0, -1.0, 1), id="delta-eps-negative"),
        pytest.param(lambda: discrete_gaussian_delta(1.0, 1.0, 0), id="delta-sens-zero"),
        pytest.param(lambda: discrete_gaussian_delta(1.0, 1.0, 1.5), id="delta-sens-float"),
        pytest.param(lambda: discrete_gaussian_delta(1.0, 1.0, True), id="delta-sens-bool"),
        pytest.param(lambda: discrete_gaussian_epsilon(1.0, 0.0, 1), id="epsilon-delta-zero"),
        pytest.param(lambda: discrete_gaussian_epsilon(NAN, 1e-5, 1), id="epsilon-sigma-nan"),
        pytest.param(lambda: discrete_gaussian_rho(1.0, 0.0), id="rho-l2-zero"),
        pytest.param(lambda: discrete_gaussian_rho(1.0, 1.0, -1.0), id="rho-l1-negative"),
        pytest.param(lambda: discrete_gaussian_rho(1.0, 1.0, dimension=0), id="rho-dimension"),
    ],
)
def test_discrete_gaussian_invalid(call: object) -> None:
    assert callable(call)
    with pytest.raises(InvalidParameter):
        call()
