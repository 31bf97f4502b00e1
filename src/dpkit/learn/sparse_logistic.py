"""L1-regularised logistic regression by DP proximal coordinate descent (DP-CD)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator, ClassifierMixin

from dpkit import _validation as check
from dpkit.accounting.events import ComposedEvent, Event, RepeatedEvent
from dpkit.accounting.guarantees import ApproxDP, PureDP
from dpkit.errors import InvalidParameter
from dpkit.learn._base import (
    DPModelMixin,
    FloatArray,
    check_bounds,
    exact_column_sums,
    grid_step,
)
from dpkit.learn._noise import ScalarNoise, check_noise, scalar_noise
from dpkit.learn._rows import (
    clip_then_scale,
    finite_rows,
    model_random,
    training_features,
    training_target,
)
from dpkit.random import Random, RandomLike

__all__ = ["SparseLogisticRegression"]

#: Sensitivity of a coordinate's gradient sum: a row's term is in [-1, 1], and the
#: fixed-point rounding adds at most half a step (``_base.exact_column_sums``).
_GRADIENT_SENSITIVITY = 1.0 + grid_step(1.0) / 2


class SparseLogisticRegression(DPModelMixin, ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """Binary logistic regression with an L1 penalty, by DP proximal coordinate descent.

    Minimises ``(1/n) sum_i log(1 + exp(-y_i (w.z_i + b))) + alpha ||w||_1`` over features
    ``z`` clipped to public ``bounds`` and scaled to [-1, 1], labels ``y = +-1``. Each
    epoch visits every coordinate once in a random order; an update of coordinate ``j``
    releases the noisy gradient sum ``sum_i -y_i z_ij sigmoid(-y_i m_i)`` (exact
    fixed-point sum, noise through dpkit), divides it by a noisy row count released
    once at the start, and takes a proximal (soft-threshold) step of size ``step_size``
    (default ``1/M_j = 4``, the inverse coordinate-wise smoothness of the mean logistic
    loss when ``|z_j| <= 1``). This is DP-CD of Mangold, Bellet, Salmon & Tommasi
    (ICML 2022, Algorithm 1, with the last iterate kept) and the proximal coordinate
    descent of Selvi, Liu & Wiesemann's experiments; the intercept is not penalised.

    Parameters
    ----------
    epsilon, delta:
        Guarantee of one ``fit`` (add/remove one row). ``delta`` is required in (0, 1)
        for every noise but Laplace (pure epsilon-DP, delta ignored).
    noise:
        ``"laplace"`` (default), ``"gaussian"``, ``"truncated_laplace"``, ``"optimal"`` or
        a :class:`~dpkit.design.NoiseDesign` (statistics are scaled to its sensitivity; see
        ``dpkit.learn._noise``).
    bounds:
        Public ``(lower, upper)`` per feature (or scalars). Required.
    classes:
        The public ``(negative, positive)`` labels; default ``(0, 1)``.
    alpha:
        L1 penalty (in units of the mean loss).
    epochs:
        Passes over the coordinates; ``epochs * (d + 1)`` noisy releases in all.
    step_size:
        Coordinate step (post-processing); ``None``: 4.
    count_share:
        Share of (epsilon, delta) spent on the row count.
    rng:
        Random source (noise and the order of the coordinates).

    Privacy
    -------
    Under adding or removing a row, a coordinate's gradient sum moves by that row's
    rounded term: at most ``1 + 2^-27`` (``|z_ij| <= 1``, a sigmoid in (0, 1); the
    margins of the other rows do not involve the row). The count has sensitivity 1.
    Basic composition (adaptive; Dwork & Roth 2014, Thm 3.16) over the count at
    ``count_share (epsilon, delta)`` and the ``T = epochs (d + 1)`` updates at
    ``(1 - count_share) (epsilon, delta) / T`` each gives (epsilon, delta)-DP
    (epsilon-DP with Laplace noise). The event composes the per-release events, so an
    accountant may prove a smaller epsilon (the PLD accountant does, for Gaussian).

    Examples
    --------
    >>> import numpy as np, dpkit as dp
    >>> X = np.array([[0.0, 0.5], [0.2, 0.5], [0.8, 0.5], [1.0, 0.5]] * 500)
    >>> y = np.array([0, 0, 1, 1] * 500)
    >>> model = dp.learn.SparseLogisticRegression(epsilon=1.0, bounds=(0, 1), rng=7)
    >>> model.fit(X, y).predict([[0.1, 0.5], [0.9, 0.5]])
    array([0, 1])
    >>> model.guarantee
    PureDP(epsilon=1.0)
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        noise: Any = "laplace",
        delta: float = 0.0,
        bounds: Any = None,
        classes: Any = (0, 1),
        alpha: float = 0.01,
        epochs: int = 5,
        step_size: float | None = None,
        count_share: float = 0.05,
        rng: RandomLike | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.noise = noise
        self.delta = delta
        self.bounds = bounds
        self.classes = classes
        self.alpha = alpha
        self.epochs = epochs
        self.step_size = step_size
        self.count_share = count_share
        self.rng = rng

    # -- privacy ----------------------------------------------------------------------

    def update_budget(self, n_features: int) -> tuple[float, float]:
        """``(epsilon_i, delta_i)`` of one coordinate update on ``n_features`` columns
        (a user's NoiseDesign must fit it)."""
        owner = "SparseLogisticRegression.update_budget"
        epsilon, delta, share, epochs = self._check_budget(owner)
        features = check.check_count(n_features, "n_features", owner)
        return _update_budget(epsilon, delta, share, epochs * (features + 1))

    def privacy_event(self, n_features: int) -> Event:
        """The event ``fit`` will have on ``n_features`` columns (no data needed)."""
        owner = "SparseLogisticRegression.privacy_event"
        features = check.check_count(n_features, "n_features", owner)
        return self._noises(features, owner)[2]

    def _check_budget(self, owner: str) -> tuple[float, float, float, int]:
        epsilon = check.check_epsilon(self.epsilon, owner)
        delta = check.check_delta(self.delta, owner, allow_zero=True)
        share = check.check_probability(
            self.count_share, "count_share", owner, open_low=True, open_high=True
        )
        epochs = check.check_count(self.epochs, "epochs", owner)
        return epsilon, delta, share, epochs

    def _noises(self, features: int, owner: str) -> tuple[ScalarNoise, ScalarNoise, Event]:
        epsilon, _, share, epochs = self._check_budget(owner)
        kind, delta = check_noise(self.noise, self.delta, owner)
        updates = epochs * (features + 1)
        # Shares lowered by a relative 2^-20 (far above the float rounding of the
        # products and the division): the composed epsilon and delta stay <= the target.
        margin = 1 - 2.0**-20
        count = scalar_noise(
            kind,
            epsilon=epsilon * share * margin,
            delta=delta * share * margin,
            sensitivity=1.0,
            owner=owner,
        )
        step_epsilon, step_delta = _update_budget(epsilon, delta, share, updates)
        step = scalar_noise(
            kind,
            epsilon=step_epsilon,
            delta=step_delta,
            sensitivity=_GRADIENT_SENSITIVITY,
            owner=owner,
        )
        return count, step, ComposedEvent((count.event, RepeatedEvent(step.event, updates)))

    # -- fitting ----------------------------------------------------------------------

    def fit(self, X: Any, y: Any) -> SparseLogisticRegression:
        """Train on ``X`` and binary ``y``; spends (epsilon, delta)."""
        owner = "SparseLogisticRegression.fit"
        epsilon, _, _, epochs = self._check_budget(owner)
        kind, delta = check_noise(self.noise, self.delta, owner)
        alpha = check.check_nonnegative(self.alpha, "alpha", owner)
        step_size = (
            4.0
            if self.step_size is None
            else check.check_positive(self.step_size, "step_size", owner)
        )
        if self.bounds is None:
            raise InvalidParameter(
                f"{owner}: give public bounds=(lower, upper) for the features; dpkit never "
                "reads them from the data."
            )
        classes = np.asarray(self.classes)
        if classes.ndim != 1 or len(classes) != 2 or classes[0] == classes[1]:
            raise InvalidParameter.for_parameter(
                "classes", owner, "two distinct labels (negative, positive)", self.classes
            )
        features = training_features(X, owner)
        labels = training_target(y, features.shape[0], owner)
        self._lower, self._upper = check_bounds(
            self.bounds, features.shape[1], "SparseLogisticRegression"
        )
        count_noise, step_noise, event = self._noises(features.shape[1], owner)
        random = model_random(self.rng, "SparseLogisticRegression")
        # Rows with a non-finite feature or a label outside the classes are dropped (a
        # per-row transformation, see dpkit.learn._rows), never refused: whether fit
        # succeeds depends on no row. An empty table is fitted too (noise only).
        positive = np.asarray(labels == classes[1], dtype=bool)
        keep = (positive | np.asarray(labels == classes[0], dtype=bool)) & finite_rows(features)
        kept = features[keep]
        design = np.hstack([self._scale(kept), np.ones((kept.shape[0], 1))])
        signs = np.where(positive[keep], 1.0, -1.0)
        weights = _descend(design, signs, count_noise, step_noise, epochs, step_size, alpha, random)
        self.classes_ = classes
        self.coef_scaled_ = weights[:-1]
        self.intercept_scaled_ = float(weights[-1])
        radius = self._upper / 2 - self._lower / 2  # halves first: no overflow
        centre = self._lower / 2 + self._upper / 2
        self.coef_ = (weights[:-1] / radius)[None, :]
        self.intercept_ = np.array([weights[-1] - float(np.sum(weights[:-1] * centre / radius))])
        self.n_features_in_ = features.shape[1]
        self.event_ = event
        self.guarantee_ = PureDP(epsilon) if kind == "laplace" else ApproxDP(epsilon, delta)
        return self

    def _scale(self, features: FloatArray) -> FloatArray:
        # Clip first, then scale (no overflow on huge values), then clip to [-1, 1].
        return clip_then_scale(features, self._lower, self._upper)

    # -- prediction -------------------------------------------------------------------

    def decision_function(self, X: Any) -> FloatArray:
        """``w.z + b`` with ``z`` the clipped, scaled features (> 0: the positive class)."""
        features = self._fitted_features(X, "SparseLogisticRegression.predict")
        scores: FloatArray = self._scale(features) @ self.coef_scaled_ + self.intercept_scaled_
        return scores

    def predict_proba(self, X: Any) -> FloatArray:
        """``[P(negative), P(positive)]`` per row."""
        positive = 0.5 * (1.0 + np.tanh(self.decision_function(X) / 2))
        probabilities: FloatArray = np.column_stack([1.0 - positive, positive])
        return probabilities

    def predict(self, X: Any) -> npt.NDArray[Any]:
        """The more probable class of each row."""
        positive = self.decision_function(X) > 0  # checks fitted first
        labels: npt.NDArray[Any] = self.classes_[positive.astype(int)]
        return labels


def _update_budget(epsilon: float, delta: float, share: float, updates: int) -> tuple[float, float]:
    margin = 1 - 2.0**-20  # see SparseLogisticRegression._noises
    rest = (1.0 - share) * margin / updates
    return epsilon * rest, delta * rest


def gradient_sum(design: FloatArray, signs: FloatArray, margins: FloatArray, j: int) -> float:
    """``sum_i -y_i z_ij sigmoid(-y_i m_i)``, each term in [-1, 1], summed exactly.

    A row's term depends on that row alone (its margin ``m_i = w.z_i`` uses the current,
    already released weights), so adding or removing a row moves the sum by that row's
    fixed-point-rounded term: at most ``1 + 2^-27`` (the sensitivity of an update).
    """
    # d/dw_j of log(1 + exp(-y m)) = -y z_j sigmoid(-y m); |z_j| <= 1, sigmoid in (0, 1)
    term = -signs * design[:, j] * (0.5 * (1.0 + np.tanh(-signs * margins / 2)))
    step = np.array([grid_step(1.0)])
    return float(exact_column_sums(np.clip(term, -1.0, 1.0)[:, None], step)[0])


def _permutation(size: int, rng: Random) -> list[int]:
    """A uniformly random order (Fisher-Yates on dpkit's exact integers)."""
    order = list(range(size))
    for i in range(size - 1, 0, -1):
        j = rng.integers(i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def _descend(
    design: FloatArray,
    signs: FloatArray,
    count_noise: ScalarNoise,
    step_noise: ScalarNoise,
    epochs: int,
    step_size: float,
    alpha: float,
    rng: Random,
) -> FloatArray:
    """Proximal coordinate descent with noisy gradient sums; the last column of
    ``design`` is the (unpenalised) intercept."""
    rows, width = design.shape  # rows may be 0: then the releases are noise only
    count = float(count_noise.release(np.array([float(rows)]), rng)[0])
    count = max(count, 1.0)  # post-processing of the noisy count
    weights = np.zeros(width)
    margins = np.zeros(rows)
    for _ in range(epochs):
        for j in _permutation(width, rng):
            total = gradient_sum(design, signs, margins, j)
            noisy = float(step_noise.release(np.array([total]), rng)[0])
            moved = weights[j] - step_size * noisy / count
            threshold = 0.0 if j == width - 1 else step_size * alpha
            new = math.copysign(max(abs(moved) - threshold, 0.0), moved)
            margins += (new - weights[j]) * design[:, j]
            weights[j] = new
    return weights
