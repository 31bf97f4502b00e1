"""f-DP: trade-off curves from accountants, (eps, delta) and Gaussian DP.

The curves are lower bounds on the true trade-off function (the safe side); checks are
two-sided against closed forms (the Neyman-Pearson tests of randomized response and of
the Gaussian pair), with a power check (a 30% wrong mu is rejected).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.accounting import ApproxEvent, GaussianEvent, PureEvent
from dpkit.accounting.pld import PLDAccountant
from dpkit.accounting.rdp import RDPAccountant
from dpkit.accounting.tradeoff import (
    approx_dp_tradeoff,
    gaussian_tradeoff,
    gdp_mu,
    max_true_positive_rate,
    tradeoff_curve,
)
from dpkit.errors import InvalidParameter

ALPHAS = np.array([1e-4, 1e-3, 0.01, 0.05, 0.1, 0.3, 0.5, 0.9])
CLOSE = 3e-5  # curve within this of the exact one (400-point eps grid, PLD grid 1e-4)


def test_approx_dp_curve_closed_form() -> None:
    eps, delta = 1.0, 0.01
    got = approx_dp_tradeoff(ALPHAS, epsilon=eps, delta=delta)
    exact = np.maximum.reduce(
        [np.zeros_like(ALPHAS), 1 - delta - math.e * ALPHAS, (1 - delta - ALPHAS) / math.e]
    )
    assert np.all(got <= exact) and np.all(got >= exact - 1e-11)


def test_randomized_response_curve_is_its_pure_dp_curve() -> None:
    # Binary RR is the worst eps-DP pair: its trade-off is exactly f_{eps,0}.
    accountant = PLDAccountant().compose(PureEvent(0.8))
    got = tradeoff_curve(accountant, ALPHAS)
    exact = approx_dp_tradeoff(ALPHAS, epsilon=0.8, delta=0.0)
    assert np.all(got <= exact + 1e-12) and np.all(got >= exact - CLOSE)


@pytest.mark.parametrize(("sigma", "count"), [(1.0, 1), (2.0, 4), (4.0, 10)])
def test_gaussian_curve_is_gdp_and_tight(sigma: float, count: int) -> None:
    accountant = PLDAccountant().compose(GaussianEvent(sigma), count=count)
    mu = gdp_mu(noise_multiplier=sigma, count=count)
    got = tradeoff_curve(accountant, ALPHAS)
    exact = gaussian_tradeoff(ALPHAS, mu=mu)
    assert np.all(got <= exact + 1e-12)  # never claims more privacy than the truth
    assert np.all(got >= exact - CLOSE)  # and tight
    for wrong in (0.7 * mu, 1.3 * mu):  # power: a 30% wrong mu fails the same check
        other = gaussian_tradeoff(ALPHAS, mu=wrong)
        assert not (np.all(got <= other + 1e-12) and np.all(got >= other - CLOSE))


def test_max_tpr_and_other_accountants() -> None:
    pld = PLDAccountant().compose(GaussianEvent(2.0))
    rdp = RDPAccountant().compose(GaussianEvent(2.0))
    tpr_pld = max_true_positive_rate(pld, [1e-3, 1e-2])
    tpr_rdp = max_true_positive_rate(rdp, [1e-3, 1e-2])
    exact = 1 - gaussian_tradeoff([1e-3, 1e-2], mu=0.5)
    assert np.all(tpr_pld >= exact) and np.all(tpr_rdp >= tpr_pld)


def test_explicit_epsilon_grid_is_a_lower_bound_too() -> None:
    accountant = PLDAccountant().compose(GaussianEvent(1.0))
    coarse = tradeoff_curve(accountant, ALPHAS, epsilons=[0.0, 1.0, 2.0])
    fine = tradeoff_curve(accountant, ALPHAS)
    assert np.all(coarse <= fine + 1e-12)


def test_gaussian_tradeoff_endpoints() -> None:
    assert gaussian_tradeoff([0.0], mu=1.0)[0] == pytest.approx(1.0)
    assert gaussian_tradeoff([1.0], mu=1.0)[0] == 0.0
    # mu = 0: perfect privacy, f(alpha) = 1 - alpha.
    np.testing.assert_allclose(gaussian_tradeoff(ALPHAS, mu=0.0), 1 - ALPHAS, atol=1e-11)


@pytest.mark.parametrize(
    "call",
    [
        lambda: approx_dp_tradeoff([0.1, math.nan], epsilon=1.0, delta=0.0),
        lambda: approx_dp_tradeoff([1.5], epsilon=1.0, delta=0.0),
        lambda: approx_dp_tradeoff([], epsilon=1.0, delta=0.0),
        lambda: approx_dp_tradeoff([0.1], epsilon=-1.0, delta=0.0),
        lambda: approx_dp_tradeoff([0.1], epsilon=1.0, delta=1.5),
        lambda: gaussian_tradeoff([0.1], mu=-1.0),
        lambda: gaussian_tradeoff([0.1], mu=math.inf),
        lambda: gdp_mu(noise_multiplier=0.0),
        lambda: gdp_mu(noise_multiplier=1.0, count=0),
        lambda: tradeoff_curve("not an accountant", [0.1]),  # type: ignore[arg-type]
        lambda: tradeoff_curve(PLDAccountant(), [0.1], epsilons=[-1.0]),
        lambda: tradeoff_curve(PLDAccountant(), [0.1], epsilons=[]),
    ],
    ids=["nan", "alpha>1", "empty", "eps<0", "delta>1", "mu<0", "mu-inf", "sigma0", "count0",
         "accountant", "eps-grid<0", "eps-grid-empty"],
)  # fmt: skip
def test_bad_input(call: object) -> None:
    with pytest.raises(InvalidParameter):
        call()  # type: ignore[operator]


def _worst_pair(epsilon: float, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """The pair (P, Q) whose trade-off curve is exactly f_{eps, delta} (four outcomes)."""
    e = math.exp(epsilon)
    p = np.array([delta, (1 - delta) * e / (1 + e), (1 - delta) / (1 + e), 0.0])
    return p, p[::-1].copy()


def _exact_tradeoff(p: np.ndarray, q: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """Type II error of the Neyman-Pearson test of P against Q at type I errors alphas."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(p > 0, q / np.where(p > 0, p, 1.0), np.inf)
    order = np.argsort(-ratio, kind="stable")
    fpr = np.concatenate([[0.0], np.cumsum(p[order])])
    tpr = np.concatenate([[0.0], np.cumsum(q[order])])
    # Of equal FPRs keep the last (largest TPR): outcomes P never gives come first.
    keep = np.concatenate([np.diff(fpr) > 0, [True]])
    tpr_at = np.interp(alphas, fpr[keep], tpr[keep])
    return np.asarray(1.0 - tpr_at)


def test_composed_approx_events_with_a_delta_floor_get_a_curve() -> None:
    # Issue 33, item 1: the composed delta never falls below 1e-6 (it stops at 0.28), so
    # the default epsilon grid was linspace(0, inf) and get_delta(nan) raised. The
    # curve must be defined, and safe: never above the exact trade-off of the product
    # of the two worst-case pairs (Neyman-Pearson on 16 outcomes).
    accountant = PLDAccountant().compose(ApproxEvent(1.0, 0.1)).compose(ApproxEvent(2.0, 0.2))
    alphas = np.linspace(0.0, 1.0, 201)
    curve = tradeoff_curve(accountant, alphas)
    tpr = max_true_positive_rate(accountant, alphas)
    assert np.all(np.isfinite(curve)) and np.all((curve >= 0) & (curve <= 1))
    np.testing.assert_allclose(tpr, 1.0 - curve)
    (p1, q1), (p2, q2) = _worst_pair(1.0, 0.1), _worst_pair(2.0, 0.2)
    exact = _exact_tradeoff(np.outer(p1, p2).ravel(), np.outer(q1, q2).ravel(), alphas)
    assert np.all(curve <= exact + 1e-9)
    assert tpr[0] >= 0.28 - 1e-9  # at FPR 0 the delta floor is the attack's power
    # ... and close to exact where the accountant's pairs say it all (within 0.05).
    assert np.max(exact - curve) < 0.05
