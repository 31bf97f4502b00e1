"""Shared data for the analytics tests: small person-level tables written to files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest


def people(n_rows: int = 4000, n_users: int = 150, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "user": rng.integers(0, n_users, n_rows),
            "region": rng.choice(["north", "south", "east"], n_rows),
            "age": rng.integers(18, 90, n_rows),
            "income": rng.uniform(0.0, 100.0, n_rows),
        }
    )


@pytest.fixture
def frame() -> pd.DataFrame:
    return people()


@pytest.fixture
def parquet_path(tmp_path: Path, frame: pd.DataFrame) -> Path:
    path = tmp_path / "people.parquet"
    frame.to_parquet(path)
    return path


@pytest.fixture
def csv_path(tmp_path: Path, frame: pd.DataFrame) -> Path:
    path = tmp_path / "people.csv"
    frame.to_csv(path, index=False)
    return path
