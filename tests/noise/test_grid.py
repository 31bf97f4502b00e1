"""Exact splitting of inputs onto the release grid, and its out-of-range treatment.

The continuous samplers release ``loc + X`` rounded to the grid ``g Z`` exactly
(``dpkit/noise/_grid.py``). Three layers of tests:

* the release itself, with the noise pinned within 2^-1200 of a rounding boundary by
  scripted random bits, against the exact answer in rational arithmetic -- the
  offsets that used to be rounded (``loc`` just below zero, ``loc / g`` overflowing
  or underflowing) decide these releases, so the former split fails them;
* the split and the sum against :class:`fractions.Fraction`, on chosen edge cases and
  on random floats and power-of-two steps (hypothesis);
* the treatment of out-of-range parameters: a clear error before any randomness is
  drawn.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction

import mpmath
import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dpkit as dp
from dpkit import noise
from dpkit.errors import DataError, InvalidParameter
from dpkit.noise import _grid
from dpkit.random import Random
from dpkit.testing import seeded

TINY = math.ldexp(1.0, -1074)  # the smallest positive float
HUGE = float(np.finfo(np.float64).max)

# ------------------------------------------------------------- releases at a boundary

# Bits of U fixed by the script: the prefix (53) and 18 refinement words.
PINNED_BITS = 53 + 64 * 18


class PinnedRandom(Random):
    """Random bits that pin the Laplace sampler's uniform ``U`` to a chosen value.

    ``uint64`` returns one word: ``U``'s first 53 bits on top and bit 0 clear (a
    positive noise sign). ``getrandbits(64)`` then returns ``U``'s next bits, 64 at a
    time, and zeros after ``PINNED_BITS``, so the exact fallback's refined ``U``
    converges to ``numerator / 2^PINNED_BITS`` from above.
    """

    __slots__ = ("_chunks", "_word")

    def __init__(self, numerator: int) -> None:
        super().__init__(bytes(32), secure=False)
        extra = PINNED_BITS - 53
        self._word: int | None = (numerator >> extra) << 11
        low = numerator & ((1 << extra) - 1)
        self._chunks: Iterator[int] = iter(
            [(low >> (extra - 64 * (i + 1))) & ((1 << 64) - 1) for i in range(extra // 64)]
        )

    def uint64(self, n: int) -> npt.NDArray[np.uint64]:
        assert self._word is not None and n == 1, "one scalar draw only"
        word, self._word = self._word, None
        return np.array([word], dtype=np.uint64)

    def getrandbits(self, k: int) -> int:
        assert k == 64
        return next(self._chunks, 0)


# (loc, grid step): below zero by less than a float can hold as 1 - |loc|; a third of a
# step below zero; loc / g overflowing; the offset loc / g underflowing (g > 1); the
# finest grid; and an ordinary control.
PINNED_CASES = [
    (-TINY, 1.0),
    (-1e-300, 1.0),
    (-1e-300, 2.0**-20),
    (-(1 / 3), 1.0),
    (-(2.0**-20) / 3, 2.0**-20),
    (1e308, 2.0**-20),
    (-1e308, 2.0**-1000),
    (HUGE, 2.0**-30),
    (3 * TINY, 2.0**40),
    (-5 * TINY, 2.0**10),
    (TINY, TINY),
    (0.3, 0.5),
]


@pytest.mark.parametrize("side", ["noise_above_boundary", "noise_below_boundary"])
@pytest.mark.parametrize(("loc", "step"), PINNED_CASES, ids=repr)
def test_release_at_a_rounding_boundary_is_exact(loc: float, step: float, side: str) -> None:
    # Grid units: y = loc / g exactly; the release is g floor(y + 1/2 + X), X = -ln U
    # (scale = g, so the noise scale is one grid step). Pick the integer j with
    # boundary B = j - 1/2 - y in (1.5, 2.5]; X just above B gives j, just below j - 1.
    y = Fraction(loc) / Fraction(step)
    j = math.floor(y) + 3
    boundary = j - Fraction(1, 2) - y
    with mpmath.workprec(PINNED_BITS + 200):
        u_boundary = mpmath.exp(-mpmath.mpf(boundary.numerator) / boundary.denominator)
        numerator = int(mpmath.floor(u_boundary * mpmath.mpf(2) ** PINNED_BITS))
    # numerator / 2^N <= U_B: there X >= B, within 2^-1200 (X' = 1/U < 13 here).
    if side == "noise_below_boundary":
        numerator += 1
        expected_index = j - 1
    else:
        expected_index = j
    expected = float(Fraction(step) * expected_index)  # correctly rounded
    released = noise.laplace(loc, scale=step, granularity=step, rng=PinnedRandom(numerator))
    assert released == expected, f"loc={loc!r}, step={step!r}: {released!r} != {expected!r}"


# -------------------------------------------------------------------- the split itself


def assert_exact_split(x: npt.NDArray[np.float64], step: float) -> None:
    base, offsets = _grid.split_on_grid(x, step)
    g = Fraction(step)
    for i, value in enumerate(x.tolist()):
        b, r = Fraction(float(base[i])), Fraction(float(offsets.remainder[i]))
        assert b + r == Fraction(value), f"x={value!r}: base + remainder != x"
        assert (b / g).denominator == 1, f"x={value!r}: base {b} is off the grid"
        assert abs(r) <= g / 2, f"x={value!r}: |remainder| > step / 2"
        exact = r / g
        assert Fraction(offsets.exact(i)) == exact
        # The float offset for the filters: exact unless subnormal, then within 2^-1075.
        assert abs(Fraction(float(offsets.fraction[i])) - exact) <= Fraction(1, 2**1075)


EDGE_VALUES = [
    0.0,
    -0.0,
    TINY,
    -TINY,
    -1e-300,
    1e-300,
    -(1 / 3),
    1 / 3,
    0.5,
    -0.5,
    1.5,
    -2.5,
    2.0**-1022,
    -(2.0**-1022) + TINY,
    2.0**52 + 0.5,
    2.0**53 - 1,
    -(2.0**53) + 1,
    1e16,
    1e308,
    -1e308,
    HUGE,
    -HUGE,
]
EDGE_STEPS = [TINY, 2.0**-1060, 2.0**-1000, 2.0**-52, 2.0**-20, 0.5, 1.0, 2.0**10, 2.0**40]


@pytest.mark.parametrize("step", EDGE_STEPS, ids=repr)
def test_split_is_exact_on_edge_cases(step: float) -> None:
    x = np.array(
        EDGE_VALUES + [sign * step * k for k in (1 / 3, 0.5, 1.5, 2.0**53) for sign in (1, -1)]
    )
    assert_exact_split(x, step)


@given(
    x=st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=20),
    exponent=st.integers(min_value=-1074, max_value=40),
)
def test_split_reconstructs_any_finite_float(x: list[float], exponent: int) -> None:
    assert_exact_split(np.array(x, dtype=np.float64), math.ldexp(1.0, exponent))


@given(
    base_index=st.integers(min_value=-(2**53), max_value=2**53),
    steps=st.integers(min_value=-(2**62), max_value=2**62),
    exponent=st.integers(min_value=-1074, max_value=40),
)
def test_add_on_grid_rounds_once(base_index: int, steps: int, exponent: int) -> None:
    step = math.ldexp(1.0, exponent)
    base = float(base_index * Fraction(step))  # a grid point (rounded to a float)
    got = _grid.add_on_grid(np.array([base]), np.array([steps], dtype=np.int64), step)
    exact = Fraction(base) + steps * Fraction(step)
    assert got[0] == float(exact)


def test_add_on_grid_overflows_as_ieee() -> None:
    got = _grid.add_on_grid(
        np.array([HUGE, -HUGE, HUGE]), np.array([2**62, -(2**62), 1], dtype=np.int64), 2.0**960
    )
    assert got.tolist() == [math.inf, -math.inf, HUGE]


def test_exact_offset_has_every_digit() -> None:
    _, offsets = _grid.split_on_grid(np.array([3 * TINY]), 2.0**40)
    assert offsets.fraction[0] == 0.0  # 3 * 2^-1114 underflows as a float ...
    assert Fraction(offsets.exact(0)) == Fraction(3, 2**1114)  # ... not as a Decimal


# ---------------------------------------------------------------- out-of-range inputs


def test_huge_inputs_are_released_not_clipped() -> None:
    # |noise| << ulp(1e308) = 2^971: the exact release rounds back to the input.
    rng = seeded(40)
    assert noise.laplace(1e308, scale=1.0, rng=rng) == 1e308
    assert noise.gaussian(-1e308, sigma=1.0, rng=rng) == -1e308
    assert noise.laplace(HUGE, scale=2.0**40, rng=rng) == HUGE
    release = dp.Laplace(scale=1.0).release(1e308, rng=rng)
    assert release.value == 1e308


@pytest.mark.parametrize("loc", [-TINY, -1e-300, 1e-300, -(2.0**-20) / 3])
def test_tiny_inputs_release_on_the_grid_near_zero(loc: float) -> None:
    out = noise.laplace(np.full(1000, loc), scale=1.0, granularity=2.0**-20, rng=seeded(41))
    cells = out / 2.0**-20
    assert np.array_equal(cells, np.round(cells))
    assert np.all(np.abs(out) < 40.0)


def test_default_granularity_never_underflows() -> None:
    assert noise.default_granularity(TINY) == TINY
    assert noise.default_granularity(2.0**-1060) == TINY
    assert noise.default_granularity(2.0**-1050) == 2.0**-1070
    assert noise.laplace(0.0, scale=TINY, rng=seeded(42)) % TINY == 0.0


def untouched(rng: Random, seed: int) -> bool:
    """Whether ``rng`` (``seeded(seed)``) has drawn nothing yet."""
    return np.array_equal(rng.uint64(4), seeded(seed).uint64(4))


INVALID_GRANULARITY = {
    "laplace_2^-1000": (noise.laplace, {"scale": 1.0, "granularity": 2.0**-1000}),
    "laplace_2^-41": (noise.laplace, {"scale": 1.0, "granularity": 2.0**-41}),
    "laplace_2^-1_at_scale_2^40": (noise.laplace, {"scale": 2.0**40, "granularity": 0.5}),
    "gaussian_2^-1000": (noise.gaussian, {"sigma": 1.0, "granularity": 2.0**-1000}),
    "gaussian_2^-40_at_sigma_3": (noise.gaussian, {"sigma": 3.0, "granularity": 2.0**-40}),
    "truncated_2^-41": (
        noise.truncated_laplace,
        {"scale": 1.0, "bound": 1.0, "granularity": 2.0**-41},
    ),
    "not_a_power_of_two": (noise.laplace, {"scale": 1.0, "granularity": 3.0 * 2.0**-20}),
    "coarser_than_scale": (noise.laplace, {"scale": 1.0, "granularity": 2.0}),
}


@pytest.mark.parametrize(
    ("sampler", "kwargs"), INVALID_GRANULARITY.values(), ids=INVALID_GRANULARITY.keys()
)
def test_invalid_granularity_is_refused_before_any_draw(sampler, kwargs) -> None:
    rng = seeded(43)
    with pytest.raises(InvalidParameter, match="granularity"):
        sampler(np.zeros(3), **kwargs, rng=rng)
    assert untouched(rng, 43)


def test_finest_allowed_granularity_works() -> None:
    out = noise.laplace(np.zeros(100), scale=1.0, granularity=2.0**-40, rng=seeded(44))
    assert np.array_equal(out * 2.0**40, np.round(out * 2.0**40))
    with pytest.raises(InvalidParameter, match="granularity"):
        dp.Laplace(scale=1.0, granularity=2.0**-41)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=repr)
def test_non_finite_loc_is_refused_before_any_draw(bad: float) -> None:
    rng = seeded(45)
    loc = np.zeros(2 * 65_536 + 1)  # several chunks: the bad value is in the last one
    loc[-1] = bad
    with pytest.raises(DataError):
        noise.laplace(loc, scale=1.0, rng=rng)
    assert untouched(rng, 45)
