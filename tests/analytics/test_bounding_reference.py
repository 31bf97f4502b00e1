"""Which groups each person keeps, checked against the rule written in Python.

The engines keep, for each person, the ``max_groups`` groups of smallest
``(H(salt, person, group), group)`` (dpkit.analytics.engines._sql, step 3) and count a
pair with ``c`` rows as ``min(c, max_rows)``. The SQL computes ``H``'s group slice once
per distinct group, breaks ties by the group's rank among the groups, and skips the
ranking when the public keys are no more than ``max_groups``
(``SqlEngine._keep_groups``); this file checks that the rows kept are exactly those
of the rule, computed here from :func:`python_hash`, for public keys, private keys,
several key columns and each key type the slice is computed for, and that two groups
whose hashes tie (constructed from the round keys) keep the smaller, on DuckDB and Spark.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.analytics.engines._hash import (
    _LIMB_KEYS,
    HASH_PRIME,
    python_hash,
    python_integer_limbs,
    python_text_limbs,
    round_keys,
)

SALT = 424242


def limbs(value: Any) -> list[int]:
    return python_text_limbs(value) if isinstance(value, str) else python_integer_limbs(int(value))


def reference_counts(
    frame: pd.DataFrame, groups: Sequence[str], max_groups: int, max_rows: int
) -> dict[tuple[Any, ...], int]:
    """Per group: the sum over the persons keeping it of min(rows, max_rows)."""
    pairs = frame.groupby(["user", *groups]).size()
    by_person: dict[int, list[tuple[int, tuple[Any, ...], int]]] = defaultdict(list)
    for key, rows in pairs.items():
        user, group = int(key[0]), tuple(key[1:])
        person_limbs = python_integer_limbs(user) + [x for g in group for x in limbs(g)]
        by_person[user].append((python_hash(SALT, person_limbs), group, int(rows)))
    out: dict[tuple[Any, ...], int] = defaultdict(int)
    for entries in by_person.values():
        # Ties in H (probability 1/p) are broken by the group: Python compares str by
        # code point, the order of their UTF-8 bytes (the engine's binary order).
        for _, group, rows in sorted(entries)[:max_groups]:
            out[group] += min(rows, max_rows)
    return dict(out)


def people(seed: int, groups: int = 25) -> pd.DataFrame:
    generator = np.random.default_rng(seed)  # data, not noise
    rows = 6000
    return pd.DataFrame(
        {
            "user": generator.integers(-(2**40), 2**40, 400)[generator.integers(0, 400, rows)],
            "region": [f"r{i}é" for i in generator.integers(0, groups, rows)],
            "code": generator.integers(-3, 9, rows),
            "x": generator.uniform(0, 1, rows),
        }
    )


def engine_counts(
    frame: pd.DataFrame, query: Query, budget: dp.Budget
) -> dict[tuple[Any, ...], int]:
    session = dp.Session.from_pandas(frame, privacy_unit="user", budget=budget, rng=1)
    compiled = session._compile(query, budget, salt=SALT)
    return {key: values[0] for key, values in session._engine.aggregate(compiled.plan).items()}


@pytest.mark.parametrize(
    ("max_groups", "max_rows", "unseen"), [(1, 1, 1), (3, 2, 1), (7, 4, 1), (3, 2, 400)], ids=str
)
def test_public_text_keys_keep_the_rules_groups(
    max_groups: int, max_rows: int, unseen: int
) -> None:
    frame = people(1)
    # Every second region is a key, and keys in no row: rows of other regions are
    # dropped before any person's groups are ranked (they must not use up slots). With
    # 400 keys no row has, the distinct groups come from a scan (more than FEW_KEYS).
    keys = [*sorted(set(frame["region"]))[::2], *(f"never seen {i}" for i in range(unseen))]
    query = (
        Query()
        .group_by("region", keys=KeySet.from_values(region=keys))
        .bound(max_groups=max_groups, max_rows=max_rows)
        .count()
    )
    got = engine_counts(frame, query, dp.PureDP(1.0))
    listed = frame[frame["region"].isin(keys)]
    assert {k: v for k, v in got.items() if v} == reference_counts(
        listed, ["region"], max_groups, max_rows
    )
    assert set(got) <= {(k,) for k in keys}


def test_private_keys_keep_the_rules_groups() -> None:
    frame = people(2)
    query = Query().group_by("region", keys="private").bound(max_groups=3, max_rows=2).count()
    got = engine_counts(frame, query, dp.ApproxDP(1.0, 1e-6))
    assert got == reference_counts(frame, ["region"], 3, 2)


def test_integer_and_two_column_keys_keep_the_rules_groups() -> None:
    frame = people(3, groups=4)
    codes = list(range(-3, 9))
    query = (
        Query()
        .group_by("code", keys=KeySet.from_values(code=codes))
        .bound(max_groups=2, max_rows=3)
        .count()
    )
    got = engine_counts(frame, query, dp.PureDP(1.0))
    assert {k: v for k, v in got.items() if v} == reference_counts(frame, ["code"], 2, 3)

    regions = sorted(set(frame["region"]))
    pairs = [(r, c) for r in regions for c in codes if (c + len(r)) % 3]  # not all pairs
    both = KeySet.from_tuples(("region", "code"), pairs)
    query = Query().group_by("region", "code", keys=both).bound(max_groups=3, max_rows=2).count()
    got = engine_counts(frame, query, dp.PureDP(1.0))
    listed = [(r, c) in set(pairs) for r, c in zip(frame["region"], frame["code"], strict=True)]
    assert {k: v for k, v in got.items() if v} == reference_counts(
        frame[listed], ["region", "code"], 3, 2
    )
    assert set(got) <= set(pairs)


def test_keys_no_more_than_max_groups_keep_every_group() -> None:
    frame = people(4, groups=6)
    keys = sorted(set(frame["region"]))[:3]  # three of the six regions
    query = (
        Query()
        .group_by("region", keys=KeySet.from_values(region=keys))
        .bound(max_groups=3, max_rows=5)
        .count()
    )
    got = engine_counts(frame, query, dp.PureDP(1.0))
    listed = frame[frame["region"].isin(keys)]
    every = listed.groupby(["user", "region"]).size().clip(upper=5).groupby("region").sum()
    assert got == {(k,): int(v) for k, v in every.items()}
    assert got == reference_counts(listed, ["region"], 3, 5)


def test_rows_outside_the_keys_are_dropped_without_a_privacy_unit() -> None:
    frame = people(5, groups=6)
    keys = [*sorted(set(frame["region"]))[:2], "never seen"]
    query = Query().group_by("region", keys=KeySet.from_values(region=keys)).count()
    session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=1)
    compiled = session._compile(query, 1.0, salt=SALT)
    got = {k: v[0] for k, v in session._engine.aggregate(compiled.plan).items()}
    counts = frame["region"].value_counts()
    assert got == {(k,): int(counts[k]) for k in keys[:2]}


def colliding_groups(salt: int, user: int) -> tuple[int, int]:
    """Two BIGINT groups ``a < b`` with the same ``H(salt, user, group)``: ``a < 2^30``
    has limbs ``(a, 0, 8)`` and ``b = 2^30 + c`` has ``(c, 1, 8)``. The hash is linear in
    the limbs before its rounds, so the two tie when ``k0 a = k0 c + k1 (mod p)``, with
    ``k0, k1`` the round keys of the group's first two limbs (after the user's three);
    ``c`` is the first from 12,345 whose ``a`` is below 2^30."""
    p = HASH_PRIME
    keys = round_keys(salt)
    k0, k1 = keys[1 + 3 % _LIMB_KEYS], keys[1 + 4 % _LIMB_KEYS]
    c = 12_345
    while (a := (c + k1 * pow(k0, -1, p)) % p) >= 2**30:
        c += 1
    return a, 2**30 + c


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_a_tie_in_the_hash_keeps_the_smaller_group(engine: str, request: Any) -> None:
    # The rule keeps a person's groups of smallest (H, group): when two groups' hashes
    # tie, the smaller group. DuckDB sorts by H * 2^32 + the group's rank among the
    # groups, Spark by (H, group); both must break the tie the same way.
    if engine == "spark":
        request.getfixturevalue("spark")
    user = 7
    a, b = colliding_groups(SALT, user)
    h = [python_hash(SALT, python_integer_limbs(user) + python_integer_limbs(g)) for g in (a, b)]
    assert h[0] == h[1] and a < b  # the construction's tie
    frame = pd.DataFrame({"user": [user] * 4, "code": [b, b, a, b]})
    query = (
        Query.from_table("people")
        .group_by("code", keys=KeySet.from_values(code=[b, a]))  # more keys than max_groups
        .bound(max_groups=1, max_rows=5)
        .count()
    )
    session = dp.Session.from_tables(
        {"people": frame}, privacy_unit="user", budget=dp.PureDP(1.0), rng=1, engine=engine
    )
    view, stripped = session._view_for(query, SALT)
    compiled = view._compile(stripped, 1.0, SALT)
    got = {k: v[0] for k, v in view._engine.aggregate(compiled.plan).items()}
    assert {k: v for k, v in got.items() if v} == {(a,): 1}
