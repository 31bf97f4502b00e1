"""SparseLogisticRegression: DP proximal coordinate descent with noise=."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline

import dpkit as dp
from dpkit.accounting import PureAccountant
from dpkit.accounting.events import ComposedEvent, GaussianEvent, LaplaceEvent, RepeatedEvent
from dpkit.accounting.filters import ApproxDPFilter
from dpkit.accounting.pld import PLDAccountant
from dpkit.design import design_noise
from dpkit.learn._base import NotFittedError
from dpkit.learn._noise import SCALE_MARGIN, optimal_design
from dpkit.learn.sparse_logistic import _GRADIENT_SENSITIVITY, gradient_sum
from dpkit.testing import seeded

NOISES = ("laplace", "gaussian", "truncated_laplace", "optimal")


def sparse_data(rows: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """Two informative features (the first two) and four of pure noise, in [0, 1]."""
    generator = np.random.default_rng(1)  # data, not noise
    X = generator.uniform(0, 1, (rows, 6))
    logits = 6.0 * (X[:, 0] - 0.5) - 6.0 * (X[:, 1] - 0.5)
    y = (generator.uniform(0, 1, rows) < 1 / (1 + np.exp(-logits))).astype(int)
    return X, y


def model(noise: object = "laplace", **kwargs: object) -> dp.learn.SparseLogisticRegression:
    params: dict[str, object] = {"epsilon": 2.0, "bounds": (0, 1), "rng": seeded(5)}
    if noise != "laplace":
        params["delta"] = 0.1
    params.update(kwargs)
    return dp.learn.SparseLogisticRegression(noise=noise, **params)


# -- it learns, and it is sparse ------------------------------------------------------------


@pytest.mark.parametrize("noise", NOISES)
def test_learns_the_informative_features(noise: str) -> None:
    X, y = sparse_data()
    fitted = model(noise, alpha=0.03, epochs=5).fit(X, y)
    coef = fitted.coef_[0]
    assert coef[0] > 0 > coef[1]
    assert fitted.score(X, y) > 0.7  # the Bayes rate here is about 0.78
    # the l1 penalty zeroes most of the four noise features (soft threshold)
    assert np.sum(coef[2:] == 0.0) >= 2


def test_original_units_match_the_scaled_model() -> None:
    X, y = sparse_data(1000)
    fitted = model(bounds=(-1, 3)).fit(X, y)
    direct = X @ fitted.coef_[0] + fitted.intercept_[0]  # X inside the bounds: no clipping
    np.testing.assert_allclose(fitted.decision_function(X), direct, rtol=1e-9, atol=1e-9)
    proba = fitted.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(fitted.predict(X), (direct > 0).astype(int))


# -- privacy: the sensitivity of an update and the composition of the run --------------------


def test_one_row_moves_a_gradient_sum_by_at_most_the_sensitivity() -> None:
    generator = np.random.default_rng(2)  # data, not noise
    rows = 500
    design = np.hstack([generator.uniform(-1, 1, (rows, 3)), np.ones((rows, 1))])
    design[:5, 0] = 1.0  # extreme rows: |z| = 1, margins far out
    signs = generator.choice([-1.0, 1.0], rows)
    margins = generator.normal(0, 30, rows)
    for j in range(4):
        full = gradient_sum(design, signs, margins, j)
        for i in range(0, rows, 7):
            keep = np.arange(rows) != i
            moved = abs(full - gradient_sum(design[keep], signs[keep], margins[keep], j))
            assert moved <= _GRADIENT_SENSITIVITY


@pytest.mark.parametrize("noise", NOISES)
def test_event_meets_the_budget(noise: str) -> None:
    X, y = sparse_data(600)
    fitted = model(noise, epsilon=0.9, delta=0.05, epochs=3).fit(X, y)
    event = fitted.event
    assert event == fitted.privacy_event(6)
    assert isinstance(event, ComposedEvent)
    steps = event.events[1]
    assert isinstance(steps, RepeatedEvent) and steps.count == 3 * 7  # epochs (d + 1)
    if noise == "laplace":
        assert isinstance(steps.event, LaplaceEvent)
        assert fitted.guarantee == dp.PureDP(0.9)
        assert PureAccountant().compose(event).get_epsilon(0.0) <= 0.9
        return
    assert fitted.guarantee == dp.ApproxDP(0.9, 0.05)
    if noise == "gaussian":
        assert isinstance(steps.event, GaussianEvent)
        # the PLD accountant proves more than basic composition
        assert PLDAccountant().compose(event).get_epsilon(0.05) < 0.9
    else:
        ApproxDPFilter(dp.ApproxDP(0.9, 0.05)).spend(event)
        with pytest.raises(dp.errors.BudgetExceeded):  # the same check rejects a 30% overspend
            ApproxDPFilter(dp.ApproxDP(0.9 / 1.3, 0.05)).spend(event)


def test_update_budget_adds_up() -> None:
    regression = model("optimal", epsilon=1.0, delta=0.1, epochs=4, count_share=0.1)
    epsilon, delta = regression.update_budget(9)
    assert 0.1 + 40 * epsilon <= 1.0 and 0.01 + 40 * delta <= 0.1
    assert 0.1 + 40 * epsilon > 0.9999


def test_update_noise_has_the_designed_law() -> None:
    regression = model("optimal", epsilon=1.0, delta=0.1, epochs=2)
    epsilon, delta = regression.update_budget(4)
    _, step, _ = regression._noises(4, "test")
    design = optimal_design(epsilon, delta)
    factor = _GRADIENT_SENSITIVITY * (1 + SCALE_MARGIN) / design.sensitivity
    draws = step.release(np.zeros(3000), seeded(9))
    critical = math.sqrt(math.log(2 / 1e-6) / (2 * 3000))  # DKW: false failure 1e-6
    assert stats.kstest(draws, lambda x: design.cdf(x / factor)).statistic < critical
    assert stats.kstest(draws, lambda x: design.cdf(x / (1.3 * factor))).statistic > critical


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"noise": "gaussian", "delta": 0.0}, "never pure"),
        ({"noise": "optimal", "delta": 0.0}, "never pure"),
        ({"noise": "uniform"}, "'noise'"),
        ({"bounds": None}, "bounds"),
        ({"classes": (1, 1)}, "classes"),
        ({"classes": (0, 1, 2)}, "classes"),
        ({"count_share": 1.0}, "count_share"),
        ({"epochs": 0}, "epochs"),
        ({"alpha": -1.0}, "alpha"),
        ({"step_size": float("nan")}, "step_size"),
        ({"epsilon": float("inf")}, "epsilon"),
    ],
    ids=lambda value: str(value)[:40],
)
def test_bad_parameters_are_refused_before_any_spend(params: dict[str, object], match: str) -> None:
    X, y = sparse_data(200)
    regression = model(**params)
    with pytest.raises(dp.errors.InvalidParameter, match=match):
        regression.fit(X, y)
    assert not hasattr(regression, "event")


def test_a_design_over_the_update_budget_is_refused() -> None:
    X, y = sparse_data(200)
    epsilon, delta = model("optimal", epochs=1).update_budget(6)
    design = design_noise(
        epsilon=1.3 * epsilon, delta=delta / 2, granularity=0.25, support=30.0, lower_bound=False
    )
    regression = model(design, epochs=1)
    with pytest.raises(dp.errors.InvalidParameter, match="NoiseDesign with epsilon <="):
        regression.fit(X, y)
    assert not hasattr(regression, "event")


def test_unusable_rows_are_dropped_never_refused() -> None:
    X, y = sparse_data(300)
    clean = model(rng=seeded(21)).fit(X, y)
    # extra rows with an unknown label or a non-finite feature change nothing
    X_more = np.vstack([X, np.full((2, 6), 0.5), [[np.nan] * 6]])
    y_more = np.concatenate([y, [7, 1], [0]])
    X_more[-2, 3] = np.inf
    dirty = model(rng=seeded(21)).fit(X_more, y_more)
    np.testing.assert_array_equal(clean.coef_, dirty.coef_)
    assert dirty.event == clean.event
    # an empty table is fitted as well (noise only)
    empty = model().fit(np.zeros((0, 6)), np.zeros(0))
    assert empty.event == clean.event


def test_numpy_generators_are_refused() -> None:
    X, y = sparse_data(100)
    with pytest.raises(dp.errors.InvalidParameter, match="rng"):
        model(rng=np.random.default_rng(0)).fit(X, y)


def test_unfitted_use_and_wrong_width() -> None:
    X, y = sparse_data(200)
    with pytest.raises(NotFittedError):
        model().predict(X)
    fitted = model().fit(X, y)
    with pytest.raises(dp.errors.DataError, match="features"):
        fitted.predict(X[:, :3])


# -- scikit-learn contract ---------------------------------------------------------------------


@pytest.mark.parametrize("noise", ["laplace", "truncated_laplace"])
def test_clone_pipeline_and_cross_validation(noise: str) -> None:
    X, y = sparse_data(2000)
    regression = model(noise)
    copy = clone(regression)
    assert copy.get_params()["noise"] == noise
    pipeline = make_pipeline(dp.learn.MinMaxScaler(bounds=(0, 1)), copy)
    assert cross_val_score(pipeline, X, y, cv=2).min() > 0.7
    assert regression.set_params(alpha=0.5).alpha == 0.5
