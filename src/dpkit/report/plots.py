"""Plots for the HTML report, drawn with Matplotlib (the optional ``dpkit[plot]`` extra).

Each function returns an SVG image as a ``data:image/svg+xml;base64,...`` URI, ready
for an ``<img src=...>``, so the report stays one self-contained file. They use
:class:`matplotlib.figure.Figure` directly (no ``pyplot``, no global state, no GUI
backend). The SVG is deterministic: no date in its metadata and a fixed hash salt
for element ids, so the same summary gives the same file.

Without Matplotlib, :func:`plots_available` is ``False`` and the HTML report says
how to get plots instead of showing them.
"""

from __future__ import annotations

import base64
import importlib.util
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from dpkit.report.model import EPOCH_SECONDS, CategoryCount, HistogramSummary, Statistic

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["categories_plot", "estimates_plot", "histogram_plot", "plots_available"]

_WIDTH_IN = 6.4
_BAR_COLOR = "#4e79a7"
_POINT_COLOR = "#e15759"
_RC: dict[Any, Any] = {
    "svg.hashsalt": "dpkit-report",
    "svg.fonttype": "path",
    "font.size": 9.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
_MAX_CATEGORY_LABEL = 40


def plots_available() -> bool:
    """Whether Matplotlib can be imported (``pip install 'dpkit[plot]'``)."""
    try:
        return importlib.util.find_spec("matplotlib") is not None
    except ValueError:  # a module whose __spec__ is None, e.g. blocked in tests
        return False


def _label(text: str) -> str:
    # Matplotlib reads $...$ as mathematics; data-derived labels must be literal.
    if len(text) > _MAX_CATEGORY_LABEL:
        text = text[: _MAX_CATEGORY_LABEL - 1] + "\u2026"
    return text.replace("\\", "\\\\").replace("$", r"\$")


def _new_figure(height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(_WIDTH_IN, height), layout="constrained")


def _to_uri(fig: Figure) -> str:
    import matplotlib

    buffer = io.BytesIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return "data:image/svg+xml;base64," + encoded


def _as_dates(values: npt.ArrayLike) -> npt.NDArray[np.float64]:
    from matplotlib import dates

    # Matplotlib's date axis counts days since its epoch (1970-01-01 by default).
    origin = float(dates.date2num(np.datetime64("1970-01-01T00:00:00")))  # type: ignore[no-untyped-call]
    return np.asarray(values, dtype=np.float64) / 86_400.0 + origin


def _errors(
    centre: Sequence[float], low: Sequence[float | None], high: Sequence[float | None]
) -> npt.NDArray[np.float64] | None:
    if any(v is None for v in low) or any(v is None for v in high):
        return None
    c = np.asarray(centre, dtype=np.float64)
    lo = np.asarray(low, dtype=np.float64)
    hi = np.asarray(high, dtype=np.float64)
    # Intervals need not be centred on the estimate; negative lengths cannot occur
    # for valid intervals around it, but clip in case an interval excludes it.
    return np.vstack([np.maximum(c - lo, 0.0), np.maximum(hi - c, 0.0)])


def estimates_plot(statistics: Sequence[Statistic]) -> str | None:
    """Estimates with their confidence intervals as error bars (a forest plot).

    One panel per unit (so counts and means are never on one axis); statistics
    without an interval are drawn as points. ``None`` if there is nothing to plot.
    """
    if not statistics:
        return None
    import matplotlib

    units: dict[str, list[Statistic]] = {}
    for stat in statistics:
        units.setdefault(stat.unit, []).append(stat)
    heights = [0.45 * len(group) + 0.55 for group in units.values()]
    with matplotlib.rc_context(_RC):
        fig = _new_figure(sum(heights))
        axes = fig.subplots(len(units), 1, squeeze=False, height_ratios=heights)[:, 0]
        for ax, (unit, group) in zip(axes, units.items(), strict=True):
            _forest(ax, unit, group)
        return _to_uri(fig)


def _forest(ax: Axes, unit: str, group: Sequence[Statistic]) -> None:
    y = np.arange(len(group))[::-1]
    x = np.array([s.estimate for s in group])
    low = [s.ci_low if s.ci_low is not None else s.estimate for s in group]
    high = [s.ci_high if s.ci_high is not None else s.estimate for s in group]
    err = _errors(list(x), low, high)
    if unit == EPOCH_SECONDS:
        x = _as_dates(x)
        err = None if err is None else err / 86_400.0
        ax.xaxis_date()
    ax.errorbar(x, y, xerr=err, fmt="o", color=_POINT_COLOR, ecolor="#555555", capsize=3)
    ax.set_yticks(y, [_label(s.name) for s in group])
    ax.set_ylim(-0.6, len(group) - 0.4)
    if unit and unit != EPOCH_SECONDS:
        ax.set_xlabel(_label(unit))
    ax.grid(axis="x", alpha=0.3)


def histogram_plot(histogram: HistogramSummary, *, title: str = "") -> str | None:
    """The histogram's noisy bin counts as bars, with per-bin intervals as error bars.

    Counts and intervals are drawn clamped at 0 (post-processing: a count is never
    negative); under- and overflow bins of an open-ended histogram are hatched and
    labelled ``<`` / ``>=``; integer columns get one tick per value when few.
    """
    import matplotlib

    from dpkit.report._format import bin_labels

    edges = np.asarray(histogram.edges, dtype=np.float64)
    counts = np.maximum(np.asarray(histogram.counts, dtype=np.float64), 0.0)
    with matplotlib.rc_context(_RC):
        fig = _new_figure(2.6)
        ax = fig.subplots()
        if histogram.unit == EPOCH_SECONDS:
            edges = _as_dates(edges)
            ax.xaxis_date()
        widths = np.diff(edges)
        centres = edges[:-1] + widths / 2
        colors = [_BAR_COLOR] * len(counts)
        hatches = [""] * len(counts)
        if histogram.open_ended:
            colors[0] = colors[-1] = "#a0b4cc"
            hatches[0] = hatches[-1] = "//"
        bars = ax.bar(edges[:-1], counts, width=widths, align="edge", color=colors)
        for bar, hatch in zip(bars, hatches, strict=True):
            bar.set_hatch(hatch)
            bar.set_edgecolor("white")
        if histogram.ci_low:
            low = np.maximum(np.asarray(histogram.ci_low, dtype=np.float64), 0.0)
            high = np.maximum(np.asarray(histogram.ci_high, dtype=np.float64), 0.0)
            err = _errors(list(counts), list(low), list(high))
            ax.errorbar(centres, counts, yerr=err, fmt="none", ecolor="#333333", capsize=2)
        labels = bin_labels(histogram)
        if histogram.integer and histogram.unit != EPOCH_SECONDS and len(counts) <= 36:
            ax.set_xticks(centres, [_label(t) for t in labels], rotation=90)
        elif histogram.open_ended:
            ax.text(centres[0], 0, "<", ha="center", va="bottom", color="#333333")
            ax.text(centres[-1], 0, "\u2265", ha="center", va="bottom", color="#333333")
        ax.axhline(0.0, color="#999999", linewidth=0.8)
        ax.set_ylabel("rows (noisy, \u2265 0)")
        if histogram.unit and histogram.unit != EPOCH_SECONDS:
            ax.set_xlabel(_label(histogram.unit))
        if title:
            ax.set_title(_label(title), loc="left")
        return _to_uri(fig)


def categories_plot(categories: Sequence[CategoryCount], *, title: str = "") -> str | None:
    """Top categories as horizontal bars (largest at the top), intervals as error bars."""
    if not categories:
        return None
    import matplotlib

    y = np.arange(len(categories))[::-1]
    x = np.array([c.estimate for c in categories])
    with matplotlib.rc_context(_RC):
        fig = _new_figure(0.28 * len(categories) + 0.8)
        ax = fig.subplots()
        ax.barh(y, x, color=_BAR_COLOR)
        err = _errors(list(x), [c.ci_low for c in categories], [c.ci_high for c in categories])
        if err is not None:
            ax.errorbar(x, y, xerr=err, fmt="none", ecolor="#333333", capsize=2)
        ax.set_yticks(y, [_label(c.category) for c in categories])
        ax.axvline(0.0, color="#999999", linewidth=0.8)
        ax.set_xlabel("count (noisy)")
        if title:
            ax.set_title(_label(title), loc="left")
        return _to_uri(fig)
