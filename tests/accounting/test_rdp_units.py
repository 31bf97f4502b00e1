"""The RDP accountant's exact running sums convert back to floats rounded up, exactly."""

from __future__ import annotations

import math
import sys
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting.rdp import _in_units, _units_up


def smallest_float_at_or_above(value: Fraction) -> float:
    """Reference: round to nearest with Fraction, then step up if below."""
    if value > Fraction(sys.float_info.max):
        return math.inf
    nearest = float(value)
    if Fraction(nearest) < value:
        nearest = math.nextafter(nearest, math.inf)
    return nearest


@settings(max_examples=2000, deadline=None)
@given(st.integers(min_value=0, max_value=2**2110))
def test_units_up_is_the_smallest_float_at_or_above(total: int) -> None:
    assert _units_up(total) == smallest_float_at_or_above(Fraction(total, 2**1074))


@settings(max_examples=500, deadline=None)
@given(st.floats(min_value=0.0, allow_infinity=False, allow_nan=False))
def test_a_float_round_trips_exactly(value: float) -> None:
    assert _units_up(_in_units(value)) == value


def test_edges() -> None:
    for total in (0, 1, 2**52, 2**53 - 1, 2**53, 2**53 + 1, 2**1074, 2**1074 + 1, 2**2098):
        assert _units_up(total) == smallest_float_at_or_above(Fraction(total, 2**1074))
    assert _units_up(2**2099) == math.inf
