"""``dpkit describe DATA --engine spark``: the same report as on DuckDB.

With the same seed the Session draws the same salts and noise, and the Spark engine
returns DuckDB's integers (tests/engines/test_parity.py), so the JSON summaries of one
file must be identical but for their creation time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import statsmodels.api as sm
from typer.testing import CliRunner

from dpkit.cli.main import app

runner = CliRunner()


@pytest.fixture(scope="module")
def affairs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # statsmodels' `fair` (a real survey shipped in the package): 600 rows, one person
    # per three rows, as Parquet.
    frame = sm.datasets.fair.load_pandas().data.iloc[:600].copy()
    frame["person"] = np.arange(len(frame)) // 3
    path = tmp_path_factory.mktemp("affairs") / "affairs.parquet"
    frame.to_parquet(path)
    return path


def summary(path: Path, engine: str, *extra: str) -> dict[str, Any]:
    result = runner.invoke(
        app,
        ["describe", str(path), "--engine", engine, "--seed", "5", "--json", "-",
         "--privacy-unit", "person", "--columns", "rate_marriage,age,religious,affairs",
         *extra],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    document.pop("created", None)
    return document


def test_describe_on_spark_equals_describe_on_duckdb(spark: Any, affairs: Path) -> None:
    on_duckdb = summary(affairs, "duckdb")
    assert summary(affairs, "spark") == on_duckdb
    assert {c["name"] for c in on_duckdb["columns"]} == {
        "rate_marriage", "age", "religious", "affairs"
    }  # fmt: skip


def test_unknown_engine_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    result = runner.invoke(app, ["describe", str(tmp_path / "x.csv"), "--engine", "polars"])
    assert result.exit_code == 2 and "--engine" in result.output
