"""Number, date and guarantee formatting shared by the terminal and HTML renderers."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from dpkit.accounting.guarantees import RDP, ZCDP, ApproxDP, Guarantee, PureDP
from dpkit.report.model import EPOCH_SECONDS, DatasetSummary

__all__ = [
    "REFERENCE_DELTA",
    "common_confidence",
    "describe_guarantee",
    "format_interval",
    "format_spread",
    "format_value",
    "interval_cell",
    "interval_header",
    "privacy_unit_text",
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
        return moment.strftime("%Y-%m-%d %H:%M")
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
