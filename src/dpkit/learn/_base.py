"""What every dpkit.learn model shares: input checks, public bounds, exact sums, the event.

Three rules make a model's privacy proof hold on real hardware, not just on paper:

1. **Bounds are public.** Features are clipped to bounds the user declares (or to a
   row norm), never to bounds read from the data: diffprivlib's default of measuring
   the data's range (with a warning) leaks it.
2. **Sums are exact.** A floating-point sum of clipped rows can move by more than one
   row's contribution when a row is removed (the order of rounding changes; Casacuberta
   et al. 2022). dpkit rounds each clipped value to a fixed-point grid and adds the
   integers exactly, so removing a row changes the sum by exactly that row's rounded
   value, whose size is bounded in :func:`exact_column_sums`.
3. **Noise is dpkit's.** Sums are released with :mod:`dpkit.noise` (exact samplers,
   released on a grid), so the Laplace and Gaussian mechanisms' guarantees hold as
   proven.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.accounting._math.rounding import div_down, div_up
from dpkit.accounting.events import Event, LaplaceEvent
from dpkit.errors import DataError, DPError, DPWarning, InvalidParameter
from dpkit.mechanisms._base import Guarantee

FloatArray = npt.NDArray[np.float64]

#: Clipped values are rounded to 2^-FRACTION_BITS of their bound's power of two, so a
#: row's rounded value is at most one such step above its bound.
FRACTION_BITS = 26
#: Integer sums stay below 2^53 (exact in int64 and when converted to float64) when
#: there are fewer rows than this.
MAX_ROWS = 2 ** (53 - FRACTION_BITS - 1)


#: Relative margin by which calibrated noise exceeds what the target needs, so that the
#: event's own (rounded-up) epsilon stays at or below the target.
NOISE_MARGIN = 2.0**-30


def laplace_for(sensitivity: float, epsilon: float) -> tuple[float, LaplaceEvent]:
    """The Laplace scale for an L1 ``sensitivity`` at ``epsilon``, and its event.

    The scale is ``sensitivity / epsilon`` enlarged by :data:`NOISE_MARGIN`, and the
    event's noise multiplier ``scale / sensitivity`` is rounded down (it then still
    exceeds ``1 / epsilon``), so ``pure_epsilon(event) <= epsilon`` after every rounding.
    """
    scale = div_up(sensitivity, epsilon) * (1 + NOISE_MARGIN)
    multiplier = div_down(scale, sensitivity)
    return scale, LaplaceEvent(multiplier)


class UnscaledFeaturesWarning(DPWarning):
    """A model that learns by gradient steps got no public scale for its features.

    :class:`~dpkit.learn.LogisticRegression` without ``bounds=`` or ``data_norm=`` uses
    the features as given, and its default learning rate assumes features of order 1:
    on raw columns (ages, incomes in dollars) it can score no better than predicting the
    majority class. Public bounds cost nothing (the map to [0, 1] is a function of public
    parameters only) and the coefficients are reported on the original features. The
    warning depends on the parameters only, never on the data.
    """


class NotFittedError(DPError, AttributeError):
    """The model has not been fitted yet (scikit-learn's ``NotFittedError`` is also an
    ``AttributeError``, so ``hasattr(model, "event")`` is False before ``fit``)."""


def check_features(X: Any, owner: str) -> FloatArray:
    """``X`` as a finite 2-D float64 array with at least one row and one column.

    Messages name the problem and the shape, never a value (the curator may log them).
    """
    try:
        array = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise DataError(f"{owner}: X must be numeric (a 2-D array of numbers).") from err
    if array.ndim != 2:
        raise DataError(f"{owner}: X must be 2-D (rows x features); got {array.ndim} dimension(s).")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise DataError(f"{owner}: X is empty (shape {array.shape}); nothing to fit.")
    if not np.isfinite(array).all():
        raise DataError(
            f"{owner}: X holds NaN or infinite values; impute or drop them first "
            "(with public rules: the choice must not depend on the data)."
        )
    if array.shape[0] >= MAX_ROWS:
        raise DataError(
            f"{owner}: at most {MAX_ROWS - 1} rows are supported (exact fixed-point sums); "
            f"got {array.shape[0]}. Fit on a sample."
        )
    return array


def check_target(y: Any, rows: int, owner: str) -> npt.NDArray[Any]:
    """``y`` as a 1-D array with one entry per row of X."""
    array = np.asarray(y)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1 or array.shape[0] != rows:
        raise DataError(
            f"{owner}: y must be 1-D with one entry per row of X ({rows}); got shape {array.shape}."
        )
    return array


def check_real_target(y: Any, rows: int, owner: str) -> FloatArray:
    """A finite real target."""
    array = check_target(y, rows, owner)
    try:
        values = np.asarray(array, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise DataError(f"{owner}: y must be numeric.") from err
    if not np.isfinite(values).all():
        raise DataError(f"{owner}: y holds NaN or infinite values.")
    return values


def check_bounds(
    bounds: Any, features: int, owner: str, name: str = "bounds"
) -> tuple[FloatArray, FloatArray]:
    """``(lower, upper)``: scalars or one value per feature, finite, lower < upper."""
    expected = (
        "a pair (lower, upper) of finite floats or arrays, one value per feature, lower < upper"
    )
    try:
        lower_raw, upper_raw = bounds
        lower = np.broadcast_to(np.asarray(lower_raw, dtype=np.float64), (features,)).copy()
        upper = np.broadcast_to(np.asarray(upper_raw, dtype=np.float64), (features,)).copy()
    except (TypeError, ValueError) as err:
        raise InvalidParameter.for_parameter(name, owner, expected, bounds) from err
    if not (np.isfinite(lower).all() and np.isfinite(upper).all() and (lower < upper).all()):
        raise InvalidParameter.for_parameter(name, owner, expected, bounds)
    # Scaling divides by the half-width: it must be a normal float (no overflow of
    # upper - lower, no subnormal that would blow a quotient up to inf).
    half_width = upper / 2 - lower / 2
    if not (np.isfinite(half_width).all() and (half_width >= np.finfo(np.float64).tiny).all()):
        raise InvalidParameter.for_parameter(
            name, owner, f"{expected}, with (upper - lower) / 2 a normal float", bounds
        )
    return lower, upper


def check_scalar_bounds(bounds: Any, owner: str, name: str) -> tuple[float, float]:
    """A pair of finite floats ``lower < upper``."""
    lower, upper = check_bounds(bounds, 1, owner, name)
    return float(lower[0]), float(upper[0])


def check_privacy(
    epsilon: Any, delta: Any, owner: str, *, allow_zero_delta: bool
) -> tuple[float, float]:
    """Validated ``(epsilon, delta)``."""
    eps = check.check_epsilon(epsilon, owner)
    dlt = check.check_delta(delta, owner, allow_zero=allow_zero_delta)
    return eps, dlt


def grid_step(bound: float) -> float:
    """The fixed-point step for values of magnitude at most ``bound``: a power of two,
    ``2^-FRACTION_BITS`` of the smallest power of two >= ``bound``."""
    exponent = math.frexp(bound)[1]  # bound <= 2^exponent
    return math.ldexp(1.0, exponent - FRACTION_BITS)


def exact_column_sums(values: FloatArray, steps: FloatArray) -> FloatArray:
    """Column sums of ``values`` after rounding each to its column's grid, exactly.

    Each value is rounded to the nearest multiple of its column's ``step`` (a power of
    two) and the integer multiples are added in int64. If every ``|value| <= B_j`` with
    ``steps[j] = grid_step(B_j)``, a rounded value is at most ``B_j + steps[j] / 2`` in
    magnitude and below ``2^(FRACTION_BITS+1)`` steps; with fewer than ``MAX_ROWS`` rows
    the integer sums stay below 2^53, so both the addition and the conversion back to
    float64 are exact. Removing a row therefore changes the result by exactly that
    row's rounded value: the sensitivity proofs of the models use that bound.
    """
    # Division by a power of two is exact (the values are far from the subnormal range
    # once clipped, and a subnormal quotient only rounds to 0 steps, within step / 2).
    multiples = np.rint(values / steps)
    # Integers below 2^53 in float64: every partial sum is an integer below 2^53, so the
    # float additions are exact in any order (NumPy's pairwise summation included).
    sums: FloatArray = multiples.sum(axis=0) * steps
    return sums


def exact_weighted_sums(matrix: FloatArray, weights: FloatArray, step: float) -> FloatArray:
    """``sum_i weights[i] * matrix[i]`` with each product rounded to the grid ``step``.

    The same exactness as :func:`exact_column_sums` (one step for every column) when
    every ``|weights[i] * matrix[i, j]|`` is at most the bound ``step`` was made for:
    the row scaling and the division by the power of two ``step`` are fused into one
    multiplication (exact up to the rounding of ``weights[i] / step`` itself, which
    the caller's bound must include -- it is within one ulp of the true product).
    """
    multiples = matrix * (weights / step)[:, None]
    np.rint(multiples, out=multiples)
    sums: FloatArray = multiples.sum(axis=0) * step
    return sums


def clip_rows_to_norm(values: FloatArray, norm: float) -> FloatArray:
    """Rows scaled down (never up) to L2 norm at most ``norm``.

    The scaling factor is computed so that the float result's norm does not exceed
    ``norm`` by more than a few ulps; callers add the fixed-point rounding slack anyway.
    """
    norms = np.sqrt(np.einsum("ij,ij->i", values, values))
    # Clip to a hair below the norm so that rounding in the product cannot exceed it.
    target = norm * (1.0 - 2.0**-40)
    factor = np.minimum(1.0, target / np.maximum(norms, np.finfo(np.float64).tiny))
    clipped: FloatArray = values * factor[:, None]
    return clipped


def norm_slack(features: int, step: float) -> float:
    """How much fixed-point rounding can add to a vector's L2 norm: sqrt(d) step / 2,
    rounded up."""
    return math.sqrt(features) * step / 2 * (1 + 2.0**-40)


class DPModelMixin:
    """The privacy record of a fitted model: ``event`` and ``guarantee``.

    Each call to ``fit`` runs a new DP computation on its data; the attributes describe
    the latest one. Compose the events of every fit on the same people (a scaler and a
    model in one pipeline, say) with an accountant.
    """

    event_: Event
    guarantee_: Guarantee
    n_features_in_: int

    @property
    def event(self) -> Event:
        """What the last ``fit`` did, for an accountant."""
        try:
            return self.event_
        except AttributeError:
            raise NotFittedError(
                f"This {type(self).__name__} is not fitted yet: call fit first."
            ) from None

    def _fitted_features(self, X: Any, owner: str) -> FloatArray:
        """``X`` for prediction: the model must be fitted and ``X`` as wide as in fit.

        Prediction is post-processing of the released model on the caller's data, so
        these checks may raise (unlike ``fit``, whose success must not depend on a row).
        """
        self.event  # noqa: B018 -- raises NotFittedError before fit
        features = check_features(X, owner)
        fitted = self.n_features_in_
        if features.shape[1] != fitted:
            raise DataError(
                f"{owner}: X has {features.shape[1]} features; the model was fitted on {fitted}."
            )
        return features

    @property
    def guarantee(self) -> Guarantee:
        """The privacy guarantee of the last ``fit`` (add/remove one row)."""
        try:
            return self.guarantee_
        except AttributeError:
            raise NotFittedError(
                f"This {type(self).__name__} is not fitted yet: call fit first."
            ) from None
