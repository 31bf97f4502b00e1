"""A private summary of every column of a table: what ``dpkit describe`` runs.

:func:`describe` spends a Session's budget on a fixed plan of queries, chosen from the
public schema only (column names and types), and returns a
:class:`~dpkit.report.DatasetSummary` ready for the terminal, HTML and JSON renderers.

The run goes in stages (issue 28), each planned from the releases before it
(post-processing): with a privacy unit and no ``max_rows``, the bound is chosen
privately; the rows (and persons) are counted; text columns in which no category can
pass key selection are skipped and their shares go to the other columns
(:mod:`dpkit.analytics._describe_stages` holds these decisions); and each numeric
column releases only the order statistics whose accuracy at its released count is
useful, the others being *withheld* (their share goes to its histogram). The base
split (each share is fixed before anything runs, then only moved by those decisions):

* **rows** -- the number of rows (and of persons, with a privacy unit): one share;
* **every column** -- one share each, in proportion to its weight (``weights``,
  default 1; the row count's weight is 1): the shares are ``w / (1 + sum of the
  columns' w)``, rounded down so that they never add up to more than the budget;
* **numeric and date columns** -- fixed fractions of the column's share: (0) the range:
  noisy counts of persons over public bins (powers of two; for dates and times, the
  years of a public date range), whose occupied span becomes the column's range (15%).
  Then, decided by post-processing of that release: an integer column (public schema
  type, or a non-integer type whose noisy count of non-integer values is within noise of
  0: :data:`INTEGER_CHECK_SHARE`, spent only when the range holds few integers) with
  at most :data:`LOW_CARDINALITY` integers in its range gets the count and
  mean (25%) and noisy counts per value (60%); any other column the 5th to 95th
  percentiles (inverse sensitivity, :mod:`dpkit.estimators.quantiles`) and the maximum
  (shifted inverse sensitivity, :mod:`dpkit.estimators.monotone`, a lower bound of the
  true maximum) on a grid over the range -- integers or whole days where the type says
  so (50%) -- made consistent by :func:`consistent_order_statistics`; the count and
  the clamped mean (15%); and a histogram between the released 5th and 95th
  percentiles with under- and overflow bins (20%; calendar bins for dates);
* **boolean columns** -- one share: the count of values and the share of true;
The privacy unit column itself is never summarised, nor a column whose name starts
with ``__`` (reserved for dpkit's internal columns; the plan skips it with a note).
Every number in the summary is either a release or post-processing of releases, so
the whole summary satisfies the Session's budget (its filter refuses any query that
would overspend; a query that fails spends nothing).

Why this module is long (~930 lines, past the ~400 the design asks): the plan and the
per-kind summary queries share their budget-split constants; the value scales (grids,
snapping, consistency) are in :mod:`dpkit.analytics._describe_scales`. The per-kind
query runner (``_Runner``) is the next piece to move out (issue 14 follow-up).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from fractions import Fraction
from typing import Any

import numpy as np
from scipy.stats import norm

from dpkit.accounting._math.rounding import fraction_up
from dpkit.accounting.guarantees import ZCDP, ApproxDP, Guarantee, PureDP
from dpkit.analytics._describe_scales import (
    RANGE_FALLBACK_WINDOWS,
    RANGE_WINDOWS,
    _Scale,
    _whole_days,
    consistent_order_statistics,
    integer_bins,
    is_integer_type,
    occupied_bins,
)
from dpkit.analytics._describe_stages import (
    MAX_ROWS_LADDER,
    WITHHOLD_FRACTION,
    OrderAccuracy,
    OrderChoice,
    categories_possible,
    choose_order_statistics,
    common_alerts,
    max_rows_from_counts,
    missing_share,
    numeric_alerts,
)
from dpkit.analytics.engines import NUMBER_TYPES
from dpkit.analytics.query import Query
from dpkit.analytics.query import _check_name as check_column_name
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

__all__ = [
    "DEFAULT_DATE_RANGE",
    "DescribePlan",
    "column_kind",
    "consistent_order_statistics",
    "describe",
    "is_integer_type",
    "plan_describe",
]

#: Percentiles released for numeric and date columns; the outer two bound the histogram.
PERCENTILES: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)
#: With a privacy unit: groups (categories, histogram bins) of one query a person counts
#: in; the engine keeps that many by a keyed hash of the person's own rows.
MAX_GROUPS_PER_PERSON = 5
#: describe refuses to run on less than this fraction of the Session's budget.
MIN_REMAINING = 0.01
#: How a numeric column's share is split between its four queries.
RANGE_SHARE, ORDER_SHARE, MEAN_SHARE, HISTOGRAM_SHARE = 0.15, 0.5, 0.15, 0.2
#: Integer columns whose released range holds at most this many integers get counts
#: per value instead of percentiles (a post-processing of the range release) ...
LOW_CARDINALITY = 32
#: ... and their share after the range goes to the count and mean, and the counts.
FEW_MEAN_SHARE, FEW_COUNTS_SHARE = 0.25, 0.6
#: A non-integer column (DOUBLE, FLOAT, DECIMAL(p, s > 0)) whose released range holds
#: at most LOW_CARDINALITY integers may still hold integers only (0/1 flags, 1-5
#: ratings stored as DOUBLE): this share of its column's budget counts, noisily, its
#: values that are not integers (the rest of the column's queries are scaled down to
#: make room), and it is summarised as an integer column when that count is within
#: INTEGER_CHECK_Z standard errors of 0 -- with probability 1 - INTEGER_CHECK_FALSE
#: (Gaussian noise; about 1 - 0.006 for Laplace noise) when the values are integers.
INTEGER_CHECK_SHARE = 0.05
INTEGER_CHECK_FALSE = 1e-3
INTEGER_CHECK_Z = float(norm.isf(INTEGER_CHECK_FALSE))
#: A column whose range came out [0, 1] is labelled "share of 1" only when its count of
#: values outside [0, 1] and its under- and overflow bins are each at most this many
#: standard errors (a 0/1 column passes all three with probability ~1 - 1e-5; a
#: population column whose range came out [0, 1] fails: issue 28). Otherwise its mean
#: is labelled "mean clamped to [0, 1]".
ZERO_ONE_Z = 4.5
#: ... and when the upper confidence limit of its values outside [0, 1] is at most this
#: share of the lower limit of its count: noise alone must not hide a few percent of
#: 2s, 3s, ... (sklearn's digits: a pixel column of 0-8, range [0, 1], labelled "share
#: of 1"). Then "share of 1" is true up to that share; else "mean clamped to [0, 1]",
#: true in any case.
ZERO_ONE_OUTSIDE = 0.02
#: With a privacy unit: the share of the rows' budget that counts rows at DROPPED_FACTOR
#: times ``max_rows`` per person, to estimate how many rows the bound dropped.
DROPPED_SHARE, DROPPED_FACTOR = 0.25, 10
#: With a privacy unit and no ``max_rows``: the share of the budget that chooses it
#: (counts of rows kept at growing bounds; :meth:`_Runner.choose_max_rows`).
MAX_ROWS_SHARE = 0.05
#: A text column's share spent first on a count of its values and of its distinct
#: values: a column in which no category can reach the selection threshold (an
#: identifier, a free-text field) is then skipped and the rest of its share goes to the
#: other columns (issue 28: such columns took 37% and 58% of two tables' budgets).
PRECHECK_SHARE = 0.1
#: Per-column weights (``describe(weights=...)``) may differ from each other and from the
#: row count's weight 1 by at most this factor: a share a million times smaller than
#: another would be pure noise.
MAX_WEIGHT_RATIO = 1e6
#: Public range of dates and times when the user gives none (the range query counts
#: persons per year over it, with one more bin either side for anything outside).
DEFAULT_DATE_RANGE: tuple[date, date] = (date(1900, 1, 1), date(2100, 1, 1))
#: A bin of the range query is "occupied" when its noisy count of persons exceeds
#: z standard errors, z chosen so that an empty bin passes with probability about
#: RANGE_FALSE_POSITIVE: one spurious bin far out would stretch the range (and every
#: grid on it) by orders of magnitude, so among ~170 bins this must be rare (about 1
#: column in 20,000). Gaussian noise: z = 5.0; Laplace noise (pure DP, heavier tails):
#: z = ln(1 / (2 p)) / sqrt(2) = 10.1.
RANGE_FALSE_POSITIVE = 3e-7
#: Weight (relative to the count's and the mean's 1) of the count of values outside the
#: range, in the count-and-mean query.
OUTSIDE_WEIGHT = 0.5


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


#: Why a column whose name starts with "__" (or is empty) is skipped.
RESERVED_NAME_REASON = (
    "its name is empty or starts with '__', which is reserved for dpkit's internal "
    "columns and which no query can name; rename the column to summarise it"
)


def _nameable(name: str) -> bool:
    """Whether a query can name the column (the Query builder's own rule, applied to
    the public schema when the plan is made -- not when the query is built, after
    other queries have spent)."""
    try:
        check_column_name(name, "describe")
    except InvalidParameter:
        return False
    return True


def fresh_name(stem: str, taken: Iterable[str]) -> str:
    """``stem``, or else ``stem_2``, ``stem_3``, ...: the first name equal to none of
    ``taken``, even ignoring case (DuckDB and Spark resolve names case-insensitively).

    describe's derived columns (``<date>__epoch``, ``<bool>__flag``, ...) are named with
    it: a table column of the same name must neither make a query fail after others
    spent nor be read in the derived column's place. The choice depends on the public
    schema only, so ``--dry-run`` (:func:`dpkit.cli._dryrun.describe_plan`) makes it
    the same way.
    """
    folded = {t.casefold() for t in taken} | {t.lower() for t in taken}
    name, suffix = stem, 1
    while name.casefold() in folded or name.lower() in folded:
        suffix += 1
        name = f"{stem}_{suffix}"
    return name


def derive(query: Query, schema: Iterable[str], stem: str, expression: str) -> tuple[Query, str]:
    """``query`` with a derived column computed by ``expression``, under a fresh name
    (:func:`fresh_name` against the table's columns and the query's derived ones)."""
    name = fresh_name(stem, [*schema, *(n for n, _ in query.derived)])
    return query.with_column(name, expression), name


def count_name(group: str) -> str:
    """The name of a count grouped by column ``group``: its outputs (``count``,
    ``count_se``, ``count_low``, ``count_high``) must not overwrite the group's keys."""
    name = "count"
    while group.casefold() in {f"{name}{s}".casefold() for s in ("", "_se", "_low", "_high")}:
        name = f"{name}_"
    return name


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
        The fraction of the Session's total budget given to the row count (weight 1).
    shares:
        The fraction given to each column, in the order of ``columns`` (weight ``w``:
        ``w / (1 + sum of the weights)``, rounded down); with ``share`` they add up to
        at most 1 (exactly 1 up to rounding).
    weights:
        Each column's weight, in the order of ``columns`` (1 unless ``weights`` said
        otherwise).
    max_rows:
        Rows per person kept per query (contribution bound), or None with one row per
        person.
    date_range:
        The public range of dates (seconds since the epoch) over which the range of
        a date or time column is searched.
    """

    columns: tuple[tuple[str, ColumnKind], ...]
    skipped: tuple[tuple[str, str], ...]
    share: float
    max_rows: int | None
    date_range: tuple[float, float] = (-2208988800.0, 4102444800.0)
    shares: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        # Equal shares when none are given (the plan before per-column weights).
        if not self.shares:
            object.__setattr__(self, "shares", (self.share,) * len(self.columns))
        if not self.weights:
            object.__setattr__(self, "weights", (1.0,) * len(self.columns))

    def share_of(self, column: str) -> float:
        """The fraction of the Session's total budget given to ``column``."""
        names = [name for name, _ in self.columns]
        return self.shares[names.index(column)]

    @property
    def steps(self) -> int:
        """Number of queries the plan runs (for progress bars)."""
        return 1 + sum(4 if kind != "categorical" else 1 for _, kind in self.columns)


def plan_describe(
    session: Session,
    *,
    columns: Sequence[str] | None = None,
    max_rows: int | None = None,
    date_range: tuple[date, date] | None = None,
    weights: Mapping[str, float] | None = None,
) -> DescribePlan:
    """Decide which columns :func:`describe` summarises and how the budget is split.

    Uses the table's schema and the Session's budget type only; spends nothing.
    ``weights`` maps summarised columns to positive weights (default 1; the row count's
    weight is 1): each column's share of the budget is its weight over the sum of all
    weights. A column not in the table is a :class:`~dpkit.errors.DataError`; a column
    not summarised, or a weight that is not a positive finite number (or more than
    :data:`MAX_WEIGHT_RATIO` times another), an :class:`~dpkit.errors.InvalidParameter`.
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
        if not _nameable(name):
            skipped.append((name, RESERVED_NAME_REASON))
        elif kind is None:
            skipped.append((name, f"type {schema[name]} is not summarised"))
        elif (
            kind == "categorical"
            and not selection_possible
            and not schema[name].upper().startswith("BOOLEAN")
        ):
            skipped.append(
                (name, "categories can only be selected privately with an (epsilon, delta) budget")
            )
        else:
            chosen.append((name, kind))
    rows = (10 if max_rows is None else max_rows) if unit is not None else None
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 1):
        raise InvalidParameter.for_parameter("max_rows", owner, "an int >= 1", max_rows)
    span = _date_range(date_range, owner)
    column_weights = _weights(weights, chosen, skipped, schema, unit, owner)
    share, shares = _split_shares(column_weights)
    return DescribePlan(
        tuple(chosen), tuple(skipped), share, rows, span, shares, tuple(column_weights)
    )


def _weights(
    weights: Mapping[str, float] | None,
    chosen: Sequence[tuple[str, ColumnKind]],
    skipped: Sequence[tuple[str, str]],
    schema: Mapping[str, str],
    unit: str | None,
    owner: str,
) -> list[float]:
    """The chosen columns' weights (1 by default), checked: public information only."""
    if weights is None:
        return [1.0] * len(chosen)
    if not isinstance(weights, Mapping):
        raise InvalidParameter.for_parameter(
            "weights", owner, "a mapping of column names to positive numbers", weights
        )
    unknown = [c for c in weights if c not in schema]
    if unknown:
        raise DataError(
            f"{owner}: weights name column(s) {unknown} that the table does not have. "
            f"Available columns: {sorted(schema)}."
        )
    names = {name for name, _ in chosen}
    reasons = dict(skipped)
    for column, weight in weights.items():
        if column not in names:
            why = (
                "it is the privacy unit"
                if column == unit
                else reasons.get(column, "it is not among the columns summarised")
            )
            raise InvalidParameter(
                f"{owner}: a weight for column {column!r}, which is not summarised ({why})."
            )
        ok = (
            isinstance(weight, numbers.Real)
            and not isinstance(weight, bool)
            and math.isfinite(weight)
            and weight > 0
        )
        if not ok:
            raise InvalidParameter(
                f"{owner}: the weight of column {column!r} must be a positive finite "
                f"number; got {weight!r}."
            )
    values = [float(weights.get(name, 1.0)) for name, _ in chosen]
    every = [1.0, *values]  # the row count's weight is 1
    if max(every) > MAX_WEIGHT_RATIO * min(every):
        raise InvalidParameter(
            f"{owner}: weights may differ by a factor of at most {MAX_WEIGHT_RATIO:g} "
            f"(from each other and from the row count's 1); got {min(every):g} to "
            f"{max(every):g}."
        )
    return values


def _split_shares(weights: Sequence[float]) -> tuple[float, tuple[float, ...]]:
    """The row count's share (weight 1) and each column's: weight over the sum of the
    weights, computed exactly and rounded down, so the shares add up to at most 1."""
    exact = [Fraction(1), *(Fraction(w) for w in weights)]
    total = sum(exact, Fraction(0))
    shares = [_float_down(w / total) for w in exact]
    return shares[0], tuple(shares[1:])


def _float_down(value: Fraction) -> float:
    """The largest float at most ``value``."""
    number = float(value)
    return math.nextafter(number, 0.0) if Fraction(number) > value else number


def _date_range(value: tuple[date, date] | None, owner: str) -> tuple[float, float]:
    start, stop = DEFAULT_DATE_RANGE if value is None else value
    ok = (
        isinstance(start, date)
        and isinstance(stop, date)
        and not isinstance(start, datetime)
        and not isinstance(stop, datetime)
        and start < stop
    )
    if not ok:
        raise InvalidParameter.for_parameter("date_range", owner, "two dates (start < stop)", value)
    epoch = date(1970, 1, 1)
    return float((start - epoch).days * 86_400), float((stop - epoch).days * 86_400)


def describe(
    session: Session,
    *,
    columns: Sequence[str] | None = None,
    max_rows: int | None = None,
    top: int = 10,
    confidence: float = 0.95,
    source: str | None = None,
    progress: Callable[[str], None] | None = None,
    date_range: tuple[date, date] | None = None,
    weights: Mapping[str, float] | None = None,
) -> DatasetSummary:
    """Release a private summary of every column of ``session``'s table.

    Parameters
    ----------
    session:
        The Session to spend; the summary uses all of its *remaining* budget, split as
        :func:`plan_describe` says (one share for the row count, one per column, in
        proportion to ``weights``; equal by default).
    columns:
        Columns to summarise (default: all but the privacy unit).
    max_rows:
        With a privacy unit: rows per person kept in each query. Each person then
        changes a count by at most ``max_rows``. Default: chosen privately with
        :data:`MAX_ROWS_SHARE` of the budget (:meth:`_Runner.choose_max_rows`).
    top:
        Categories reported per categorical column (the largest noisy counts).
    confidence:
        Level of the confidence intervals.
    source:
        Name of the dataset shown in reports.
    progress:
        Called with a short label before each query (for progress bars).
    date_range:
        Public range ``(start, stop)`` of the date and time columns' values (default
        :data:`DEFAULT_DATE_RANGE`, 1900-01-01 to 2100-01-01); values outside it are
        counted in the range query's under- and overflow bins and clamped.
    weights:
        Relative budget weights of columns, e.g. ``{"income": 4}`` (default 1 each;
        the row count's weight is 1): a column's share is its weight over the sum of
        all weights, so a heavier column gets more accurate releases and the others
        less accurate ones. Checked before anything is spent.

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
    plan = plan_describe(
        session, columns=columns, max_rows=max_rows, date_range=date_range, weights=weights
    )
    total = session.remaining
    if _amount(total) <= MIN_REMAINING * (_amount(total) + _amount(session.spent)):
        raise BudgetExceeded(
            f"{owner}: the Session has {total} left, under {MIN_REMAINING:.0%} of its budget; "
            "a summary would be pure noise. Open a Session with a new budget (or ledger).",
            requested="the remaining budget",
            remaining=total,
        )
    shares = _Shares(session, total, plan)
    tell = progress or (lambda _label: None)
    runner = _Runner(session, plan, shares, confidence)
    first_record = len(session.history)
    notes: list[str] = []

    # Stage 1: the bound on rows per person (when not given), then the counts of rows
    # and persons. Everything after is planned from these releases (post-processing).
    if session.privacy_unit is not None and max_rows is None:
        tell("max_rows")
        shares.shrink(1.0 - MAX_ROWS_SHARE)
        _, chosen_note, unspent = runner.choose_max_rows(MAX_ROWS_SHARE)
        shares.reallocate({}, unspent)
        notes.append(chosen_note)
        plan = runner.plan
    tell("rows")
    rows_estimate, persons, dropped = runner.rows()

    # Stage 2: text columns that cannot release a category at this size are skipped
    # (free, from the rows' release and the selection threshold, or after a cheap
    # count of distinct values), and their shares go to the other columns.
    skipped = runner.precheck_categories(tell)
    shares.reallocate({name: fraction for name, (_, fraction) in skipped.items()})

    # Stage 3: every other column, on its (possibly larger) share.
    summaries: list[ColumnSummary] = []
    for name, kind in plan.columns:
        tell(name)
        if name in skipped:
            summaries.append(skipped[name][0])
        elif kind == "categorical":
            summaries.append(runner.categorical(name, top))
        else:
            summaries.append(runner.numeric(name, kind, tell))
    notes.extend(f"{name}: skipped ({reason})" for name, reason in plan.skipped)
    if any(w != 1.0 for w in plan.weights):
        notes.append(_weights_note(plan))
    if plan.max_rows is not None:
        notes.insert(
            0,
            f"Privacy unit {session.privacy_unit!r}: each query keeps at most "
            f"{plan.max_rows} rows per person (a rule depending only on that person's "
            "rows), so row counts are of the rows kept.",
        )
    if dropped is not None:
        notes.insert(1, dropped)
    if persons is not None:
        notes.insert(0, f"Persons (private estimate): {_count_text(persons)}.")
    alerts = _dataset_alerts(summaries)
    spent, guarantee, selection = _run_guarantee(session, first_record)
    if selection > 0:
        notes.append(
            f"Private key selection (categories) spent δ = {selection:.3g}; the "
            f"guarantee above includes it."
        )
    return DatasetSummary(
        source=source or session.source,
        privacy_unit=session.privacy_unit,
        budget=spent,
        budget_split=tuple(shares.lines),
        columns=tuple(summaries),
        rows_estimate=rows_estimate,
        secure=runner.secure,
        created=datetime.now(UTC),
        notes=tuple(notes),
        requested=session.budget,
        guarantee=guarantee,
        max_rows=plan.max_rows,
        alerts=tuple(alerts),
    )


def _dataset_alerts(columns: Sequence[ColumnSummary]) -> list[str]:
    """Dataset-level flags: columns that used budget and released nothing, columns
    whose percentiles were withheld (post-processing of the column summaries)."""
    alerts = []
    nothing = [c.name for c in columns if "used budget, released nothing" in c.alerts]
    withheld = [c.name for c in columns if "percentiles withheld at this n" in c.alerts]
    numeric = [c for c in columns if c.kind != "categorical"]
    if numeric and len(withheld) > len(numeric) / 2:
        alerts.append(
            f"Percentiles withheld in {len(withheld)} of {len(numeric)} numeric and date "
            "columns: this table is small for this many columns at this budget (a larger "
            "budget, or fewer columns with --columns, would release them)."
        )
    if nothing:
        alerts.append(f"Used budget and released nothing: {', '.join(nothing)}.")
    return alerts


def _weights_note(plan: DescribePlan) -> str:
    """The budget weights of a weighted plan and the shares they give (public)."""
    parts = [f"rows 1 ({plan.share:.1%})"]
    rest = [s for w, s in zip(plan.weights, plan.shares, strict=True) if w == 1.0]
    for (name, _), weight, share in zip(plan.columns, plan.weights, plan.shares, strict=True):
        if weight != 1.0:
            parts.append(f"{name} {weight:g} ({share:.1%})")
    if rest:
        parts.append(f"other columns 1 ({rest[0]:.1%} each)")
    return "Budget weights (public, set before the run): " + ", ".join(parts) + "."


def _run_guarantee(session: Session, first: int) -> tuple[Guarantee, Guarantee, float]:
    """What this run spent (query currency), the guarantee it satisfies, and the delta
    it spent on key selection -- summed exactly from the Session's ledger records."""
    records = list(session.history)[first:]
    currency = sum((r.amount[0] for r in records), Fraction(0))
    selection = sum((r.amount[1] for r in records if len(r.amount) > 1), Fraction(0))
    spent = _scaled(session.remaining, 1.0)  # the currency's type
    amount = fraction_up(currency)  # rounded up: never understate a spend
    spent = PureDP(amount) if isinstance(spent, PureDP) else ZCDP(amount)
    approx = session.remaining_approx
    if approx is None or not isinstance(spent, ZCDP):
        return spent, spent, 0.0
    # delta_sel-approximate rho-zCDP implies (eps(rho, d), d + delta_sel)-DP for the
    # Session's conversion delta d (dpkit.analytics._accounting, point 3).
    delta_sel = fraction_up(selection)
    zero = ApproxDP(0.0, approx.delta)
    converted = spent.to_approx(approx.delta) if spent.rho > 0 else zero
    delta = math.nextafter(converted.delta + delta_sel, math.inf)  # rounded up
    return spent, ApproxDP(converted.epsilon, min(delta, 1.0)), delta_sel


class _Shares:
    """Turns fractions of the budget into the Session's currency, and records them."""

    def __init__(self, session: Session, total: Guarantee, plan: DescribePlan) -> None:
        self._total = total
        self.share = plan.share  # the row count's
        self._columns = {name: s for (name, _), s in zip(plan.columns, plan.shares, strict=True)}
        self.lines: list[BudgetShare] = []
        # The Session's query currency: PureDP for PureDP budgets, ZCDP otherwise.
        self.currency = session.remaining

    def of(self, column: str) -> float:
        """The fraction of the total budget given to ``column``."""
        return self._columns[column]

    def take(self, fraction: float, label: str, mechanism: str) -> Guarantee:
        """The guarantee worth ``fraction`` of the total, rounded down, recorded."""
        part = _scaled(self.currency, fraction)
        self.lines.append(BudgetShare(label, part, mechanism, fraction))
        return part

    def skip(self, fraction: float, label: str) -> None:
        """Record a share left unspent (it stays in the Session)."""
        self.lines.append(BudgetShare(label, _scaled(self.currency, fraction), "unspent", 0.0))

    def shrink(self, factor: float) -> None:
        """Scale every share not yet spent by ``factor`` < 1 (rounded down): to make room
        for a stage the plan did not count (the private choice of ``max_rows``)."""
        self.share = math.nextafter(self.share * factor, 0.0)
        self._columns = {n: math.nextafter(f * factor, 0.0) for n, f in self._columns.items()}

    def reallocate(self, freed: Mapping[str, float], extra: float = 0.0) -> None:
        """Drop the columns of ``freed`` (name -> the fraction of the budget they leave
        unspent) and give those fractions, and ``extra``, to the other columns in
        proportion to their shares (rounded down, so the total never grows): a decision
        made from released numbers only (post-processing), so the new split is private
        too."""
        extra += sum(freed.values())
        rest = {n: f for n, f in self._columns.items() if n not in freed}
        total = sum(rest.values())
        if total <= 0.0 or extra <= 0.0:
            return
        # Exact arithmetic, each share rounded down: the shares never add up to more.
        grow = (Fraction(total) + Fraction(extra)) / Fraction(total)
        self._columns = {
            n: (_float_down(Fraction(f) * grow) if n in rest else 0.0)
            for n, f in self._columns.items()
        }


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
        self.plan = plan
        self._shares = shares
        self._confidence = confidence
        self.secure = True
        # Releases later stages plan from (post-processing).
        self.rows_count: Statistic | None = None
        self.persons_count: Statistic | None = None
        self.prechecked: dict[str, float] = {}  # column -> fraction its pre-check spent

    def _query(self) -> Query:
        query = Query()
        if self.plan.max_rows is not None:
            query = query.bound(max_rows=self.plan.max_rows)
        return query

    def _grouped(self, query: Query) -> Query:
        if self.plan.max_rows is not None:
            query = query.bound(max_groups=MAX_GROUPS_PER_PERSON)
        return query

    def _derive(self, query: Query, stem: str, expression: str) -> tuple[Query, str]:
        return derive(query, self._session.columns, stem, expression)

    def _evaluate(self, query: Query, budget: Guarantee) -> Any:
        result = self._session.evaluate(query, budget=budget, confidence=self._confidence)
        self.secure = self.secure and all(r.secure for r in result.releases)
        return result

    @property
    def _kept(self) -> str:
        """How counts of rows are labelled: rows kept, with a privacy unit."""
        m = self.plan.max_rows
        return "" if m is None else f" kept (\u2264 {m} per person)"

    def choose_max_rows(self, fraction: float) -> tuple[int, str, float]:
        """A bound on rows per person, chosen privately with ``fraction`` of the budget:
        noisy counts of rows kept at the bounds of :data:`MAX_ROWS_LADDER`, one at a time
        until :func:`max_rows_from_counts` can decide (issue 28: one row per person no
        longer gets ten times the noise of a fixed ``max_rows`` 10). Returns the bound,
        a note, and the fraction of the budget the bounds not needed leave (it goes to
        the columns)."""
        each = fraction / len(MAX_ROWS_LADDER)
        kept: list[float] = []
        unspent = 0.0
        for j, bound in enumerate(MAX_ROWS_LADDER):
            budget = self._shares.take(each, f"rows at \u2264 {bound} per person", "count")
            result = self._evaluate(Query().bound(max_rows=bound).count(name="rows"), budget)
            kept.append(float(result.columns["rows"][0]))
            chosen = max_rows_from_counts(kept)
            if j > 0 and chosen < bound:
                unspent = each * (len(MAX_ROWS_LADDER) - j - 1)
                break
        else:
            chosen = MAX_ROWS_LADDER[-1]
        self.plan = replace(self.plan, max_rows=chosen)
        note = (
            f"max_rows = {chosen} chosen privately ({fraction:.1%} of the budget): the "
            f"smallest bound of {', '.join(map(str, MAX_ROWS_LADDER))} at which noisy counts "
            "of rows kept show that about 90% of persons keep all their rows. Give "
            "--max-rows to set it yourself."
        )
        return chosen, note, unspent

    def rows(self) -> tuple[Statistic, Statistic | None, str | None]:
        """The number of rows (at most ``max_rows`` per person) and of persons, and with
        a privacy unit a note on how many rows the bound dropped."""
        m = self.plan.max_rows
        share = self._shares.share * (1.0 if m is None else 1.0 - DROPPED_SHARE)
        budget = self._shares.take(share, "rows, persons", "count")
        query = self._query().count(name="rows")
        if m is not None:
            query = query.count_distinct(name="persons")
        result = self._evaluate(query, budget)
        rows = _statistic(
            result, "rows", "rows" + self._kept, self._confidence, budget, unit="rows"
        )
        self.rows_count = rows
        if m is None:
            return rows, None, None
        persons = _statistic(result, "persons", "persons", self._confidence, budget)
        self.persons_count = persons
        return rows, persons, self._dropped(rows, m)

    def _dropped(self, kept: Statistic, m: int) -> str:
        """Rows kept at ``DROPPED_FACTOR`` times the bound, minus rows kept: a private
        lower estimate of the rows the bound dropped (post-processing of two counts)."""
        big = min(DROPPED_FACTOR * m, 2**31)
        budget = self._shares.take(
            self._shares.share * DROPPED_SHARE, f"rows at \u2264 {big} per person", "count"
        )
        result = self._evaluate(Query().bound(max_rows=big).count(name="rows"), budget)
        wide = _statistic(result, "rows", "rows", self._confidence, budget)
        dropped = max(0.0, _released(wide) - _released(kept))
        text = (
            f"Rows dropped by keeping \u2264 {m} per person: about {dropped:,.0f} (counting "
            f"rows up to {big} per person, so a lower estimate"
        )
        if None not in (wide.ci_low, wide.ci_high, kept.ci_low, kept.ci_high):
            assert wide.ci_low is not None and wide.ci_high is not None  # for mypy
            assert kept.ci_low is not None and kept.ci_high is not None
            low = max(0.0, wide.ci_low - kept.ci_high)
            high = max(0.0, wide.ci_high - kept.ci_low)
            level = 1.0 - 2.0 * (1.0 - self._confidence)  # both intervals hold
            text += f"; {level:.0%} CI {low:,.0f} to {high:,.0f}"
        return text + f"; {DROPPED_SHARE:.0%} of the rows' share)."

    def _selection_query(self, name: str) -> Query:
        return self._grouped(
            self._query().group_by(name, keys="private").count(name=count_name(name))
        )

    def _missing(self, values: Statistic) -> Statistic | None:
        """The column's missing share (post-processing of the rows' and its count)."""
        if self.rows_count is None:
            return None
        laplace = isinstance(self._shares.currency, PureDP)
        return missing_share(self.rows_count, values, self._confidence, laplace=laplace)

    def precheck_categories(
        self, tell: Callable[[str], None]
    ) -> dict[str, tuple[ColumnSummary, float]]:
        """Text columns in which no category can pass key selection, each with its
        summary (why it was skipped) and the fraction of the budget it leaves unspent.

        From the released count of rows (or persons) alone when the selection threshold
        exceeds it (nothing spent); otherwise :data:`PRECHECK_SHARE` of the column's
        share releases the count of its values and of its distinct values, and
        :func:`categories_possible` decides. A column kept keeps that count (for its
        missing share) and runs selection on the rest of its share.
        """
        skipped: dict[str, tuple[ColumnSummary, float]] = {}
        rows = self.persons_count if self.persons_count is not None else self.rows_count
        assert rows is not None
        rows_high = rows.ci_high if rows.ci_high is not None else rows.estimate or 0.0
        for name, kind in self.plan.columns:
            sql_type = self._session.columns[name]
            if kind != "categorical" or sql_type.upper().startswith("BOOLEAN"):
                continue
            share = self._shares.of(name)
            budget = _scaled(self._shares.currency, share * (1.0 - PRECHECK_SHARE))
            found = self._session.explain(
                self._selection_query(name), budget=budget, confidence=self._confidence
            )
            threshold = found.selection_threshold or 0
            if threshold > rows_high:
                reason = (
                    f"too few rows for private key selection at this budget: a category "
                    f"needs a noisy count of at least {threshold:,} and the table has about "
                    f"{max(rows_high, 0.0):,.0f}"
                )
                skipped[name] = (self._skipped(name, sql_type, reason), share)
                self._shares.skip(share, f"{name}: skipped (too few rows)")
                continue
            tell(f"{name} distinct values")
            distinct = self._distinct(name, share * PRECHECK_SHARE)
            # Point estimates (a heuristic on releases, so any rule is private): an
            # identifier has about as many distinct values as rows, and the room left
            # for repeated values is within noise of 0, far below the threshold.
            room = _released(rows) - _released(distinct)
            if categories_possible(_released(rows), _released(distinct), threshold) < 1.0:
                reason = (
                    f"likely an identifier: about {max(_released(distinct), 0.0):,.0f} "
                    f"distinct values in about {max(_released(rows), 0.0):,.0f} rows leave room "
                    f"for about {max(room, 0.0):,.0f} repeated values, and a category needs "
                    f"a noisy count of at least {threshold:,} to be selected"
                )
                summary = self._skipped(name, sql_type, reason, ("likely identifier",), (distinct,))
                skipped[name] = (summary, share * (1.0 - PRECHECK_SHARE))
                self._shares.skip(share * (1.0 - PRECHECK_SHARE), f"{name}: skipped")
            else:
                self.prechecked[name] = share * PRECHECK_SHARE
        return skipped

    def _count(self, name: str, budget: Guarantee) -> Statistic:
        """A noisy count of a column's (non-missing) values."""
        query = self._query().filter(f"{_quote(name)} IS NOT NULL").count(name="count")
        result = self._evaluate(query, budget)
        unit = "values" + self._kept
        return _statistic(result, "count", "count", self._confidence, budget, unit=unit)

    def _distinct(self, name: str, fraction: float) -> Statistic:
        """A noisy count of a column's distinct (non-missing) values."""
        budget = self._shares.take(fraction, f"{name}: distinct values", "count")
        query = (
            self._query()
            .filter(f"{_quote(name)} IS NOT NULL")
            .count_distinct(name, name="distinct")
        )
        result = self._evaluate(query, budget)
        return _statistic(result, "distinct", "distinct values", self._confidence, budget)

    def _skipped(
        self,
        name: str,
        sql_type: str,
        reason: str,
        alerts: tuple[str, ...] = (),
        statistics: tuple[Statistic, ...] = (),
    ) -> ColumnSummary:
        return ColumnSummary(
            name,
            "categorical",
            statistics=statistics,
            notes=(f"Skipped: {reason}; its share went to the other columns.",),
            sql_type=sql_type,
            alerts=alerts,
        )

    def categorical(self, name: str, top: int) -> ColumnSummary:
        sql_type = self._session.columns[name]
        if sql_type.upper().startswith("BOOLEAN"):
            return self.boolean(name, sql_type)
        # Its share, less what the pre-check spent (the share may have grown since).
        share = self._shares.of(name) - self.prechecked.get(name, 0.0)
        budget = self._shares.take(share, name, "key selection + count")
        c = count_name(name)
        result = self._evaluate(self._selection_query(name), budget)
        columns = result.columns
        order = np.argsort(-np.asarray(columns[c], dtype=np.float64), kind="stable")
        counts = []
        for i in order[:top]:
            counts.append(
                CategoryCount(
                    category=str(columns[name][i]),
                    estimate=float(columns[c][i]),
                    std_error=_finite_or_none(columns[f"{c}_se"][i]),
                    ci_low=_finite_or_none(columns[f"{c}_low"][i]),
                    ci_high=_finite_or_none(columns[f"{c}_high"][i]),
                    confidence=self._confidence,
                )
            )
        notes = (
            f"{len(order)} categories passed private selection (threshold "
            f"{result.selection_threshold}); the {min(top, len(order))} largest are shown.",
        )
        alerts = () if len(order) else ("used budget, released nothing",)
        return ColumnSummary(
            name,
            "categorical",
            top_categories=tuple(counts),
            notes=notes,
            sql_type=sql_type,
            alerts=alerts,
        )

    def boolean(self, name: str, sql_type: str) -> ColumnSummary:
        """A BOOLEAN column: the count of values and the share of true (public keys)."""
        budget = self._shares.take(self._shares.of(name), name, "count, share true")
        flagged, flag = self._derive(
            self._query(), f"{name}__flag", f"CAST({_quote(name)} AS INTEGER)"
        )
        query = (
            flagged.filter(f"{_quote(flag)} IS NOT NULL")
            .count(name="count")
            .mean(flag, bounds=(0.0, 1.0), name="share")
        )
        result = self._evaluate(query, budget)
        count = _statistic(
            result, "count", "count", self._confidence, budget, unit="values" + self._kept
        )
        share = _statistic(result, "share", "share true", self._confidence, budget)
        p = min(1.0, max(0.0, _released(share)))
        n = max(0.0, _released(count))
        # Post-processing of the two releases (no interval of their own).
        categories = (CategoryCount("true", n * p), CategoryCount("false", n * (1.0 - p)))
        notes = (
            "Boolean: the share of true values (a mean of 0/1, with its interval) and the "
            "count of non-missing values; the category counts are their product "
            "(post-processing, no interval).",
        )
        missing = self._missing(count)
        return ColumnSummary(
            name,
            "categorical",
            statistics=(count, share),
            top_categories=categories,
            notes=notes,
            sql_type=sql_type,
            missing=missing,
            alerts=tuple(common_alerts((), missing)),
        )

    def numeric(self, name: str, kind: ColumnKind, tell: Callable[[str], None]) -> ColumnSummary:
        """Range, count, percentiles, max, clamped mean and histogram of one column."""
        sql_type = self._session.columns[name]
        scale = _Scale.of(sql_type, self.plan.date_range)
        base = self._query()
        column = name
        if scale.date:
            # Points in time as seconds since the Unix epoch (a public, per-row map).
            base, column = self._derive(base, f"{name}__epoch", f"epoch({_quote(name)})")
        share = self._shares.of(name)
        notes: list[str] = list(scale.notes())

        # 1. Range: noisy counts of persons over public bins (powers of two; years of
        #    the public date range), each person in at most a few bins.
        budget = self._shares.take(share * RANGE_SHARE, f"{name}: range", "histogram")
        found = self._range_by_counts(column, base, scale, budget)
        if found is None:
            # No range: spend the rest of the share on what needs none, the count of
            # values (and so the missing share), rather than leave it unused.
            notes.append(
                "Too few values for a range at this budget: only the count of values is "
                "released (the rest of the column's share)."
            )
            budget = self._shares.take(share * (1 - RANGE_SHARE), f"{name}: count", "count")
            count = self._count(name, budget)
            missing = self._missing(count)
            return ColumnSummary(
                name,
                kind,
                statistics=(count,),
                notes=tuple(notes),
                sql_type=sql_type,
                missing=missing,
                alerts=("no range at this budget", *common_alerts((), missing)),
            )
        low, high, rule = found
        # 2. A non-integer type with few integers in its range: are the values integers?
        #    (Decided from the schema, the range release and a noisy count.)
        rest, fractional = 1.0, None
        as_integer = replace(scale, integer=True)
        if (
            not scale.integer
            and not scale.date
            and as_integer.support(*as_integer.snap_range(low, high)) <= LOW_CARDINALITY
        ):
            budget = self._shares.take(
                share * INTEGER_CHECK_SHARE, f"{name}: values not integers", "count"
            )
            fractional = self._fractional(column, base, budget)
            rest = (1.0 - RANGE_SHARE - INTEGER_CHECK_SHARE) / (1.0 - RANGE_SHARE)
            if _within_noise_of_zero(fractional):
                scale = as_integer
                notes.append(_integer_valued_note(sql_type, fractional))
            else:
                notes.append(_not_integer_valued_note(sql_type, fractional))
        low, high = scale.snap_range(low, high)
        notes.append(
            f"Range found privately: [{scale.show(low)}, {scale.show(high)}] ({rule}); "
            "values outside are clamped for the percentiles and the mean."
        )
        extra = () if fractional is None else (fractional,)
        if scale.support(low, high) <= LOW_CARDINALITY:
            return self._few_values(
                name, column, base, scale, (low, high), notes, sql_type, rest, extra
            )
        return self._spread(
            name, kind, column, base, scale, (low, high), notes, tell, sql_type, rest, extra
        )

    def _fractional(self, column: str, base: Query, budget: Guarantee) -> Statistic:
        """A noisy count of the column's values that are not integers (a sum of 0/1)."""
        x = _quote(column)
        flagged, flag = self._derive(
            base.filter(f"{x} IS NOT NULL"),
            f"{column}__fractional",
            f"CASE WHEN {x} = round({x}) THEN 0 ELSE 1 END",
        )
        query = flagged.sum(flag, bounds=(0.0, 1.0), name="fractional")
        result = self._evaluate(query, budget)
        return _statistic(
            result,
            "fractional",
            "not integers",
            self._confidence,
            budget,
            unit="values" + self._kept,
        )

    def _range_by_counts(
        self, column: str, base: Query, scale: _Scale, budget: Guarantee
    ) -> tuple[float, float, str] | None:
        """Noisy counts of persons per public bin; the occupied span is the range."""
        edges = scale.range_edges()
        result = self._evaluate(
            self._grouped(base.group_by_bins(column, edges).count_distinct(name="count")), budget
        )
        counts = np.asarray(result.columns["count"], dtype=np.float64)
        se = np.asarray(result.columns["count_se"], dtype=np.float64)
        order = np.argsort(np.asarray(result.columns[f"{column}_bin"]), kind="stable")
        counts, se = counts[order], se[order]
        # Integer values stored in a non-integer type: the windows also run over the
        # bins integers fall in, which joins 0, 1, 2-3 across the fractional bins.
        passes = [list(range(len(counts)))]
        if not scale.integer and not scale.date:
            passes.append(integer_bins(edges))
        z = _range_z(isinstance(self._session.budget, PureDP))
        occupied = _occupied(counts, se, z, passes, RANGE_WINDOWS)
        widths: tuple[int, ...] = RANGE_WINDOWS
        if not occupied:
            occupied = _occupied(counts, se, z, passes, RANGE_FALLBACK_WINDOWS)
            widths = RANGE_FALLBACK_WINDOWS
        if not occupied:
            return None
        rule = (
            f"{scale.range_rule} whose noisy count of persons, alone or summed over up to "
            f"{widths[-1]} adjacent bins, exceeds {z:.3g} standard errors"
        )
        return edges[occupied[0]], edges[occupied[-1] + 1], rule

    def _count_mean(
        self, column: str, base: Query, bounds: tuple[float, float], budget: Guarantee, unit: str
    ) -> tuple[Statistic, Statistic, Statistic, float]:
        """The count of values, their mean clamped to ``bounds``, a noisy count of the
        values outside ``bounds`` (an indicator's sum, :data:`OUTSIDE_WEIGHT` of this
        query's budget), and the estimated share of values the clamping moves. Next to
        the mean, the share it may move: that count's upper confidence limit over the
        count's lower one."""
        x = _quote(column)
        low, high = (repr(float(b)) for b in bounds)
        flagged, outside = self._derive(
            base.filter(f"{x} IS NOT NULL"),
            f"{column}__outside",
            f"CASE WHEN {x} < {low} OR {x} > {high} THEN 1 ELSE 0 END",
        )
        query = (
            flagged.count(name="count")
            .mean(column, bounds=bounds, name="mean")
            .sum(outside, bounds=(0.0, 1.0), name="outside", weight=OUTSIDE_WEIGHT)
        )
        result = self._evaluate(query, budget)
        count = _statistic(
            result, "count", "count", self._confidence, budget, unit="values" + self._kept
        )
        mean = _statistic(result, "mean", "mean", self._confidence, budget, unit=unit)
        out = _statistic(result, "outside", "outside", self._confidence, budget)
        if out.ci_high is not None and count.ci_low is not None:
            most = min(1.0, max(0.0, out.ci_high) / max(count.ci_low, 1.0))
            mean = replace(
                mean, caveat=f"clamping to the range may move up to {most:.1%} of the values"
            )
        # The Overview's flag uses the point estimate: at small budgets the upper
        # limit above is large for every column, and a flag on all says nothing.
        moved = min(1.0, max(0.0, _released(out)) / max(_released(count), 1.0))
        return count, mean, out, moved

    def _few_values(
        self,
        name: str,
        column: str,
        base: Query,
        scale: _Scale,
        bounds: tuple[float, float],
        notes: list[str],
        sql_type: str,
        rest: float = 1.0,
        extra: tuple[Statistic, ...] = (),
    ) -> ColumnSummary:
        """An integer(-valued) column with few values in its released range: counts per
        value. ``rest`` scales the shares (after an integer check); ``extra`` holds that
        check's release."""
        share = self._shares.of(name) * rest
        low, high = bounds
        first, last = scale.support_bounds(low, high)
        budget = self._shares.take(share * FEW_MEAN_SHARE, f"{name}: count, mean", "count, mean")
        bounds = (first, last) if last > first else (first, first + 1.0)
        count, mean, outside, moved = self._count_mean(column, base, bounds, budget, "")
        edges = [first - 1.0, *np.arange(first, last + 2.0).tolist(), last + 2.0]
        counted, values = column, base
        if not is_integer_type(sql_type):
            # Integer values only: a value between integers (the integer check bounds
            # how many) is in no bin, rather than in the bin of the integer below it.
            x = _quote(column)
            values, counted = self._derive(
                base, f"{column}__integer", f"CASE WHEN {x} = round({x}) THEN {x} ELSE NULL END"
            )
        budget = self._shares.take(share * FEW_COUNTS_SHARE, f"{name}: counts per value", "counts")
        histogram = self._histogram(counted, values, edges, budget, "", integer=True)
        if bounds == (0.0, 1.0):
            # "Share of 1" only when the releases show the column is 0/1: the values
            # outside [0, 1] and the under- and overflow bins all within noise of 0
            # (issue 28: a population column whose range came out [0, 1] was shown a
            # "share of 1" of 0.76; its true share of 1 was 2%).
            zero_one = (
                _within_noise_of_zero(outside, ZERO_ONE_Z)
                and _ends_empty(histogram)
                and _at_most_share(outside, count, ZERO_ONE_OUTSIDE)
            )
            mean = replace(mean, name="share of 1 (mean)" if zero_one else "mean clamped to [0, 1]")
        notes.append(
            f"{int(last - first) + 1} possible values in the released range: counts per value "
            "(with under- and overflow bins) instead of percentiles."
        )
        missing = self._missing(count)
        alerts = _value_alerts(histogram) + common_alerts((mean,), missing, moved)
        return ColumnSummary(
            name,
            "numeric",
            statistics=(count, mean, *extra),
            histogram=histogram,
            notes=tuple(notes),
            sql_type=sql_type,
            missing=missing,
            alerts=tuple(alerts),
        )

    def _histogram(
        self,
        column: str,
        base: Query,
        edges: Sequence[float],
        budget: Guarantee,
        unit: str,
        *,
        integer: bool,
    ) -> HistogramSummary:
        result = self._evaluate(
            self._grouped(base.group_by_bins(column, list(edges)).count()), budget
        )
        cols = result.columns
        order = np.argsort(np.asarray(cols[f"{column}_bin"]), kind="stable")
        return HistogramSummary(
            edges=tuple(float(e) for e in edges),
            counts=tuple(np.asarray(cols["count"], dtype=np.float64)[order].tolist()),
            ci_low=tuple(np.asarray(cols["count_low"], dtype=np.float64)[order].tolist()),
            ci_high=tuple(np.asarray(cols["count_high"], dtype=np.float64)[order].tolist()),
            confidence=self._confidence,
            mechanism=", ".join(sorted({r.mechanism for r in result.releases})),
            budget=budget,
            unit=unit,
            open_ended=True,
            integer=integer,
        )

    def _order_query(
        self,
        column: str,
        base: Query,
        levels: tuple[float, ...],
        with_max: bool,
        bounds: tuple[float, float],
        grid: int,
    ) -> Query:
        query = base
        if levels:
            query = query.quantile(column, levels, bounds=bounds, grid_size=grid, name="q")
        if with_max:
            query = query.max(column, bounds=bounds, grid_size=grid, name="max")
        return query

    def _order_choice(
        self,
        column: str,
        base: Query,
        bounds: tuple[float, float],
        grid: int,
        share: float,
        values: float,
    ) -> OrderChoice:
        """Which order statistics are worth their share at ``values`` (public accuracy
        statements of :meth:`dpkit.Session.explain`; nothing is spent)."""
        rows_per_person = self.plan.max_rows or 1

        def explain(levels: tuple[float, ...], with_max: bool, scale: float) -> OrderAccuracy:
            query = self._order_query(column, base, levels, with_max, bounds, grid)
            budget = _scaled(self._shares.currency, share * scale)
            found = self._session.explain(query, budget=budget, confidence=self._confidence)
            radius = [o.rank_radius or 0 for o in found.orders if o.role == "quantile"]
            removals = [o.removals or 0 for o in found.orders if o.role == "max"]
            return OrderAccuracy(max(radius, default=0), max(removals, default=0) * rows_per_person)

        pure = isinstance(self._shares.currency, PureDP)
        return choose_order_statistics(explain, values, pure=pure)

    def _spread(
        self,
        name: str,
        kind: ColumnKind,
        column: str,
        base: Query,
        scale: _Scale,
        bounds: tuple[float, float],
        notes: list[str],
        tell: Callable[[str], None],
        sql_type: str,
        rest: float = 1.0,
        extra: tuple[Statistic, ...] = (),
    ) -> ColumnSummary:
        """Count, mean, then the percentiles and max worth releasing at the released
        count, and a histogram (which gets the share of what is withheld)."""
        share = self._shares.of(name) * rest
        low, high = bounds
        unit = EPOCH_SECONDS if scale.date else ""

        # 2. Count and mean (clamped to the released range) first: the released count
        #    decides which order statistics can be useful (post-processing).
        budget = self._shares.take(share * MEAN_SHARE, f"{name}: count, mean", "count, mean")
        count, mean, _, moved = self._count_mean(column, base, (low, high), budget, unit)
        if scale.date == "DATE":
            mean = _whole_days(mean)
        values = max(1.0, count.ci_low if count.ci_low is not None else count.estimate or 0.0)

        # 3. Percentiles (inverse sensitivity) and maximum (shifted inverse sensitivity),
        #    those whose accuracy at this count is useful (issue 28: withhold, don't
        #    mislead); what is withheld goes to the histogram.
        tell(f"{name} percentiles")
        grid = scale.grid_size(low, high)
        choice = self._order_choice(column, base, (low, high), grid, share * ORDER_SHARE, values)
        order_share = share * ORDER_SHARE if (choice.levels or choice.with_max) else 0.0
        level = f"{self._confidence:.0%}"
        rounding = scale.rounding(low, high)
        released: dict[float, float] = {}
        raw_max: float | None = None
        radius = below = 0
        if order_share:
            budget = self._shares.take(order_share, f"{name}: percentiles, max", "quantiles")
            query = self._order_query(
                column, base, choice.levels, choice.with_max, (low, high), grid
            )
            result = self._evaluate(query, budget)
            for q in choice.levels:
                key = "q" if len(choice.levels) == 1 else f"q_{q:g}"
                released[q] = scale.snap(float(result.columns[key][0]), low, high)
            if choice.with_max:
                raw_max = scale.snap(float(result.columns["max"][0]), low, high)
            for r in result.releases:
                radius = max(radius, int(getattr(r.error, "rank_radius", 0) or 0))
                below = max(below, int(getattr(r.error, "removals", 0) or 0))
            below *= self.plan.max_rows or 1
        # Post-processing: consistent order statistics (see consistent_order_statistics).
        levels_out = [released[q] for q in sorted(released)]
        maximum = None
        if levels_out or raw_max is not None:
            trust = raw_max is not None and (not levels_out or below <= radius)
            top = raw_max if raw_max is not None else high
            levels_out, top = consistent_order_statistics(
                levels_out, top, low, high, trust_max=trust
            )
            maximum = top if raw_max is not None else None
        by_level = dict(zip(sorted(released), levels_out, strict=True))
        grid_note = (
            f"values rounded to \u00b1{scale.show_rounding(rounding)} (grid)" if rounding else ""
        )
        statistics: list[Statistic] = [count]
        for q in PERCENTILES:
            statistics.append(
                Statistic(
                    name=f"p{round(q * 100)}",
                    estimate=by_level.get(q),
                    mechanism="inverse sensitivity (exponential mechanism)",
                    unit=unit,
                    caveat=grid_note if q in by_level else "",
                    rounding=rounding if q in by_level else 0.0,
                    withheld="" if q in by_level else _percentile_withheld(choice),
                    rank_radius=radius if q in by_level else None,
                    rank_count=values if q in by_level else None,
                )
            )
        max_note = ""
        if maximum is not None and raw_max is not None and maximum > raw_max:
            max_note = (
                f"raised to p95: its own release may lie below up to {below:,} values ({level})"
            )
        statistics.append(
            Statistic(
                name="max",
                estimate=maximum,
                mechanism="shifted inverse sensitivity (noisy binary search)",
                unit=unit,
                limit="lower" if maximum is not None else "",
                caveat=", ".join(t for t in (max_note, grid_note) if t and maximum is not None),
                rounding=rounding if maximum is not None else 0.0,
                withheld="" if maximum is not None else choice.max_reason,
                rank_radius=below if maximum is not None else None,
                rank_count=values if maximum is not None else None,
            )
        )
        if released or maximum is not None:
            notes.append(ORDER_NOTE)
        if rounding and (released or maximum is not None):
            notes.append(
                f"Percentiles and max are points of a grid over the range: their accuracy "
                f"holds for the values rounded to it (each moved by up to "
                f"{scale.show_rounding(rounding)}), so on tied data a release may lie up to "
                f"{scale.show_rounding(rounding)} from a block of equal values of the stated "
                "rank."
            )
        statistics.append(mean)
        statistics.extend(extra)

        # 4. Histogram between the released 5th and 95th percentiles (else over the
        #    released range), with under- and overflow bins.
        lo, hi = by_level.get(0.05, low), by_level.get(0.95, high)
        edges = scale.histogram_edges(lo, hi, low, high)
        between = "p5-p95 range" if 0.05 in by_level else "range"
        notes.append(
            f"Mean of values clamped to the released range; histogram over the released "
            f"{between} [{scale.show(edges[1])}, {scale.show(edges[-2])}), with "
            "under- and overflow bins."
        )
        hist_share = share * (1.0 - RANGE_SHARE - MEAN_SHARE) - order_share
        budget = self._shares.take(hist_share, f"{name}: histogram", "histogram")
        histogram = self._histogram(column, base, edges, budget, unit, integer=scale.integer)
        missing = self._missing(count)
        alerts = numeric_alerts(statistics, low, missing, moved)
        return ColumnSummary(
            name,
            kind,
            statistics=tuple(statistics),
            histogram=histogram,
            notes=tuple(notes),
            sql_type=sql_type,
            missing=missing,
            alerts=tuple(alerts),
        )


#: The note on percentiles and maxima, said once per column that releases one.
ORDER_NOTE = (
    "Percentiles and max: accuracy is a rank / down-sensitivity bound, not an "
    "interval (\u00b1 ranks of the released count of values). The max is a lower bound "
    "of the true maximum (with high probability). Post-processing makes them "
    "consistent: percentiles are increasing and inside the released range; at the top, "
    "the more accurate of the max and the 95th percentile bounds the other. A "
    "statistic whose accuracy would exceed "
    f"{WITHHOLD_FRACTION:.0%} of the values is withheld, and its share goes to the "
    "histogram."
)


def _percentile_withheld(choice: OrderChoice) -> str:
    if choice.percentile_reason:
        return choice.percentile_reason
    return (
        "withheld: fewer percentiles, each with more budget, keep their rank accuracy "
        f"within {WITHHOLD_FRACTION:.0%} of the values"
    )


def _at_most_share(part: Statistic, whole: Statistic, share: float) -> bool:
    """Whether a count's upper limit is at most ``share`` of another's lower limit."""
    if part.ci_high is None or whole.ci_low is None or whole.ci_low <= 0.0:
        return False
    return max(part.ci_high, 0.0) <= share * whole.ci_low


def _ends_empty(histogram: HistogramSummary) -> bool:
    """Whether the under- and overflow bins are within noise of 0 (post-processing of
    the histogram release): each count at most INTEGER_CHECK_Z standard errors, the
    standard error read off the interval's half-width (Gaussian; for Laplace noise the
    same rule is stricter than it needs to be)."""
    if not histogram.ci_low or histogram.confidence is None:
        return False
    per_se = float(norm.isf((1.0 - histogram.confidence) / 2.0))
    for i in (0, -1):
        half = (histogram.ci_high[i] - histogram.ci_low[i]) / 2.0
        if histogram.counts[i] > ZERO_ONE_Z * half / per_se:
            return False
    return True


def _value_alerts(histogram: HistogramSummary) -> list[str]:
    """Overview flags of a counts-per-value column: constant, mostly zeros."""
    counts = np.maximum(np.asarray(histogram.counts[1:-1], dtype=np.float64), 0.0)
    total = float(counts.sum())
    if total <= 0.0:
        return []
    values = histogram.edges[1:-2]
    alerts = []
    top = int(np.argmax(counts))
    if counts[top] >= 0.99 * total:
        alerts.append(f"constant ({values[top]:g})" if len(values) > top else "constant")
    elif 0.0 in values and counts[values.index(0.0)] >= 0.5 * total:
        alerts.append("mostly zeros")
    return alerts


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


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
    return float(norm.isf(p))


def _within_noise_of_zero(statistic: Statistic, z: float = INTEGER_CHECK_Z) -> bool:
    """Whether a noisy count is at most ``z`` standard errors (post-processing)."""
    se = statistic.std_error
    return se is not None and _released(statistic) <= z * se


def _upper_text(statistic: Statistic) -> str:
    level = round(100 * (statistic.confidence or 0.0))
    if statistic.ci_high is None:
        return f"about {max(0.0, _released(statistic)):,.0f}"
    estimate, high = max(0.0, _released(statistic)), max(0.0, statistic.ci_high)
    return f"about {estimate:,.0f}, at most {high:,.0f} at {level}%"


def _integer_valued_note(sql_type: str, fractional: Statistic) -> str:
    return (
        f"Stored as {sql_type}, summarised as integers: its range holds few integers and a "
        "noisy count of its values that are not integers is within "
        f"{INTEGER_CHECK_Z:.3g} standard errors of 0 ({_upper_text(fractional)}). Such "
        "values are counted in no value's count, and in the mean as they are."
    )


def _not_integer_valued_note(sql_type: str, fractional: Statistic) -> str:
    return (
        f"Stored as {sql_type} with few integers in its range, but a noisy count of its "
        f"values that are not integers ({_upper_text(fractional)}) exceeds "
        f"{INTEGER_CHECK_Z:.3g} standard errors: summarised by percentiles."
    )


def _count_text(statistic: Statistic) -> str:
    """A noisy count as shown: clamped at 0 (post-processing; the JSON keeps the raw
    value), with its interval clamped alike."""
    text = f"{max(0.0, _released(statistic)):,.0f}"
    if statistic.ci_low is not None and statistic.ci_high is not None:
        level = round(100 * (statistic.confidence or 0.0))
        low, high = max(0.0, statistic.ci_low), max(0.0, statistic.ci_high)
        text += f" ({level}% CI {low:,.0f} to {high:,.0f})"
    return text


def _released(statistic: Statistic) -> float:
    """The estimate of a statistic describe released itself (never withheld)."""
    assert statistic.estimate is not None, statistic.name
    return statistic.estimate


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
