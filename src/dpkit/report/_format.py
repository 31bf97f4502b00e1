"""Number, date and guarantee formatting shared by the terminal and HTML renderers."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from dpkit.accounting.guarantees import RDP, ZCDP, ApproxDP, Guarantee, PureDP
from dpkit.report.model import (
    EPOCH_SECONDS,
    ColumnSummary,
    DatasetSummary,
    HistogramSummary,
    Statistic,
)

__all__ = [
    "REFERENCE_DELTA",
    "WITHHELD",
    "ColumnNotes",
    "OverviewRow",
    "StatisticRow",
    "bin_labels",
    "budget_facts",
    "column_notes",
    "common_confidence",
    "describe_guarantee",
    "format_interval",
    "format_percent",
    "format_spread",
    "format_value",
    "interval_cell",
    "interval_header",
    "missing_text",
    "overview_rows",
    "privacy_unit_text",
    "rank_accuracy",
    "rank_text",
    "rows_label",
    "shared_caveats",
    "shown_count",
    "statistic_estimate",
    "statistic_label",
    "statistic_rows",
    "withheld_reason",
]

#: The delta at which a zCDP or RDP total is also shown as (epsilon, delta)-DP.
REFERENCE_DELTA = 1e-6
#: What is shown in place of the estimate of a statistic that was not released.
WITHHELD = "withheld"


def _number(x: float) -> str:
    if x == 0:
        return "0"
    magnitude = abs(x)
    if magnitude >= 1e15 or magnitude < 1e-4:
        return f"{x:.3g}"
    if magnitude >= 1000:
        return f"{x:,.0f}"
    # Four significant digits, without trailing zeros: noise makes more meaningless.
    return f"{x:.4g}"


def format_value(x: float, unit: str = "") -> str:
    """A released value for display; points in time (``EPOCH_SECONDS``) as UTC dates."""
    if unit == EPOCH_SECONDS:
        try:
            moment = datetime.fromtimestamp(x, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return _number(x) + " s"
        if x % 86_400 == 0:
            return moment.strftime("%Y-%m-%d")
        return moment.strftime("%Y-%m-%d %H:%M UTC")
    return _number(x)


def format_spread(x: float, unit: str = "") -> str:
    """A width (standard error, half-interval): durations for points in time."""
    if unit == EPOCH_SECONDS:
        for size, name in ((86_400.0, "days"), (3_600.0, "h"), (60.0, "min")):
            if abs(x) >= size:
                return f"{_number(x / size)} {name}"
        return f"{_number(x)} s"
    return _number(x)


def format_interval(low: float | None, high: float | None, unit: str = "") -> str:
    """``[low, high]``, or an em dash when there is no interval."""
    if low is None or high is None:
        return "\u2014"
    return f"[{format_value(low, unit)}, {format_value(high, unit)}]"


def common_confidence(levels: Iterable[float | None]) -> float | None:
    """The one confidence level shared by every interval, or ``None`` if they differ."""
    found = {level for level in levels if level is not None}
    return found.pop() if len(found) == 1 else None


def interval_cell(
    low: float | None, high: float | None, level: float | None, shared: float | None, unit: str = ""
) -> str:
    """An interval, prefixed with its level when the column header cannot state it."""
    text = format_interval(low, high, unit)
    if low is None or level is None or level == shared:
        return text
    return f"{level:.0%}: {text}"


def interval_header(shared: float | None) -> str:
    """Column header for intervals: ``95% interval`` when all share that level."""
    return "interval" if shared is None else f"{shared:.0%} interval"


def describe_guarantee(guarantee: Guarantee, *, implied: bool = False) -> str:
    """A short reader-facing statement of a guarantee.

    With ``implied=True``, zCDP and RDP guarantees also state the (epsilon, delta)-DP
    guarantee they imply at :data:`REFERENCE_DELTA` (a conversion, rounded up).
    """
    if isinstance(guarantee, PureDP):
        return f"\u03b5 = {guarantee.epsilon:.4g} (pure DP)"
    if isinstance(guarantee, ApproxDP):
        return f"(\u03b5, \u03b4) = ({guarantee.epsilon:.4g}, {guarantee.delta:.3g})"
    if isinstance(guarantee, ZCDP):
        text = f"\u03c1 = {guarantee.rho:.4g} (zCDP)"
        if implied and guarantee.rho > 0:
            eps = guarantee.to_approx(REFERENCE_DELTA).epsilon
            text += f", which implies (\u03b5, \u03b4) = ({eps:.4g}, {REFERENCE_DELTA:g})"
        return text
    if isinstance(guarantee, RDP):
        text = f"R\u00e9nyi DP at {len(guarantee.orders)} orders"
        if implied:
            eps = guarantee.to_approx(REFERENCE_DELTA).epsilon
            text += f", which implies (\u03b5, \u03b4) = ({eps:.4g}, {REFERENCE_DELTA:g})"
        return text
    return type(guarantee).__name__


def privacy_unit_text(summary: DatasetSummary) -> str:
    """What one person is, in words."""
    if summary.privacy_unit is None:
        return "one row per person (neighbouring datasets differ in one row)"
    return (
        f"{summary.privacy_unit} (neighbouring datasets differ in all rows "
        f"of one {summary.privacy_unit})"
    )


def budget_facts(summary: DatasetSummary) -> list[tuple[str, str]]:
    """Header lines about the budget: as asked, what the summary satisfies, what it spent.

    Summaries that carry ``guarantee`` state it (e.g. zCDP converted to (epsilon,
    delta) plus the delta of private key selection); older ones only their ``budget``.
    """
    if summary.guarantee is None:
        return [("Total budget", describe_guarantee(summary.budget, implied=True))]
    facts = []
    if summary.requested is not None:
        facts.append(("Budget asked", describe_guarantee(summary.requested)))
    facts.append(("Guarantee of this summary", describe_guarantee(summary.guarantee)))
    if summary.budget != summary.guarantee:
        facts.append(("Spent (query currency)", describe_guarantee(summary.budget)))
    return facts


def rows_label(summary: DatasetSummary) -> str:
    """Heading of the row count: rows *kept* when rows per person were bounded."""
    if summary.max_rows is None:
        return "Rows (private estimate)"
    return f"Rows kept (\u2264 {summary.max_rows} per person; private estimate)"


_BOUND_WORDS = {"lower": "at least", "upper": "at most"}


def statistic_label(stat: Statistic) -> str:
    """A statistic's name, saying when its estimate is a one-sided bound."""
    if stat.limit and stat.estimate is not None:
        return f"{stat.name} ({_BOUND_WORDS[stat.limit]})"
    return stat.name


def statistic_estimate(stat: Statistic) -> str:
    """A statistic's estimate with its unit, ``>= x`` for a lower bound, or
    :data:`WITHHELD` when it was not released."""
    if stat.estimate is None:
        return WITHHELD
    unit = "" if stat.unit in ("", EPOCH_SECONDS) else f" {stat.unit}"
    prefix = {"lower": "\u2265 ", "upper": "\u2264 "}.get(stat.limit, "")
    return prefix + format_value(stat.estimate, stat.unit) + unit


def withheld_reason(stat: Statistic, *, short: bool = False) -> str:
    """Why ``stat`` was withheld, without a leading "withheld"; ``""`` if released.

    ``short=True`` keeps the first clause (up to a ``;``), for narrow displays: the
    accuracy it would have had, not what budget would release it.
    """
    reason = re.sub(r"^withheld\s*[:,\u2014-]?\s*", "", stat.withheld.strip(), flags=re.I)
    if short:
        reason = reason.split(";", 1)[0].strip()
    return reason


@dataclass(frozen=True)
class StatisticRow:
    """One line of a statistics table: a released statistic, or a run of withheld
    ones sharing their reason (``p5, p25, p50: withheld``), said once."""

    label: str
    statistics: tuple[Statistic, ...]

    @property
    def first(self) -> Statistic:
        """The statistic whose numbers the line shows (the only one when released)."""
        return self.statistics[0]

    @property
    def withheld(self) -> bool:
        """Whether the line is about withheld statistics."""
        return self.first.estimate is None


def statistic_rows(statistics: Sequence[Statistic]) -> list[StatisticRow]:
    """Lines of a statistics table, in order: adjacent withheld statistics with the same
    reason share one line, so a reason repeated for five percentiles is said once."""
    rows: list[StatisticRow] = []
    for stat in statistics:
        last = rows[-1] if rows else None
        if (
            last is not None
            and last.withheld
            and stat.estimate is None
            and stat.withheld == last.first.withheld
        ):
            group = (*last.statistics, stat)
            rows[-1] = StatisticRow(", ".join(s.name for s in group), group)
        else:
            rows.append(StatisticRow(statistic_label(stat), (stat,)))
    return rows


def rank_text(stat: Statistic) -> str:
    """An order statistic's accuracy in ranks: ``±R ranks of ~n`` (``at most R of ~n
    values above it`` for a max); ``""`` when it has none."""
    if stat.rank_radius is None:
        return ""
    radius = f"{stat.rank_radius:,}"
    of = "" if stat.rank_count is None else f" of ~{format_value(shown_count(stat.rank_count))}"
    side = {"max": "above", "min": "below"}.get(stat.name)
    if side is not None:
        return f"at most {radius}{of} values {side} it"
    return f"\u00b1{radius} ranks{of}"


def rank_accuracy(statistics: Sequence[Statistic]) -> str:
    """The rank accuracy of a column's released order statistics, said once.

    Statistics sharing one accuracy are named together: ``p5-p95: ±37 ranks of
    ~1,797; max: at most 12 of ~1,797 values above it``. ``""`` when none has one.
    """
    groups: dict[str, list[str]] = {}
    for stat in statistics:
        if stat.estimate is not None and stat.rank_radius is not None:
            groups.setdefault(rank_text(stat), []).append(stat.name)
    return "; ".join(f"{_names(names)}: {text}" for text, names in groups.items())


def _names(names: Sequence[str]) -> str:
    """Statistics named together: ``p5, p25`` or, for more, ``p5-max`` (in order)."""
    return ", ".join(names) if len(names) <= 2 else f"{names[0]}\u2013{names[-1]}"


def shared_caveats(statistics: Sequence[Statistic]) -> dict[str, str]:
    """Caveats that several released statistics of a column share, said once.

    Maps each such caveat to the statistics it is about (``p5-max``); a renderer
    prints them below the table and leaves them out of the lines.
    """
    users: dict[str, list[str]] = {}
    for stat in statistics:
        if stat.caveat and stat.estimate is not None:
            users.setdefault(stat.caveat, []).append(stat.name)
    return {caveat: _names(names) for caveat, names in users.items() if len(names) > 1}


def shown_count(count: float) -> float:
    """A noisy count as displayed: clamped at 0 (post-processing; JSON keeps the raw)."""
    return max(0.0, count)


def _distinct(values: list[float], unit: str) -> list[str]:
    if unit == EPOCH_SECONDS:
        return [format_value(v, unit) for v in values]
    # Enough significant digits that neighbouring edges read differently.
    for digits in range(4, 17):
        texts = [_number(v) if digits == 4 else f"{v:.{digits}g}" for v in values]
        if len(set(texts)) == len(texts):
            return texts
    return [repr(v) for v in values]


def bin_labels(histogram: HistogramSummary) -> list[str]:
    """One label per bin: ``[a, b)``; ``< a`` / ``>= b`` for under- and overflow bins;
    the integers ``k`` or ``a-b`` a bin of an integer column holds."""
    edges = list(histogram.edges)
    unit = histogram.unit
    texts = _distinct(edges, unit)
    labels = []
    for i in range(len(edges) - 1):
        low, high = edges[i], edges[i + 1]
        if histogram.integer and unit != EPOCH_SECONDS:
            first, last = round(low), round(high) - 1
            label = str(first) if first == last else f"{first}\u2013{last}"
        else:
            label = f"[{texts[i]}, {texts[i + 1]})"
        if histogram.open_ended and i == 0:
            label = f"< {texts[1] if not histogram.integer else round(high)}"
        elif histogram.open_ended and i == len(edges) - 2:
            label = f"\u2265 {texts[i] if not histogram.integer else round(low)}"
        labels.append(label)
    return labels


@dataclass(frozen=True)
class OverviewRow:
    """One line of the overview table (all text, post-processing of the summary)."""

    name: str
    kind: str
    sql_type: str
    values: str
    missing: str
    headline: str
    alerts: tuple[str, ...] = ()


def _released(column: ColumnSummary) -> dict[str, Statistic]:
    """The column's released statistics by name (withheld ones left out)."""
    return {s.name: s for s in column.statistics if s.estimate is not None}


def _estimate_of(stat: Statistic) -> float:
    # Only called on released statistics; a withheld one is a bug upstream.
    assert stat.estimate is not None
    return stat.estimate


def _headline(column: ColumnSummary) -> str:
    stats = _released(column)
    for key in ("share true", "share of 1 (mean)"):
        if key in stats:
            return f"{key.split(' (')[0]} {format_value(_estimate_of(stats[key]))}"
    if column.kind == "date" and "p50" in stats:
        return f"median {format_value(_estimate_of(stats['p50']), stats['p50'].unit)}"
    # "mean", else a mean named with its clamping ("mean clamped to [0, 1]").
    mean = stats.get("mean") or next((s for n, s in stats.items() if n.startswith("mean ")), None)
    if mean is not None:
        return f"{mean.name} {format_value(_estimate_of(mean), mean.unit)}"
    if column.top_categories:
        top = max(column.top_categories, key=lambda c: c.estimate)
        return f"top: {top.category} ({format_value(shown_count(top.estimate))})"
    return "\u2014"


def format_percent(share: float) -> str:
    """A share in [0, 1] as a percentage: one decimal below 10%, none above
    (noise makes more digits meaningless)."""
    share = min(1.0, max(0.0, share))
    return f"{share:.1%}" if share < 0.1 else f"{share:.0%}"


def _released_missing(missing: Statistic) -> str:
    """``~0% (<= 2.1%)`` for an estimate of about 0, ``3% (<= 9%)`` when the interval
    reaches 0, else ``12% (9-15%)``; "withheld" when too noisy to say anything."""
    if missing.estimate is None:
        return WITHHELD
    low, high = missing.ci_low, missing.ci_high
    if low is None or high is None:
        return format_percent(missing.estimate)
    if missing.estimate <= 0.005:
        return f"~0% (\u2264 {format_percent(high)})"
    if low <= 0:  # the point estimate, and how high it may be
        return f"{format_percent(missing.estimate)} (\u2264 {format_percent(high)})"
    # One precision for the whole interval, set by its upper end.
    decimals = 1 if min(1.0, high) < 0.1 else 0
    low_text = f"{100 * min(1.0, low):.{decimals}f}"
    return f"{format_percent(missing.estimate)} ({low_text}\u2013{format_percent(high)})"


def missing_text(column: ColumnSummary, rows: Statistic | None) -> str:
    """The column's missing share for the overview.

    The released share (``column.missing``) with its interval; for documents written
    before it existed, ``1 - values / rows`` from the two noisy counts (clamped to
    [0, 1]; approximate, with no interval). An em dash when neither is known.
    """
    if column.missing is not None:
        return _released_missing(column.missing)
    count = next((s for s in column.statistics if s.name == "count"), None)
    if count is None or count.estimate is None:
        return "\u2014"
    if rows is None or rows.estimate is None or rows.estimate <= 0:
        return "\u2014"
    return f"{min(1.0, max(0.0, 1.0 - count.estimate / rows.estimate)):.1%}"


def overview_rows(summary: DatasetSummary) -> list[OverviewRow]:
    """Per column: kind, schema type, private count of values, missing share, its
    mean (share, median date) or top category, and its alerts -- computed from
    released numbers only (see :func:`missing_text`)."""
    out = []
    for column in summary.columns:
        count = next((s for s in column.statistics if s.name == "count"), None)
        values = "\u2014"
        if count is not None:
            values = (
                WITHHELD if count.estimate is None else format_value(shown_count(count.estimate))
            )
        out.append(
            OverviewRow(
                column.name,
                column.kind,
                column.sql_type,
                values,
                missing_text(column, summary.rows_estimate),
                _headline(column),
                column.alerts,
            )
        )
    return out


@dataclass(frozen=True)
class ColumnNotes:
    """A summary's column notes, each said once.

    ``shared``: the notes that several columns have (the same text, or the same but
    for the column's own name, which is then written "this column"), numbered from 1
    in order of first appearance. ``refs[name]``: the numbers of a column's shared
    notes; ``own[name]``: the notes only that column has, as given.
    """

    shared: tuple[str, ...]
    refs: dict[str, tuple[int, ...]]
    own: dict[str, tuple[str, ...]]


_THIS_COLUMN = "this column"


def _generic(note: str, name: str) -> str:
    # Whole-word matches only, so a column called "a" leaves "mean" alone.
    pattern = rf"(?<!\w){re.escape(name)}(?!\w)"
    return re.sub(pattern, _THIS_COLUMN, note)


def column_notes(columns: Sequence[ColumnSummary]) -> ColumnNotes:
    """Sort the columns' notes into those said once for many columns and their own."""
    generic = {c.name: [_generic(n, c.name) for n in c.notes] for c in columns}
    users: dict[str, set[str]] = {}
    for name, notes in generic.items():
        for note in notes:
            users.setdefault(note, set()).add(name)
    shared = [note for note, who in users.items() if len(who) > 1]
    number = {note: i + 1 for i, note in enumerate(shared)}
    refs: dict[str, tuple[int, ...]] = {}
    own: dict[str, tuple[str, ...]] = {}
    for column in columns:
        mine = generic[column.name]
        refs[column.name] = tuple(sorted({number[n] for n in mine if n in number}))
        own[column.name] = tuple(
            raw for raw, n in zip(column.notes, mine, strict=True) if n not in number
        )
    return ColumnNotes(tuple(shared), refs, own)
