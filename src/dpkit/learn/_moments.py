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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpkit import noise
from dpkit.accounting._math.rounding import up
from dpkit.accounting.events import ComposedEvent, Event
from dpkit.learn._base import FloatArray, exact_column_sums, grid_step, laplace_for
from dpkit.random import Random

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
    count = max(moments.count, min_count)
    mean = np.clip(moments.sums / count, -1.0, 1.0)
    second = np.clip(moments.squares / count, 0.0, 1.0)
    floor = min(1.0, math.sqrt(2.0) * scales.squares / count)
    variance = np.clip(second - mean * mean, floor, 1.0)
    return mean, variance
