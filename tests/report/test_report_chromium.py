"""The HTML report renders in a real browser: headless Chromium draws it, plots included.

Two checks on a sample report (made-up released values, insecure so the warning shows):

1. ``chromium --headless --dump-dom``: the DOM after the page has loaded has the title,
   the header, the note that numbers are DP estimates, the insecure warning, the budget
   table with one row per share, one card per column and the inline SVG plots.
2. ``chromium --headless --screenshot``: the PNG is not blank and contains colours that
   only the drawn page can produce: the warning banner's background, the red of the
   estimate marks, which exist only inside the SVG plots, and the bars' blue. A
   control renders a secure report without plots and checks the same thresholds then
   fail (measured at 1200 px: 457 red and 34,512 blue pixels with plots, 0 and 2,333
   -- the categories' table bars -- without; the thresholds are about 3 times below
   the first and well above the second).

Chromium is Debian's ``chromium`` package. Without it the test is skipped locally with
the reason, but fails under CI (``CI`` set), where .ci/run must install it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from dpkit.report import DatasetSummary, render_html

PIL_Image = pytest.importorskip("PIL.Image", reason="Pillow (a Matplotlib dependency) is needed")

WARNING_BACKGROUND = (0xFF, 0xF4, 0xD6)  # .banner.warning in the report's CSS
ESTIMATE_MARKER = (0xE1, 0x57, 0x59)  # plots.MARK_COLOR, drawn only inside SVG plots
BAR = (0x4E, 0x79, 0xA7)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    message = "headless Chromium is not installed (Debian: apt-get install -y chromium)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI must install it (.ci/run) so this test runs.")
    pytest.skip(message)


def _run(args: list[str], profile: Path) -> subprocess.CompletedProcess[bytes]:
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",  # CI runs as root, where the sandbox cannot start
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, timeout=90, check=True)


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.title = ""
        self._in_title = False
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        # The page's title only: SVG marks have <title> tooltips too.
        self._in_title = tag == "title" and not self.title

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        self.text.append(data)


@pytest.fixture(scope="module")
def rendered(
    tmp_path_factory: pytest.TempPathFactory, summary_factory: Callable[..., DatasetSummary]
) -> tuple[Path, Path]:
    _chromium()  # skip (or fail in CI) before doing any work
    folder = tmp_path_factory.mktemp("chromium")
    summary = summary_factory(secure=False)
    return render_html(summary, folder / "report.html"), folder


def test_dom_has_the_main_elements(rendered: tuple[Path, Path]) -> None:
    report, folder = rendered
    result = _run(["--dump-dom", report.as_uri()], folder / "profile-dom")
    dom = _Dom()
    dom.feed(result.stdout.decode("utf-8"))
    assert dom.title == "Private summary of web sessions \u2014 web_sessions.csv.gz"
    ids = {attrs.get("id") for _, attrs in dom.elements}
    assert {"report-header", "dp-note", "insecure-warning", "overview-table", "budget-table"} <= ids
    rows = [a for t, a in dom.elements if t == "tr"]
    assert len(rows) >= 1 + 5 + 1  # budget header, 5 shares, total (and the column tables)
    sections = [a["data-column"] for t, a in dom.elements if t == "section" and "data-column" in a]
    assert sections == ["duration_minutes", "amount_spent", "country", "started_at"]
    plots = [a for t, a in dom.elements if t == "svg" and a.get("class") == "plot"]
    assert sorted(str(a.get("data-plot")) for a in plots) == ["estimates", "histogram", "histogram"]
    assert not [a for t, a in dom.elements if t == "img"]
    assert "differentially private estimate" in " ".join(dom.text)


def _has_colour(pixels: np.ndarray, colour: tuple[int, int, int], tol: int = 6) -> int:
    """How many pixels are within ``tol`` (per channel) of ``colour``."""
    close = np.abs(pixels.astype(np.int16) - np.array(colour, dtype=np.int16)) <= tol
    return int(np.count_nonzero(close.all(axis=-1)))


def _screenshot(report: Path, folder: Path) -> np.ndarray:
    shot = report.with_suffix(".png")
    _run(
        [f"--screenshot={shot}", "--window-size=1200,3200", report.as_uri()],
        folder / f"profile-{report.stem}",
    )
    with PIL_Image.open(shot) as image:
        assert image.size == (1200, 3200)
        return np.asarray(image.convert("RGB"))


def test_screenshot_shows_the_page_and_its_plots(rendered: tuple[Path, Path]) -> None:
    report, folder = rendered
    pixels = _screenshot(report, folder)
    colours = np.unique(pixels[::4, ::4].reshape(-1, 3), axis=0)
    assert len(colours) > 50, "the screenshot is (nearly) blank"
    assert _has_colour(pixels, WARNING_BACKGROUND) > 10_000, "insecure warning banner not drawn"
    assert _has_colour(pixels, ESTIMATE_MARKER, tol=20) > 150, "no estimate marks drawn"
    assert _has_colour(pixels, BAR) > 12_000, "no bars drawn"


def test_screenshot_check_can_fail(
    rendered: tuple[Path, Path], summary_factory: Callable[..., DatasetSummary]
) -> None:
    """Power check: a secure report without plots lacks exactly what the test looks for."""
    _, folder = rendered
    plain = render_html(summary_factory(secure=True), folder / "plain.html", with_plots=False)
    pixels = _screenshot(plain, folder)
    assert _has_colour(pixels, WARNING_BACKGROUND) == 0
    assert _has_colour(pixels, ESTIMATE_MARKER, tol=20) < 150
    assert _has_colour(pixels, BAR) < 12_000
