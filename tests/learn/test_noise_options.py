"""GaussianNB(noise=...): budgets and events, the noise's law, the contract, bad input."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline

import dpkit as dp
from dpkit.accounting import PureAccountant
from dpkit.accounting.events import (
    ApproxEvent,
    ComposedEvent,
    GaussianEvent,
    RepeatedEvent,
    TruncatedLaplaceEvent,
)
from dpkit.accounting.filters import ApproxDPFilter
from dpkit.accounting.pld import PLDAccountant
from dpkit.design import design_noise
from dpkit.learn._moments import DEFAULT_SHARES, moment_noise, moment_scales
from dpkit.learn._noise import SCALE_MARGIN, optimal_design, scalar_noise
from dpkit.testing import seeded

NOISES = ("gaussian", "truncated_laplace", "optimal")
#: KS critical value: P(D_n > c) <= 2 exp(-2 n c^2) (DKW, Massart 1990) = 1e-6.
DRAWS = 4000
CRITICAL = math.sqrt(math.log(2 / 1e-6) / (2 * DRAWS))


def blobs(rows: int = 1500, features: int = 3) -> tuple[np.ndarray, np.ndarray]:
    generator = np.random.default_rng(0)  # data, not noise
    y = generator.integers(0, 2, rows)
    X = np.clip(0.5 + (y[:, None] - 0.5) * 0.5 + generator.normal(0, 0.15, (rows, features)), 0, 1)
    return X, y


def model(noise: object = "laplace", **kwargs: object) -> dp.learn.GaussianNB:
    params: dict[str, object] = {"epsilon": 1.0, "bounds": (0, 1), "classes": [0, 1], "rng": 5}
    if noise != "laplace":
        params["delta"] = 0.1
    params.update(kwargs)
    return dp.learn.GaussianNB(noise=noise, **params)


# -- the default is unchanged -----------------------------------------------------------


def test_default_laplace_is_todays_model() -> None:
    X, y = blobs()
    default = dp.learn.GaussianNB(epsilon=1.0, bounds=(0, 1), classes=[0, 1], rng=seeded(3))
    explicit = model("laplace", delta=0.25, rng=seeded(3))  # Laplace ignores delta
    default.fit(X, y)
    explicit.fit(X, y)
    np.testing.assert_array_equal(default.theta_, explicit.theta_)
    np.testing.assert_array_equal(default.var_, explicit.var_)
    assert default.event == explicit.event == moment_scales(1.0, 3, DEFAULT_SHARES).event
    assert default.guarantee == explicit.guarantee == dp.PureDP(1.0)


# -- events and guarantees meet the budget ----------------------------------------------


@pytest.mark.parametrize("noise", NOISES)
def test_event_meets_the_budget(noise: str) -> None:
    X, y = blobs()
    fitted = model(noise, epsilon=0.8, delta=0.05).fit(X, y)
    assert fitted.guarantee == dp.ApproxDP(0.8, 0.05)
    assert fitted.event == fitted.privacy_event(3)
    count, each_sum, each_square = fitted.event.events
    assert isinstance(each_sum, RepeatedEvent) and each_sum.count == 3
    leaf = {
        "gaussian": GaussianEvent,
        "truncated_laplace": TruncatedLaplaceEvent,
        "optimal": ApproxEvent,
    }[noise]
    assert isinstance(count, leaf) and isinstance(each_square.event, leaf)
    if noise == "gaussian":
        # the PLD accountant reads the Gaussian events themselves
        accountant = PLDAccountant().compose(fitted.event)
        assert accountant.get_epsilon(0.05) <= 0.8
    else:
        # basic composition of the stated (eps_i, delta_i): the filter admits it
        ApproxDPFilter(dp.ApproxDP(0.8, 0.05)).spend(fitted.event)


def test_budgets_add_up_and_a_larger_spend_is_refused() -> None:
    nb = model("optimal", epsilon=1.0, delta=0.1)
    (e_n, d_n), (e_1, d_1), (e_2, d_2) = nb.statistic_budgets(7)
    assert e_n + 7 * e_1 + 7 * e_2 <= 1.0 and d_n + 7 * d_1 + 7 * d_2 <= 0.1
    assert e_n + 7 * e_1 + 7 * e_2 > 0.999  # and nothing is wasted
    # the check above can fail: an event 30% over budget is refused by the same filter
    over = ComposedEvent((ApproxEvent(1.3 * e_n, d_n), RepeatedEvent(ApproxEvent(e_1, d_1), 14)))
    with pytest.raises(dp.errors.BudgetExceeded):
        ApproxDPFilter(dp.ApproxDP(1.0, 0.1)).spend(over)


def test_laplace_stays_pure() -> None:
    X, y = blobs()
    fitted = model("laplace").fit(X, y)
    assert PureAccountant().compose(fitted.event).get_epsilon(0.0) <= 1.0


# -- the noise added has the claimed law ----------------------------------------------------


def ks(sample: np.ndarray, cdf: object) -> float:
    return float(stats.kstest(sample, cdf).statistic)


def test_optimal_noise_has_the_designed_law() -> None:
    noises = moment_noise("optimal", 1.0, 0.1, 2, DEFAULT_SHARES, "test")
    noise = noises.sums  # sensitivity 1 + 2^-27, share (0.45 eps / 2, 0.45 delta / 2)
    design = optimal_design(noise.epsilon, noise.delta)
    factor = noise.sensitivity * (1 + SCALE_MARGIN) / design.sensitivity
    # the scaled statistic fits the design's sensitivity, and the design its budget
    assert design.epsilon <= noise.epsilon and design.achieved_delta <= noise.delta
    draws = noise.release(np.zeros(DRAWS), seeded(11))

    def claimed(x: np.ndarray) -> np.ndarray:
        return np.asarray(design.cdf(x / factor))

    def wrong(x: np.ndarray) -> np.ndarray:  # a scale 30% too large
        return np.asarray(design.cdf(x / (1.3 * factor)))

    assert ks(draws, claimed) < CRITICAL
    assert ks(draws, wrong) > CRITICAL  # power: the same test rejects a 30% error


def test_gaussian_noise_has_the_calibrated_sigma() -> None:
    noise = scalar_noise("gaussian", epsilon=0.3, delta=1e-3, sensitivity=1.5, owner="test")
    sigma = dp.Gaussian.calibrate(epsilon=0.3, delta=1e-3, sensitivity=1.5).sigma
    assert noise.standard_deviation == sigma
    draws = noise.release(np.zeros(DRAWS), seeded(12))
    assert ks(draws, stats.norm(scale=sigma).cdf) < CRITICAL
    assert ks(draws, stats.norm(scale=1.3 * sigma).cdf) > CRITICAL


def test_truncated_laplace_noise_is_bounded_and_calibrated() -> None:
    noise = scalar_noise(
        "truncated_laplace", epsilon=0.5, delta=0.01, sensitivity=2.0, owner="test"
    )
    mechanism = dp.TruncatedLaplace.calibrate(epsilon=0.5, delta=0.01, sensitivity=2.0)
    draws = noise.release(np.zeros(DRAWS), seeded(13))
    assert np.abs(draws).max() <= mechanism.bound + mechanism.granularity

    def law(x: np.ndarray, scale: float) -> np.ndarray:
        a = mechanism.bound
        x = np.clip(x, -a, a)
        tail = (np.exp(-np.abs(x) / scale) - np.exp(-a / scale)) / (1 - np.exp(-a / scale)) / 2
        return np.where(x < 0, tail, 1 - tail)

    assert ks(draws, lambda x: law(x, mechanism.scale)) < CRITICAL
    assert ks(draws, lambda x: law(x, 1.3 * mechanism.scale)) > CRITICAL


def test_designs_are_cached() -> None:
    optimal_design.cache_clear()
    X, y = blobs(features=4)
    model("optimal").fit(X, y)
    solved = optimal_design.cache_info().misses
    # the count's share, and the one of sums and squares (equal shares): two LPs
    assert solved == 2
    model("optimal", rng=6).fit(X, y)
    assert optimal_design.cache_info().misses == solved


# -- a user's design ----------------------------------------------------------------------


def test_a_users_design_is_used_for_every_statistic() -> None:
    X, y = blobs(features=2)
    budgets = model("optimal").statistic_budgets(2)
    smallest = (min(e for e, _ in budgets), min(d for _, d in budgets))
    design = design_noise(
        epsilon=smallest[0], delta=smallest[1], sensitivity=2.0, loss="l1",
        granularity=0.5, support=60.0, lower_bound=False,
    )  # fmt: skip
    fitted = model(design).fit(X, y)
    leaves = [fitted.event.events[0], fitted.event.events[1].event, fitted.event.events[2].event]
    assert all(leaf == design.event for leaf in leaves)
    assert fitted.score(X, y) > 0.8


@pytest.mark.parametrize("field", ["epsilon", "delta"])
def test_a_design_that_does_not_fit_is_refused(field: str) -> None:
    X, y = blobs(features=2)
    budgets = model("optimal").statistic_budgets(2)
    e_1, d_1 = min(e for e, _ in budgets), min(d for _, d in budgets)
    epsilon, delta = (1.3 * e_1, d_1 / 2) if field == "epsilon" else (e_1 / 2, 1.3 * d_1)
    design = design_noise(
        epsilon=epsilon, delta=delta, granularity=0.25, support=40.0, lower_bound=False
    )
    nb = model(design)
    with pytest.raises(dp.errors.InvalidParameter, match="NoiseDesign with epsilon <="):
        nb.fit(X, y)
    assert not hasattr(nb, "event")  # failing calls spend nothing


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("noise", NOISES)
def test_delta_zero_is_refused_for_approximate_noises(noise: str) -> None:
    X, y = blobs()
    nb = model(noise, delta=0.0)
    with pytest.raises(dp.errors.InvalidParameter, match=r"'delta'.*never pure"):
        nb.fit(X, y)
    assert not hasattr(nb, "event")
    with pytest.raises(dp.errors.InvalidParameter):
        nb.privacy_event(3)


@pytest.mark.parametrize("bad", ["Laplace", "staircase", None, 3, ("laplace",)])
def test_unknown_noise_is_refused(bad: object) -> None:
    X, y = blobs()
    with pytest.raises(dp.errors.InvalidParameter, match="'noise'"):
        model(bad).fit(X, y)


@pytest.mark.parametrize("delta", [float("nan"), -0.1, 1.0, float("inf")])
def test_bad_delta_is_refused(delta: float) -> None:
    X, y = blobs()
    with pytest.raises(dp.errors.InvalidParameter, match="delta"):
        model("gaussian", delta=delta).fit(X, y)


# -- scikit-learn contract ------------------------------------------------------------------


@pytest.mark.parametrize("noise", NOISES)
def test_clone_pipeline_and_cross_validation(noise: str) -> None:
    X, y = blobs()
    nb = model(noise, rng=seeded(4))
    copy = clone(nb)
    assert copy.get_params()["noise"] == noise and copy.get_params()["delta"] == 0.1
    scores = cross_val_score(make_pipeline(dp.learn.MinMaxScaler(bounds=(0, 1)), copy), X, y, cv=2)
    assert scores.min() > 0.8
    assert nb.set_params(delta=0.2).delta == 0.2


# -- the scaling to the design's sensitivity never overshoots -------------------------------


@pytest.mark.parametrize("sensitivity", [1.0 + 2.0**-27, 0.5 + 2.0**-27, 1.0, 3.7])
@pytest.mark.parametrize("design_sensitivity", [1.0, 2.0**-8, 0.3])
def test_scaled_neighbours_differ_by_at_most_the_design_sensitivity(
    sensitivity: float, design_sensitivity: float
) -> None:
    from dpkit.accounting._math.rounding import up

    factor = up(sensitivity * (1.0 + SCALE_MARGIN) / design_sensitivity, 4)  # as _noise does
    generator = np.random.default_rng(3)  # values to check, not noise
    # statistics up to n s with n < 2^26 rows, the largest where rounding is coarsest
    big = np.concatenate([generator.uniform(-1, 1, 6_000) * 2.0**26, [2.0**26 - 1, -(2.0**26)]])
    values = big * sensitivity
    checked = 0
    for move in (sensitivity, -sensitivity, np.nextafter(sensitivity, 0)):
        neighbours = values + move
        # keep the pairs that really are neighbours: exact |v - v'| <= s
        exact = np.array(
            [abs(Fraction(b) - Fraction(a)) for a, b in zip(values, neighbours, strict=True)]
        )
        real = exact <= Fraction(sensitivity)
        gap = np.abs(values / factor - neighbours / factor)
        assert (gap[real] <= design_sensitivity).all()
        checked += int(real.sum())
    assert checked > 8_000  # of 18,006 pairs
    # power: a scale factor 30% too small breaks the same check
    small = factor / 1.3
    worst = np.abs(values / small - (values + sensitivity) / small)
    assert (worst > design_sensitivity).all()


def test_per_statistic_sensitivities_include_the_rounding_slack() -> None:
    from dpkit.learn._base import grid_step

    noises = moment_noise("gaussian", 1.0, 0.1, 4, DEFAULT_SHARES, "test")
    half_step = grid_step(1.0) / 2
    assert noises.count.sensitivity == 1.0  # a row adds 1 to its class's count
    assert noises.sums.sensitivity >= 1.0 + half_step  # |rounded z_j| <= 1 + s/2
    assert noises.squares.sensitivity >= 0.5 + half_step  # |rounded z_j^2 - 1/2| <= 1/2 + s/2
    assert noises.sums.sensitivity < 1.0 + 2 * half_step  # and not wastefully larger
