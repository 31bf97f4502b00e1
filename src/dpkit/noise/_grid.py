"""Exact arithmetic on the release grid: split an input, add the rounded noise.

The continuous samplers release ``x + X`` rounded to the grid ``g Z`` of a power of
two ``g = 2^p`` (:mod:`dpkit.noise._exact`, "Exactly rounded continuous noise"). Two
steps touch the input ``x`` in floating point, and both are exact:

1. :func:`split_on_grid` writes ``x = base + remainder`` with ``base`` a multiple of
   ``g`` and ``|remainder| <= g/2``, both floats, with no rounding. The sampler then
   draws ``K = floor(f + 1/2 + X/g)`` for the offset ``f = remainder / g`` in
   ``[-1/2, 1/2]``, so ``base + g K = g floor(x/g + 1/2 + X/g)``: ``x + X`` rounded to
   the grid (halves up), exactly.
2. :func:`add_on_grid` returns ``base + g K`` rounded once to float64.

Preconditions (enforced by :func:`dpkit.noise.check_granularity` and
:func:`dpkit._validation.check_array` before any randomness is drawn): ``x`` is
finite; ``g`` is a power of two with ``2^-1074 <= g <= 2^40`` (``g`` is at most the
noise scale, itself at most 2^40); the noise scale is at most ``2^40 g``, so
``|K| < 2^54`` fits an int64.

Why the split is exact
----------------------
Write ``Q(x)`` for the spacing of the floats around ``x``: ``2^(e - 52)`` when
``2^e <= |x| < 2^(e + 1)`` with ``e >= -1022``, and ``2^-1074`` for subnormal ``x``;
``x`` is a multiple of ``Q(x)`` and ``|x| < 2^53 Q(x)``.

* *Huge inputs*, ``|x| >= 2^53 g``: then ``2^(e + 1) > 2^53 g``, so
  ``Q(x) = 2^(e - 52) > g`` and, both being powers of two, ``Q(x) >= 2g``: ``x`` is
  itself on the grid. The split is ``base = x``, ``remainder = 0``. (This is the case
  where ``x / g`` may overflow: 1e308 on a grid of 2^-20 is on the grid, not clipped.)
* *Other inputs*, ``|x| < 2^53 g``. ``x / g = x 2^-p`` cannot overflow (it is below
  2^53); it is exact unless it is subnormal, i.e. below ``2^-1022``, and then its
  rounded value is at most ``2^-1022`` too. ``n = rint(x / g)`` is therefore a nearest
  integer to the real ``x / g`` in both cases (0 when ``|x / g| < 1/2``), with
  ``|n| <= 2^53``.
  ``base = n g`` is exact: a multiple of ``g >= 2^-1074`` with at most 53 significant
  bits, of magnitude at most ``2^94``.
  ``remainder = x - base`` is exact because the real difference ``r`` is a float:
  ``|r| <= g/2`` and ``|r| <= |x|`` (``r = x`` when ``n = 0``, else ``|x| >= g/2``).
  If ``g <= Q(x)``, ``r`` is a multiple of ``g`` of size at most ``g/2``, so ``r = 0``.
  Otherwise ``r`` is a multiple of ``Q(x)`` below ``|x| < 2^53 Q(x)``: a float. IEEE
  subtraction returns a representable difference exactly.

So ``x = base + remainder`` exactly, in every case, for every finite ``x``.

The offset in grid units, ``f = remainder / g``, is exact as a float unless it is
subnormal (``g > 1`` and ``|remainder| < 2^-1022 g``); the float filters use it with an
absolute error of at most ``2^-1075``, which their margins (at least ``2^-45``) cover,
and the exact fallbacks use :meth:`GridOffsets.exact`, the exact quotient as a
:class:`~decimal.Decimal`. (The former split ``x / g = floor(x / g) + f`` with ``f`` in
[0, 1) cannot be exact: for ``x = -2^-1074`` and ``g = 1``, ``f = 1 - 2^-1074`` is not
a float, and it was rounded to 1.)

Why the sum is exact
--------------------
For ``|K| <= 2^53``, ``K`` converts to float64 exactly, ``K g`` is a multiple of ``g``
with at most 53 significant bits and below ``2^93``, so it is exact, and
``base + K g`` is one IEEE addition: the exact grid point rounded once (to nearest,
ties to even; to +-inf beyond the float range, as IEEE rounding does). The rare
``|K| > 2^53`` (noise beyond ``2^13`` scales at the largest scale-to-step ratio) is
summed in rational arithmetic and rounded once by :class:`fractions.Fraction`.
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# |x| >= 2^53 g means x is on the grid (module docstring).
_ON_GRID_FACTOR = 2.0**53
# Exact quotients remainder / g have at most 16 + 1114 * log10(5) < 800 significant
# digits (remainder = m 2^e with m < 2^53, e >= -1074; g = 2^p, p <= 40); Inexact is
# trapped, so a wrong count fails loudly instead of rounding.
_EXACT_DIGITS = 1000


@dataclass(frozen=True)
class GridOffsets:
    """Offsets of the inputs from their grid points, in grid units.

    Attributes
    ----------
    remainder:
        ``x - base``, exact, ``|remainder| <= step / 2``.
    step:
        The grid step ``g``, a power of two.
    fraction:
        ``remainder / step`` as floats in ``[-1/2, 1/2]``: exact unless subnormal,
        then within ``2^-1075`` (for the float filters).
    """

    remainder: FloatArray
    step: float
    fraction: FloatArray

    @property
    def size(self) -> int:
        return int(self.remainder.size)

    def exact(self, index: int) -> Decimal:
        """The exact offset ``remainder[index] / step`` (for the exact fallbacks)."""
        with decimal.localcontext() as context:
            context.prec = _EXACT_DIGITS
            context.traps[decimal.Inexact] = True
            return Decimal(float(self.remainder[index])) / Decimal(self.step)


def split_on_grid(x: FloatArray, step: float) -> tuple[FloatArray, GridOffsets]:
    """``x = base + remainder`` exactly, ``base`` on the grid ``step * Z``.

    Parameters
    ----------
    x:
        Finite float64 values.
    step:
        A power of two in ``[2^-1074, 2^40]``.

    Returns
    -------
    base, offsets:
        ``base`` a multiple of ``step``, and the offsets ``x - base`` (at most
        ``step / 2`` in size) as :class:`GridOffsets`. See the module docstring for
        the proof that nothing is rounded.
    """
    on_grid = np.abs(x) >= _ON_GRID_FACTOR * step
    # x / step is only formed where it cannot overflow.
    whole = np.rint(np.where(on_grid, 0.0, x) / step)
    base = np.where(on_grid, x, whole * step)
    remainder = x - base
    with np.errstate(under="ignore"):
        fraction = remainder / step
    return base, GridOffsets(remainder, step, fraction)


def add_on_grid(base: FloatArray, steps: IntArray, step: float) -> FloatArray:
    """``base + steps * step`` rounded once to float64 (see the module docstring)."""
    with np.errstate(over="ignore"):  # beyond the float range: +-inf, as IEEE rounds
        out: FloatArray = base + steps.astype(np.float64) * step
    for i in np.flatnonzero(np.abs(steps) > 2**53):
        out[i] = _rounded_once(Fraction(float(base[i])) + int(steps[i]) * Fraction(step))
    return out


def _rounded_once(value: Fraction) -> float:
    # Fraction -> float is one correctly rounded integer division.
    try:
        return float(value)
    except OverflowError:  # beyond the float range: +-inf, as IEEE rounding gives
        return math.inf if value > 0 else -math.inf
