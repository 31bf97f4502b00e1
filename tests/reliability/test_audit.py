"""Black-box audit (``dpkit.audit``) of repeat-until-success on a bounded mean.

Neighbours: one of ``n`` values in [0, 1] replaced, 0 -> 1 (the mean moves by 1/n, the
base Laplace's full sensitivity). The audit's lower bound (confidence 1 - 1e-6) stays
within the computed ``(eps~, delta~)``; a planted calibration bug -- base noise 8 times
too small under the same claim -- is refuted with 4000 samples (10_000 under
``--runslow``, the honest audit's size; derivation at the test).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

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


def test_audit_within_the_guarantee() -> None:
    honest = _wrapper(1.0)
    claim = honest.guarantee
    result = audit(
        _outputs(honest), X, X_PRIME, delta=claim.delta, samples=10_000,
        confidence=1 - 1e-6, rng=seeded(3),
    )  # fmt: skip
    assert not result.refutes(claim.epsilon)


#: The planted bug's audit. Its releases are (nearly always accepted) Laplace draws of
#: scale b = 1 / (N EPS) / 8 = 0.0025 around the means 0 and 0.01 = 4 b, a true epsilon
#: near 4 against the wrapper's claimed eps~ = 2.0. The best threshold (about 0.009)
#: has FPR = 0.5 e^(-3.7) = 0.013 and FNR = 0.5 e^(-0.3) = 0.37; with 2000 estimation
#: draws per side (4000 samples) and Clopper-Pearson at 5e-7 per rate, the expected
#: counts give a bound of 2.99, and counts 4 standard deviations worse 2.53 > 2.0 (at
#: 1000 per side: 2.68 and 2.15, too close). The default audits 4000 samples;
#: --runslow also the original 10_000.
@pytest.mark.parametrize("samples", [4000, pytest.param(10_000, marks=pytest.mark.slow)])
def test_audit_catches_a_planted_bug(samples: int) -> None:
    claim = _wrapper(1.0).guarantee
    buggy = _wrapper(8.0)
    assert buggy.guarantee == claim
    caught = audit(
        _outputs(buggy), X, X_PRIME, delta=claim.delta, samples=samples,
        confidence=1 - 1e-6, rng=seeded(4),
    )  # fmt: skip
    assert caught.refutes(claim.epsilon)
