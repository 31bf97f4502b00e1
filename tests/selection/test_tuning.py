"""dp.tune: random search under random stopping, on dpkit.learn models."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import dpkit as dp
from dpkit.accounting import RDPAccountant, pure_epsilon
from dpkit.data import load_adult_features
from dpkit.testing import assert_binomial, seeded

# These tests fit LogisticRegression on features used as given (no bounds=) on purpose:
# the warning that asks for public bounds is tested in tests/learn/test_scaling.py.
pytestmark = pytest.mark.filterwarnings("ignore::dpkit.learn._base.UnscaledFeaturesWarning")


def blobs(rows: int = 3000, separation: float = 0.4) -> tuple[np.ndarray, np.ndarray]:
    generator = np.random.default_rng(1)  # data, not noise
    y = generator.integers(0, 2, rows)
    X = np.clip(0.5 + (y[:, None] - 0.5) * separation + generator.normal(0, 0.2, (rows, 2)), 0, 1)
    return X, y


NB = dp.learn.GaussianNB(bounds=(0, 1), classes=[0, 1])


@pytest.mark.parametrize("mean_trials", [2.0, 10.0, 50.0])
def test_pure_budget_is_met_whatever_the_number_of_trials(mean_trials: float) -> None:
    X, y = blobs()
    result = dp.tune(
        NB,
        {"var_smoothing": [1e-9, 1e-2]},
        X,
        y,
        budget=1.0,
        mean_trials=mean_trials,
        rng=seeded(2),
    )
    # 2% for the validation size, then 3 x the trial epsilon (LT19 Thm 3.2); the model's
    # own event is 2^-20 below its epsilon (rounding margins), which the search uses.
    assert result.model_epsilon == pytest.approx(0.98 / 3, rel=1e-5)
    assert pure_epsilon(result.event) <= 1.0
    assert result.guarantee == dp.PureDP(1.0)
    assert result.params["var_smoothing"] in (1e-9, 1e-2)
    assert result.model.guarantee == dp.PureDP(result.model_epsilon)


def test_other_laws_cost_less() -> None:
    X, y = blobs()
    result = dp.tune(
        NB,
        {"var_smoothing": [1e-9]},
        X,
        y,
        budget=1.0,
        repetitions="logarithmic",
        mean_trials=5.0,
        rng=seeded(3),
    )
    assert result.model_epsilon == pytest.approx(0.98 / 2, rel=1e-5)  # PS22 Cor. 3, eta = 0


def test_approximate_dp_models_are_accounted_with_rdp() -> None:
    X, y = blobs(2000)
    budget = dp.ApproxDP(2.0, 1e-5)
    result = dp.tune(
        dp.learn.LogisticRegression(max_iter=30),
        {"learning_rate": [0.5, 8.0], "max_iter": [20, 40]},
        X,
        y,
        budget=budget,
        mean_trials=3.0,
        rng=seeded(4),
    )
    assert RDPAccountant().compose(result.event).get_epsilon(1e-5) <= 2.0
    assert result.guarantee == budget
    assert 0 < result.model_epsilon < 2.0
    assert result.noisy_score > 0.8


def test_regressors_are_scored_by_clipped_squared_error() -> None:
    X, _, _ = load_adult_features()
    model = dp.learn.LinearRegression(bounds=(0, 1), bounds_y=(0, 1))
    result = dp.tune(
        model,
        [{"alpha": "auto"}, {"alpha": 1e6}],
        X[:8000, 1:],
        X[:8000, 0],
        budget=3.0,
        mean_trials=4.0,
        rng=seeded(5),
    )
    assert -1.0 <= result.noisy_score <= 0.0


@pytest.mark.parametrize("runs", [24, pytest.param(40, marks=pytest.mark.slow)])
def test_tuning_finds_the_good_setting(runs: int) -> None:
    # One setting learns nothing (100 steps of size 1e-6); random stopping with E[K] = 10
    # over two settings picks the good one unless every trial drew the bad one or the
    # score noise (Laplace, scale ~ 1/0.33 on ~600 validation rows) flips the order.
    # Each trial draws a setting uniformly, so P[all K trials bad] = E[(1/2)^K]
    # = gamma / (1 + gamma) = 1/11 (geometric on {1, 2, ...}, gamma = 0.1): the number of
    # runs that pick the good one is Binomial(runs, 10/11) (score flips: negligible at
    # this separation), tested two-sided at alpha = 1e-6 (assert_binomial).
    # Power: a selector at chance (runs / 2 good) must be rejected. The default runs 24
    # (accepted: 13..24 good; 12 of 24 has p-value 3.0e-7 < 1e-6); 20 would not do
    # (10 of 20: p-value 3.0e-6). --runslow runs 40 (accepted: 25..40).
    X, y = blobs()
    good = 0
    rng = seeded(6)
    for _ in range(runs):
        result = dp.tune(
            dp.learn.LogisticRegression(),
            {"learning_rate": [1e-6, 8.0]},
            X,
            y,
            budget=dp.ApproxDP(3.0, 1e-6),
            mean_trials=10.0,
            rng=rng,
        )
        good += result.params["learning_rate"] == 8.0
    # P[pick the bad one] <= 1/11 + (score flip: negligible at this separation).
    assert_binomial(good, runs, 10 / 11)
    with pytest.raises(AssertionError):  # power: a selector at chance would be caught
        assert_binomial(runs // 2, runs, 10 / 11)


# -- bad input, nothing spent ------------------------------------------------------------


@pytest.mark.parametrize(
    ("space", "match"),
    [
        ({}, "search_space"),
        ([], "search_space"),
        ({"var_smoothing": []}, "search_space"),
        ({"var_smoothing": "abc"}, "search_space"),
        ({"epsilon": [1.0]}, "may not set"),
        ([{"rng": 1}], "may not set"),
    ],
)
def test_bad_search_space(space: object, match: str) -> None:
    X, y = blobs(100)
    with pytest.raises(dp.InvalidParameter, match=match):
        dp.tune(NB, space, X, y, budget=1.0, rng=seeded(7))  # type: ignore[arg-type]


def test_event_changing_hyperparameters_are_refused() -> None:
    X, y = blobs(100)
    with pytest.raises(dp.InvalidParameter, match="changes the model's privacy event"):
        dp.tune(
            dp.learn.LogisticRegression(),
            {"sampling_rate": [1.0, 0.5]},
            X,
            y,
            budget=dp.ApproxDP(1.0, 1e-6),
            rng=seeded(8),
        )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"budget": -1.0}, "budget"),
        ({"budget": 1.0, "mean_trials": 0.0}, "mean_trials"),
        ({"budget": 1.0, "validation_fraction": 1.0}, "validation_fraction"),
        ({"budget": 1.0, "count_share": 0.0}, "count_share"),
    ],
)
def test_bad_parameters(kwargs: dict[str, object], match: str) -> None:
    X, y = blobs(100)
    with pytest.raises(dp.InvalidParameter, match=match):
        dp.tune(NB, {"var_smoothing": [1e-9]}, X, y, rng=seeded(9), **kwargs)  # type: ignore[arg-type]


def test_pure_budget_for_a_model_with_delta_is_refused() -> None:
    X, y = blobs(100)
    with pytest.raises(dp.InvalidParameter, match="no pure-DP guarantee"):
        dp.tune(dp.learn.LogisticRegression(), {"max_iter": [10]}, X, y, budget=1.0)


def test_not_a_dpkit_model() -> None:
    from sklearn.linear_model import LogisticRegression

    X, y = blobs(100)
    with pytest.raises(dp.InvalidParameter, match=r"dpkit\.learn model"):
        dp.tune(LogisticRegression(), {"C": [1.0]}, X, y, budget=1.0)


def test_bad_data() -> None:
    X, y = blobs(100)
    with pytest.raises(dp.DataError, match="2-D"):  # the schema raises
        dp.tune(NB, {"var_smoothing": [1e-9]}, X[:, 0], y, budget=1.0)
    # A row out of the domain is dropped, never refused.
    X[3, 1] = np.nan
    result = dp.tune(NB, {"var_smoothing": [1e-9]}, X, y, budget=1.0, rng=seeded(11))
    assert result.guarantee == dp.PureDP(1.0)


def test_poisson_law_is_refused() -> None:
    X, y = blobs(100)
    with pytest.raises(dp.InvalidParameter, match="Poisson"):
        dp.tune(NB, {"var_smoothing": [1e-9]}, X, y, budget=1.0, repetitions="poisson")


def test_the_released_model_does_not_hold_the_tuning_generator() -> None:
    X, y = blobs(300)
    rng = seeded(12)
    result = dp.tune(NB, {"var_smoothing": [1e-9]}, X, y, budget=1.0, rng=rng)
    assert result.model.get_params()["rng"] is None  # the estimator's own (None)


def test_a_failing_trial_is_charged_and_reported() -> None:
    # A hyperparameter that only fails inside fit: the selection stops with
    # CandidateFailed, which carries the whole run's event (what ran is charged).
    X, y = blobs(300)
    with pytest.raises(dp.CandidateFailed) as failure:
        dp.tune(
            dp.learn.LogisticRegression(),
            {"learning_rate": [-1.0]},
            X,
            y,
            budget=dp.ApproxDP(1.0, 1e-6),
            rng=seeded(10),
        )
    assert failure.value.event is not None
    assert "learning_rate" not in str(failure.value) or "InvalidParameter" in str(failure.value)


def test_the_released_score_is_named_noisy_and_score_is_a_deprecated_alias() -> None:
    X, y = blobs()
    result = dp.tune(NB, {"var_smoothing": [1e-9]}, X, y, budget=1.0, rng=seeded(30))
    assert 0.5 < result.noisy_score < 1.5  # a noisy accuracy (it may leave [0, 1])
    with pytest.warns(DeprecationWarning, match="noisy_score"):
        old = result.score
    assert old == result.noisy_score
    assert "score" not in {f.name for f in dataclasses.fields(result)}
