"""Noisy count, sums and sums of squares of features scaled to [-1, 1]: the statistics
of naive Bayes and of the standard scaler.

A row contributes 1 to the count, ``z_j`` to the sum and ``z_j^2 - 1/2`` to the
(centred) sum of squares of each feature ``j``, with ``|z_j| <= 1``. After fixed-point
rounding (``_base.exact_column_sums``) these are at most ``1 + s/2``, ``1 + s/2`` and
``1/2 + s/2`` in magnitude (``s`` the grid step), so with Laplace scales ``b_n``,
``b_1`` and ``b_2`` the release is epsilon-DP with
``epsilon = 1/b_n + d (1 + s/2)/b_1 + d (1/2 + s/2)/b_2`` (Laplace mechanism, Dwork et
al. 2006, on each block; basic composition). The scales are set from the shares of
epsilon so that this sum is at most epsilon (each term rounded up).

Other noises (``noise=`` of :class:`~dpkit.learn.GaussianNB`, see
:mod:`dpkit.learn._noise`) are calibrated per scalar statistic instead: the count gets
``(share_n eps, share_n delta)``, each of the ``d`` sums ``(share_1 eps / d, share_1
delta / d)`` and each sum of squares ``(share_2 eps / d, share_2 delta / d)``, with the
sensitivities ``1``, ``1 + s/2`` and ``1/2 + s/2`` above; by basic composition the
``1 + 2d`` releases are (eps, delta)-DP (each share rounded down first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dpkit import noise
from dpkit.accounting._math.rounding import up
from dpkit.accounting.events import ComposedEvent, Event, RepeatedEvent
from dpkit.learn._base import FloatArray, exact_column_sums, grid_step, laplace_for
from dpkit.random import Random

if TYPE_CHECKING:
    from dpkit.design import NoiseDesign
    from dpkit.learn._noise import ScalarNoise

#: Default split of epsilon between the count, the sums and the sums of squares.
DEFAULT_SHARES = (0.1, 0.45, 0.45)


@dataclass(frozen=True)
class Moments:
    """Noisy ``count``, per-feature ``sums`` of z and ``squares`` (sums of z^2)."""

    count: float
    sums: FloatArray
    squares: FloatArray


@dataclass(frozen=True)
class MomentScales:
    """Laplace scales of the three blocks and the event they add up to."""

    count: float
    sums: float
    squares: float
    event: Event


def moment_scales(
    epsilon: float, features: int, shares: tuple[float, float, float]
) -> MomentScales:
    """Scales meeting ``epsilon`` in total for ``features`` columns (see module docstring)."""
    step = grid_step(1.0)
    count_share, sum_share, square_share = (s / sum(shares) for s in shares)
    # Sensitivities of the blocks (L1), rounding slack included, rounded up.
    sum_sensitivity = up(features * (1.0 + step / 2), 4)
    square_sensitivity = up(features * (0.5 + step / 2), 4)
    # Each block's epsilon is its share, rounded down by a margin far above the
    # rounding of the shares, so the three (each rounded up by the event) sum to <= eps.
    budget = epsilon * (1 - 2.0**-20)
    count_scale, count_event = laplace_for(1.0, budget * count_share)
    sum_scale, sum_event = laplace_for(sum_sensitivity, budget * sum_share)
    square_scale, square_event = laplace_for(square_sensitivity, budget * square_share)
    event = ComposedEvent((count_event, sum_event, square_event))
    return MomentScales(count_scale, sum_scale, square_scale, event)


def noisy_moments(z: FloatArray, scales: MomentScales, rng: Random) -> Moments:
    """Release the count, sums and centred sums of squares of ``z`` (values in [-1, 1])."""
    features = z.shape[1]
    steps = np.full(features, grid_step(1.0))
    count = float(noise.laplace(float(z.shape[0]), scale=scales.count, rng=rng))
    if z.shape[0] == 0:
        sums = np.zeros(features)
        squares = np.zeros(features)
    else:
        sums = exact_column_sums(z, steps)
        squares = exact_column_sums(z * z - 0.5, steps)
    noisy_sums = np.asarray(noise.laplace(sums, scale=scales.sums, rng=rng), dtype=np.float64)
    noisy_squares = np.asarray(
        noise.laplace(squares, scale=scales.squares, rng=rng), dtype=np.float64
    )
    # Undo the centring of the squares: sum z^2 = sum (z^2 - 1/2) + count / 2 (the noisy
    # count: post-processing only).
    return Moments(count, noisy_sums, noisy_squares + 0.5 * count)


def mean_and_variance(
    moments: Moments, scales: MomentScales, min_count: float = 1.0
) -> tuple[FloatArray, FloatArray]:
    """Means in [-1, 1] and variances in [0, 1] from noisy moments (post-processing).

    A variance is floored at the standard deviation of its own noise,
    ``sqrt(2) b_2 / count`` (Laplace scale ``b_2`` of the sums of squares): a smaller
    value is indistinguishable from noise, and a near-zero variance would make a
    Gaussian likelihood absurdly confident. Uses only released values and public scales.
    """
    return floored_mean_and_variance(moments, math.sqrt(2.0) * scales.squares, min_count)


def floored_mean_and_variance(
    moments: Moments, squares_deviation: float, min_count: float = 1.0
) -> tuple[FloatArray, FloatArray]:
    """:func:`mean_and_variance` for any noise: the variance floor is the standard
    deviation ``squares_deviation`` of the noise of a sum of squares, over the count."""
    count = max(moments.count, min_count)
    mean = np.clip(moments.sums / count, -1.0, 1.0)
    second = np.clip(moments.squares / count, 0.0, 1.0)
    floor = min(1.0, squares_deviation / count)
    variance = np.clip(second - mean * mean, floor, 1.0)
    return mean, variance


@dataclass(frozen=True)
class MomentNoise:
    """Per-statistic noises of the count, each sum and each sum of squares, and the
    event of one class's ``1 + 2d`` releases."""

    count: ScalarNoise
    sums: ScalarNoise
    squares: ScalarNoise
    event: Event


def statistic_budgets(
    epsilon: float, delta: float, features: int, shares: tuple[float, float, float]
) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
    """``(epsilon_i, delta_i)`` of the count, of each sum and of each sum of squares.

    Basic composition: ``e_n + d e_1 + d e_2 <= epsilon`` (and the same for delta). The
    budget is first lowered by a relative 2^-20, far more than the rounding of the
    shares and of the divisions, so the float sum never exceeds the target.
    """
    count_share, sum_share, square_share = (s / sum(shares) for s in shares)
    eps = epsilon * (1 - 2.0**-20)
    dlt = delta * (1 - 2.0**-20)
    return (
        (eps * count_share, dlt * count_share),
        (eps * sum_share / features, dlt * sum_share / features),
        (eps * square_share / features, dlt * square_share / features),
    )


def moment_noise(
    kind: str | NoiseDesign,
    epsilon: float,
    delta: float,
    features: int,
    shares: tuple[float, float, float],
    owner: str,
) -> MomentNoise:
    """Calibrate the three noises (nothing drawn; raises before any spend)."""
    from dpkit.learn._noise import scalar_noise

    step = grid_step(1.0)
    # Per-statistic sensitivities with the fixed-point slack (module docstring), rounded up.
    sensitivities = (1.0, up(1.0 + step / 2, 4), up(0.5 + step / 2, 4))
    budgets = statistic_budgets(epsilon, delta, features, shares)
    count, sums, squares = (
        scalar_noise(kind, epsilon=e, delta=d, sensitivity=s, owner=owner)
        for (e, d), s in zip(budgets, sensitivities, strict=True)
    )
    event = ComposedEvent(
        (count.event, RepeatedEvent(sums.event, features), RepeatedEvent(squares.event, features))
    )
    return MomentNoise(count, sums, squares, event)


def noisy_moments_with(z: FloatArray, noises: MomentNoise, rng: Random) -> Moments:
    """:func:`noisy_moments` with per-statistic noises (values of ``z`` in [-1, 1])."""
    features = z.shape[1]
    steps = np.full(features, grid_step(1.0))
    count = float(noises.count.release(np.array([float(z.shape[0])]), rng)[0])
    if z.shape[0] == 0:
        sums = np.zeros(features)
        squares = np.zeros(features)
    else:
        sums = exact_column_sums(z, steps)
        squares = exact_column_sums(z * z - 0.5, steps)
    noisy_sums = noises.sums.release(sums, rng)
    noisy_squares = noises.squares.release(squares, rng)
    return Moments(count, noisy_sums, noisy_squares + 0.5 * count)
