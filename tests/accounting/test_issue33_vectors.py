"""Issue 33, item 3: (xi, rho)-zCDP, epsilon 0, GDP fit and profile, accuracy <-> scale,
integer calibration. Peer values are in tests/golden/test_issue33_vectors_golden.py."""

from __future__ import annotations

import math

import mpmath
import pytest

from dpkit.accounting import (
    RDP,
    ZCDP,
    DiscreteGaussianEvent,
    GaussianEvent,
    LaplaceEvent,
    PLDAccountant,
    PureDP,
    XiZCDP,
    calibrate_integer,
    fit_gdp,
    gaussian_delta,
    gdp_delta,
    gdp_epsilon,
)
from dpkit.errors import InvalidParameter
from dpkit.mechanisms import accuracy_to_scale, scale_to_accuracy

# ---------------------------------------------------------------- (xi, rho)-zCDP


def test_xi_zcdp_composes_and_keeps_zcdp_unchanged() -> None:
    g = XiZCDP(0.5, 0.1)
    total = g + XiZCDP(0.25, 0.2)
    assert total.rho == 0.75 and 0.3 <= total.xi <= 0.3 + 1e-15
    assert (g + ZCDP(0.25)).rho == 0.75 and (ZCDP(0.25) + g).xi == 0.1
    assert (3 * g).rho == 1.5 and (3 * g).xi >= 0.3
    assert sum([g, g]) == g + g
    assert repr(ZCDP(0.5)) == "ZCDP(rho=0.5)"  # ledgers store repr(total)
    assert not isinstance(g, ZCDP)  # code reading only .rho never sees an xi
    with pytest.raises(InvalidParameter):
        g + PureDP(1.0)


def test_xi_zcdp_to_rdp_is_the_definition() -> None:
    curve = XiZCDP(0.5, 0.1).to_rdp([2.0, 10.0])
    assert isinstance(curve, RDP)
    for a, e in zip(curve.orders, curve.epsilons, strict=True):
        assert 0.1 + 0.5 * a <= e <= 0.1 + 0.5 * a + 1e-14


def _cks_delta(xi: float, rho: float, epsilon: float) -> float:
    # CKS20 Prop. 12 on the curve xi + rho a, minimised over a with mpmath (60 digits).
    mpmath.mp.dps = 60

    def log_delta(a: mpmath.mpf) -> mpmath.mpf:
        tau = xi + rho * a
        return (a - 1) * (tau - epsilon) + a * mpmath.log(1 - 1 / a) - mpmath.log(a - 1)

    grid = [1 + mpmath.mpf(10) ** (k / 40.0) for k in range(-200, 161)]
    best = min(grid, key=log_delta)
    a = mpmath.findroot(lambda x: mpmath.diff(log_delta, x), best)
    return float(min(mpmath.e ** log_delta(a), mpmath.e ** log_delta(best), 1))


@pytest.mark.parametrize(
    ("xi", "rho", "epsilon"),
    [(0.1, 0.5, 1.0), (0.3, 0.05, 1.0), (1.0, 0.2, 3.0), (0.5, 0.5, 0.0)],
)
def test_xi_zcdp_delta_matches_the_closed_form(xi: float, rho: float, epsilon: float) -> None:
    exact = _cks_delta(xi, rho, epsilon)
    ours = XiZCDP(rho, xi).delta_for(epsilon)
    assert exact * (1 - 1e-12) <= ours <= exact * (1 + 1e-6)


def test_xi_zcdp_to_approx_is_shifted_zcdp() -> None:
    shifted = XiZCDP(0.5, 0.1).to_approx(1e-5).epsilon
    plain = ZCDP(0.5).to_approx(1e-5).epsilon
    assert plain + 0.1 <= shifted <= plain + 0.1 + 1e-12
    # rho = 0: D_inf <= xi, pure xi-DP.
    assert XiZCDP(0.0, 1.0).to_approx(1e-6).epsilon == 1.0
    assert XiZCDP(0.0, 1.0).delta_for(1.0) == 0.0
    tight = (math.e - math.exp(0.5)) / (1 + math.e)
    assert tight <= XiZCDP(0.0, 1.0).delta_for(0.5) <= tight * (1 + 1e-12)


@pytest.mark.parametrize("bad", [{"rho": -1.0}, {"rho": 1.0, "xi": -0.1}, {"rho": math.nan}])
def test_xi_zcdp_refuses_bad_input(bad: dict[str, float]) -> None:
    with pytest.raises(InvalidParameter):
        XiZCDP(**bad)
    with pytest.raises(InvalidParameter):
        XiZCDP(0.5, 0.1).to_approx(0.0)


# ---------------------------------------------------------------- epsilon = 0


def test_epsilon_zero_is_the_total_variation_distance() -> None:
    tv_gauss = math.erf(0.5 / math.sqrt(2.0))  # 2 Phi(1/2) - 1, sigma = 1
    assert tv_gauss <= gdp_delta(mu=1.0, epsilon=0.0) <= tv_gauss * (1 + 1e-10)
    assert tv_gauss <= gaussian_delta(1.0, 0.0) <= tv_gauss * (1 + 1e-10)
    tv_laplace = -math.expm1(-0.5)
    assert tv_laplace <= PLDAccountant().compose(LaplaceEvent(1.0)).get_delta(0.0)
    assert ZCDP(0.5).delta_for(0.0) < 1.0


def test_calibrate_integer_at_epsilon_zero() -> None:
    def event(n: int) -> DiscreteGaussianEvent:
        return DiscreteGaussianEvent(float(n), 1)

    sigma = calibrate_integer(
        PLDAccountant, event, target_epsilon=0.0, target_delta=0.1, bracket=(1, 100)
    )
    assert PLDAccountant().compose(event(sigma)).get_delta(0.0) <= 0.1
    assert PLDAccountant().compose(event(sigma - 1)).get_delta(0.0) > 0.1


def test_calibrate_integer_refuses_bad_input() -> None:
    kwargs = {"target_epsilon": 1.0, "target_delta": 1e-5}
    with pytest.raises(InvalidParameter, match="bracket"):
        calibrate_integer(PLDAccountant, GaussianEvent, bracket=(5, 1), **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter, match="bracket"):
        calibrate_integer(PLDAccountant, GaussianEvent, bracket=(1.0, 5), **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter, match="unreachable"):
        calibrate_integer(PLDAccountant, GaussianEvent, bracket=(1, 2), **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter, match="target_epsilon"):
        calibrate_integer(
            PLDAccountant,
            GaussianEvent,  # type: ignore[arg-type]
            target_epsilon=-1.0,
            target_delta=1e-5,
            bracket=(1, 2),
        )


# ---------------------------------------------------------------- GDP


@pytest.mark.parametrize(("sigma", "count"), [(2.0, 1), (1.0, 4)])
def test_fit_gdp_of_the_gaussian_is_its_mu(sigma: float, count: int) -> None:
    fit = fit_gdp(PLDAccountant().compose(GaussianEvent(sigma), count=count))
    exact = math.sqrt(count) / sigma  # DRS22: exactly sqrt(k)/sigma-GDP
    assert exact <= fit.mu <= exact * (1 + 1e-3)
    assert 0.0 <= fit.slack < 1e-10


def test_fit_gdp_refuses_bad_input() -> None:
    accountant = PLDAccountant().compose(GaussianEvent(1.0))
    with pytest.raises(InvalidParameter, match="epsilons"):
        fit_gdp(accountant, epsilons=[0.5, 1.0])
    with pytest.raises(InvalidParameter, match="accountant"):
        fit_gdp("pld")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter, match="mu_max"):
        fit_gdp(accountant, mu_max=0.1)


def test_gdp_epsilon_inverts_gdp_delta() -> None:
    eps = gdp_epsilon(mu=1.0, delta=1e-5)
    assert gdp_delta(mu=1.0, epsilon=eps) <= 1e-5 * (1 + 1e-9)
    assert gdp_delta(mu=1.0, epsilon=eps * 0.999) > 1e-5
    with pytest.raises(InvalidParameter):
        gdp_epsilon(mu=0.0, delta=1e-5)
    with pytest.raises(InvalidParameter):
        gdp_delta(mu=1.0, epsilon=-1.0)


# ---------------------------------------------------------------- accuracy <-> scale


@pytest.mark.parametrize("kind", ["laplace", "discrete_laplace", "gaussian", "discrete_gaussian"])
def test_accuracy_and_scale_are_inverse_on_the_safe_side(kind: str) -> None:
    scale = accuracy_to_scale(kind, 10.0, 0.05)  # type: ignore[arg-type]
    assert scale_to_accuracy(kind, scale, 0.05) <= 10.0 * (1 + 1e-9)  # type: ignore[arg-type]


def test_scale_to_accuracy_is_exact_for_the_continuous_kinds() -> None:
    acc = scale_to_accuracy("laplace", 2.0, 0.1)
    assert math.exp(-acc / 2.0) <= 0.1
    acc = scale_to_accuracy("gaussian", 2.0, 0.1)
    assert math.erfc(acc / (2.0 * math.sqrt(2.0))) <= 0.1


@pytest.mark.parametrize(
    ("kind", "value", "alpha", "match"),
    [
        ("cauchy", 1.0, 0.05, "kind"),
        ("laplace", 1.0, 0.0, "alpha"),
        ("laplace", 1.0, 1.0, "alpha"),
        ("gaussian", -1.0, 0.05, "scale"),
    ],
)
def test_scale_to_accuracy_refuses_bad_input(
    kind: str, value: float, alpha: float, match: str
) -> None:
    with pytest.raises(InvalidParameter, match=match):
        scale_to_accuracy(kind, value, alpha)  # type: ignore[arg-type]


def test_accuracy_to_scale_refuses_bad_input() -> None:
    with pytest.raises(InvalidParameter, match="accuracy"):
        accuracy_to_scale("discrete_laplace", 0.5, 0.05)
    with pytest.raises(InvalidParameter, match="accuracy"):
        accuracy_to_scale("gaussian", 0.0, 0.05)


def test_calibrate_to_epsilon_zero_is_a_total_variation_target() -> None:
    # delta at epsilon 0 is TV = 2 Phi(1 / (2 sigma)) - 1 for the Gaussian (sensitivity 1).
    from scipy.stats import norm

    from dpkit.accounting import GaussianEvent, PLDAccountant
    from dpkit.accounting.calibrate import calibrate

    sigma = calibrate(
        PLDAccountant, GaussianEvent, target_epsilon=0.0, target_delta=0.1, bracket=(0.1, 100.0)
    )
    exact = 1.0 / (2.0 * norm.ppf(0.55))  # TV exactly 0.1
    assert sigma >= exact and sigma <= exact * (1 + 1e-5)
    assert PLDAccountant().compose(GaussianEvent(sigma)).get_delta(0.0) <= 0.1


def test_calibrate_refuses_epsilon_and_delta_both_zero() -> None:
    from dpkit.accounting import GaussianEvent, PLDAccountant
    from dpkit.accounting.calibrate import calibrate
    from dpkit.errors import InvalidParameter

    with pytest.raises(InvalidParameter, match="does not depend on its input"):
        calibrate(PLDAccountant, GaussianEvent, target_epsilon=0.0, target_delta=0.0)
