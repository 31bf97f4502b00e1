"""RepeatAndSelectEvent: validation, serialisation, basic (pure / zCDP) guarantees."""

from __future__ import annotations

import decimal
import itertools
import json
import math
from statistics import NormalDist

import numpy as np
import pytest

from dpkit.accounting import (
    ApproxEvent,
    ComposedEvent,
    GaussianEvent,
    NoOpEvent,
    PureAccountant,
    PureEvent,
    RDPAccountant,
    RepeatAndSelectEvent,
    TruncatedLaplaceEvent,
    ZCDPAccountant,
    event_from_dict,
    event_rdp,
    pure_epsilon,
)
from dpkit.accounting._math.selection import pure_delta, tnb_gamma
from dpkit.errors import InvalidParameter, UnsupportedEvent


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


# --- accountants ------------------------------------------------------------------------


SHAPES = [0.0, 0.5, 1.0, 3.0, math.inf]


@pytest.mark.parametrize("shape", SHAPES)
def test_supports(shape: float) -> None:
    rdp, pure, zcdp = RDPAccountant(), PureAccountant(), ZCDPAccountant()
    for candidate in (GaussianEvent(1.0), PureEvent(1.0), ComposedEvent((GaussianEvent(3.0),) * 5)):
        assert rdp.supports(RepeatAndSelectEvent(candidate, mean=10.0, shape=shape))
    for candidate in (ApproxEvent(1.0, 1e-6), TruncatedLaplaceEvent(1.0, 1e-6)):
        event = RepeatAndSelectEvent(candidate, mean=10.0, shape=shape)
        assert not rdp.supports(event)
        with pytest.raises(UnsupportedEvent):
            rdp.compose(event)
        assert rdp.guarantee.epsilons == RDPAccountant().guarantee.epsilons  # unchanged
    finite = not math.isinf(shape)
    pure_event = RepeatAndSelectEvent(PureEvent(1.0), mean=10.0, shape=shape)
    assert pure.supports(pure_event) is finite
    assert zcdp.supports(pure_event) is finite
    gauss_event = RepeatAndSelectEvent(GaussianEvent(1.0), mean=10.0, shape=shape)
    assert not pure.supports(gauss_event)
    assert not zcdp.supports(gauss_event)  # Thm 2 has a log(E[K])/(lam-1) term: not zCDP


def test_pure_accountant_geometric_is_three_epsilon() -> None:
    event = RepeatAndSelectEvent(PureEvent(0.5), mean=1 / 0.05, shape=1.0)
    assert PureAccountant().compose(event).get_epsilon(0.0) == pytest.approx(1.5)


@pytest.mark.parametrize("shape", SHAPES)
def test_rdp_curve_is_monotone_and_composes(shape: float) -> None:
    event = RepeatAndSelectEvent(GaussianEvent(3.0), mean=20.0, shape=shape)
    curve = event_rdp(event)
    assert curve is not None
    eps = curve.epsilons
    assert all(a <= b for a, b in itertools.pairwise(eps))
    # Composition with anything else: the curves add.
    both = RDPAccountant().compose(event).compose(GaussianEvent(5.0)).guarantee
    gauss = event_rdp(GaussianEvent(5.0))
    assert gauss is not None
    assert all(
        c >= a + b - 1e-12 for a, b, c in zip(eps, gauss.epsilons, both.epsilons, strict=True)
    )
    # Nested in a composed event and a repeat-and-select of a composed candidate.
    nested = RepeatAndSelectEvent(ComposedEvent((GaussianEvent(3.0), NoOpEvent())), 20.0, shape)
    assert event_rdp(nested) == curve


def test_more_repetitions_cost_more() -> None:
    values = [
        RDPAccountant().compose(RepeatAndSelectEvent(GaussianEvent(2.0), m, 1.0)).get_epsilon(1e-6)
        for m in (1.0, 2.0, 10.0, 100.0, 1e4)
    ]
    assert values == sorted(values)
    assert values[0] == pytest.approx(
        RDPAccountant().compose(GaussianEvent(2.0)).get_epsilon(1e-6), rel=1e-9
    )


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_pure_delta_is_randomized_response_profile(eps: float) -> None:
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        e = decimal.Decimal(eps).exp()
        p = e / (1 + e)
        for eps_hat in (0.0, eps / 3, eps / 2, eps * 0.99, eps, 2 * eps):
            w = decimal.Decimal(eps_hat).exp()
            exact = max(0, p - w * (1 - p)) + max(0, (1 - p) - w * p)
            got = decimal.Decimal(pure_delta(eps, eps_hat))
            assert exact - decimal.Decimal("1e-50") <= got <= exact * (1 + decimal.Decimal("1e-13"))


# --- exact soundness check on a small example ---------------------------------------------
#
# A candidate with a finite ordered output space and an eps-DP pair of laws P, Q. The best
# of K runs has CDF G(F(x)) where G is the probability generating function of K (and, for
# Poisson, K = 0 releases a bottom value below everything). Its exact Renyi divergence must
# be below dpkit's curve at every order, for both directions.


def _pgf(shape: float, mean: float, s: np.ndarray) -> np.ndarray:
    if math.isinf(shape):
        return np.exp(mean * (s - 1))
    if mean == 1.0:
        return s
    gamma = tnb_gamma(shape, mean)
    if shape == 0.0:
        return np.log1p(-(1 - gamma) * s) / math.log(gamma)
    return ((1 - (1 - gamma) * s) ** (-shape) - 1) / (gamma ** (-shape) - 1)


def _best_of_k(pmf: np.ndarray, shape: float, mean: float) -> np.ndarray:
    cdf = np.concatenate([[0.0], np.cumsum(pmf)])
    cdf[-1] = 1.0
    g = _pgf(shape, mean, cdf)  # g[0] = P[K = 0] (Poisson) else 0
    return np.diff(g) if not math.isinf(shape) else np.concatenate([[g[0]], np.diff(g)])


def _renyi(p: np.ndarray, q: np.ndarray, order: float) -> float:
    logs = order * np.log(p) + (1 - order) * np.log(q)
    top = logs.max()
    return float((top + np.log(np.sum(np.exp(logs - top)))) / (order - 1))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mean", [1.5, 10.0, 200.0])
def test_exact_divergence_below_curve(shape: float, mean: float) -> None:
    eps = 0.8
    # Two eps-DP laws on 4 ordered outputs (ratios within e^eps, opposite tilts).
    w = np.exp(eps * np.array([0.0, 0.3, 0.7, 1.0]))
    p = w / w.sum()
    q = (1 / w) / (1 / w).sum()
    ratio = np.max(np.abs(np.log(p / q)))
    candidate = PureEvent(float(ratio) + 1e-12)
    orders = [1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0]
    curve = RDPAccountant(orders).compose(RepeatAndSelectEvent(candidate, mean, shape)).guarantee
    bp, bq = _best_of_k(p, shape, mean), _best_of_k(q, shape, mean)
    assert bp.sum() == pytest.approx(1.0) and bq.sum() == pytest.approx(1.0)
    for order, bound in zip(orders, curve.epsilons, strict=True):
        for a, b in ((bp, bq), (bq, bp)):
            assert _renyi(a, b, order) <= bound + 1e-12


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("sigma", "mean"), [(0.7, 1.2), (1.0, 10.0), (2.0, 100.0)])
def test_exact_divergence_below_curve_gaussian(shape: float, sigma: float, mean: float) -> None:
    # The Gaussian mechanism binned into ordered cells (a post-processing, so its RDP is at
    # most GaussianEvent(sigma)'s): exercises the paths with no pure-DP help.
    edges = np.linspace(-4.0, 5.0, 40)
    cdf_p = np.array([NormalDist(0.0, sigma).cdf(x) for x in edges])
    cdf_q = np.array([NormalDist(1.0, sigma).cdf(x) for x in edges])
    p = np.diff(np.concatenate([[0.0], cdf_p, [1.0]]))
    q = np.diff(np.concatenate([[0.0], cdf_q, [1.0]]))
    orders = [1.1, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0]
    event = RepeatAndSelectEvent(GaussianEvent(sigma), mean, shape)
    curve = RDPAccountant(orders).compose(event).guarantee
    bp, bq = _best_of_k(p, shape, mean), _best_of_k(q, shape, mean)
    for order, bound in zip(orders, curve.epsilons, strict=True):
        for a, b in ((bp, bq), (bq, bp)):
            assert _renyi(a, b, order) <= bound + 1e-12
