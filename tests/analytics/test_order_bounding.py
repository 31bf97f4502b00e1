"""Contribution bounding of quantile histograms in the engine (exact counts, real DuckDB).

With a privacy unit, each person keeps at most ``max_groups`` groups and, in each, at
most ``max_rows`` values, chosen by a keyed hash of the person's own rows: the
histogram a person adds to a group has exactly ``min(rows, max_rows)`` values, and
which values does not depend on the other persons' rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query

KEYS = KeySet.from_values(region=["a", "b", "c"])


def _histograms(frame: pd.DataFrame, *, max_groups: int, max_rows: int) -> dict:
    session = dp.Session.from_pandas(frame, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    query = (
        Query()
        .group_by("region", keys=KEYS)
        .bound(max_groups=max_groups, max_rows=max_rows)
        .median("x", bounds=(0, 1000))
    )
    compiled = session._compile(query, 1.0, salt=7)
    return session._engine.histograms(compiled.plan, compiled.orders[0])


def _frame(rows_per_pair: dict[tuple[int, str], int], seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = [
        pd.DataFrame({"user": user, "region": region, "x": rng.integers(0, 1000, size=count)})
        for (user, region), count in rows_per_pair.items()
    ]
    return pd.concat(parts, ignore_index=True).astype({"x": float})


@pytest.mark.parametrize("max_rows", [1, 3, 10])
def test_each_person_adds_min_rows_m_values_per_group(max_rows: int) -> None:
    sizes = {(0, "a"): 25, (1, "a"): 2, (2, "b"): 40, (3, "c"): 3, (4, "c"): 11}
    hist = _histograms(_frame(sizes), max_groups=3, max_rows=max_rows)
    for region in "abc":
        expected = sum(min(c, max_rows) for (_, r), c in sizes.items() if r == region)
        assert sum(hist.get((region,), {}).values()) == expected


def test_at_most_max_groups_per_person() -> None:
    sizes = {(0, "a"): 5, (0, "b"): 5, (0, "c"): 5}
    hist = _histograms(_frame(sizes), max_groups=2, max_rows=5)
    totals = [sum(hist.get((r,), {}).values()) for r in "abc"]
    assert sorted(totals) == [0, 5, 5]


def test_kept_values_depend_only_on_the_persons_rows() -> None:
    # Person 0's kept values in group a are the same whoever else is in the table.
    alone = _frame({(0, "a"): 30}, seed=3)
    crowd = pd.concat([alone, _frame({(1, "a"): 50, (2, "a"): 7}, seed=4)], ignore_index=True)
    others = _histograms(crowd.iloc[len(alone) :], max_groups=1, max_rows=4)
    with_them = _histograms(crowd, max_groups=1, max_rows=4)
    mine = _histograms(alone, max_groups=1, max_rows=4)
    for index in set(with_them[("a",)]) | set(mine[("a",)]):
        assert with_them[("a",)].get(index, 0) == (
            mine[("a",)].get(index, 0) + others[("a",)].get(index, 0)
        )
