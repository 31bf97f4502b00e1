"""The black-box auditor: validity (never above the true epsilon too often), power, bad input."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from scipy import stats

import dpkit as dp
from dpkit.accounting._math.gaussian import gaussian_epsilon
from dpkit.audit import audit
from dpkit.errors import DataError, DPError, InvalidParameter
from dpkit.random import Random
from dpkit.testing import seeded

RR = dp.RandomizedResponse(epsilon=1.0)
# dpkit's flip probability is rounded up, so its exact epsilon is a hair below 1.
RR_TRUE_EPSILON = math.log(RR.truth_probability / (1 - RR.truth_probability))
LAPLACE = dp.Laplace.calibrate(epsilon=1.0)
GAUSSIAN = dp.Gaussian.calibrate(epsilon=1.0, delta=1e-3)


def rr(x: Any, n: int, rng: Random) -> npt.NDArray[Any]:
    return np.asarray(RR.release(np.full(n, bool(x)), rng=rng).value)


def laplace(x: Any, n: int, rng: Random) -> npt.NDArray[Any]:
    return np.asarray(LAPLACE.release(np.full(n, float(x)), rng=rng).value)


def gaussian(x: Any, n: int, rng: Random) -> npt.NDArray[Any]:
    return np.asarray(GAUSSIAN.release(np.full(n, float(x)), rng=rng).value)


def _allowed_exceedances(repetitions: int, confidence: float) -> int:
    # Each audit exceeds the true epsilon with probability <= 1 - confidence, so the
    # count is stochastically below Binomial(reps, 1 - confidence); fail at 1e-6.
    return int(stats.binom.isf(1e-6, repetitions, 1 - confidence))


VALIDITY = [
    pytest.param(rr, True, False, 0.0, RR_TRUE_EPSILON, "threshold", 2000, id="rr"),
    pytest.param(laplace, 0.0, 1.0, 0.0, 1.0, "threshold", 2000, id="laplace"),
    pytest.param(laplace, 0.0, 1.0, 0.0, 1.0, "histogram", 2000, id="laplace-hist"),
    pytest.param(
        gaussian,
        0.0,
        1.0,
        1e-3,
        gaussian_epsilon(GAUSSIAN.sigma, 1e-3),
        "threshold",
        2000,
        id="gaussian",
    ),
]


@pytest.mark.parametrize(("mech", "x", "xp", "delta", "true_eps", "attack", "n"), VALIDITY)
@pytest.mark.parametrize("confidence", [0.5, 0.95])
def test_validity_over_repetitions(
    mech: Any,
    x: Any,
    xp: Any,
    delta: float,
    true_eps: float,
    attack: str,
    n: int,
    confidence: float,
) -> None:
    reps = 50
    stream = seeded(11)
    bounds = [
        audit(
            mech, x, xp, delta=delta, confidence=confidence, samples=n, attack=attack, rng=child
        ).epsilon_lower_bound
        for child in stream.spawn(reps)
    ]
    exceed = sum(b > true_eps for b in bounds)
    assert exceed <= _allowed_exceedances(reps, confidence)
    assert max(bounds) > 0  # the audits are not vacuous


@pytest.mark.slow
@pytest.mark.parametrize(("mech", "x", "xp", "delta", "true_eps", "attack", "n"), VALIDITY)
def test_validity_100_repetitions_large(
    mech: Any, x: Any, xp: Any, delta: float, true_eps: float, attack: str, n: int
) -> None:
    reps, confidence = 100, 0.9
    bounds = [
        audit(
            mech,
            x,
            xp,
            delta=delta,
            confidence=confidence,
            samples=100 * n,
            attack=attack,
            rng=child,
        ).epsilon_lower_bound
        for child in seeded(12).spawn(reps)
    ]
    assert sum(b > true_eps for b in bounds) <= _allowed_exceedances(reps, confidence)


def test_power_randomized_response_million_samples() -> None:
    result = audit(rr, True, False, samples=10**6, rng=seeded(1))
    assert result.epsilon_lower_bound >= 0.9  # measured: 0.993
    assert result.epsilon_lower_bound <= RR_TRUE_EPSILON
    assert not result.refutes(1.0) and result.refutes(0.5)


def test_bonferroni_with_fixed_thresholds() -> None:
    result = audit(
        laplace,
        0.0,
        1.0,
        samples=50_000,
        correction="bonferroni",
        thresholds=[-1.0, 0.0, 0.5, 1.0, 2.0],
        rng=seeded(3),
    )
    assert 0.8 < result.epsilon_lower_bound <= 1.0
    assert result.correction == "bonferroni" and result.threshold in (-1.0, 0.0, 0.5, 1.0, 2.0)


def test_trained_attack() -> None:
    def fit(out_x: npt.NDArray[Any], out_xp: npt.NDArray[Any]) -> Any:
        middle = (np.median(out_x) + np.median(out_xp)) / 2
        return lambda y: -np.abs(np.asarray(y, dtype=float) - middle)

    result = audit(laplace, 0.0, 1.0, samples=20_000, attack=fit, rng=seeded(4))
    assert result.attack == "fit" and 0 <= result.epsilon_lower_bound <= 1.0


def test_vector_outputs_with_histogram() -> None:
    def pair(x: Any, n: int, rng: Random) -> npt.NDArray[Any]:
        return np.stack([rr(x, n, rng), rr(x, n, rng)], axis=1)

    result = audit(pair, True, False, samples=100_000, attack="histogram", rng=seeded(5))
    # Two independent answers compose to 2 * epsilon.
    assert 1.5 < result.epsilon_lower_bound <= 2 * RR_TRUE_EPSILON


def _wrong_shape(x: Any, n: int, rng: Random) -> npt.NDArray[Any]:
    return np.zeros(n + 1)


def _nan(x: Any, n: int, rng: Random) -> npt.NDArray[Any]:
    out = np.zeros(n)
    out[0] = math.nan
    return out


def _strings(x: Any, n: int, rng: Random) -> npt.NDArray[Any]:
    return np.array(["a"] * n)


@pytest.mark.parametrize(
    ("mech", "kwargs", "error"),
    [
        (_wrong_shape, {}, DataError),
        (_nan, {}, DataError),
        (_strings, {}, DataError),
        (laplace, {"delta": 1.0}, InvalidParameter),
        (laplace, {"delta": -0.1}, InvalidParameter),
        (laplace, {"confidence": 1.0}, InvalidParameter),
        (laplace, {"confidence": 0.0}, InvalidParameter),
        (laplace, {"samples": 1}, InvalidParameter),
        (laplace, {"attack": "magic"}, InvalidParameter),
        (laplace, {"correction": "bonferroni"}, InvalidParameter),
        (laplace, {"correction": "none"}, InvalidParameter),
        (laplace, {"attack": lambda a, b: lambda y: np.zeros(3)}, DataError),
    ],
    ids=[
        "shape",
        "nan",
        "strings",
        "delta1",
        "delta<0",
        "conf1",
        "conf0",
        "samples",
        "attack",
        "bonferroni-no-thresholds",
        "correction",
        "bad-scores",
    ],
)
def test_bad_input(mech: Any, kwargs: dict[str, Any], error: type[DPError]) -> None:
    with pytest.raises(error):
        audit(mech, 0.0, 1.0, rng=seeded(0), **{"samples": 100, **kwargs})
