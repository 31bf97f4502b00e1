"""Gaussian naive Bayes from noisy class counts, sums and sums of squares."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator, ClassifierMixin

from dpkit import _validation as check
from dpkit.accounting.events import Event
from dpkit.accounting.guarantees import ApproxDP, PureDP
from dpkit.errors import InvalidParameter
from dpkit.learn._base import (
    DPModelMixin,
    FloatArray,
    check_bounds,
)
from dpkit.learn._moments import (
    DEFAULT_SHARES,
    floored_mean_and_variance,
    mean_and_variance,
    moment_noise,
    moment_scales,
    noisy_moments,
    noisy_moments_with,
    statistic_budgets,
)
from dpkit.learn._noise import check_noise
from dpkit.learn._rows import (
    clip_then_scale,
    finite_rows,
    model_random,
    training_features,
    training_target,
)
from dpkit.random import RandomLike

__all__ = ["GaussianNB"]


class GaussianNB(DPModelMixin, ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """Gaussian naive Bayes, epsilon-DP (Laplace noise) or (epsilon, delta)-DP.

    Features are clipped to public ``bounds`` and scaled to [-1, 1]. For each class the
    model releases a noisy count, per-feature sums and sums of squares (Laplace noise
    through :mod:`dpkit.noise`, exact fixed-point sums); means, variances and class
    priors are computed from them (post-processing). A row belongs to one class, so the
    classes' releases compose in parallel: the whole fit costs one class's epsilon
    (Vaidya et al. 2013 give the same construction with the sensitivities of the
    unscaled statistics).

    Parameters
    ----------
    epsilon:
        Guarantee of one ``fit``: epsilon-DP, add/remove one row.
    noise:
        ``"laplace"`` (default; epsilon-DP, Laplace noise on each block of statistics),
        ``"gaussian"`` (analytic Gaussian), ``"truncated_laplace"``, ``"optimal"`` (the
        l2-optimal noise of :func:`dpkit.design.design_noise`) or a
        :class:`~dpkit.design.NoiseDesign` (statistics are scaled to its sensitivity).
        The non-Laplace noises are calibrated per scalar statistic (see
        ``dpkit.learn._noise`` and :meth:`statistic_budgets`) and make the fit
        (epsilon, delta)-DP.
    delta:
        The delta of the guarantee: required in (0, 1) for every noise but Laplace
        (which ignores it).
    bounds:
        Public ``(lower, upper)`` per feature (or scalars). Required: never read from
        the data.
    classes:
        The public label set (a sequence). Rows with other labels are dropped, not
        refused: whether ``fit`` succeeds must not depend on a row's value.
    var_smoothing:
        Added to every variance (in units of the scaled feature, whose range is 2), as in
        scikit-learn. Variances are also floored at their own noise level (see
        ``dpkit.learn._moments.mean_and_variance``).
    shares:
        Split of epsilon between the counts, the sums and the sums of squares.
    rng:
        Random source.

    Privacy
    -------
    ``noise="laplace"``: epsilon-DP (Laplace mechanism on each block, basic composition;
    parallel composition over classes; see ``dpkit.learn._moments`` for the
    sensitivities). Other noises: (epsilon, delta)-DP, each of the ``1 + 2d`` scalar
    statistics of a class (epsilon_i, delta_i)-DP for its own sensitivity, basic
    composition within a class, parallel composition over classes. The event composes
    the per-statistic events (``GaussianEvent``, ``TruncatedLaplaceEvent`` or
    ``ApproxEvent``), so an accountant can check it.

    Examples
    --------
    >>> import numpy as np, dpkit as dp
    >>> X = np.array([[0.1, 0.2], [0.9, 0.8]] * 1000)
    >>> y = np.array([0, 1] * 1000)
    >>> nb = dp.learn.GaussianNB(epsilon=1.0, bounds=(0, 1), classes=[0, 1], rng=3)
    >>> nb.fit(X, y).predict([[0.0, 0.1], [1.0, 0.9]])
    array([0, 1])
    >>> nb.guarantee
    PureDP(epsilon=1.0)
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        noise: Any = "laplace",
        delta: float = 0.0,
        bounds: Any = None,
        classes: Any = None,
        var_smoothing: float = 1e-9,
        shares: tuple[float, float, float] = DEFAULT_SHARES,
        rng: RandomLike | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.noise = noise
        self.delta = delta
        self.bounds = bounds
        self.classes = classes
        self.var_smoothing = var_smoothing
        self.shares = shares
        self.rng = rng

    def privacy_event(self, n_features: int) -> Event:
        """The event ``fit`` will have on ``n_features`` columns (no data needed)."""
        owner = "GaussianNB.privacy_event"
        epsilon = check.check_epsilon(self.epsilon, owner)
        kind, delta = check_noise(self.noise, self.delta, owner)
        features = check.check_count(n_features, "n_features", owner)
        shares = _check_shares(self.shares, owner)
        if kind == "laplace":
            return moment_scales(epsilon, features, shares).event
        return moment_noise(kind, epsilon, delta, features, shares, owner).event

    def statistic_budgets(
        self, n_features: int
    ) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
        """``(epsilon_i, delta_i)`` of a class's count, of each sum and of each sum of
        squares (the non-Laplace noises; a user's NoiseDesign must fit the smallest)."""
        owner = "GaussianNB.statistic_budgets"
        epsilon = check.check_epsilon(self.epsilon, owner)
        delta = check.check_delta(self.delta, owner, allow_zero=True)
        features = check.check_count(n_features, "n_features", owner)
        return statistic_budgets(epsilon, delta, features, _check_shares(self.shares, owner))

    def fit(self, X: Any, y: Any) -> GaussianNB:
        """Estimate the class statistics from ``X`` and ``y``; spends epsilon."""
        owner = "GaussianNB.fit"
        epsilon = check.check_epsilon(self.epsilon, owner)
        kind, delta = check_noise(self.noise, self.delta, owner)
        smoothing = check.check_nonnegative(self.var_smoothing, "var_smoothing", owner)
        shares = _check_shares(self.shares, owner)
        if self.bounds is None:
            raise InvalidParameter(
                f"{owner}: give public bounds=(lower, upper) for the features; dpkit never "
                "reads them from the data."
            )
        if self.classes is None:
            raise InvalidParameter(f"{owner}: give the public label set, classes=[...].")
        classes = np.asarray(self.classes)
        if classes.ndim != 1 or len(classes) < 2 or len(np.unique(classes)) != len(classes):
            raise InvalidParameter.for_parameter(
                "classes", owner, "a sequence of at least two distinct labels", self.classes
            )
        features = training_features(X, owner)
        labels = training_target(y, features.shape[0], owner)
        self._lower, self._upper = check_bounds(self.bounds, features.shape[1], "GaussianNB")
        # Each row goes to exactly one class -- the first equal label -- or, with a label
        # outside the classes or a non-finite feature, is dropped (never refused). One
        # class per row is what makes the classes compose in parallel.
        equal = np.asarray(labels[:, None] == classes[None, :], dtype=bool).reshape(
            len(labels), len(classes)
        )
        first = np.argmax(equal, axis=1)
        usable = equal.any(axis=1) & finite_rows(features)
        member = usable[:, None] & (first[:, None] == np.arange(len(classes))[None, :])
        z = self._scale(np.where(usable[:, None], features, self._lower))
        if kind == "laplace":
            scales = moment_scales(epsilon, features.shape[1], shares)
            event = scales.event
        else:  # calibrated (and any misfit refused) before anything is drawn
            noises = moment_noise(kind, epsilon, delta, features.shape[1], shares, owner)
            event = noises.event
        random = model_random(self.rng, "GaussianNB")
        means, variances, counts = [], [], []
        for k in range(len(classes)):
            rows = z[member[:, k]]
            if kind == "laplace":
                moments = noisy_moments(rows, scales, random)
                mean, variance = mean_and_variance(moments, scales)
            else:
                moments = noisy_moments_with(rows, noises, random)
                mean, variance = floored_mean_and_variance(
                    moments, noises.squares.standard_deviation
                )
            means.append(mean)
            variances.append(variance + smoothing)
            counts.append(max(moments.count, 1.0))
        self.classes_ = classes
        self.theta_ = np.array(means)
        self.var_ = np.array(variances)
        self.class_count_ = np.array(counts)
        self.class_prior_ = self.class_count_ / self.class_count_.sum()
        self.n_features_in_ = features.shape[1]
        self.event_ = event
        self.guarantee_ = PureDP(epsilon) if kind == "laplace" else ApproxDP(epsilon, delta)
        return self

    def _scale(self, features: FloatArray) -> FloatArray:
        # Clipped to the bounds first (no overflow on a huge row), then to [-1, 1]
        # whatever the rounding of the division.
        return clip_then_scale(features, self._lower, self._upper)

    def predict_joint_log_proba(self, X: Any) -> FloatArray:
        """log P(x, class) for each row and class (features clipped and scaled as in fit)."""
        features = self._fitted_features(X, "GaussianNB.predict")
        z = self._scale(features)
        log_prior = np.log(self.class_prior_)
        normaliser = -0.5 * np.log(2 * np.pi * self.var_).sum(axis=1)
        squared = ((z[:, None, :] - self.theta_[None]) ** 2 / self.var_[None]).sum(axis=2)
        joint: FloatArray = log_prior + normaliser - 0.5 * squared
        return joint

    def predict_proba(self, X: Any) -> FloatArray:
        """Class probabilities, in the order of ``classes_``."""
        joint = self.predict_joint_log_proba(X)
        joint -= joint.max(axis=1, keepdims=True)
        probabilities: FloatArray = np.exp(joint)
        normalised: FloatArray = probabilities / probabilities.sum(axis=1, keepdims=True)
        return normalised

    def predict(self, X: Any) -> npt.NDArray[Any]:
        """The most probable class of each row."""
        joint = self.predict_joint_log_proba(X)  # checks fitted first
        labels: npt.NDArray[Any] = self.classes_[joint.argmax(axis=1)]
        return labels


def _check_shares(shares: Any, owner: str) -> tuple[float, float, float]:
    expected = "three positive finite floats (count, sums, squares)"
    try:
        values = tuple(check.check_positive(s, "shares", owner) for s in shares)
    except TypeError:
        raise InvalidParameter.for_parameter("shares", owner, expected, shares) from None
    if len(values) != 3:
        raise InvalidParameter.for_parameter("shares", owner, expected, shares)
    return values[0], values[1], values[2]
