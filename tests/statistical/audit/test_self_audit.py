"""dpkit audits itself: every shipped mechanism on adversarial neighbours, and planted bugs.

Each audit returns a lower bound on epsilon valid at 95% confidence; a shipped
mechanism must never be refuted (bound <= claimed epsilon), and each planted bug must
be (bound > claimed epsilon), which shows the auditor has power. Seeds are fixed, so
the outcomes are deterministic; the margins recorded below are far from the claims.
The ``slow`` variant repeats the shipped audits with 10x the samples.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import dpkit as dp
from dpkit import noise
from dpkit.audit import audit
from dpkit.random import Random
from dpkit.testing import seeded

Batch = Callable[[Any, int, Random], npt.NDArray[Any]]


def vectorised(mechanism: Any, dtype: Any = float) -> Batch:
    """n i.i.d. releases: the mechanism applied to n copies of the (scalar) input."""

    def draw(x: Any, n: int, rng: Random) -> npt.NDArray[Any]:
        return np.asarray(mechanism.release(np.full(n, x, dtype=dtype), rng=rng).value)

    return draw


def looped(mechanism: Any) -> Batch:
    """n independent releases of a selection mechanism (None -> -1)."""

    def draw(x: Any, n: int, rng: Random) -> npt.NDArray[Any]:
        values = [mechanism.release(x, rng=rng).value for _ in range(n)]
        return np.array([-1 if v is None else v for v in values], dtype=np.int64)

    return draw


@dataclass(frozen=True)
class Case:
    mechanism: Batch
    x: Any
    x_prime: Any
    epsilon: float
    delta: float
    attack: str
    samples: int


GAUSSIAN = dp.Gaussian.calibrate(epsilon=1.0, delta=1e-5)
DISCRETE_GAUSSIAN = dp.DiscreteGaussian.calibrate(rho=0.125)
DG_APPROX = DISCRETE_GAUSSIAN.guarantee.to_approx(1e-5)
TRUNCATED = dp.TruncatedLaplace.calibrate(epsilon=1.0, delta=1e-2)
# Adversarial scores: each moves by the sensitivity 1, in opposite directions.
SCORES, SCORES_PRIME = [0.0, 1.0], [1.0, 0.0]
# AboveThreshold: every one of 8 answers moves up by 1 (a run of "below" answers).
SVT_X, SVT_X_PRIME = [0.0] * 8, [1.0] * 8

SHIPPED = {
    "laplace": Case(
        vectorised(dp.Laplace.calibrate(epsilon=1.0)), 0.0, 1.0, 1.0, 0.0, "threshold", 200_000
    ),
    "gaussian": Case(vectorised(GAUSSIAN), 0.0, 1.0, 1.0, 1e-5, "threshold", 200_000),
    "discrete-laplace": Case(
        vectorised(dp.DiscreteLaplace.calibrate(epsilon=1.0), int),
        0,
        1,
        1.0,
        0.0,
        "histogram",
        200_000,
    ),
    "discrete-gaussian": Case(
        vectorised(DISCRETE_GAUSSIAN, int),
        0,
        1,
        DG_APPROX.epsilon,
        DG_APPROX.delta,
        "threshold",
        200_000,
    ),
    "randomized-response": Case(
        vectorised(dp.RandomizedResponse(epsilon=1.0), bool),
        True,
        False,
        1.0,
        0.0,
        "threshold",
        200_000,
    ),
    "truncated-laplace": Case(
        vectorised(TRUNCATED), 0.0, 1.0, 1.0, TRUNCATED.delta, "threshold", 200_000
    ),
    "exponential": Case(
        looped(dp.ExponentialMechanism(epsilon=1.0)),
        SCORES,
        SCORES_PRIME,
        1.0,
        0.0,
        "histogram",
        6000,
    ),
    "noisy-max-laplace": Case(
        looped(dp.ReportNoisyMax(epsilon=1.0, noise="laplace")),
        SCORES,
        SCORES_PRIME,
        1.0,
        0.0,
        "histogram",
        6000,
    ),
    "noisy-max-exponential": Case(
        looped(dp.ReportNoisyMax(epsilon=1.0, noise="exponential")),
        SCORES,
        SCORES_PRIME,
        1.0,
        0.0,
        "histogram",
        6000,
    ),
    "permute-and-flip": Case(
        looped(dp.PermuteAndFlip(epsilon=1.0)), SCORES, SCORES_PRIME, 1.0, 0.0, "histogram", 6000
    ),
    "sparse-vector": Case(
        looped(dp.SparseVector(epsilon=1.0, threshold=0.0)),
        SVT_X,
        SVT_X_PRIME,
        1.0,
        0.0,
        "histogram",
        6000,
    ),
}


@pytest.mark.parametrize("case", SHIPPED.values(), ids=SHIPPED.keys())
def test_shipped_mechanisms_are_not_refuted(case: Case) -> None:
    result = audit(
        case.mechanism,
        case.x,
        case.x_prime,
        delta=case.delta,
        samples=case.samples,
        attack=case.attack,
        confidence=0.95,
        rng=seeded(42),
    )
    assert not result.refutes(case.epsilon), result


@pytest.mark.slow
@pytest.mark.parametrize("case", SHIPPED.values(), ids=SHIPPED.keys())
def test_shipped_mechanisms_large(case: Case) -> None:
    result = audit(
        case.mechanism,
        case.x,
        case.x_prime,
        delta=case.delta,
        samples=10 * case.samples,
        attack=case.attack,
        rng=seeded(43),
    )
    assert not result.refutes(case.epsilon), result


# --- planted bugs ------------------------------------------------------------------


def half_noise_laplace(x: Any, n: int, rng: Random) -> npt.NDArray[Any]:
    """Claims epsilon = 1 but adds Laplace noise of scale 1/2 (a factor-2 slip)."""
    return np.asarray(noise.laplace(np.full(n, float(x)), scale=0.5, rng=rng))


# A support too small for the delta it claims: true delta 1e-2, claimed 1e-3.
SHORT_SUPPORT = dp.TruncatedLaplace.calibrate(epsilon=1.0, delta=1e-2)


def leaky_sparse_vector(x: Any, n: int, rng: Random) -> npt.NDArray[Any]:
    """AboveThreshold (epsilon = 1, threshold 0) that also publishes its noisy threshold.

    Outputs rows (index or -1, noisy threshold). Knowing the noisy threshold, every
    "below" answer leaks on its own (each is an epsilon/4-DP comparison), so eight of
    them cost up to 2 epsilon. Measured bound at 10^6 samples: 1.68 (estimate 1.97).
    """
    answers = np.asarray(x, dtype=float)
    k = answers.size
    mechanism = dp.SparseVector(epsilon=1.0, threshold=0.0)
    rho = np.asarray(noise.laplace(np.zeros(n), scale=mechanism.threshold_scale, rng=rng))
    nu = np.asarray(noise.laplace(np.zeros((n, k)), scale=mechanism.query_scale, rng=rng))
    above = answers + nu >= rho[:, None]
    index = np.where(above.any(axis=1), above.argmax(axis=1), -1)
    return np.stack([index.astype(float), rho], axis=1)


BUGS = {
    "half-noise-scale": (Case(half_noise_laplace, 0.0, 1.0, 1.0, 0.0, "threshold", 200_000), 1.5),
    "delta-10x-too-small": (
        Case(vectorised(SHORT_SUPPORT), 0.0, 1.0, 1.0, 1e-3, "threshold", 200_000),
        3.0,
    ),
    "svt-leaks-threshold": (
        Case(leaky_sparse_vector, SVT_X, SVT_X_PRIME, 1.0, 0.0, "histogram", 1_000_000),
        1.2,
    ),
}


@pytest.mark.parametrize(("case", "at_least"), BUGS.values(), ids=BUGS.keys())
def test_planted_bugs_are_caught(case: Case, at_least: float) -> None:
    result = audit(
        case.mechanism,
        case.x,
        case.x_prime,
        delta=case.delta,
        samples=case.samples,
        attack=case.attack,
        confidence=0.95,
        rng=seeded(7),
    )
    assert result.refutes(case.epsilon), result
    assert result.epsilon_lower_bound > at_least
