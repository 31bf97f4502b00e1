"""``dpkit describe`` on a file that is not valid in the chosen encoding: refused before
anything is spent, naming ``--encoding`` (issue 28, "refuse before spending")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

import dpkit as dp
from dpkit.cli.main import app

runner = CliRunner()
CITIES = ("Zürich", "Genève", "Málaga", "Köln", "Paris", "Bern")


def describe(*args: str) -> Any:
    return runner.invoke(app, ["describe", *args])


def french(path: Path, encoding: str) -> Path:
    lines = ["id,ville,âge"] + [f"{i},{CITIES[i % 6]},{20 + i % 50}" for i in range(600)]
    path.write_bytes(("\n".join(lines) + "\n").encode(encoding))
    return path


def test_a_latin1_file_without_encoding_is_refused_and_nothing_is_spent(tmp_path: Path) -> None:
    path = french(tmp_path / "fr.csv", "latin-1")
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "summary.json"
    result = describe(str(path), "--epsilon", "1", "--ledger", str(ledger), "--json", str(out))
    assert result.exit_code == 2
    assert not out.exists()
    error = json.loads(result.stderr)
    assert error["error"] == "DataError"
    assert "'fr.csv'" in error["message"] and "does not decode" in error["message"]
    assert "--encoding latin-1" in error["message"]
    # No Session was opened: the ledger, if any, holds no spend.
    session = dp.Session.from_path(
        path, budget=dp.ApproxDP(1.0, 1e-6), ledger=ledger, encoding="latin-1"
    )
    assert session.spent == dp.ZCDP(0.0)


def test_json_to_standard_output_is_the_error_only(tmp_path: Path) -> None:
    path = french(tmp_path / "fr.csv", "utf-16")
    result = describe(str(path), "--json", "-")
    assert result.exit_code == 2
    error = json.loads(result.stdout)
    assert error["error"] == "DataError" and "--encoding utf-16" in error["message"]


def test_the_same_file_with_the_encoding_it_names_is_summarised(tmp_path: Path) -> None:
    for encoding, option in (("latin-1", ["--encoding", "latin-1"]), ("utf-8", [])):
        path = french(tmp_path / f"{encoding}.csv", encoding)
        out = tmp_path / f"{encoding}.json"
        result = describe(str(path), "--seed", "1", "--epsilon", "4", *option, "--json", str(out))
        assert result.exit_code == 0, result.output
        names = [c["name"] for c in json.loads(out.read_text())["columns"]]
        assert names == ["id", "ville", "âge"]
