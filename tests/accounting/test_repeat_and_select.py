"""RepeatAndSelectEvent: validation, serialisation, basic (pure / zCDP) guarantees."""

from __future__ import annotations

import json
import math

import pytest

from dpkit.accounting import (
    GaussianEvent,
    PureEvent,
    RepeatAndSelectEvent,
    event_from_dict,
    pure_epsilon,
)
from dpkit.errors import InvalidParameter


@pytest.mark.parametrize("shape", [0.0, 0.5, 1.0, 2.0, math.inf])
def test_round_trip_through_json(shape: float) -> None:
    event = RepeatAndSelectEvent(GaussianEvent(2.0), mean=7.5, shape=shape)
    data = json.loads(json.dumps(event.to_dict(), allow_nan=False))
    assert event_from_dict(data) == event


def test_fields_are_canonical_floats() -> None:
    event = RepeatAndSelectEvent(PureEvent(1.0), mean=3, shape=1)
    assert type(event.mean) is float and type(event.shape) is float
    assert RepeatAndSelectEvent(PureEvent(1.0), mean=3, shape="inf").is_poisson


@pytest.mark.parametrize(
    ("mean", "shape"),
    [
        (0.0, 1.0),
        (-1.0, 1.0),
        (0.5, 1.0),  # E[K] >= 1 (dp_accounting's rule)
        (math.nan, 1.0),
        (math.inf, 1.0),
        (True, 1.0),
        ("3", 1.0),
        (3.0, -0.5),
        (3.0, math.nan),
        (3.0, -math.inf),
        (3.0, False),
        (3.0, "geometric"),
    ],
)
def test_bad_parameters(mean: object, shape: object) -> None:
    with pytest.raises(InvalidParameter):
        RepeatAndSelectEvent(PureEvent(1.0), mean=mean, shape=shape)  # type: ignore[arg-type]


def test_non_event() -> None:
    with pytest.raises(InvalidParameter):
        RepeatAndSelectEvent(1.0, mean=3.0, shape=1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize(("shape", "factor"), [(0.0, 2.0), (1.0, 3.0), (0.5, 2.5), (3.0, 5.0)])
def test_pure_epsilon_corollary_3(shape: float, factor: float) -> None:
    event = RepeatAndSelectEvent(PureEvent(0.7), mean=20.0, shape=shape)
    eps = pure_epsilon(event)
    assert eps is not None and eps >= factor * 0.7 and eps == pytest.approx(factor * 0.7)


def test_no_pure_epsilon_for_poisson_or_non_pure_candidate() -> None:
    assert pure_epsilon(RepeatAndSelectEvent(PureEvent(1.0), mean=5.0, shape=math.inf)) is None
    assert pure_epsilon(RepeatAndSelectEvent(GaussianEvent(1.0), mean=5.0, shape=1.0)) is None
