"""The fidelity report of a synthesis run: a self-contained HTML page.

Everything in it is computed from the synthetic table and the run's noisy measurements
(released values), so the report is private and free: per measured marginal, the L1
distance between the synthetic and the measured distribution next to the noise's own
size; the 1-way marginals side by side; and, over the measured pairs, Cramer's V of
the synthetic table against that of the measurement (a dependence heatmap). A real-data
comparison is not made here (see :meth:`SyntheticData.compare_with_real`).
"""

from __future__ import annotations

import html
import io
import math
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pandas as pd  # type: ignore[import-untyped]

if TYPE_CHECKING:
    from dpkit.synth._result import SyntheticData

__all__ = ["html_report"]


def _svg(figure: object) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")  # type: ignore[attr-defined]
    import matplotlib.pyplot as plt

    plt.close(figure)  # type: ignore[arg-type]
    text = buffer.getvalue()
    return text[text.index("<svg") :]


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


def _oneway_plots(result: SyntheticData) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpkit.synth._result import _marginal

    out = []
    n = max(len(result.data), 1)
    for m in result.measurements:
        if len(m.columns) != 1:
            continue
        (name,) = m.columns
        measured = np.clip(m.values, 0, None)
        measured = measured / max(measured.sum(), 1.0)
        synthetic = _marginal(result.codes, result.domain, m.columns) / n
        labels = result.labels.get(name, [str(i) for i in range(len(measured))])
        figure, axis = plt.subplots(figsize=(6, 2.4))
        x = np.arange(len(measured))
        axis.bar(x - 0.2, measured, width=0.4, label="measured (noisy)")
        axis.bar(x + 0.2, synthetic, width=0.4, label="synthetic")
        axis.set_title(name)
        if len(labels) <= 20:
            axis.set_xticks(x, labels, rotation=45, ha="right", fontsize=7)
        axis.legend(fontsize=7)
        out.append(_svg(figure))
    return out


def _dependence_heatmap(result: SyntheticData) -> str | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpkit.synth._result import _marginal

    pairs = [m for m in result.measurements if len(m.columns) == 2]
    if not pairs:
        return None
    names = list(result.domain.names)
    index = {c: i for i, c in enumerate(names)}
    grid = np.full((len(names), len(names)), np.nan)
    for m in pairs:
        a, b = (index[c] for c in m.columns)
        grid[a, b] = _cramers_v(m.values)  # measured: upper/left
        grid[b, a] = _cramers_v(_marginal(result.codes, result.domain, m.columns))
    figure, axis = plt.subplots(figsize=(6, 5))
    image = axis.imshow(grid, vmin=0, vmax=1, cmap="viridis")
    axis.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
    axis.set_yticks(range(len(names)), names, fontsize=7)
    axis.set_title("Cramer's V of measured pairs: row < column measured, row > column synthetic")
    figure.colorbar(image)
    return _svg(figure)


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
{"<h2>Dependence of measured pairs</h2>" + heatmap if heatmap else ""}
{_real_section(real_comparison)}
</body></html>
"""
