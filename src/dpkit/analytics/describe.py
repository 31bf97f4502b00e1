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

The pieces: the staged decisions in :mod:`dpkit.analytics._describe_stages`, numeric
and date columns in :mod:`dpkit.analytics._describe_numeric`, the budget split and the
runner's base in :mod:`dpkit.analytics._describe_common`, value scales in
:mod:`dpkit.analytics._describe_scales`; this module holds the plan, the run, and the
rows', text and boolean columns' queries.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.accounting._math.rounding import fraction_up
from dpkit.accounting.guarantees import ZCDP, ApproxDP, Guarantee, PureDP

# Names other modules and tests read from here are re-exported ("X as X").
from dpkit.analytics._describe_common import (
    MAX_GROUPS_PER_PERSON as MAX_GROUPS_PER_PERSON,
)
from dpkit.analytics._describe_common import DescribePlan as DescribePlan
from dpkit.analytics._describe_common import (
    Steps,
    _amount,
    _finite_or_none,
    _float_down,
    _quote,
    _released,
    _scaled,
    _Shares,
    _statistic,
)
from dpkit.analytics._describe_common import derive as derive
from dpkit.analytics._describe_common import fresh_name as fresh_name
from dpkit.analytics._describe_numeric import INTEGER_CHECK_SHARE as INTEGER_CHECK_SHARE
from dpkit.analytics._describe_numeric import LOW_CARDINALITY as LOW_CARDINALITY
from dpkit.analytics._describe_numeric import MEAN_SHARE as MEAN_SHARE
from dpkit.analytics._describe_numeric import ORDER_SHARE as ORDER_SHARE
from dpkit.analytics._describe_numeric import PERCENTILES as PERCENTILES
from dpkit.analytics._describe_numeric import NumericRunner
from dpkit.analytics._describe_scales import RANGE_FALSE_POSITIVE as RANGE_FALSE_POSITIVE
from dpkit.analytics._describe_scales import _range_z as _range_z
from dpkit.analytics._describe_scales import consistent_order_statistics, is_integer_type
from dpkit.analytics._describe_stages import (
    MAX_ROWS_LADDER,
    categories_possible,
    common_alerts,
    max_rows_from_counts,
)
from dpkit.analytics.engines import NUMBER_TYPES
from dpkit.analytics.query import Query
from dpkit.analytics.query import _check_name as check_column_name
from dpkit.analytics.session import Session
from dpkit.errors import BudgetExceeded, DataError, DPError, InvalidParameter
from dpkit.report.model import (
    CategoryCount,
    ColumnKind,
    ColumnSummary,
    DatasetSummary,
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

#: describe refuses to run on less than this fraction of the Session's budget.
MIN_REMAINING = 0.01
#: With a privacy unit: the share of the rows' budget that counts rows at DROPPED_FACTOR
#: times ``max_rows`` per person, to estimate how many rows the bound dropped.
DROPPED_SHARE, DROPPED_FACTOR = 0.25, 10
#: With a privacy unit and no ``max_rows``: the share of the budget that chooses it
#: (counts of rows kept at growing bounds; :meth:`_Runner.choose_max_rows`).
MAX_ROWS_SHARE = 0.05
#: Bounds of MAX_ROWS_LADDER asked per round (one batch, one shared scan).
LADDER_ROUND = 2
#: A text column's share spent first on a count of its values and of its distinct
#: values (a pre-check): a column in which no category can reach the selection threshold (an
#: identifier, a free-text field) is then skipped and the rest of its share goes to the
#: other columns (issue 28: such columns took 37% and 58% of two tables' budgets).
PRECHECK_SHARE = 0.15
#: ... of which the count of distinct values gets this weight against the count of
#: values' 1 (that count gives the column's missing share).
DISTINCT_WEIGHT = 3.0
#: Per-column weights (``describe(weights=...)``) may differ from each other and from the
#: row count's weight 1 by at most this factor: a share a million times smaller than
#: another would be pure noise.
MAX_WEIGHT_RATIO = 1e6
#: Public range of dates and times when the user gives none (the range query counts
#: persons per year over it, with one more bin either side for anything outside).
DEFAULT_DATE_RANGE: tuple[date, date] = (date(1900, 1, 1), date(2100, 1, 1))


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


def count_name(group: str) -> str:
    """The name of a count grouped by column ``group``: its outputs (``count``,
    ``count_se``, ``count_low``, ``count_high``) must not overwrite the group's keys."""
    name = "count"
    while group.casefold() in {f"{name}{s}".casefold() for s in ("", "_se", "_low", "_high")}:
        name = f"{name}_"
    return name


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
    _check_smallest_query(session, plan, total, choose_max_rows=max_rows is None)
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

    # Stage 3: every other column, on its (possibly larger) share. Each column's
    # queries are a generator (its stages: range, count and mean, percentiles,
    # histogram), and the runner evaluates one stage of every column as a batch, whose
    # rows the engine reads in shared scans (issue 34); each column's decisions read
    # its own releases only, as when the columns ran one after another.
    steps: dict[str, Steps[ColumnSummary]] = {}
    for name, kind in plan.columns:
        tell(name)
        if name in skipped:
            continue
        if kind == "categorical":
            steps[name] = runner.categorical(name, top)
        else:
            steps[name] = runner.numeric(name, kind, tell)
    kinds = dict(plan.columns)
    refusals: list[str] = []

    def refused(name: str, error: DPError) -> ColumnSummary:
        # A query the Session refused before charging it: this column stops, the
        # others go on (what it spent before is in the summary's total).
        refusals.append(name)
        return ColumnSummary(
            name,
            kinds[name],
            notes=(
                "Not summarised: the Session refused one of its queries before spending "
                f"it ({error}). What its earlier queries spent is in the total.",
            ),
            sql_type=session.columns[name],
        )

    found = runner.run(steps, refused)
    summaries = [skipped[name][0] if name in skipped else found[name] for name, _ in plan.columns]
    notes.extend(f"{name}: skipped ({reason})" for name, reason in plan.skipped)
    if refusals:
        notes.append(
            f"Not summarised (a query refused before its charge): {', '.join(refusals)}; "
            "see each column's note."
        )
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


#: The smallest query of the plan gets its share of the budget split further, between a
#: query's aggregations and (with a privacy unit) up to MAX_GROUPS_PER_PERSON groups;
#: the check before the first charge divides by this much to cover both.
SMALLEST_SPLIT = 4 * MAX_GROUPS_PER_PERSON


def _check_smallest_query(
    session: Session, plan: DescribePlan, total: Guarantee, *, choose_max_rows: bool
) -> None:
    """Refuse, before anything is charged, a plan whose smallest query the Session would
    refuse: a PureDP budget of 1e-5 or weights 1e6 apart give some query a budget whose
    noise the exact samplers cannot draw, and the Session refuses that query only when
    it comes, after the earlier ones were charged (an attack in
    tests/adversarial/test_describe_stages_attacks.py). Each kind of query is stood for
    by a count at its largest sensitivity on its smallest share (shares only grow when
    they are reallocated): the columns' smallest query split :data:`SMALLEST_SPLIT` ways,
    the rows' counts, the rows-dropped count at ``DROPPED_FACTOR`` times the bound, the
    ``max_rows`` ladder at its largest bound. Public information only."""
    shrink = 1.0 - MAX_ROWS_SHARE if choose_max_rows and plan.max_rows is not None else 1.0
    m = plan.max_rows
    if m is not None and choose_max_rows:
        m = MAX_ROWS_LADDER[-1]  # the largest bound it may choose
    # (sensitivity in rows per person or None, share of the budget, ways it is split)
    checks: list[tuple[int | None, float, int]] = [
        (m, min(plan.shares, default=1.0) * INTEGER_CHECK_SHARE * shrink, SMALLEST_SPLIT),
        (m, plan.share * shrink * (1.0 if m is None else 1.0 - DROPPED_SHARE), 2),
    ]
    if m is not None:
        checks.append((min(DROPPED_FACTOR * m, 2**31), plan.share * shrink * DROPPED_SHARE, 1))
        if choose_max_rows:
            checks.append((m, MAX_ROWS_SHARE / len(MAX_ROWS_LADDER), 1))
    for rows_per_person, share, ways in checks:
        query = Query() if rows_per_person is None else Query().bound(max_rows=rows_per_person)
        try:
            session.explain(query.count(name="rows"), budget=_scaled(total, share / ways))
        except InvalidParameter as err:
            raise InvalidParameter(
                f"describe: the budget left ({total}) is too small for this plan (or its "
                f"weights too far apart): one of its queries would get {share:.3g} of it, "
                f"and the Session refuses such a query ({err}). Give a larger budget, fewer "
                "columns or weights closer together. Nothing was spent."
            ) from None


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


class _Runner(NumericRunner):
    """Runs the plan's queries against one Session: the rows, the private choice of
    ``max_rows``, the text columns' pre-check, categorical and boolean columns (numeric
    and date columns: :class:`~dpkit.analytics._describe_numeric.NumericRunner`)."""

    def choose_max_rows(self, fraction: float) -> tuple[int, str, float]:
        """A bound on rows per person, chosen privately with ``fraction`` of the budget:
        noisy counts of rows kept at the bounds of :data:`MAX_ROWS_LADDER`,
        :data:`LADDER_ROUND` at a time, until :func:`max_rows_from_counts` can decide
        (issue 28: one row per person no longer gets ten times the noise of a fixed
        ``max_rows`` 10). Returns the bound, a note, and the fraction of the budget the
        bounds not needed leave (it goes to the columns)."""
        each = fraction / len(MAX_ROWS_LADDER)
        kept: list[float] = []
        unspent = 0.0
        chosen = MAX_ROWS_LADDER[-1]
        # Two bounds per round, as one batch (one shared scan: both counts read every
        # row of every person), until the counts decide. The decision is the one the
        # bounds asked one at a time would give: max_rows_from_counts takes the first
        # bound whose next count adds few rows, which later counts do not change. A
        # round may ask one count more than needed (at most `each` of the budget, left
        # unspent before); it halves the statements (issue 34).
        for start in range(0, len(MAX_ROWS_LADDER), LADDER_ROUND):
            bounds = MAX_ROWS_LADDER[start : start + LADDER_ROUND]
            requests = [
                (
                    Query().bound(max_rows=bound).count(name="rows"),
                    self._shares.take(each, f"rows at \u2264 {bound} per person", "count"),
                )
                for bound in bounds
            ]
            for result in self._evaluate_batch(requests):
                kept.append(float(result.columns["rows"][0]))
            chosen = max_rows_from_counts(kept)
            if len(kept) > 1 and chosen < MAX_ROWS_LADDER[len(kept) - 1]:
                unspent = each * (len(MAX_ROWS_LADDER) - len(kept))
                break
        self.plan = replace(self.plan, max_rows=chosen)
        note = (
            f"max_rows = {chosen} chosen privately ({fraction:.1%} of the budget): the "
            f"smallest bound of {', '.join(map(str, MAX_ROWS_LADDER))} at which noisy counts "
            "of rows kept show that at least about 90% of persons keep all their rows "
            "(a conservative choice). Give "
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
        if m is None:
            result = self._evaluate(query, budget)
        else:
            query = query.count_distinct(name="persons")
            # With the count of rows at a larger bound (_dropped), as one batch: both
            # read every row of every person (one shared scan; the same charges,
            # records and releases as one after the other).
            big = min(DROPPED_FACTOR * m, 2**31)
            wide_budget = self._shares.take(
                self._shares.share * DROPPED_SHARE, f"rows at \u2264 {big} per person", "count"
            )
            wide_query = Query().bound(max_rows=big).count(name="rows")
            result, wide = self._evaluate_batch([(query, budget), (wide_query, wide_budget)])
        rows = _statistic(
            result, "rows", "rows" + self._kept, self._confidence, budget, unit="rows"
        )
        self.rows_count = rows
        if m is None:
            return rows, None, None
        persons = _statistic(result, "persons", "persons", self._confidence, budget)
        self.persons_count = persons
        return rows, persons, self._dropped(rows, m, wide, wide_budget)

    def _dropped(self, kept: Statistic, m: int, result: Any, budget: Guarantee) -> str:
        """Rows kept at ``DROPPED_FACTOR`` times the bound (``result``, at ``budget``),
        minus rows kept: a private lower estimate of the rows the bound dropped
        (post-processing of two counts)."""
        big = min(DROPPED_FACTOR * m, 2**31)
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
            distinct, count = self._distinct(name, share * PRECHECK_SHARE)
            self.value_counts[name] = count
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
                summary = self._skipped(
                    name, sql_type, reason, ("likely identifier",), (count, distinct)
                )
                skipped[name] = (summary, share * (1.0 - PRECHECK_SHARE))
                self._shares.skip(share * (1.0 - PRECHECK_SHARE), f"{name}: skipped")
            else:
                self.prechecked[name] = share * PRECHECK_SHARE
        return skipped

    def _distinct(self, name: str, fraction: float) -> tuple[Statistic, Statistic]:
        """Noisy counts of a column's distinct (non-missing) values and of its values
        (the latter for its missing share; :data:`DISTINCT_WEIGHT` of the query's
        budget goes to the distinct count, which decides the pre-check)."""
        budget = self._shares.take(fraction, f"{name}: values, distinct values", "count")
        query = (
            self._query()
            .filter(f"{_quote(name)} IS NOT NULL")
            .count(name="count")
            .count_distinct(name, name="distinct", weight=DISTINCT_WEIGHT)
        )
        result = self._evaluate(query, budget)
        unit = "values" + self._kept
        count = _statistic(result, "count", "count", self._confidence, budget, unit=unit)
        distinct = _statistic(result, "distinct", "distinct values", self._confidence, budget)
        return distinct, count

    def _skipped(
        self,
        name: str,
        sql_type: str,
        reason: str,
        alerts: tuple[str, ...] = (),
        statistics: tuple[Statistic, ...] = (),
    ) -> ColumnSummary:
        counts = [s for s in statistics if s.name == "count"]
        missing = self._missing(counts[0]) if counts else None
        return ColumnSummary(
            name,
            "categorical",
            statistics=statistics,
            missing=missing,
            notes=(f"Skipped: {reason}; its share went to the other columns.",),
            sql_type=sql_type,
            alerts=alerts,
        )

    def categorical(self, name: str, top: int) -> Steps[ColumnSummary]:
        sql_type = self._session.columns[name]
        if sql_type.upper().startswith("BOOLEAN"):
            return (yield from self.boolean(name, sql_type))
        # Its share, less what the pre-check spent (the share may have grown since).
        share = self._shares.of(name) - self.prechecked.get(name, 0.0)
        budget = self._shares.take(share, name, "key selection + count")
        c = count_name(name)
        result = yield from self._ask(self._selection_query(name), budget)
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
        count = self.value_counts.get(name)
        missing = None if count is None else self._missing(count)
        alerts = common_alerts((), missing)
        if not len(order):
            alerts.append("used budget, released nothing")
        return ColumnSummary(
            name,
            "categorical",
            statistics=() if count is None else (count,),
            missing=missing,
            top_categories=tuple(counts),
            notes=notes,
            sql_type=sql_type,
            alerts=tuple(alerts),
        )

    def boolean(self, name: str, sql_type: str) -> Steps[ColumnSummary]:
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
        result = yield from self._ask(query, budget)
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


def _count_text(statistic: Statistic) -> str:
    """A noisy count as shown: clamped at 0 (post-processing; the JSON keeps the raw
    value), with its interval clamped alike."""
    text = f"{max(0.0, _released(statistic)):,.0f}"
    if statistic.ci_low is not None and statistic.ci_high is not None:
        level = round(100 * (statistic.confidence or 0.0))
        low, high = max(0.0, statistic.ci_low), max(0.0, statistic.ci_high)
        text += f" ({level}% CI {low:,.0f} to {high:,.0f})"
    return text
