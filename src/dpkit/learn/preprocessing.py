"""Scaling features with DP statistics, and public-bounds scaling that costs nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from dpkit import _validation as check
from dpkit.accounting.events import Event, NoOpEvent
from dpkit.accounting.guarantees import PureDP
from dpkit.errors import InvalidParameter
from dpkit.learn._base import DPModelMixin, FloatArray, check_bounds
from dpkit.learn._moments import DEFAULT_SHARES, mean_and_variance, moment_scales, noisy_moments
from dpkit.learn._rows import clip_then_scale, finite_rows, model_random, training_features
from dpkit.random import RandomLike

__all__ = ["MinMaxScaler", "StandardScaler"]


class StandardScaler(DPModelMixin, TransformerMixin, BaseEstimator):  # type: ignore[misc]
    """``(x - mean) / std`` with epsilon-DP means and standard deviations.

    The statistics are those of the features clipped to public ``bounds``: a noisy
    count, sums and sums of squares (Laplace, exact fixed-point sums; see
    ``dpkit.learn._moments``). ``transform`` does not clip (post-processing of the
    released statistics, like scikit-learn's scaler).

    Parameters
    ----------
    epsilon:
        Guarantee of one ``fit``: epsilon-DP, add/remove one row.
    bounds:
        Public ``(lower, upper)`` per feature (or scalars). Required.
    with_mean, with_std:
        Centre, and scale to unit variance (as scikit-learn).
    min_std:
        Floor on the released standard deviation, as a fraction of ``(upper - lower)/2``,
        so a noisy variance near 0 does not blow the features up.
    rng:
        Random source.

    Privacy
    -------
    epsilon-DP (Laplace mechanism on each block of statistics, basic composition).

    Examples
    --------
    >>> import numpy as np, dpkit as dp
    >>> X = np.column_stack([np.linspace(0, 10, 5000), np.linspace(-1, 1, 5000)])
    >>> scaler = dp.learn.StandardScaler(epsilon=1.0, bounds=([0, -1], [10, 1]), rng=5)
    >>> [round(float(m), 1) + 0.0 for m in scaler.fit(X).mean_]
    [5.0, 0.0]
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        bounds: Any = None,
        with_mean: bool = True,
        with_std: bool = True,
        min_std: float = 1e-3,
        rng: RandomLike | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.bounds = bounds
        self.with_mean = with_mean
        self.with_std = with_std
        self.min_std = min_std
        self.rng = rng

    def privacy_event(self, n_features: int) -> Event:
        """The event ``fit`` will have on ``n_features`` columns (no data needed)."""
        owner = "StandardScaler.privacy_event"
        epsilon = check.check_epsilon(self.epsilon, owner)
        features = check.check_count(n_features, "n_features", owner)
        return moment_scales(epsilon, features, DEFAULT_SHARES).event

    def fit(self, X: Any, y: Any = None) -> StandardScaler:
        """Release the means and standard deviations of ``X``; spends epsilon."""
        owner = "StandardScaler.fit"
        epsilon = check.check_epsilon(self.epsilon, owner)
        floor = check.check_positive(self.min_std, "min_std", owner)
        if self.bounds is None:
            raise InvalidParameter(
                f"{owner}: give public bounds=(lower, upper) for the features; dpkit never "
                "reads them from the data."
            )
        features = training_features(X, owner)
        features = features[finite_rows(features)]  # dropped, never refused
        lower, upper = check_bounds(self.bounds, features.shape[1], "StandardScaler")
        centre, radius = lower / 2 + upper / 2, upper / 2 - lower / 2
        z = clip_then_scale(features, lower, upper)
        scales = moment_scales(epsilon, features.shape[1], DEFAULT_SHARES)
        moments = noisy_moments(z, scales, model_random(self.rng, "StandardScaler"))
        mean, variance = mean_and_variance(moments, scales)
        self.mean_ = centre + radius * mean
        self.var_ = (radius * radius) * variance
        self.scale_ = radius * np.maximum(np.sqrt(variance), floor)
        self.n_features_in_ = features.shape[1]
        self.event_ = scales.event
        self.guarantee_ = PureDP(epsilon)
        return self

    def transform(self, X: Any) -> FloatArray:
        """Centre and scale with the released statistics."""
        features = self._fitted_features(X, "StandardScaler.transform")
        if self.with_mean:
            features = features - self.mean_
        if self.with_std:
            features = features / self.scale_
        return features


class MinMaxScaler(DPModelMixin, TransformerMixin, BaseEstimator):  # type: ignore[misc]
    """Clip to public ``bounds`` and map them to ``feature_range``; uses no data, costs nothing.

    The scaler to put in front of a model when the bounds are known: it spends no
    budget (its event is a no-op), unlike scikit-learn's, which reads the data's range.

    Examples
    --------
    >>> import numpy as np, dpkit as dp
    >>> dp.learn.MinMaxScaler(bounds=(0, 100)).fit_transform(np.array([[50.0], [150.0]]))
    array([[0.5],
           [1. ]])
    """

    def __init__(self, *, bounds: Any = None, feature_range: tuple[float, float] = (0.0, 1.0)):
        self.bounds = bounds
        self.feature_range = feature_range

    def fit(self, X: Any, y: Any = None) -> MinMaxScaler:
        """Check the shape of ``X``; reads no value of it."""
        owner = "MinMaxScaler.fit"
        if self.bounds is None:
            raise InvalidParameter(f"{owner}: give public bounds=(lower, upper).")
        features = training_features(X, owner)  # the shape only: no value is read
        self._lower, self._upper = check_bounds(self.bounds, features.shape[1], "MinMaxScaler")
        self._low, self._high = _range(self.feature_range, owner)
        self.n_features_in_ = features.shape[1]
        self.event_ = NoOpEvent()
        self.guarantee_ = PureDP(0.0)
        return self

    def transform(self, X: Any) -> FloatArray:
        """Clip to the bounds and map them linearly onto ``feature_range``."""
        features = self._fitted_features(X, "MinMaxScaler.transform")
        unit = (np.clip(features, self._lower, self._upper) - self._lower) / (
            self._upper - self._lower
        )
        scaled: FloatArray = self._low + unit * (self._high - self._low)
        return scaled


def _range(feature_range: Any, owner: str) -> tuple[float, float]:
    try:
        low, high = (check.check_finite_float(v, "feature_range", owner) for v in feature_range)
    except (TypeError, ValueError):
        raise InvalidParameter.for_parameter(
            "feature_range", owner, "a pair (low, high) of finite floats, low < high", feature_range
        ) from None
    if not low < high:
        raise InvalidParameter.for_parameter(
            "feature_range", owner, "a pair (low, high) of finite floats, low < high", feature_range
        )
    return low, high
