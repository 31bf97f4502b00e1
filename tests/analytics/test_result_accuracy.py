"""Every statistic of a QueryResult carries its accuracy (issue 32, item 4).

* every aggregation has ``_se``, ``_low`` and ``_high`` columns, with finite
  intervals for every kind (order statistics: what their own guarantee implies);
* a mean's (variance's) interval never leaves what the bounds allow, and a group whose
  noisy count collapses gets the documented answer (the middle of the range, the range
  as interval, the note "too few rows in this group"), never a huge interval;
* ``Session.explain`` states the rows a group needs, and warns (spending nothing) when
  groups are likely smaller;
* the SQL front end returns the same columns.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query, SmallGroupWarning

KEYS = KeySet.from_values(region=["north", "south", "east", "west"])  # west: no rows


def session_on(path: Path, budget: object = None) -> dp.Session:
    return dp.Session.from_path(path, privacy_unit="user", budget=budget or dp.PureDP(50.0), rng=5)


def test_every_statistic_has_interval_columns(parquet_path: Path) -> None:
    session = session_on(parquet_path)
    query = (
        Query()
        .group_by("region", keys=KEYS)
        .bound(max_groups=3, max_rows=30)
        .count()
        .sum("income", bounds=(0, 100), name="total")
        .mean("income", bounds=(0, 100), name="avg")
        .variance("income", bounds=(0, 100), name="var")
        .median("income", bounds=(0, 100), name="med")
        .quantile("age", [0.1, 0.9], bounds=(18, 90), name="age_q")
        .max("income", bounds=(0, 100), name="top")
        .min("income", bounds=(0, 100), name="bottom")
    )
    frame = session.evaluate(query, budget=dp.PureDP(8.0)).dataframe
    values = ["count", "total", "avg", "var", "med", "age_q_0.1", "age_q_0.9", "top", "bottom"]
    for name in values:
        for suffix in ("", "_se", "_low", "_high"):
            assert f"{name}{suffix}" in frame.columns, f"{name}{suffix}"
        low, high = frame[f"{name}_low"], frame[f"{name}_high"]
        assert np.isfinite(low).all() and np.isfinite(high).all(), name
        assert (low <= frame[name]).all() and (frame[name] <= high).all(), name
    for name in ("med", "age_q_0.1", "age_q_0.9"):  # plus the rank accuracy
        assert (frame[f"{name}_rank_radius"] >= 0).all()
    assert (frame["med_low"] == 0.0).all() and (frame["med_high"] == 100.0).all()
    assert (frame["top_low"] == frame["top"]).all() and (frame["top_high"] == 100.0).all()
    assert (frame["bottom_low"] == 0.0).all() and (frame["bottom_high"] == frame["bottom"]).all()
    # Means and variances: within what the bounds allow, and a note column.
    assert ((frame["avg_low"] >= 0.0) & (frame["avg_high"] <= 100.0)).all()
    assert ((frame["var_low"] >= 0.0) & (frame["var_high"] <= 50.0**2)).all()
    for name in ("avg", "var"):
        notes = frame[f"{name}_note"]
        assert notes.map(lambda text: text == "" or text.startswith("too few rows")).all()


def test_a_collapsed_count_gives_the_documented_answer(parquet_path: Path) -> None:
    # 'west' has no row: its noisy count is noise only. At a small budget the delta
    # method's interval was +-36,273 for a mean bounded in [0, 5].
    session = session_on(parquet_path)
    query = (
        Query()
        .group_by("region", keys=KEYS)
        .bound(max_groups=3, max_rows=30)
        .mean("income", bounds=(0, 5), name="avg")
        .variance("income", bounds=(0, 5), name="var")
    )
    spent = session.spent
    frame = session.evaluate(query, budget=dp.PureDP(0.05)).dataframe.set_index("region")
    assert session.spent != spent  # charged, and nothing raised after the charge
    west = frame.loc["west"]
    assert west["avg"] == 2.5 and (west["avg_low"], west["avg_high"]) == (0.0, 5.0)
    assert west["avg_se"] == 2.5
    assert west["avg_note"].startswith("too few rows in this group for a mean")
    assert west["var"] == 6.25 / 2 and (west["var_low"], west["var_high"]) == (0.0, 6.25)
    assert west["var_note"].startswith("too few rows in this group for a variance")
    # Never an interval wider than the bounds, in any group.
    assert (frame["avg_high"] - frame["avg_low"] <= 5.0).all()
    assert ((frame["avg_low"] >= 0.0) & (frame["avg_high"] <= 5.0)).all()
    assert ((frame["var_low"] >= 0.0) & (frame["var_high"] <= 6.25)).all()


def test_explain_states_the_rows_a_ratio_needs_and_warns_for_tiny_groups(
    parquet_path: Path,
) -> None:
    session = session_on(parquet_path)
    query = Query().group_by("region", keys=KEYS).bound(max_groups=3, max_rows=30)
    query = query.mean("income", bounds=(0, 5), name="avg")
    spent = session.spent
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning without a group size to compare
        plan = session.explain(query, budget=dp.PureDP(0.05))
    (name, needed), *_ = plan.min_group_rows
    assert name == "avg" and needed > 1000
    assert f"at least {needed:,} rows" in str(plan)
    with pytest.warns(SmallGroupWarning, match="avg needs"):
        session.explain(query, budget=dp.PureDP(0.05), group_size=needed - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        session.explain(query, budget=dp.PureDP(0.05), group_size=needed)
    # More budget, fewer rows needed; explain never spends.
    cheaper = session.explain(query, budget=dp.PureDP(5.0)).min_group_rows[0][1]
    assert cheaper < needed / 50
    assert session.spent == spent
    with pytest.raises(dp.errors.InvalidParameter, match="group_size"):
        session.explain(query, budget=dp.PureDP(1.0), group_size=0)


def test_explain_warns_when_selected_keys_may_hold_too_few_rows(parquet_path: Path) -> None:
    # Most of the budget selects keys: the threshold (199 persons, one row each) is
    # below the 514 rows the mean needs, so groups just above it are too small.
    session = dp.Session.from_path(
        parquet_path, privacy_unit="user", budget=dp.ApproxDP(50.0, 1e-5), rng=6
    )
    query = (
        Query()
        .group_by(
            "region", keys="private", selection=dp.analytics.KeySelection(delta=1e-6, weight=10)
        )
        .bound(max_groups=1, max_rows=1)
        .mean("income", bounds=(0, 100), name="avg")
    )
    with pytest.warns(SmallGroupWarning, match="key-selection threshold"):
        session.explain(query, budget=dp.ApproxDP(0.1, 1e-6))


def test_sql_results_get_the_same_columns(parquet_path: Path, frame: pd.DataFrame) -> None:
    del frame
    session = session_on(parquet_path, dp.ApproxDP(50.0, 1e-5))
    result = session.sql(
        """
        SELECT WITH DIFFERENTIAL_PRIVACY
          OPTIONS (epsilon = 8, delta = 1e-6, max_groups_contributed = 3,
                   max_rows_contributed = 30)
          region,
          AVG(income, contribution_bounds_per_row => (0, 5)) AS avg,
          PERCENTILE_CONT(income, 0.5, contribution_bounds_per_row => (0, 100)) AS med
        FROM people
        GROUP BY region
        """
    )
    columns = set(result.dataframe.columns)
    assert {"avg", "avg_se", "avg_low", "avg_high", "avg_note"} <= columns
    assert {"med", "med_low", "med_high", "med_rank_radius"} <= columns
