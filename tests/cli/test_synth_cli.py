"""``dpkit synth`` end to end: real files, real DuckDB, a persistent ledger."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dpkit.cli.main import app

runner = CliRunner()


@pytest.fixture
def table(tmp_path: Path) -> Path:
    rng = np.random.default_rng(2)
    n = 2000
    frame = pd.DataFrame(
        {
            "uid": rng.integers(0, 500, n),
            "region": rng.choice(["n", "s", "e"], n),
            "minutes": rng.integers(0, 120, n),
        }
    )
    path = tmp_path / "visits.csv"
    frame.to_csv(path, index=False)
    return path


def _domains(tmp_path: Path) -> Path:
    path = tmp_path / "domains.json"
    path.write_text(json.dumps({"region": ["n", "s", "e"], "minutes": [0, 119]}))
    return path


def test_writes_the_table_the_report_and_charges_the_ledger(table: Path, tmp_path: Path) -> None:
    out, report, ledger = tmp_path / "syn.parquet", tmp_path / "r.html", tmp_path / "l.db"
    args = [
        "synth", str(table), "-o", str(out), "--method", "mst", "--rho", "0.5",
        "--privacy-unit", "uid", "--max-rows", "3", "--domains", str(_domains(tmp_path)),
        "--ledger", str(ledger), "--report", str(report), "--seed", "1",
        "--json", str(tmp_path / "s.json"),
    ]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = pd.read_parquet(out)
    assert list(data.columns) == ["region", "minutes"]
    assert set(data["region"].dropna()) <= {"n", "s", "e"}
    page = report.read_text()
    assert "Fidelity to the noisy measurements" in page and "NOT PRIVATE" not in page
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["method"] == "mst" and summary["guarantee"] == "ZCDP(rho=0.5)"
    # The whole budget was charged once: a second run finds nothing left.
    again = runner.invoke(app, args)
    assert again.exit_code == 2
    assert "budget" in again.output.lower()


def test_dry_run_spends_nothing(table: Path, tmp_path: Path) -> None:
    ledger = tmp_path / "l.db"
    args = [
        "synth", str(table), "--dry-run", "--method", "aim", "--epsilon", "1",
        "--bounds", "minutes=0:119:12", "--categories", "region=n,s,e",
        "--privacy-unit", "uid", "--ledger", str(ledger),
    ]  # fmt: skip
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "AIM over 2 columns" in first.output and "nothing was spent" in first.output
    out = tmp_path / "a.csv"
    real = runner.invoke(app, [*args[:2], "-o", str(out), *args[3:]])
    assert real.exit_code == 0, real.output
    assert len(pd.read_csv(out)) > 0


def test_comparison_with_real_data_is_marked_not_private(table: Path, tmp_path: Path) -> None:
    report = tmp_path / "r.html"
    args = [
        "synth", str(table), "-o", str(tmp_path / "s.csv"), "--method", "mst", "--rho", "1",
        "--domains", str(_domains(tmp_path)), "--report", str(report), "--compare-with-real",
    ]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "NOT PRIVATE: comparison with the real data" in report.read_text()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--bounds", "minutes=0"], "LOW:HIGH"),
        (["--categories", "region"], "COL=a,b,c"),
        (["--rho", "1", "--epsilon", "1"], "either"),
        (["--method", "gan"], "method"),
        (["--compare-with-real"], "--report"),
        (["--method", "mst", "--mst-split", "0.5,0.5,0.5"], "adding up to 1"),
        (["--method", "mst", "--mst-split", "a,b"], "--mst-split"),
        (["--method", "aim", "--mst-split", "1/3,1/3,1/3"], "mst_split"),
    ],
)
def test_bad_options_exit_2_and_spend_nothing(
    table: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    ledger = tmp_path / "l.db"
    args = ["synth", str(table), "-o", str(tmp_path / "s.csv"), "--ledger", str(ledger)]
    result = runner.invoke(app, [*args, "--domains", str(_domains(tmp_path)), *extra])
    assert result.exit_code == 2
    assert message in result.output
    if ledger.exists():
        import sqlite3

        with sqlite3.connect(ledger) as conn:
            assert conn.execute("SELECT count(*) FROM spends").fetchone()[0] == 0


def test_output_suffix_is_checked_before_reading(table: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["synth", str(table), "-o", str(tmp_path / "s.xlsx")])
    assert result.exit_code == 2 and ".parquet or .csv" in result.output


def test_mst_split_is_shown_by_the_dry_run(table: Path, tmp_path: Path) -> None:
    args = [
        "synth", str(table), "--dry-run", "--method", "mst", "--epsilon", "1",
        "--domains", str(_domains(tmp_path)), "--mst-split", "1/3,1/3,1/3",
    ]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "(1-way, selection, 2-way): 1/3, 1/3, 1/3" in result.output
