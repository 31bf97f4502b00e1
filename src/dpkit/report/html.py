"""Render a :class:`~dpkit.report.DatasetSummary` as one self-contained HTML file.

The file has no external resources: CSS is inline and plots are small inline SVG
drawn by :mod:`dpkit.report.plots` (no plotting library needed), so it can be mailed,
archived or opened offline. Every piece of text that comes from the summary is
escaped with :func:`html.escape`.

Wide tables stay readable: after the header come the dataset's alerts, an overview
(one line per column, with its alerts), the budget split collapsed (it can run to
hundreds of lines), the notes that several columns share (said once, numbered) and
one compact card per column, laid out in a grid (three per row on a laptop screen):
its alerts, one plot, its estimates with intervals (or why they were withheld), the
rank accuracy of its order statistics said once, references to the shared notes and
its own notes; mechanisms, budgets and bin counts are in a collapsed ``<details>``.
A table of contents, ``nav#toc``, stays at the side of the page while it scrolls (at
the top on narrow screens) and links to every part and card; the overview's column
names link to the cards too, and each card's heading links back to the overview.

Stable hooks for tests and styling: ``#report-header``, ``#dp-note``,
``#insecure-warning`` (only when the noise was not secure), ``#dataset-alerts``,
``#toc`` (the table of contents), ``#overview-table`` (one row per column, linking
to its card), ``#budget-table`` (inside a closed ``<details>``), ``#shared-notes``
(``li#note-<n>``), ``section.column`` (one card per column, id ``column-<i>`` in table
order, ``data-column`` holds its name; ``a.back`` links back to the overview;
``p.refs`` links its shared notes), ``span.alert``, ``table.statistics``,
``table.categories``, ``table.mechanisms``, ``table.histogram`` and ``svg.plot``
(``data-plot`` is ``histogram`` or ``estimates``).
"""

from __future__ import annotations

import html
import webbrowser
from collections import Counter
from pathlib import Path

from dpkit.errors import DataError
from dpkit.report import plots
from dpkit.report._format import (
    WITHHELD,
    ColumnNotes,
    StatisticRow,
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

__all__ = ["html_report", "open_in_browser", "render_html"]

_CSS = """
:root { --ink: #1d2430; --muted: #5b6473; --line: #d9dee7; --accent: #4e79a7;
        --warn-bg: #fff4d6; --warn-ink: #7a4b00; --note-bg: #eef3fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--ink); background: #f6f7f9; }
.layout { display: grid; grid-template-columns: 230px minmax(0, 1100px);
          justify-content: center; }
main { padding: 24px 28px 48px; background: #fff; min-height: 100vh; min-width: 0; }
nav#toc { position: sticky; top: 0; align-self: start; max-height: 100vh; overflow-y: auto;
          padding: 24px 10px 24px 0; font-size: 13px; }
nav#toc p { margin: 0 0 6px 8px; font-weight: 600; color: var(--muted); }
nav#toc ol { list-style: none; padding: 0; margin: 0; }
nav#toc ol ol { margin: 2px 0 0 10px; border-left: 2px solid var(--line); }
nav#toc a { display: block; padding: 1px 8px; border-radius: 4px; color: var(--ink);
            text-decoration: none; white-space: nowrap; overflow: hidden;
            text-overflow: ellipsis; }
nav#toc a:hover { background: var(--note-bg); color: var(--accent); }
nav#toc .count { color: var(--muted); }
@media (max-width: 900px) {
  .layout { display: block; }
  nav#toc { position: static; max-height: 40vh; padding: 12px 16px; background: #fff;
            border-bottom: 1px solid var(--line); }
}
section { scroll-margin-top: 8px; }
h1 { font-size: 26px; margin: 0 0 12px; }
h2 { font-size: 20px; margin: 28px 0 8px; padding-bottom: 4px;
     border-bottom: 2px solid var(--line); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 18px; margin: 0; }
dl.facts dt { font-weight: 600; color: var(--muted); }
dl.facts dd { margin: 0; }
.banner { border-radius: 6px; padding: 10px 14px; margin: 14px 0; }
.banner.note { background: var(--note-bg); border-left: 4px solid var(--accent); }
.banner.warning { background: var(--warn-bg); color: var(--warn-ink);
                  border-left: 4px solid #e0a100; font-weight: 600; }
.banner ul { margin: 4px 0 0; padding-left: 20px; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 12px; font-size: 14px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line);
         vertical-align: top; }
th { background: #f0f2f6; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.share { display: inline-block; height: 10px; background: var(--accent);
         border-radius: 2px; vertical-align: middle; margin-right: 6px; }
.kind { font-size: 11px; font-weight: 600; color: #fff; background: var(--muted);
        border-radius: 10px; padding: 1px 8px; }
.alert { display: inline-block; font-size: 11px; line-height: 1.5; color: var(--warn-ink);
         background: var(--warn-bg); border-radius: 9px; padding: 0 7px; margin: 1px 3px 1px 0; }
small { color: var(--muted); font-size: 11.5px; }
small.caveat { color: var(--warn-ink); white-space: normal; }
ul.notes { color: var(--muted); font-size: 13px; margin: 4px 0 8px; padding-left: 18px; }
ol#shared-notes { color: var(--muted); font-size: 13px; padding-left: 26px; }
details summary { cursor: pointer; color: var(--accent); }
p.legend { color: var(--muted); font-size: 13px; margin: 0 0 10px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr));
         gap: 12px; align-items: start; }
section.column { border: 1px solid var(--line); border-radius: 8px; padding: 8px 10px;
                 font-size: 13px; min-width: 0; }
section.column:target { outline: 2px solid var(--accent); }
section.column > h2 { display: flex; gap: 6px; align-items: baseline; font-size: 15px;
                      margin: 0 0 4px; border-bottom: 1px solid var(--line); }
section.column > h2 .name { overflow-wrap: anywhere; }
a.back { font-size: 11px; font-weight: 400; margin-left: auto; color: var(--accent);
         text-decoration: none; white-space: nowrap; }
section.column p { margin: 3px 0; }
section.column ul.notes { font-size: 12px; line-height: 1.35; }
section.column table { font-size: 12.5px; margin: 4px 0; }
section.column th, section.column td { padding: 2px 5px; }
section.column td.num { white-space: normal; }
section.column td.est { white-space: nowrap; }
tr.withheld small { display: block; }
section.column details { font-size: 12px; margin-top: 4px; }
svg.plot { display: block; width: 100%; height: auto; margin: 4px 0; }
td.bar { position: relative; width: 64px; }
td.bar span { position: absolute; top: 6px; left: 0; height: 9px; background: var(--accent);
              border-radius: 1px; }
td.bar i { position: absolute; top: 10px; height: 1px; background: #333; }
p.refs a { color: var(--accent); text-decoration: none; margin-right: 3px; }
footer { margin-top: 40px; font-size: 13px; color: var(--muted); }
"""

DP_NOTE = (
    "Every number in this report is a differentially private estimate: random noise, "
    "calibrated to the privacy budget, was added before release, so small counts and "
    "differences may be noise. Each interval covers the value the noise was added to "
    "with the stated confidence (it accounts for the privacy noise, not for sampling or "
    "for clamping to bounds)."
)
INSECURE_NOTE = (
    "Warning: the noise came from a seeded, insecure random generator. These numbers "
    "are reproducible but NOT private. Do not publish them."
)
PLOT_LEGEND = (
    "Plots: bars are noisy counts per bin (bins drawn equally wide; the lighter end bars "
    "count the values below and above the range), whiskers their intervals. Below them, "
    "on the same axis: red ticks are released percentiles and the max (a triangle: the "
    "max is at least there), the dot the mean with its interval. Percentiles are accurate "
    "in ranks, as each column states; withheld statistics are not drawn."
)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _budget_text(summary: DatasetSummary) -> str:
    if summary.guarantee is not None:
        return describe_guarantee(summary.guarantee)
    return describe_guarantee(summary.budget, implied=True)


def _rows_text(rows: Statistic) -> str:
    if rows.estimate is None:
        return f"{WITHHELD} ({withheld_reason(rows)})"
    # Clamped at 0 for display (post-processing); the JSON keeps the raw counts.
    text = format_value(shown_count(rows.estimate), rows.unit)
    if rows.confidence is not None and rows.ci_low is not None and rows.ci_high is not None:
        ci = format_interval(shown_count(rows.ci_low), shown_count(rows.ci_high), rows.unit)
        text += f" ({rows.confidence:.0%} CI {ci})"
    return text


def _header(summary: DatasetSummary) -> str:
    facts = [
        ("Dataset", summary.source),
        ("Privacy unit", privacy_unit_text(summary)),
        *budget_facts(summary),
    ]
    if summary.rows_estimate is not None:
        facts.append((rows_label(summary), _rows_text(summary.rows_estimate)))
    facts.append(("Created", summary.created.isoformat(timespec="seconds")))
    items = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts)
    parts = [
        '<header id="report-header">',
        f"<h1>{_e(summary.title)}</h1>",
        f'<dl class="facts">{items}</dl>',
    ]
    if not summary.secure:
        parts.append(
            f'<div id="insecure-warning" class="banner warning" role="alert">'
            f"{_e(INSECURE_NOTE)}</div>"
        )
    parts.append(f'<p id="dp-note" class="banner note">{_e(DP_NOTE)}</p>')
    if summary.notes:
        parts.append(_notes(summary.notes))
    parts.append("</header>")
    return "\n".join(parts)


def _notes(notes: tuple[str, ...]) -> str:
    return '<ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>"


def _alerts(alerts: tuple[str, ...]) -> str:
    return "".join(f'<span class="alert">{_e(a)}</span>' for a in alerts)


def _dataset_alerts(summary: DatasetSummary) -> str:
    """The dataset-level flags, in a banner above the overview."""
    if not summary.alerts:
        return ""
    items = "".join(f"<li>{_e(a)}</li>" for a in summary.alerts)
    return f'<div id="dataset-alerts" class="banner warning"><ul>{items}</ul></div>'


def _overview_section(summary: DatasetSummary) -> str:
    body = []
    for i, row in enumerate(overview_rows(summary)):
        body.append(
            f'<tr><td><a href="#column-{i}">{_e(row.name)}</a></td><td>{_e(row.kind)}</td>'
            f"<td>{_e(row.sql_type)}</td>"
            f'<td class="num">{_e(row.values)}</td><td class="num">{_e(row.missing)}</td>'
            f"<td>{_e(row.headline)}</td><td>{_alerts(row.alerts)}</td></tr>"
        )
    return (
        '<section id="overview"><h2>Overview</h2>'
        + _dataset_alerts(summary)
        + '<table id="overview-table"><thead><tr>'
        '<th>Column</th><th>Kind</th><th>Type</th><th class="num">Values</th>'
        '<th class="num">Missing</th><th>Mean / top category</th><th>Alerts</th></tr>'
        "</thead><tbody>" + "".join(body) + "</tbody></table></section>"
    )


def _budget_section(summary: DatasetSummary) -> str:
    """The budget split, collapsed: one line per part can run to hundreds of lines."""
    head = (
        "<tr><th>Used for</th><th>Mechanism</th><th>Guarantee</th>"
        '<th class="num">Share of total</th></tr>'
    )
    body = []
    for share in summary.budget_split:
        if share.fraction is None:
            fraction = ""
        else:
            width = round(160 * share.fraction)
            fraction = f'<span class="share" style="width:{width}px"></span>{share.fraction:.1%}'
        body.append(
            f"<tr><td>{_e(share.label)}</td><td>{_e(share.mechanism)}</td>"
            f"<td>{_e(describe_guarantee(share.budget))}</td>"
            f'<td class="num">{fraction}</td></tr>'
        )
    total = (
        f'<tr><th>Total</th><th></th><th>{_e(_budget_text(summary))}</th><th class="num"></th></tr>'
    )
    parts = len(summary.budget_split)
    return (
        '<section id="budget"><h2>Budget split</h2><details><summary>What each of the '
        f"{parts} part{'s' if parts != 1 else ''} spent (total: "
        f"{_e(_budget_text(summary))})</summary>"
        '<table id="budget-table"><thead>'
        + head
        + "</thead><tbody>"
        + "".join(body)
        + "</tbody><tfoot>"
        + total
        + "</tfoot></table></details></section>"
    )


def _notes_section(notes: ColumnNotes) -> str:
    """The notes several columns share, numbered; the cards refer to them."""
    if not notes.shared:
        return ""
    counts = Counter(n for refs in notes.refs.values() for n in refs)
    items = "".join(
        f'<li id="note-{i}">{_e(text)} <small>({counts[i]} columns)</small></li>'
        for i, text in enumerate(notes.shared, start=1)
    )
    return (
        '<section id="notes"><h2>Notes</h2><p class="legend">Notes that several columns '
        "share, said once; each column refers to them by number.</p>"
        f'<ol id="shared-notes">{items}</ol></section>'
    )


_ONE_LINE = 14  # characters of an estimate kept on one line in a card


def _statistic_row(row: StatisticRow, shared: float | None, said: dict[str, str]) -> str:
    """A line of the statistics table; a withheld one says why across two cells."""
    stat = row.first
    if row.withheld:
        return (
            f'<tr class="withheld"><td>{_e(row.label)}</td><td colspan="2"><em>{WITHHELD}</em>'
            f' <small title="{_e(stat.withheld)}">{_e(withheld_reason(stat))}</small></td></tr>'
        )
    interval = _e(interval_cell(stat.ci_low, stat.ci_high, stat.confidence, shared, stat.unit))
    if stat.caveat and stat.caveat not in said:
        interval += f'<br><small class="caveat">{_e(stat.caveat)}</small>'
    estimate = statistic_estimate(stat)
    # Short estimates stay on one line; long ones (dates with a time) may wrap.
    kind = "num est" if len(estimate) <= _ONE_LINE else "num"
    return (
        f'<tr><td>{_e(row.label)}</td><td class="{kind}">{_e(estimate)}</td>'
        f'<td class="num">{interval}</td></tr>'
    )


def _statistics_table(column: ColumnSummary) -> str:
    """Estimates and intervals (mechanisms and budgets are in the card's details);
    below it, once, the rank accuracy and the caveats several lines share."""
    shared = common_confidence(s.confidence for s in column.statistics)
    said = shared_caveats(column.statistics)
    rows = []
    if column.missing is not None:
        rows.append(
            f'<tr><td>missing</td><td class="num est">{_e(missing_text(column, None))}</td>'
            "<td></td></tr>"
        )
    rows += [_statistic_row(row, shared, said) for row in statistic_rows(column.statistics)]
    table = (
        '<table class="statistics"><thead><tr><th>Statistic</th><th class="num">Estimate</th>'
        f'<th class="num">{_e(interval_header(shared).capitalize())}</th></tr></thead>'
        "<tbody>" + "".join(rows) + "</tbody></table>"
    )
    ranks = rank_accuracy(column.statistics)
    if ranks:
        table += f'<p class="rank"><small>Rank accuracy: {_e(ranks)}</small></p>'
    for caveat, names in said.items():
        table += f'<p><small class="caveat">{_e(names)}: {_e(caveat)}</small></p>'
    return table


def _mechanisms_table(column: ColumnSummary) -> str:
    """Per statistic: its noise, mechanism and budget (post-processing spends none)."""
    rows = []
    stats = column.statistics if column.missing is None else (column.missing, *column.statistics)
    for s in stats:
        budget = "post-processing" if s.budget is None else describe_guarantee(s.budget)
        std = "" if s.std_error is None else format_spread(s.std_error, s.unit)
        rows.append(
            f'<tr><td>{_e(s.name)}</td><td class="num">{_e(std)}</td>'
            f"<td>{_e(s.mechanism)}</td><td>{_e(budget)}</td></tr>"
        )
    return (
        '<table class="mechanisms"><thead><tr><th>Statistic</th><th class="num">± std. error'
        "</th><th>Mechanism</th><th>Budget</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )


def _histogram_table(histogram: HistogramSummary) -> str:
    rows = []
    labels = bin_labels(histogram)
    for i, count in enumerate(histogram.counts):
        interval = ""
        if histogram.ci_low:
            low, high = shown_count(histogram.ci_low[i]), shown_count(histogram.ci_high[i])
            interval = format_interval(low, high)
        rows.append(
            f"<tr><td>{_e(labels[i])}</td>"
            f'<td class="num">{_e(format_value(shown_count(count)))}</td>'
            f'<td class="num">{_e(interval)}</td></tr>'
        )
    budget = "" if histogram.budget is None else f"; {describe_guarantee(histogram.budget)}"
    return (
        f"<p>Histogram: {len(histogram.counts)} bins, counts shown clamped at 0 (the JSON "
        f"keeps the raw noisy values); {_e(histogram.mechanism)}{_e(budget)}</p>"
        '<table class="histogram"><thead><tr><th>Bin</th><th class="num">Count</th>'
        f'<th class="num">{_e(interval_header(histogram.confidence).capitalize())}</th>'
        "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _bar_cell(low: float | None, high: float | None, count: float, largest: float) -> str:
    """A bar for a count and a whisker for its interval, in CSS (no plot needed)."""

    def pct(x: float) -> float:
        return round(100 * min(1.0, max(0.0, x / largest)), 1)

    whisker = ""
    if low is not None and high is not None:
        whisker = f'<i style="left:{pct(low)}%;width:{max(pct(high) - pct(low), 0.5)}%"></i>'
    return f'<td class="bar"><span style="width:{pct(count)}%"></span>{whisker}</td>'


def _categories_table(column: ColumnSummary) -> str:
    rows = []
    shared = common_confidence(c.confidence for c in column.top_categories)
    tops = [c.estimate if c.ci_high is None else c.ci_high for c in column.top_categories]
    largest = max(shown_count(t) for t in [*tops, 1.0])
    for c in column.top_categories:
        rows.append(
            f"<tr><td>{_e(c.category)}</td><td class='num'>{_e(format_value(c.estimate))}</td>"
            f'<td class="num">{_e(interval_cell(c.ci_low, c.ci_high, c.confidence, shared))}</td>'
            + _bar_cell(c.ci_low, c.ci_high, shown_count(c.estimate), largest)
            + "</tr>"
        )
    return (
        '<table class="categories"><thead><tr><th>Category</th><th class="num">Count</th>'
        f'<th class="num">{_e(interval_header(shared).capitalize())}</th><th></th></tr>'
        "</thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _toc(summary: DatasetSummary, notes: ColumnNotes) -> str:
    """The table of contents: the header, overview, budget, notes and every column."""
    items = ['<li><a href="#report-header">Summary</a></li>']
    if summary.columns:
        items.append('<li><a href="#overview">Overview</a></li>')
    if summary.budget_split:
        items.append('<li><a href="#budget">Budget split</a></li>')
    if notes.shared:
        items.append('<li><a href="#notes">Notes</a></li>')
    if summary.columns:
        columns = "".join(
            f'<li><a href="#column-{i}" title="{_e(c.name)} ({_e(c.kind)})">{_e(c.name)}</a></li>'
            for i, c in enumerate(summary.columns)
        )
        count = f'<span class="count">({len(summary.columns)})</span>'
        items.append(f'<li><a href="#column-0">Columns {count}</a><ol>{columns}</ol></li>')
    return f'<nav id="toc" aria-label="Contents"><p>Contents</p><ol>{"".join(items)}</ol></nav>'


def _plot(column: ColumnSummary) -> str:
    """The column's one plot: its histogram with marks below, or the marks alone."""
    if column.histogram is not None:
        return plots.histogram_plot(
            column.histogram, column.statistics, label=f"Private histogram of {column.name}"
        )
    return plots.estimates_plot(column.statistics, label=f"Estimates for {column.name}") or ""


def _note_refs(refs: tuple[int, ...]) -> str:
    if not refs:
        return ""
    links = "".join(f'<a href="#note-{n}">[{n}]</a>' for n in refs)
    return f'<p class="refs"><small>Notes</small> {links}</p>'


def _details(column: ColumnSummary) -> str:
    """What a reader looks up rarely, collapsed: noise, mechanisms, budgets, bins."""
    parts = []
    if column.statistics or column.missing is not None:
        parts.append(_mechanisms_table(column))
    if column.histogram is not None:
        parts.append(_histogram_table(column.histogram))
    if not parts:
        return ""
    return "<details><summary>Mechanisms, budgets, bins</summary>" + "".join(parts) + "</details>"


def _column_card(index: int, column: ColumnSummary, notes: ColumnNotes, with_plots: bool) -> str:
    parts = [
        f'<section class="column" id="column-{index}" data-column="{_e(column.name)}">',
        f'<h2><span class="name">{_e(column.name)}</span><span class="kind">{_e(column.kind)}'
        '</span><a class="back" href="#overview" title="Back to the overview">\u2191 overview</a>'
        "</h2>",
    ]
    if column.alerts:
        parts.append(f'<p class="alerts">{_alerts(column.alerts)}</p>')
    if with_plots:
        parts.append(_plot(column))
    if column.statistics or column.missing is not None:
        parts.append(_statistics_table(column))
    if column.top_categories:
        parts.append(_categories_table(column))
    parts.append(_note_refs(notes.refs.get(column.name, ())))
    own = notes.own.get(column.name, ())
    if own:
        parts.append(_notes(own))
    parts.append(_details(column))
    parts.append("</section>")
    return "".join(part for part in parts if part)


def _columns_section(summary: DatasetSummary, notes: ColumnNotes, with_plots: bool) -> str:
    cards = "\n".join(_column_card(i, c, notes, with_plots) for i, c in enumerate(summary.columns))
    legend = f'<p class="legend">{_e(PLOT_LEGEND)}</p>' if with_plots else ""
    return (
        f'<section id="columns"><h2>Columns</h2>{legend}'
        f'<div class="cards">\n{cards}\n</div></section>'
    )


def html_report(summary: DatasetSummary, *, with_plots: bool = True) -> str:
    """The HTML report of ``summary`` as a string (see :func:`render_html`)."""
    if not isinstance(summary, DatasetSummary):
        raise DataError(f"html_report needs a DatasetSummary; got {type(summary).__name__}.")
    from dpkit._version import __version__

    notes = column_notes(summary.columns)
    body = [_header(summary)]
    if summary.columns:
        body.append(_overview_section(summary))
    elif summary.alerts:
        body.append(_dataset_alerts(summary))
    if summary.budget_split:
        body.append(_budget_section(summary))
    body.append(_notes_section(notes))
    if summary.columns:
        body.append(_columns_section(summary, notes, with_plots))
    body.append(
        f"<footer>Made with dpkit {_e(__version__)}. Summary created "
        f"{_e(summary.created.isoformat(timespec='seconds'))}.</footer>"
    )
    title = f"{summary.title} \u2014 {summary.source}"
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="dpkit">\n'
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f'<div class="layout">\n{_toc(summary, notes)}\n<main>\n'
        + "\n".join(part for part in body if part)
        + "\n</main>\n</div>\n</body>\n</html>\n"
    )


def render_html(summary: DatasetSummary, path: str | Path, *, with_plots: bool = True) -> Path:
    """Write the HTML report of ``summary`` to ``path`` and return the path.

    One self-contained UTF-8 file: a header (dataset, privacy unit, total budget and
    the guarantee it implies, a note that all numbers are DP estimates, a warning if
    the noise was insecure), the dataset's alerts, an overview of every column, the
    budget split (collapsed), the notes several columns share, and a card per column
    with its plot (histogram bars with interval whiskers, percentile and mean marks),
    estimates with intervals or why they were withheld, and top categories.
    ``with_plots=False`` leaves the plots out.

    Privacy: rendering released values is post-processing; it spends nothing.
    """
    target = Path(path)
    target.write_text(html_report(summary, with_plots=with_plots), encoding="utf-8")
    return target


def open_in_browser(path: str | Path) -> bool:
    """Open a report file in the default web browser; ``True`` if one was launched.

    Call it only when the user asked for it (e.g. a ``--open`` flag): it starts a
    program on the user's machine.
    """
    target = Path(path).resolve()
    if not target.is_file():
        raise DataError(f"No report at {str(target)!r} to open.")
    return webbrowser.open(target.as_uri())
