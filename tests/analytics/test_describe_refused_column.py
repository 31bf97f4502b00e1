"""A query the Session refuses in a later stage of ``describe`` stops its column only.

describe runs in stages (range, then order statistics and means, then histograms), each
planned from the releases before. Should the Session refuse one column's query (before
charging it, so nothing of it is spent), that column is reported as not summarised and
the other columns go on: before, the whole summary stopped there, with the earlier
stages' budget spent and their releases lost. The refusals here are injected (a query
with a quantile of ``income``), on both of the runner's paths: the shared scans
(``evaluate_many``) and one query at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

import dpkit as dp
from dpkit.analytics import _shared_scan
from dpkit.analytics.describe import describe
from dpkit.errors import InvalidParameter
from dpkit.report import from_json, render_html, render_terminal, to_json


def _table() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 3000
    return pd.DataFrame(
        {
            "income": rng.lognormal(10, 1, n),
            "age": rng.integers(18, 90, n),
            "hours": rng.normal(40, 8, n),
        }
    )


def _quantile_of_income(query: Any) -> bool:
    return any(a.kind == "quantile" and a.column == "income" for a in query.aggregations)


def _refuse_income_quantiles(monkeypatch: pytest.MonkeyPatch, path: str) -> list[str]:
    refused: list[str] = []

    def refuse(query: Any) -> None:
        if _quantile_of_income(query):
            refused.append(path)
            raise InvalidParameter("refused before its charge (injected by the test)")

    if path == "shared":
        compile_one = _shared_scan._compile

        def compile_or_refuse(session: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            refuse(query)
            return compile_one(session, query, *args, **kwargs)

        monkeypatch.setattr(_shared_scan, "_compile", compile_or_refuse)
    evaluate = dp.Session.evaluate

    def evaluate_or_refuse(self: dp.Session, query: Any, **kwargs: Any) -> Any:
        refuse(query)
        return evaluate(self, query, **kwargs)

    monkeypatch.setattr(dp.Session, "evaluate", evaluate_or_refuse)
    return refused


@pytest.mark.parametrize("path", ["shared", "alone"])
def test_a_refused_column_stops_alone_and_the_others_are_summarised(
    monkeypatch: pytest.MonkeyPatch, path: str, tmp_path: Path
) -> None:
    session = dp.Session.from_pandas(_table(), budget=dp.PureDP(2.0), rng=5)
    refused = _refuse_income_quantiles(monkeypatch, path)
    if path == "alone":
        # A Session whose evaluate is replaced on the instance is asked one query at a
        # time (the runner's other path).
        session.evaluate = session.evaluate  # type: ignore[method-assign]
    summary = describe(session)
    assert refused, "the injected refusal never happened"
    columns = {c.name: c for c in summary.columns}
    assert any("Not summarised" in note for note in columns["income"].notes)
    assert not columns["income"].statistics and columns["income"].histogram is None
    assert any("income" in note and "refused" in note for note in summary.notes)
    # The other numeric columns have their percentiles and histograms.
    for name in ("age", "hours"):
        assert columns[name].histogram is not None, name
        assert not any("Not summarised" in note for note in columns[name].notes)
    # Nothing failed after a charge: the Session is usable, and the summary's total is
    # what the ledger spent (within the budget; income's later shares are left over).
    assert summary.budget == session.spent
    assert session.remaining.epsilon > 0
    session.evaluate(dp.Query().count(), budget=dp.PureDP(0.01))
    # The reports show the refused column with its note.
    console = Console(record=True, width=120)
    render_terminal(summary, console)
    assert "Not summarised" in console.export_text()
    page = render_html(summary, tmp_path / "report.html", with_plots=False)
    assert "Not summarised" in page.read_text(encoding="utf-8")
    assert from_json(to_json(summary)) == summary


def test_without_a_refusal_every_column_is_summarised() -> None:
    session = dp.Session.from_pandas(_table(), budget=dp.PureDP(2.0), rng=5)
    summary = describe(session)
    assert not any("Not summarised" in n for c in summary.columns for n in c.notes)
    assert not any("refused" in note for note in summary.notes)
