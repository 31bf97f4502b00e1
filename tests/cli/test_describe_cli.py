"""``dpkit describe`` and ``dpkit demo`` end to end: real files, real DuckDB, real reports."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpkit.cli.main import app

runner = CliRunner()


@pytest.fixture
def csv_file(tmp_path: Path, write_spend_csv: Callable[..., Path]) -> Path:
    return write_spend_csv(tmp_path / "spend.csv", rows=6000, persons=1500)


def test_describe_writes_terminal_json_and_html(csv_file: Path, tmp_path: Path) -> None:
    report, out = tmp_path / "report.html", tmp_path / "summary.json"
    result = runner.invoke(
        app,
        [
            "describe",
            str(csv_file),
            "--epsilon",
            "4",
            "--privacy-unit",
            "person",
            "--seed",
            "3",
            "--report",
            str(report),
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Budget split" in result.output and "spend" in result.output
    payload = json.loads(out.read_text())
    assert payload["privacy_unit"] == "person"
    assert [c["name"] for c in payload["columns"]] == ["plan", "spend"]
    html = report.read_text()
    assert "<html" in html and "spend" in html and "NOT private" in html


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--columns", "nope"], "Available columns"),
        (["--engine", "polars"], "--engine"),
        (["--rho", "0.5", "--epsilon", "1"], "either --rho"),
        (["--epsilon", "-1"], "epsilon"),
        (["--privacy-unit", "missing"], "privacy unit"),
    ],
    ids=["unknown-column", "engine", "rho-and-epsilon", "negative-epsilon", "unit"],
)
def test_bad_input_exits_2(csv_file: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, ["describe", str(csv_file), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_missing_file_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["describe", str(tmp_path / "absent.csv")])
    assert result.exit_code == 2
    assert "No file" in result.output


def test_demo_runs_offline_and_writes_its_report(tmp_path: Path) -> None:
    report = tmp_path / "demo.html"
    result = runner.invoke(
        app, ["demo", "--people", "3000", "--seed", "1", "--report", str(report)]
    )
    assert result.exit_code == 0, result.output
    assert "synthetic, 3,000 users" in result.output
    assert report.is_file() and "duration_minutes" in report.read_text()
