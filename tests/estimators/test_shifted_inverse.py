"""dp.shifted_inverse_sensitivity, the generic API: losses as arrays or callables, the two
methods, tau of the exponential version, sentinels and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpkit as dp
from dpkit.accounting.events import ExponentialMechanismEvent, RepeatedEvent
from dpkit.errors import DataError, InvalidParameter
from dpkit.estimators.shifted_inverse import exponential_threshold
from dpkit.mechanisms import DownSensitivityBound
from dpkit.testing import seeded

DATA = np.array([3.0, 7.0, 7.0, 9.0, 12.0, 15.0, 15.0, 20.0] * 10)
CANDIDATES = np.concatenate(([-np.inf], np.arange(0.0, 31.0)))


def loss(y: float) -> int:
    return math.inf if y < 0 else int(np.sum(y < DATA))  # type: ignore[return-value]


def strict(y: float) -> int:
    return math.inf if y <= 0 else int(np.sum(y <= DATA))  # type: ignore[return-value]


@pytest.mark.parametrize("form", ["callable", "array"])
@pytest.mark.parametrize("budget", [{"epsilon": 1.0}, {"rho": 0.5}], ids=["eps", "rho"])
def test_binary_search_forms_agree(form: str, budget: dict[str, float]) -> None:
    given = loss if form == "callable" else np.array([loss(y) for y in CANDIDATES], dtype=float)
    release = dp.shifted_inverse_sensitivity(CANDIDATES, given, rng=seeded(1), **budget)  # type: ignore[arg-type]
    reference = dp.shifted_inverse_sensitivity(CANDIDATES, loss, rng=seeded(1), **budget)  # type: ignore[arg-type]
    assert release.value == reference.value
    assert isinstance(release.error, DownSensitivityBound)
    assert isinstance(release.event, RepeatedEvent)
    assert release.event.count == math.ceil(math.log2(CANDIDATES.size - 1))
    assert release.value <= 20.0


def test_exponential_method() -> None:
    release = dp.shifted_inverse_sensitivity(
        CANDIDATES, loss, strict, epsilon=2.0, method="exponential", rng=seeded(2)
    )
    assert release.event == ExponentialMechanismEvent(2.0)
    assert release.guarantee == dp.PureDP(2.0)
    tau, _ = exponential_threshold(CANDIDATES.size - 1, 2.0, 0.05)
    assert release.error == DownSensitivityBound(2 * tau - 1, release.error.confidence)  # type: ignore[union-attr]
    assert release.error.confidence >= 0.95  # type: ignore[union-attr]


@pytest.mark.parametrize("n", [2, 10, 1000, 10**6], ids=str)
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 5.0], ids=str)
def test_exponential_tau_meets_beta_and_the_post(n: int, epsilon: float) -> None:
    beta = 0.05
    tau, c = exponential_threshold(n, epsilon, beta)
    assert c <= epsilon / 2
    assert (n - 1 if n > 1 else 1) * math.exp(-c * tau) <= beta
    assert tau <= math.ceil(2 / epsilon * math.log(n / beta)) + 1  # never worse than the post


def test_top_sentinel_is_returned_when_data_is_there() -> None:
    top = np.array([-np.inf, 0.0, 1.0, 2.0, 3.0])
    losses = np.array([np.inf, 1000.0, 1000.0, 1000.0, 0.0])  # 1000 persons at the top
    for seed in range(5):
        assert (
            dp.shifted_inverse_sensitivity(top, losses, epsilon=1.0, rng=seeded(seed)).value == 3.0
        )


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"candidates": [1.0]}, InvalidParameter),
        ({"candidates": [2.0, 1.0, 3.0]}, InvalidParameter),
        ({"candidates": [0.0, np.inf]}, InvalidParameter),
        ({"candidates": [0.0, np.nan, 2.0]}, InvalidParameter),
        ({"loss": np.zeros(3)}, InvalidParameter),
        ({"loss": np.full(32, 0.5)}, DataError),
        ({"method": "exponential"}, InvalidParameter),
        ({"method": "median"}, InvalidParameter),
    ],
    ids=[
        "one",
        "unsorted",
        "inf-top",
        "nan",
        "loss-length",
        "loss-fraction",
        "no-strict",
        "method",
    ],
)
def test_bad_input(kwargs: dict[str, object], error: type[Exception]) -> None:
    args: dict[str, object] = {"candidates": CANDIDATES, "loss": loss, "epsilon": 1.0}
    args.update(kwargs)
    with pytest.raises(error):
        dp.shifted_inverse_sensitivity(**args, rng=seeded(0))  # type: ignore[arg-type]
