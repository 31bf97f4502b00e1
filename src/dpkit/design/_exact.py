"""Exact arithmetic for a designed noise: dyadic masses, the DP re-check, the sampler.

*Masses.* The solver's floating-point weights are turned into integers ``n_i`` with
``sum n_i = 2^60`` (:func:`quantize`): the released noise picks interval ``i`` with
probability exactly ``n_i / 2^60``, and every statement dpkit makes (privacy, loss) is
about these exact masses, not about the solver's floats.

*Re-check.* :func:`hockey_stick` computes ``sum_i max(0, n_d(i) - E n_e(i - j)) / 2^60``
in integer arithmetic, with ``E`` a rational *lower* bound on ``e^epsilon`` (a smaller
``E`` can only enlarge the divergence, so the check errs on the safe side). For
piecewise-uniform densities on a common grid of width ``beta`` this is the exact
hockey-stick divergence at ``e^epsilon`` for the shift ``j beta``; and between two grid
shifts it is linear in the shift (each interval overlaps two shifted intervals with
lengths linear in the shift), so its maximum over a range of shifts whose ends are
grid points is attained at a grid shift (Selvi, Liu & Wiesemann, Lemma 1).

*Sampler.* :func:`release` picks interval ``i`` by comparing a uniform 60-bit integer
with the cumulative sums of ``n`` (exact), then releases ``x + i beta + beta U``,
``U`` uniform on [0, 1), rounded to the power-of-two grid ``g Z`` (halves up): the
input is split exactly as ``x = base + g f`` (:func:`dpkit.noise._grid.split_on_grid`)
and ``K = floor(f + 1/2 + (i + U) beta / g)`` is decided in integer arithmetic on a
lazily refined ``U`` (64 random bits at a time, from :class:`dpkit.random.Random`),
so ``base + g K`` is the exact real ``x + X`` rounded to the grid. Rounding is
post-processing, so the guarantee of the ideal mechanism holds unchanged and the
output carries no floating-point trace of ``x`` (Mironov 2012).
"""

from __future__ import annotations

import decimal
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpkit.noise import _grid
from dpkit.random import Random

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The masses are multiples of 2^-MASS_BITS.
MASS_BITS = 60
TOTAL = 1 << MASS_BITS
_WORD = 64


def quantize(masses: FloatArray, *, symmetric: bool = False) -> IntArray:
    """Integers ``n >= 0`` with ``sum n = 2^60`` and ``n / 2^60`` within ~1e-15 of ``masses``.

    Equal masses get equal counts and the order of the masses is kept, so a symmetric
    or monotone shape survives; with ``symmetric`` (masses equal to their reverse)
    the counts are exactly symmetric too.
    """
    clipped = np.maximum(np.asarray(masses, dtype=np.float64), 0.0)
    scaled = np.floor(clipped / clipped.sum() * float(TOTAL))
    counts = np.minimum(scaled, float(TOTAL)).astype(np.int64)
    # The floors lose less than one unit each; the largest mass absorbs the difference
    # (a change of ~N 2^-60, far below the slack the LP target leaves, see design),
    # split between it and its mirror image for a symmetric shape (the sum of
    # symmetric counts is even, and so is the difference).
    missing = TOTAL - int(sum(int(c) for c in counts))
    top = int(np.argmax(counts))
    if symmetric:
        counts[top] += missing // 2
        counts[counts.size - 1 - top] += missing - missing // 2
    else:
        counts[top] += missing
    return np.asarray(counts, dtype=np.int64)


def impose_shape(masses: FloatArray, first: int, *, symmetric: bool, monotone: bool) -> FloatArray:
    """Make the solver's masses exactly symmetric / monotone (they are, up to its tolerance).

    Intervals ``first, first + 1, ...``; the support must be ``[-h, h)`` for symmetry.
    The exact privacy re-check runs afterwards on the result.
    """
    shaped = np.maximum(np.asarray(masses, dtype=np.float64), 0.0)
    if symmetric:
        shaped = (shaped + shaped[::-1]) / 2.0  # float addition commutes: exactly symmetric
    if monotone:
        zero = -first  # position of the interval [0, beta)
        shaped[zero:] = np.minimum.accumulate(shaped[zero:])
        shaped[:zero] = np.minimum.accumulate(shaped[:zero][::-1])[::-1]
    return shaped


def exp_lower(epsilon: float) -> Fraction:
    """A rational strictly below ``e^epsilon`` (within 1e-38 relative)."""
    with decimal.localcontext() as context:
        context.prec = 40
        # Decimal.exp is correctly rounded, so one step down is below the true value.
        value = Decimal(epsilon).exp().next_minus()
    return Fraction(value)


def hockey_stick(
    counts_d: IntArray, counts_e: IntArray, shift: int, exp_epsilon: Fraction
) -> Fraction:
    """Exact ``sum_i max(0, n_d(i) - E n_e(i - shift)) / 2^60`` (both on the same index range)."""
    a, b = exp_epsilon.numerator, exp_epsilon.denominator
    size = counts_d.size
    own = counts_d.astype(object)
    other = np.zeros(size, dtype=object)
    # other[i] = n_e(i - shift), zero where i - shift falls outside the support
    if 0 <= shift < size:
        other[shift:] = counts_e[: size - shift].astype(object)
    elif -size < shift < 0:
        other[:shift] = counts_e[-shift:].astype(object)
    excess = own * b - other * a
    positive = int(sum(v for v in excess if v > 0))
    return Fraction(positive, b * TOTAL)


def round_up(value: Fraction) -> float:
    """The smallest float >= ``value``."""
    result = float(value)
    return result if Fraction(result) >= value else math.nextafter(result, math.inf)


def choose_intervals(cumulative: IntArray, size: int, rng: Random) -> IntArray:
    """Positions ``i`` drawn with probability exactly ``n_i / 2^60`` (``cumulative`` of ``n``)."""
    uniform = (rng.uint64(size) >> np.uint64(_WORD - MASS_BITS)).astype(np.int64)
    return np.searchsorted(cumulative, uniform, side="right").astype(np.int64)


def _floor_uniform(top: int, width: int, shift_bits: int, rng: Random) -> int:
    # floor((top + width U) / 2^shift_bits) for U uniform on [0, 1), exactly: U is
    # known to lie in [r, r + 1) / 2^bits, and the floor is decided once the whole
    # image interval [top 2^bits + width r, ... + width) / 2^(shift_bits + bits)
    # falls between two integers.
    r, bits = 0, 0
    while True:
        r = (r << _WORD) | rng.getrandbits(_WORD)
        bits += _WORD
        low = (top << bits) + width * r
        scale = shift_bits + bits
        whole = low >> scale
        if low + width <= (whole + 1) << scale:
            return whole


def release(
    values: FloatArray, intervals: IntArray, beta: float, step: float, rng: Random
) -> FloatArray:
    """``values + (intervals + U) beta`` rounded to the grid ``step Z`` (see module docstring)."""
    flat = values.reshape(-1)
    base, offsets = _grid.split_on_grid(flat, step)
    width_fraction = Fraction(beta) / Fraction(step)
    steps = np.empty(flat.size, dtype=np.int64)
    for index in range(flat.size):
        fraction = Fraction(float(offsets.remainder[index])) / Fraction(step)
        top = fraction + Fraction(1, 2) + int(intervals[index]) * width_fraction
        # common power-of-two denominator 2^shift_bits of top and the width
        denominator = max(top.denominator, width_fraction.denominator)
        shift_bits = denominator.bit_length() - 1
        steps[index] = _floor_uniform(
            top.numerator * (denominator // top.denominator),
            width_fraction.numerator * (denominator // width_fraction.denominator),
            shift_bits,
            rng,
        )
    return _grid.add_on_grid(base, steps, step).reshape(values.shape)
