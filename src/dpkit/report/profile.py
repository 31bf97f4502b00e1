"""The summary ``dp.describe`` returns: the report model with its renderers attached.

:class:`DescribedDataset` is a :class:`~dpkit.report.DatasetSummary` (same fields, same
JSON) whose methods render it as ``dpkit describe`` does, for a notebook or a script
(as ydata-profiling's ``ProfileReport(df)``). It lives apart from the model so that the
model does not import its renderers.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from dpkit.report.model import DatasetSummary

__all__ = ["DescribedDataset"]


@dataclass(frozen=True)
class DescribedDataset(DatasetSummary):
    """A :class:`~dpkit.report.DatasetSummary` with ``to_json``, ``to_html`` and a
    notebook view. Everything here is post-processing of released values."""

    @classmethod
    def of(cls, summary: DatasetSummary) -> DescribedDataset:
        """The same summary, with its renderers."""
        return cls(**{f.name: getattr(summary, f.name) for f in fields(summary)})

    def to_json(self, path: str | Path | None = None, *, indent: int | None = 2) -> str:
        """The JSON document of ``dpkit describe --json`` (:func:`dpkit.report.to_json`);
        also written to ``path`` when given (UTF-8)."""
        from dpkit.report.serialize import to_json

        text = to_json(self, indent=indent)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def to_html(self, path: str | Path | None = None, *, with_plots: bool = True) -> str:
        """The HTML report of ``dpkit describe --report`` (one self-contained page,
        :func:`dpkit.report.html_report`); also written to ``path`` when given."""
        from dpkit.report.html import html_report

        text = html_report(self, with_plots=with_plots)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def _repr_html_(self) -> str:
        """Jupyter's view: the HTML report in an inline frame (its styles stay inside)."""
        import html

        return (
            '<iframe style="width: 100%; height: 720px; border: 1px solid #ddd" '
            f'srcdoc="{html.escape(self.to_html(), quote=True)}"></iframe>'
        )
