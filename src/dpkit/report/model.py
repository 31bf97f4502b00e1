"""The summary data model: what a private summary of a dataset released, and at what cost.

These frozen dataclasses are neutral: they hold released numbers and their privacy
metadata, and know nothing about how they were computed (a Session, a script, a
test) or how they are shown (terminal, HTML, JSON). Everything in them must already
be differentially private (or public): the renderers print what they are given.

Conventions
-----------
- Every number is a finite float; a missing interval or standard error is ``None``.
- Sequences are stored as tuples (the objects are immutable); constructors accept
  any sequence.
- ``budget`` fields are :class:`~dpkit.accounting.Guarantee` values; ``None`` marks a
  statistic computed by post-processing of other releases (it spends nothing more).
- A statistic or histogram whose ``unit`` is ``EPOCH_SECONDS`` is a point in
  time, in seconds since 1970-01-01T00:00:00 UTC; renderers show it as a date (without
  a time of day when the value is a whole day).
- Fields added after the first version of the JSON schema have defaults, so documents
  written before them still read.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypeAlias

import numpy as np

from dpkit.accounting.guarantees import Guarantee
from dpkit.errors import InvalidParameter
from dpkit.mechanisms import ErrorBound, Release

__all__ = [
    "COLUMN_KINDS",
    "EPOCH_SECONDS",
    "LIMITS",
    "BudgetShare",
    "CategoryCount",
    "ColumnKind",
    "ColumnSummary",
    "DatasetSummary",
    "HistogramSummary",
    "Statistic",
]

ColumnKind: TypeAlias = Literal["numeric", "categorical", "date"]
COLUMN_KINDS: tuple[ColumnKind, ...] = ("numeric", "categorical", "date")

#: Unit of a value that is a point in time: seconds since the Unix epoch, UTC.
EPOCH_SECONDS = "epoch_seconds"
#: Values of :attr:`Statistic.limit`: the estimate is, with high probability, a lower
#: (or upper) bound of the true value rather than an estimate on both sides.
LIMITS: tuple[str, ...] = ("", "lower", "upper")


def _finite(value: object, name: str, owner: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameter.for_parameter(name, owner, "a finite float", value)
    result = float(value)
    if not math.isfinite(result):
        raise InvalidParameter.for_parameter(name, owner, "a finite float", value)
    return result


def _optional_finite(value: object, name: str, owner: str) -> float | None:
    return None if value is None else _finite(value, name, owner)


def _confidence(value: object, owner: str) -> float | None:
    if value is None:
        return None
    level = _finite(value, "confidence", owner)
    if not 0.0 < level < 1.0:
        raise InvalidParameter.for_parameter("confidence", owner, "a float in (0, 1)", value)
    return level


def _interval(low: float | None, high: float | None, owner: str) -> None:
    if (low is None) != (high is None):
        raise InvalidParameter(f"{owner}: give both ci_low and ci_high, or neither.")
    if low is not None and high is not None and low > high:
        raise InvalidParameter(
            f"{owner}: ci_low must be <= ci_high. Got ci_low={low!r}, ci_high={high!r}."
        )


def _budget(value: object, name: str, owner: str, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, Guarantee):
        expected = "a Guarantee (PureDP, ApproxDP, ZCDP, RDP)" + (" or None" if optional else "")
        raise InvalidParameter.for_parameter(name, owner, expected, value)


def _text(value: object, name: str, owner: str, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value):
        expected = "a string" if empty else "a non-empty string"
        raise InvalidParameter.for_parameter(name, owner, expected, value)
    return value


def _tuple_of(value: object, kind: type, name: str, owner: str) -> tuple[object, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise InvalidParameter.for_parameter(name, owner, f"a sequence of {kind.__name__}", value)
    items = tuple(value)
    for item in items:
        if not isinstance(item, kind):
            raise InvalidParameter.for_parameter(
                name, owner, f"a sequence of {kind.__name__}", type(item).__name__
            )
    return items


@dataclass(frozen=True)
class Statistic:
    """One released number with its accuracy and its privacy cost.

    Parameters
    ----------
    name:
        What it is: ``"count"``, ``"mean"``, ``"median"``, ``"p90"``, ``"max"``, ...
    estimate:
        The differentially private estimate, or ``None`` when it is withheld (see
        ``withheld``).
    std_error:
        Standard deviation of the estimate's noise (or an estimate of its error), or ``None``.
    ci_low, ci_high:
        A confidence interval at level ``confidence``, or both ``None``.
    confidence:
        The interval's level in (0, 1), e.g. 0.95; ``None`` when there is no interval.
    mechanism:
        How it was released, for readers: ``"Laplace(scale=2.0)"``, ``"post-processing"``.
    budget:
        The privacy cost of this statistic alone, or ``None`` for post-processing.
    unit:
        Free text shown after the numbers (``"rows"``, ``"minutes"``), or
        ``EPOCH_SECONDS`` for a point in time.
    limit:
        ``""`` for a two-sided estimate; ``"lower"`` when the estimate is (with high
        probability) a lower bound of the true value (the shifted-inverse maximum),
        ``"upper"`` for an upper bound. Renderers show ``>= x`` / ``<= x``.
    caveat:
        A short public remark shown next to the interval, about a bias the interval
        does not cover (e.g. how much clamping to a range may move), or ``""``.
    rounding:
        For a value released on a grid (percentiles, maxima): its accuracy statement
        holds for the data rounded to that grid, each value moved by at most this
        much (in the statistic's unit), so on tied data the release may lie up to
        ``rounding`` away from values of the stated rank. 0 when the grid is the
        data's own support (integers, days) or there is no grid.
    withheld:
        Why the statistic is not released (``estimate`` is then ``None``), e.g. its
        accuracy statement at this size and budget would say nothing useful; ``""``
        for a released statistic.
    rank_radius:
        For an order statistic (percentile, max, min): its accuracy in ranks -- the
        release lies between the values of ranks ``r - rank_radius`` and
        ``r + rank_radius`` of the data (for a max, the values the release may lie
        below); ``None`` otherwise.
    rank_count:
        The released count of values that ``rank_radius`` refers to (``None`` when
        not known).
    """

    name: str
    estimate: float | None
    std_error: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float | None = None
    mechanism: str = ""
    budget: Guarantee | None = None
    unit: str = ""
    limit: str = ""
    caveat: str = ""
    rounding: float = 0.0
    withheld: str = ""
    rank_radius: int | None = None
    rank_count: float | None = None

    def __post_init__(self) -> None:
        owner = "Statistic"
        _text(self.name, "name", owner)
        _text(self.withheld, "withheld", owner, empty=True)
        if (self.estimate is None) != bool(self.withheld):
            raise InvalidParameter(
                f"{owner} {self.name!r}: estimate is None exactly when the statistic is "
                "withheld (with its reason in 'withheld')."
            )
        if self.estimate is not None:
            object.__setattr__(self, "estimate", _finite(self.estimate, "estimate", owner))
        if self.rank_radius is not None and (
            isinstance(self.rank_radius, bool)
            or not isinstance(self.rank_radius, int)
            or self.rank_radius < 0
        ):
            raise InvalidParameter.for_parameter(
                "rank_radius", owner, "an int >= 0 or None", self.rank_radius
            )
        object.__setattr__(
            self, "rank_count", _optional_finite(self.rank_count, "rank_count", owner)
        )
        std = _optional_finite(self.std_error, "std_error", owner)
        if std is not None and std < 0:
            raise InvalidParameter.for_parameter("std_error", owner, "a float >= 0", std)
        object.__setattr__(self, "std_error", std)
        object.__setattr__(self, "ci_low", _optional_finite(self.ci_low, "ci_low", owner))
        object.__setattr__(self, "ci_high", _optional_finite(self.ci_high, "ci_high", owner))
        _interval(self.ci_low, self.ci_high, owner)
        object.__setattr__(self, "confidence", _confidence(self.confidence, owner))
        if self.ci_low is not None and self.confidence is None:
            raise InvalidParameter(f"{owner} {self.name!r}: an interval needs its confidence.")
        _text(self.mechanism, "mechanism", owner, empty=True)
        _budget(self.budget, "budget", owner, optional=True)
        _text(self.unit, "unit", owner, empty=True)
        _text(self.caveat, "caveat", owner, empty=True)
        if self.limit not in LIMITS:
            raise InvalidParameter.for_parameter("limit", owner, f"one of {LIMITS}", self.limit)
        rounding = _finite(self.rounding, "rounding", owner)
        if rounding < 0:
            raise InvalidParameter.for_parameter("rounding", owner, "a float >= 0", rounding)
        object.__setattr__(self, "rounding", rounding)

    @classmethod
    def from_release(
        cls, name: str, release: Release[Any], *, unit: str = "", mechanism: str | None = None
    ) -> Statistic:
        """A statistic from a scalar dpkit :class:`~dpkit.mechanisms.Release`.

        With an :class:`~dpkit.mechanisms.ErrorBound`, the interval is the release
        plus or minus its half-width and the standard error is the noise's standard
        deviation; other accuracy statements (ranks, down-sensitivity) are in data
        terms, not value terms, so they give no interval here. ``mechanism``
        defaults to the release's mechanism name.
        """
        value = float(np.asarray(release.value, dtype=np.float64))
        error = release.error
        low = high = std = level = None
        if isinstance(error, ErrorBound):
            low, high = value - error.half_width, value + error.half_width
            std, level = error.standard_deviation, error.confidence
        return cls(
            name=name,
            estimate=value,
            std_error=std,
            ci_low=low,
            ci_high=high,
            confidence=level,
            mechanism=release.mechanism if mechanism is None else mechanism,
            budget=release.guarantee,
            unit=unit,
        )


@dataclass(frozen=True)
class HistogramSummary:
    """A private histogram of a numeric or date column over public bin edges.

    ``counts[i]`` estimates the number of rows in ``[edges[i], edges[i + 1])``;
    ``ci_low``/``ci_high`` are per-bin intervals at level ``confidence`` (empty
    tuples when not given). Edges are public (chosen without looking at the data), or
    post-processing of releases (e.g. released percentiles).

    Counts are the raw noisy releases and may be negative; renderers draw and print
    them clamped at 0 (post-processing) and keep the raw values in the JSON.

    ``open_ended``: the first bin is really ``(-inf, edges[1])`` and the last
    ``[edges[-2], inf)`` (under- and overflow bins: values outside the range are
    counted there, never clamped into the edge bins of the range). ``integer``: the
    values are integers, so a bin ``[a, b)`` holds ``a, ..., b - 1`` (shown as such).
    """

    edges: tuple[float, ...]
    counts: tuple[float, ...]
    ci_low: tuple[float, ...] = ()
    ci_high: tuple[float, ...] = ()
    confidence: float | None = None
    mechanism: str = ""
    budget: Guarantee | None = None
    unit: str = ""
    open_ended: bool = False
    integer: bool = False

    def __post_init__(self) -> None:
        owner = "HistogramSummary"
        for name in ("edges", "counts", "ci_low", "ci_high"):
            values = getattr(self, name)
            if isinstance(values, str) or not isinstance(values, Sequence):
                raise InvalidParameter.for_parameter(name, owner, "a sequence of floats", values)
            object.__setattr__(self, name, tuple(_finite(v, name, owner) for v in values))
        edges, counts = self.edges, self.counts
        if len(edges) < 2 or any(b <= a for a, b in itertools.pairwise(edges)):
            raise InvalidParameter(
                f"{owner}: edges must be at least 2 strictly increasing floats; "
                f"got {len(edges)} edges."
            )
        if len(counts) != len(edges) - 1:
            raise InvalidParameter(
                f"{owner}: need one count per bin ({len(edges) - 1}); got {len(counts)}."
            )
        if self.ci_low or self.ci_high:
            if not len(self.ci_low) == len(self.ci_high) == len(counts):
                raise InvalidParameter(f"{owner}: need one ci_low and one ci_high per bin.")
            for low, high in zip(self.ci_low, self.ci_high, strict=True):
                _interval(low, high, owner)
            if self.confidence is None:
                raise InvalidParameter(f"{owner}: intervals need their confidence.")
        object.__setattr__(self, "confidence", _confidence(self.confidence, owner))
        _text(self.mechanism, "mechanism", owner, empty=True)
        _budget(self.budget, "budget", owner, optional=True)
        _text(self.unit, "unit", owner, empty=True)
        for flag in ("open_ended", "integer"):
            if not isinstance(getattr(self, flag), bool):
                raise InvalidParameter.for_parameter(flag, owner, "a bool", getattr(self, flag))
        if self.open_ended and len(counts) < 3:
            raise InvalidParameter(f"{owner}: an open-ended histogram needs at least 3 bins.")

    @classmethod
    def from_release(
        cls, edges: Sequence[float], release: Release[Any], *, unit: str = ""
    ) -> HistogramSummary:
        """A histogram from a dpkit release of the vector of bin counts over ``edges``."""
        counts = np.asarray(release.value, dtype=np.float64).ravel()
        error = release.error
        low: tuple[float, ...] = ()
        high: tuple[float, ...] = ()
        level = None
        if isinstance(error, ErrorBound):
            low = tuple((counts - error.half_width).tolist())
            high = tuple((counts + error.half_width).tolist())
            level = error.confidence
        return cls(
            edges=tuple(edges),
            counts=tuple(counts.tolist()),
            ci_low=low,
            ci_high=high,
            confidence=level,
            mechanism=release.mechanism,
            budget=release.guarantee,
            unit=unit,
        )


@dataclass(frozen=True)
class CategoryCount:
    """A privately released count for one category (a key that passed selection)."""

    category: str
    estimate: float
    std_error: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float | None = None

    def __post_init__(self) -> None:
        owner = "CategoryCount"
        _text(self.category, "category", owner, empty=True)
        object.__setattr__(self, "estimate", _finite(self.estimate, "estimate", owner))
        object.__setattr__(self, "std_error", _optional_finite(self.std_error, "std_error", owner))
        object.__setattr__(self, "ci_low", _optional_finite(self.ci_low, "ci_low", owner))
        object.__setattr__(self, "ci_high", _optional_finite(self.ci_high, "ci_high", owner))
        _interval(self.ci_low, self.ci_high, owner)
        object.__setattr__(self, "confidence", _confidence(self.confidence, owner))
        if self.ci_low is not None and self.confidence is None:
            raise InvalidParameter(f"{owner}: an interval needs its confidence.")


@dataclass(frozen=True)
class ColumnSummary:
    """What was released about one column.

    ``statistics`` (count, mean, quantiles, max, ...), an optional ``histogram``
    (numeric and date columns) and ``top_categories`` (categorical columns, largest
    first as given). ``notes`` are short public remarks shown with the column
    (clamping bounds used, how categories were selected, ...). ``sql_type`` is the
    column's type in the (public) schema, or ``""`` when not known.
    """

    name: str
    kind: ColumnKind
    statistics: tuple[Statistic, ...] = ()
    histogram: HistogramSummary | None = None
    top_categories: tuple[CategoryCount, ...] = ()
    notes: tuple[str, ...] = ()
    sql_type: str = ""
    missing: Statistic | None = None
    alerts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        owner = "ColumnSummary"
        if self.missing is not None and not isinstance(self.missing, Statistic):
            raise InvalidParameter.for_parameter(
                "missing", owner, "a Statistic or None", type(self.missing).__name__
            )
        object.__setattr__(self, "alerts", _tuple_of(self.alerts, str, "alerts", owner))
        _text(self.name, "name", owner)
        if self.kind not in COLUMN_KINDS:
            raise InvalidParameter.for_parameter("kind", owner, f"one of {COLUMN_KINDS}", self.kind)
        object.__setattr__(
            self, "statistics", _tuple_of(self.statistics, Statistic, "statistics", owner)
        )
        if self.histogram is not None and not isinstance(self.histogram, HistogramSummary):
            raise InvalidParameter.for_parameter(
                "histogram", owner, "a HistogramSummary or None", type(self.histogram).__name__
            )
        object.__setattr__(
            self,
            "top_categories",
            _tuple_of(self.top_categories, CategoryCount, "top_categories", owner),
        )
        object.__setattr__(self, "notes", _tuple_of(self.notes, str, "notes", owner))
        _text(self.sql_type, "sql_type", owner, empty=True)


@dataclass(frozen=True)
class BudgetShare:
    """One line of the budget split: what spent how much.

    ``fraction`` is the share of the total budget (in [0, 1]) for display, as the
    producer of the summary counts it (e.g. of epsilon, or of rho); ``None`` hides it.
    """

    label: str
    budget: Guarantee
    mechanism: str = ""
    fraction: float | None = None

    def __post_init__(self) -> None:
        owner = "BudgetShare"
        _text(self.label, "label", owner)
        _budget(self.budget, "budget", owner, optional=False)
        _text(self.mechanism, "mechanism", owner, empty=True)
        if self.fraction is not None:
            share = _finite(self.fraction, "fraction", owner)
            if not 0.0 <= share <= 1.0:
                raise InvalidParameter.for_parameter("fraction", owner, "a float in [0, 1]", share)
            object.__setattr__(self, "fraction", share)


@dataclass(frozen=True)
class DatasetSummary:
    """A private summary of a dataset: the released numbers and their total privacy cost.

    The formats live with their renderers: :func:`dpkit.report.to_json` and
    :func:`dpkit.report.from_json` write and read it as JSON, and
    :func:`dpkit.report.html_report` makes the HTML report. ``dp.describe`` returns a
    :class:`~dpkit.report.profile.DescribedDataset`, this model with ``to_json``,
    ``to_html`` and a notebook view attached.

    Parameters
    ----------
    source:
        The dataset's name or path, as the analyst gave it (public).
    privacy_unit:
        The column that identifies a person, or ``None`` when each row is one person.
    budget:
        What the summary spent, in the Session's query currency (a ``PureDP`` or a
        ``ZCDP``; with an ``(epsilon, delta)`` budget, the zCDP part only).
    budget_split:
        What each part spent.
    columns:
        One :class:`ColumnSummary` per summarised column.
    rows_estimate:
        A private estimate of the number of rows, or ``None``.
    secure:
        ``False`` when any noise came from a seeded (insecure) generator: the numbers
        are then reproducible but NOT private, and every renderer says so loudly.
    created:
        When the summary was made (a timezone-aware datetime).
    title:
        Heading for reports.
    notes:
        Short public remarks shown under the header (e.g. contribution bounds).
    requested:
        The Session's budget as the analyst asked for it (e.g. ``ApproxDP(1, 1e-6)``),
        or ``None`` when not known.
    guarantee:
        The guarantee the summary as a whole satisfies, everything included (e.g.
        the zCDP part converted to ``(epsilon, delta)`` plus the delta spent on private
        key selection), or ``None`` when not known (then ``budget`` is the whole cost).
    max_rows:
        With a privacy unit: the rows kept per person in each query, so row counts
        are counts of rows *kept*; ``None`` otherwise.
    alerts:
        Dataset-level flags for the Overview (e.g. "this table is too small for 60
        columns at this budget"), from public information and releases only.
    """

    source: str
    privacy_unit: str | None
    budget: Guarantee
    budget_split: tuple[BudgetShare, ...]
    columns: tuple[ColumnSummary, ...]
    rows_estimate: Statistic | None
    secure: bool
    created: datetime
    title: str = "Differentially private summary"
    notes: tuple[str, ...] = field(default=())
    requested: Guarantee | None = None
    guarantee: Guarantee | None = None
    max_rows: int | None = None
    alerts: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        owner = "DatasetSummary"
        object.__setattr__(self, "alerts", _tuple_of(self.alerts, str, "alerts", owner))
        _text(self.source, "source", owner)
        if self.privacy_unit is not None:
            _text(self.privacy_unit, "privacy_unit", owner)
        _budget(self.budget, "budget", owner, optional=False)
        object.__setattr__(
            self, "budget_split", _tuple_of(self.budget_split, BudgetShare, "budget_split", owner)
        )
        object.__setattr__(
            self, "columns", _tuple_of(self.columns, ColumnSummary, "columns", owner)
        )
        if self.rows_estimate is not None and not isinstance(self.rows_estimate, Statistic):
            raise InvalidParameter.for_parameter(
                "rows_estimate", owner, "a Statistic or None", type(self.rows_estimate).__name__
            )
        if not isinstance(self.secure, bool):
            raise InvalidParameter.for_parameter("secure", owner, "a bool", self.secure)
        if not isinstance(self.created, datetime) or self.created.utcoffset() is None:
            raise InvalidParameter.for_parameter(
                "created", owner, "a timezone-aware datetime", self.created
            )
        _text(self.title, "title", owner)
        object.__setattr__(self, "notes", _tuple_of(self.notes, str, "notes", owner))
        _budget(self.requested, "requested", owner, optional=True)
        _budget(self.guarantee, "guarantee", owner, optional=True)
        if self.max_rows is not None and (
            isinstance(self.max_rows, bool)
            or not isinstance(self.max_rows, int)
            or self.max_rows < 1
        ):
            raise InvalidParameter.for_parameter(
                "max_rows", owner, "an int >= 1 or None", self.max_rows
            )
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise InvalidParameter(f"{owner}: column names must be unique; got {names}.")
