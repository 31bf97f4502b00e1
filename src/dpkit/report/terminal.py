"""Render a :class:`~dpkit.report.DatasetSummary` as Rich tables in a terminal."""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from dpkit.report._format import (
    WITHHELD,
    ColumnNotes,
    bin_labels,
    budget_facts,
    column_notes,
    common_confidence,
    describe_guarantee,
    format_interval,
    format_spread,
    format_value,
    interval_cell,
    interval_header,
    missing_text,
    overview_rows,
    privacy_unit_text,
    rank_accuracy,
    rows_label,
    shared_caveats,
    shown_count,
    statistic_estimate,
    statistic_rows,
    withheld_reason,
)
from dpkit.report.model import ColumnSummary, DatasetSummary, HistogramSummary, Statistic

__all__ = ["render_terminal"]

_BAR_WIDTH = 24
_MAX_HISTOGRAM_ROWS = 20
DP_NOTE = (
    "All numbers are differentially private estimates: they include random noise. "
    "Intervals cover the true value with the stated confidence (noise only)."
)
INSECURE_NOTE = (
    "Seeded random generator: these numbers are reproducible but NOT private. Do not publish them."
)


def _rows_text(rows: Statistic) -> str:
    if rows.estimate is None:
        return f"{WITHHELD} ({withheld_reason(rows, short=True)})"
    # Clamped at 0 for display (post-processing); the JSON keeps the raw counts.
    text = format_value(shown_count(rows.estimate), rows.unit)
    if rows.ci_low is not None and rows.ci_high is not None and rows.confidence is not None:
        ci = format_interval(shown_count(rows.ci_low), shown_count(rows.ci_high), rows.unit)
        text += f"  {rows.confidence:.0%} CI {ci}"
    return text


def _header(summary: DatasetSummary) -> Panel:
    lines = Text()
    lines.append("Dataset: ", style="bold").append(summary.source + "\n")
    lines.append("Privacy unit: ", style="bold").append(privacy_unit_text(summary) + "\n")
    for label, text in budget_facts(summary):
        lines.append(f"{label}: ", style="bold").append(text + "\n")
    if summary.rows_estimate is not None:
        lines.append(f"{rows_label(summary)}: ", style="bold")
        lines.append(_rows_text(summary.rows_estimate) + "\n")
    lines.append("Created: ", style="bold").append(summary.created.isoformat(timespec="seconds"))
    for note in summary.notes:
        lines.append("\n" + note, style="dim")
    parts: list[Text] = [lines, Text(DP_NOTE, style="italic")]
    if not summary.secure:
        parts.append(Text(INSECURE_NOTE, style="bold yellow"))
    return Panel(Group(*parts), title=escape(summary.title), expand=False)


def _dataset_alerts(summary: DatasetSummary) -> Panel:
    text = Text("\n".join(f"\u26a0 {alert}" for alert in summary.alerts), style="bold yellow")
    return Panel(text, title="Alerts", title_align="left", expand=False)


def _overview_table(summary: DatasetSummary) -> Table:
    table = Table(title="Overview (private estimates)", title_justify="left")
    for header in ("column", "kind", "type", "values", "missing", "mean / top", "alerts"):
        table.add_column(header, justify="right" if header in ("values", "missing") else "left")
    for row in overview_rows(summary):
        table.add_row(
            *(escape(t) for t in (row.name, row.kind, row.sql_type, row.values, row.missing)),
            escape(row.headline),
            Text("; ".join(row.alerts), style="yellow"),
        )
    return table


def _budget_table(summary: DatasetSummary) -> Table:
    table = Table(title="Budget split", title_justify="left")
    table.add_column("used for")
    table.add_column("mechanism")
    table.add_column("guarantee")
    table.add_column("share", justify="right")
    for share in summary.budget_split:
        table.add_row(
            escape(share.label),
            escape(share.mechanism),
            escape(describe_guarantee(share.budget)),
            "" if share.fraction is None else f"{share.fraction:.1%}",
        )
    return table


def _caption(column: ColumnSummary, said: dict[str, str]) -> str | None:
    """Below the table, once each: why statistics were withheld (short), the rank
    accuracy of the released order statistics and the caveats several lines share."""
    lines = [
        f"{row.label} {WITHHELD}: {withheld_reason(row.first, short=True)}"
        for row in statistic_rows(column.statistics)
        if row.withheld
    ]
    ranks = rank_accuracy(column.statistics)
    if ranks:
        lines.append(f"rank accuracy: {ranks}")
    lines += [f"{names}: {caveat}" for caveat, names in said.items()]
    return escape("\n".join(lines)) if lines else None


def _statistics_table(column: ColumnSummary) -> Table:
    said = shared_caveats(column.statistics)
    table = Table(
        title=f"{escape(column.name)} ({column.kind})",
        title_justify="left",
        caption=_caption(column, said),
        caption_justify="left",
    )
    table.add_column("statistic")
    table.add_column("estimate", justify="right")
    shared = common_confidence(s.confidence for s in column.statistics)
    table.add_column(interval_header(shared), justify="right")
    table.add_column("\u00b1 std. error", justify="right")
    table.add_column("mechanism")
    table.add_column("budget")
    if column.missing is not None:
        table.add_row("missing", escape(missing_text(column, None)), "", *_cost(column.missing))
    for row in statistic_rows(column.statistics):
        stat = row.first
        if row.withheld:  # the reason is said once, below the table
            table.add_row(escape(row.label), Text(WITHHELD, style="italic"), "", "", "", "")
            continue
        table.add_row(
            escape(row.label),
            escape(statistic_estimate(stat)),
            escape(
                interval_cell(stat.ci_low, stat.ci_high, stat.confidence, shared, stat.unit)
                + (f"\n{stat.caveat}" if stat.caveat and stat.caveat not in said else "")
            ),
            *_cost(stat),
        )
    return table


def _cost(stat: Statistic) -> tuple[str, str, str]:
    """Standard error, mechanism and budget cells of a released statistic."""
    return (
        "" if stat.std_error is None else escape(format_spread(stat.std_error, stat.unit)),
        escape(stat.mechanism),
        "post-processing" if stat.budget is None else escape(describe_guarantee(stat.budget)),
    )


def _bar(value: float, largest: float) -> str:
    if largest <= 0 or value <= 0:
        return ""
    return "\u2588" * max(1, round(_BAR_WIDTH * value / largest))


def _histogram_table(name: str, histogram: HistogramSummary) -> Table:
    table = Table(title=f"{escape(name)}: histogram", title_justify="left")
    table.add_column("bin")
    table.add_column("count", justify="right")
    table.add_column(interval_header(histogram.confidence), justify="right")
    table.add_column("")
    counts = [shown_count(c) for c in histogram.counts]
    largest = max(counts)
    labels = bin_labels(histogram)
    limit = _MAX_HISTOGRAM_ROWS + (2 if histogram.open_ended else 0)
    shown = min(len(counts), limit)
    rows = list(range(shown))
    cut = shown < len(counts)
    if cut and histogram.open_ended:
        rows[-1] = len(counts) - 1  # always show the overflow bin
    for i in rows:
        if cut and histogram.open_ended and i == len(counts) - 1:
            table.add_row(f"... {len(counts) - shown} more bins", "", "", "")
        interval = ""
        if histogram.ci_low:
            low = shown_count(histogram.ci_low[i])
            interval = format_interval(low, shown_count(histogram.ci_high[i]))
        table.add_row(
            escape(labels[i]), format_value(counts[i]), escape(interval), _bar(counts[i], largest)
        )
    if cut and not histogram.open_ended:
        table.add_row(f"... {len(counts) - shown} more bins", "", "", "")
    return table


def _categories_table(column: ColumnSummary) -> Table:
    table = Table(title=f"{escape(column.name)}: top categories", title_justify="left")
    table.add_column("category")
    shared = common_confidence(c.confidence for c in column.top_categories)
    table.add_column("count", justify="right")
    table.add_column(interval_header(shared), justify="right")
    table.add_column("")
    largest = max(c.estimate for c in column.top_categories)
    for cat in column.top_categories:
        table.add_row(
            escape(cat.category),
            format_value(cat.estimate),
            escape(interval_cell(cat.ci_low, cat.ci_high, cat.confidence, shared)),
            _bar(cat.estimate, largest),
        )
    return table


def _shared_notes(notes: ColumnNotes) -> Text:
    text = Text("Notes shared by several columns:", style="bold")
    for i, note in enumerate(notes.shared, start=1):
        text.append(f"\n[{i}] {note}", style="dim")
    return text


def _column_notes(column: ColumnSummary, notes: ColumnNotes) -> list[Text]:
    """A column's alerts, its references to the shared notes and its own notes."""
    lines = []
    if column.alerts:
        lines.append(Text(f"  {column.name}: \u26a0 {'; '.join(column.alerts)}", style="yellow"))
    refs = notes.refs.get(column.name, ())
    if refs:
        numbers = " ".join(f"[{n}]" for n in refs)
        lines.append(Text(f"  {column.name}: notes {numbers}", style="dim"))
    lines += [Text(f"  {column.name}: {note}", style="dim") for note in notes.own[column.name]]
    return lines


def render_terminal(summary: DatasetSummary, console: Console | None = None) -> None:
    """Print ``summary`` to ``console`` (a new :class:`rich.console.Console` if ``None``).

    Prints a header (dataset, privacy unit, total budget and the guarantee it implies,
    a note that every number is a DP estimate, and a warning when the noise came
    from a seeded, insecure generator), the dataset's alerts, an overview of the
    columns, the budget split, the notes several columns share (once, numbered), and
    per column its alerts, statistics with intervals (``withheld`` with a short reason
    for those not released, the rank accuracy of order statistics once, below the
    table), its histogram (as bars) and its top categories. All text from the summary
    is escaped, so ``[...]`` in names is shown literally.

    Privacy: printing released values is post-processing; it spends nothing.
    """
    out = console if console is not None else Console()
    out.print(_header(summary))
    if summary.alerts:
        out.print(_dataset_alerts(summary))
    if summary.columns:
        out.print(_overview_table(summary))
    if summary.budget_split:
        out.print(_budget_table(summary))
    notes = column_notes(summary.columns)
    if notes.shared:
        out.print(_shared_notes(notes))
    for column in summary.columns:
        if column.statistics or column.missing is not None:
            out.print(_statistics_table(column))
        for line in _column_notes(column, notes):
            out.print(line)
        if column.histogram is not None:
            out.print(_histogram_table(column.name, column.histogram))
        if column.top_categories:
            out.print(_categories_table(column))
    if not summary.secure:
        out.print(Text(INSECURE_NOTE, style="bold yellow"))
