"""Adversarial review findings (issue 12 hardening): each test is an attack written
with the public API only, run on two neighbouring tables, and asserts that what the
attacker sees is the same on both. Each failed before its fix: they were found by an
adversarial review after the first hardening pass.
"""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import Query

TINY = dp.PureDP(1e-6)


def staff(salary_of_alice: float, salary_of_bob: float = 41_000.0) -> pd.DataFrame:
    rows = [
        ("alice", "north", salary_of_alice, 5, 4),
        ("bob", "south", salary_of_bob, 2, 3),
        ("carol", "north", 58_000.0, 9, 7),
        ("dan", "east", 36_500.0, 1, 1),
    ]
    return pd.DataFrame(rows, columns=["name", "region", "salary", "clicks", "visits"])


def session(frame: pd.DataFrame, **kw: object) -> dp.Session:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seeded rng warning
        return dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=0, **kw)  # type: ignore[arg-type]


def outcome(s: dp.Session, query: Query, budget: object = TINY) -> str:
    try:
        s.evaluate(query, budget=budget)
        return "ok"
    except dp.DPError as err:
        return f"{type(err).__name__}: {err}"


# --------------------------------------------------------------------------- 1
def injected(payload: str) -> str:
    """A filter that passes the grammar: the quoted identifier inside DECIMAL(...) is a
    DataTypeParam, accepted without a look at its content and rendered raw (upper-cased)
    by SQLGlot, so ``payload`` lands in the SQL *outside* the TRY(...)."""
    inner = f"3))) IS NULL OR ({payload}) OR (((TRUE".replace('"', '""')
    return f'CAST(clicks AS DECIMAL("{inner}")) IS NULL'


def test_cast_type_parameter_injection_is_an_error_oracle() -> None:
    def transcript(salary: float) -> list[str]:
        s = session(staff(salary))
        return [
            outcome(
                s,
                Query()
                .filter(
                    injected(
                        f"CASE WHEN name ILIKE 'alice' AND salary >= {t} "
                        "THEN CAST('x' AS INTEGER) ELSE 1 END = 1"
                    )
                )
                .count(),
            )
            for t in range(0, 100_001, 10_000)
        ]

    assert transcript(40_000.0) == transcript(60_000.0)


def test_extract_unit_injection_is_an_error_oracle() -> None:
    def transcript(salary: float) -> list[str]:
        s = session(staff(salary))
        out = []
        for t in range(0, 100_001, 20_000):
            # Rendered: TRY(EXTRACT(EPOCH FROM d)) < 0 OR (<payload>) = 1 OR TRY(...)
            unit = (
                "epoch FROM DATE '2020-01-01')) < 0 OR (CASE WHEN name ILIKE 'alice' AND "
                f"salary >= {t} THEN CAST('x' AS INTEGER) ELSE 1 END) = 1 OR TRY(EXTRACT(epoch"
            )
            q = Query().filter(f"EXTRACT(\"{unit}\" FROM DATE '2020-01-01') < 0").count()
            out.append(outcome(s, q))
        return out

    assert transcript(40_000.0) == transcript(60_000.0)


def test_injection_lets_a_part_read_another_part() -> None:
    # The two tables differ only in bob's row, which is in the 'south' part; the
    # attacker queries the 'north' part only, which must not depend on 'south' rows.
    def transcript(bob: float) -> list[str]:
        s = session(staff(50_000.0, salary_of_bob=bob))
        north = s.partition("region", ["north", "south", "east"], 0.5)["north"]
        out = []
        for t in range(0, 100_001, 10_000):
            payload = (
                "CASE WHEN (SELECT count(*) FROM __dpkit_data WHERE region ILIKE 'south' "
                f"AND salary >= {t}) > 0 THEN CAST('x' AS INTEGER) ELSE 1 END = 1"
            )
            out.append(outcome(north, Query().filter(injected(payload)).count()))
        return out

    assert transcript(30_000.0) == transcript(70_000.0)


# --------------------------------------------------------------------------- 2
@pytest.mark.parametrize(
    "query",
    [
        Query().quantile("salary", [0.5], bounds=(0.0, 5e-324)),
        Query().sum("salary", bounds="private", search_range=(4.0, 4.000000000001)),
    ],
    ids=["quantile", "private-bounds"],
)
def test_public_grid_failure_spends_nothing(query: Query) -> None:
    for salary in (40_000.0, 60_000.0):
        s = session(staff(salary))
        seen = outcome(s, query, budget=0.1)
        assert seen.startswith("InvalidParameter")
        assert s.spent == dp.PureDP(0.0), f"{seen} spent {s.spent!r}"


def test_variance_with_far_bounds_is_refused_as_invalid_parameter() -> None:
    s = session(staff(50_000.0))
    with pytest.raises(dp.errors.InvalidParameter):
        s.evaluate(Query().variance("salary", bounds=(-1e160, 1e160)), budget=0.1)


def test_count_distinct_of_a_column_with_a_unit_and_no_groups_runs() -> None:
    s = session(staff(50_000.0), privacy_unit="name")
    s.evaluate(Query().bound(max_rows=1).count_distinct("region"), budget=0.1)


# --------------------------------------------------------------------------- 5
def test_a_derived_column_chain_that_doubles_is_refused_before_anything_runs() -> None:
    # d1 = d0 || d0, d2 = d1 || d1, ...: engines inline derived columns, so the
    # statement doubles at each step (20 steps exhausted memory in DuckDB's planner).
    s = session(staff(52_000.0))
    query = Query().with_column("d0", "name")
    for i in range(20):
        query = query.with_column(f"d{i + 1}", f"d{i} || d{i}")
    with pytest.raises(dp.InvalidParameter, match="too large"):
        s.evaluate(query.filter("length(d20) > 0").count(), budget=TINY)
    assert s.spent == dp.PureDP(0.0)
