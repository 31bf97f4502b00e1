"""Logistic regression trained by noisy gradient descent (DP-SGD), scikit-learn compatible."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator, ClassifierMixin

from dpkit import _validation as check
from dpkit import noise
from dpkit.accounting._math.gaussian import gaussian_sigma_analytic
from dpkit.accounting._math.rounding import up
from dpkit.accounting.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    PoissonSampledEvent,
    RepeatedEvent,
)
from dpkit.accounting.guarantees import ApproxDP
from dpkit.errors import InvalidParameter
from dpkit.learn._base import (
    DPModelMixin,
    FloatArray,
    UnscaledFeaturesWarning,
    check_bounds,
    check_privacy,
    exact_weighted_sums,
    grid_step,
    norm_slack,
)
from dpkit.learn._rows import (
    clip_to_norm,
    finite_rows,
    model_random,
    scaled_norms,
    training_features,
    training_target,
)
from dpkit.random import Random, RandomLike

__all__ = ["LogisticRegression"]

#: Share of the privacy budget (in Gaussian-DP mu^2) spent on the noisy row count that
#: normalises the gradient; 1% moves the count by ~1/(0.1 mu) rows, negligible next to n.
COUNT_SHARE = 0.01


@dataclass(frozen=True)
class _NoisePlan:
    """Noise of one fit: the count's sigma, the gradient sums' noise multiplier, the event."""

    count_sigma: float
    noise_multiplier: float
    event: Event
    total_sigma: float


def _plan(epsilon: float, delta: float, steps: int, rate: float) -> _NoisePlan:
    """Calibrate the count and the per-step noise to (epsilon, delta) in total.

    Full batch (``rate == 1``): the count and the ``steps`` gradient sums are Gaussian
    mechanisms of sensitivity 1 (in units of the clip norm), and a composition of
    Gaussian mechanisms with noise multipliers ``s_i`` is exactly the Gaussian mechanism
    with ``1/s^2 = sum 1/s_i^2`` (its privacy loss is Gaussian; Dong, Roth & Su 2022,
    Cor. 3.3). So with ``s`` the analytic-Gaussian multiplier for (epsilon, delta)
    (Balle & Wang 2018, rounded up), giving the count ``1/s_n^2 = share/s^2`` and each
    step ``1/m^2 = (1 - share)/(steps s^2)`` (both rounded up) meets the target exactly.
    Poisson batches (``rate < 1``): the multiplier is calibrated with the PLD accountant
    on the whole event (count + subsampled steps), never overshooting.
    """
    sigma = gaussian_sigma_analytic(epsilon, delta, 1.0)
    count_sigma = up(sigma / math.sqrt(COUNT_SHARE), 4)
    count = GaussianEvent(count_sigma)
    if rate == 1.0:
        multiplier = up(sigma * math.sqrt(steps / (1.0 - COUNT_SHARE)), 4)
        event = ComposedEvent((count, RepeatedEvent(GaussianEvent(multiplier), steps)))
        return _NoisePlan(count_sigma, multiplier, event, sigma)

    from dpkit.accounting.calibrate import calibrate
    from dpkit.accounting.pld import PLDAccountant

    def make_event(m: float) -> Event:
        step = PoissonSampledEvent(GaussianEvent(m), rate)
        return ComposedEvent((count, RepeatedEvent(step, steps)))

    upper = sigma * math.sqrt(steps / (1.0 - COUNT_SHARE)) * 1.01  # full-batch: enough
    multiplier = calibrate(
        PLDAccountant,
        make_event,
        target_epsilon=epsilon,
        target_delta=delta,
        bracket=(upper * 1e-3, upper),
    )
    return _NoisePlan(count_sigma, multiplier, make_event(multiplier), sigma)


def _poisson_mask(rows: int, rate: float, rng: Random) -> npt.NDArray[np.bool_]:
    """Each row kept independently with probability ``floor(rate 2^64) / 2^64 <= rate``.

    Exact (uniform 64-bit integers compared with an integer threshold); a rate at most
    the accounted one only strengthens the subsampling guarantee.
    """
    threshold = np.uint64(math.floor(math.ldexp(rate, 64)))
    mask: npt.NDArray[np.bool_] = rng.uint64(rows) < threshold
    return mask


class LogisticRegression(DPModelMixin, ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """Binary logistic regression, (epsilon, delta)-DP, trained by noisy gradient descent.

    Each step clips every row's gradient of the logistic loss to L2 norm ``clip_norm``,
    adds them exactly (fixed point), adds Gaussian noise through :mod:`dpkit.noise` and
    takes a Nesterov momentum step; the model is the average of the second half of the
    iterates. ``sampling_rate < 1`` uses Poisson batches (DP-SGD, Abadi et al. 2016);
    the default 1.0 uses every row at every step (noisy full-batch gradient descent),
    which is the more accurate choice at equal epsilon on tables of this size (measured
    in ``docs/learn.md``). The gradient is normalised by a noisy count of the rows,
    which is part of the budget, so nothing about the data is used unpaid.

    Parameters
    ----------
    epsilon, delta:
        Target guarantee of one ``fit``: (epsilon, delta)-DP under adding or removing
        one row. Default delta 1e-6: choose it well below 1/(number of rows).
    bounds:
        Public ``(lower, upper)`` per feature (or scalars). Features are clipped to them
        and mapped to [0, 1] before training (a public affine map: no budget spent);
        ``coef_`` and ``intercept_`` are reported on the original features, so
        ``X @ coef_.T + intercept_`` is the decision function inside the bounds. Never
        taken from the data. Recommended: see ``data_norm``.
    data_norm:
        Optional public bound on a row's L2 norm (diffprivlib's name): rows are scaled
        down to it, then divided by it. Give ``bounds`` or ``data_norm``, not both. With
        neither, features are used as given -- privacy still holds (gradients are
        clipped), but the default learning rate assumes features of order 1, so ``fit``
        warns (:class:`~dpkit.learn.UnscaledFeaturesWarning`): on raw Adult columns
        the model scored 0.78 where the same columns with their public bounds scored
        0.84 (``docs/learn.md``).
    fit_intercept:
        Learn an intercept (a constant feature 1).
    max_iter:
        Number of gradient steps.
    learning_rate, momentum:
        Nesterov step size and momentum (post-processing of the noisy gradients).
    clip_norm:
        Per-row gradient clipping norm C (the sensitivity of a gradient sum).
    alpha:
        L2 penalty ``alpha/2 ||w||^2`` (not on the intercept).
    sampling_rate:
        Poisson sampling probability of each row at each step, in (0, 1]; public.
    classes:
        Optional ``(negative, positive)`` labels. Default: y holds 0/1 (or booleans).
        The label set is never read from the data.
    rng:
        Random source for the noise (and the batches).

    Privacy
    -------
    (epsilon, delta)-DP, add/remove one row. Event ``ComposedEvent((GaussianEvent(s_n),
    RepeatedEvent(step, max_iter)))`` with ``step = GaussianEvent(m)`` (full batch) or
    ``PoissonSampledEvent(GaussianEvent(m), sampling_rate)``. Sensitivity: a row changes a
    gradient sum by its clipped, fixed-point-rounded gradient, of norm at most
    ``clip_norm + sqrt(d) step / 2`` with ``step = clip_norm 2^-26``; the noise is scaled
    to that bound. Calibration: Dong, Roth & Su 2022 (composition of Gaussians) and
    Balle & Wang 2018 (analytic Gaussian) for full batches; the PLD accountant for
    Poisson batches.

    Examples
    --------
    >>> import numpy as np, dpkit as dp
    >>> X = np.array([[0.0], [0.2], [0.8], [1.0]] * 500)
    >>> y = np.array([0, 0, 1, 1] * 500)
    >>> model = dp.learn.LogisticRegression(epsilon=1.0, bounds=(0, 1), rng=7).fit(X, y)
    >>> model.predict([[0.1], [0.9]])
    array([0, 1])
    >>> model.guarantee
    ApproxDP(epsilon=1.0, delta=1e-06)
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        delta: float = 1e-6,
        bounds: Any = None,
        data_norm: float | None = None,
        fit_intercept: bool = True,
        max_iter: int = 100,
        learning_rate: float = 8.0,
        momentum: float = 0.9,
        clip_norm: float = 1.0,
        alpha: float = 0.0,
        sampling_rate: float = 1.0,
        classes: Any = None,
        rng: RandomLike | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.bounds = bounds
        self.data_norm = data_norm
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.clip_norm = clip_norm
        self.alpha = alpha
        self.sampling_rate = sampling_rate
        self.classes = classes
        self.rng = rng

    # -- fitting --------------------------------------------------------------------

    def privacy_event(self, n_features: int | None = None) -> Event:
        """The event ``fit`` will have with the current parameters (no data needed).

        With full batches it is one ``GaussianEvent(s)``, ``s`` the analytic multiplier
        for (epsilon, delta): the count and the steps compose exactly to a Gaussian
        mechanism with ``1/s'^2 = 1/s_n^2 + max_iter/m^2 <= 1/s^2`` (Dong, Roth & Su 2022,
        Cor. 3.3; the parts are rounded up from ``s``), whatever ``max_iter``. ``fit``
        records the step-by-step form.
        ``n_features`` is accepted for symmetry with the other models (unused).
        """
        plan = self._plan("LogisticRegression.privacy_event")
        if self.sampling_rate == 1.0:
            # The parts were rounded up from this sigma, so they compose to at least it.
            return GaussianEvent(plan.total_sigma)
        return plan.event

    def _plan(self, owner: str) -> _NoisePlan:
        epsilon, delta = check_privacy(self.epsilon, self.delta, owner, allow_zero_delta=False)
        steps = check.check_count(self.max_iter, "max_iter", owner)
        rate = check.check_probability(self.sampling_rate, "sampling_rate", owner, open_low=True)
        return _plan(epsilon, delta, steps, rate)

    def fit(self, X: Any, y: Any) -> LogisticRegression:
        """Train on ``X`` (rows x features) and binary ``y``; spends (epsilon, delta)."""
        owner = "LogisticRegression.fit"
        epsilon, delta = check_privacy(self.epsilon, self.delta, owner, allow_zero_delta=False)
        steps = check.check_count(self.max_iter, "max_iter", owner)
        rate = check.check_probability(self.sampling_rate, "sampling_rate", owner, open_low=True)
        clip = check.check_positive(self.clip_norm, "clip_norm", owner)
        lr = check.check_positive(self.learning_rate, "learning_rate", owner)
        momentum = check.check_probability(self.momentum, "momentum", owner)
        if momentum == 1.0:
            raise InvalidParameter.for_parameter("momentum", owner, "a float in [0, 1)", 1.0)
        alpha = check.check_nonnegative(self.alpha, "alpha", owner)
        features = training_features(X, owner)
        labels, known = self._binary_labels(training_target(y, features.shape[0], owner))
        self._set_transform(features.shape[1], owner)
        # Rows with a non-finite feature or a label outside the classes are dropped (a
        # per-row transformation; see dpkit.learn._rows), never refused.
        keep = known & finite_rows(features)
        design = self._design(features[keep])
        labels = labels[keep]
        plan = _plan(epsilon, delta, steps, rate)
        random = model_random(self.rng, "LogisticRegression")

        weights = self._descend(
            design, labels, plan, steps, rate, clip, lr, momentum, alpha, random
        )
        self._set_coefficients(weights, features.shape[1])
        self.n_features_in_ = features.shape[1]
        self.event_ = plan.event
        self.guarantee_ = ApproxDP(epsilon, delta)
        return self

    def _binary_labels(self, y: npt.NDArray[Any]) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
        """0/1 targets, and which rows have one of the two public labels."""
        if self.classes is None:
            negative: Any = 0
            positive: Any = 1
            self.classes_ = np.array([0, 1])
        else:
            try:
                negative, positive = self.classes
            except (TypeError, ValueError):
                raise InvalidParameter.for_parameter(
                    "classes", "LogisticRegression", "a pair (negative, positive)", self.classes
                ) from None
            self.classes_ = np.array([negative, positive])
        is_positive = np.asarray(y == positive, dtype=bool)
        known = is_positive | np.asarray(y == negative, dtype=bool)
        targets: FloatArray = is_positive.astype(np.float64)
        return targets, known

    def _set_transform(self, features: int, owner: str) -> None:
        # The map from raw features to the training scale: z = clip(x) * scale + shift.
        if self.bounds is not None and self.data_norm is not None:
            raise InvalidParameter(f"{owner}: give bounds or data_norm, not both.")
        self._lower: FloatArray | None = None
        self._upper: FloatArray | None = None
        self._norm: float | None = None
        if self.bounds is not None:
            self._lower, self._upper = check_bounds(self.bounds, features, "LogisticRegression")
        elif self.data_norm is not None:
            self._norm = check.check_positive(self.data_norm, "data_norm", "LogisticRegression")
        else:
            # Public parameters only: whether the data happen to be of order 1 is not
            # looked at (a warning must not depend on a row).
            warnings.warn(
                f"{owner}: no public bounds= or data_norm=, so the features are used as "
                "given; the default learning_rate assumes features of order 1, and on raw "
                "columns (ages, amounts) the model may do no better than the majority "
                "class. Give bounds=(lower, upper) per feature: the map to [0, 1] is free "
                "(public parameters only) and coef_ stays on the original features.",
                UnscaledFeaturesWarning,
                stacklevel=3,
            )

    def _transform(self, features: FloatArray) -> FloatArray:
        if self._lower is not None and self._upper is not None:
            # Halves first: upper - lower may overflow where (upper - lower) / 2 does not.
            clipped = np.clip(features, self._lower, self._upper)
            half = self._upper / 2 - self._lower / 2
            scaled: FloatArray = np.clip((clipped / 2 - self._lower / 2) / half, 0.0, 1.0)
            return scaled
        if self._norm is not None:
            return clip_to_norm(features, self._norm) / self._norm
        return features

    def _design(self, features: FloatArray) -> FloatArray:
        z = self._transform(features)
        if self.fit_intercept:
            z = np.hstack([z, np.ones((z.shape[0], 1))])
        return z

    def _descend(
        self,
        design: FloatArray,
        labels: FloatArray,
        plan: _NoisePlan,
        steps: int,
        rate: float,
        clip: float,
        lr: float,
        momentum: float,
        alpha: float,
        random: Random,
    ) -> FloatArray:
        rows, width = design.shape
        row_norms = scaled_norms(design)
        step = grid_step(clip)
        # A row's rounded, clipped gradient has norm <= clip + slack: the sensitivity.
        sensitivity = clip + norm_slack(width, step)
        sigma = up(plan.noise_multiplier * sensitivity, 4)
        # The noisy count is released once (sensitivity 1) and only normalises.
        count = float(noise.gaussian(float(rows), sigma=plan.count_sigma, rng=random))
        scale = 1.0 / (rate * max(count, 1.0))
        penalty = np.full(width, alpha)
        if self.fit_intercept:
            penalty[-1] = 0.0
        w = np.zeros(width)
        velocity = np.zeros(width)
        average = np.zeros(width)
        for t in range(steps):
            lookahead = w + momentum * velocity
            batch = design, labels, row_norms
            if rate < 1.0:
                mask = _poisson_mask(rows, rate, random)
                batch = design[mask], labels[mask], row_norms[mask]
            total = _clipped_gradient_sum(*batch, lookahead, clip, step)
            noisy = np.asarray(noise.gaussian(total, sigma=sigma, rng=random), dtype=np.float64)
            gradient = noisy * scale + penalty * lookahead
            velocity = momentum * velocity - lr * gradient
            w = w + velocity
            if t >= steps // 2:
                average += w
        result: FloatArray = average / (steps - steps // 2)
        return result

    def _set_coefficients(self, w: FloatArray, features: int) -> None:
        coef = w[:features].copy()
        intercept = float(w[features]) if self.fit_intercept else 0.0
        # Report in the original units: the training features were z = (x - lo) / (hi - lo)
        # (bounds) or x / data_norm; the map is affine inside the bounds.
        if self._lower is not None and self._upper is not None:
            coef = (coef / 2) / (self._upper / 2 - self._lower / 2)
            intercept -= float(coef @ self._lower)
        elif self._norm is not None:
            coef = coef / self._norm
        self._weights = w
        self.coef_ = coef[None, :]
        self.intercept_ = np.array([intercept])

    # -- prediction (post-processing) -----------------------------------------------

    def decision_function(self, X: Any) -> FloatArray:
        """The linear score ``w . z`` of each row (z: the features as used in training)."""
        features = self._fitted_features(X, "LogisticRegression.decision_function")
        scores: FloatArray = self._design(features) @ self._weights
        return scores

    def predict_proba(self, X: Any) -> FloatArray:
        """Probabilities of the two classes, in the order of ``classes_``."""
        p = _sigmoid(self.decision_function(X))
        return np.column_stack([1.0 - p, p])

    def predict(self, X: Any) -> npt.NDArray[Any]:
        """The more probable class of each row."""
        positive = self.decision_function(X) > 0
        labels: npt.NDArray[Any] = self.classes_[positive.astype(np.int64)]
        return labels

    def _check_fitted(self) -> None:
        self.event  # noqa: B018 -- raises NotFittedError before fit


def _clipped_gradient_sum(
    design: FloatArray,
    labels: FloatArray,
    row_norms: FloatArray,
    w: FloatArray,
    clip: float,
    step: float,
) -> FloatArray:
    """Exact fixed-point sum of the rows' logistic-loss gradients, each clipped to ``clip``.

    Row i's gradient is ``r_i x_i`` with ``r_i = sigmoid(w . x_i) - y_i``, of norm
    ``|r_i| ||x_i||``; it is scaled by ``min(1, clip (1 - 2^-40) / (|r_i| ||x_i||))``.
    The 2^-40 margin exceeds the relative rounding of the norm and of the products, so
    each clipped gradient has norm <= clip before fixed-point rounding.
    """
    if design.shape[0] == 0:
        return np.zeros(design.shape[1])
    with np.errstate(over="ignore", invalid="ignore"):
        logits = design @ w  # may overflow on huge rows: any value is fine, see below
    # Residuals in [-1, 1] whatever the logit (NaN, from inf - inf, counts as 0).
    residual = _sigmoid(np.nan_to_num(logits, nan=0.0)) - labels
    # Clip |r_i| ||x_i|| to clip (1 - 2^-40): r_i is clipped to +-target / ||x_i||. A row
    # of norm 0 contributes 0 whatever r_i; a row whose norm overflows contributes 0.
    target = clip * (1.0 - 2.0**-40)
    with np.errstate(divide="ignore"):
        limit = np.where(row_norms > 0, target / row_norms, np.inf)
    weights = np.clip(residual, -limit, limit)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        return exact_weighted_sums(design, weights, step)


def _sigmoid(z: FloatArray) -> FloatArray:
    result: FloatArray = 0.5 * (1.0 + np.tanh(0.5 * z))  # stable for large |z|
    return result
