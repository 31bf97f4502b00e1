"""Attacks on the keyed hash through column types (found by the review of hash v2).

The keyed hash maps each part of a (person, group[, value]) to integer limbs by the
part's type. Two types made it fail on a row, after the charge (the Session then
locked with the query's budget spent): a far-future TIMESTAMP_S or TIMESTAMP_MS, whose
microseconds since the epoch overflow a BIGINT, and a nested type whose name begins
with a scalar's (``INTEGER[]``), which was cast to that scalar. Each attack below must
now either run or be refused before anything is spent.
"""

from __future__ import annotations

import duckdb
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query

pytestmark = pytest.mark.filterwarnings("ignore::dpkit.errors.InsecureRandomWarning")


def session_over(column_type: str, values: list[str]) -> dp.Session:
    connection = duckdb.connect()
    connection.execute(f"CREATE TABLE t (person {column_type}, g INTEGER, v {column_type})")
    for i, value in enumerate(values):
        connection.execute(f"INSERT INTO t VALUES ({value}, {i % 2 + 1}, {value})")
    return dp.Session.from_duckdb(
        connection, "t", privacy_unit="person", budget=dp.PureDP(1.0), rng=0
    )


def runs_or_refuses_before_the_charge(session: dp.Session, query: Query) -> None:
    try:
        session.evaluate(query, budget=dp.PureDP(0.5))
    except dp.DPError as error:
        assert not isinstance(error, dp.SessionLocked), error
        assert session.spent == dp.PureDP(0.0)
        return
    assert session.spent == dp.PureDP(0.5)
    session.evaluate(Query().bound(max_rows=1).count(), budget=dp.PureDP(0.1))  # not locked


FAR_FUTURE = {
    "TIMESTAMP_S": ["TIMESTAMP_S '2020-01-01'", "TIMESTAMP_S '294247-01-10 04:00:54'"],
    "TIMESTAMP_MS": ["TIMESTAMP_MS '2020-01-01'", "TIMESTAMP_MS '294247-01-10 04:00:54'"],
}


@pytest.mark.parametrize("column_type", list(FAR_FUTURE))
def test_a_far_future_timestamp_person_does_not_fail_after_the_charge(column_type: str) -> None:
    # The attacker's row: a person id in a year whose microseconds overflow a BIGINT,
    # hashed when the bounding chooses that person's groups.
    session = session_over(column_type, FAR_FUTURE[column_type] * 2)
    query = (
        Query()
        .group_by("g", keys=KeySet.from_values(g=[1, 2, 3]))
        .bound(max_groups=1, max_rows=1)
        .count()
    )
    runs_or_refuses_before_the_charge(session, query)


@pytest.mark.parametrize("column_type", list(FAR_FUTURE))
def test_a_far_future_timestamp_value_does_not_fail_a_distinct_count(column_type: str) -> None:
    session = session_over(column_type, FAR_FUTURE[column_type] * 2)
    runs_or_refuses_before_the_charge(session, Query().bound(max_rows=1).count_distinct("v"))


@pytest.mark.parametrize(
    ("column_type", "value"),
    [
        ("INTEGER[]", "[1, 2]"),
        ("DOUBLE[]", "[1.5]"),
        ("BIGINT[2]", "[1, 2]::BIGINT[2]"),
        ("TIMESTAMP[]", "[TIMESTAMP '2020-01-01']"),
        ("DATE[]", "[DATE '2020-01-01']"),
    ],
)
def test_a_nested_type_named_like_a_scalar_is_not_cast_to_it(column_type: str, value: str) -> None:
    # A list column whose type name begins with INTEGER, DOUBLE...: hashed as that
    # scalar, the cast bound and failed on the first row, after the charge.
    connection = duckdb.connect()
    connection.execute(f"CREATE TABLE t (person BIGINT, v {column_type})")
    connection.execute(f"INSERT INTO t VALUES (1, {value}), (2, {value}), (2, {value})")
    session = dp.Session.from_duckdb(
        connection, "t", privacy_unit="person", budget=dp.PureDP(1.0), rng=0
    )
    runs_or_refuses_before_the_charge(session, Query().bound(max_rows=1).count_distinct("v"))
