"""``dpkit ledger show|export``: a ledger file read-only, as tables, JSON and CSV."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.cli.main import app

runner = CliRunner()


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    """A ledger with two queries, a partition and a query in one part."""
    path = tmp_path / "budget.db"
    frame = pd.DataFrame({"region": ["a", "b"] * 20, "age": list(range(40))})
    session = dp.Session.from_pandas(frame, budget=dp.ApproxDP(1.0, 1e-6), ledger=path, rng=1)
    keys = KeySet.from_values(region=["a", "b"])
    session.evaluate(Query().group_by("region", keys=keys).count(), budget=0.2)
    session.evaluate(Query().sum("age", bounds=(0.0, 100.0)), budget=0.2)
    parts = session.partition("region", keys=["a", "b"], budgets=0.2)
    parts["a"].evaluate(Query().count(), budget=1.0)
    session._ledger.close()
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_show_prints_scopes_and_spends(ledger: Path) -> None:
    before = _digest(ledger)
    result = runner.invoke(app, ["ledger", "show", str(ledger)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "4 spends, history intact" in result.output
    assert "ApproxDP(epsilon=1.0, delta=1e-06)" in result.output
    assert "count by region" in result.output
    assert "partition by region (2 parts)" in result.output
    assert _digest(ledger) == before


def test_show_json_has_budgets_spent_and_remaining_in_user_units(ledger: Path) -> None:
    result = runner.invoke(app, ["ledger", "show", str(ledger), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["intact"] is True and document["locked_since"] is None
    root = next(s for s in document["scopes"] if s["scope"] == "root")
    assert root["spends"] == 3
    assert root["kind"] == "ApproxDP(epsilon=1.0, delta=1e-06)"
    assert root["budget"]["delta"] == pytest.approx(5e-7)  # half of delta: key selection
    assert root["spent"]["rho"] + root["remaining"]["rho"] == pytest.approx(root["budget"]["rho"])
    assert 0 < root["spent"]["epsilon"] < 1.0
    queries = [s["query"] for s in document["spends"]]
    assert queries == ["count by region", "sum(age)", "partition by region (2 parts)", "count"]
    assert document["spends"][0]["time"].endswith("+00:00")


def test_show_csv_has_one_row_per_spend(ledger: Path) -> None:
    result = runner.invoke(app, ["ledger", "show", str(ledger), "--csv"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [row["id"] for row in rows] == ["1", "2", "3", "4"]
    assert {"time", "scope", "query", "budget", "rho", "delta", "epsilon"} <= set(rows[0])


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_export_writes_the_file(ledger: Path, tmp_path: Path, suffix: str) -> None:
    before = _digest(ledger)
    out = tmp_path / f"spends{suffix}"
    result = runner.invoke(app, ["ledger", "export", str(ledger), "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    if suffix == ".json":
        assert len(json.loads(text)["spends"]) == 4
    else:
        assert len(list(csv.DictReader(io.StringIO(text)))) == 4
    assert _digest(ledger) == before


def test_a_missing_ledger_is_an_error_and_no_file_is_created(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    result = runner.invoke(app, ["ledger", "show", str(missing)])
    assert result.exit_code == 2
    assert "No ledger file" in result.output
    assert list(tmp_path.iterdir()) == []
    result = runner.invoke(app, ["ledger", "show", str(missing), "--json"])
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"] == "DataError"
    assert list(tmp_path.iterdir()) == []


def test_a_file_that_is_not_a_ledger_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE x (a)")
    text = tmp_path / "notes.txt"
    text.write_text("hello", encoding="utf-8")
    for path in (other, text):
        result = runner.invoke(app, ["ledger", "show", str(path)])
        assert result.exit_code == 2
        assert "is not a dpkit ledger" in result.output


def test_an_edited_ledger_is_flagged(ledger: Path) -> None:
    with sqlite3.connect(ledger) as conn:
        conn.execute("UPDATE spends SET description = '{}' WHERE id = 2")
    result = runner.invoke(app, ["ledger", "show", str(ledger), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["intact"] is False


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "spends.txt"], "give a .csv or .json file name"),
        (["-o", "LEDGER"], "give a .csv or .json file name"),
    ],
    ids=["suffix", "the-ledger-itself"],
)
def test_export_refuses_bad_outputs(ledger: Path, args: list[str], message: str) -> None:
    before = _digest(ledger)
    args = [
        str(ledger) if a == "LEDGER" else a if a == "-o" else str(ledger.parent / a) for a in args
    ]
    result = runner.invoke(app, ["ledger", "export", str(ledger), *args])
    assert result.exit_code == 2
    assert message in result.output
    assert _digest(ledger) == before


def test_show_refuses_json_and_csv_together(ledger: Path) -> None:
    result = runner.invoke(app, ["ledger", "show", str(ledger), "--json", "--csv"])
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"] == "InvalidParameter"


def test_a_ledger_in_use_is_read(tmp_path: Path) -> None:
    """While a Session holds the ledger open (its -wal file present), it still reads."""
    path = tmp_path / "live.db"
    session = dp.Session.from_pandas(
        pd.DataFrame({"x": [1, 2, 3]}), budget=dp.PureDP(1.0), ledger=path, rng=1
    )
    session.evaluate(Query().count(), budget=0.5)
    result = runner.invoke(app, ["ledger", "show", str(path), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["scopes"][0]["remaining"] == {"epsilon": 0.5}
    session.evaluate(Query().count(), budget=0.5)  # the Session still writes after
    session._ledger.close()
