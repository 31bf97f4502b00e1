"""``dp.describe(data, budget=...)``: the summary of ``dpkit describe`` in one call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.report import DatasetSummary, from_json, html_report, to_json
from dpkit.report.profile import DescribedDataset


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {"age": rng.integers(18, 90, 300), "plan": rng.choice(["free", "pro"], 300)}
    )


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    frame = _frame()
    paths = {"csv": tmp_path / "people.csv", "parquet": tmp_path / "people.parquet"}
    frame.to_csv(paths["csv"], index=False)
    frame.to_parquet(paths["parquet"])
    return paths


def test_a_dataframe_in_one_call() -> None:
    summary = dp.describe(_frame(), budget=dp.ApproxDP(1.0, 1e-6), rng=1)
    assert isinstance(summary, DatasetSummary)
    assert [c.name for c in summary.columns] == ["age", "plan"]
    assert summary.source == "pandas" and summary.requested == dp.ApproxDP(1.0, 1e-6)


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_path(files: dict[str, Path], kind: str) -> None:
    summary = dp.describe(files[kind], budget=dp.ApproxDP(1.0, 1e-6), exclude=["plan"], rng=1)
    assert [c.name for c in summary.columns] == ["age"]
    assert summary.source == files[kind].name


def test_a_string_path_and_a_pure_budget(files: dict[str, Path]) -> None:
    summary = dp.describe(str(files["csv"]), budget=dp.PureDP(1.0), columns=["age"], rng=1)
    assert [c.name for c in summary.columns] == ["age"]
    assert summary.requested == dp.PureDP(1.0)


def test_a_pyarrow_table() -> None:
    pa = pytest.importorskip("pyarrow")
    summary = dp.describe(pa.Table.from_pandas(_frame()), budget=dp.ZCDP(0.5), rng=1)
    assert summary.source == "arrow" and summary.requested == dp.ZCDP(0.5)


def test_the_ledger_persists_the_spend(files: dict[str, Path], tmp_path: Path) -> None:
    ledger = tmp_path / "budget.db"
    dp.describe(files["csv"], budget=dp.PureDP(1.0), ledger=ledger, columns=["age"], rng=1)
    session = dp.Session.from_path(files["csv"], budget=dp.PureDP(1.0), ledger=ledger)
    assert session.remaining.epsilon < 0.01  # the summary spent the budget


def test_to_html_to_json_and_the_notebook_view(tmp_path: Path) -> None:
    summary = dp.describe(_frame(), budget=dp.ApproxDP(1.0, 1e-6), rng=1, source="people")
    page = summary.to_html()
    assert page == html_report(summary)  # the report the command line writes
    assert page.startswith("<!DOCTYPE html>") and "people" in page
    document = summary.to_json()
    assert document == to_json(summary)  # the JSON of dpkit describe --json
    assert json.loads(document)["source"] == "people"
    assert isinstance(summary, DatasetSummary)  # a DescribedDataset: the same fields
    assert DescribedDataset.of(from_json(document)) == summary
    target = tmp_path / "report.html"
    summary.to_html(target)
    assert target.read_text(encoding="utf-8") == page
    summary.to_json(tmp_path / "summary.json")
    assert (tmp_path / "summary.json").read_text(encoding="utf-8") == document
    view = summary._repr_html_()
    assert view.startswith("<iframe") and "srcdoc=" in view
    assert "&lt;!DOCTYPE html&gt;" in view and "<style>" not in view  # escaped, isolated


BAD_INPUTS = {
    "budget-not-a-guarantee": ({"budget": 1.0}, dp.InvalidParameter),
    "selection-delta-too-large": (
        {"budget": dp.ApproxDP(1.0, 1e-6), "selection_delta": 2e-6},
        dp.InvalidParameter,
    ),
    "missing-file": ({"data": "missing.csv"}, dp.DataError),
    "not-data": ({"data": 42}, dp.DataError),
    "unknown-column": ({"columns": ["x"]}, dp.DataError),
    "unknown-exclude": ({"exclude": ["x"]}, dp.DataError),
    "columns-a-string": ({"columns": "age"}, dp.InvalidParameter),
    "top-zero": ({"top": 0}, dp.InvalidParameter),
    "bad-weight": ({"weights": {"age": -1.0}}, dp.InvalidParameter),
    "file-option-for-a-frame": ({"na_values": ["NA"]}, dp.InvalidParameter),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_is_refused_and_spends_nothing(tmp_path: Path, name: str) -> None:
    from dpkit.analytics._history import read_ledger

    changes, error = BAD_INPUTS[name]
    options: dict[str, Any] = {"data": _frame(), "budget": dp.PureDP(1.0)} | changes
    if isinstance(options["data"], str):
        options["data"] = tmp_path / "missing.csv"
    ledger = tmp_path / "budget.db"
    with pytest.raises(error):
        dp.describe(options.pop("data"), ledger=ledger, **options)
    assert not ledger.exists() or read_ledger(ledger).spends == ()


def test_a_refused_summary_leaves_the_ledger_untouched(tmp_path: Path) -> None:
    ledger = tmp_path / "budget.db"
    frame = _frame()
    with pytest.raises(dp.DataError):
        dp.describe(frame, budget=dp.PureDP(1.0), ledger=ledger, columns=["x"])
    session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), ledger=ledger)
    assert session.remaining == dp.PureDP(1.0) and not session.history


def test_describe_is_lazy_and_public() -> None:
    import dpkit

    assert "describe" in dpkit.__all__ and "describe" in dir(dpkit)
    from dpkit.analytics._describe_api import describe

    assert dpkit.describe is describe


def test_polars_frames_are_described_like_pandas() -> None:
    import polars as pl

    frame = pl.DataFrame({"age": [float(20 + i % 50) for i in range(400)]})
    summary = dp.describe(frame, budget=dp.PureDP(1.0), rng=1)
    lazy = dp.describe(frame.lazy(), budget=dp.PureDP(1.0), rng=1)
    assert [c.name for c in summary.columns] == ["age"] == [c.name for c in lazy.columns]
