"""Fault injection after the charge: the Session fails closed, every time.

Rule 1 of the Session's threat model is that nothing fails after a query has been
charged. The rules that make failures impossible are structural (typed crossings,
materialised sources, total expressions); this file tests the net under them. A test
double raises at each point after the charge -- in the engine's fetch, in the
conversion of keys, in the release, in the ledger's write, past a deadline -- and each
time the Session must: charge the failing scope's whole remaining budget, record the
failure in the ledger, raise :class:`dpkit.SessionLocked` that shows nothing of the
cause, and refuse every later query on that ledger (also after reopening it). On
DuckDB and on Spark.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.analytics._ledger import Ledger

SECRET = "secret-row-value-7731"


def staff() -> pd.DataFrame:
    rows = [
        ("alice", "north", 52_000.0),
        ("bob", "south", 41_000.0),
        ("carol", "north", 58_000.0),
        ("dan", "east", 36_500.0),
    ]
    return pd.DataFrame(rows, columns=["name", "region", "salary"])


def grouped() -> Query:
    return (
        Query()
        .group_by("region", keys=KeySet.from_values(region=["north", "south", "east"]))
        .count()
        .sum("salary", bounds=(0.0, 100_000.0))
    )


@pytest.fixture(params=["duckdb", "spark"])
def open_session(request: pytest.FixtureRequest) -> Callable[..., dp.Session]:
    """A function making a fresh Session over ``staff()`` on the engine of the param."""

    def make(ledger: Any = None) -> dp.Session:
        budget = dp.PureDP(1.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if request.param == "duckdb":
                return dp.Session.from_pandas(staff(), budget=budget, ledger=ledger, rng=1)
            spark = request.getfixturevalue("spark")
            frame = spark.createDataFrame(staff())
            return dp.Session.from_spark(frame, budget=budget, ledger=ledger, rng=1, source="staff")

    return make


class Injected(Exception):
    """What a buggy driver might raise, with a row value in its text."""


def raising(error: BaseException) -> Callable[..., Any]:
    def fail(*args: object, **kwargs: object) -> Any:
        raise error

    return fail


def assert_locked(session: dp.Session, caught: pytest.ExceptionInfo[dp.SessionLocked]) -> None:
    """The failure charged everything, says nothing of the cause, and locks the ledger."""
    assert SECRET not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__context__ is None
    assert caught.value.scope == "root"
    assert session.remaining == dp.PureDP(0.0)
    assert session.spent == session.budget
    for later in (Query().count(), grouped()):
        with pytest.raises(dp.SessionLocked) as again:
            session.evaluate(later, budget=dp.PureDP(1e-9))
        assert again.value.failed_at == caught.value.failed_at
    with pytest.raises(dp.SessionLocked):
        session.partition("region", ["north"], budgets=0.5)


ERRORS = [
    Injected(SECRET),
    OverflowError(SECRET),
    TypeError(f"unhashable type: 'list' {SECRET}"),
    MemoryError(SECRET),
    dp.EngineError(SECRET),
    dp.InvalidParameter(SECRET),  # even dpkit's own errors: after the charge, a bug
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_a_failing_fetch_locks(open_session: Callable[..., dp.Session], error: Exception) -> None:
    session = open_session()
    session._engine.aggregate = raising(error)  # type: ignore[method-assign]
    with pytest.raises(dp.SessionLocked) as caught:
        session.evaluate(grouped(), budget=dp.PureDP(1e-9))
    assert_locked(session, caught)


def test_a_failing_histogram_locks(open_session: Callable[..., dp.Session]) -> None:
    session = open_session()
    session._engine.histograms = raising(Injected(SECRET))  # type: ignore[method-assign]
    query = Query().median("salary", bounds=(0.0, 100_000.0))
    with pytest.raises(dp.SessionLocked) as caught:
        session.evaluate(query, budget=dp.PureDP(1e-9))
    assert_locked(session, caught)


def test_a_failing_key_conversion_locks(
    open_session: Callable[..., dp.Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The conversion of the engine's canonical keys to Python values (total by
    # construction, dpkit.analytics._canonical) raises anyway.
    import dpkit.analytics.engines._sql as sql

    session = open_session()
    monkeypatch.setattr(sql, "from_engine", raising(ValueError(SECRET)))
    with pytest.raises(dp.SessionLocked) as caught:
        session.evaluate(grouped(), budget=dp.PureDP(1e-9))
    assert_locked(session, caught)


def test_a_failing_release_locks(
    open_session: Callable[..., dp.Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    import dpkit.analytics.session as session_module

    session = open_session()
    monkeypatch.setattr(session_module, "release", raising(ZeroDivisionError(SECRET)))
    with pytest.raises(dp.SessionLocked) as caught:
        session.evaluate(grouped(), budget=dp.PureDP(1e-9))
    assert_locked(session, caught)


def test_a_failing_ledger_write_after_the_commit_locks(
    open_session: Callable[..., dp.Session], tmp_path: Path
) -> None:
    # The spend is committed, then the ledger call raises (a driver error after the
    # commit): the Session cannot tell whether the charge holds, so it fails closed.
    session = open_session(ledger=tmp_path / "ledger.db")
    ledger = session._ledger
    commit = ledger.spend

    def commit_then_fail(*args: Any, **kwargs: Any) -> Any:
        commit(*args, **kwargs)
        raise sqlite3.OperationalError(f"disk I/O error {SECRET}")

    ledger.spend = commit_then_fail  # type: ignore[method-assign]
    with pytest.raises(dp.SessionLocked) as caught:
        session.evaluate(grouped(), budget=dp.PureDP(1e-9))
    assert_locked(session, caught)


def test_a_failure_right_after_the_commit_locks(open_session: Callable[..., dp.Session]) -> None:
    session = open_session()
    session._after_commit = raising(RuntimeError(SECRET))
    with pytest.raises(dp.SessionLocked) as caught:
        session.evaluate(grouped(), budget=dp.PureDP(1e-9))
    assert_locked(session, caught)


def test_a_budget_refusal_is_not_a_failure(open_session: Callable[..., dp.Session]) -> None:
    # BudgetExceeded happens before the charge: nothing spent, nothing locked.
    session = open_session()
    with pytest.raises(dp.BudgetExceeded):
        session.evaluate(grouped(), budget=dp.PureDP(2.0))
    assert session.spent == dp.PureDP(0.0)
    session.evaluate(grouped(), budget=dp.PureDP(0.5))


def test_the_lock_is_persistent(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = dp.Session.from_pandas(staff(), budget=dp.PureDP(1.0), ledger=path, rng=1)
        session.evaluate(Query().count(), budget=dp.PureDP(0.25))
        session._engine.aggregate = raising(Injected(SECRET))  # type: ignore[method-assign]
        with pytest.raises(dp.SessionLocked) as caught:
            session.evaluate(Query().count(), budget=dp.PureDP(0.25))
        reopened = dp.Session.from_pandas(staff(), budget=dp.PureDP(1.0), ledger=path, rng=2)
    assert reopened.remaining == dp.PureDP(0.0)
    with pytest.raises(dp.SessionLocked) as again:
        reopened.evaluate(Query().count(), budget=dp.PureDP(1e-9))
    assert again.value.failed_at == pytest.approx(caught.value.failed_at)
    # The history says what happened: the query's charge, then the rest of the budget.
    amounts = [record.amount[0] for record in reopened.history]
    assert sum(amounts) == 1 and len(amounts) == 3


def test_a_failing_part_charges_its_scope_and_locks_every_scope() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = dp.Session.from_pandas(staff(), budget=dp.PureDP(1.0), rng=1)
    parts = session.partition("region", ["north", "south"], budgets=0.5)
    parts["north"]._engine = _Failing(parts["north"]._engine)
    with pytest.raises(dp.SessionLocked) as caught:
        parts["north"].evaluate(Query().count(), budget=0.1)
    assert caught.value.scope != "root"
    assert parts["north"].remaining == dp.PureDP(0.0)
    # The parent paid the partition once (0.5); the failure exhausted the part only.
    assert session.spent == dp.PureDP(0.5)
    for other in (session, parts["south"]):
        with pytest.raises(dp.SessionLocked):
            other.evaluate(Query().count(), budget=0.1)


class _Failing:
    """An engine whose reads fail (schema and binding still work)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def aggregate(self, *args: Any) -> Any:
        raise Injected(SECRET)

    def histograms(self, *args: Any) -> Any:
        raise Injected(SECRET)


# --------------------------------------------------------------------------- deadline
def test_a_deadline_makes_the_answer_time_public() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = dp.Session.from_pandas(staff(), budget=dp.PureDP(1.0), rng=1)
    started = time.monotonic()
    result = session.evaluate(grouped(), budget=dp.PureDP(0.1), deadline=0.5)
    # Not a timing assertion on speed: the call must not return *before* its deadline.
    assert time.monotonic() - started >= 0.5
    assert len(result.dataframe) == 3


def test_a_missed_deadline_interrupts_and_locks() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = dp.Session.from_pandas(staff(), budget=dp.PureDP(1.0), rng=1)
    inner = session._engine.aggregate

    def slow(*args: Any) -> Any:
        time.sleep(1.0)
        return inner(*args)

    session._engine.aggregate = slow  # type: ignore[method-assign]
    with pytest.raises(dp.SessionLocked) as caught:
        session.evaluate(grouped(), budget=dp.PureDP(1e-9), deadline=0.2)
    assert_locked(session, caught)


def test_a_running_duckdb_statement_is_interrupted_at_the_deadline() -> None:
    # A real long statement (a cross join of 10^4 x 10^4 rows through a derived
    # column), not a test double: the interrupt reaches DuckDB's cursor.
    frame = pd.DataFrame({"x": range(20_000)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = dp.Session.from_pandas(frame, budget=dp.PureDP(1.0), rng=1)
    engine = session._engine
    started = time.monotonic()
    done: list[float] = []

    def heavy(*args: Any) -> Any:
        cursor = engine._cursor()
        try:
            cursor.execute("SELECT count(*) FROM range(100000000) a, range(1000) b").fetchall()
        finally:
            with engine._lock:
                engine._running.discard(cursor)
            done.append(time.monotonic() - started)
            cursor.close()
        return {}

    engine.aggregate = heavy  # type: ignore[method-assign]
    with pytest.raises(dp.SessionLocked):
        session.evaluate(Query().count(), budget=dp.PureDP(1e-9), deadline=0.5)
    deadline_wait = time.monotonic() + 30.0
    while not done and time.monotonic() < deadline_wait:
        time.sleep(0.05)
    assert done, "the interrupted statement never stopped"


@pytest.mark.parametrize("deadline", [0, -1.0, float("nan"), float("inf"), "1", True, 1e9])
def test_a_bad_deadline_spends_nothing(deadline: object) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = dp.Session.from_pandas(staff(), budget=dp.PureDP(1.0), rng=1)
    with pytest.raises(dp.InvalidParameter):
        session.evaluate(Query().count(), budget=0.5, deadline=deadline)  # type: ignore[arg-type]
    assert session.spent == dp.PureDP(0.0)


def test_a_ledger_without_failures_is_not_locked(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.db")
    assert ledger.failure() is None


# --------------------------------------------------------------------------- the ledger file
def _spent_ledger(path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = dp.Session.from_pandas(staff(), budget=dp.PureDP(1.0), ledger=path, rng=1)
    for _ in range(3):
        session.evaluate(Query().count(), budget=dp.PureDP(0.25))
    session._ledger.close()


def _reopen(path: Path) -> dp.Session:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dp.Session.from_pandas(staff(), budget=dp.PureDP(1.0), ledger=path, rng=2)


@pytest.mark.parametrize(
    "edit",
    [
        # The attacker deletes the last spend and fixes the scope's total.
        "DELETE FROM spends WHERE id = (SELECT max(id) FROM spends)",
        # ... or lowers one spend's amount in place.
        "UPDATE spends SET amount = '[\"1/1000\"]' WHERE id = 2",
        # ... or deletes a spend in the middle of the history.
        "DELETE FROM spends WHERE id = 2",
        # ... or lowers the total alone.
        "UPDATE scopes SET spent = '[\"1/4\"]' WHERE scope = 'root'",
        # ... or erases the failure lock's spend but keeps the chain of the others.
        "UPDATE spends SET description = '{}' WHERE id = 1",
    ],
)
def test_an_edited_spend_history_is_refused(tmp_path: Path, edit: str) -> None:
    path = tmp_path / "ledger.db"
    _spent_ledger(path)
    with sqlite3.connect(path) as raw:
        raw.execute(edit)
        if edit.startswith("DELETE"):
            raw.execute("UPDATE scopes SET spent = '[\"1/2\"]' WHERE scope = 'root'")
    with pytest.raises(dp.DataError, match="has been edited"):
        _reopen(path)


def test_an_untouched_ledger_reopens_with_its_spends(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _spent_ledger(path)
    assert _reopen(path).spent == dp.PureDP(0.75)


def test_a_running_spark_job_is_cancelled_at_the_deadline(spark: Any) -> None:
    # A real long Spark job (a cross join), cancelled through the engine's job group.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = dp.Session.from_spark(
            spark.createDataFrame(staff()), budget=dp.PureDP(1.0), rng=1, source="staff"
        )
    engine = session._engine
    started = time.monotonic()
    done: list[float] = []

    def heavy(*args: Any) -> Any:
        with contextlib.suppress(dp.EngineError):  # cancelled
            engine._execute("SELECT count(*) FROM range(1000000) a, range(1000000) b")
        done.append(time.monotonic() - started)
        return {}

    engine.aggregate = heavy  # type: ignore[method-assign]
    with pytest.raises(dp.SessionLocked):
        session.evaluate(Query().count(), budget=dp.PureDP(1e-9), deadline=2.0)
    wait_until = time.monotonic() + 60.0
    while not done and time.monotonic() < wait_until:
        time.sleep(0.1)
    assert done, "the cancelled Spark job never stopped"
