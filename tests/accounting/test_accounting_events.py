"""Unit tests for dpkit.accounting events: validation, serialisation, stated costs."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pytest

from dpkit.accounting import (
    ApproxEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    PermuteAndFlipEvent,
    PureDP,
    PureEvent,
    RandomizedResponseEvent,
    RepeatedEvent,
    ReportNoisyMaxEvent,
    SparseVectorEvent,
    TruncatedLaplaceEvent,
    ZCDPEvent,
    event_from_dict,
    pure_epsilon,
    zcdp_rho,
)
from dpkit.errors import InvalidParameter

NAN = float("nan")
INF = float("inf")

EXAMPLES: list[Any] = [
    pytest.param(LaplaceEvent(2.0), id="laplace"),
    pytest.param(GaussianEvent(1.5), id="gaussian"),
    pytest.param(DiscreteLaplaceEvent(3.0, 2), id="discrete-laplace"),
    pytest.param(DiscreteGaussianEvent(4.0, 1), id="discrete-gaussian"),
    pytest.param(
        DiscreteGaussianEvent(4.0, math.sqrt(2.0), dimension=2), id="discrete-gaussian-2d"
    ),
    pytest.param(TruncatedLaplaceEvent(1.0, 1e-6), id="truncated-laplace"),
    pytest.param(RandomizedResponseEvent(1.0, 4), id="randomized-response"),
    pytest.param(ExponentialMechanismEvent(0.5), id="exponential"),
    pytest.param(PermuteAndFlipEvent(0.5), id="permute-and-flip"),
    pytest.param(ReportNoisyMaxEvent(0.5), id="report-noisy-max"),
    pytest.param(SparseVectorEvent(0.25), id="sparse-vector"),
    pytest.param(PureEvent(1.0), id="pure"),
    pytest.param(ApproxEvent(1.0, 1e-6), id="approx"),
    pytest.param(ZCDPEvent(0.1), id="zcdp"),
    pytest.param(NoOpEvent(), id="noop"),
    pytest.param(ComposedEvent((LaplaceEvent(1.0), GaussianEvent(2.0))), id="composed"),
    pytest.param(ComposedEvent(()), id="composed-empty"),
    pytest.param(RepeatedEvent(PureEvent(0.1), 10), id="repeated"),
    pytest.param(
        ComposedEvent((RepeatedEvent(ComposedEvent((NoOpEvent(), ZCDPEvent(0.5))), 3),)),
        id="nested",
    ),
]


@pytest.mark.parametrize("event", EXAMPLES)
def test_round_trip_through_json(event: Event) -> None:
    data = event.to_dict()
    assert data["type"] == type(event).__name__
    text = json.dumps(data, allow_nan=False)
    rebuilt = event_from_dict(json.loads(text))
    assert rebuilt == event
    assert type(rebuilt) is type(event)


@pytest.mark.parametrize("event", EXAMPLES)
def test_events_are_frozen_and_hashable(event: Event) -> None:
    hash(event)
    for field in dataclasses.fields(event):  # type: ignore[arg-type]
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(event, field.name, 1)
    # Slotted: no new attributes either (Python 3.11 raises TypeError here, later
    # versions FrozenInstanceError/AttributeError).
    with pytest.raises((AttributeError, TypeError)):
        event.anything = 1  # type: ignore[attr-defined]


def test_to_dict_layout() -> None:
    event = RepeatedEvent(ComposedEvent([LaplaceEvent(1)]), 2)
    assert event.to_dict() == {
        "type": "RepeatedEvent",
        "event": {
            "type": "ComposedEvent",
            "events": [{"type": "LaplaceEvent", "noise_multiplier": 1.0}],
        },
        "count": 2,
    }


def test_lists_are_normalised_to_tuples() -> None:
    assert ComposedEvent([NoOpEvent()]) == ComposedEvent((NoOpEvent(),))


def test_event_is_abstract() -> None:
    with pytest.raises(TypeError):
        Event()


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: LaplaceEvent(0.0), id="laplace-zero"),
        pytest.param(lambda: LaplaceEvent(-1.0), id="laplace-negative"),
        pytest.param(lambda: LaplaceEvent(NAN), id="laplace-nan"),
        pytest.param(lambda: LaplaceEvent(INF), id="laplace-inf"),
        pytest.param(lambda: LaplaceEvent(True), id="laplace-bool"),
        pytest.param(lambda: GaussianEvent("1"), id="gaussian-str"),
        pytest.param(lambda: GaussianEvent(0.0), id="gaussian-zero"),
        pytest.param(lambda: DiscreteLaplaceEvent(1.0, 0), id="dlaplace-sens-zero"),
        pytest.param(lambda: DiscreteLaplaceEvent(1.0, 1.5), id="dlaplace-sens-float"),
        pytest.param(lambda: DiscreteLaplaceEvent(0.0, 1), id="dlaplace-scale-zero"),
        pytest.param(lambda: DiscreteGaussianEvent(1.0, 1.5), id="dgauss-1d-sens-float"),
        pytest.param(lambda: DiscreteGaussianEvent(1.0, 1, dimension=0), id="dgauss-dimension"),
        pytest.param(lambda: DiscreteGaussianEvent(1.0, -1.0, dimension=2), id="dgauss-sens"),
        pytest.param(lambda: DiscreteGaussianEvent(NAN, 1), id="dgauss-sigma-nan"),
        pytest.param(lambda: TruncatedLaplaceEvent(1.0, 0.0), id="tlaplace-delta-zero"),
        pytest.param(lambda: TruncatedLaplaceEvent(0.0, 1e-6), id="tlaplace-eps-zero"),
        pytest.param(lambda: RandomizedResponseEvent(1.0, 1), id="rr-one-category"),
        pytest.param(lambda: RandomizedResponseEvent(0.0, 2), id="rr-eps-zero"),
        pytest.param(lambda: ExponentialMechanismEvent(-1.0), id="em-negative"),
        pytest.param(lambda: PermuteAndFlipEvent(INF), id="pf-inf"),
        pytest.param(lambda: ReportNoisyMaxEvent(0.0), id="rnm-zero"),
        pytest.param(lambda: SparseVectorEvent(NAN), id="svt-nan"),
        pytest.param(lambda: PureEvent(-0.1), id="pure-negative"),
        pytest.param(lambda: ApproxEvent(1.0, 1.0), id="approx-delta-one"),
        pytest.param(lambda: ApproxEvent(1.0, -0.1), id="approx-delta-negative"),
        pytest.param(lambda: ZCDPEvent(INF), id="zcdp-inf"),
        pytest.param(lambda: ComposedEvent((PureDP(1.0),)), id="composed-not-event"),
        pytest.param(lambda: ComposedEvent(3), id="composed-not-iterable"),
        pytest.param(lambda: RepeatedEvent(PureDP(1.0), 2), id="repeated-not-event"),
        pytest.param(lambda: RepeatedEvent(NoOpEvent(), 0), id="repeated-zero"),
        pytest.param(lambda: RepeatedEvent(NoOpEvent(), 2.0), id="repeated-float"),
    ],
)
def test_invalid_events_raise(build: object) -> None:
    assert callable(build)
    with pytest.raises(InvalidParameter):
        build()


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"type": "NoSuchEvent"}, id="unknown-type"),
        pytest.param({"noise_multiplier": 1.0}, id="missing-type"),
        pytest.param({"type": "LaplaceEvent"}, id="missing-parameter"),
        pytest.param({"type": "LaplaceEvent", "noise_multiplier": 1.0, "x": 1}, id="extra-key"),
        pytest.param({"type": "LaplaceEvent", "noise_multiplier": -1.0}, id="invalid-value"),
        pytest.param({"type": "Event"}, id="abstract-base"),
        pytest.param(["LaplaceEvent"], id="not-a-mapping"),
        pytest.param(
            {"type": "ComposedEvent", "events": [{"type": "Bogus"}]}, id="bad-nested-event"
        ),
    ],
)
def test_event_from_dict_rejects_bad_data(data: Any) -> None:
    with pytest.raises(InvalidParameter):
        event_from_dict(data)


def _rr_rho(eps: float) -> float:
    return eps * math.tanh(eps / 2)


@pytest.mark.parametrize(
    ("event", "epsilon", "rho"),
    [
        pytest.param(LaplaceEvent(2.0), 0.5, _rr_rho(0.5), id="laplace"),
        pytest.param(GaussianEvent(2.0), None, 0.125, id="gaussian"),
        pytest.param(DiscreteLaplaceEvent(4.0, 2), 0.5, _rr_rho(0.5), id="discrete-laplace"),
        pytest.param(DiscreteGaussianEvent(2.0, 3), None, 9 / 8, id="discrete-gaussian"),
        pytest.param(
            DiscreteGaussianEvent(2.0, math.sqrt(2.0), dimension=5), None, 0.25, id="dg-5d"
        ),
        pytest.param(TruncatedLaplaceEvent(1.0, 1e-6), None, None, id="truncated-laplace"),
        pytest.param(RandomizedResponseEvent(1.0, 3), 1.0, _rr_rho(1.0), id="rr"),
        pytest.param(ExponentialMechanismEvent(1.0), 1.0, 1 / 8, id="exponential"),
        pytest.param(ExponentialMechanismEvent(20.0), 20.0, _rr_rho(20.0), id="exponential-big"),
        pytest.param(PermuteAndFlipEvent(1.0), 1.0, _rr_rho(1.0), id="permute-and-flip"),
        pytest.param(ReportNoisyMaxEvent(1.0), 1.0, _rr_rho(1.0), id="report-noisy-max"),
        pytest.param(SparseVectorEvent(1.0), 1.0, _rr_rho(1.0), id="sparse-vector"),
        pytest.param(PureEvent(1.0), 1.0, _rr_rho(1.0), id="pure"),
        pytest.param(PureEvent(0.0), 0.0, 0.0, id="pure-zero"),
        pytest.param(ApproxEvent(1.0, 0.0), 1.0, _rr_rho(1.0), id="approx-delta-zero"),
        pytest.param(ApproxEvent(1.0, 1e-9), None, None, id="approx"),
        pytest.param(ZCDPEvent(0.3), None, 0.3, id="zcdp"),
        pytest.param(NoOpEvent(), 0.0, 0.0, id="noop"),
        pytest.param(ComposedEvent(()), 0.0, 0.0, id="composed-empty"),
        pytest.param(
            ComposedEvent((LaplaceEvent(1.0), PureEvent(0.5))),
            1.5,
            _rr_rho(1.0) + _rr_rho(0.5),
            id="composed-pure",
        ),
        pytest.param(
            ComposedEvent((LaplaceEvent(1.0), GaussianEvent(1.0))),
            None,
            _rr_rho(1.0) + 0.5,
            id="composed-mixed",
        ),
        pytest.param(
            ComposedEvent((ZCDPEvent(0.1), ApproxEvent(1.0, 1e-6))),
            None,
            None,
            id="composed-approx",
        ),
        pytest.param(RepeatedEvent(PureEvent(0.25), 4), 1.0, 4 * _rr_rho(0.25), id="repeated"),
        pytest.param(RepeatedEvent(GaussianEvent(1.0), 3), None, 1.5, id="repeated-gaussian"),
        pytest.param(
            RepeatedEvent(ComposedEvent((NoOpEvent(), ExponentialMechanismEvent(2.0))), 2),
            4.0,
            1.0,
            id="repeated-composed",
        ),
    ],
)
def test_stated_costs(event: Event, epsilon: float | None, rho: float | None) -> None:
    got_eps = pure_epsilon(event)
    got_rho = zcdp_rho(event)
    if epsilon is None:
        assert got_eps is None
    else:
        assert got_eps == pytest.approx(epsilon, rel=1e-14)
        assert got_eps >= epsilon * (1 - 1e-15)
    if rho is None:
        assert got_rho is None
    else:
        assert got_rho == pytest.approx(rho, rel=1e-14)


def test_costs_round_up() -> None:
    # 1/3 is not a float: the stated epsilon of Laplace(noise_multiplier=3) is above it.
    eps = pure_epsilon(LaplaceEvent(3.0))
    assert eps is not None and eps * 3 >= 1.0
    rho = zcdp_rho(GaussianEvent(3.0))
    assert rho is not None and rho * 18 >= 1.0


def test_cost_functions_reject_non_events() -> None:
    with pytest.raises(InvalidParameter):
        pure_epsilon(PureDP(1.0))  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter):
        zcdp_rho("LaplaceEvent")  # type: ignore[arg-type]
