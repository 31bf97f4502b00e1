"""Finite output grids for the inverse sensitivity mechanism, and snapping data onto them.

A :class:`Grid` is a sorted array of candidate outputs ``points[0] < ... < points[J-1]``
together with the ``J - 1`` *cuts* that decide which point a data value snaps to.

Snapping rule (the one formula every engine must reproduce)
-----------------------------------------------------------
A value ``x`` (after clamping to ``[lower, upper]``) snaps to the point with index

    ``index(x) = #{ j : cuts[j] <= x }``            (0 <= index <= J - 1)

i.e. ``searchsorted(cuts, x, side="right")``; ``-inf`` snaps to 0 and ``+inf`` to
``J - 1`` (the clamp), NaN is dropped. The cuts are float64 numbers stored in the
grid (:attr:`Grid.cuts`), so the rule is exact comparisons only, with no rounding to
agree on. The cuts are the midpoints of neighbouring points: the arithmetic midpoint
for a linear grid, the geometric one for a log grid (nearest point in relative
terms).

Computing it in O(n) without sorting: :meth:`Grid.histogram` first *guesses* the
index with arithmetic (``floor((x - lower) / step + 1/2)`` on a linear grid,
``floor((ln x - ln lower) / h + 1/2)`` on a log grid, ``h`` the log-step), then
corrects it once by comparing ``x`` with the two cuts around the guess. The guess
is within one of the rule's index: it differs from the exact real-number value of
the rounded expression by a few ulps of ``index`` (below 10^-6 for the at most
2^26 points allowed), and the stored cuts differ from the exact midpoints by a few
ulps too, so the guess can only fall on the wrong side of one cut. An SQL engine
reproduces the rule the same way: compute the guess ``g`` with the expression above,
clamp it to ``[0, J - 1]``, join the cuts table on ``g`` and take
``g + (x >= cuts[g]) - (x < cuts[g - 1])`` (with ``cuts[-1] = -inf`` and
``cuts[J - 1] = +inf``), or with an ASOF join on the cuts directly.

Privacy: snapping is a fixed per-record map, so a neighbouring dataset (one record
added, removed or replaced) gives a neighbouring grid histogram; every guarantee
stated on grid-snapped data holds for the raw data.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt

from dpkit import _validation as check
from dpkit.errors import DataError, InvalidParameter

__all__ = ["MAX_GRID_SIZE", "Grid"]

#: Largest grid accepted: points, cuts and counts take ~24 bytes per point (1.6 GB here).
MAX_GRID_SIZE = 1 << 26
#: Values snapped per block: the block's temporaries stay in cache.
_CHUNK = 1 << 15

GridKind = Literal["linear", "log", "symlog"]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _check_size(size: int, owner: str) -> None:
    if size > MAX_GRID_SIZE:
        raise InvalidParameter(
            f"{owner}: the grid would have {size} points, more than the {MAX_GRID_SIZE} "
            "that fit in memory comfortably. Coarsen it: pass a smaller size=, a larger "
            "step= (linear) or ratio= (log), or use Grid.log for a wide positive range "
            "(its size grows with log(upper / lower), not with upper - lower)."
        )


def _size_from(size: object, spacing: object, span: float, owner: str, spacing_name: str) -> int:
    """Number of points from ``size=`` or from a spacing over ``span`` (exactly one given)."""
    if (size is None) == (spacing is None):
        raise InvalidParameter(
            f"{owner}: pass exactly one of size= and {spacing_name}=. "
            f"Got size={size!r}, {spacing_name}={spacing!r}."
        )
    if size is not None:
        result = check.check_count(size, "size", owner, minimum=2)
    else:
        value = check.check_positive(spacing, spacing_name, owner)
        if spacing_name == "ratio" and not value > 1.0:
            raise InvalidParameter.for_parameter("ratio", owner, "a float in (1, inf)", spacing)
        per_step = math.log(value) if spacing_name == "ratio" else value
        steps = span / per_step
        if not math.isfinite(steps) or steps > MAX_GRID_SIZE:
            _check_size(MAX_GRID_SIZE + 1, owner)
        # Round up: the spacing actually used is at most the one asked for.
        result = max(2, math.ceil(steps * (1.0 - 1e-12)) + 1)
    _check_size(result, owner)
    return result


def _check_bounds(lower: object, upper: object, owner: str) -> tuple[float, float]:
    lo = check.check_finite_float(lower, "lower", owner)
    hi = check.check_finite_float(upper, "upper", owner)
    if not lo < hi:
        raise InvalidParameter(
            f"{owner}: the bounds must satisfy lower < upper (both finite). "
            f"Got lower={lower!r}, upper={upper!r}."
        )
    return lo, hi


class Grid:
    """A finite, sorted set of candidate outputs and the rule that snaps data onto it.

    Build one with :meth:`linear` or :meth:`log`; do not call the constructor.

    Attributes
    ----------
    kind:
        ``"linear"``, ``"log"`` or ``"symlog"`` (a log grid mirrored around 0).
    lower, upper:
        The bounds data are clamped to.
    size:
        Number of points ``J``.
    points:
        The candidate outputs, a sorted float64 array of length ``J`` (read-only).
    cuts:
        The ``J - 1`` snapping thresholds (read-only); see the module docstring.

    Examples
    --------
    >>> from dpkit.estimators import Grid
    >>> grid = Grid.linear(0.0, 10.0, size=11)
    >>> grid.histogram([0.2, 0.6, 9.9, 42.0, float("nan")]).tolist()
    [1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2]
    >>> Grid.log(1e-6, 1e9, ratio=1.01).size
    3473
    """

    __slots__ = (
        "_cuts",
        "_ln_lower",
        "_log_step",
        "_padded",
        "_points",
        "_step",
        "_zero",
        "kind",
        "lower",
        "upper",
    )

    def __init__(
        self,
        kind: GridKind,
        lower: float,
        upper: float,
        points: FloatArray,
        cuts: FloatArray,
        *,
        step: float = math.nan,
        ln_lower: float = math.nan,
        log_step: float = math.nan,
        zero: int = -1,
    ) -> None:
        self.kind: GridKind = kind
        self.lower = lower
        self.upper = upper
        points.setflags(write=False)
        cuts.setflags(write=False)
        self._points = points
        self._cuts = cuts
        self._step = step
        self._ln_lower = ln_lower
        self._log_step = log_step
        self._zero = zero
        # Cut table for the correction step: point i owns [padded[i], padded[i + 1]);
        # NaN where there is no cut (every comparison with NaN is False).
        self._padded = np.full(points.size + 2, np.nan)
        self._padded[1 : points.size] = cuts

    # ------------------------------------------------------------------ construction

    @classmethod
    def linear(
        cls, lower: float, upper: float, *, size: int | None = None, step: float | None = None
    ) -> Grid:
        """Evenly spaced points from ``lower`` to ``upper`` (both included).

        Parameters
        ----------
        lower, upper:
            Finite bounds, ``lower < upper``.
        size:
            Number of points (at least 2).
        step:
            Alternatively, the largest spacing wanted: ``size = ceil((upper - lower) /
            step) + 1`` and the spacing used is ``(upper - lower) / (size - 1) <= step``.

        Raises
        ------
        InvalidParameter
            Bad bounds, both or neither of size/step, or more than
            ``MAX_GRID_SIZE`` points (the message says how to coarsen).
        """
        owner = "Grid.linear"
        lo, hi = _check_bounds(lower, upper, owner)
        n = _size_from(size, step, hi - lo, owner, "step")
        spacing = (hi - lo) / (n - 1)
        if not spacing > 0 or not math.isfinite(spacing):
            raise InvalidParameter(
                f"{owner}: lower={lower!r}, upper={upper!r} and size={n} give no usable "
                "spacing in float64; use fewer points or a log grid."
            )
        points = lo + spacing * np.arange(n, dtype=np.float64)
        points[-1] = hi
        cuts = lo + spacing * (np.arange(n - 1, dtype=np.float64) + 0.5)
        if not np.all(np.diff(points) > 0):
            raise InvalidParameter(
                f"{owner}: {n} points between {lower!r} and {upper!r} are not distinct "
                "float64 numbers; use fewer points."
            )
        return cls("linear", lo, hi, points, cuts, step=spacing)

    @classmethod
    def log(
        cls,
        lower: float,
        upper: float,
        *,
        size: int | None = None,
        ratio: float | None = None,
        min_magnitude: float | None = None,
    ) -> Grid:
        """Geometrically spaced points: constant *relative* resolution over a wide range.

        For ``0 < lower < upper``: points ``lower * r^j`` up to ``upper`` (both
        included), ``r = (upper / lower)^(1 / (size - 1))``. A range like 1e-6 .. 1e9
        needs ``ln(10^15) / ln(r)`` points: 3,472 for 1% resolution.

        For ``lower <= 0`` (data with zeros or negative values) pass ``min_magnitude``
        ``a > 0``, the smallest non-zero magnitude worth resolving: the grid is
        *symmetric-log* (``kind="symlog"``): ``0``, and ``+-a r^j`` for magnitudes up
        to ``max(|lower|, upper)``, keeping those inside ``[lower, upper]``; values
        with ``|x| < a / sqrt(r)`` snap to 0. Then ``size`` is the number of magnitude
        levels, so the grid has at most ``2 size + 1`` points.

        Parameters
        ----------
        lower, upper:
            Finite bounds, ``lower < upper``.
        size:
            Number of points (levels for symlog), at least 2.
        ratio:
            Alternatively, the largest ratio between neighbouring points wanted (> 1);
            the ratio used is at most this.
        min_magnitude:
            Required when ``lower <= 0``; refused otherwise.

        Raises
        ------
        InvalidParameter
            Bad bounds or sizes; ``lower <= 0`` without ``min_magnitude``; too many
            points (the message says how to coarsen).
        """
        owner = "Grid.log"
        lo, hi = _check_bounds(lower, upper, owner)
        if lo > 0:
            if min_magnitude is not None:
                raise InvalidParameter(
                    f"{owner}: min_magnitude is for bounds that include 0 or negative values; "
                    f"with lower={lower!r} > 0 the smallest point is lower itself."
                )
            ln_lo, ln_hi = math.log(lo), math.log(hi)
            n = _size_from(size, ratio, ln_hi - ln_lo, owner, "ratio")
            h = (ln_hi - ln_lo) / (n - 1)
            points = np.exp(ln_lo + h * np.arange(n, dtype=np.float64))
            points[0], points[-1] = lo, hi
            cuts = np.exp(ln_lo + h * (np.arange(n - 1, dtype=np.float64) + 0.5))
            cls._check_increasing(points, cuts, owner)
            return cls("log", lo, hi, points, cuts, ln_lower=ln_lo, log_step=h)
        if min_magnitude is None:
            raise InvalidParameter(
                f"{owner}: a log grid needs lower > 0 (got lower={lower!r}). For data with "
                "zeros or negative values pass min_magnitude=a > 0, the smallest non-zero "
                "magnitude to resolve, for a symmetric-log grid; or use Grid.linear."
            )
        a = check.check_positive(min_magnitude, "min_magnitude", owner)
        top = max(-lo, hi)
        if not a < top:
            raise InvalidParameter(
                f"{owner}: min_magnitude must be below max(|lower|, upper) = {top!r}. "
                f"Got {min_magnitude!r}."
            )
        ln_a = math.log(a)
        levels = _size_from(size, ratio, math.log(top) - ln_a, owner, "ratio")
        _check_size(2 * levels + 1, owner)
        h = (math.log(top) - ln_a) / (levels - 1)
        magnitudes = np.exp(ln_a + h * np.arange(levels, dtype=np.float64))
        magnitudes[0], magnitudes[-1] = a, top
        mag_cuts = np.exp(ln_a + h * (np.arange(-1, levels - 1, dtype=np.float64) + 0.5))
        negative = magnitudes <= -lo
        positive = magnitudes <= hi
        points = np.concatenate((-magnitudes[negative][::-1], [0.0], magnitudes[positive]))
        cuts = np.concatenate((-mag_cuts[negative][::-1], mag_cuts[positive]))
        cls._check_increasing(points, cuts, owner)
        zero = int(np.count_nonzero(negative))
        return cls("symlog", lo, hi, points, cuts, ln_lower=ln_a, log_step=h, zero=zero)

    @staticmethod
    def _check_increasing(points: FloatArray, cuts: FloatArray, owner: str) -> None:
        merged = np.empty(points.size + cuts.size)
        merged[0::2], merged[1::2] = points, cuts
        if not np.all(np.diff(merged) > 0):
            raise InvalidParameter(
                f"{owner}: the points are too close to be distinct float64 numbers; "
                "use fewer points (a larger ratio)."
            )

    # ------------------------------------------------------------------ attributes

    @property
    def size(self) -> int:
        """Number of points."""
        return int(self._points.size)

    @property
    def points(self) -> FloatArray:
        """The candidate outputs, sorted ascending (a read-only array)."""
        return self._points

    @property
    def cuts(self) -> FloatArray:
        """The snapping thresholds: ``x`` snaps to ``#{j : cuts[j] <= x}`` (read-only)."""
        return self._cuts

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return (
            f"Grid(kind={self.kind!r}, lower={self.lower!r}, upper={self.upper!r}, "
            f"size={self.size})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Grid):
            return NotImplemented
        return (
            self.kind == other.kind
            and self.lower == other.lower
            and self.upper == other.upper
            and np.array_equal(self._points, other._points)
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.lower, self.upper, self.size))

    # ------------------------------------------------------------------ snapping

    def snap(self, values: npt.ArrayLike) -> IntArray:
        """The grid index of every value (the rule of the module docstring).

        NaN has no index: it gets ``-1`` here (and is dropped by :meth:`histogram`).
        ``+-inf`` and values outside the bounds snap to the end points (clamping).
        """
        x = self._as_values(values, "Grid.snap")
        out = np.empty(x.size, dtype=np.int64)
        for start in range(0, x.size, _CHUNK):
            block = x[start : start + _CHUNK]
            index = self._index(block)
            index[index == self.size] = -1
            out[start : start + block.size] = index
        return out.reshape(np.shape(values))

    def histogram(self, values: npt.ArrayLike) -> IntArray:
        """Counts of the values snapped to each grid point: an int64 array of length ``size``.

        O(n + size) time, no sort, and O(size + block) extra memory: the values are
        processed in blocks of ``max(32768, size / 4)``. NaN is dropped; ``+-inf``
        and out-of-bounds values are clamped to the end points.

        Raises
        ------
        DataError
            Non-numeric values.
        """
        x = self._as_values(values, "Grid.histogram")
        counts = np.zeros(self.size + 1, dtype=np.int64)  # last cell: NaN, dropped
        # Small blocks stay in cache; on big grids, blocks of a quarter of the grid keep
        # bincount's O(size) per call below a quarter of the snapping work.
        chunk = max(_CHUNK, self.size // 4)
        for start in range(0, x.size, chunk):
            index = self._index(x[start : start + chunk])
            counts += np.bincount(index, minlength=self.size + 1)
        return counts[: self.size]

    @staticmethod
    def _as_values(values: npt.ArrayLike, owner: str) -> npt.NDArray[np.generic]:
        try:
            array = np.asarray(values)
        except (TypeError, ValueError) as err:
            raise DataError(f"{owner}: the data could not be read as a numeric array.") from err
        if array.dtype == np.bool_ or not (
            np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
        ):
            raise DataError(
                f"{owner}: the data must hold numbers (integer or float); got dtype {array.dtype}."
            )
        return array.reshape(-1)

    def _index(self, block: npt.NDArray[np.generic]) -> IntArray:
        """Indices of one block; NaN gets the extra index ``size``."""
        x = np.asarray(block, dtype=np.float64)
        last = self.size - 1
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            if self.kind == "linear":
                guess = (x - self.lower) / self._step
                guess += 0.5
            elif self.kind == "log":
                guess = np.maximum(x, self.lower)  # clamp first: log of <= 0 is not a number
                np.log(guess, out=guess)
                guess -= self._ln_lower
                guess /= self._log_step
                guess += 0.5
            else:
                guess = self._symlog_guess(x)
            np.clip(guess, 0.0, last, out=guess)
            nan = np.isnan(guess)
            if nan.any():
                guess[nan] = self.size
        index = guess.astype(np.int64)  # guess >= 0, so the cast is the floor
        # One correction step (the guess is within one of the rule's index).
        table = self._padded
        index += x >= table[index + 1]
        index -= x < table[index]
        return index

    def _symlog_guess(self, x: FloatArray) -> FloatArray:
        # level j of a magnitude: floor((ln|x| - ln a) / h + 1/2); j < 0 snaps to 0.
        level = np.abs(x)
        np.log(level, out=level)
        level -= self._ln_lower
        level /= self._log_step
        level += 1.5  # +1: level 0 is the zero point
        np.floor(level, out=level)
        np.maximum(level, 0.0, out=level)
        return self._zero + np.copysign(level, x)  # NaN stays NaN
