"""dpkit.report renderers: terminal (Rich) and self-contained HTML."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from dpkit.report import (
    CategoryCount,
    ColumnSummary,
    DatasetSummary,
    HistogramSummary,
    Statistic,
    html_report,
    open_in_browser,
    render_html,
    render_terminal,
    to_json,
)
from dpkit.report import html as html_module
from dpkit.report._format import bin_labels, overview_rows

HOSTILE = '<script>alert("x")</script> & $a$ [bold]'


class _Collector(HTMLParser):
    """Tags, attributes and text of a page, to check structure without a browser."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(page: str) -> _Collector:
    parser = _Collector()
    parser.feed(page)
    return parser


def _hostile(summary: DatasetSummary) -> DatasetSummary:
    column = ColumnSummary(
        name=HOSTILE,
        kind="categorical",
        top_categories=[
            CategoryCount(
                category=HOSTILE, estimate=12.0, ci_low=2.0, ci_high=22.0, confidence=0.95
            ),
            CategoryCount(
                category="$5 plan", estimate=9.0, ci_low=-1.0, ci_high=19.0, confidence=0.95
            ),
        ],
        notes=[HOSTILE],
    )
    return replace(
        summary, source=HOSTILE, title=HOSTILE, notes=(HOSTILE,), columns=(*summary.columns, column)
    )


def test_html_has_every_part(sample_summary: DatasetSummary, tmp_path: Path) -> None:
    path = render_html(sample_summary, tmp_path / "report.html")
    page = path.read_text(encoding="utf-8")
    parsed = _parse(page)
    ids = {attrs.get("id") for _, attrs in parsed.tags}
    assert {"report-header", "dp-note", "budget-table"} <= ids
    assert "insecure-warning" not in ids
    sections = [a for t, a in parsed.tags if t == "section" and a.get("class") == "column"]
    assert [s["data-column"] for s in sections] == [c.name for c in sample_summary.columns]
    plots = [a for t, a in parsed.tags if t == "svg" and a.get("class") == "plot"]
    kinds = sorted(str(a["data-plot"]) for a in plots)
    # duration and started_at: a histogram with the marks of their estimates below;
    # amount: its estimates alone; country: bars in its categories table, no plot.
    assert kinds == ["estimates", "histogram", "histogram"]
    assert all(a.get("role") == "img" and a.get("aria-label") for a in plots)
    text = " ".join(parsed.text)
    assert "differentially private estimate" in text
    assert "ε = 1 (pure DP)" in text and "user_id" in text
    # Nothing is fetched from elsewhere: the file is self-contained.
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "<link" not in page and "<script" not in page


def test_html_warns_when_insecure(summary_factory: Callable[..., DatasetSummary]) -> None:
    parsed = _parse(html_report(summary_factory(secure=False)))
    warnings = [a for t, a in parsed.tags if a.get("id") == "insecure-warning"]
    assert len(warnings) == 1 and warnings[0].get("role") == "alert"
    assert "NOT private" in " ".join(parsed.text)


def test_html_zcdp_budget_states_implied_epsilon(
    summary_factory: Callable[..., DatasetSummary],
) -> None:
    page = html_report(summary_factory(budget="zcdp"), with_plots=False)
    assert "ρ = 0.125 (zCDP), which implies (ε, δ) = (" in page
    assert "1e-06)" in page


def test_html_escapes_everything(sample_summary: DatasetSummary) -> None:
    page = html_report(_hostile(sample_summary))
    assert "<script" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    parsed = _parse(page)
    assert HOSTILE in " ".join(parsed.text)  # shown literally, as text
    sections = [a for t, a in parsed.tags if t == "section"]
    assert sections[-1]["data-column"] == HOSTILE


def test_html_is_deterministic(sample_summary: DatasetSummary) -> None:
    assert html_report(sample_summary) == html_report(sample_summary)


def test_html_plots_need_no_plotting_library(
    sample_summary: DatasetSummary, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The plots are SVG written by dpkit: without Matplotlib (a None entry in
    # sys.modules makes `import matplotlib` fail) the report is the same.
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    page = html_report(sample_summary)
    parsed = _parse(page)
    assert len([a for t, a in parsed.tags if t == "svg" and a.get("class") == "plot"]) == 3
    assert not [a for t, a in parsed.tags if t == "img"]
    assert sum(1 for t, a in parsed.tags if t == "table" and a.get("class") == "statistics") == 3


def test_html_without_plots_on_request(sample_summary: DatasetSummary) -> None:
    parsed = _parse(html_report(sample_summary, with_plots=False))
    assert not [a for t, a in parsed.tags if t in ("img", "svg")]
    # Every table is still there.
    assert sum(1 for t, a in parsed.tags if t == "table" and a.get("class") == "statistics") == 3


def test_terminal_shows_every_part(summary_factory: Callable[..., DatasetSummary]) -> None:
    console = Console(record=True, width=140, color_system=None)
    render_terminal(summary_factory(secure=False), console)
    out = console.export_text()
    for expected in (
        "Private summary of web sessions",
        "web_sessions.csv.gz",
        "user_id",
        "ε = 1 (pure DP)",
        "differentially private estimates",
        "Budget split",
        "duration_minutes (numeric)",
        "95% interval",
        "[50,341, 50,483]",
        "country: top categories",
        "2024-08-03 14:00",
        "NOT private",
    ):
        assert expected in out, expected


def test_terminal_prints_markup_literally(sample_summary: DatasetSummary) -> None:
    console = Console(record=True, width=200, color_system=None)
    render_terminal(_hostile(sample_summary), console)
    assert HOSTILE in console.export_text()


def test_open_in_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    monkeypatch.setattr(html_module.webbrowser, "open", lambda url: opened.append(url) or True)
    path = tmp_path / "r.html"
    path.write_text("<html></html>")
    assert open_in_browser(path) is True
    assert opened == [path.resolve().as_uri()]
    with pytest.raises(Exception, match="No report"):
        open_in_browser(tmp_path / "missing.html")


def _with_histogram(summary: DatasetSummary, histogram: HistogramSummary) -> DatasetSummary:
    column = ColumnSummary("h", "numeric", histogram=histogram)
    return replace(summary, columns=(column,))


def test_negative_counts_are_shown_clamped_and_kept_raw_in_json(
    sample_summary: DatasetSummary,
) -> None:
    histogram = HistogramSummary(
        edges=(-1.0, 0.0, 1.0, 2.0),
        counts=(-7.0, 40.0, -3.0),
        ci_low=(-20.0, 27.0, -16.0),
        ci_high=(6.0, 53.0, 10.0),
        confidence=0.95,
        open_ended=True,
        integer=True,
    )
    summary = _with_histogram(sample_summary, histogram)
    console = Console(width=160, record=True)
    render_terminal(summary, console)
    text = console.export_text()
    assert "-7" not in text and "-3" not in text and "-20" not in text
    for label in ("< 0", "│ 0 ", "≥ 1"):
        assert label in text
    page = html_report(summary, with_plots=False)
    assert "-7" not in page and "&lt; 0" in page and "≥ 1" in page
    assert json.loads(to_json(summary))["columns"][0]["histogram"]["counts"] == [-7.0, 40.0, -3.0]


def test_bin_labels_stay_distinct_on_a_narrow_range() -> None:
    # 20 bins over [1000, 1000.002): four significant digits would print "1,000" 21 times.
    edges = [1000.0 + 1e-4 * i for i in range(21)]
    histogram = HistogramSummary(edges=tuple(edges), counts=tuple([1.0] * 20))
    labels = bin_labels(histogram)
    assert len(set(labels)) == 20


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ((0.0, 5.0, 10.0, 15.0), ["< 5", "5–9", "≥ 10"]),
        ((2.0, 3.0, 4.0, 5.0, 6.0), ["< 3", "3", "4", "≥ 5"]),
    ],
    ids=["wide", "unit"],
)
def test_integer_bins_are_labelled_by_their_values(
    edges: tuple[float, ...], expected: list[str]
) -> None:
    histogram = HistogramSummary(
        edges=edges, counts=tuple([1.0] * (len(edges) - 1)), open_ended=True, integer=True
    )
    assert bin_labels(histogram) == expected


def test_lower_bound_statistics_are_labelled(sample_summary: DatasetSummary) -> None:
    stat = Statistic(name="max", estimate=17.0, limit="lower")
    column = ColumnSummary("educ", "numeric", statistics=(stat,))
    summary = replace(sample_summary, columns=(column,))
    console = Console(width=160, record=True)
    render_terminal(summary, console)
    text = console.export_text()
    assert "max (at least)" in text and "≥ 17" in text
    page = html_report(summary, with_plots=False)
    assert "max (at least)" in page and "≥ 17" in page


def test_overview_lists_every_column_before_the_sections(sample_summary: DatasetSummary) -> None:
    page = html_report(sample_summary, with_plots=False)
    overview = page.index('id="overview-table"')
    assert overview < page.index('id="budget-table"') < page.index('class="column"')
    # The budget split can run to hundreds of lines: it is collapsed by default.
    budget = page[page.index('<section id="budget">') : page.index('id="budget-table"')]
    assert "<details>" in budget and "<details open" not in budget
    table = page[overview : page.index("</table>", overview)]
    for i, column in enumerate(sample_summary.columns):
        assert f'href="#column-{i}"' in table and column.name in table
    console = Console(width=200, record=True)
    render_terminal(sample_summary, console)
    text = console.export_text()
    assert text.index("Overview") < text.index("Budget split")


class _Links(HTMLParser):
    """Ids, in-page links, external references and the table of contents of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.links: list[str] = []
        self.external: list[str] = []
        self.toc: list[str] = []
        self._in_toc = 0
        self._section = ""
        self.back: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.append(str(found["id"]))
        if tag == "nav" and found.get("id") == "toc":
            self._in_toc = 1
        elif tag == "nav" and self._in_toc:
            self._in_toc += 1
        if tag == "section" and found.get("class") == "column":
            self._section = str(found["id"])
        for key in ("href", "src"):
            value = found.get(key) or ""
            if value.startswith("#"):
                self.links.append(value[1:])
                if self._in_toc and key == "href":
                    self.toc.append(value[1:])
                if found.get("class") == "back":
                    self.back[self._section] = value[1:]
            elif value and not value.startswith("data:"):
                self.external.append(value)

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav" and self._in_toc:
            self._in_toc -= 1


def test_a_large_report_is_navigable_from_a_table_of_contents(
    sample_summary: DatasetSummary,
) -> None:
    # Issue 14: a 65-column report is ~100 screens. The table of contents (kept at the
    # side while scrolling, by CSS: no script, no external asset) links to the
    # overview, the budget and every column's section, in table order; the overview
    # links to every section and every section back to the overview; every in-page
    # link lands on an element of the page.
    columns = tuple(
        replace(column, name=f"{column.name}_{k}")
        for k in range(20)
        for column in sample_summary.columns
    )
    summary = replace(sample_summary, columns=columns)
    page = html_report(summary, with_plots=False)
    parser = _Links()
    parser.feed(page)
    assert len(parser.ids) == len(set(parser.ids)), "duplicate ids"
    assert set(parser.links) <= set(parser.ids), set(parser.links) - set(parser.ids)
    assert parser.external == []
    sections = [f"column-{i}" for i in range(len(columns))]
    assert {"report-header", "overview", "budget"} <= set(parser.toc)
    assert list(dict.fromkeys(t for t in parser.toc if t in sections)) == sections
    assert parser.back == dict.fromkeys(sections, "overview")
    assert "position: sticky" in page and "<script" not in page
    toc = page[page.index('<nav id="toc"') : page.index("</nav>")]
    assert all(html_module.html.escape(c.name) in toc for c in columns)
    assert page.index('<nav id="toc"') < page.index('id="overview-table"')


def test_overview_missing_share_without_a_released_one_is_post_processing_of_two_counts(
    sample_summary: DatasetSummary,
) -> None:
    # Documents written before ColumnSummary.missing: 1 - values / rows.
    rows = Statistic(name="rows", estimate=1000.0)
    count = Statistic(name="count", estimate=900.0)
    mean = Statistic(name="mean", estimate=4.25)
    column = ColumnSummary("x", "numeric", statistics=(count, mean), sql_type="DOUBLE")
    summary = replace(sample_summary, rows_estimate=rows, columns=(column,))
    (row,) = overview_rows(summary)
    assert (row.sql_type, row.values, row.missing, row.headline) == (
        "DOUBLE",
        "900",
        "10.0%",
        "mean 4.25",
    )


def test_a_negative_noisy_row_count_is_shown_clamped_at_zero(
    sample_summary: DatasetSummary,
) -> None:
    # Issue 28: "Rows kept -114" in the header. Clamping is post-processing; the JSON
    # keeps the raw estimate.
    rows = Statistic(
        name="rows", estimate=-114.0, ci_low=-300.0, ci_high=72.0, confidence=0.95, unit="rows"
    )
    summary = replace(sample_summary, rows_estimate=rows)
    console = Console(record=True, width=200)
    render_terminal(summary, console)
    text = console.export_text()
    header = next(line for line in text.splitlines() if "Rows" in line)
    assert "-114" not in header and "-300" not in header and " 0" in header
    page = html_report(summary)
    start = page.index('<dl class="facts">')
    facts = page[start : page.index("</dl>", start)]
    assert "-114" not in facts and "\u2212114" not in facts
    assert json.loads(to_json(summary))["rows_estimate"]["estimate"] == -114.0
