"""Attacks on step 3's formulation (engines/_sql.py: _keep_groups, _distinct_groups,
_rows' second ``__keys`` copy, _window_limit, _narrow, _bin_search).

Each test states the bug it would catch. The checks are exact (the engine's integer
aggregates, before noise), on a real DuckDB Session.
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
from collections import Counter
from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.analytics.engines._sql import FEW_KEYS, SqlEngine

SALT = 97531


def exact(frame: pd.DataFrame, query: Query, budget: Any = None) -> dict[tuple[Any, ...], list]:
    budget = budget or dp.PureDP(1.0)
    session = dp.Session.from_pandas(frame, privacy_unit="user", budget=budget, rng=1)
    compiled = session._compile(query, budget, salt=SALT)
    out = session._engine.aggregate(compiled.plan)
    return {k: list(v) for k, v in out.items()}


def nonzero(out: dict) -> dict:
    return {k: v for k, v in out.items() if any(x != 0 for x in v)}


def minus(a: dict, b: dict) -> dict:
    keys = set(a) | set(b)
    zero = [0] * len(next(iter(a.values()), next(iter(b.values()), [])))
    return nonzero(
        {k: [x - y for x, y in zip(a.get(k, zero), b.get(k, zero), strict=True)] for k in keys}
    )


def plus(a: dict, b: dict) -> dict:
    keys = set(a) | set(b)
    zero = [0] * len(next(iter(a.values()), next(iter(b.values()), [])))
    return nonzero(
        {k: [x + y for x, y in zip(a.get(k, zero), b.get(k, zero), strict=True)] for k in keys}
    )


def crowd(values: list[Any], persons: int, seed: int, rows: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(seed)  # data, not noise
    pick = rng.integers(0, len(values), rows)
    return pd.DataFrame(
        {
            "user": rng.integers(0, persons, rows),
            "g": pd.Series([values[i] for i in pick], dtype=object),
            "x": rng.uniform(-1, 1, rows),
        }
    )


# ---------------------------------------------------------------- typed key columns
# Values of each supported key type, with forms that canonicalise to one key (0.0 and
# -0.0), collation-sensitive strings (case, NFC/NFD, trailing spaces) and extremes.
TYPED: dict[str, tuple[list[Any], Any]] = {
    "text": (["a", "A", "a ", "é", "e\u0301", "ß", "ss", "", "\u0000x", "😀", "b"], object),
    "int64": ([-(2**63), 2**63 - 1, -1, 0, 1, 2**62, -(2**31), 2**31, 7], "int64"),
    "uint64": ([0, 1, 2**63, 2**64 - 1, 2**32, 5, 6, 2**63 - 1], "uint64"),
    "int8": ([-128, 127, 0, 1, -1, 5, 6, 7], "int8"),
    "double": ([0.0, 1.5, -1.5, 1e308, -1e308, 5e-324, 2.0**53, 0.1, 7.0], "float64"),
    "float32": ([0.0, 1.5, -1.5, 2.0**127, 0.25, 6.0, 7.0, 8.0], "float32"),
    "bool": ([True, False], "bool"),
    "date": (
        [dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1970, 1, 1), dt.date(2024, 2, 29)]
        + [dt.date(2000, 1, d) for d in range(1, 6)],
        "datetime64[us]",
    ),
    "timestamp": (
        [
            dt.datetime(1970, 1, 1),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
            dt.datetime(2262, 4, 11),
            dt.datetime(1700, 1, 1, 0, 0, 0, 1),
        ]
        + [dt.datetime(2000, 1, 1, h) for h in range(5)],
        "datetime64[us]",
    ),
}


def typed_frame(kind: str, seed: int) -> tuple[pd.DataFrame, list[Any]]:
    values, dtype = TYPED[kind]
    frame = crowd(values, persons=12, seed=seed)
    if kind == "double":
        # Rows holding -0.0: the engine's one zero; a key 0.0 must match them.
        frame.loc[frame.index[::7], "g"] = -0.0
    if kind == "date":
        frame["g"] = pd.Series(
            [np.datetime64(v, "D") for v in frame["g"]], dtype="datetime64[s]"
        ).dt.date
        frame["g"] = frame["g"].astype(object)
        return frame, values
    frame["g"] = frame["g"].astype(dtype) if dtype is not object else frame["g"].astype(str)
    return frame, values


def group_query(keys: Any, max_groups: int, max_rows: int) -> Query:
    return (
        Query()
        .group_by("g", keys=keys)
        .bound(max_groups=max_groups, max_rows=max_rows)
        .count()
        .sum("x", bounds=(-1.0, 1.0))
    )


@pytest.mark.parametrize("kind", sorted(TYPED))
def test_few_keys_table_and_scan_keep_the_same_groups(kind: str) -> None:
    # Bug caught: the VALUES copy of a few keys (_distinct_groups, CAST(__k0 AS type) /
    # binary_text) not equal to the rows' canonical form (e.g. -0.0 rows, a FLOAT column,
    # dates as days, UBIGINT above 2^63, a collation): pairs then miss the join and
    # vanish, or a group joins twice and is counted twice. The same keys plus > FEW_KEYS
    # absent ones take the scan path; H and the group order do not depend on the key
    # set, so both must keep exactly the same rows.
    frame, values = typed_frame(kind, seed=len(kind))
    keys = list(dict.fromkeys(values))
    few = exact(frame, group_query(KeySet.from_values(g=keys), 2, 2))
    if kind == "bool":
        # Two keys only: no ranking at all (keys <= max_groups) against a ranking (k=1).
        everything = exact(frame, group_query(KeySet.from_values(g=keys), 1, 2))
        assert sum(v[0] for v in everything.values()) <= frame["user"].nunique() * 2
        assert sum(v[0] for v in few.values()) == int(
            frame.groupby(["user", "g"]).size().clip(upper=2).sum()
        )
        return
    absent = _absent_keys(kind, FEW_KEYS + 20, set(keys))
    many = exact(frame, group_query(KeySet.from_values(g=keys + absent), 2, 2))
    assert nonzero(few) == nonzero(many)
    private = exact(frame, group_query("private", 2, 2), dp.ApproxDP(1.0, 1e-6))
    # Every row's group is a key: the same counts (the sums' steps depend on the budget).
    assert {k: v[0] for k, v in nonzero(few).items()} == {
        k: v[0] for k, v in nonzero(private).items()
    }
    # Every row counted somewhere: each person keeps min(2, its groups) groups.
    per_person = frame.groupby(["user", "g"]).size().clip(upper=2)
    assert sum(v[0] for v in few.values()) <= int(per_person.sum())
    assert sum(v[0] for v in few.values()) >= frame["user"].nunique()


def _absent_keys(kind: str, n: int, taken: set) -> list[Any]:
    if kind == "text":
        out = [f"zz{i}" for i in range(n)]
    elif kind in ("int64", "uint64"):
        out = [1000 + i for i in range(n)]
    elif kind == "int8":
        out = [i - 128 for i in range(256)]
    elif kind in ("double", "float32"):
        out = [1000.0 + i for i in range(n)]
    elif kind == "date":
        out = [dt.date(3000, 1, 1) + dt.timedelta(days=i) for i in range(n)]
    else:
        out = [dt.datetime(3000, 1, 1) + dt.timedelta(seconds=i) for i in range(n)]
    return [v for v in out if v not in taken]


@pytest.mark.parametrize("path", ["few", "scan", "private", "two_columns"])
def test_a_persons_kept_groups_do_not_depend_on_other_persons(path: str) -> None:
    # Bug caught: a kept set that depends on other persons' groups. __gi is a rank among
    # the distinct groups present in the data (scan path) or in the keys: if the window
    # ordered by __gi in a way not equivalent to ordering by the group (or the sort key
    # H * 2^32 + __gi overflowed / collided), inserting other persons' groups between a
    # person's groups would change which of them the person keeps. Checked by
    # additivity: the table's aggregates minus the others' = the person alone's.
    target = pd.DataFrame(
        {
            "user": [10**12] * 60,
            "g": [f"m{i:02d}" for i in range(30)] * 2,
            "h": [i % 3 for i in range(60)],
            "x": np.linspace(-1, 1, 60),
        }
    )
    rng = np.random.default_rng(3)
    # Others: groups interleaved with the target's (m00a, m01a, ...) and before/after.
    names = [f"m{i:02d}a" for i in range(30)] + ["a", "zzz"] + [f"m{i:02d}" for i in range(5)]
    others = pd.DataFrame(
        {
            "user": rng.integers(0, 40, 800),
            "g": [names[i] for i in rng.integers(0, len(names), 800)],
            "h": rng.integers(0, 3, 800),
            "x": rng.uniform(-1, 1, 800),
        }
    )
    budget: Any = dp.PureDP(1.0)
    all_keys = sorted(set(target["g"]) | set(names))
    if path == "few":
        keys: Any = KeySet.from_values(g=all_keys)
        assert len(all_keys) <= FEW_KEYS
    elif path == "scan":
        keys = KeySet.from_values(g=all_keys + [f"~{i}" for i in range(FEW_KEYS)])
    elif path == "private":
        keys, budget = "private", dp.ApproxDP(1.0, 1e-6)
    else:
        keys = KeySet.from_tuples(("g", "h"), [(g, h) for g in all_keys for h in range(3)])
    columns = ("g", "h") if path == "two_columns" else ("g",)
    query = (
        Query()
        .group_by(*columns, keys=keys)
        .bound(max_groups=4, max_rows=1)
        .count()
        .sum("x", bounds=(-1.0, 1.0))
    )
    alone = nonzero(exact(target, query, budget))
    both = exact(pd.concat([target, others], ignore_index=True), query, budget)
    rest = exact(others, query, budget)
    assert minus(both, rest) == alone
    assert len(alone) == 4


@pytest.mark.parametrize("path", ["few", "scan", "private"])
def test_one_adversarial_person_moves_at_most_k_groups_by_the_sensitivity(path: str) -> None:
    # Bug caught: rows of non-key groups using up slots or appearing (the filter lost
    # on some path), a pair joined to several distinct-group rows (counted twice), or a
    # narrowed BIGINT sum that wraps. The adversary has many rows in many groups,
    # groups outside the keys, NaN / NULL / -0.0 group values and extreme x.
    rng = np.random.default_rng(11)
    base = pd.DataFrame(
        {
            "user": rng.integers(0, 30, 500),
            "g": rng.choice([0.0, 1.0, 2.5, -3.0, 4.0], 500),
            "x": rng.uniform(-5, 5, 500),
        }
    )
    adv_groups = [0.0, -0.0, 1.0, 2.5, -3.0, 4.0, 99.0, -99.0, float("nan"), None, 5.0]
    adversary = pd.DataFrame(
        {
            "user": [777] * 440,
            "g": [adv_groups[i % len(adv_groups)] for i in range(440)],
            "x": [1e300 if i % 2 else -1e300 for i in range(440)],
        }
    )
    adversary["g"] = adversary["g"].astype("float64")
    k, m = 2, 3
    budget: Any = dp.PureDP(1.0)
    if path == "few":
        keys: Any = KeySet.from_values(g=[0.0, 1.0, 2.5, -3.0, 4.0])
    elif path == "scan":
        keys = KeySet.from_values(g=[0.0, 1.0, 2.5, -3.0, 4.0] + [1000.0 + i for i in range(300)])
    else:
        keys, budget = "private", dp.ApproxDP(1.0, 1e-6)
    query = (
        Query()
        .group_by("g", keys=keys)
        .bound(max_groups=k, max_rows=m)
        .count()
        .sum("x", bounds=(-5.0, 5.0))
    )
    session = dp.Session.from_pandas(base, privacy_unit="user", budget=budget, rng=1)
    bound = session._compile(query, budget, salt=SALT).plan.statistics[1].row_bound()
    before = exact(base, query, budget)
    after = exact(pd.concat([base, adversary], ignore_index=True), query, budget)
    change = minus(after, before)
    assert len(change) <= k
    for values in change.values():
        assert abs(values[0]) <= m and abs(values[1]) <= m * bound
    if path != "private":
        allowed = {(0.0,), (1.0,), (2.5,), (-3.0,), (4.0,)}
        assert set(after) <= allowed | {(1000.0 + i,) for i in range(300)}
        assert all(math.copysign(1, key[0]) > 0 for key in after if key[0] == 0)


def test_keys_no_more_than_max_groups_still_filter_and_clip() -> None:
    # Bug caught: with keys <= max_groups (no ranking) the rows outside the keys kept,
    # or rows not clipped to max_rows per pair.
    frame = pd.DataFrame(
        {"user": [1] * 10 + [2] * 4, "g": ["a"] * 5 + ["b"] * 3 + ["c"] * 2 + ["z"] * 4}
    )
    query = (
        Query()
        .group_by("g", keys=KeySet.from_values(g=["a", "b", "q"]))
        .bound(max_groups=3, max_rows=2)
        .count()
    )
    assert nonzero(exact(frame, query)) == {("a",): [2], ("b",): [2]}


@pytest.mark.parametrize("kind", ["date_int", "decimal_text", "bool_ts"])
def test_two_key_columns_of_mixed_types(kind: str) -> None:
    # Bug caught: the multi-column VALUES table cast to the canonical types
    # (_distinct_groups) disagreeing with the rows' canonical form for one of the
    # columns (dates as days, DECIMAL, timestamps as micros): pairs dropped. Additivity
    # over persons catches both dropping and double counting.
    rng = np.random.default_rng(len(kind))
    n = 300
    if kind == "date_int":
        a = [dt.date(2020, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 4, n)]
        b = rng.integers(-(2**62), 2**62, 5)[rng.integers(0, 5, n)]
        frame = pd.DataFrame({"a": pd.Series(a, dtype="datetime64[s]").dt.date, "b": b})
        expr = None
    elif kind == "decimal_text":
        frame = pd.DataFrame(
            {
                "a": rng.choice(["0.125", "-1.500", "99999.999", "0"], n),
                "b": rng.choice(["é", "e\u0301", "E"], n),
            }
        )
        expr = "CAST(a AS DECIMAL(8,3))"
    else:
        frame = pd.DataFrame(
            {
                "a": rng.choice([True, False], n),
                "b": pd.to_datetime(
                    rng.choice(["2020-01-01 00:00:00.000001", "1969-12-31 23:59:59"], n),
                    format="ISO8601",
                ),
            }
        )
        expr = None
    frame["user"] = rng.integers(0, 15, n)
    frame["x"] = rng.uniform(0, 1, n)
    q = Query()
    if expr is not None:
        q = q.with_column("ad", expr)
    first = "ad" if expr is not None else "a"
    pairs = sorted(
        {(r[first] if expr is None else r["a"], r["b"]) for _, r in frame.iterrows()}, key=str
    )
    if kind == "date_int":
        keys = [(d, int(i)) for d, i in pairs]
    elif kind == "decimal_text":
        from decimal import Decimal

        keys = [(Decimal(d).quantize(Decimal("0.001")), t) for d, t in pairs]
    else:
        keys = [(bool(f), t.to_pydatetime()) for f, t in pairs]
    keys = keys + keys[:2]  # duplicates
    query = (
        q.group_by(first, "b", keys=KeySet.from_tuples((first, "b"), keys))
        .bound(max_groups=2, max_rows=3)
        .count()
    )
    total = nonzero(exact(frame, query))
    summed: dict = {}
    for _user, rows in frame.groupby("user"):
        summed = plus(summed, exact(rows, query))
    assert total == summed
    assert total  # something was counted


@pytest.mark.parametrize(("hi", "m"), [(4.0e18, 1), (1.0, 2**31), (1e300, 7)])
def test_narrowed_sums_equal_the_wide_sums(
    hi: float, m: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Bug caught: the BIGINT narrowing (_narrow) wrapping a pair's scaled sum, or a
    # narrowed column summed with a plain BIGINT sum that overflows (the final sum
    # must be the wide one). Values beyond both bounds, many persons, compared with the
    # wide form forced everywhere. (Query.sum picks its resolution so that
    # max_rows * row_bound stays near 2^29: the > 2^62 branch is not reachable here.)
    rows = 3000
    frame = pd.DataFrame(
        {
            "user": np.arange(rows) % 500,
            "g": np.array(["a", "b", "c"])[np.arange(rows) % 3],
            "x": np.where(np.arange(rows) % 5 == 0, -hi * 10, hi * 10),
        }
    )
    query = (
        Query()
        .group_by("g", keys=KeySet.from_values(g=["a", "b", "c"]))
        .bound(max_groups=2, max_rows=m)
        .sum("x", bounds=(-hi, hi))
    )
    narrow = exact(frame, query)
    monkeypatch.setattr(SqlEngine, "_narrow", staticmethod(lambda plan, i: False))
    wide = exact(frame, query)
    assert narrow == wide
    monkeypatch.undo()
    session = dp.Session.from_pandas(frame, privacy_unit="user", budget=dp.PureDP(2.0), rng=1)
    session.evaluate(query, budget=dp.PureDP(1.0))
    assert session.spent is not None


@pytest.mark.parametrize("n_edges", [2, 3, 4, 7, 16, 33])
def test_bin_search_puts_each_value_in_the_chains_bin(n_edges: int) -> None:
    # Bug caught: an off-by-one in the nested-CASE binary search (_bin_search): values
    # equal to an edge, between edges, below the first / above the last, +-inf, -0.0;
    # NaN and NULL are missing (no bin). Reference: bisect_right over interior edges.
    edges = [float(e) for e in np.linspace(-10, 10, n_edges)]
    values = [
        *edges,
        *(e + 1e-9 for e in edges),
        *(e - 1e-9 for e in edges),
        -1e308,
        1e308,
        float("inf"),
        float("-inf"),
        -0.0,
        0.0,
        float("nan"),
        None,
    ]
    frame = pd.DataFrame({"user": range(len(values)), "v": pd.Series(values, dtype="float64")})
    query = Query().group_by_bins("v", edges).bound(max_groups=1, max_rows=1).count()
    got = nonzero(exact(frame, query))
    interior = edges[1:-1]
    want = Counter(
        bisect.bisect_right(interior, v) for v in values if v is not None and not math.isnan(v)
    )
    got_counts = {key[0]: v[0] for key, v in got.items()}
    assert set(got_counts.values()) and sum(got_counts.values()) == sum(want.values())
    assert sorted(got_counts.values()) == sorted(want.values())


def test_evaluate_with_keys_of_every_path_charges_only_on_success() -> None:
    # Bug caught: SQL that fails on some data after the charge (rule 1): the Session
    # must either refuse before charging or answer. Few keys, scan, two columns.
    frame, values = typed_frame("uint64", seed=4)
    session = dp.Session.from_pandas(frame, privacy_unit="user", budget=dp.PureDP(10.0), rng=1)
    for keys in (
        KeySet.from_values(g=values),
        KeySet.from_values(g=values + [10**6 + i for i in range(300)]),
    ):
        session.evaluate(group_query(keys, 2, 2), budget=dp.PureDP(1.0))
    assert session.spent is not None
