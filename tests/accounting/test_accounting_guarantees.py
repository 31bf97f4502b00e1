"""Unit tests for dpkit.accounting guarantees: validation, composition, conversions."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from dpkit.accounting import DEFAULT_ORDERS, RDP, ZCDP, ApproxDP, PureDP
from dpkit.accounting._math import rounding
from dpkit.errors import InvalidParameter

NAN = float("nan")
INF = float("inf")

# --- validation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: PureDP(-1.0), id="pure-negative"),
        pytest.param(lambda: PureDP(NAN), id="pure-nan"),
        pytest.param(lambda: PureDP(INF), id="pure-inf"),
        pytest.param(lambda: PureDP(True), id="pure-bool"),
        pytest.param(lambda: PureDP("1"), id="pure-str"),
        pytest.param(lambda: ApproxDP(-0.1, 1e-6), id="approx-negative-eps"),
        pytest.param(lambda: ApproxDP(INF, 1e-6), id="approx-inf-eps"),
        pytest.param(lambda: ApproxDP(1.0, 1.0), id="approx-delta-one"),
        pytest.param(lambda: ApproxDP(1.0, -1e-9), id="approx-delta-negative"),
        pytest.param(lambda: ApproxDP(1.0, NAN), id="approx-delta-nan"),
        pytest.param(lambda: ApproxDP(1.0, False), id="approx-delta-bool"),
        pytest.param(lambda: ZCDP(-0.5), id="zcdp-negative"),
        pytest.param(lambda: ZCDP(INF), id="zcdp-inf"),
        pytest.param(lambda: ZCDP(NAN), id="zcdp-nan"),
        pytest.param(lambda: ZCDP("0.5"), id="zcdp-str"),
        pytest.param(lambda: RDP((1.0, 2.0), (0.1, 0.2)), id="rdp-order-one"),
        pytest.param(lambda: RDP((0.5,), (0.1,)), id="rdp-order-below-one"),
        pytest.param(lambda: RDP((3.0, 2.0), (0.1, 0.2)), id="rdp-unsorted"),
        pytest.param(lambda: RDP((2.0, 2.0), (0.1, 0.2)), id="rdp-duplicate"),
        pytest.param(lambda: RDP((), ()), id="rdp-empty"),
        pytest.param(lambda: RDP((INF, 2.0), (0.1, 0.2)), id="rdp-order-inf-not-last"),
        pytest.param(lambda: RDP((2.0, 3.0), (0.1,)), id="rdp-length-mismatch"),
        pytest.param(lambda: RDP((2.0,), (-0.1,)), id="rdp-negative-eps"),
        pytest.param(lambda: RDP((2.0,), (NAN,)), id="rdp-nan-eps"),
        pytest.param(lambda: RDP(2.0, (0.1,)), id="rdp-orders-not-sequence"),
        pytest.param(lambda: RDP((2.0,), 0.1), id="rdp-epsilons-not-sequence"),
    ],
)
def test_invalid_guarantees_raise(build: object) -> None:
    assert callable(build)
    with pytest.raises(InvalidParameter):
        build()


def test_error_message_is_standard() -> None:
    with pytest.raises(InvalidParameter, match=r"'epsilon' parameter of PureDP must be"):
        PureDP(-1.0)


@pytest.mark.parametrize(
    ("guarantee", "expected"),
    [
        pytest.param(PureDP(1), PureDP(1.0), id="pure-int"),
        pytest.param(PureDP(0.0), PureDP(0.0), id="pure-zero"),
        pytest.param(ApproxDP(0, 0), ApproxDP(0.0, 0.0), id="approx-zero"),
        pytest.param(ZCDP(0), ZCDP(0.0), id="zcdp-zero"),
        pytest.param(RDP([2, 3], [0.1, INF]), RDP((2.0, 3.0), (0.1, INF)), id="rdp-lists"),
    ],
)
def test_valid_guarantees_normalise(guarantee: object, expected: object) -> None:
    assert guarantee == expected
    assert hash(guarantee) == hash(expected)


def test_guarantees_are_frozen() -> None:
    g = PureDP(1.0)
    with pytest.raises(AttributeError):
        g.epsilon = 2.0  # type: ignore[misc]


def test_large_epsilon_does_not_warn() -> None:
    # Guarantees are values; only calibration warns about weak guarantees.
    assert PureDP(50.0).epsilon == 50.0


# --- composition ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        pytest.param(PureDP(1.0), PureDP(2.0), PureDP(3.0), id="pure"),
        pytest.param(ZCDP(0.25), ZCDP(0.5), ZCDP(0.75), id="zcdp"),
        pytest.param(ApproxDP(1.0, 1e-6), ApproxDP(0.5, 2e-6), ApproxDP(1.5, 3e-6), id="approx"),
        pytest.param(
            RDP((2.0, 4.0), (0.5, 1.0)),
            RDP((2.0, 4.0), (0.25, INF)),
            RDP((2.0, 4.0), (0.75, INF)),
            id="rdp",
        ),
    ],
)
def test_addition_composes(left: object, right: object, expected: object) -> None:
    assert left + right == expected  # type: ignore[operator]


def test_sum_of_guarantees() -> None:
    assert sum([PureDP(1.0), PureDP(1.0), PureDP(1.0)]) == PureDP(3.0)
    assert sum([ZCDP(0.5)] * 4) == ZCDP(2.0)


def test_composed_epsilon_never_rounds_down() -> None:
    total = PureDP(0.1) + PureDP(0.2)
    assert Fraction(total.epsilon) >= Fraction(0.1) + Fraction(0.2)
    # 0.1 + 0.2 rounds to 0.30000000000000004 anyway; check a case that rounds down.
    a, b = 1.0, 2.0**-54  # a quarter ulp of 1.0: the float sum a + b rounds to 1.0
    assert Fraction((PureDP(a) + PureDP(b)).epsilon) >= Fraction(a) + Fraction(b)
    assert (PureDP(a) + PureDP(b)).epsilon > a + b


@pytest.mark.parametrize(
    ("left", "right"),
    [
        pytest.param(PureDP(1.0), ZCDP(0.5), id="pure+zcdp"),
        pytest.param(ZCDP(0.5), ApproxDP(1.0, 1e-6), id="zcdp+approx"),
        pytest.param(RDP((2.0,), (0.1,)), PureDP(1.0), id="rdp+pure"),
        pytest.param(ApproxDP(1.0, 1e-6), RDP((2.0,), (0.1,)), id="approx+rdp"),
        pytest.param(RDP((2.0,), (0.1,)), RDP((3.0,), (0.1,)), id="rdp-grids"),
    ],
)
def test_incompatible_addition_raises(left: object, right: object) -> None:
    with pytest.raises(InvalidParameter):
        left + right  # type: ignore[operator]


def test_adding_a_non_guarantee_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        PureDP(1.0) + 1.0  # type: ignore[operator]


def test_approx_composition_reaching_delta_one_raises() -> None:
    with pytest.raises(InvalidParameter, match="guarantees nothing"):
        ApproxDP(1.0, 0.6) + ApproxDP(1.0, 0.5)
    with pytest.raises(InvalidParameter, match="guarantees nothing"):
        3 * ApproxDP(1.0, 0.4)


@pytest.mark.parametrize(
    ("guarantee", "expected"),
    [
        pytest.param(PureDP(0.5), PureDP(1.5), id="pure"),
        pytest.param(ZCDP(0.5), ZCDP(1.5), id="zcdp"),
        pytest.param(ApproxDP(0.5, 1e-6), ApproxDP(1.5, 3e-6), id="approx"),
        pytest.param(RDP((2.0,), (0.5,)), RDP((2.0,), (1.5,)), id="rdp"),
    ],
)
def test_integer_multiplication_is_repeated_composition(
    guarantee: object, expected: object
) -> None:
    assert 3 * guarantee == expected  # type: ignore[operator]
    assert guarantee * 3 == expected  # type: ignore[operator]
    assert guarantee + guarantee + guarantee == 3 * guarantee  # type: ignore[operator]


@pytest.mark.parametrize(
    "factor",
    [
        pytest.param(0, id="zero"),
        pytest.param(-2, id="negative"),
        pytest.param(2.0, id="float"),
        pytest.param(True, id="bool"),
    ],
)
def test_bad_multipliers_raise(factor: object) -> None:
    with pytest.raises(InvalidParameter):
        factor * PureDP(1.0)  # type: ignore[operator]


def test_multiplying_by_a_non_number_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        "2" * ZCDP(1.0)  # type: ignore[operator]


# --- conversions: the accounting.md test vectors -----------------------------------------


@pytest.mark.parametrize(
    ("epsilon", "order", "expected"),
    [
        pytest.param(1.0, 2.0, 0.7353257, id="eps1-a2"),
        pytest.param(0.5, 10.0, 0.4473331, id="eps0.5-a10"),
    ],
)
def test_pure_to_rdp_vectors(epsilon: float, order: float, expected: float) -> None:
    rdp = PureDP(epsilon).to_rdp((order,))
    assert rdp.epsilons[0] == pytest.approx(expected, rel=1e-6)


def test_pure_to_zcdp_vector_and_limits() -> None:
    assert PureDP(1.0).to_zcdp().rho == pytest.approx(0.4621172, rel=1e-6)
    for eps in (1e-6, 0.1, 1.0, 5.0, 30.0):
        rho = PureDP(eps).to_zcdp().rho
        assert rho >= eps * math.tanh(eps / 2)
        assert rho <= eps * eps / 2 * (1 + 1e-15)


def test_pure_to_rdp_is_between_zero_and_epsilon_and_increasing() -> None:
    for eps in (1e-4, 0.3, 2.0, 20.0):
        curve = PureDP(eps).to_rdp()
        assert curve.orders == DEFAULT_ORDERS
        assert all(0.0 <= e <= eps for e in curve.epsilons)
        assert all(b >= a for a, b in zip(curve.epsilons, curve.epsilons[1:], strict=False))


def test_pure_to_rdp_near_order_one_matches_kl_of_randomized_response() -> None:
    # As a -> 1 the tight curve tends to KL(RR) = eps tanh(eps/2).
    eps = 0.8
    value = PureDP(eps).to_rdp((1.0 + 1e-9,)).epsilons[0]
    assert value == pytest.approx(eps * math.tanh(eps / 2), rel=1e-7)


def test_pure_to_approx() -> None:
    assert PureDP(0.7).to_approx() == ApproxDP(0.7, 0.0)


@pytest.mark.parametrize(
    ("rho", "delta", "optimal", "simple"),
    [
        pytest.param(0.025, 1e-6, 1.014074, 1.200394, id="rho0.025"),
        pytest.param(0.5, 1e-5, 4.728387, 5.298526, id="rho0.5"),
    ],
)
def test_zcdp_to_approx_vectors(rho: float, delta: float, optimal: float, simple: float) -> None:
    assert ZCDP(rho).to_approx(delta).epsilon == pytest.approx(optimal, rel=1e-6)
    assert ZCDP(rho).to_approx(delta, method="simple").epsilon == pytest.approx(simple, rel=1e-6)
    assert ZCDP(rho).to_approx(delta).delta == delta


def test_zcdp_delta_for_vector() -> None:
    assert ZCDP(0.025).delta_for(1.0) == pytest.approx(1.33613e-6, rel=1e-5)


def test_zcdp_conversions_are_consistent() -> None:
    z = ZCDP(0.3)
    for delta in (1e-3, 1e-6, 1e-10):
        eps = z.to_approx(delta).epsilon
        assert z.delta_for(eps) <= delta * (1 + 1e-9)
        assert z.delta_for(eps * 0.999) > delta


@pytest.mark.parametrize(
    ("rho", "delta", "epsilon"),
    [
        pytest.param(0.0, 1e-6, 0.0, id="rho-zero"),
        pytest.param(1e-12, 0.5, 0.0, id="tiny-rho-large-delta-clamps-at-zero"),
    ],
)
def test_zcdp_to_approx_edges(rho: float, delta: float, epsilon: float) -> None:
    assert ZCDP(rho).to_approx(delta).epsilon == epsilon


def test_zcdp_delta_for_edges() -> None:
    assert ZCDP(0.0).delta_for(0.0) == 0.0
    assert 0.5 < ZCDP(5.0).delta_for(0.0) <= 1.0
    # The true value (about e^-25000) underflows; the bound stays positive and tiny.
    assert 0.0 < ZCDP(1e-4).delta_for(100.0) < 1e-300


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: ZCDP(0.5).to_approx(0.0), id="delta-zero"),
        pytest.param(lambda: ZCDP(0.5).to_approx(1.0), id="delta-one"),
        pytest.param(lambda: ZCDP(0.5).to_approx(NAN), id="delta-nan"),
        pytest.param(lambda: ZCDP(0.5).to_approx(1e-6, method="exact"), id="bad-method"),
        pytest.param(lambda: ZCDP(0.5).delta_for(-1.0), id="negative-epsilon"),
        pytest.param(lambda: ZCDP(0.5).to_rdp((1.0,)), id="bad-orders"),
        pytest.param(lambda: PureDP(1.0).to_rdp((2.0, 1.5)), id="unsorted-orders"),
        pytest.param(lambda: RDP((2.0,), (0.1,)).to_approx(0.0), id="rdp-delta-zero"),
        pytest.param(lambda: RDP((2.0,), (0.1,)).delta_for(INF), id="rdp-inf-epsilon"),
        pytest.param(lambda: RDP((2.0,), (INF,)).to_approx(1e-6), id="rdp-all-infinite"),
    ],
)
def test_invalid_conversion_arguments_raise(call: object) -> None:
    assert callable(call)
    with pytest.raises(InvalidParameter):
        call()


def test_zcdp_to_rdp_is_linear() -> None:
    curve = ZCDP(0.5).to_rdp((1.5, 2.0, 10.0))
    assert curve.epsilons == pytest.approx((0.75, 1.0, 5.0), rel=1e-15)
    assert all(e >= 0.5 * a for a, e in zip(curve.orders, curve.epsilons, strict=True))


def test_rdp_of_zcdp_converts_close_to_the_continuous_optimum() -> None:
    # The grid can only lose a little against the continuous minimisation over orders.
    z = ZCDP(0.5)
    on_grid = z.to_rdp().to_approx(1e-5).epsilon
    continuous = z.to_approx(1e-5).epsilon
    assert continuous <= on_grid <= continuous * 1.001


def test_rdp_kl_bound_gives_zero_epsilon() -> None:
    # delta >= sqrt(1 - exp(-KL)): (0, delta)-DP.
    tiny = RDP((1.5, 2.0), (1e-6, 2e-6))
    assert tiny.to_approx(0.01).epsilon == 0.0
    assert tiny.delta_for(0.0) <= math.sqrt(-math.expm1(-1e-6)) * (1 + 1e-12)


def test_rdp_delta_for_matches_to_approx() -> None:
    curve = PureDP(0.2).to_rdp() + PureDP(0.2).to_rdp()
    for delta in (1e-3, 1e-7):
        eps = curve.to_approx(delta).epsilon
        assert curve.delta_for(eps) <= delta * (1 + 1e-9)


def test_rdp_ignores_infinite_orders() -> None:
    curve = RDP((2.0, 3.0), (0.1, INF))
    assert curve.to_approx(1e-6) == RDP((2.0,), (0.1,)).to_approx(1e-6)
    assert curve.delta_for(1.0) == RDP((2.0,), (0.1,)).delta_for(1.0)


def test_default_orders_grid() -> None:
    assert len(DEFAULT_ORDERS) < 300
    assert DEFAULT_ORDERS[0] == 1.01
    assert DEFAULT_ORDERS[-1] == 1024.0
    assert all(b > a for a, b in itertools.pairwise(DEFAULT_ORDERS))
    dp_accounting_defaults = [1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64))
    dp_accounting_defaults += [128, 256, 512, 1024]
    assert set(map(float, dp_accounting_defaults)) <= set(DEFAULT_ORDERS)


def test_rounding_helpers_round_in_the_stated_direction() -> None:
    third = Fraction(1, 3)
    assert Fraction(rounding.fraction_up(third)) >= third
    assert Fraction(rounding.fraction_down(third)) <= third
    assert rounding.fraction_up(third) == math.nextafter(rounding.fraction_down(third), INF)
    assert Fraction(rounding.div_up(1.0, 3.0)) >= third
    assert Fraction(rounding.div_down(1.0, 3.0)) <= third
    assert Fraction(rounding.product_up(0.1, 3.0)) >= Fraction(0.1) * 3
    assert rounding.mul_up(3, INF) == INF
    assert rounding.sum_up([1.0, INF]) == INF
    assert rounding.fraction_up(Fraction(10) ** 400) == INF
    assert rounding.up_terms(0.0, 1.0) > 0.0
    assert rounding.inflate(0.0, 1e-3) == 0.0
