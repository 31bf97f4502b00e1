"""Issue 28 in the renderers: statistics withheld (never shown as numbers), rank
accuracy said once per column, missing shares with their intervals, alerts, notes
shared by columns said once, and an HTML report that stays light."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from rich.console import Console

from dpkit.report import (
    ColumnSummary,
    DatasetSummary,
    HistogramSummary,
    Statistic,
    from_json,
    html_report,
    render_terminal,
    to_json,
)
from dpkit.report._format import column_notes, missing_text, overview_rows

REASON = (
    "withheld: its accuracy would be \u00b11,161 ranks of about 2,030 values (more than "
    "25%); about 8.4x this column's budget would release it"
)
MAX_REASON = "withheld: the max would be accurate only to \u00b12,094 values of about 2,030"
SHARED_NOTE = "Range found privately; values outside are clamped for the mean."


def _missing(estimate: float, low: float, high: float) -> Statistic:
    return Statistic(
        "missing", estimate, ci_low=low, ci_high=high, confidence=0.95, mechanism="counts"
    )


def _histogram() -> HistogramSummary:
    counts = (30.0, 400.0, 900.0, 500.0, 120.0, 40.0)
    return HistogramSummary(
        edges=(100.0, 140.0, 160.0, 170.0, 180.0, 200.0, 240.0),
        counts=counts,
        ci_low=tuple(c - 45.0 for c in counts),
        ci_high=tuple(c + 45.0 for c in counts),
        confidence=0.95,
        open_ended=True,
        unit="cm",
    )


def _height() -> ColumnSummary:
    """A column whose percentiles and max were all withheld: only count and mean."""
    withheld = [Statistic(f"p{q}", None, withheld=REASON, unit="cm") for q in (5, 25, 50, 75, 95)]
    return ColumnSummary(
        name="height",
        kind="numeric",
        statistics=(
            Statistic("count", 2_030.0, ci_low=1_990.0, ci_high=2_070.0, confidence=0.95),
            *withheld,
            Statistic("max", None, withheld=MAX_REASON, unit="cm"),
            Statistic("mean", 171.5, ci_low=169.0, ci_high=174.0, confidence=0.95, unit="cm"),
        ),
        histogram=_histogram(),
        notes=(SHARED_NOTE, "height: values above 250 cm are clamped"),
        missing=_missing(0.004, 0.0, 0.021),
        alerts=("percentiles withheld at this n",),
    )


def _income() -> ColumnSummary:
    """Released percentiles (one rank accuracy) and a max that is a lower bound."""

    def order(name: str, value: float, radius: int, limit: str = "") -> Statistic:
        return Statistic(
            name,
            value,
            unit="EUR",
            rank_radius=radius,
            rank_count=1_797.0,
            limit=limit,
            caveat="values rounded to \u00b10.5 (grid)",
        )

    percentiles = [
        order(f"p{q}", v, 37) for q, v in ((5, 800.0), (25, 1_500.0), (50, 2_100.0), (75, 2_900.0))
    ]
    return ColumnSummary(
        name="income",
        kind="numeric",
        statistics=(
            Statistic("count", 1_797.0),
            *percentiles,
            order("max", 4_000.0, 12, limit="lower"),
            Statistic(
                "mean", 2_250.0, ci_low=2_100.0, ci_high=2_400.0, confidence=0.95, unit="EUR"
            ),
        ),
        notes=(SHARED_NOTE, "income: values above 10,000 EUR are clamped"),
        missing=_missing(0.12, 0.09, 0.15),
        alerts=("skewed", "mean: clamping may move up to 12% of the values"),
    )


@pytest.fixture
def summary(sample_summary: DatasetSummary) -> DatasetSummary:
    return replace(
        sample_summary,
        columns=(_height(), _income()),
        alerts=("this table is too small for 60 columns at this budget",),
    )


def _terminal(summary: DatasetSummary) -> str:
    console = Console(record=True, width=160, color_system=None)
    render_terminal(summary, console)
    return console.export_text()


def _card(page: str, name: str) -> str:
    match = re.search(rf'<section class="column"[^>]*data-column="{name}".*?</section>', page, re.S)
    assert match, name
    return match.group(0)


def _text(markup: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", markup))


# ------------------------------------------------------------------ withheld statistics


def test_withheld_statistics_say_why_in_the_terminal(summary: DatasetSummary) -> None:
    text = _terminal(summary)
    lines = [line for line in text.splitlines() if "withheld" in line]
    # One line per run of statistics with one reason, said once below the table, short.
    assert sum("p5, p25, p50, p75, p95 withheld: its accuracy would be" in x for x in lines) == 1
    assert "budget would release" not in text  # the short form: the first clause only
    assert any(line.startswith("max withheld: the max would be") for line in lines)
    table = text[text.index("height (numeric)") : text.index("p5, p25, p50, p75, p95 withheld")]
    assert table.count("withheld") == 2  # the p5-p95 line and the max line


def test_withheld_statistics_are_never_numbers_in_html(summary: DatasetSummary) -> None:
    card = _card(html_report(summary), "height")
    rows = re.findall(r'<tr class="withheld">.*?</tr>', card, re.S)
    assert len(rows) == 2  # p5-p95 together, the max alone
    assert "p5, p25, p50, p75, p95" in rows[0] and "<em>withheld</em>" in rows[0]
    # The whole reason, as small text and as a tooltip.
    reason = REASON.removeprefix("withheld: ")
    assert _text(rows[0]).count(reason.replace("'", "&#x27;")) == 1
    assert f'title="{REASON}"'.replace("'", "&#x27;") in rows[0]
    # The plot draws the mean but no mark for a withheld statistic.
    svg = re.search(r"<svg.*?</svg>", card, re.S)
    assert svg is not None
    marks = [tip.split(":")[0] for tip in re.findall(r"<title>([^<]*)</title>", svg.group(0))]
    assert "mean" in marks
    assert not {"p5", "p25", "p50", "p75", "p95", "max"} & set(marks)


def test_withheld_statistics_round_trip_through_json(summary: DatasetSummary) -> None:
    text = to_json(summary)
    doc = json.loads(text)
    p50 = next(s for s in doc["columns"][0]["statistics"] if s["name"] == "p50")
    assert p50["estimate"] is None and p50["withheld"] == REASON
    p75 = next(s for s in doc["columns"][1]["statistics"] if s["name"] == "p75")
    assert (p75["rank_radius"], p75["rank_count"], p75["withheld"]) == (37, 1_797.0, "")
    assert doc["columns"][0]["missing"]["ci_high"] == 0.021
    assert doc["alerts"] == list(summary.alerts)
    back = from_json(text)
    assert back == summary
    assert html_report(back) == html_report(summary)


# ------------------------------------------------------------------ order statistics


def test_rank_accuracy_is_said_once_per_column(summary: DatasetSummary) -> None:
    accuracy = "p5\u2013p75: \u00b137 ranks of ~1,797; max: at most 12 of ~1,797 values above it"
    assert _terminal(summary).count(accuracy) == 1
    card = _card(html_report(summary), "income")
    assert card.count(accuracy) == 1
    # The caveat the order statistics share is said once too, naming them.
    assert card.count("values rounded to \u00b10.5 (grid)") == 1
    assert "p5\u2013max: values rounded" in card


def test_a_lower_bound_max_reads_at_least(summary: DatasetSummary) -> None:
    card = _card(html_report(summary), "income")
    assert "max (at least)" in card and "\u2265 4,000 EUR" in card
    # Drawn as a triangle pointing to larger values (a filled path), not a tick.
    assert re.search(r'<path d="[^"]*z" fill="[^"]+"><title>max: \u2265 4,000, at most 12 ', card)
    assert "max (at least)" in _terminal(summary)


# ------------------------------------------------------------------ missing shares


@pytest.mark.parametrize(
    ("missing", "expected"),
    [
        (_missing(0.004, 0.0, 0.021), "~0% (\u2264 2.1%)"),
        (_missing(-0.01, -0.03, 0.015), "~0% (\u2264 1.5%)"),
        (_missing(0.12, 0.09, 0.15), "12% (9\u201315%)"),
        (_missing(0.05, 0.03, 0.07), "5.0% (3.0\u20137.0%)"),
        (_missing(0.98, 0.95, 1.01), "98% (95\u2013100%)"),
        (Statistic("missing", 0.3), "30%"),
        (Statistic("missing", None, withheld="withheld: too noisy"), "withheld"),
    ],
    ids=["complete", "negative", "some", "few", "nearly-all", "no-interval", "withheld"],
)
def test_missing_share_is_shown_with_its_interval(missing: Statistic, expected: str) -> None:
    column = ColumnSummary("x", "numeric", missing=missing)
    assert missing_text(column, None) == expected


def test_overview_uses_the_released_missing_share(summary: DatasetSummary) -> None:
    rows = {row.name: row for row in overview_rows(summary)}
    # Not 1 - values / rows (which would read 1 - 2,030 / 50,433 = 96%).
    assert rows["height"].missing == "~0% (\u2264 2.1%)"
    assert rows["income"].missing == "12% (9\u201315%)"
    page = html_report(summary, with_plots=False)
    table = page[page.index('id="overview-table"') : page.index("</table>")]
    assert "~0% (\u2264 2.1%)" in table and "12% (9\u201315%)" in table
    text = _terminal(summary)
    assert "~0% (\u2264 2.1%)" in text and "12% (9\u201315%)" in text


# ------------------------------------------------------------------ alerts


def test_alerts_are_in_the_overview_and_a_banner_above_it(summary: DatasetSummary) -> None:
    page = html_report(summary, with_plots=False)
    banner = page.index('id="dataset-alerts"')
    assert page.index('id="overview"') < banner < page.index('id="overview-table"')
    assert "this table is too small for 60 columns" in page[banner : page.index("</div>", banner)]
    table = page[page.index('id="overview-table"') : page.index("</table>")]
    rows = re.findall(r"<tr><td><a.*?</tr>", table)
    assert re.findall(r'<span class="alert">([^<]*)</span>', rows[1]) == [
        "skewed",
        "mean: clamping may move up to 12% of the values",
    ]
    assert 'class="alert">percentiles withheld at this n<' in _card(page, "height")
    text = _terminal(summary)
    assert text.index("too small for 60 columns") < text.index("Overview")
    overview = text[text.index("Overview") : text.index("Budget split")]
    assert "skewed; mean: clamping" in overview


def test_a_summary_without_alerts_has_no_banner(sample_summary: DatasetSummary) -> None:
    assert 'id="dataset-alerts"' not in html_report(sample_summary)
    assert "Alerts" not in _terminal(sample_summary).split("Overview")[0]


# ------------------------------------------------------------------ notes said once


def test_notes_shared_by_columns_are_said_once(summary: DatasetSummary) -> None:
    third = ColumnSummary("weight", "numeric", notes=("weight: values above 250 cm are clamped",))
    summary = replace(summary, columns=(*summary.columns, third))
    page = html_report(summary, with_plots=False)
    assert page.count(SHARED_NOTE) == 1
    notes = re.findall(r'<li id="note-(\d+)">(.*?) <small>\((\d+) columns\)</small></li>', page)
    # The same text, and the same text but for the column's own name.
    assert notes == [
        ("1", SHARED_NOTE, "2"),
        ("2", "this column: values above 250 cm are clamped", "2"),
    ]
    assert re.findall(r'href="#note-(\d+)"', _card(page, "height")) == ["1", "2"]
    assert re.findall(r'href="#note-(\d+)"', _card(page, "weight")) == ["2"]
    # A note only one column has stays in its card.
    assert "income: values above 10,000 EUR are clamped" in _card(page, "income")
    text = _terminal(summary)
    assert text.count(SHARED_NOTE) == 1 and "height: notes [1] [2]" in text


def test_column_names_in_notes_match_whole_words_only() -> None:
    columns = [
        ColumnSummary("a", "numeric", notes=("max of a is clamped",)),
        ColumnSummary("b", "numeric", notes=("max of b is clamped",)),
    ]
    notes = column_notes(columns)
    assert notes.shared == ("max of this column is clamped",)
    assert notes.refs == {"a": (1,), "b": (1,)} and notes.own == {"a": (), "b": ()}


# ------------------------------------------------------------------ a light report


def test_a_wide_report_stays_light(summary: DatasetSummary) -> None:
    # Issue 28: the 67-column report was 4.7 MB (Matplotlib SVG in data: URIs). 65
    # columns with a histogram, marks and a details table each must stay far below.
    columns = tuple(replace(_height(), name=f"height_{i}", notes=()) for i in range(65))
    page = html_report(replace(summary, columns=columns))
    plots = re.findall(r"<svg.*?</svg>", page, re.S)
    assert len(plots) == 65
    assert max(len(p.encode()) for p in plots) < 4_000
    assert len(page.encode()) < 400_000
    assert "data:image" not in page and "<img" not in page
    # Whiskers: every bin's interval is drawn.
    assert len(re.findall(r"M[\d.]+ [\d.]+V[\d.]+", plots[0])) >= 6
