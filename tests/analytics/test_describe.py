"""describe(): the private summary behind ``dpkit describe``, on real DuckDB files."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics.describe import column_kind, describe, plan_describe
from dpkit.report import DatasetSummary, from_json, to_json


def _table(n_users: int = 2000, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = rng.integers(1, 8, n_users)
    user = np.repeat(np.arange(n_users), rows)
    n = user.size
    return pd.DataFrame(
        {
            "user": user,
            "city": rng.choice(["paris", "lyon", "nice"], n, p=[0.6, 0.3, 0.1]),
            "minutes": rng.lognormal(2.0, 0.6, n),
            "visits": rng.integers(1, 20, n),
            "day": pd.Timestamp("2025-01-01") + pd.to_timedelta(rng.integers(0, 365, n), "D"),
        }
    )


@pytest.fixture(params=["parquet", "csv"])
def data_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    frame = _table()
    if request.param == "parquet":
        path = tmp_path / "visits.parquet"
        frame.to_parquet(path)
    else:
        path = tmp_path / "visits.csv"
        frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    ("sql_type", "kind"),
    [
        ("BIGINT", "numeric"),
        ("DOUBLE", "numeric"),
        ("DECIMAL(10,2)", "numeric"),
        ("VARCHAR", "categorical"),
        ("BOOLEAN", "categorical"),
        ("DATE", "date"),
        ("TIMESTAMP", "date"),
        ("TIMESTAMP WITH TIME ZONE", "date"),
        ("BLOB", None),
        ("INTEGER[]", None),
    ],
    ids=str,
)
def test_column_kind(sql_type: str, kind: str | None) -> None:
    assert column_kind(sql_type) == kind


def test_summary_of_every_column_spends_the_whole_budget(data_path: Path) -> None:
    session = dp.Session.from_path(
        data_path, privacy_unit="user", budget=dp.ApproxDP(2.0, 1e-6), rng=7
    )
    before = session.remaining
    summary = describe(session)
    assert isinstance(summary, DatasetSummary)
    assert summary.budget == before
    assert [c.name for c in summary.columns] == ["city", "minutes", "visits", "day"]
    assert [c.kind for c in summary.columns] == ["categorical", "numeric", "numeric", "date"]
    # Everything was spent, and not more (the Session's filter would have refused).
    assert 0.0 <= session.remaining.rho <= 1e-9 * before.rho
    assert summary.secure is False  # seeded: reproducible, marked insecure
    # JSON round trip of the real summary.
    assert from_json(to_json(summary)) == summary


def test_numbers_are_close_to_the_truth_at_a_large_budget(tmp_path: Path) -> None:
    frame = _table(n_users=4000)
    path = tmp_path / "visits.parquet"
    frame.to_parquet(path)
    session = dp.Session.from_path(path, privacy_unit="user", budget=dp.ZCDP(50.0), rng=3)
    summary = describe(session, max_rows=10)
    minutes = next(c for c in summary.columns if c.name == "minutes")
    stats = {s.name: s for s in minutes.statistics}
    truth = frame["minutes"]
    # Every person has at most 7 rows <= max_rows: nothing is dropped by bounding.
    assert stats["count"].ci_low <= len(truth) <= stats["count"].ci_high
    assert stats["p50"].estimate == pytest.approx(truth.median(), rel=0.05)
    assert stats["p25"].estimate <= stats["p50"].estimate <= stats["p75"].estimate
    assert stats["max"].estimate <= truth.max() + 1e-9  # never above the true max
    # The mean is clamped to the released range, so it may be biased low by clamping.
    assert stats["mean"].estimate == pytest.approx(truth.mean(), rel=0.1)
    assert minutes.histogram is not None and len(minutes.histogram.counts) == 20
    rows = summary.rows_estimate
    assert rows is not None and rows.ci_low is not None and rows.ci_high is not None
    assert rows.ci_low - 50 <= len(frame) <= rows.ci_high + 50


def test_pure_dp_skips_categorical_columns_with_a_note(data_path: Path) -> None:
    session = dp.Session.from_path(data_path, privacy_unit="user", budget=dp.PureDP(2.0), rng=1)
    plan = plan_describe(session)
    assert ("city", "categorical") not in plan.columns
    assert any(name == "city" for name, _ in plan.skipped)
    summary = describe(session)
    assert any("city: skipped" in note for note in summary.notes)
    assert session.remaining.epsilon == pytest.approx(0.0, abs=1e-12)


def test_unknown_column_is_refused_and_spends_nothing(data_path: Path) -> None:
    session = dp.Session.from_path(data_path, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    with pytest.raises(dp.DataError, match="Available columns"):
        describe(session, columns=["minutes", "nope"])
    assert session.remaining == dp.PureDP(1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"top": 0}, "top"), ({"confidence": 1.5}, "confidence"), ({"max_rows": 0}, "max_rows")],
    ids=["top", "confidence", "max_rows"],
)
def test_bad_options_spend_nothing(data_path: Path, kwargs: dict[str, object], match: str) -> None:
    session = dp.Session.from_path(data_path, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    with pytest.raises(dp.InvalidParameter, match=match):
        describe(session, **kwargs)  # type: ignore[arg-type]
    assert session.remaining == dp.PureDP(1.0)


def test_a_second_summary_on_a_spent_ledger_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "visits.parquet"
    _table(n_users=500).to_parquet(path)
    ledger = tmp_path / "ledger.sqlite"
    budget = dp.ApproxDP(5.0, 1e-6)
    first = dp.Session.from_path(path, privacy_unit="user", budget=budget, ledger=ledger, rng=1)
    describe(first)
    spent_everything = first.remaining.rho
    reopened = dp.Session.from_path(path, privacy_unit="user", budget=budget, ledger=ledger, rng=2)
    assert math.isclose(reopened.remaining.rho, spent_everything, abs_tol=1e-15)
    assert spent_everything <= 1e-9
    with pytest.raises(dp.BudgetExceeded, match="left"):
        describe(reopened)
