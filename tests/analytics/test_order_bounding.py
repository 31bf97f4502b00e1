"""Contribution bounding of order-statistic histograms in the engine (exact counts, DuckDB).

With a privacy unit, each person keeps at most ``max_groups`` groups and, in each, at
most ``max_rows`` values, those of smallest keyed hash ``hash(salt, person, group,
value)`` (a bounded ``arg_min`` per pair, no window over the rows): the histogram a
person adds to a group has exactly ``min(rows, max_rows)`` values, which values depends
only on that person's own rows (not on the other persons, nor on the order of the
rows), and it changes with the secret salt. Every test reads exact histograms, on a
grid of step 1 over integer values, so the grid index of a kept row is its value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.analytics.engines.duckdb import DuckDBEngine

KEYS = KeySet.from_values(region=["a", "b", "c"])
Histograms = dict[tuple[Any, ...], dict[int, int]]


def _median_query(max_groups: int, max_rows: int) -> Query:
    # Bounds (0, 1000) on the default 1001-point grid: step 1, index = value.
    return (
        Query()
        .group_by("region", keys=KEYS)
        .bound(max_groups=max_groups, max_rows=max_rows)
        .median("x", bounds=(0, 1000))
    )


def _histograms(
    frame: pd.DataFrame,
    *,
    max_groups: int,
    max_rows: int,
    salt: int = 7,
    query: Query | None = None,
) -> Histograms:
    session = dp.Session.from_pandas(frame, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    compiled = session._compile(query or _median_query(max_groups, max_rows), 1.0, salt=salt)
    return session._engine.histograms(compiled.plan, compiled.orders[0])


def _frame(rows_per_pair: dict[tuple[int, str], int], seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = [
        pd.DataFrame({"user": user, "region": region, "x": rng.integers(0, 1000, size=count)})
        for (user, region), count in rows_per_pair.items()
    ]
    return pd.concat(parts, ignore_index=True).astype({"x": float})


def _total(hist: Histograms, region: str) -> int:
    return sum(hist.get((region,), {}).values())


SIZES = {(0, "a"): 25, (1, "a"): 2, (2, "b"): 40, (3, "c"): 3, (4, "c"): 11, (4, "a"): 10}


@pytest.mark.parametrize("max_rows", [1, 3, 10], ids=lambda m: f"m={m}")
def test_each_person_adds_min_rows_m_values_per_group(max_rows: int) -> None:
    hist = _histograms(_frame(SIZES), max_groups=3, max_rows=max_rows)
    for region in "abc":
        expected = sum(min(c, max_rows) for (_, r), c in SIZES.items() if r == region)
        assert _total(hist, region) == expected


def test_at_most_max_groups_per_person() -> None:
    sizes = {(0, "a"): 5, (0, "b"): 5, (0, "c"): 5}
    hist = _histograms(_frame(sizes), max_groups=2, max_rows=5)
    totals = [_total(hist, r) for r in "abc"]
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


@pytest.mark.parametrize("max_rows", [1, 4, 12], ids=lambda m: f"m={m}")
def test_tied_hashes_never_exceed_max_rows(max_rows: int) -> None:
    # Rows with equal values share their keyed hash: 20 copies of 500 plus 5 distinct
    # values, and a person whose 30 rows all hold 7. Each still adds min(rows, m).
    tied = pd.DataFrame(
        {
            "user": [0] * 25 + [1] * 30,
            "region": ["a"] * 55,
            "x": [500.0] * 20 + [1.0, 2.0, 3.0, 4.0, 5.0] + [7.0] * 30,
        }
    )
    hist = _histograms(tied, max_groups=1, max_rows=max_rows)[("a",)]
    assert sum(hist.values()) == 2 * min(25, max_rows)
    assert hist.get(7, 0) == min(30, max_rows)
    assert sum(v for i, v in hist.items() if i != 7) == min(25, max_rows)


def test_row_order_does_not_change_the_kept_values() -> None:
    frame = _frame(SIZES, seed=5)
    shuffled = frame.sample(frac=1.0, random_state=11).reset_index(drop=True)
    assert not frame.equals(shuffled)
    for max_rows in (2, 6):
        assert _histograms(shuffled, max_groups=2, max_rows=max_rows) == _histograms(
            frame, max_groups=2, max_rows=max_rows
        )


def _kept(values: list[float], salt: int, max_rows: int) -> tuple[int, ...]:
    frame = pd.DataFrame({"user": 0, "region": "a", "x": values})
    hist = _histograms(frame, max_groups=1, max_rows=max_rows, salt=salt)[("a",)]
    return tuple(sorted(i for i, count in hist.items() for _ in range(count)))


def test_kept_values_change_with_the_salt_not_with_their_order() -> None:
    # 10 of 100 distinct values. With a well-mixed keyed hash two salts give the same
    # 10-subset with probability 1 / C(100, 10) < 10^-13, so 30 salts give 30 subsets
    # (fixed salts: the test is deterministic). Power: the key without the outer mix,
    # hash(salt, person, group, value) = K xor hash(value) in DuckDB, gave only 23
    # distinct subsets; a rule keeping the smallest (largest) values fails the next line.
    values = [float(v) for v in range(0, 1000, 10)]
    kept = [_kept(values, salt, 10) for salt in range(1, 31)]
    assert len(set(kept)) == len(kept)
    assert all(len(k) == 10 and set(k) <= set(range(0, 1000, 10)) for k in kept)
    assert tuple(range(0, 100, 10)) not in kept and tuple(range(900, 1000, 10)) not in kept
    assert _kept(values[::-1], 3, 10) == kept[2]


@pytest.mark.parametrize("max_rows", [3, 8], ids=lambda m: f"m={m}")
def test_window_fallback_keeps_the_same_values(
    max_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Row bounds >= 10^6 exceed DuckDB's min_by n and take the other branch (pairs
    # with <= m values keep all, larger pairs a window); lowering the limit runs it on
    # a small table: it must keep exactly the values the bounded aggregate keeps.
    frame = pd.concat(
        [_frame(SIZES, seed=8), pd.DataFrame({"user": 9, "region": "b", "x": [42.0] * 12})],
        ignore_index=True,
    )
    expected = _histograms(frame, max_groups=2, max_rows=max_rows)
    monkeypatch.setattr(DuckDBEngine, "top_n_limit", 2)
    assert _histograms(frame, max_groups=2, max_rows=max_rows) == expected


def test_private_bounds_histogram_caps_each_person_over_all_groups() -> None:
    # The ungrouped quantiles of private bounds: each person adds min(own rows, m)
    # values in all (k = 1), whatever their groups. Search range (0, 10000) on the
    # 10001-point grid: index = value.
    frame = _frame(SIZES, seed=2)
    query = (
        Query()
        .group_by("region", keys=KEYS)
        .bound(max_groups=3, max_rows=6)
        .mean("x", bounds="private", search_range=(0.0, 10000.0))
    )
    session = dp.Session.from_pandas(frame, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    compiled = session._compile(query, 1.0, salt=7)
    assert compiled.bounds_plan is not None
    hist = session._engine.histograms(compiled.bounds_plan, compiled.bound_orders[0])
    rows = frame.groupby("user").size()
    assert sum(hist[()].values()) == int(np.minimum(rows, 6).sum())


def test_max_takes_one_value_per_person_and_group() -> None:
    frame = _frame(SIZES, seed=6)
    query = (
        Query()
        .group_by("region", keys=KEYS)
        .bound(max_groups=3, max_rows=2)
        .max("x", bounds=(0.0, 1024.0))
    )
    hist = _histograms(frame, max_groups=3, max_rows=2, query=query)
    for region in "abc":
        part = frame[frame["region"] == region]
        maxima = part.groupby("user")["x"].max().astype(int)
        assert hist.get((region,), {}) == maxima.value_counts().to_dict()
