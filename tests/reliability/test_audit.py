"""Black-box audit (``dpkit.audit``) of repeat-until-success on a bounded mean.

Neighbours: one of ``n`` values in [0, 1] replaced, 0 -> 1 (the mean moves by 1/n, the
base Laplace's full sensitivity). The audit's lower bound (confidence 1 - 1e-6) stays
within the computed ``(eps~, delta~)``; a planted calibration bug -- base noise 8 times
too small under the same claim -- is refuted at the same sample size.
"""

from __future__ import annotations

import math

import numpy as np

import dpkit as dp
from dpkit.audit import audit
from dpkit.reliability import RepeatUntilSuccess
from dpkit.testing import seeded

N, EPS, BETA = 100, 0.5, 0.05
X = np.zeros(N)
X_PRIME = np.concatenate([[1.0], np.zeros(N - 1)])


def _wrapper(noise_divisor: float) -> RepeatUntilSuccess:
    def mean(data: np.ndarray, rng: dp.Random) -> float:
        scale = 1 / (N * EPS) / noise_divisor
        return float(dp.noise.laplace(float(data.mean()), scale=scale, rng=rng))

    return RepeatUntilSuccess(
        mean,
        loss=lambda y, data: N * abs(y - float(data.mean())),
        alpha=math.log(1 / BETA) / EPS,
        failure_probability=BETA,
        guarantee=dp.PureDP(EPS),  # the claim (false for noise_divisor > 1)
        loss_guarantee=dp.ApproxDP(EPS, 1e-6),
    )


def _outputs(wrapper: RepeatUntilSuccess):  # type: ignore[no-untyped-def]
    def mechanism(data: np.ndarray, n: int, rng: dp.Random) -> np.ndarray:
        return np.array([wrapper.release(data, rng=rng).value for _ in range(n)])

    return mechanism


def test_audit_within_the_guarantee_and_catches_a_planted_bug() -> None:
    honest = _wrapper(1.0)
    claim = honest.guarantee
    result = audit(
        _outputs(honest), X, X_PRIME, delta=claim.delta, samples=10_000,
        confidence=1 - 1e-6, rng=seeded(3),
    )  # fmt: skip
    assert not result.refutes(claim.epsilon)
    buggy = _wrapper(8.0)
    assert buggy.guarantee == claim
    caught = audit(
        _outputs(buggy), X, X_PRIME, delta=claim.delta, samples=10_000,
        confidence=1 - 1e-6, rng=seeded(4),
    )  # fmt: skip
    assert caught.refutes(claim.epsilon)
