"""The fidelity report of a synthesis run: a self-contained HTML page.

Everything in it is computed from the synthetic table and the run's noisy measurements
(released values), so the report is private and free: per measured marginal, the L1
distance between the synthetic and the measured distribution next to the noise's own
size; the 1-way marginals side by side; and, over the measured pairs, Cramer's V of
the synthetic table against that of the measurement (a dependence heatmap). The plots
are inline SVG written here (no plotting library). A real-data comparison is not made
here (see :meth:`SyntheticData.compare_with_real`).
"""

from __future__ import annotations

import html
import math
from typing import Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd  # type: ignore[import-untyped]

from dpkit.accounting.guarantees import Guarantee
from dpkit.synth._domain import Domain, Measurement, marginal_counts


class SyntheticData(Protocol):
    """What the report reads of a :class:`dpkit.synth.SyntheticData` (not imported:
    its ``to_html`` imports this module)."""

    data: pd.DataFrame
    method: str
    guarantee: Guarantee
    measurements: tuple[Measurement, ...]
    domain: Domain
    labels: dict[str, list[str]]
    notes: tuple[str, ...]
    codes: npt.NDArray[np.int64]

    def fidelity(self) -> pd.DataFrame: ...


__all__ = ["html_report"]

FloatArray = npt.NDArray[np.float64]


def _cramers_v(table: npt.NDArray[np.float64]) -> float:
    """Cramer's V of a 2-way table of counts (negative noisy counts clipped to 0)."""
    table = np.clip(table, 0, None)
    n = table.sum()
    if n <= 0 or min(table.shape) < 2:
        return 0.0
    expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / n
    mask = expected > 0
    chi2 = float((((table - expected) ** 2)[mask] / expected[mask]).sum())
    return math.sqrt(chi2 / (n * (min(table.shape) - 1)))


def _bars_svg(title: str, labels: list[str], measured: FloatArray, synthetic: FloatArray) -> str:
    """Two bars per code (measured, synthetic), as an inline SVG written by hand."""
    width, height, top, bottom = 640, 170, 22, 40
    n = max(len(labels), 1)
    slot = (width - 20) / n
    peak = max(float(measured.max(initial=0.0)), float(synthetic.max(initial=0.0)), 1e-12)
    scale = (height - top - bottom) / peak
    body = [f'<text x="10" y="15" font-size="12">{html.escape(title)}</text>']
    for i, label in enumerate(labels):
        x = 10 + i * slot
        for j, (value, colour) in enumerate(((measured[i], "#7aa6d8"), (synthetic[i], "#e39b4b"))):
            h = max(float(value), 0.0) * scale
            y = height - bottom - h
            body.append(
                f'<rect x="{x + j * slot * 0.42:.1f}" y="{y:.1f}" width="{slot * 0.4:.1f}" '
                f'height="{h:.1f}" fill="{colour}"><title>{html.escape(label)}: '
                f"{'measured' if j == 0 else 'synthetic'} {float(value):.4f}</title></rect>"
            )
        if n <= 24:
            body.append(
                f'<text x="{x + slot / 2:.1f}" y="{height - bottom + 12}" font-size="8" '
                f'text-anchor="middle">{html.escape(label[:10])}</text>'
            )
    body.append(
        f'<text x="10" y="{height - 6}" font-size="9"><tspan fill="#7aa6d8">&#9632; measured '
        '(noisy)</tspan> <tspan fill="#e39b4b">&#9632; synthetic</tspan></text>'
    )
    return f'<svg width="{width}" height="{height}" role="img">' + "".join(body) + "</svg>"


def _oneway_plots(result: SyntheticData) -> list[str]:
    out = []
    n = max(len(result.data), 1)
    for m in result.measurements:
        if len(m.columns) != 1:
            continue
        (name,) = m.columns
        measured = np.clip(m.values, 0, None)
        measured = measured / max(float(measured.sum()), 1.0)
        synthetic = marginal_counts(result.codes, result.domain, m.columns) / n
        labels = result.labels.get(name, [])
        if len(labels) != len(measured):
            labels = [str(i) for i in range(len(measured))]
        out.append(_bars_svg(name, labels, measured, synthetic))
    return out


def _colour(v: float) -> str:
    shade = int(255 - 200 * min(max(v, 0.0), 1.0))
    return f"rgb({shade},{shade},255)"


def _dependence_heatmap(result: SyntheticData) -> str | None:
    """Cramer's V of each measured pair: above the diagonal measured, below synthetic."""
    pairs = [m for m in result.measurements if len(m.columns) == 2]
    if not pairs:
        return None
    names = list(result.domain.names)
    index = {c: i for i, c in enumerate(names)}
    cell, left = 22, 120
    size = left + cell * len(names) + 10
    body = []
    for m in pairs:
        a, b = sorted(index[c] for c in m.columns)
        synthetic = marginal_counts(result.codes, result.domain, m.columns)
        values = [
            (a, b, _cramers_v(m.values), "measured"),
            (b, a, _cramers_v(synthetic), "synthetic"),
        ]
        for row, col, v, what in values:
            body.append(
                f'<rect x="{left + col * cell}" y="{left + row * cell}" width="{cell - 1}" '
                f'height="{cell - 1}" fill="{_colour(v)}"><title>{html.escape(names[row])} x '
                f"{html.escape(names[col])}, {what}: V = {v:.3f}</title></rect>"
            )
    for i, name in enumerate(names):
        label = html.escape(name[:18])
        body.append(
            f'<text x="{left - 4}" y="{left + i * cell + 15}" font-size="9" '
            f'text-anchor="end">{label}</text>'
        )
        x, y = left + i * cell + 14, left - 4
        body.append(
            f'<text x="{x}" y="{y}" font-size="9" transform="rotate(-60 {x} {y})">{label}</text>'
        )
    return f'<svg width="{size}" height="{size}" role="img">' + "".join(body) + "</svg>"


def _real_section(comparison: pd.DataFrame | None) -> str:
    if comparison is None:
        return ""
    rows = "".join(
        f"<tr><td>{html.escape(str(r['marginal']))}</td><td>{r['l1_vs_real']:.4g}</td></tr>"
        for r in comparison.to_dict("records")
    )
    return (
        '<h2 style="color:#b00">NOT PRIVATE: comparison with the real data</h2>'
        '<p style="color:#b00"><b>This section reads the real data without noise. It was '
        "asked for explicitly, for evaluation, and is not covered by the guarantee above: "
        "do not share this report with anyone who may not see the data.</b></p>"
        "<table><tr><th>marginal</th><th>L1 distance, synthetic vs real</th></tr>"
        f"{rows}</table>"
    )


def _heatmap_section(heatmap: str | None) -> str:
    if heatmap is None:
        return ""
    return (
        "<h2>Dependence of measured pairs</h2><p>Cramer's V of every measured pair: "
        "above the diagonal from the noisy measurement, below it from the synthetic table "
        f"(darker is stronger).</p>{heatmap}"
    )


def html_report(
    result: SyntheticData,
    title: str = "dpkit synthetic data",
    real_comparison: pd.DataFrame | None = None,
) -> str:
    """The report as one HTML page (inline SVG). ``real_comparison`` (from
    :meth:`SyntheticData.compare_with_real`, not private) adds a section marked so."""
    fidelity = result.fidelity()
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(v) if not isinstance(v, float) else f'{v:.4g}')}</td>"
            for v in record.values()
        )
        + "</tr>"
        for record in fidelity.to_dict("records")
    )
    header = "".join(f"<th>{html.escape(c)}</th>" for c in fidelity.columns)
    plots = "".join(f"<div>{svg}</div>" for svg in _oneway_plots(result))
    heatmap = _dependence_heatmap(result)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}
table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 6px;font-size:90%}}</style>
</head><body>
<h1>{html.escape(title)}</h1>
<p><b>{html.escape(result.method.upper())}</b>: {len(result.data)} rows x
{result.data.shape[1]} columns. Guarantee: <b>{html.escape(repr(result.guarantee))}</b>
for the whole run (charged once).</p>
<ul>{notes}</ul>
<h2>Fidelity to the noisy measurements (private)</h2>
<p>Per measured marginal: the L1 distance between the synthetic table's distribution and
the noisy measurement's, next to the expected L1 size of the noise itself. These are
released values, so this comparison costs no privacy. It says how well the model fits
what was measured, not how close the table is to the real data.</p>
<table><tr>{header}</tr>{rows}</table>
<h2>One-way marginals</h2>{plots}
{_heatmap_section(heatmap)}
{_real_section(real_comparison)}
</body></html>
"""
