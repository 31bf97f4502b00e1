"""The value scales of ``dpkit describe``: grids, snapping and consistency.

A column's *scale* says which values a released statistic may take: integers for
integer-typed columns (an integer grid, values snapped to integers), round decimals
(1, 2 or 5 x 10^k steps) for other numbers, whole days and calendar bins for dates.
:func:`consistent_order_statistics` makes one column's percentiles and maximum
consistent by post-processing only. Everything here reads public information (the
schema, public ranges) and released values, never data.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import ndtri

from dpkit.analytics.engines import NUMBER_TYPES
from dpkit.report.model import Statistic


def normal_upper_quantile(p: float) -> float:
    """The ``z`` with ``P(Z > z) = p`` for a standard normal ``Z``: ``-ndtri(p)``, the
    double SciPy's ``norm.isf(p)`` returns, without importing ``scipy.stats`` (a fifth
    of a second of every ``dpkit describe``)."""
    return float(-ndtri(p))


#: Points of the linear grid of the percentile and max queries (over the released range).
GRID_SIZE = 10_001

#: Bins of the histogram between the released 5th and 95th percentiles.
HISTOGRAM_BINS = 20

_INTEGER_TYPES = tuple(t for t in NUMBER_TYPES if t.endswith(("INT", "INTEGER")))


def _magnitude_edges(integer: bool = False) -> list[float]:
    """Public bin edges: 0 and +-2^k for k in [-20, 62] (values beyond go to the end bins).

    For integer columns the fractional edges are left out (k >= 0 only): then 0, 1, 2-3
    and 4-7 fall in *adjacent* bins ``[0, 1)``, ``[1, 2)``, ``[2, 4)``, ``[4, 8)`` (and
    -1 in ``[-1, 0)``), so the windows of :func:`occupied_bins` can join a small integer
    scale's values, where 20 empty fractional bins would separate 0 from 1 (issue 28: a
    0-7 scale got the range [4, 7]).
    """
    positive = [2.0**k for k in range(0 if integer else -20, 63)]
    return [-x for x in reversed(positive)] + [0.0] + positive


def integer_bins(edges: Sequence[float]) -> list[int]:
    """Indices of the bins of :func:`_magnitude_edges` (with fractions) in which an
    integer can fall: ``[-2^(k+1), -2^k)`` for k >= 0 (``[-1, -0.5)`` holds -1),
    ``[0, 2^-20)`` (holds 0) and ``[2^k, 2^(k+1))`` for k >= 0. Run on these bins
    alone, the windows of :func:`occupied_bins` join integer values stored as
    DOUBLE (0/1 flags, 0-7 scores) as they do for integer types."""
    kept = []
    for i, (a, b) in enumerate(itertools.pairwise(edges)):
        if a >= 1.0 or b <= -1.0 or a == -1.0 or a == 0.0:
            kept.append(i)
    return kept


def consistent_order_statistics(
    percentiles: Sequence[float],
    maximum: float,
    low: float,
    high: float,
    *,
    trust_max: bool = True,
) -> tuple[list[float], float]:
    """Make one column's released percentiles and max agree (post-processing only).

    Every value is clipped to the released range ``[low, high]`` and the percentiles are
    made non-decreasing in their level. Then, with ``trust_max`` (the max's
    down-sensitivity bound is tighter than the percentiles' rank radius), the
    percentiles are capped at the max: a percentile above it is then the
    inverse-sensitivity mechanism's overshoot (on discrete data, into the gap above the
    largest value), not evidence of a larger maximum. Without it (small columns or
    budgets, where the max may sit far below the data), the max is raised to the 95th
    percentile instead, so the percentiles do not collapse onto a poor max.
    """
    top = min(max(maximum, low), high)
    levels = np.maximum.accumulate(np.clip(np.asarray(percentiles, dtype=np.float64), low, high))
    if trust_max:
        levels = np.minimum(levels, top)
    else:
        top = max(top, float(levels[-1]))
    return [float(v) for v in levels], float(top)


def _whole_days(statistic: Statistic) -> Statistic:
    """A date statistic rounded to whole days (its interval widened outwards)."""
    low, high = statistic.ci_low, statistic.ci_high
    assert statistic.estimate is not None  # a released mean
    return replace(
        statistic,
        estimate=round(statistic.estimate / _DAY) * _DAY,
        ci_low=None if low is None else math.floor(low / _DAY) * _DAY,
        ci_high=None if high is None else math.ceil(high / _DAY) * _DAY,
    )


@dataclass(frozen=True)
class _Scale:
    """How a column's values are gridded: from its public SQL type (and date range).

    ``integer``: integer types get integer grids, integer-aligned bins and snapped
    releases. ``date``: ``"DATE"``, ``"TIMESTAMP"`` (no time zone: wall-clock times,
    treated as UTC) or ``"TIMESTAMPTZ"`` (instants, shown in UTC), else ``""``.
    """

    integer: bool
    date: str
    date_range: tuple[float, float]

    @classmethod
    def of(cls, sql_type: str, date_range: tuple[float, float]) -> _Scale:
        upper = sql_type.upper()
        if upper.startswith("DATE"):
            return cls(False, "DATE", date_range)
        if upper.startswith("TIMESTAMP"):
            zoned = "TIME ZONE" in upper or upper.startswith("TIMESTAMPTZ")
            return cls(False, "TIMESTAMPTZ" if zoned else "TIMESTAMP", date_range)
        return cls(is_integer_type(sql_type), "", date_range)

    def notes(self) -> tuple[str, ...]:
        if self.date == "DATE":
            return ("Dates: shown as days (no time of day).",)
        if self.date == "TIMESTAMP":
            return ("TIMESTAMP without time zone: times as stored, read as UTC wall-clock.",)
        if self.date == "TIMESTAMPTZ":
            return ("TIMESTAMP WITH TIME ZONE: instants, shown in UTC.",)
        return ()

    @property
    def range_rule(self) -> str:
        if self.date:
            start, stop = (self.show(v) for v in self.date_range)
            return f"years of the public date range {start} to {stop} and one either side"
        return "power-of-two bins"

    def range_edges(self) -> list[float]:
        if not self.date:
            return _magnitude_edges(self.integer)
        start, stop = (_to_day(v) for v in self.date_range)
        first = start.astype("datetime64[Y]") - 1
        last = stop.astype("datetime64[Y]") + 1
        years = np.arange(first, last + 1, dtype="datetime64[Y]")
        return [_seconds(y) for y in years]

    def snap_range(self, low: float, high: float) -> tuple[float, float]:
        if self.integer:
            return float(math.floor(low)), float(max(math.ceil(high) - 1, math.floor(low) + 1))
        return low, high

    def support_bounds(self, low: float, high: float) -> tuple[float, float]:
        """Smallest and largest integer in ``[low, high]`` (integer columns)."""
        first = float(math.ceil(low))
        return first, max(first, float(math.floor(high)))

    def support(self, low: float, high: float) -> float:
        """Number of possible values in the released range (inf unless integer)."""
        if not self.integer:
            return math.inf
        first, last = self.support_bounds(low, high)
        return last - first + 1

    def grid_size(self, low: float, high: float) -> int:
        step = 1.0 if self.integer else _DAY if self.date == "DATE" else 0.0
        if not self.date and not self.integer:
            step = _decimal_step(low, high)
        if step and (high - low) / step + 1 <= GRID_SIZE + 0.5:
            return max(2, round((high - low) / step) + 1)  # grid points on round values
        return GRID_SIZE

    def rounding(self, low: float, high: float) -> float:
        """How far a value in ``[low, high]`` may be from the grid point it stands for.

        The percentile and max queries snap every value to the nearest point of the
        grid of :meth:`grid_size` points over the range, and their accuracy statements
        (ranks, values above) hold for those snapped data; :meth:`snap` may move the
        release once more. So a release is accurate, in raw data, up to half a grid
        step plus that snap: 0 when the grid is the data's own support (an integer
        type on the integers, a DATE on whole days).
        """
        size = self.grid_size(low, high)
        step = (high - low) / (size - 1)
        if self.integer:
            return 0.0 if step == 1.0 else step / 2 + 0.5
        if self.date == "DATE":
            return 0.0 if step == _DAY else step / 2 + _DAY / 2
        if self.date:
            return step / 2
        decimal = _decimal_step(low, high)
        offset = low / decimal - round(low / decimal)
        snapped = 0.0 if abs(offset) < 1e-6 else decimal / 2  # grid points off the step
        return step / 2 + snapped

    def show_rounding(self, rounding: float) -> str:
        """A rounding of :meth:`rounding` for readers: a number, or days for dates."""
        if self.date:
            days = rounding / _DAY
            return f"{days:.3g} day" + ("" if days == 1 else "s")
        return f"{rounding:.3g}"

    def snap(self, value: float, low: float = 0.0, high: float = 0.0) -> float:
        """A released grid value on the support: integers, whole days, or (numbers) the
        decimal step of :func:`_decimal_step` (post-processing)."""
        if self.integer:
            return float(round(value))
        if self.date == "DATE":
            return round(value / _DAY) * _DAY
        if not self.date and high > low:
            step = _decimal_step(low, high)
            digits = max(0, -math.floor(math.log10(step))) + 1
            return round(round(value / step) * step, digits)
        return value

    def histogram_edges(self, lo: float, hi: float, low: float, high: float) -> list[float]:
        """Bins over ``[lo, hi]`` (released p5, p95), plus an under- and an overflow bin."""
        if self.date:
            return _calendar_edges(lo, hi)
        if self.integer:
            start, stop = math.floor(lo), math.floor(hi) + 1
            width = max(1, math.ceil((stop - start) / HISTOGRAM_BINS))
            count = math.ceil((stop - start) / width)
            inner = [float(start + width * i) for i in range(count + 1)]
            return [inner[0] - width, *inner, inner[-1] + width]
        top = hi
        if not top > lo:  # a degenerate range: one grid step, so the bins stay distinct
            top = lo + max((high - low) / (GRID_SIZE - 1), abs(lo) * 1e-9, 1e-12)
        cuts = [float(v) for v in np.linspace(lo, top, HISTOGRAM_BINS + 1)]
        step = cuts[1] - cuts[0]
        return [cuts[0] - step, *cuts, cuts[-1] + step]

    def show(self, value: float) -> str:
        if not self.date:
            return f"{value:.6g}"
        return str(np.datetime64(int(value), "s").astype("datetime64[D]"))


def _decimal_step(low: float, high: float) -> float:
    """The smallest step 1, 2 or 5 times a power of ten giving at most GRID_SIZE points
    over ``[low, high]``: the range's ends are powers of two (or 0), so for ranges of a
    few units or more the grid holds the round numbers (1, 2.5, 4) discrete data sit on,
    and a percentile does not land just beside them."""
    raw = (high - low) / (GRID_SIZE - 1)
    exponent = math.floor(math.log10(raw))
    for mantissa in (1.0, 2.0, 5.0, 10.0):
        step = mantissa * 10.0**exponent
        if step >= raw * (1 - 1e-12):
            return step
    return 10.0 ** (exponent + 1)


def is_integer_type(sql_type: str) -> bool:
    """Whether a (public) SQL type holds integers only (integer types, DECIMAL(p, 0))."""
    upper = sql_type.upper().replace(" ", "")
    if upper.startswith(_INTEGER_TYPES):
        return True
    return upper.startswith(("DECIMAL(", "NUMERIC(")) and upper.endswith(",0)")


_DAY = 86_400.0


def _to_day(seconds: float) -> np.datetime64:
    day: np.datetime64 = np.datetime64(int(seconds), "s").astype("datetime64[D]")
    return day


def _seconds(moment: np.datetime64) -> float:
    return float(moment.astype("datetime64[s]").astype(np.int64))


def _calendar_edges(lo: float, hi: float) -> list[float]:
    """Calendar bins (days, months, quarters or years) covering ``[lo, hi]``, with one
    more bin either side for under- and overflow; at most about 50 bins."""
    first, last = _to_day(lo), _to_day(hi)
    days = int((last - first).astype(np.int64)) + 1
    unit, step = "Y", max(1, math.ceil(days / 365.25 / 30))
    if days <= 62:
        unit, step = "D", 1
    elif days <= 4 * 366:
        unit, step = "M", 1
    elif days <= 12 * 366:
        unit, step = "M", 3
    start = first.astype(f"datetime64[{unit}]")
    stop = last.astype(f"datetime64[{unit}]") + 1
    if unit == "Y":
        start = start - (start.astype(np.int64) % step)
    points = np.arange(start - step, stop + 2 * step, step)
    points = points[: np.searchsorted(points, stop, side="left") + 2]
    return [_seconds(p) for p in points]


#: Widths (in bins) of the windows whose summed noisy counts also mark bins occupied.
RANGE_WINDOWS = (1, 2, 4, 8)
#: Wider windows, tried only when no bin or window above is occupied: values spread
#: thinly over many power-of-two bins (1,566 small values straddling 0 were "too few
#: values" in issue 28). They may stretch the range over bins that are empty, which a
#: range found at all is worth; a range found by the narrow windows never uses them.
RANGE_FALLBACK_WINDOWS = (16, 32, 64)


def occupied_bins(
    counts: npt.ArrayLike,
    se: npt.ArrayLike,
    z: float,
    windows: Sequence[int] = RANGE_WINDOWS,
) -> list[int]:
    """Indices of the public bins a range should cover, from their noisy counts
    (post-processing only).

    A bin is occupied when its noisy count exceeds ``z`` standard errors. Values spread
    thinly over several adjacent bins (Seattle's precipitation: 43% of the days wet,
    spread over eight power-of-two bins, none above the threshold alone) are found by
    windows of 2, 4 and 8 adjacent bins: a window is occupied when the sum of the noisy
    counts of its bins *not already occupied* exceeds ``z`` times that sum's standard
    error, and then all its bins are. Excluding occupied bins keeps a large bin from
    stretching the range over its empty neighbours. ``z`` must account for the number of
    tests (about ``len(RANGE_WINDOWS)`` times the number of bins).
    """
    count = np.asarray(counts, dtype=np.float64)
    variance = np.asarray(se, dtype=np.float64) ** 2
    occupied = np.zeros(count.size, dtype=bool)
    for width in windows:
        if width > count.size:
            break
        free_count = np.where(occupied, 0.0, count)
        free_variance = np.where(occupied, 0.0, variance)
        kernel = np.ones(width)
        sums = np.convolve(free_count, kernel, mode="valid")
        sds = np.sqrt(np.convolve(free_variance, kernel, mode="valid"))
        hits = np.flatnonzero((sds > 0) & (sums > z * sds))
        for start in hits:
            occupied[start : start + width] = True
    return [int(i) for i in np.flatnonzero(occupied)]


#: A bin of the range query is "occupied" when its noisy count of persons exceeds
#: z standard errors, z chosen so that an empty bin passes with probability about
#: RANGE_FALSE_POSITIVE: one spurious bin far out would stretch the range (and every
#: grid on it) by orders of magnitude, so among ~170 bins this must be rare (about 1
#: column in 20,000). Gaussian noise: z = 5.0; Laplace noise (pure DP, heavier tails):
#: z = ln(1 / (2 p)) / sqrt(2) = 10.1.
RANGE_FALSE_POSITIVE = 3e-7


def _occupied(
    counts: np.ndarray[Any, Any],
    se: np.ndarray[Any, Any],
    z: float,
    passes: Sequence[Sequence[int]],
    widths: Sequence[int],
) -> list[int]:
    """The bins :func:`occupied_bins` marks in any pass (a pass: a subsequence of bins)."""
    marked: set[int] = set()
    for kept in passes:
        index = np.asarray(kept, dtype=np.int64)
        found = occupied_bins(counts[index], se[index], z, widths)
        marked.update(int(index[i]) for i in found)
    return sorted(marked)


def _range_z(laplace: bool) -> float:
    """Standard errors an empty bin's (or window's) noise exceeds with probability
    RANGE_FALSE_POSITIVE / len(RANGE_WINDOWS): a bin is tested once per narrow window
    width (occupied_bins), so a column's false-positive rate is RANGE_FALSE_POSITIVE
    per bin and pass; the second pass over the bins integers fall in (non-integer
    types) and the fallback windows (tried only when nothing else is found) add at
    most ``(len(RANGE_WINDOWS) + len(RANGE_FALLBACK_WINDOWS)) / len(RANGE_WINDOWS)``
    times that: under 1e-6 per bin. Sums of several Laplace noises have lighter tails
    than one Laplace noise of the same standard error, so the Laplace z is
    conservative for windows."""
    p = RANGE_FALSE_POSITIVE / len(RANGE_WINDOWS)
    if laplace:
        return math.log(1.0 / (2.0 * p)) / math.sqrt(2.0)
    return normal_upper_quantile(p)
