"""Calibrated additive-noise and local mechanisms.

Each mechanism is a class built from public parameters (``Laplace(scale=...)`` or
``Laplace.calibrate(epsilon=...)``) with ``.event``, ``.guarantee`` and
``.release(value, *, rng=None) -> Release``, plus a one-call function wrapper
(``dp.laplace(value, epsilon=...)``).
"""

from dpkit.mechanisms._base import (
    Accuracy,
    DownSensitivityBound,
    ErrorBound,
    FailureBound,
    Mechanism,
    RankErrorBound,
    Release,
)
from dpkit.mechanisms.accuracy import accuracy_to_scale, scale_to_accuracy
from dpkit.mechanisms.gaussian import DiscreteGaussian, Gaussian, discrete_gaussian, gaussian
from dpkit.mechanisms.laplace import DiscreteLaplace, Laplace, discrete_laplace, laplace
from dpkit.mechanisms.randomized_response import RandomizedResponse, randomized_response
from dpkit.mechanisms.subsampled_laplace import SubsampledLaplace, subsampled_laplace
from dpkit.mechanisms.truncated_laplace import (
    TruncatedLaplace,
    truncated_laplace,
    truncated_laplace_delta,
)

__all__ = [
    "Accuracy",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "DownSensitivityBound",
    "ErrorBound",
    "FailureBound",
    "Gaussian",
    "Laplace",
    "Mechanism",
    "RandomizedResponse",
    "RankErrorBound",
    "Release",
    "SubsampledLaplace",
    "TruncatedLaplace",
    "accuracy_to_scale",
    "discrete_gaussian",
    "discrete_laplace",
    "gaussian",
    "laplace",
    "randomized_response",
    "scale_to_accuracy",
    "subsampled_laplace",
    "truncated_laplace",
    "truncated_laplace_delta",
]
