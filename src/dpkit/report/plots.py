"""Small inline SVG plots for the HTML report, written by hand (no plotting library).

Each function returns the markup of one ``<svg class="plot" data-plot=...>`` element,
to be placed in the page as it is: no ``data:`` URI, no fonts embedded, a few
kilobytes per plot at most, so a 65-column report stays well under a megabyte. The
output is deterministic (the same summary gives the same markup) and every piece of
text from the summary is escaped.

What is drawn is the uncertainty, not only the estimates:

- :func:`histogram_plot`: noisy bin counts as bars (clamped at 0, a post-processing)
  with their intervals as whiskers; bins are drawn with equal widths (a bin's bar is
  its count, whatever its width), under- and overflow bins in a lighter colour. Below
  the bars, on the same axis, :func:`_marks` draws the column's released order
  statistics and mean.
- :func:`estimates_plot`: the same marks on their own axis, for a column without a
  histogram.

Marks: percentiles are ticks joined by a line from the lowest to the highest (their
accuracy is in ranks, stated beside the plot, not an interval of values); the mean is
a dot with its interval; a max is a tick, or a right-pointing triangle when it is
only a lower bound ("at least"). A withheld statistic is not drawn at all.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence

import numpy as np

from dpkit.report._format import bin_labels, format_value, rank_text
from dpkit.report.model import EPOCH_SECONDS, HistogramSummary, Statistic

__all__ = ["BAR_COLOR", "MARK_COLOR", "estimates_plot", "histogram_plot", "value_statistics"]

BAR_COLOR = "#4e79a7"
EDGE_BAR_COLOR = "#a0b4cc"  # under- and overflow bins
MARK_COLOR = "#e15759"
INK = "#333"
MUTED = "#777"

# Geometry of the drawing, in SVG user units (the element scales to its box).
_WIDTH = 320.0
_LEFT = 6.0
_RIGHT = 6.0
_TOP = 12.0  # room for the largest count's label
_BARS = 64.0  # height of the bars' area
_STRIP = 16.0  # height of the marks' strip
_LABELS = 12.0  # room for the axis labels
_FONT = 9
_MAX_LABELS = 6
_MAX_LABEL_CHARS = 12
_CHAR_WIDTH = 5.4  # about, for a 9-unit sans-serif font

_PERCENTILE = re.compile(r"p\d+(\.\d+)?")


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _n(x: float) -> str:
    """A coordinate with one decimal: enough for a screen, short in the file."""
    return f"{x:.1f}".rstrip("0").rstrip(".") if x % 1 else f"{x:.0f}"


def _is_percentile(name: str) -> bool:
    return name == "median" or bool(_PERCENTILE.fullmatch(name))


def _is_order_statistic(name: str) -> bool:
    return name in ("min", "max") or _is_percentile(name)


def _is_mean(stat: Statistic) -> bool:
    # "mean", or a mean named with its clamping ("mean clamped to [0, 1]").
    return stat.name.startswith("mean")


def _value(stat: Statistic) -> float:
    # Marks are drawn for released statistics only (see value_statistics).
    if stat.estimate is None:
        raise ValueError(f"{stat.name} was withheld: it has no value to draw")
    return stat.estimate


def _tip(stat: Statistic) -> str:
    """A mark's tooltip: its name, value and any rank accuracy (``p50: 19.15, ±37
    ranks of ~1,797``; ``max: >= 103, ...``)."""
    prefix = "\u2265 " if stat.limit == "lower" else ""
    text = f"{stat.name}: {prefix}{format_value(_value(stat), stat.unit)}"
    ranks = rank_text(stat)
    return f"<title>{_e(text + (', ' + ranks if ranks else ''))}</title>"


def value_statistics(statistics: Sequence[Statistic], unit: str) -> list[Statistic]:
    """The released statistics drawn as marks: order statistics and the mean, in
    ``unit`` (counts and shares are not on the values' axis)."""
    return [
        s
        for s in statistics
        if s.estimate is not None
        and s.unit == unit
        and (_is_mean(s) or _is_order_statistic(s.name))
    ]


def _svg(kind: str, label: str, height: float, body: list[str]) -> str:
    return (
        f'<svg class="plot" data-plot="{_e(kind)}" viewBox="0 0 {_n(_WIDTH)} {_n(height)}" '
        f'role="img" aria-label="{_e(label)}" font-size="{_FONT}" '
        f'font-family="system-ui,sans-serif">' + "".join(body) + "</svg>"
    )


def _text(x: float, y: float, text: str, anchor: str = "middle", *, cut: bool = True) -> str:
    # Axis labels are cut short so that neighbours do not overlap.
    if cut and len(text) > _MAX_LABEL_CHARS:
        text = text[: _MAX_LABEL_CHARS - 1] + "\u2026"
    return f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}" fill="{MUTED}">{_e(text)}</text>'


def _marks(
    statistics: Sequence[Statistic], to_x: Callable[[float], float], top: float
) -> list[str]:
    """The strip of marks between ``top`` and ``top + _STRIP``: percentiles as ticks
    joined by a line, a max or min as a tick (a triangle when it is a lower bound), the
    mean as a dot with its interval. Each mark has a tooltip (its ``<title>``)."""
    middle = top + _STRIP / 2
    out: list[str] = []
    ticks = [s for s in statistics if _is_order_statistic(s.name)]
    percentiles = [to_x(_value(s)) for s in ticks if _is_percentile(s.name)]
    if len(percentiles) > 1:
        out.append(
            f'<path d="M{_n(min(percentiles))} {_n(middle)}H{_n(max(percentiles))}" '
            f'stroke="{MARK_COLOR}" stroke-width="1.5"/>'
        )
    out += [_tick(s, to_x(_value(s)), top) for s in ticks]
    out += [_mean_mark(s, to_x, middle + 4) for s in statistics if _is_mean(s)]
    return out


def _tick(stat: Statistic, x: float, top: float) -> str:
    """An order statistic's mark: a tick, or for a lower bound ("at least x") a
    triangle pointing to larger values (kept inside the drawing)."""
    if stat.limit == "lower":
        x = min(x, _WIDTH - 7.0)
        return f'<path d="M{_n(x)} {_n(top + 3)}l7 5-7 5z" fill="{MARK_COLOR}">{_tip(stat)}</path>'
    d = f"M{_n(x)} {_n(top + 2)}V{_n(top + _STRIP - 2)}"
    return f'<path d="{d}" stroke="{MARK_COLOR}" stroke-width="2">{_tip(stat)}</path>'


def _mean_mark(stat: Statistic, to_x: Callable[[float], float], y: float) -> str:
    """The mean: a dot, on a line for its interval when it has one."""
    line = ""
    if stat.ci_low is not None and stat.ci_high is not None:
        line = (
            f'<path d="M{_n(to_x(stat.ci_low))} {_n(y)}H{_n(to_x(stat.ci_high))}" '
            f'stroke="{INK}" stroke-width="1.2"/>'
        )
    return line + (
        f'<circle cx="{_n(to_x(_value(stat)))}" cy="{_n(y)}" r="3" fill="{MARK_COLOR}" '
        f'stroke="#fff" stroke-width=".8">{_tip(stat)}</circle>'
    )


def _bin_scale(histogram: HistogramSummary) -> Callable[[float], float]:
    """Value to x: each bin gets the same width, positions within a bin are linear
    (a monotone axis, so marks and bars agree; values outside go to the ends). On an
    integer column, whose bin ``[k, k + 1)`` holds the value ``k``, the integer ``k``
    is at the middle of its bin."""
    edges = np.asarray(histogram.edges, dtype=np.float64)
    step = (_WIDTH - _LEFT - _RIGHT) / (len(edges) - 1)
    points = _LEFT + step * np.arange(len(edges))
    shift = 0.5 if histogram.integer and histogram.unit != EPOCH_SECONDS else 0.0
    return lambda value: float(np.interp(value + shift, edges, points))


def _spread(count: int, limit: int) -> list[int]:
    """Up to ``limit`` indices out of ``range(count)``, evenly spread, ends included."""
    if count <= limit:
        return list(range(count))
    return sorted({round(i * (count - 1) / (limit - 1)) for i in range(limit)})


def _axis_labels(histogram: HistogramSummary, y: float) -> list[str]:
    """A few labels under the bins, as many as fit side by side: the values an
    integer bin holds (``3``, ``< 0``), else the inner edges (an open-ended
    histogram's outer edges are arbitrary)."""
    bins = len(histogram.counts)
    step = (_WIDTH - _LEFT - _RIGHT) / bins
    if histogram.integer:
        labels = bin_labels(histogram)
        places = [(_LEFT + step * (i + 0.5), labels[i]) for i in range(bins)]
    else:
        inner = range(1, bins) if histogram.open_ended else range(bins + 1)
        places = [
            (_LEFT + step * i, format_value(histogram.edges[i], histogram.unit)) for i in inner
        ]
    longest = max(min(len(text), _MAX_LABEL_CHARS) for _, text in places) * _CHAR_WIDTH
    fits = int((_WIDTH - _LEFT - _RIGHT) // (longest + 8)) + 1
    out = []
    for i in _spread(len(places), max(2, min(_MAX_LABELS, fits))):
        x, text = places[i]
        # Keep the label inside the drawing: shift the ones at the ends inwards.
        half = min(len(text), _MAX_LABEL_CHARS) * _CHAR_WIDTH / 2
        x = min(max(x, _LEFT + half), _WIDTH - _RIGHT - half)
        out.append(_text(x, y, text))
    return out


def _bars(histogram: HistogramSummary, scale_top: float) -> list[str]:
    """One bar per bin (a tooltip with its label, count and interval) and whiskers."""
    bins = len(histogram.counts)
    step = (_WIDTH - _LEFT - _RIGHT) / bins
    base = _TOP + _BARS
    labels = bin_labels(histogram)

    def y_of(count: float) -> float:
        return base - _BARS * max(0.0, count) / scale_top

    out = []
    whiskers = []
    for i, count in enumerate(histogram.counts):
        x = _LEFT + step * i
        edge = histogram.open_ended and i in (0, bins - 1)
        tip = f"{labels[i]}: {format_value(max(0.0, count))}"
        if histogram.ci_low:
            low, high = max(0.0, histogram.ci_low[i]), max(0.0, histogram.ci_high[i])
            tip += f" ({format_value(low)}\u2013{format_value(high)})"
            centre = x + step / 2
            whiskers.append(f"M{_n(centre)} {_n(y_of(low))}V{_n(y_of(high))}")
        top = y_of(count)
        out.append(
            f'<rect x="{_n(x + 0.5)}" y="{_n(top)}" width="{_n(max(step - 1, 0.5))}" '
            f'height="{_n(base - top)}" fill="{EDGE_BAR_COLOR if edge else BAR_COLOR}">'
            f"<title>{_e(tip)}</title></rect>"
        )
    if whiskers:
        out.append(f'<path d="{"".join(whiskers)}" stroke="{INK}" stroke-width="1"/>')
    return out


def histogram_plot(
    histogram: HistogramSummary, statistics: Sequence[Statistic] = (), *, label: str = ""
) -> str:
    """The histogram as bars with interval whiskers and, below it on the same axis,
    marks for ``statistics`` (see :func:`value_statistics`); SVG markup.

    ``label`` is the plot's accessible name (e.g. "Histogram of age").
    """
    counts = [max(0.0, c) for c in histogram.counts]
    highs = [max(0.0, c) for c in histogram.ci_high] if histogram.ci_high else []
    scale_top = max([*counts, *highs, 1.0])
    marks = value_statistics(statistics, histogram.unit)
    strip = _STRIP if marks else 0.0
    height = _TOP + _BARS + strip + _LABELS
    base = _TOP + _BARS
    body = [
        _text(_LEFT, _TOP - 3, f"{format_value(max(counts))} (highest bar)", "start", cut=False),
        f'<path d="M{_n(_LEFT)} {_n(base)}H{_n(_WIDTH - _RIGHT)}" stroke="#999" '
        'stroke-width=".8"/>',
        *_bars(histogram, scale_top),
    ]
    if marks:
        body += _marks(marks, _bin_scale(histogram), base + 1)
    body += _axis_labels(histogram, height - 2)
    return _svg("histogram", label or "Histogram", height, body)


def estimates_plot(statistics: Sequence[Statistic], *, label: str = "") -> str | None:
    """Marks for a column's order statistics and mean on their own linear axis (for a
    column without a histogram); SVG markup, or ``None`` with nothing to draw.

    All marks must share one unit; the unit of the first value statistic is used.
    """
    first = next((s for s in statistics if value_statistics([s], s.unit)), None)
    if first is None:
        return None
    unit = first.unit
    marks = value_statistics(statistics, unit)
    values = [_value(s) for s in marks]
    values += [v for s in marks for v in (s.ci_low, s.ci_high) if v is not None]
    low, high = min(values), max(values)
    if high <= low:  # one value: centre it on a unit-wide axis
        low, high = low - 1.0, high + 1.0
    to_x = _linear(low, high)
    height = _STRIP + _LABELS + 2
    body = [
        f'<path d="M{_n(_LEFT)} {_n(_STRIP)}H{_n(_WIDTH - _RIGHT)}" stroke="#ccc"/>',
        *_marks(marks, to_x, 0.0),
        _text(_LEFT, height - 2, format_value(low, unit), anchor="start"),
        _text(_WIDTH - _RIGHT, height - 2, format_value(high, unit), anchor="end"),
    ]
    return _svg("estimates", label or "Estimates", height, body)


def _linear(low: float, high: float) -> Callable[[float], float]:
    span = _WIDTH - _LEFT - _RIGHT - 8  # room for a lower-bound triangle at the end
    return lambda value: _LEFT + span * (min(max(value, low), high) - low) / (high - low)
