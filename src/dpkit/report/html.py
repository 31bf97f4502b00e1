"""Render a :class:`~dpkit.report.DatasetSummary` as one self-contained HTML file.

The file has no external resources: CSS is inline and plots are SVG images inside
``data:`` URIs, so it can be mailed, archived or opened offline. Every piece of text
that comes from the summary is escaped with :func:`html.escape`. Without Matplotlib
(the ``dpkit[plot]`` extra) the report is complete except for the plots, and says so.

Large reports (tens of columns, hundreds of screens) are navigable without scripts:
a table of contents, ``nav#toc``, stays at the side of the page while it scrolls (at
the top on narrow screens) and links to the overview, the budget split and every
column's section; the overview's column names link to the sections too, and each
section's heading links back to the overview.

Stable hooks for tests and styling: ``#report-header``, ``#dp-note``,
``#insecure-warning`` (only when the noise was not secure), ``#toc`` (the table of
contents), ``#overview-table`` (one row per column, linking to its section),
``#budget-table``, ``section.column`` (one per column, id ``column-<i>`` in table
order, ``data-column`` holds its name; ``a.back`` links back to the overview),
``table.statistics``, ``table.categories``, ``img.plot`` (``data-plot`` is
``estimates``, ``histogram`` or ``categories``) and ``#plots-missing``.
"""

from __future__ import annotations

import html
import webbrowser
from pathlib import Path

from dpkit.errors import DataError
from dpkit.report import plots
from dpkit.report._format import (
    bin_labels,
    budget_facts,
    common_confidence,
    describe_guarantee,
    format_interval,
    format_spread,
    format_value,
    interval_cell,
    interval_header,
    overview_rows,
    privacy_unit_text,
    rows_label,
    shown_count,
    statistic_estimate,
    statistic_label,
)
from dpkit.report.model import ColumnSummary, DatasetSummary, HistogramSummary

__all__ = ["html_report", "open_in_browser", "render_html"]

_CSS = """
:root { --ink: #1d2430; --muted: #5b6473; --line: #d9dee7; --accent: #4e79a7;
        --warn-bg: #fff4d6; --warn-ink: #7a4b00; --note-bg: #eef3fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
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
section.column:target > h2 { background: var(--note-bg); }
a.back { font-size: 12px; font-weight: 400; margin-left: 12px; color: var(--accent);
         text-decoration: none; }
h1 { font-size: 26px; margin: 0 0 12px; }
h2 { font-size: 20px; margin: 32px 0 10px; padding-bottom: 4px;
     border-bottom: 2px solid var(--line); }
h3 { font-size: 15px; margin: 18px 0 6px; color: var(--muted); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 18px; margin: 0; }
dl.facts dt { font-weight: 600; color: var(--muted); }
dl.facts dd { margin: 0; }
.banner { border-radius: 6px; padding: 10px 14px; margin: 14px 0; }
.banner.note { background: var(--note-bg); border-left: 4px solid var(--accent); }
.banner.warning { background: var(--warn-bg); color: var(--warn-ink);
                  border-left: 4px solid #e0a100; font-weight: 600; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 12px; font-size: 14px; }
th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid var(--line);
         vertical-align: top; }
th { background: #f0f2f6; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.share { display: inline-block; height: 10px; background: var(--accent);
         border-radius: 2px; vertical-align: middle; margin-right: 6px; }
.kind { font-size: 12px; font-weight: 600; color: #fff; background: var(--muted);
        border-radius: 10px; padding: 2px 9px; vertical-align: middle; margin-left: 8px; }
figure { margin: 8px 0 14px; }
figure img { width: 100%; max-width: 820px; height: auto; }
figcaption { font-size: 13px; color: var(--muted); }
small.caveat { color: var(--warn-ink); white-space: normal; }
ul.notes { color: var(--muted); font-size: 14px; margin: 4px 0 8px; }
details summary { cursor: pointer; color: var(--accent); }
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
PLOTS_MISSING_NOTE = (
    "Plots are not shown because Matplotlib is not installed. "
    "Install it with: pip install 'dpkit[plot]'"
)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _budget_text(summary: DatasetSummary) -> str:
    if summary.guarantee is not None:
        return describe_guarantee(summary.guarantee)
    return describe_guarantee(summary.budget, implied=True)


def _header(summary: DatasetSummary) -> str:
    facts = [
        ("Dataset", summary.source),
        ("Privacy unit", privacy_unit_text(summary)),
        *budget_facts(summary),
    ]
    rows = summary.rows_estimate
    if rows is not None:
        # Clamped at 0 for display (post-processing); the JSON keeps the raw counts.
        text = format_value(shown_count(rows.estimate), rows.unit)
        if rows.confidence is not None and rows.ci_low is not None and rows.ci_high is not None:
            ci = format_interval(shown_count(rows.ci_low), shown_count(rows.ci_high), rows.unit)
            text += f" ({rows.confidence:.0%} CI {ci})"
        facts.append((rows_label(summary), text))
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


def _overview_section(summary: DatasetSummary) -> str:
    body = []
    for i, row in enumerate(overview_rows(summary)):
        body.append(
            f'<tr><td><a href="#column-{i}">{_e(row.name)}</a></td><td>{_e(row.kind)}</td>'
            f"<td>{_e(row.sql_type)}</td>"
            f'<td class="num">{_e(row.values)}</td><td class="num">{_e(row.missing)}</td>'
            f"<td>{_e(row.headline)}</td></tr>"
        )
    return (
        '<section id="overview"><h2>Overview</h2><table id="overview-table"><thead><tr>'
        '<th>Column</th><th>Kind</th><th>Type</th><th class="num">Values</th>'
        '<th class="num">Missing</th><th>Mean / top category</th></tr></thead><tbody>'
        + "".join(body)
        + "</tbody></table></section>"
    )


def _budget_section(summary: DatasetSummary) -> str:
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
    return (
        '<section id="budget"><h2>Budget split</h2>'
        '<table id="budget-table"><thead>'
        + head
        + "</thead><tbody>"
        + "".join(body)
        + "</tbody><tfoot>"
        + total
        + "</tfoot></table></section>"
    )


def _figure(uri: str | None, kind: str, alt: str, caption: str) -> str:
    if uri is None:
        return ""
    return (
        f'<figure><img class="plot" data-plot="{_e(kind)}" alt="{_e(alt)}" src="{uri}">'
        f"<figcaption>{_e(caption)}</figcaption></figure>"
    )


def _statistics_table(column: ColumnSummary) -> str:
    rows = []
    shared = common_confidence(s.confidence for s in column.statistics)
    for s in column.statistics:
        interval = interval_cell(s.ci_low, s.ci_high, s.confidence, shared, s.unit)
        budget = "post-processing" if s.budget is None else describe_guarantee(s.budget)
        std = "" if s.std_error is None else format_spread(s.std_error, s.unit)
        caveat = f'<br><small class="caveat">{_e(s.caveat)}</small>' if s.caveat else ""
        rows.append(
            f"<tr><td>{_e(statistic_label(s))}</td>"
            f'<td class="num">{_e(statistic_estimate(s))}</td>'
            f'<td class="num">{_e(interval)}{caveat}</td>'
            f'<td class="num">{_e(std)}</td>'
            f"<td>{_e(s.mechanism)}</td><td>{_e(budget)}</td></tr>"
        )
    return (
        '<table class="statistics"><thead><tr><th>Statistic</th><th class="num">Estimate</th>'
        f'<th class="num">{_e(interval_header(shared).capitalize())}</th>'
        '<th class="num">± std. error</th><th>Mechanism</th>'
        "<th>Budget</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _histogram_details(histogram: HistogramSummary) -> str:
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
        f"<details><summary>Histogram table ({len(histogram.counts)} bins, counts shown "
        "clamped at 0 (the JSON keeps the raw noisy values); "
        f"{_e(histogram.mechanism)}{_e(budget)})</summary>"
        '<table class="histogram"><thead><tr><th>Bin</th><th class="num">Count</th>'
        f'<th class="num">{_e(interval_header(histogram.confidence).capitalize())}</th>'
        "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></details>"
    )


def _categories_table(column: ColumnSummary) -> str:
    rows = []
    shared = common_confidence(c.confidence for c in column.top_categories)
    for c in column.top_categories:
        std = "" if c.std_error is None else format_spread(c.std_error)
        rows.append(
            f"<tr><td>{_e(c.category)}</td><td class='num'>{_e(format_value(c.estimate))}</td>"
            f'<td class="num">{_e(interval_cell(c.ci_low, c.ci_high, c.confidence, shared))}</td>'
            f'<td class="num">{_e(std)}</td></tr>'
        )
    return (
        '<table class="categories"><thead><tr><th>Category</th><th class="num">Count</th>'
        f'<th class="num">{_e(interval_header(shared).capitalize())}</th>'
        '<th class="num">± std. error</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>"
    )


def _toc(summary: DatasetSummary) -> str:
    """The table of contents: the header, overview, budget and every column."""
    items = ['<li><a href="#report-header">Summary</a></li>']
    if summary.columns:
        items.append('<li><a href="#overview">Overview</a></li>')
    if summary.budget_split:
        items.append('<li><a href="#budget">Budget split</a></li>')
    if summary.columns:
        columns = "".join(
            f'<li><a href="#column-{i}" title="{_e(c.name)} ({_e(c.kind)})">{_e(c.name)}</a></li>'
            for i, c in enumerate(summary.columns)
        )
        count = f'<span class="count">({len(summary.columns)})</span>'
        items.append(f'<li><a href="#column-0">Columns {count}</a><ol>{columns}</ol></li>')
    return f'<nav id="toc" aria-label="Contents"><p>Contents</p><ol>{"".join(items)}</ol></nav>'


def _column_section(index: int, column: ColumnSummary, with_plots: bool) -> str:
    parts = [
        f'<section class="column" id="column-{index}" data-column="{_e(column.name)}">',
        f'<h2>{_e(column.name)}<span class="kind">{_e(column.kind)}</span>'
        '<a class="back" href="#overview" title="Back to the overview">\u2191 overview</a></h2>',
    ]
    if column.notes:
        parts.append(_notes(column.notes))
    if column.statistics:
        parts.append("<h3>Statistics</h3>")
        if with_plots:
            parts.append(
                _figure(
                    plots.estimates_plot(column.statistics),
                    "estimates",
                    f"Estimates for {column.name} with confidence intervals",
                    "Points: private estimates. Bars: their confidence intervals.",
                )
            )
        parts.append(_statistics_table(column))
    if column.histogram is not None:
        parts.append("<h3>Histogram</h3>")
        if with_plots:
            parts.append(
                _figure(
                    plots.histogram_plot(column.histogram),
                    "histogram",
                    f"Private histogram of {column.name}",
                    "Bars: noisy counts per bin (public bin edges). Whiskers: intervals.",
                )
            )
        parts.append(_histogram_details(column.histogram))
    if column.top_categories:
        parts.append("<h3>Top categories</h3>")
        if with_plots:
            parts.append(
                _figure(
                    plots.categories_plot(column.top_categories),
                    "categories",
                    f"Top categories of {column.name}",
                    "Categories released by private selection, with noisy counts.",
                )
            )
        parts.append(_categories_table(column))
    parts.append("</section>")
    return "\n".join(parts)


def html_report(summary: DatasetSummary, *, with_plots: bool = True) -> str:
    """The HTML report of ``summary`` as a string (see :func:`render_html`)."""
    if not isinstance(summary, DatasetSummary):
        raise DataError(f"html_report needs a DatasetSummary; got {type(summary).__name__}.")
    from dpkit import __version__

    draw = with_plots and plots.plots_available()
    body = [_header(summary)]
    if summary.columns:
        body.append(_overview_section(summary))
    if with_plots and not draw:
        body.append(f'<p id="plots-missing" class="banner note">{_e(PLOTS_MISSING_NOTE)}</p>')
    if summary.budget_split:
        body.append(_budget_section(summary))
    body += [_column_section(i, c, draw) for i, c in enumerate(summary.columns)]
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
        f'<div class="layout">\n{_toc(summary)}\n<main>\n'
        + "\n".join(part for part in body if part)
        + "\n</main>\n</div>\n</body>\n</html>\n"
    )


def render_html(summary: DatasetSummary, path: str | Path, *, with_plots: bool = True) -> Path:
    """Write the HTML report of ``summary`` to ``path`` and return the path.

    One self-contained UTF-8 file: a header (dataset, privacy unit, total budget and
    the guarantee it implies, a note that all numbers are DP estimates, a warning if
    the noise was insecure), the budget split, and per column the estimates with
    error-bar plots and a table, the histogram and the top categories with intervals.
    Plots need Matplotlib (``dpkit[plot]``); without it, or with ``with_plots=False``,
    the report is written without them (and, in the first case, says why).

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
