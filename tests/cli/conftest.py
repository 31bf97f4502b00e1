"""Shared data for the command-line tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


@pytest.fixture
def write_spend_csv() -> Callable[..., Path]:
    """Writes the spend CSV (a fixture, as test modules cannot import conftest)."""
    return _write_spend_csv


def _write_spend_csv(path: Path, *, rows: int, persons: int) -> Path:
    """A CSV of subscription spend: a person id, a plan (categorical) and an amount."""
    rng = np.random.default_rng(5)
    frame = pd.DataFrame(
        {
            "person": rng.integers(0, persons, rows),
            "plan": rng.choice(["free", "pro"], rows, p=[0.8, 0.2]),
            "spend": rng.gamma(2.0, 10.0, rows).round(2),
        }
    )
    frame.to_csv(path, index=False)
    return path
