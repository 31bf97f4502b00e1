"""The discrete Laplace sampler's float filter, checked at its decision boundaries.

The sampler outputs ``|Z| = max(0, floor(t (c - ln U)))`` with
``c = ln(2 / (1 + e^{-1/t}))`` (see the docstring of ``dpkit.noise._exact``). The
filter decides from the 53-bit prefix ``k`` of ``U`` alone when that is safe and
otherwise refines ``U`` exactly. These tests feed the sampler chosen prefixes -- the
ones whose interval ``[k, k + 1) 2^-53`` holds a boundary ``U_m = exp(c - m/t)``
between magnitudes ``m - 1`` and ``m``, and their neighbours -- with the refinement
bits fixed to all zeros (``U`` just above ``k 2^-53``) or all ones (``U`` just below
``(k + 1) 2^-53``), and compare each output with the exact magnitude at that ``U``
computed in 300-bit arithmetic by mpmath. A filter that decides an interval holding a
boundary returns the same value for both fillings, and one of them is then wrong.

Before the fix, ``c`` was computed as ``ln 2 - log1p(e^{-1/t})``, which cancels: its
absolute error is ~5e-17, so its relative error is ~1e-10 at t = 10^6 (the margin
argument allows 2^-48 ~ 4e-15). The filter then decided intervals holding a boundary
for magnitudes up to ~900 (t = 10^6) and ~19000 (t = 3 * 10^7): 230 and 3247 such
boundaries, carrying 4.5e-15 and 3.9e-14 of probability assigned to the wrong
magnitude (measured by running the filter on every boundary's prefix with the exact
boundary from mpmath). Both cases of the boundary test fail on that code.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import numpy.typing as npt
import pytest

from dpkit import noise
from dpkit.noise import _exact
from dpkit.random import Random

PRECISION_BITS = 300
ALL_ONES = (1 << 64) - 1


class ScriptedRandom(Random):
    """Scripted bits: the 64-bit words the filter reads, then a fixed refinement.

    ``uint64`` returns the given words once; every later ``getrandbits`` (the exact
    fallback's refinement of ``U``) returns the same fill pattern, so a refined ``U``
    converges to one end of its prefix interval.
    """

    __slots__ = ("_fill", "_words")

    def __init__(self, words: npt.NDArray[np.uint64], fill: int) -> None:
        super().__init__(bytes(32), secure=False)
        self._words: npt.NDArray[np.uint64] | None = words
        self._fill = fill

    def uint64(self, n: int) -> npt.NDArray[np.uint64]:
        assert self._words is not None and n == self._words.size, "one filter pass only"
        words, self._words = self._words, None
        return words

    def getrandbits(self, k: int) -> int:
        return self._fill & ((1 << k) - 1)


def exact_offset(scale: float) -> mpmath.mpf:
    t = mpmath.mpf(scale)  # the exact value of the float
    return mpmath.log(2 / (1 + mpmath.exp(-1 / t)))


def exact_magnitude(scale: float, u: mpmath.mpf) -> int:
    value = mpmath.mpf(scale) * (exact_offset(scale) - mpmath.log(u))
    return max(0, int(mpmath.floor(value)))


def boundary_prefix(scale: float, m: int) -> int:
    """The prefix whose interval holds the boundary between magnitudes m - 1 and m."""
    u_m = mpmath.exp(exact_offset(scale) - mpmath.mpf(m) / mpmath.mpf(scale))
    return int(mpmath.floor(u_m * 2**53))


# Boundaries m (between magnitudes m - 1 and m): every small m, where the old constant's
# error was not covered, and a spread up to where the margin covers it again.
BOUNDARIES = {
    1.0: list(range(1, 37)),  # U_m = e^{c - m} >= 2^-53 up to m = 36
    1e6: [*range(1, 97), 128, 256, 512, 700, 900, 1000, 4000],
    3e7: [*range(1, 97), 300, 1000, 3000, 10_000, 19_000, 30_000],
}


@pytest.mark.parametrize("fill", [0, ALL_ONES], ids=["U_at_left_end", "U_at_right_end"])
@pytest.mark.parametrize("scale", BOUNDARIES, ids=lambda t: f"t={t:g}")
def test_filter_agrees_with_exact_magnitude_around_boundaries(scale: float, fill: int) -> None:
    with mpmath.workprec(PRECISION_BITS):
        prefixes = sorted(
            {boundary_prefix(scale, m) + d for m in BOUNDARIES[scale] for d in (-1, 0, 1)}
        )
        # The limit of the refined U: just above k 2^-53, or just below (k + 1) 2^-53.
        nudge = mpmath.mpf(2) ** -(PRECISION_BITS - 50)
        points = [
            (k + 1) * mpmath.mpf(2) ** -53 - nudge if fill else k * mpmath.mpf(2) ** -53 + nudge
            for k in prefixes
        ]
        expected = [exact_magnitude(scale, u) for u in points]
    # Word layout of the sampler: the prefix in the top 53 bits, the sign in bit 0
    # (0: positive, so the output is the magnitude itself).
    words = np.array([k << 11 for k in prefixes], dtype=np.uint64)
    got = noise.discrete_laplace(scale, size=len(prefixes), rng=ScriptedRandom(words, fill))
    wrong = [(k, e, int(g)) for k, e, g in zip(prefixes, expected, got, strict=True) if e != g]
    assert not wrong, f"prefix, exact, sampled: {wrong[:5]} ({len(wrong)} wrong)"


def test_boundary_prefixes_straddle() -> None:
    """The test above really probes boundaries: each chosen interval holds one."""
    with mpmath.workprec(PRECISION_BITS):
        for scale, boundaries in BOUNDARIES.items():
            for m in boundaries:
                k = boundary_prefix(scale, m)
                left = exact_magnitude(scale, k * mpmath.mpf(2) ** -53)
                right = exact_magnitude(scale, (k + 1) * mpmath.mpf(2) ** -53)
                assert (left, right) == (m, m - 1), (scale, m)


# Relative error budget of c in the margin argument: 2^-48 (derived in
# dpkit.noise._exact's docstring); the stable form achieves ~2^-52.
OFFSET_BUDGET = 2.0**-48
SCALES = sorted(
    {5e-324, 2.0**-30, 0.1, 1.0, 1.5, 7.0, 1000.0, 1e6, 3e7, 2.0**30, 2.0**40}
    | set(np.geomspace(1e-3, 2.0**40, 97).tolist())
)


@pytest.mark.parametrize("scale", SCALES, ids=lambda t: f"t={t!r}")
def test_offset_has_small_relative_error(scale: float) -> None:
    with mpmath.workprec(PRECISION_BITS):
        exact = exact_offset(scale)
        error = abs((mpmath.mpf(_exact._dlap_offset(scale)) - exact) / exact)
    assert error <= OFFSET_BUDGET, f"relative error {float(error):.3g} of c at t={scale!r}"


def test_log1p_condition_number_bound() -> None:
    """The derivation uses |y / ((1 + y) log1p(y))| <= 1 / ln 2 for y in [-1/2, 0)."""
    y = -np.concatenate([np.geomspace(1e-300, 0.5, 10_001), [0.5]])
    kappa = np.abs(y / ((1 + y) * np.log1p(y)))
    assert np.all(kappa <= 1 / math.log(2) * (1 + 2.0**-50))
