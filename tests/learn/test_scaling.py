"""LogisticRegression scales features by their public bounds, and warns without them.

Issue 32, item 8: on raw Adult columns (ages in years, capital gains in dollars) the
default learning rate trains a model barely above the majority class; the same columns
with their public bounds (:data:`dpkit.data.ADULT_PUBLIC_BOUNDS`), mapped to [0, 1] for
free, train a good one. Measured on this split (seeds 0-2, epsilon 1): raw 0.778-0.783,
bounds 0.835-0.839, majority class 0.757.
"""

from __future__ import annotations

import warnings
from functools import cache

import numpy as np
import pytest

import dpkit as dp
from dpkit.data import ADULT_PUBLIC_BOUNDS, load_adult, load_adult_features
from dpkit.testing import seeded

NUMERIC = ("age", "education_num", "capital_gain", "capital_loss", "hours_per_week")


@cache
def raw_adult() -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Adult's numeric columns as recorded (no scaling), then its one-hot categories,
    with the public bounds of every column."""
    adult = load_adult()
    scaled, y, _ = load_adult_features()  # numeric columns first, then one-hot
    raw = np.column_stack([adult[c] for c in NUMERIC]).astype(np.float64)
    X = np.hstack([raw, scaled[:, len(NUMERIC) :]])
    lower = np.concatenate([[ADULT_PUBLIC_BOUNDS[c][0] for c in NUMERIC], np.zeros(X.shape[1] - 5)])
    upper = np.concatenate([[ADULT_PUBLIC_BOUNDS[c][1] for c in NUMERIC], np.ones(X.shape[1] - 5)])
    return X, y, (lower.astype(np.float64), upper.astype(np.float64))


def split(rows: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(0).permutation(rows)  # a public split
    return order[:26_000], order[26_000:]


def test_public_bounds_scale_raw_features_into_a_model_that_beats_the_majority_class() -> None:
    X, y, bounds = raw_adult()
    train, test = split(len(y))
    majority = max(y[test].mean(), 1 - y[test].mean())
    with pytest.warns(dp.learn.UnscaledFeaturesWarning):
        raw = dp.learn.LogisticRegression(epsilon=1.0, rng=seeded(1)).fit(X[train], y[train])
    scaled = dp.learn.LogisticRegression(epsilon=1.0, bounds=bounds, rng=seeded(1))
    scaled.fit(X[train], y[train])
    raw_score, scaled_score = raw.score(X[test], y[test]), scaled.score(X[test], y[test])
    # Scaling off (bounds only clipping) would train the raw model again: fails here.
    assert scaled_score > majority + 0.06, (scaled_score, majority)
    assert raw_score < majority + 0.04, (raw_score, majority)
    assert scaled_score > raw_score + 0.04


def test_coefficients_are_reported_on_the_original_features() -> None:
    X, y, bounds = raw_adult()
    rows = np.arange(6000)
    lower, upper = bounds
    on_raw = dp.learn.LogisticRegression(epsilon=1.0, bounds=bounds, max_iter=40, rng=seeded(2))
    on_raw.fit(X[rows], y[rows])
    Z = (np.clip(X, lower, upper) - lower) / (upper - lower)  # the public map, by hand
    on_scaled = dp.learn.LogisticRegression(epsilon=1.0, bounds=(0, 1), max_iter=40, rng=seeded(2))
    on_scaled.fit(Z[rows], y[rows])
    # Same noise, same training scale: the same model, whichever side scaled.
    assert np.array_equal(on_raw.predict(X), on_scaled.predict(Z))
    np.testing.assert_allclose(
        on_raw.decision_function(X), on_scaled.decision_function(Z), rtol=1e-9, atol=1e-9
    )
    # coef_ and intercept_ act on the original (clipped) features.
    linear = np.clip(X, lower, upper) @ on_raw.coef_[0] + on_raw.intercept_[0]
    np.testing.assert_allclose(linear, on_raw.decision_function(X), rtol=1e-9, atol=1e-9)
    assert np.array_equal(on_raw.predict(X), (linear > 0).astype(int))


@pytest.mark.parametrize(
    ("kwargs", "warns"),
    [({}, True), ({"bounds": (0, 1)}, False), ({"data_norm": 2.0}, False)],
    ids=["no-bounds", "bounds", "data_norm"],
)
def test_the_warning_depends_on_public_parameters_only(
    kwargs: dict[str, object], warns: bool
) -> None:
    unit = np.array([[0.1, 0.2], [0.9, 0.8]] * 50)
    huge = unit * 1e6
    y = np.array([0, 1] * 50)
    for X in (unit, huge):  # the same answer on data of any scale
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dp.learn.LogisticRegression(max_iter=3, rng=seeded(3), **kwargs).fit(X, y)
        found = [w for w in caught if issubclass(w.category, dp.learn.UnscaledFeaturesWarning)]
        assert bool(found) is warns
        assert issubclass(dp.learn.UnscaledFeaturesWarning, dp.errors.DPWarning)
