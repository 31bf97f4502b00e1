"""Linear regression by sufficient-statistics perturbation (SSP)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from dpkit import _validation as check
from dpkit import noise
from dpkit.accounting._math.gaussian import gaussian_sigma_analytic
from dpkit.accounting._math.rounding import div_down, up
from dpkit.accounting.events import Event, GaussianEvent
from dpkit.accounting.guarantees import ApproxDP, PureDP
from dpkit.errors import InvalidParameter
from dpkit.learn._base import (
    DPModelMixin,
    FloatArray,
    check_bounds,
    check_privacy,
    check_scalar_bounds,
    grid_step,
    laplace_for,
)
from dpkit.learn._rows import clip_then_scale, model_random, regression_rows
from dpkit.random import RandomLike

__all__ = ["LinearRegression"]


class LinearRegression(DPModelMixin, RegressorMixin, BaseEstimator):  # type: ignore[misc]
    """Least squares (optionally ridge) by sufficient-statistics perturbation.

    Features and target are clipped to public bounds and scaled to [-1, 1]; with a
    constant column for the intercept, each row ``a = (z, 1, t)`` adds ``a_j a_k`` to
    every entry ``j <= k`` of the Gram matrix (the ``t t`` entry is not needed and not
    released). The ``m`` released entries are sums of terms in [-1, 1]: one Laplace
    mechanism of L1 sensitivity ``m`` (``delta = 0``) or one Gaussian mechanism of L2
    sensitivity ``sqrt(m)`` (``delta > 0``; analytic calibration) releases them all; the
    coefficients solve the noisy normal equations with a ridge ``alpha`` (post-
    processing). SSP: Vu & Slavkovic 2009, Wang 2018 ("Revisiting differentially private
    linear regression", where SSP is near-optimal among simple methods).

    Parameters
    ----------
    epsilon, delta:
        Guarantee of one ``fit`` (add/remove one row): epsilon-DP when ``delta = 0``
        (default, Laplace), (epsilon, delta)-DP otherwise (Gaussian).
    bounds:
        Public ``(lower, upper)`` per feature (or scalars). Required.
    bounds_y:
        Public ``(lower, upper)`` of the target. Required.
    fit_intercept:
        Learn an intercept.
    alpha:
        Ridge penalty on the scaled coefficients (the Gram matrix's units: rows), or
        ``"auto"``: twice the expected spectral norm of the noise matrix,
        ``2 s sqrt(p)`` for ``p`` predictors and per-entry noise s.d. ``s`` (public), so
        the penalised noisy matrix dominates the true one with high probability -- the
        idea of Wang's AdaSSP (2018), without spending budget on the smallest
        eigenvalue. Predictions are clipped to ``bounds_y``.
    rng:
        Random source.

    Privacy
    -------
    As above. Sensitivity: the scaled values are rounded to the grid ``2^-12`` and
    their products summed exactly (``_exact_gram``), so a row adds at most 1 to
    each entry; the calibration uses ``1 + s/2`` (``s = 2^-25``), which only overstates
    it.

    Examples
    --------
    >>> import numpy as np, dpkit as dp
    >>> x = np.linspace(0, 1, 4000)[:, None]
    >>> y = 2 * x[:, 0] + 1
    >>> model = dp.learn.LinearRegression(epsilon=1.0, bounds=(0, 1), bounds_y=(0, 4),
    ...                                   rng=11).fit(x, y)
    >>> round(float(model.coef_[0]), 1), round(float(model.intercept_), 1)
    (2.0, 1.0)
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 0.0,
        bounds: Any = None,
        bounds_y: Any = None,
        fit_intercept: bool = True,
        alpha: float | str = "auto",
        rng: RandomLike | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.bounds_y = bounds_y
        self.fit_intercept = fit_intercept
        self.alpha = alpha
        self.rng = rng

    def privacy_event(self, n_features: int) -> Event:
        """The event ``fit`` will have on ``n_features`` columns (no data needed)."""
        owner = "LinearRegression.privacy_event"
        epsilon, delta = check_privacy(self.epsilon, self.delta, owner, allow_zero_delta=True)
        width = check.check_count(n_features, "n_features", owner) + 1 + bool(self.fit_intercept)
        return _noise(epsilon, delta, width * (width + 1) // 2 - 1).event

    def fit(self, X: Any, y: Any) -> LinearRegression:
        """Fit on ``X`` and real ``y``; spends epsilon (and delta)."""
        owner = "LinearRegression.fit"
        epsilon, delta = check_privacy(self.epsilon, self.delta, owner, allow_zero_delta=True)
        if self.bounds is None or self.bounds_y is None:
            raise InvalidParameter(
                f"{owner}: give public bounds=(lower, upper) for the features and "
                "bounds_y=(lower, upper) for the target; dpkit never reads them from the data."
            )
        # Rows with a non-finite feature or target are dropped, never refused.
        features, target = regression_rows(X, y, owner)
        d = features.shape[1]
        self._lower, self._upper = check_bounds(self.bounds, d, "LinearRegression")
        self._y_lower, self._y_upper = check_scalar_bounds(
            self.bounds_y, "LinearRegression", "bounds_y"
        )
        z = clip_then_scale(features, self._lower, self._upper)
        t = clip_then_scale(target[:, None], np.array([self._y_lower]), np.array([self._y_upper]))
        columns = [z, np.ones((z.shape[0], 1))] if self.fit_intercept else [z]
        augmented = np.hstack([*columns, t])
        rows, cols = np.triu_indices(augmented.shape[1])
        keep = ~((rows == augmented.shape[1] - 1) & (cols == augmented.shape[1] - 1))
        rows, cols = rows[keep], cols[keep]
        entries = len(rows)
        sums = _exact_gram(augmented)[rows, cols]

        alpha = _check_alpha(self.alpha, owner)
        random = model_random(self.rng, "LinearRegression")
        spec = _noise(epsilon, delta, entries)
        if spec.laplace:
            noisy = noise.laplace(sums, scale=spec.scale, rng=random)
            self.guarantee_ = PureDP(epsilon)
        else:
            noisy = noise.gaussian(sums, sigma=spec.scale, rng=random)
            self.guarantee_ = ApproxDP(epsilon, delta)
        noise_sd = math.sqrt(2.0) * spec.scale if spec.laplace else spec.scale
        event = spec.event
        gram = np.zeros((augmented.shape[1], augmented.shape[1]))
        gram[rows, cols] = np.asarray(noisy, dtype=np.float64)
        predictors = augmented.shape[1] - 1
        ridge = 2.0 * noise_sd * math.sqrt(predictors) if alpha is None else alpha
        self.alpha_ = ridge
        self._solve(gram, ridge, d)
        self.n_features_in_ = d
        self.event_ = event
        return self

    def _solve(self, gram: FloatArray, alpha: float, d: int) -> None:
        p = gram.shape[0] - 1  # the predictors: z (and the constant)
        xx = gram[:p, :p]
        xx = np.triu(xx) + np.triu(xx, 1).T
        xy = gram[:p, p]
        # Project the noisy Gram matrix onto the positive semi-definite cone, then add
        # the ridge: a well-posed system whatever the noise (post-processing).
        values, vectors = np.linalg.eigh(xx)
        xx = (vectors * np.maximum(values, 0.0)) @ vectors.T
        penalty = np.full(p, alpha)
        if self.fit_intercept:
            penalty[-1] = max(alpha, 1e-9) * 1e-6  # essentially unpenalised intercept
        # lstsq, not solve: with alpha = 0 the projected matrix can be singular, and a
        # fit that raises for some noise draws fails at a data-dependent rate (dp.tune
        # would release that failure). lstsq's minimum-norm solution never raises on
        # finite input and equals solve's wherever the matrix is invertible.
        beta = np.linalg.lstsq(xx + np.diag(penalty), xy, rcond=None)[0]
        # Back to original units: z = (x - c) / r, t = (y - c_y) / r_y.
        centre = (self._lower + self._upper) / 2
        radius = (self._upper - self._lower) / 2
        y_centre = (self._y_lower + self._y_upper) / 2
        y_radius = (self._y_upper - self._y_lower) / 2
        slope = beta[:d] * y_radius / radius
        offset = (beta[d] if self.fit_intercept else 0.0) * y_radius + y_centre
        self.coef_ = slope
        self.intercept_ = float(offset - slope @ centre)

    def predict(self, X: Any) -> FloatArray:
        """Predictions for the rows of ``X`` (clipped to the bounds, as in training)."""
        features = self._fitted_features(X, "LinearRegression.predict")
        clipped = np.clip(features, self._lower, self._upper)
        prediction: FloatArray = np.clip(
            clipped @ self.coef_ + self.intercept_, self._y_lower, self._y_upper
        )
        return prediction


#: The scaled features and target (in [-1, 1]) are rounded to multiples of
#: ``2^-GRAM_BITS`` before their products are summed (:func:`_exact_gram`).
GRAM_BITS = 12


def _exact_gram(augmented: FloatArray) -> FloatArray:
    """``A^T A`` of ``A`` = ``augmented`` rounded to the grid ``2^-GRAM_BITS``, exactly.

    Each rounded value is ``a 2^-GRAM_BITS`` with an integer ``|a| <= 2^GRAM_BITS``
    (the grid holds -1 and 1, so rounding to the nearest point stays in [-1, 1]). The
    products ``a_j a_k`` are integers of magnitude at most ``2^24``, exact in float64,
    and every partial sum of ``n < MAX_ROWS = 2^26`` of them is an integer below
    ``2^50 < 2^53``: the matrix product is exact whatever order (or fused
    multiply-add) the BLAS uses, and the scaling back by a power of two is exact too.
    So each row adds exactly its own products of rounded values, each in [-1, 1]: the
    sensitivity the noise is calibrated for (with the ``s / 2`` slack kept, which only
    overstates it). One matrix product instead of rounding ``n m`` products one by one
    (issue 34: 1.25 s -> ~0.03 s on Adult's 39,000 x 48).
    """
    scale = 2.0**GRAM_BITS
    integers = np.rint(augmented * scale)
    gram: FloatArray = (integers.T @ integers) / (scale * scale)
    return gram


class _Noise(NamedTuple):
    """Laplace (scale) or Gaussian (sigma) noise on the Gram entries, and its event."""

    laplace: bool
    scale: float
    event: Event


def _noise(epsilon: float, delta: float, entries: int) -> _Noise:
    """Noise for ``entries`` released sums of terms in [-1 - s/2, 1 + s/2] each."""
    # A row adds at most 1 to an entry (_exact_gram); the s/2 slack of the fixed-point
    # grid used before is kept: it only overstates the sensitivity.
    per_entry = 1.0 + grid_step(1.0) / 2
    if delta == 0.0:
        sensitivity = up(entries * per_entry, 4)
        scale, laplace_event = laplace_for(sensitivity, epsilon)
        return _Noise(True, scale, laplace_event)
    sensitivity = up(math.sqrt(entries) * per_entry, 4)
    # The analytic sigma is rounded up; the event's multiplier sigma / s rounded down
    # can only overstate the cost.
    sigma = gaussian_sigma_analytic(epsilon, delta, sensitivity)
    return _Noise(False, sigma, GaussianEvent(div_down(sigma, sensitivity)))


def _check_alpha(alpha: Any, owner: str) -> float | None:
    """None for "auto", else a float >= 0."""
    if isinstance(alpha, str):
        if alpha != "auto":
            raise InvalidParameter.for_parameter("alpha", owner, '"auto" or a float >= 0', alpha)
        return None
    return check.check_nonnegative(alpha, "alpha", owner)
