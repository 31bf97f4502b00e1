"""An adversarial review of the front door after issue 27 (canonical keys, key types at
compile time, fail closed, deadlines, materialised sources, per-row cost caps), written
with the public API only, as an analyst who knows the schema and no row.

Each test asserts what docs/analytics.md ("Threat model") promises, so each fails on the
commit it was written against:

- rule 1, *nothing fails after the charge*: a UHUGEINT key column compared with public
  keys below 2^63 makes DuckDB cast the column to BIGINT, which raises on a row above
  2^63 -- after the charge, only when such a row exists (a derived key lets a secret
  predicate put it there);
- rule 1 again, on public parameters alone: budgets that the compiler accepts but the
  release cannot handle (a huge epsilon: the Laplace tail's log(0); a tiny one on an
  order statistic: the binary search's noise cap) fail after the charge and lock the
  Session, burning its whole budget, where a refusal before the charge was due;
- rule 2, *the engine's equality is the only equality*: ``pandas.Timestamp`` keys that
  differ below the microsecond are different Python keys but bind as the same engine
  key, so two parts of one partition read the same persons, each with the whole part
  budget, while the parent pays once;
- keys: a DECIMAL key with more than 28 significant digits at the column's scale is
  refused as "not a decimal number" (Python's default decimal context), although it is
  a value of the column.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import duckdb
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.errors import InvalidParameter, SessionLocked

_SECRET = "name = 'alice' AND salary >= 45000"


def _neighbours() -> list[pd.DataFrame]:
    """Two tables differing in alice's salary (one row)."""
    return [
        pd.DataFrame({"name": ["alice", "bob", "carol"], "salary": [salary, 30_000, 20_000]})
        for salary in (40_000, 50_000)
    ]


def _transcript(session: dp.Session, query: Query, budget: dp.PureDP) -> tuple[str, Any]:
    """What the attacker sees: success or the class of the error, and what remains."""
    try:
        session.evaluate(query, budget=budget)
        outcome = "ok"
    except Exception as err:  # the class is the oracle
        outcome = type(err).__name__
    return outcome, session.remaining


# ---------------------------------------------------------------- rule 1: UHUGEINT keys


@pytest.mark.parametrize("keys", [[5], [5, 7]])
def test_a_uhugeint_key_above_2_63_is_no_oracle(keys: list[int]) -> None:
    """A derived UHUGEINT key that is 2^100 only on alice's row, if her salary is at
    least 45000, grouped against the public keys ``[5]``: DuckDB compares the column
    with the INTEGER parameters as BIGINT and the cast raises on 2^100. Found: the
    query is charged, then fails closed (SessionLocked) on one neighbour only."""
    query = (
        Query()
        .with_column(
            "k",
            f"CASE WHEN {_SECRET} THEN CAST('1267650600228229401496703205376' AS UHUGEINT) "
            "ELSE CAST(5 AS UHUGEINT) END",
        )
        .group_by("k", keys=KeySet.from_values(k=keys))
        .count()
    )
    transcripts = []
    for frame in _neighbours():
        session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=1)
        transcripts.append(_transcript(session, query, dp.PureDP(1e-9)))
    assert transcripts[0] == transcripts[1], transcripts
    assert transcripts[0][0] != "SessionLocked"


def test_a_two_column_uhugeint_keyset_is_no_oracle() -> None:
    """The same through the VALUES join used for keys of two columns."""
    query = (
        Query()
        .with_column(
            "k",
            f"CASE WHEN {_SECRET} THEN CAST('1267650600228229401496703205376' AS UHUGEINT) "
            "ELSE CAST(5 AS UHUGEINT) END",
        )
        .group_by("k", "name", keys=KeySet.from_tuples(["k", "name"], [(5, "bob"), (7, "carol")]))
        .count()
    )
    transcripts = []
    for frame in _neighbours():
        session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=1)
        transcripts.append(_transcript(session, query, dp.PureDP(1e-9)))
    assert transcripts[0] == transcripts[1], transcripts
    assert transcripts[0][0] != "SessionLocked"


@pytest.mark.parametrize("big", [False, True])
def test_a_uhugeint_partition_key_does_not_fail_after_the_charge(big: bool) -> None:
    """Partition keys are compared as ``column = ?`` in every part's query: a part of a
    UHUGEINT column keyed 5 fails closed iff some row holds a value above 2^63."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (u INTEGER, k UHUGEINT)")
    con.execute("INSERT INTO t VALUES (1, 5), (2, 6)")
    if big:
        con.execute("INSERT INTO t VALUES (3, CAST('1267650600228229401496703205376' AS UHUGEINT))")
    session = dp.Session.from_duckdb(con, "t", budget=dp.PureDP(1.0), rng=1)
    # Either the partition is refused before the charge (on the schema: UHUGEINT has no
    # canonical key form), or its part's query runs.
    try:
        parts = session.partition("k", [5], dp.PureDP(0.5))
    except dp.InvalidParameter as refused:
        assert "UHUGEINT" in str(refused) and session.spent == dp.PureDP(0.0)
        return
    parts[5].evaluate(Query().count(), budget=dp.PureDP(0.1))  # must not raise


# ------------------------------------------------ rule 1 on public parameters alone


@pytest.mark.parametrize(
    ("query", "epsilon"),
    [
        (Query().bound(max_groups=1, max_rows=2).count_distinct(), 1e8),
        (Query().bound(max_groups=1, max_rows=2).mean("x", bounds=(0.0, 1e6)), 1e8),
        (Query().bound(max_groups=1, max_rows=2).max("x", bounds=(0.0, 1e10)), 1e-12),
    ],
    ids=["count-huge-eps", "mean-huge-eps", "max-tiny-eps"],
)
def test_a_budget_the_release_cannot_handle_is_refused_before_the_charge(
    query: Query, epsilon: float
) -> None:
    """Whether a query fails may depend on public parameters, but then it must be refused
    before the charge. Found: the budget is charged, the release raises (log(0) in the
    discrete Laplace tail at scale ~1e-8; the binary search's noise above 2^40), and the
    Session locks with its whole budget spent -- on every table alike, so no leak, but
    an honest typo costs the ledger."""
    frame = pd.DataFrame({"u": [1, 1, 2], "x": [1.0, 2.0, 3.0]})
    session = dp.Session.from_pandas(frame, privacy_unit="u", budget=dp.PureDP(1e9), rng=1)
    try:
        session.evaluate(query, budget=dp.PureDP(epsilon))
    except InvalidParameter:
        assert session.remaining == dp.PureDP(1e9)  # refused before the charge
    except SessionLocked:
        pytest.fail("a failure on public parameters after the charge locked the Session")


# ------------------------------------------------ rule 2: sub-microsecond timestamps


def test_timestamps_equal_to_the_microsecond_do_not_open_two_parts() -> None:
    """``pandas.Timestamp`` is a ``datetime`` with nanoseconds: the two keys below are
    different Python values (so not refused as aliases) but both bind as the same
    microsecond, so both parts hold every person. Found: the parent pays PureDP(1) once
    and each part answers a full-budget count over the same 200 persons."""
    frame = pd.DataFrame({"user": range(200), "t": [dt.datetime(2021, 1, 1)] * 200})
    session = dp.Session.from_pandas(frame, privacy_unit="user", budget=dp.PureDP(1.0), rng=3)
    k1 = pd.Timestamp("2021-01-01 00:00:00.000000001")
    k2 = pd.Timestamp("2021-01-01 00:00:00.000000002")
    with pytest.raises(InvalidParameter):
        session.partition("t", [k1, k2], dp.PureDP(1.0))
    assert session.remaining == dp.PureDP(1.0)


def test_a_sub_microsecond_timestamp_key_is_not_silently_a_different_group() -> None:
    """A KeySet of two ``pandas.Timestamp`` keys one nanosecond apart: both name the
    engine's one group (the same microsecond); they must be refused as aliases, or be
    refused as not being TIMESTAMP values, before anything is charged."""
    frame = pd.DataFrame({"t": [dt.datetime(2021, 1, 1)] * 5})
    session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=3)
    keys = [pd.Timestamp("2021-01-01 00:00:00.000000001"), pd.Timestamp("2021-01-01")]
    with pytest.raises(InvalidParameter):
        session.explain(
            Query().group_by("t", keys=KeySet.from_values(t=keys)).count(),
            budget=dp.PureDP(0.5),
        )


# ------------------------------------------------ keys: DECIMAL beyond 28 digits


def test_a_decimal_key_with_many_digits_at_the_scale_is_accepted() -> None:
    """0.5 is a value of DECIMAL(38,37); quantizing it to 37 places in Python's default
    context (28 digits) raises InvalidOperation, reported as 'not a decimal number'."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (k DECIMAL(38,37))")
    con.execute("INSERT INTO t VALUES (0.5), (0.25)")
    session = dp.Session.from_duckdb(con, "t", budget=dp.PureDP(1.0), rng=3)
    query = Query().group_by("k", keys=KeySet.from_values(k=[Decimal("0.5")])).count()
    session.explain(query, budget=dp.PureDP(0.5))  # must not raise
