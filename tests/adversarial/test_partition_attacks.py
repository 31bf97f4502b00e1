"""Attacks on partitions (parallel composition): free budget through aliased keys,
re-partitioning, and nested parts that read their siblings' rows.

A partition is charged once, the largest part budget, because each person's rows lie in
one part. Each attack below breaks that premise or that charge; before the fix each of
them got budget (or rows) for free.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query


def towns(n: int = 3000, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "person": rng.integers(0, 400, n),
            "region": rng.integers(1, 4, n).astype(np.int32),
            "city": rng.choice(["a", "b", "c"], n),
            "year": rng.integers(2020, 2023, n),
            "income": rng.uniform(0.0, 100.0, n),
        }
    )


def exact_count(part: dp.Session) -> int:
    """The part's exact row count, read through its own engine plan (no noise)."""
    compiled = part._compile(Query().bound(max_rows=2**31).count(), 1.0, salt=1)
    return int(part._engine.aggregate(compiled.plan)[()][0])


@pytest.mark.parametrize(
    "aliases",
    [[1, "1"], [1, 1.0], [1, np.int64(1)], [2, "02", 2.0], [1, True]],
    ids=["str", "float", "numpy", "padded", "bool"],
)
def test_aliased_keys_cannot_open_two_parts_on_the_same_rows(aliases: list[object]) -> None:
    # The attacker's plan: partition by region with keys that SQL compares equal, then
    # spend each part's full budget on the same rows, paying the parent only once.
    session = dp.Session.from_pandas(towns(), budget=dp.PureDP(1.0), rng=0)
    with pytest.raises(dp.InvalidParameter):
        session.partition("region", aliases, budgets=1.0)
    assert session.spent == dp.PureDP(0.0) and not session.history


def test_a_key_of_the_wrong_type_is_refused_not_silently_empty() -> None:
    session = dp.Session.from_pandas(towns(), budget=dp.PureDP(1.0), rng=0)
    for keys in (["1"], [1.5], [None], [float("nan")], [2**40]):
        with pytest.raises(dp.InvalidParameter):
            session.partition("region", keys, budgets=0.5)
    with pytest.raises(dp.InvalidParameter):
        session.partition("city", [1], budgets=0.5)
    assert session.spent == dp.PureDP(0.0)


def test_repartitioning_is_charged_again() -> None:
    # The attack: a tiny partition first, then the "same" partition with more keys and
    # a huge budget; before the fix only the first key's scope decided whether the
    # parent was charged, so the second opened a part with epsilon = 1000.
    session = dp.Session.from_pandas(towns(), budget=dp.PureDP(1.0), rng=0)
    session.partition("region", [1], budgets=dp.PureDP(0.01))
    with pytest.raises(dp.BudgetExceeded):
        session.partition("region", [1, 2], budgets=[dp.PureDP(0.01), dp.PureDP(1000.0)])
    parts = session.partition("region", [1, 2], budgets=[dp.PureDP(0.01), dp.PureDP(0.5)])
    assert session.spent == dp.PureDP(0.51)
    assert parts[2].budget == dp.PureDP(1.0) and parts[2].remaining == dp.PureDP(0.5)
    with pytest.raises(dp.BudgetExceeded):
        parts[2].evaluate(Query().count(), budget=dp.PureDP(0.6))


def test_the_same_partition_again_is_the_same_parts() -> None:
    session = dp.Session.from_pandas(towns(), budget=dp.PureDP(1.0), rng=0)
    first = session.partition("region", [1, 2], budgets=0.4)
    first[1].evaluate(Query().count(), budget=dp.PureDP(0.3))
    again = session.partition("region", [1, 2.0], budgets=0.4)  # 2.0 is the INTEGER 2
    assert session.spent == dp.PureDP(0.4)
    assert again[1].spent == dp.PureDP(0.3)
    with pytest.raises(dp.BudgetExceeded):
        again[1].evaluate(Query().count(), budget=dp.PureDP(0.2))


def test_a_partition_made_with_another_keyed_hash_is_not_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The attack: a partition opened by an older dpkit, whose keyed hash put persons in
    # other parts, resumed from the persistent ledger by a newer one -- each part then
    # sees persons the old parts' releases did not, under one parent charge. The hash's
    # version is part of the partition's identity: resumed, it is a new partition and
    # the parent pays again.
    from dpkit.analytics import _partition

    ledger = tmp_path / "ledger.db"
    frame = towns()

    def open_parts() -> dp.Session:
        session = dp.Session.from_pandas(
            frame, privacy_unit="person", budget=dp.PureDP(1.0), ledger=ledger, rng=0
        )
        session.partition("region", [1, 2], budgets=0.4)
        return session

    assert open_parts().spent == dp.PureDP(0.4)
    assert open_parts().spent == dp.PureDP(0.4)  # same hash: the same partition, resumed
    monkeypatch.setattr(_partition, "HASH_VERSION", _partition.HASH_VERSION + 1)
    assert open_parts().spent == dp.PureDP(0.8)


def test_a_part_budget_never_exceeds_what_the_parent_has_left() -> None:
    session = dp.Session.from_pandas(towns(), budget=dp.PureDP(1.0), rng=0)
    session.evaluate(Query().count(), budget=dp.PureDP(0.7))
    with pytest.raises(dp.BudgetExceeded):
        session.partition("region", [1, 2], budgets=dp.PureDP(0.5))
    session.partition("region", [1, 2], budgets=dp.PureDP(0.3))
    assert session.remaining.epsilon < 1e-15  # 0.7 + 0.3 as floats: 1 - 5.6e-17 left


@pytest.mark.parametrize("unit", [None, "person"])
def test_nested_parts_read_only_their_own_rows(unit: str | None) -> None:
    # The attack: partition by region, then each region by year; before the fix the
    # inner part (year = y) read the rows of year y in EVERY region.
    frame = towns()
    session = dp.Session.from_pandas(frame, privacy_unit=unit, budget=dp.PureDP(1.0), rng=0)
    regions = session.partition("region", [1, 2, 3], budgets=0.5)
    years = regions[2].partition("year", [2020, 2021, 2022], budgets=0.5)
    cities = years[2021].partition("city", ["a", "b"], budgets=0.5)
    if unit is None:
        in_region = frame[frame.region == 2]
        assert exact_count(regions[2]) == len(in_region)
        assert exact_count(years[2021]) == int((in_region.year == 2021).sum())
        assert exact_count(cities["b"]) == int(
            ((in_region.year == 2021) & (in_region.city == "b")).sum()
        )
    # With or without a unit: the parts of one level never share a row, and a part of
    # a part sees a subset of its parent's rows.
    by_year = [exact_count(years[y]) for y in (2020, 2021, 2022)]
    assert sum(by_year) <= exact_count(regions[2])
    assert exact_count(cities["a"]) + exact_count(cities["b"]) <= by_year[1]
    assert sum(exact_count(regions[r]) for r in (1, 2, 3)) <= len(frame)


def test_with_a_unit_each_person_is_in_one_part_at_every_level() -> None:
    frame = towns()
    session = dp.Session.from_pandas(frame, privacy_unit="person", budget=dp.PureDP(1.0), rng=0)
    years = session.partition("year", [2020, 2021, 2022], budgets=0.5)
    seen: dict[int, int] = {}
    for year, part in years.items():
        query = Query().group_by("region", keys=KeySet.from_values(region=[1, 2, 3]))
        query = query.bound(max_groups=3, max_rows=1).count_distinct()
        compiled = part._compile(query, 1.0, salt=1)
        units = sum(v[0] for v in part._engine.aggregate(compiled.plan).values())
        seen[year] = units
    # Every person with rows is in exactly one year part (counted once per region they
    # have rows in, at most 3): the distinct-person totals partition the persons.
    persons_per_year = sum(seen.values())
    assert persons_per_year <= frame.groupby(["person", "region"]).ngroups


def test_parent_and_parts_run_concurrently_within_the_budget(tmp_path: Path) -> None:
    # Concurrent composition: the parent keeps its remaining budget while parts are
    # open, and neither can take the other's share.
    ledger = tmp_path / "ledger.sqlite"
    session = dp.Session.from_pandas(towns(), budget=dp.PureDP(1.0), ledger=ledger, rng=0)
    parts = session.partition("region", [1, 2], budgets=0.6)
    session.evaluate(Query().count(), budget=dp.PureDP(0.4))
    parts[1].evaluate(Query().count(), budget=dp.PureDP(0.6))
    with pytest.raises(dp.BudgetExceeded):
        session.evaluate(Query().count(), budget=dp.PureDP(1e-6))
    with pytest.raises(dp.BudgetExceeded):
        parts[1].evaluate(Query().count(), budget=dp.PureDP(1e-6))
    parts[2].evaluate(Query().count(), budget=dp.PureDP(0.6))
    # Reopened from the ledger: the same state, nothing charged again.
    again = dp.Session.from_pandas(towns(), budget=dp.PureDP(1.0), ledger=ledger, rng=0)
    reopened = again.partition("region", [1, 2], budgets=0.6)
    assert again.spent == dp.PureDP(1.0) and reopened[2].remaining == dp.PureDP(0.0)


def test_group_keys_of_the_wrong_type_are_refused_or_canonical() -> None:
    # Before the fix "1" for an INTEGER column silently matched nothing and released
    # noise around 0 for a group of hundreds.
    frame = towns()
    session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=0)
    with pytest.raises(dp.InvalidParameter):
        session.evaluate(
            Query().group_by("region", keys=KeySet.from_values(region=["1", "2"])).count(),
            budget=0.1,
        )
    with pytest.raises(dp.InvalidParameter):  # 1 and "01" would alias one group
        session.evaluate(
            Query().group_by("region", keys=KeySet.from_values(region=[1, "01"])).count(),
            budget=0.1,
        )
    assert session.spent == dp.PureDP(0.0)
    query = Query().group_by("region", keys=KeySet.from_values(region=[1.0, 2.0])).count()
    compiled = session._compile(query, 1.0, salt=1)
    exact = session._engine.aggregate(compiled.plan)
    assert exact[(1,)][0] == int((frame.region == 1).sum())


def test_date_keys_as_iso_strings_match_the_dates() -> None:
    frame = pd.DataFrame(
        {"day": pd.to_datetime(["2024-01-01", "2024-01-01", "2024-01-02"]).date, "v": [1, 2, 3]}
    )
    session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=0)
    query = Query().group_by("day", keys=KeySet.from_values(day=["2024-01-01"])).count()
    compiled = session._compile(query, 1.0, salt=1)
    assert list(session._engine.aggregate(compiled.plan).values()) == [[2]]
    aliases = KeySet.from_values(day=["2024-01-01", dt.date(2024, 1, 1)])
    with pytest.raises(dp.InvalidParameter):
        session.evaluate(Query().group_by("day", keys=aliases).count(), budget=0.1)
    assert session.spent == dp.PureDP(0.0)
