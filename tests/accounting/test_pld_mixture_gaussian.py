"""The mixture-of-Gaussians event in the PLD accountant (golden values: tests/golden)."""

from __future__ import annotations

import math

import pytest

from dpkit.accounting import (
    GaussianEvent,
    MixtureOfGaussiansEvent,
    PoissonSampledEvent,
    event_from_dict,
    gaussian_delta,
)
from dpkit.accounting.pld import PLDAccountant
from dpkit.errors import InvalidParameter


@pytest.mark.parametrize(("sigma", "q"), [(1.0, 0.1), (0.3, 1e-6)])  # 1e-6: a flat loss
def test_two_components_are_the_poisson_subsampled_gaussian(sigma: float, q: float) -> None:
    mog = PLDAccountant().compose(MixtureOfGaussiansEvent(sigma, (0.0, 1.0), (1 - q, q)))
    poisson = PLDAccountant().compose(PoissonSampledEvent(GaussianEvent(sigma), q))
    for eps in (0.5, 1.0, 2.0):
        assert mog.get_delta(eps) == pytest.approx(poisson.get_delta(eps), rel=3e-3)


def test_one_component_is_the_gaussian() -> None:
    got = PLDAccountant().compose(MixtureOfGaussiansEvent(2.0, (1.0,), (1.0,)), count=4)
    exact = gaussian_delta(1.0, 0.5)  # four runs of sigma 2: one run of sigma 1
    assert exact <= got.get_delta(0.5) <= exact * 1.001
    # Power: sigma 30% off is rejected by the same two-sided check.
    for wrong in (0.7, 1.3):
        other = gaussian_delta(wrong, 0.5)
        assert not other <= got.get_delta(0.5) <= other * 1.001


def test_all_shifts_zero_reveal_nothing() -> None:
    accountant = PLDAccountant().compose(MixtureOfGaussiansEvent(1.0, (0.0, 0.0), (0.5, 0.5)))
    assert accountant.get_delta(0.0) <= 1e-12


def test_supports_and_round_trip() -> None:
    event = MixtureOfGaussiansEvent(1.5, (0.0, 1.0, 2.0), (0.2, 0.6, 0.2))
    assert event_from_dict(event.to_dict()) == event
    assert PLDAccountant().supports(event)
    assert not PLDAccountant(relation="replace").supports(event)
    many = MixtureOfGaussiansEvent(1.0, tuple(float(i) for i in range(65)), (1 / 65,) * 65)
    assert not PLDAccountant().supports(many)


@pytest.mark.parametrize(
    ("sigma", "shifts", "probs"),
    [
        (0.0, (1.0,), (1.0,)),
        (1.0, (), ()),
        (1.0, (1.0, 2.0), (1.0,)),
        (1.0, (-1.0,), (1.0,)),
        (1.0, (math.nan,), (1.0,)),
        (1.0, (1.0, 2.0), (0.5, 0.6)),
        (1.0, (1.0,), (1.5,)),
        (1.0, "12", (1.0,)),
    ],
    ids=["sigma0", "empty", "lengths", "negative", "nan", "sum", "p>1", "string"],
)
def test_bad_input(sigma: float, shifts: object, probs: object) -> None:
    with pytest.raises(InvalidParameter):
        MixtureOfGaussiansEvent(sigma, shifts, probs)  # type: ignore[arg-type]
