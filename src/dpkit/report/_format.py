"""Number, date and guarantee formatting shared by the terminal and HTML renderers."""

from __future__ import annotations

from collections.abc import Iterable
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
    "OverviewRow",
    "bin_labels",
    "budget_facts",
    "common_confidence",
    "describe_guarantee",
    "format_interval",
    "format_spread",
    "format_value",
    "interval_cell",
    "interval_header",
    "overview_rows",
    "privacy_unit_text",
    "rows_label",
    "shown_count",
    "statistic_estimate",
    "statistic_label",
]

#: The delta at which a zCDP or RDP total is also shown as (epsilon, delta)-DP.
REFERENCE_DELTA = 1e-6


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


def statistic_label(stat: Statistic) -> str:
    """A statistic's name, saying when its estimate is a one-sided bound."""
    if stat.limit:
        return f"{stat.name} ({stat.limit} bound)"
    return stat.name


def statistic_estimate(stat: Statistic) -> str:
    """A statistic's estimate with its unit, ``>= x`` for a lower bound."""
    unit = "" if stat.unit in ("", EPOCH_SECONDS) else f" {stat.unit}"
    prefix = {"lower": "\u2265 ", "upper": "\u2264 "}.get(stat.limit, "")
    return prefix + format_value(stat.estimate, stat.unit) + unit


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


def _headline(column: ColumnSummary) -> str:
    stats = {s.name: s for s in column.statistics}
    for key in ("share true", "share of 1 (mean)"):
        if key in stats:
            return f"{key.split(' (')[0]} {format_value(stats[key].estimate)}"
    if column.kind == "date" and "p50" in stats:
        return f"median {format_value(stats['p50'].estimate, stats['p50'].unit)}"
    if "mean" in stats:
        return f"mean {format_value(stats['mean'].estimate, stats['mean'].unit)}"
    if column.top_categories:
        top = max(column.top_categories, key=lambda c: c.estimate)
        return f"top: {top.category} ({format_value(shown_count(top.estimate))})"
    return "\u2014"


def overview_rows(summary: DatasetSummary) -> list[OverviewRow]:
    """Per column: kind, schema type, private count of values, missing share, and its
    mean (share, median date) or top category -- computed from released numbers only.

    The missing share is ``1 - values / rows`` from the two noisy counts (clamped to
    [0, 1]); with a privacy unit both count rows kept, so it is approximate."""
    rows = summary.rows_estimate
    out = []
    for column in summary.columns:
        count = next((s for s in column.statistics if s.name == "count"), None)
        values = missing = "\u2014"
        if count is not None:
            values = format_value(shown_count(count.estimate))
            if rows is not None and rows.estimate > 0:
                share = min(1.0, max(0.0, 1.0 - count.estimate / rows.estimate))
                missing = f"{share:.1%}"
        out.append(
            OverviewRow(
                column.name, column.kind, column.sql_type, values, missing, _headline(column)
            )
        )
    return out
