"""The HTML reports of two real tables, drawn by headless Chromium (issue 14).

MEPS (``female``: a 0/1 column) and Seattle weather (``date``: a DATE column) go
through ``describe`` at epsilon = 1 with a seeded generator and are rendered; the DOM
after load must show the overview table (one row per column) and a table of contents
linking every column's section, the binary column as a
share with counts per value (not percentiles), and the date column as days (ISO dates,
no time of day); the screenshot must show the drawn page (many colours) and its bars.
The browser helpers are those of tests/report/test_report_chromium.py.
"""

from __future__ import annotations

import importlib.util
import re
import warnings
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics.describe import describe
from dpkit.report import render_html


def _browser() -> ModuleType:
    path = Path(__file__).parents[1] / "report" / "test_report_chromium.py"
    spec = importlib.util.spec_from_file_location("_report_chromium", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _meps() -> pd.DataFrame:
    from linearmodels.datasets import meps

    return meps.load()


def _weather() -> pd.DataFrame:
    from vega_datasets import data

    frame = data.seattle_weather()
    frame["date"] = frame["date"].dt.date
    return frame


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int]]:
    browser = _browser()
    browser._chromium()  # skip locally (fail in CI) before any work
    folder = tmp_path_factory.mktemp("realdata-chromium")
    out = {}
    for name, load in (("meps", _meps), ("weather", _weather)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the loaders' own deprecation warnings
            frame = load()
        session = dp.Session.from_pandas(frame, budget=dp.ApproxDP(1.0, 1e-6), rng=1001)
        summary = describe(session, source=name)
        out[name] = (render_html(summary, folder / f"{name}.html"), len(summary.columns))
    return out


def _section_text(dom_text: str, column: str) -> str:
    match = re.search(
        rf'<section class="column"[^>]*data-column="{column}".*?</section>', dom_text, re.S
    )
    assert match, f"no section for column {column!r}"
    text = re.sub(r"<[^>]+>", " ", re.sub(r"<img[^>]*>", "", match.group(0)))
    return re.sub(r"\s+", " ", text)


def _dom(report: Path) -> str:
    browser = _browser()
    return str(
        browser._run(
            ["--dump-dom", report.as_uri()], report.parent / f"dom-{report.stem}"
        ).stdout.decode("utf-8")
    )


def test_overview_binary_and_date_columns_in_the_drawn_dom(
    reports: dict[str, tuple[Path, int]],
) -> None:
    for name, (report, columns) in reports.items():
        dom = _dom(report)
        table = re.search(r'<table id="overview-table">.*?</table>', dom, re.S)
        assert table, f"{name}: no overview table"
        assert len(re.findall(r"<tbody>.*?</tbody>", table.group(0), re.S)) == 1
        assert len(re.findall(r"<tr", table.group(0))) == columns + 1  # header + a row each
        # The table of contents (issue 14: large reports navigable) links every section.
        toc = re.search(r'<nav id="toc".*?</nav>', dom, re.S)
        assert toc, f"{name}: no table of contents"
        linked = set(re.findall(r'href="#(column-\d+)"', toc.group(0)))
        assert linked == {f"column-{i}" for i in range(columns)}
        assert len(re.findall(r'<a class="back" href="#overview"', dom)) == columns
    female = _section_text(_dom(reports["meps"][0]), "female")
    assert "share of 1" in female and "counts per value" in female
    assert "p50" not in female  # no percentiles for a 0/1 column
    day = _section_text(_dom(reports["weather"][0]), "date")
    assert re.search(r"\b(2012|2013|2014|2015)-\d{2}-\d{2}\b", day)
    assert not re.search(r"\d{2}:\d{2}:\d{2}", day), "a DATE shown with a time of day"


def test_screenshots_show_the_drawn_reports(reports: dict[str, tuple[Path, int]]) -> None:
    import numpy as np

    browser = _browser()
    for name, (report, _) in reports.items():
        # Tall enough to reach the column sections below the overview and budget tables.
        shot = report.with_suffix(".png")
        browser._run(
            [f"--screenshot={shot}", "--window-size=1200,12000", report.as_uri()],
            report.parent / f"shot-{report.stem}",
        )
        with browser.PIL_Image.open(shot) as image:
            pixels = np.asarray(image.convert("RGB"))
        colours = np.unique(pixels[::4, ::4].reshape(-1, 3), axis=0)
        assert len(colours) > 50, f"{name}: the screenshot is (nearly) blank"
        assert browser._has_colour(pixels, browser.BAR) > 5_000, f"{name}: no bars drawn"
