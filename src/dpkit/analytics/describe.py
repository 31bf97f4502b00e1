"""A private summary of every column of a table: what ``dpkit describe`` runs.

:func:`describe` spends a Session's budget on a fixed plan of queries, chosen from the
public schema only (column names and types), and returns a
:class:`~dpkit.report.DatasetSummary` ready for the terminal, HTML and JSON renderers.

The plan (each query's share of the budget is fixed before anything runs, so the
split is public and the Session's filter accounts for it):

* **rows** -- the number of rows (and of persons, with a privacy unit): one share;
* **numeric and date columns** -- one share each, spent in four queries: (0) the order
  of magnitude of the values: noisy counts over public power-of-two bins, whose
  occupied span becomes the column's range (clamping bounds found privately; 15% of
  the share); (1) the 5th, 25th, 50th, 75th and 95th percentiles (inverse-sensitivity
  quantiles, :mod:`dpkit.estimators.quantiles`) and the maximum (shifted inverse
  sensitivity, :mod:`dpkit.estimators.monotone`) on a linear grid over that range
  (50%); (2) the count of values and their mean clamped to the range (15%); (3) a
  20-bin histogram between the released 5th and 95th percentiles (20%). Dates are
  summarised as seconds since 1970-01-01 UTC;
* **categorical columns** -- one share each: the categories are selected privately
  (noisy count of distinct persons per category above a threshold; needs an
  ``ApproxDP`` budget) and the ``top`` largest are reported with their counts. Under a
  ``PureDP`` or ``ZCDP`` budget no category can be selected without a public list, so
  categorical columns are skipped (with a note).

The privacy unit column itself is never summarised. Every number in the summary is
either a release or post-processing of releases, so the whole summary satisfies the
Session's budget (its filter refuses any query that would overspend; a query that
fails spends nothing).

Why this module is long (~520 lines): the plan and the per-kind summaries of
``dpkit describe`` share their budget-split constants; issue 14 reworks it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from dpkit.accounting.guarantees import ZCDP, ApproxDP, Guarantee, PureDP
from dpkit.analytics._engine import NUMBER_TYPES
from dpkit.analytics.query import Query
from dpkit.analytics.session import Session
from dpkit.errors import BudgetExceeded, DataError, InvalidParameter
from dpkit.report.model import (
    EPOCH_SECONDS,
    BudgetShare,
    CategoryCount,
    ColumnKind,
    ColumnSummary,
    DatasetSummary,
    HistogramSummary,
    Statistic,
)

__all__ = ["DescribePlan", "column_kind", "describe", "plan_describe"]

#: Percentiles released for numeric and date columns; the outer two bound the histogram.
PERCENTILES: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)
#: Bins of the histogram between the released 5th and 95th percentiles.
HISTOGRAM_BINS = 20
#: With a privacy unit: groups (categories, histogram bins) of one query a person counts
#: in; the engine keeps that many by a keyed hash of the person's own rows.
MAX_GROUPS_PER_PERSON = 5
#: describe refuses to run on less than this fraction of the Session's budget.
MIN_REMAINING = 0.01
#: Points of the linear grid of the percentile and max queries (over the released range).
GRID_SIZE = 10_001
#: How a numeric column's share is split between its four queries.
RANGE_SHARE, ORDER_SHARE, MEAN_SHARE, HISTOGRAM_SHARE = 0.15, 0.5, 0.15, 0.2
#: A power-of-two bin is "occupied" when its noisy count exceeds this many standard errors
#: (about a 1e-4 false-positive rate per bin for Gaussian noise, smaller for Laplace).
RANGE_Z = 4.0

_DATE_TYPES = ("DATE", "TIMESTAMP")
_CATEGORICAL_TYPES = ("VARCHAR", "BOOLEAN", "ENUM")


def column_kind(sql_type: str) -> ColumnKind | None:
    """The summary kind of a column from its (public) SQL type, or None to skip it."""
    upper = sql_type.upper()
    if "[" in upper or upper.startswith(("STRUCT", "MAP", "UNION", "LIST")):
        return None  # nested values are not summarised
    if upper.startswith(_DATE_TYPES):
        return "date"
    if upper.startswith(NUMBER_TYPES):
        return "numeric"
    if upper.startswith(_CATEGORICAL_TYPES):
        return "categorical"
    return None


@dataclass(frozen=True)
class DescribePlan:
    """What :func:`describe` will run, decided from public information only.

    Attributes
    ----------
    columns:
        ``(name, kind)`` of every column summarised, in table order.
    skipped:
        ``(name, reason)`` of the columns left out.
    share:
        The fraction of the Session's total budget given to each query group (rows,
        then one per column); they add up to at most 1.
    max_rows:
        Rows per person kept per query (contribution bound), or None with one row per
        person.
    """

    columns: tuple[tuple[str, ColumnKind], ...]
    skipped: tuple[tuple[str, str], ...]
    share: float
    max_rows: int | None

    @property
    def steps(self) -> int:
        """Number of queries the plan runs (for progress bars)."""
        return 1 + sum(4 if kind != "categorical" else 1 for _, kind in self.columns)


def plan_describe(
    session: Session,
    *,
    columns: Sequence[str] | None = None,
    max_rows: int | None = None,
) -> DescribePlan:
    """Decide which columns :func:`describe` summarises and how the budget is split.

    Uses the table's schema and the Session's budget type only; spends nothing.
    """
    owner = "describe"
    schema = session.columns
    unit = session.privacy_unit
    wanted = list(schema) if columns is None else list(columns)
    missing = [c for c in wanted if c not in schema]
    if missing:
        raise DataError(
            f"{owner}: no column(s) {missing} in the table. Available columns: {sorted(schema)}."
        )
    selection_possible = isinstance(session.budget, ApproxDP)
    chosen: list[tuple[str, ColumnKind]] = []
    skipped: list[tuple[str, str]] = []
    for name in wanted:
        if name == unit:
            continue
        kind = column_kind(schema[name])
        if kind is None:
            skipped.append((name, f"type {schema[name]} is not summarised"))
        elif kind == "categorical" and not selection_possible:
            skipped.append(
                (name, "categories can only be selected privately with an (epsilon, delta) budget")
            )
        else:
            chosen.append((name, kind))
    rows = (10 if max_rows is None else max_rows) if unit is not None else None
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
        raise InvalidParameter.for_parameter("max_rows", owner, "an int >= 1", max_rows)
    share = 1.0 / (1 + len(chosen))
    return DescribePlan(tuple(chosen), tuple(skipped), share, rows)


def describe(
    session: Session,
    *,
    columns: Sequence[str] | None = None,
    max_rows: int | None = None,
    top: int = 10,
    confidence: float = 0.95,
    source: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> DatasetSummary:
    """Release a private summary of every column of ``session``'s table.

    Parameters
    ----------
    session:
        The Session to spend; the summary uses all of its *remaining* budget, split as
        :func:`plan_describe` says (equal shares: one for the row count, one per
        column).
    columns:
        Columns to summarise (default: all but the privacy unit).
    max_rows:
        With a privacy unit: rows per person kept in each query (default 10). Each
        person then changes a count by at most ``max_rows``.
    top:
        Categories reported per categorical column (the largest noisy counts).
    confidence:
        Level of the confidence intervals.
    source:
        Name of the dataset shown in reports.
    progress:
        Called with a short label before each query (for progress bars).

    Returns
    -------
    DatasetSummary
        Every number in it is a differentially private release (or post-processing of
        one); ``budget`` is the total the summary spent.

    Privacy
    -------
    Runs at most the Session's remaining budget under the Session's accountant (see
    :class:`~dpkit.Session`); each query's share is fixed in advance from public
    information only.
    """
    owner = "describe"
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InvalidParameter.for_parameter("top", owner, "an int >= 1", top)
    if not (isinstance(confidence, float) and 0.0 < confidence < 1.0):
        raise InvalidParameter.for_parameter("confidence", owner, "a float in (0, 1)", confidence)
    plan = plan_describe(session, columns=columns, max_rows=max_rows)
    total = session.remaining
    if _amount(total) <= MIN_REMAINING * (_amount(total) + _amount(session.spent)):
        raise BudgetExceeded(
            f"{owner}: the Session has {total} left, under {MIN_REMAINING:.0%} of its budget; "
            "a summary would be pure noise. Open a Session with a new budget (or ledger).",
            requested="the remaining budget",
            remaining=total,
        )
    shares = _Shares(session, total, plan.share)
    tell = progress or (lambda _label: None)
    runner = _Runner(session, plan, shares, confidence)

    tell("rows")
    rows_estimate, persons = runner.rows()
    summaries: list[ColumnSummary] = []
    for name, kind in plan.columns:
        tell(name)
        if kind == "categorical":
            summaries.append(runner.categorical(name, top))
        else:
            summaries.append(runner.numeric(name, kind, tell))
    notes = [f"{name}: skipped ({reason})" for name, reason in plan.skipped]
    if plan.max_rows is not None:
        notes.insert(
            0,
            f"Privacy unit {session.privacy_unit!r}: each query keeps at most "
            f"{plan.max_rows} rows per person (a rule depending only on that person's "
            "rows), so row counts are of the rows kept.",
        )
    if persons is not None:
        notes.insert(0, f"Persons (private estimate): {_interval_text(persons)}.")
    return DatasetSummary(
        source=source or session.source,
        privacy_unit=session.privacy_unit,
        budget=total,
        budget_split=tuple(shares.lines),
        columns=tuple(summaries),
        rows_estimate=rows_estimate,
        secure=runner.secure,
        created=datetime.now(UTC),
        notes=tuple(notes),
    )


class _Shares:
    """Turns fractions of the budget into the Session's currency, and records them."""

    def __init__(self, session: Session, total: Guarantee, share: float) -> None:
        self._total = total
        self.share = share
        self.lines: list[BudgetShare] = []
        # The Session's query currency: PureDP for PureDP budgets, ZCDP otherwise.
        self._currency = session.remaining

    def take(self, fraction: float, label: str, mechanism: str) -> Guarantee:
        """The guarantee worth ``fraction`` of the total, rounded down, recorded."""
        part = _scaled(self._currency, fraction)
        self.lines.append(BudgetShare(label, part, mechanism, fraction))
        return part

    def skip(self, fraction: float, label: str) -> None:
        """Record a share left unspent (it stays in the Session)."""
        self.lines.append(BudgetShare(label, _scaled(self._currency, fraction), "unspent", 0.0))


def _amount(guarantee: Guarantee) -> float:
    if isinstance(guarantee, PureDP):
        return guarantee.epsilon
    if isinstance(guarantee, ZCDP):
        return guarantee.rho
    raise InvalidParameter(
        f"describe: the Session's query currency must be PureDP or ZCDP; got {guarantee!r}."
    )


def _scaled(guarantee: Guarantee, fraction: float) -> Guarantee:
    # Round down so that the shares never add up to more than the total.
    if isinstance(guarantee, PureDP):
        return PureDP(math.nextafter(guarantee.epsilon * fraction, 0.0))
    if isinstance(guarantee, ZCDP):
        return ZCDP(math.nextafter(guarantee.rho * fraction, 0.0))
    raise InvalidParameter(
        f"describe: the Session's query currency must be PureDP or ZCDP; got {guarantee!r}."
    )


class _Runner:
    """Runs the plan's queries against one Session."""

    def __init__(
        self, session: Session, plan: DescribePlan, shares: _Shares, confidence: float
    ) -> None:
        self._session = session
        self._plan = plan
        self._shares = shares
        self._confidence = confidence
        self.secure = True

    def _query(self) -> Query:
        query = Query()
        if self._plan.max_rows is not None:
            query = query.bound(max_rows=self._plan.max_rows)
        return query

    def _grouped(self, query: Query) -> Query:
        if self._plan.max_rows is not None:
            query = query.bound(max_groups=MAX_GROUPS_PER_PERSON)
        return query

    def _evaluate(self, query: Query, budget: Guarantee) -> Any:
        result = self._session.evaluate(query, budget=budget, confidence=self._confidence)
        self.secure = self.secure and all(r.secure for r in result.releases)
        return result

    def rows(self) -> tuple[Statistic, Statistic | None]:
        """The number of rows (at most ``max_rows`` per person) and of persons."""
        budget = self._shares.take(self._shares.share, "rows, persons", "count")
        query = self._query().count(name="rows")
        if self._plan.max_rows is not None:
            query = query.count_distinct(name="persons")
        result = self._evaluate(query, budget)
        rows = _statistic(result, "rows", "rows", self._confidence, budget, unit="rows")
        if self._plan.max_rows is None:
            return rows, None
        persons = _statistic(result, "persons", "persons", self._confidence, budget)
        return rows, persons

    def categorical(self, name: str, top: int) -> ColumnSummary:
        budget = self._shares.take(self._shares.share, name, "key selection + count")
        query = self._grouped(self._query().group_by(name, keys="private").count())
        result = self._evaluate(query, budget)
        columns = result.columns
        order = np.argsort(-np.asarray(columns["count"], dtype=np.float64), kind="stable")
        counts = []
        for i in order[:top]:
            counts.append(
                CategoryCount(
                    category=str(columns[name][i]),
                    estimate=float(columns["count"][i]),
                    std_error=_finite_or_none(columns["count_se"][i]),
                    ci_low=_finite_or_none(columns["count_low"][i]),
                    ci_high=_finite_or_none(columns["count_high"][i]),
                    confidence=self._confidence,
                )
            )
        notes = (
            f"{len(order)} categories passed private selection (threshold "
            f"{result.selection_threshold}); the {min(top, len(order))} largest are shown.",
        )
        return ColumnSummary(name, "categorical", top_categories=tuple(counts), notes=notes)

    def numeric(self, name: str, kind: ColumnKind, tell: Callable[[str], None]) -> ColumnSummary:
        """Range, count, percentiles, max, clamped mean and histogram of one column."""
        unit = EPOCH_SECONDS if kind == "date" else ""
        base = self._query()
        column = name
        if kind == "date":
            # Dates are summarised as seconds since the Unix epoch (a public, per-row map).
            column = f"{name}__epoch"
            base = base.with_column(column, f"epoch({_quote(name)})")
        share = self._shares.share
        statistics: list[Statistic] = []
        notes: list[str] = []

        # 1. Order of magnitude: noisy counts of persons over public power-of-two bins
        #    (each person counts once per bin, in at most a few bins); the occupied span
        #    bounds the next queries' grids.
        budget = self._shares.take(share * RANGE_SHARE, f"{name}: range", "histogram")
        edges = _magnitude_edges()
        result = self._evaluate(
            self._grouped(base.group_by_bins(column, edges).count_distinct(name="count")), budget
        )
        counts = np.asarray(result.columns["count"], dtype=np.float64)
        se = np.asarray(result.columns["count_se"], dtype=np.float64)
        order = np.argsort(np.asarray(result.columns[f"{column}_bin"]), kind="stable")
        counts, se = counts[order], se[order]
        occupied = np.flatnonzero(counts > RANGE_Z * se)
        if occupied.size == 0:
            notes.append("Too few values for a range at this budget: nothing more released.")
            self._shares.skip(share * (1 - RANGE_SHARE), f"{name}: not spent")
            return ColumnSummary(name, kind, notes=tuple(notes))
        del counts, se
        low, high = edges[occupied[0]], edges[occupied[-1] + 1]
        notes.append(
            f"Range found privately: [{low:.6g}, {high:.6g}] (power-of-two bins whose noisy "
            f"count of persons exceeds {RANGE_Z:g} standard errors); values outside are "
            "clamped."
        )

        # 2. Percentiles (inverse sensitivity) and maximum (shifted inverse sensitivity).
        tell(f"{name} percentiles")
        budget = self._shares.take(share * ORDER_SHARE, f"{name}: percentiles, max", "quantiles")
        query = base.quantile(
            column, PERCENTILES, bounds=(low, high), grid_size=GRID_SIZE, name="q"
        ).max(column, bounds=(low, high), grid_size=GRID_SIZE, name="max")
        result = self._evaluate(query, budget)
        levels = [float(result.columns[f"q_{q:g}"][0]) for q in PERCENTILES]
        levels = list(np.maximum.accumulate(levels))  # post-processing: monotone in q
        for q, value in zip(PERCENTILES, levels, strict=True):
            statistics.append(
                Statistic(
                    name=f"p{round(q * 100)}",
                    estimate=value,
                    mechanism="inverse sensitivity (exponential mechanism)",
                    budget=None,
                    unit=unit,
                )
            )
        statistics.append(
            Statistic(
                name="max",
                estimate=float(result.columns["max"][0]),
                mechanism="shifted inverse sensitivity (noisy binary search)",
                budget=None,
                unit=unit,
            )
        )
        notes.append(
            "Percentiles and max: accuracy is a rank / down-sensitivity bound, not an "
            "interval; the max never exceeds the true maximum (with high probability)."
        )

        # 3. Count and mean (clamped to the released range), and a histogram between
        #    the released 5th and 95th percentiles.
        lo, hi = levels[0], levels[-1]
        if not hi > lo:
            hi = lo + (high - low) / (GRID_SIZE - 1)
        budget = self._shares.take(share * MEAN_SHARE, f"{name}: count, mean", "count, mean")
        query = (
            base.filter(f"{_quote(column)} IS NOT NULL")
            .count(name="count")
            .mean(column, bounds=(low, high), name="mean")
        )
        result = self._evaluate(query, budget)
        count = _statistic(result, "count", "count", self._confidence, budget, unit="values")
        statistics.insert(0, count)
        statistics.append(_statistic(result, "mean", "mean", self._confidence, budget, unit=unit))
        notes.append(
            f"Mean of values clamped to the released range; histogram over the released "
            f"p5-p95 range [{lo:.6g}, {hi:.6g}]."
        )
        bins = np.linspace(lo, hi, HISTOGRAM_BINS + 1)
        budget = self._shares.take(share * HISTOGRAM_SHARE, f"{name}: histogram", "histogram")
        result = self._evaluate(
            self._grouped(base.group_by_bins(column, bins.tolist()).count()), budget
        )
        order = np.argsort(np.asarray(result.columns[f"{column}_bin"]), kind="stable")
        hist_counts = np.asarray(result.columns["count"], dtype=np.float64)[order]
        hist_low = np.asarray(result.columns["count_low"], dtype=np.float64)[order]
        hist_high = np.asarray(result.columns["count_high"], dtype=np.float64)[order]
        histogram = HistogramSummary(
            edges=tuple(bins.tolist()),
            counts=tuple(hist_counts.tolist()),
            ci_low=tuple(hist_low.tolist()),
            ci_high=tuple(hist_high.tolist()),
            confidence=self._confidence,
            mechanism=", ".join(sorted({r.mechanism for r in result.releases})),
            budget=budget,
            unit=unit,
        )
        return ColumnSummary(
            name, kind, statistics=tuple(statistics), histogram=histogram, notes=tuple(notes)
        )


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _magnitude_edges() -> list[float]:
    """Public bin edges: 0 and +-2^k for k in [-20, 62] (values beyond go to the end bins)."""
    positive = [2.0**k for k in range(-20, 63)]
    return [-x for x in reversed(positive)] + [0.0] + positive


def _interval_text(statistic: Statistic) -> str:
    text = f"{statistic.estimate:,.0f}"
    if statistic.ci_low is not None and statistic.ci_high is not None:
        level = round(100 * (statistic.confidence or 0.0))
        text += f" ({level}% CI {statistic.ci_low:,.0f} to {statistic.ci_high:,.0f})"
    return text


def _finite_or_none(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def _statistic(
    result: Any, column: str, name: str, confidence: float, budget: Guarantee, unit: str = ""
) -> Statistic:
    cols: Mapping[str, Any] = result.columns
    low, high = (
        _finite_or_none(cols[f"{column}_low"][0]),
        _finite_or_none(cols[f"{column}_high"][0]),
    )
    if low is None or high is None:
        low = high = None
    return Statistic(
        name=name,
        estimate=float(cols[column][0]),
        std_error=_finite_or_none(cols[f"{column}_se"][0]),
        ci_low=low,
        ci_high=high,
        confidence=confidence if low is not None else None,
        mechanism=", ".join(sorted({r.mechanism for r in result.releases})),
        budget=budget,
        unit=unit,
    )
