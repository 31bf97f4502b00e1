"""Golden cross-checks of dpkit.accounting against Google's dp_accounting.

Where both libraries compute the same quantity the values must agree to 1e-9 relative
(dpkit only ever rounds up, by far less than that). dp_accounting is a test dependency
(the ``test`` and ``peers`` extras). A few private dp_accounting helpers are used where
the quantity has no public entry point; they are named in the comments.
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import accountant as pld_accountant
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld
from dp_accounting.pld import privacy_loss_mechanism as plm
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

import dpkit.accounting as acc

REL = 1e-9
DP_ORDERS = tuple(float(a) for a in rdp_lib.DEFAULT_RDP_ORDERS)


# --- Gaussian (dp_accounting.gaussian_mechanism, Balle & Wang 2018) ----------------------


@pytest.mark.parametrize(
    ("epsilon", "delta"),
    [
        pytest.param(1.0, 1e-5, id="eps1"),
        pytest.param(0.1, 1e-6, id="eps0.1"),
        pytest.param(3.0, 1e-9, id="eps3"),
        pytest.param(8.0, 1e-3, id="eps8"),
        pytest.param(0.5, 0.1, id="large-delta"),
    ],
)
def test_gaussian_sigma_matches_dp_accounting(epsilon: float, delta: float) -> None:
    ours = acc.gaussian_sigma_analytic(epsilon, delta)
    theirs = dp_accounting.get_sigma_gaussian(epsilon, delta)
    assert ours == pytest.approx(theirs, rel=REL)


@pytest.mark.parametrize(
    ("sigma", "delta"),
    [
        pytest.param(1.0, 1e-5, id="sigma1"),
        pytest.param(0.5, 1e-6, id="sigma0.5"),
        pytest.param(5.0, 1e-9, id="sigma5"),
        pytest.param(40.0, 1e-12, id="sigma40"),
    ],
)
def test_gaussian_epsilon_matches_dp_accounting(sigma: float, delta: float) -> None:
    ours = acc.gaussian_epsilon(sigma, delta)
    theirs = dp_accounting.get_epsilon_gaussian(sigma, delta)
    assert ours == pytest.approx(theirs, rel=REL)


# --- Laplace RDP (dp_accounting private _laplace_rdp, Mironov Prop. 6) --------------------


@pytest.mark.parametrize("epsilon", [1e-3, 0.1, 1.0, 4.0])
def test_laplace_rdp_matches_dp_accounting(epsilon: float) -> None:
    for order in (1.0, 1.01, 1.05, 1.1, 1.5, 2.0, 7.5, 64.0, 1024.0):
        ours = acc.laplace_rdp(epsilon, order)
        theirs = rdp_lib._laplace_rdp(epsilon, order)
        assert ours == pytest.approx(theirs, rel=REL), order


@pytest.mark.parametrize(("noise_multiplier", "count"), [(1.0, 1), (2.0, 10), (10.0, 300)])
def test_laplace_composition_epsilon_matches_rdp_accountant(
    noise_multiplier: float, count: int
) -> None:
    event = dp_accounting.LaplaceDpEvent(noise_multiplier)
    theirs = dp_accounting.rdp.RdpAccountant(list(DP_ORDERS)).compose(event, count)
    eps = 1.0 / noise_multiplier
    curve = count * acc.RDP(DP_ORDERS, tuple(acc.laplace_rdp(eps, a) for a in DP_ORDERS))
    for delta in (1e-3, 1e-6, 1e-10):
        ours = curve.to_approx(delta).epsilon
        assert ours == pytest.approx(theirs.get_epsilon(delta), rel=REL)
        assert curve.delta_for(ours) == pytest.approx(theirs.get_delta(ours), rel=1e-6)


# --- pure DP -> RDP = binary randomized response (private _randomized_response_rdp_...) --


@pytest.mark.parametrize("epsilon", [0.01, 0.5, 1.0, 3.0])
def test_tight_pure_to_rdp_is_binary_randomized_response(epsilon: float) -> None:
    # dp_accounting's RR with k = 2 buckets and noise parameter p reports the true bit
    # with probability 1 - p/2; p = 2 / (e^eps + 1) makes it exactly eps-DP.
    p = 2.0 / (math.exp(epsilon) + 1.0)
    curve = acc.PureDP(epsilon).to_rdp()
    for order, ours in zip(curve.orders, curve.epsilons, strict=True):
        theirs = rdp_lib._randomized_response_rdp_replace_one(p, 2, order)
        assert ours == pytest.approx(theirs, rel=1e-8, abs=1e-15), order


# --- RDP -> (eps, delta) (public compute_epsilon / compute_delta) -------------------------


@pytest.mark.parametrize(
    "curve",
    [
        pytest.param(acc.ZCDP(0.05).to_rdp(DP_ORDERS), id="zcdp"),
        pytest.param(acc.PureDP(0.3).to_rdp(DP_ORDERS), id="pure"),
        pytest.param(
            acc.RDP(DP_ORDERS, tuple(acc.laplace_rdp(0.2, a) for a in DP_ORDERS)), id="laplace"
        ),
    ],
)
def test_rdp_conversions_match_dp_accounting(curve: acc.RDP) -> None:
    for delta in (1e-2, 1e-5, 1e-9):
        theirs, _ = rdp_lib.compute_epsilon(curve.orders, curve.epsilons, delta)
        assert curve.to_approx(delta).epsilon == pytest.approx(theirs, rel=REL, abs=1e-15)
    for epsilon in (0.1, 1.0, 3.0):
        theirs, _ = rdp_lib.compute_delta(curve.orders, curve.epsilons, epsilon)
        assert curve.delta_for(epsilon) == pytest.approx(theirs, rel=REL, abs=1e-300)


@pytest.mark.parametrize(("rho", "delta"), [(0.025, 1e-6), (0.5, 1e-5), (2.0, 1e-9)])
def test_zcdp_conversion_never_worse_than_rdp_accountant(rho: float, delta: float) -> None:
    # dp_accounting composes ZCDpEvent on its order grid; our continuous optimum over
    # orders can only be smaller, and not by much.
    theirs = dp_accounting.rdp.RdpAccountant().compose(dp_accounting.ZCDpEvent(rho))
    ours = acc.ZCDP(rho).to_approx(delta).epsilon
    assert ours <= theirs.get_epsilon(delta)
    assert ours >= 0.995 * theirs.get_epsilon(delta)


# --- optimal composition (pld.accountant.advanced_composition, KOV Thm 3.3) ---------------


@pytest.mark.parametrize(
    ("epsilon", "delta", "count", "target"),
    [
        pytest.param(0.1, 0.0, 10, 1e-5, id="k10"),
        pytest.param(0.5, 1e-6, 20, 1e-4, id="k20"),
        pytest.param(1.0, 0.0, 7, 1e-3, id="k7"),
        pytest.param(0.05, 1e-7, 100, 1e-5, id="k100"),
        pytest.param(0.3, 0.0, 50, 0.01, id="k50"),
        pytest.param(0.02, 0.0, 400, 1e-6, id="k400"),
        pytest.param(0.5, 1e-3, 10, 1e-3, id="none"),
    ],
)
def test_optimal_composition_matches_dp_accounting(
    epsilon: float, delta: float, count: int, target: float
) -> None:
    params = pld_common.DifferentialPrivacyParameters(epsilon, delta)
    theirs = pld_accountant.advanced_composition(params, count, target)
    ours = acc.optimal_composition(epsilon, delta, count, target)
    if theirs is None:
        assert ours is None
    else:
        assert ours is not None
        assert ours.epsilon == pytest.approx(theirs, rel=1e-12)


def test_optimal_composition_below_pessimistic_pld() -> None:
    # For k = 10^4 dp_accounting's closed form overflows; its pessimistic PLD of the
    # composition is an upper bound on the exact value, which KOV computes on a grid of
    # step 2 eps. Each of the k convolutions may round losses up by at most one
    # discretisation interval h, so the PLD is within k h of the truth.
    k, h, eps = 10_000, 1e-5, 0.01
    pmf = pld.from_privacy_parameters(
        pld_common.DifferentialPrivacyParameters(eps, 0.0), value_discretization_interval=h
    ).self_compose(k)
    upper = pmf.get_epsilon_for_delta(1e-6)
    ours = acc.optimal_composition(eps, 0.0, k, 1e-6)
    assert ours is not None
    assert upper - k * h - 2 * eps <= ours.epsilon <= upper


# --- discrete Gaussian (pld.privacy_loss_mechanism.DiscreteGaussianPrivacyLoss) -----------


@pytest.mark.parametrize(
    ("sigma", "epsilon", "sensitivity"),
    [
        pytest.param(1.0, 1.0, 1, id="sigma1"),
        pytest.param(3.0, 0.5, 1, id="sigma3"),
        pytest.param(2.0, 1.0, 2, id="sens2"),
        pytest.param(10.0, 0.3, 3, id="sens3"),
        pytest.param(30.0, 0.2, 1, id="small-delta"),
        pytest.param(0.7, 2.0, 1, id="small-sigma"),
    ],
)
def test_discrete_gaussian_delta_matches_dp_accounting(
    sigma: float, epsilon: float, sensitivity: int
) -> None:
    # dp_accounting truncates the noise at a bound whose tail mass is negligible here.
    theirs = plm.DiscreteGaussianPrivacyLoss(sigma, sensitivity=sensitivity)
    ours = acc.discrete_gaussian_delta(sigma, epsilon, sensitivity)
    assert ours == pytest.approx(theirs.get_delta_for_epsilon(epsilon), rel=REL)


def test_laplace_pure_epsilon_matches_pld_profile() -> None:
    # The Laplace event's stated epsilon is exactly where dp_accounting's exact profile
    # reaches delta = 0.
    event = acc.LaplaceEvent(2.0)
    eps = acc.pure_epsilon(event)
    assert eps is not None
    loss = plm.LaplacePrivacyLoss(2.0)
    assert loss.get_delta_for_epsilon(eps) == pytest.approx(0.0, abs=1e-15)
    assert loss.get_delta_for_epsilon(0.99 * eps) > 0.0
    assert np.isfinite(eps)
