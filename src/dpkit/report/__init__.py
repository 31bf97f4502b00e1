"""Reports of private releases: a neutral summary model, JSON, terminal and HTML.

A producer (``dpkit describe``, a Session, a script) fills a :class:`DatasetSummary`
with released numbers and their privacy costs; the renderers show it:

- :func:`render_terminal` (Rich tables),
- :func:`render_html` (one self-contained HTML file with small inline SVG plots),
- :func:`to_json` / :func:`from_json` (a stable, versioned JSON schema),
- :func:`open_in_browser` (only when the user asks).

Everything here is post-processing of already-private values: it spends no budget.
See ``docs/report.md`` for a worked example.
"""

from dpkit.report.html import html_report, open_in_browser, render_html
from dpkit.report.model import (
    COLUMN_KINDS,
    EPOCH_SECONDS,
    BudgetShare,
    CategoryCount,
    ColumnKind,
    ColumnSummary,
    DatasetSummary,
    HistogramSummary,
    Statistic,
)
from dpkit.report.serialize import SCHEMA, from_json, to_json
from dpkit.report.terminal import render_terminal

__all__ = [
    "COLUMN_KINDS",
    "EPOCH_SECONDS",
    "SCHEMA",
    "BudgetShare",
    "CategoryCount",
    "ColumnKind",
    "ColumnSummary",
    "DatasetSummary",
    "HistogramSummary",
    "Statistic",
    "from_json",
    "html_report",
    "open_in_browser",
    "render_html",
    "render_terminal",
    "to_json",
]
