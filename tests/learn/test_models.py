"""dpkit.learn: the scikit-learn contract, the privacy record, exact sums, bad input."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline

import dpkit as dp
from dpkit.accounting import RDPAccountant
from dpkit.accounting._math.gaussian import gaussian_delta
from dpkit.accounting.events import ComposedEvent, GaussianEvent, RepeatedEvent
from dpkit.data import load_adult_features
from dpkit.learn._base import (
    MAX_ROWS,
    NotFittedError,
    check_features,
    exact_column_sums,
    exact_weighted_sums,
    grid_step,
    norm_slack,
)
from dpkit.learn.logistic import _clipped_gradient_sum
from dpkit.testing import seeded

# These tests fit LogisticRegression on features used as given (no bounds=) on purpose:
# the warning that asks for public bounds is tested in tests/learn/test_scaling.py.
pytestmark = pytest.mark.filterwarnings("ignore::dpkit.learn._base.UnscaledFeaturesWarning")


@pytest.fixture(scope="module")
def adult() -> tuple[np.ndarray, np.ndarray]:
    X, y, _ = load_adult_features()
    return X[:6000], y[:6000]


def binary_blobs(rows: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    generator = np.random.default_rng(0)  # data, not noise
    y = generator.integers(0, 2, rows)
    X = np.clip(0.5 + (y[:, None] - 0.5) * 0.4 + generator.normal(0, 0.15, (rows, 3)), 0, 1)
    return X, y


MODELS = {
    "logistic": lambda rng: dp.learn.LogisticRegression(epsilon=1.0, bounds=(0, 1), rng=rng),
    "naive_bayes": lambda rng: dp.learn.GaussianNB(
        epsilon=1.0, bounds=(0, 1), classes=[0, 1], rng=rng
    ),
    "linear": lambda rng: dp.learn.LinearRegression(
        epsilon=1.0, bounds=(0, 1), bounds_y=(0, 1), rng=rng
    ),
}


# -- the scikit-learn contract -----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MODELS))
def test_get_params_clone_and_refit(name: str) -> None:
    model = MODELS[name](seeded(1))
    params = model.get_params()
    assert params["epsilon"] == 1.0
    twin = clone(model)
    assert twin.get_params().keys() == params.keys()
    X, y = binary_blobs()
    twin.fit(X, y)
    assert twin.score(X, y) > 0.5 if name != "linear" else np.isfinite(twin.score(X, y))
    # clone shares the generator instead of copying its stream (no repeated noise).
    assert twin.rng is model.rng
    assert copy.deepcopy(model.rng) is model.rng


def test_logistic_works_with_no_argument_but_epsilon() -> None:
    X, y = binary_blobs()
    with pytest.warns(dp.learn.UnscaledFeaturesWarning, match="bounds="):
        model = dp.learn.LogisticRegression(epsilon=1.0).fit(X, y)
    assert model.score(X, y) > 0.9
    assert model.guarantee == dp.ApproxDP(1.0, 1e-6)


def test_pipeline_and_cross_validation() -> None:
    X, y = binary_blobs()
    pipeline = make_pipeline(
        dp.learn.MinMaxScaler(bounds=(0, 1)),
        dp.learn.LogisticRegression(epsilon=1.0, rng=seeded(2)),
    )
    scores = cross_val_score(pipeline, X, y, cv=3)
    assert (scores > 0.9).all()
    scaler = dp.learn.StandardScaler(epsilon=1.0, bounds=(0, 1), rng=seeded(3))
    nb = dp.learn.GaussianNB(epsilon=1.0, bounds=(-5, 5), classes=[0, 1], rng=seeded(4))
    fitted = make_pipeline(scaler, nb).fit(X, y)
    assert fitted.score(X, y) > 0.9
    # The pipeline's privacy: both fits ran on the same rows; their events compose.
    total = dp.accounting.ComposedEvent((scaler.event, nb.event))
    assert dp.accounting.pure_epsilon(total) <= 2.0


def test_not_fitted() -> None:
    model = dp.learn.GaussianNB(epsilon=1.0, bounds=(0, 1), classes=[0, 1])
    with pytest.raises(NotFittedError, match="not fitted"):
        _ = model.event
    assert not hasattr(model, "guarantee")
    with pytest.raises(NotFittedError):
        model.predict([[0.5]])


# -- the privacy record ------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
def test_logistic_full_batch_meets_its_guarantee_exactly(epsilon: float) -> None:
    X, y = binary_blobs(500)
    model = dp.learn.LogisticRegression(epsilon=epsilon, max_iter=50, rng=seeded(5)).fit(X, y)
    event = model.event
    assert isinstance(event, ComposedEvent)
    count, steps = event.events
    assert isinstance(count, GaussianEvent) and isinstance(steps, RepeatedEvent)
    assert steps.count == 50
    # Composed Gaussians are one Gaussian with 1/s^2 = sum 1/s_i^2 (Dong, Roth & Su).
    inverse = 1 / count.noise_multiplier**2 + 50 / steps.event.noise_multiplier**2
    assert gaussian_delta(1 / math.sqrt(inverse), epsilon) <= 1e-6
    # ... and not wastefully: the budget is used to within 1e-6 relative.
    assert gaussian_delta(1 / math.sqrt(inverse) * (1 - 1e-6), epsilon) > 0.9e-6
    # The RDP accountant (looser, independent code) agrees it is a valid (eps', delta).
    assert RDPAccountant().compose(event).get_epsilon(1e-6) >= epsilon


def test_logistic_dpsgd_event_is_calibrated_by_the_pld_accountant() -> None:
    X, y = binary_blobs(1000)
    model = dp.learn.LogisticRegression(
        epsilon=1.0, sampling_rate=0.1, max_iter=30, rng=seeded(6)
    ).fit(X, y)
    epsilon = dp.accounting.PLDAccountant().compose(model.event).get_epsilon(1e-6)
    assert epsilon <= 1.0
    assert model.score(X, y) > 0.85


def test_pure_models_events_meet_epsilon() -> None:
    X, y = binary_blobs()
    for model in (
        dp.learn.GaussianNB(epsilon=0.7, bounds=(0, 1), classes=[0, 1], rng=seeded(7)),
        dp.learn.StandardScaler(epsilon=0.7, bounds=(0, 1), rng=seeded(8)),
        dp.learn.LinearRegression(epsilon=0.7, bounds=(0, 1), bounds_y=(0, 1), rng=seeded(9)),
    ):
        model.fit(X, y)
        assert model.guarantee == dp.PureDP(0.7)
        assert dp.accounting.pure_epsilon(model.event) <= 0.7


def test_linear_gaussian_option() -> None:
    X, y = binary_blobs()
    model = dp.learn.LinearRegression(
        epsilon=1.0, delta=1e-6, bounds=(0, 1), bounds_y=(0, 1), rng=seeded(10)
    ).fit(X, y)
    assert model.guarantee == dp.ApproxDP(1.0, 1e-6)
    assert isinstance(model.event, GaussianEvent)
    assert RDPAccountant().compose(model.event).get_epsilon(1e-6) >= 1.0  # RDP is looser


def test_minmax_scaler_costs_nothing() -> None:
    scaler = dp.learn.MinMaxScaler(bounds=(0, 10), feature_range=(-1, 1)).fit([[3.0], [12.0]])
    assert scaler.guarantee == dp.PureDP(0.0)
    assert scaler.transform([[0.0], [5.0], [20.0]]).tolist() == [[-1.0], [0.0], [1.0]]


# -- exact sums: one row moves a sum by at most the stated sensitivity --------------------


def test_exact_sums_are_order_independent_and_row_bounded() -> None:
    generator = np.random.default_rng(11)
    bound = 3.0
    values = generator.uniform(-bound, bound, (5000, 4))
    values[:10] = bound  # extreme rows
    step = grid_step(bound)
    steps = np.full(4, step)
    total = exact_column_sums(values, steps)
    shuffled = exact_column_sums(values[generator.permutation(5000)], steps)
    assert np.array_equal(total, shuffled)  # bit for bit, any order
    for row in (0, 17, 4999):
        without = exact_column_sums(np.delete(values, row, axis=0), steps)
        assert np.abs(total - without).max() <= bound + step / 2


def test_linear_gram_is_exact_and_each_row_adds_its_own_products() -> None:
    from dpkit.learn.linear import GRAM_BITS, _exact_gram

    generator = np.random.default_rng(14)
    values = generator.uniform(-1, 1, (20_000, 12))
    values[:10] = 1.0  # extreme rows, and values half-way between grid points
    values[10:20] = -1.0
    values[20:30] = 0.5 * 2.0**-GRAM_BITS
    values[30:40] = (2.0**GRAM_BITS - 0.5) * 2.0**-GRAM_BITS
    total = _exact_gram(values)
    assert np.array_equal(total, _exact_gram(values[generator.permutation(len(values))]))
    rounded = np.rint(values * 2.0**GRAM_BITS) * 2.0**-GRAM_BITS
    for row in (0, 15, 25, 35, 19_999):
        added = total - _exact_gram(np.delete(values, row, axis=0))
        # Exactly that row's products of rounded values (bit for bit), each in [-1, 1].
        assert np.array_equal(added, np.outer(rounded[row], rounded[row]))
        assert np.abs(added).max() <= 1.0


def test_clipped_gradient_sum_sensitivity_on_adversarial_rows() -> None:
    generator = np.random.default_rng(12)
    rows, width = 3000, 6
    design = generator.normal(0, 1, (rows, width)) * 10.0 ** generator.integers(-3, 6, (rows, 1))
    labels = generator.integers(0, 2, rows).astype(float)
    norms = np.sqrt((design**2).sum(1))
    w = generator.normal(0, 1, width)
    clip = 0.75
    step = grid_step(clip)
    full = _clipped_gradient_sum(design, labels, norms, w, clip, step)
    sensitivity = clip + norm_slack(width, step)
    for row in generator.choice(rows, 25, replace=False):
        keep = np.arange(rows) != row
        partial = _clipped_gradient_sum(design[keep], labels[keep], norms[keep], w, clip, step)
        assert np.linalg.norm(full - partial) <= sensitivity


def test_exact_weighted_sums_match_exact_column_sums() -> None:
    generator = np.random.default_rng(13)
    matrix = generator.uniform(-1, 1, (1000, 3))
    weights = generator.uniform(-1, 1, 1000)
    step = grid_step(1.0)
    direct = exact_column_sums(matrix * weights[:, None], np.full(3, step))
    assert np.array_equal(exact_weighted_sums(matrix, weights, step), direct)


# -- clipping as documented ------------------------------------------------------------


def test_data_outside_bounds_is_clipped_not_used() -> None:
    X, y = binary_blobs()
    wild = X.copy()
    wild[:50] = 1e6  # far outside the declared bounds (0, 1)
    clipped = np.clip(wild, 0, 1)
    for make in MODELS.values():
        a = make(seeded(14)).fit(wild, y)
        b = make(seeded(14)).fit(clipped, y)
        assert np.array_equal(a.predict(X), b.predict(X))


# -- bad input: clear errors, nothing spent ------------------------------------------


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize(
    ("X", "message"),
    [
        ([0.5, 0.5, 0.5, 0.5], "2-D"),
        ([["a", "b", "c"]] * 4, "numeric"),
        (np.zeros((4, 0)), "feature|empty"),
    ],
)
def test_bad_schema(name: str, X: object, message: str) -> None:
    # Only the schema raises: it is public.
    rng = seeded(15)
    with pytest.raises(dp.DataError, match=message):
        MODELS[name](rng).fit(X, [0, 1, 0, 1])


DROPPING = ["logistic", "linear", "naive_bayes"]


@pytest.mark.parametrize("name", DROPPING)
def test_out_of_domain_rows_are_dropped_not_refused(name: str) -> None:
    # Whether fit succeeds must not depend on a row: a NaN or infinite feature (or a
    # label outside the classes) drops that row, exactly as if it had not been given.
    X, y = binary_blobs(300)
    dirty_X = np.vstack([X, [[np.nan, 0.5, 0.5], [np.inf, 0.1, 0.2]]])
    dirty_y = np.concatenate([y, [1, 0]])
    a = MODELS[name](seeded(21)).fit(dirty_X, dirty_y)
    b = MODELS[name](seeded(21)).fit(X, y)
    assert np.array_equal(a.predict(X), b.predict(X))


@pytest.mark.parametrize("name", DROPPING)
def test_an_empty_table_is_fitted_with_noise_only(name: str) -> None:
    model = MODELS[name](seeded(22)).fit(np.zeros((0, 3)), np.zeros(0))
    assert model.predict([[0.5, 0.5, 0.5]]).shape == (1,)


def test_numpy_generators_are_refused() -> None:
    X, y = binary_blobs(50)
    with pytest.raises(dp.InvalidParameter, match="NumPy generator"):
        dp.learn.LogisticRegression(rng=np.random.default_rng(0)).fit(X, y)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: dp.learn.LogisticRegression(epsilon=-1.0), "epsilon"),
        (lambda: dp.learn.LogisticRegression(epsilon=float("nan")), "epsilon"),
        (lambda: dp.learn.LogisticRegression(delta=0.0), "delta"),
        (lambda: dp.learn.LogisticRegression(delta=1.5), "delta"),
        (lambda: dp.learn.LogisticRegression(bounds=(1, 0)), "bounds"),
        (lambda: dp.learn.LogisticRegression(bounds=(0, 1), data_norm=1.0), "not both"),
        (lambda: dp.learn.LogisticRegression(sampling_rate=0.0), "sampling_rate"),
        (lambda: dp.learn.LogisticRegression(momentum=1.0), "momentum"),
        (lambda: dp.learn.LogisticRegression(max_iter=0), "max_iter"),
        (lambda: dp.learn.GaussianNB(bounds=(0, 1)), "classes"),
        (lambda: dp.learn.GaussianNB(classes=[0, 1]), "bounds"),
        (lambda: dp.learn.GaussianNB(bounds=(0, 1), classes=[0, 0]), "distinct"),
        (lambda: dp.learn.LinearRegression(bounds=(0, 1)), "bounds_y"),
        (lambda: dp.learn.LinearRegression(bounds=(0, 1), bounds_y=(1, 1)), "bounds_y"),
        (lambda: dp.learn.LinearRegression(bounds=(0, 1), bounds_y=(0, 1), alpha="x"), "alpha"),
        (lambda: dp.learn.StandardScaler(), "bounds"),
    ],
)
def test_bad_parameters(make: object, match: str) -> None:
    X, y = binary_blobs(50)
    with pytest.raises(dp.InvalidParameter, match=match):
        make().fit(X, y)  # type: ignore[operator]


def test_labels_outside_classes() -> None:
    X, y = binary_blobs(50)
    odd = np.where(np.arange(50) == 7, 2, y)  # one label outside {0, 1}: that row drops
    keep = np.arange(50) != 7
    a = dp.learn.LogisticRegression(rng=seeded(16)).fit(X, odd)
    b = dp.learn.LogisticRegression(rng=seeded(16)).fit(X[keep], y[keep])
    assert np.array_equal(a.coef_, b.coef_)
    c = dp.learn.GaussianNB(bounds=(0, 1), classes=["a", "b"], rng=seeded(16))
    c = c.fit(X, ["a"] * 49 + ["c"]).class_count_
    d = dp.learn.GaussianNB(bounds=(0, 1), classes=["a", "b"], rng=seeded(16))
    d = d.fit(X[:49], ["a"] * 49).class_count_
    assert np.array_equal(c, d)  # the "c" row was dropped
    model = dp.learn.LogisticRegression(classes=("no", "yes"), rng=seeded(17))
    y = np.where(np.arange(2000) % 2, "yes", "no")
    X2, _ = binary_blobs()
    model.fit(X2, y)
    assert set(model.predict(X2)) <= {"no", "yes"}


def test_too_many_rows_is_refused_before_any_noise() -> None:
    # Beyond MAX_ROWS the fixed-point sums could pass 2^53: refused up front.
    with pytest.raises(dp.DataError, match="rows"):
        check_features(np.broadcast_to(0.0, (MAX_ROWS, 1)), "model")


def test_predict_checks_width(adult: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = adult
    model = dp.learn.LogisticRegression(bounds=(0, 1), rng=seeded(18)).fit(X, y)
    with pytest.raises(dp.DataError, match="49"):
        model.predict(X[:, :5])


@pytest.mark.parametrize("steps", [1, 7, 100])
def test_logistic_privacy_event_covers_the_fit(steps: int) -> None:
    # privacy_event (one Gaussian) is known before fitting; the fit's step-by-step event
    # must be at least as private at every Renyi order.
    X, y = binary_blobs(200)
    model = dp.learn.LogisticRegression(epsilon=0.8, max_iter=steps, rng=seeded(19))
    planned = model.privacy_event()
    model.fit(X, y)
    orders = [1.5, 2.0, 8.0, 64.0]
    fitted = RDPAccountant(orders=orders).compose(model.event)
    bound = RDPAccountant(orders=orders).compose(planned)
    pairs = zip(fitted.guarantee.epsilons, bound.guarantee.epsilons, strict=True)
    assert all(a <= b for a, b in pairs)


@pytest.mark.parametrize("name", ["naive_bayes", "linear"])
def test_privacy_event_is_the_fit_event(name: str) -> None:
    X, y = binary_blobs(200)
    model = MODELS[name](seeded(20))
    planned = model.privacy_event(X.shape[1])
    assert model.fit(X, y).event == planned
