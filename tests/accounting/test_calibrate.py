"""calibrate, dpsgd_epsilon and dpsgd_noise_multiplier (dpkit.accounting.calibrate)."""

from __future__ import annotations

import importlib.util

import pytest

from dpkit.accounting import (
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureAccountant,
    RepeatedEvent,
)
from dpkit.accounting.calibrate import calibrate, dpsgd_epsilon, dpsgd_noise_multiplier
from dpkit.accounting.rdp import RDPAccountant
from dpkit.errors import InvalidParameter


def rdp_epsilon(event: object, delta: float) -> float:
    return RDPAccountant().compose(event).get_epsilon(delta)  # type: ignore[arg-type]


def test_gaussian_noise_is_safe_and_tight() -> None:
    sigma = calibrate(RDPAccountant, GaussianEvent, target_epsilon=1.0, target_delta=1e-5)
    assert rdp_epsilon(GaussianEvent(sigma), 1e-5) <= 1.0
    assert rdp_epsilon(GaussianEvent(sigma * (1 - 2e-6)), 1e-5) > 1.0


def test_laplace_noise_with_the_pure_accountant_is_exact() -> None:
    # PureAccountant: eps = 1/b, so the answer is b = 1/eps up to the tolerance, never below.
    b = calibrate(PureAccountant, LaplaceEvent, target_epsilon=0.5, target_delta=0.0)
    assert 2.0 <= b <= 2.0 * (1 + 1e-6)


def test_increasing_parameter_returns_the_largest_safe_value() -> None:
    def make(q: float) -> RepeatedEvent:
        return RepeatedEvent(PoissonSampledEvent(GaussianEvent(1.0), q), 100)

    q = calibrate(
        RDPAccountant,
        make,
        target_epsilon=1.0,
        target_delta=1e-5,
        bracket=(1e-4, 1.0),
        decreasing=False,
    )
    assert rdp_epsilon(make(q), 1e-5) <= 1.0
    assert rdp_epsilon(make(q * (1 + 2e-6)), 1e-5) > 1.0


def test_unreachable_target_raises_a_helpful_error() -> None:
    with pytest.raises(InvalidParameter, match=r"unreachable.*Widen the bracket"):
        calibrate(
            RDPAccountant, GaussianEvent, target_epsilon=0.01, target_delta=1e-10, bracket=(1, 10)
        )


def test_whole_bracket_meeting_the_target_returns_its_least_private_end() -> None:
    sigma = calibrate(
        RDPAccountant, GaussianEvent, target_epsilon=5.0, target_delta=1e-5, bracket=(10, 20)
    )
    assert 10.0 <= sigma <= 10.0 * (1 + 1e-6)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"target_epsilon": 0.0},
        {"target_epsilon": -1.0},
        {"target_delta": 1.0},
        {"bracket": (2.0, 1.0)},
        {"bracket": (1.0,)},
        {"bracket": (0.0, float("inf"))},
        {"tolerance": 0.0},
        {"tolerance": 1.5},
    ],
)
def test_calibrate_validates(kwargs: dict[str, object]) -> None:
    arguments: dict[str, object] = {"target_epsilon": 1.0, "target_delta": 1e-5, **kwargs}
    with pytest.raises(InvalidParameter):
        calibrate(RDPAccountant, GaussianEvent, **arguments)  # type: ignore[arg-type]


def test_dpsgd_epsilon_matches_the_accountant_and_beats_dp_accounting() -> None:
    epsilon = dpsgd_epsilon(sampling_probability=0.01, noise_multiplier=1.0, steps=1000, delta=1e-5)
    step = PoissonSampledEvent(GaussianEvent(1.0), 0.01)
    assert epsilon == RDPAccountant().compose(step, count=1000).get_epsilon(1e-5)
    assert epsilon <= 2.10137  # dp_accounting's RdpAccountant (accounting.md)


def test_dpsgd_noise_multiplier_never_overshoots() -> None:
    sigma = dpsgd_noise_multiplier(
        sampling_probability=0.01, steps=1000, target_epsilon=2.0, delta=1e-5
    )
    kwargs = {"sampling_probability": 0.01, "steps": 1000, "delta": 1e-5}
    assert dpsgd_epsilon(noise_multiplier=sigma, **kwargs) <= 2.0  # type: ignore[arg-type]
    assert dpsgd_epsilon(noise_multiplier=sigma * (1 - 2e-6), **kwargs) > 2.0  # type: ignore[arg-type]
    one = dpsgd_noise_multiplier(sampling_probability=1.0, steps=1, target_epsilon=1.0, delta=1e-5)
    assert one == calibrate(RDPAccountant, GaussianEvent, target_epsilon=1.0, target_delta=1e-5)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"sampling_probability": 0.0},
        {"sampling_probability": 1.5},
        {"noise_multiplier": 0.0},
        {"steps": 0},
        {"steps": 1.5},
        {"delta": 0.0},
        {"accountant": "moments"},
    ],
)
def test_dpsgd_epsilon_validates(kwargs: dict[str, object]) -> None:
    arguments: dict[str, object] = {
        "sampling_probability": 0.01,
        "noise_multiplier": 1.0,
        "steps": 10,
        "delta": 1e-5,
        **kwargs,
    }
    with pytest.raises(InvalidParameter):
        dpsgd_epsilon(**arguments)  # type: ignore[arg-type]


def test_dpsgd_noise_multiplier_unreachable() -> None:
    with pytest.raises(InvalidParameter, match="unreachable"):
        dpsgd_noise_multiplier(
            sampling_probability=1.0, steps=10**6, target_epsilon=1e-3, delta=1e-10
        )


needs_pld = pytest.mark.skipif(
    importlib.util.find_spec("dpkit.accounting.pld") is None,
    reason="dpkit.accounting.pld (PLDAccountant) is not there yet",
)
PLD_KWARGS: dict[str, float] = {"sampling_probability": 0.01, "steps": 100, "delta": 1e-5}


@needs_pld
def test_pld_epsilon_is_tighter_than_rdp() -> None:
    pld = dpsgd_epsilon(noise_multiplier=1.0, accountant="pld", **PLD_KWARGS)  # type: ignore[arg-type]
    rdp = dpsgd_epsilon(noise_multiplier=1.0, **PLD_KWARGS)  # type: ignore[arg-type]
    assert 0.0 < pld <= rdp


@needs_pld
def test_pld_noise_multiplier_never_overshoots() -> None:
    sigma = dpsgd_noise_multiplier(target_epsilon=1.0, accountant="pld", **PLD_KWARGS)  # type: ignore[arg-type]
    epsilon = dpsgd_epsilon(noise_multiplier=sigma, accountant="pld", **PLD_KWARGS)  # type: ignore[arg-type]
    assert epsilon <= 1.0
