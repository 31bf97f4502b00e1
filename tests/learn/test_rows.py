"""dpkit.learn._rows: the rows a fit uses, shared by the models and dp.tune (issue 27, 4)."""

from __future__ import annotations

import numpy as np
import pytest

import dpkit as dp
from dpkit.learn._rows import regression_rows
from dpkit.selection.tuning import _data, _score_function
from dpkit.testing import seeded


def test_regression_rows_drop_non_finite_features_and_targets() -> None:
    X = np.array([[0.1, 0.2], [np.nan, 0.2], [0.3, np.inf], [0.4, 0.5], [0.6, 0.7]])
    y = np.array([1.0, 2.0, 3.0, np.nan, -np.inf])
    features, target = regression_rows(X, y, "test")
    assert features.tolist() == [[0.1, 0.2]] and target.tolist() == [1.0]
    empty, none = regression_rows(np.empty((0, 2)), np.empty(0), "test")
    assert empty.shape == (0, 2) and none.shape == (0,)


def test_regression_rows_raise_for_the_schema_only() -> None:
    with pytest.raises(dp.DataError, match="numeric"):
        regression_rows(np.zeros((2, 1)), np.array(["a", "b"]), "test")
    with pytest.raises(dp.DataError, match="one entry per row"):
        regression_rows(np.zeros((2, 1)), np.zeros(3), "test")


def test_tune_keeps_exactly_the_rows_the_regressor_fit_keeps() -> None:
    model = dp.learn.LinearRegression(bounds=(0, 1), bounds_y=(0, 3))
    X = np.array([[0.1, 0.2], [0.5, 0.5], [np.nan, 0.3], [0.7, 0.8]])
    y = np.array([1.0, np.nan, 2.0, np.inf])
    features, target = _data(model, X, y, "tune")
    assert features.tolist() == [[0.1, 0.2]] and target.tolist() == [1.0]
    # Its score is then a finite sum of terms in [-1, 0]: sensitivity 1, never NaN.
    fitted = model.set_params(rng=seeded(0)).fit(features, target)
    score = _score_function(model, features, target)(fitted)
    assert -1.0 <= score <= 0.0


def test_tune_keeps_classifier_labels_outside_the_classes_as_errors() -> None:
    # A label no prediction equals scores 0 (sensitivity 1 still); fit drops it.
    model = dp.learn.GaussianNB(bounds=(0, 1), classes=[0, 1])
    X = np.array([[0.1, 0.2], [0.5, np.nan], [0.7, 0.8]])
    features, labels = _data(model, X, np.array([0.0, 1.0, np.nan]), "tune")
    assert features.tolist() == [[0.1, 0.2], [0.7, 0.8]]
    assert labels[0] == 0.0 and np.isnan(labels[1])


def test_tune_with_a_nan_regression_target_never_fails() -> None:
    generator = np.random.default_rng(2)  # data, not noise
    X = generator.uniform(0.0, 1.0, (60, 2))
    y = np.append(X[:-1] @ np.array([1.0, 1.0]), np.nan)
    for seed in range(10):
        result = dp.tune(
            dp.learn.LinearRegression(bounds=(0, 1), bounds_y=(0, 2)),
            {"alpha": [0.0, "auto"]},
            X,
            y,
            budget=1.0,
            mean_trials=2,
            validation_fraction=0.5,
            rng=seeded(seed),
        )
        assert np.isfinite(result.noisy_score)


def test_unpenalised_linear_regression_never_raises_on_a_singular_system() -> None:
    # alpha = 0 on one constant feature: the noisy Gram matrix projected onto the PSD
    # cone is often singular; the fit's least-squares solve must not raise (a fit that
    # fails for some noise draws fails at a data-dependent rate).
    X = np.full((50, 3), 0.5)
    y = np.ones(50)
    for seed in range(30):
        model = dp.learn.LinearRegression(
            bounds=(0, 1), bounds_y=(0, 2), alpha=0.0, fit_intercept=False, rng=seeded(seed)
        ).fit(X, y)
        assert np.isfinite(model.coef_).all() and np.isfinite(model.intercept_)
