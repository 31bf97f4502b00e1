"""``dpkit sql`` end to end: real files, real DuckDB, a persistent ledger."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dpkit.cli.main import app

runner = CliRunner()

STATEMENT = (
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, max_groups_contributed = 1, "
    "max_rows_contributed = 5) region, COUNT(*) AS n, "
    "AVG(duration, contribution_bounds_per_row => (0, 100)) AS d "
    "FROM visits JOIN regions USING (region_id) GROUP BY region ORDER BY region"
)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(1)
    n = 3000
    visits = pd.DataFrame(
        {
            "uid": rng.integers(0, 400, n),
            "region_id": rng.integers(0, 3, n),
            "duration": rng.uniform(0, 100, n),
        }
    )
    regions = pd.DataFrame({"region_id": [0, 1, 2], "region": ["n", "s", "e"]})
    paths = {"visits": tmp_path / "visits.parquet", "regions": tmp_path / "regions.csv"}
    visits.to_parquet(paths["visits"])
    regions.to_csv(paths["regions"], index=False)
    return paths


def _options(files: dict[str, Path], ledger: Path) -> list[str]:
    return [
        "sql",
        "--table",
        f"visits={files['visits']}:uid",
        "--public",
        f"regions={files['regions']}",
        "--ledger",
        str(ledger),
        "--budget",
        "1.0",
        "--seed",
        "5",
    ]


def test_sql_prints_the_released_table_and_the_ledger_keeps_the_spend(
    files: dict[str, Path], tmp_path: Path
) -> None:
    ledger = tmp_path / "budget.db"
    result = runner.invoke(app, [*_options(files, ledger), STATEMENT])
    assert result.exit_code == 0, result.output
    assert "region" in result.stdout and "n_low" in result.stdout
    assert "Spent so far: PureDP(epsilon=0.5)" in result.output
    again = runner.invoke(app, [*_options(files, ledger), "--json", "-", STATEMENT])
    assert again.exit_code == 0, again.output
    payload = json.loads(again.stdout)
    assert [row["region"] for row in payload["rows"]] == ["e", "n", "s"]
    assert payload["spent"] == "PureDP(epsilon=1.0)"
    # The budget is spent: a third statement is refused, exit code 2.
    third = runner.invoke(app, [*_options(files, ledger), STATEMENT])
    assert third.exit_code == 2 and "budget" in third.output


def test_dry_run_and_explain_spend_nothing(files: dict[str, Path], tmp_path: Path) -> None:
    ledger = tmp_path / "budget.db"
    dry = runner.invoke(app, [*_options(files, ledger), "--dry-run", STATEMENT])
    assert dry.exit_code == 0, dry.output
    assert "join regions" in dry.output and "Charge" in dry.output
    explain = runner.invoke(app, [*_options(files, ledger), "EXPLAIN " + STATEMENT])
    assert explain.exit_code == 0 and "Charge" in explain.output
    csv = runner.invoke(app, [*_options(files, ledger), "--csv", "-", STATEMENT])
    assert csv.exit_code == 0 and csv.stdout.startswith("region,n,")
    assert "epsilon=0.5" in csv.output  # the first real spend


def test_refused_statements_exit_2_with_a_position(files: dict[str, Path], tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            *_options(files, tmp_path / "b.db"),
            "--json",
            "-",
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) SUM(duration) FROM visits",
        ],
    )
    assert result.exit_code == 2
    error = json.loads(result.stdout)
    assert error["error"] == "SqlError" and "line 1, column 56" in error["message"]


def test_statements_from_standard_input(files: dict[str, Path], tmp_path: Path) -> None:
    text = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.1) COUNT(*) AS n FROM visits;\n"
        "SELECT region FROM regions WHERE region_id = 2;\n"
    )
    result = runner.invoke(app, [*_options(files, tmp_path / "b.db")], input=text)
    assert result.exit_code == 0, result.output
    assert "n_low" in result.stdout and "e" in result.stdout.split()


def test_bad_table_options_are_refused_before_reading(tmp_path: Path) -> None:
    for options in (
        ["--table", "visits"],
        ["--table", f"visits={tmp_path / 'nothing.parquet'}:uid"],
        ["--public", "regions=x.csv:uid", "--table", "v=y.parquet:uid"],
    ):
        result = runner.invoke(app, ["sql", *options, "SELECT 1"])
        assert result.exit_code == 2, (options, result.output)
