"""Contribution bounding in the engine: bounds hold, and the rule is local to a person."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query

GROUPS = [f"g{i}" for i in range(20)]


def heavy_person(user: int, groups: list[str], rows_per_group: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "user": user,
            "g": np.repeat(groups, rows_per_group),
            "x": rng.uniform(0, 1, len(groups) * rows_per_group),
        }
    )


def run(
    df: pd.DataFrame, max_groups: int, max_rows: int, salt: int = 99
) -> dict[tuple[object, ...], list[int]]:
    session = dp.Session.from_pandas(df, privacy_unit="user", budget=dp.PureDP(1.0), rng=1)
    query = (
        Query()
        .group_by("g", keys=KeySet.from_values(g=GROUPS))
        .bound(max_groups=max_groups, max_rows=max_rows)
        .count()
        .sum("x", bounds=(0.0, 1.0))
        .count_distinct()
    )
    compiled = session._compile(query, 1.0, salt=salt)
    return session._engine.aggregate(compiled.plan)


@pytest.mark.parametrize(("max_groups", "max_rows"), [(1, 1), (3, 2), (5, 10), (20, 50)], ids=str)
def test_one_person_within_bounds(max_groups: int, max_rows: int) -> None:
    df = heavy_person(7, GROUPS[:12], rows_per_group=30, seed=1)
    out = run(df, max_groups, max_rows)
    assert len(out) == min(max_groups, 12)
    assert all(v[0] == min(max_rows, 30) for v in out.values())
    assert all(v[2] == 1 for v in out.values())


def test_rule_depends_only_on_the_persons_rows() -> None:
    first = heavy_person(7, GROUPS[:12], rows_per_group=30, seed=1)
    alone = run(first, 4, 3)
    for seed in range(3):
        others = pd.concat(
            [
                heavy_person(
                    100 + i,
                    list(np.random.default_rng(seed + i).choice(GROUPS[12:], 4)),
                    25,
                    seed + i,
                )
                for i in range(10)
            ]
        )
        together = run(pd.concat([first, others]), 4, 3)
        # The first person's groups are disjoint from the others': the kept groups,
        # row counts and (exact integer) sums of the first person are unchanged.
        assert {k: v for k, v in together.items() if k[0] in GROUPS[:12]} == alone


def test_salt_changes_the_kept_rows() -> None:
    first = heavy_person(7, GROUPS[:12], rows_per_group=30, seed=1)
    kept = {
        tuple(sorted((k, tuple(v)) for k, v in run(first, 4, 3, salt=s).items())) for s in range(6)
    }
    assert len(kept) > 1  # with one fixed rule, every salt would keep the same rows
