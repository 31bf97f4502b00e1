"""Attacks on private synthetic data through the Session (``Session.synthesize``).

The analyst of the threat model (DESIGN.md, "Threat model of the Session") knows the
schema and chooses every public parameter of a run -- columns, public domains
(categories, bins and their bounds), ``max_rows``, ``rows``, the budget, the method --
and wants row values. The run reads the rows through one statement, the bounded, coded
table of :mod:`dpkit.analytics.engines._cells`, and releases only noisy marginals
(:mod:`dpkit.synth._marginals`) and what is sampled from them. The attacks try to
(1) make a run refuse or fail after its charge on some tables only (a one-bit oracle on
a row) or leak data in a refusal, (2) make Python and the engine disagree on which value
a row has (case, spaces, Unicode forms, signed zero, NaN, collations, time zones,
strings for integers, dates for timestamps), (3) blow up the per-row cost with huge
public domains, (4) make one person count more than ``max_rows`` rows, (5) get partial
data out of a run that failed after its charge, (6) read the data in the output's
shape.

Each test is the attack as the analyst would run it and passes when dpkit defends. The
attacks at the end of the file worked when it was written (extreme integers, wide or
tiny bounds, the last date, the dtype of instants); they were fixed and stay as tests.

The coded counts are read with :func:`dpkit.analytics.engines._cells.cell_counts` on the
Session's own engine with a fixed salt (the salt that one run draws), so contribution
bounding is deterministic and checked exactly, with no noise.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from fractions import Fraction
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dpkit as dp
import dpkit.analytics._synthesis as synthesis
from dpkit.analytics import Query
from dpkit.analytics.engines._cells import CellSpec, cell_counts
from dpkit.errors import BudgetExceeded, DataError, InvalidParameter, SessionLocked
from dpkit.synth import Bins, Categories
from dpkit.synth._columns import MAX_CODES, plan_columns

SALT = 7  # one run's contribution bounding (Session.synthesize draws it)
TOTAL = dp.ZCDP(1.0)
#: Every run: MST (fast), half of the Session's budget.
RUN: dict[str, Any] = {"budget": 0.5, "method": "mst"}
REFUSALS = (InvalidParameter, DataError, BudgetExceeded)

UTC = dt.UTC
#: A value held by one person only (never a public parameter of these attacks).
SECRET_AGE = 987_654_321


# ---------------------------------------------------------------------------- tables
def people(persons: int = 24, seed: int = 3) -> pa.Table:
    """Two rows per person (truncation matters), every column type a run supports."""
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(persons), 2)
    n = ids.size
    return pa.table(
        {
            "uid": pa.array(ids, pa.int64()),
            "age": pa.array(rng.integers(17, 100, n), pa.int64()),
            "sex": pa.array(rng.choice(["F", "M"], n)),
            "score": pa.array(rng.uniform(0.0, 1.0, n)),
            "day": pa.array(
                [dt.date(2024, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 90, n)],
                pa.date32(),
            ),
            "at": pa.array(
                [
                    dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(hours=int(h))
                    for h in rng.integers(0, 48, n)
                ],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )


def with_person(table: pa.Table, **values: list[Any]) -> pa.Table:
    """``table`` plus one person (uid 999) whose rows hold ``values`` (others: NULL)."""
    n = len(next(iter(values.values())))
    columns = {}
    for field in table.schema:
        given = [999] * n if field.name == "uid" else values.get(field.name, [None] * n)
        columns[field.name] = pa.concat_arrays(
            [table[field.name].combine_chunks(), pa.array(given, field.type)]
        )
    return pa.table(columns)


def outsider(table: pa.Table) -> pa.Table:
    """The neighbour with one person whose rows are everything a domain can miss."""
    return with_person(
        table,
        age=[-SECRET_AGE, SECRET_AGE, None],
        sex=["zzz", "f", None],
        score=[float("nan"), -0.0, float("inf")],
        day=[dt.date(1, 1, 1), dt.date(9999, 12, 31), None],
        at=[None, dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(9999, 1, 1, tzinfo=UTC)],
    )


def session_of(data: Any, *, unit: str | None = "uid", budget: Any = TOTAL) -> dp.Session:
    if isinstance(data, pa.Table):
        return dp.Session.from_arrow(data, privacy_unit=unit, budget=budget, rng=0)
    return dp.Session.from_pandas(data, privacy_unit=unit, budget=budget, rng=0)


DOMAINS: dict[str, Any] = {
    "age": (17, 99),
    "sex": ["F", "M"],
    "score": (0.0, 1.0),
    "day": (dt.date(2024, 1, 1), dt.date(2024, 3, 31)),
    "at": (dt.datetime(2024, 1, 1, tzinfo=UTC), dt.datetime(2024, 1, 3, tzinfo=UTC)),
}


def coded(
    session: dp.Session,
    domains: dict[str, Any],
    columns: list[str] | None = None,
    max_rows: int = 1,
    salt: int = SALT,
) -> dict[tuple[int, ...], int]:
    """The bounded, coded table a run would measure: {codes: count} (no noise)."""
    view, _ = session._view_for(Query(), salt)
    names = columns if columns is not None else list(domains)
    codings = plan_columns(view._schema, names, domains, view._unit, "test")
    spec = CellSpec(codings, view._unit, max_rows, salt, view._partitions)
    codes, counts = cell_counts(view._engine, spec)
    return {tuple(int(c) for c in row): int(n) for row, n in zip(codes, counts, strict=True)}


def l1(a: dict[tuple[int, ...], int], b: dict[tuple[int, ...], int]) -> int:
    return sum(abs(a.get(k, 0) - b.get(k, 0)) for k in set(a) | set(b))


def outcome(session: dp.Session, **kwargs: Any) -> str:
    """What the analyst sees of one run: ok, a refusal (class and text, and then nothing
    may have been spent), or SessionLocked (its text carries the time)."""
    before = (session.spent, len(session.history))
    try:
        session.synthesize(**{**RUN, **kwargs})
    except SessionLocked:
        return "SessionLocked"
    except REFUSALS as err:
        assert (session.spent, len(session.history)) == before, "a refusal after the charge"
        return f"{type(err).__name__}: {err}"
    return "ok"


# ---------------------------------------------------------------- refusals before the charge
# Every refusal reads the schema and public parameters only: the same class and text on
# neighbouring tables (here: one person added whose rows are outside every domain,
# NULL, NaN, infinite or at the ends of the calendar), nothing spent, no ledger record,
# and the Session still answers afterwards.

REFUSED: dict[str, dict[str, Any]] = {
    "unknown method": {"method": "gan", "domains": DOMAINS},
    "the privacy unit as a column": {"columns": ["uid", "sex"], "domains": {"sex": ["F"]}},
    "unknown column": {"columns": ["nope"]},
    "domain of a column not synthesized": {
        "columns": ["sex"],
        "domains": {"sex": ["F"], "age": (0, 1)},
    },
    "empty categories": {"columns": ["sex"], "domains": {"sex": []}},
    "duplicate categories": {"columns": ["sex"], "domains": {"sex": ["F", "F"]}},
    "signed zeros alias": {"columns": ["score"], "domains": {"score": [0.0, -0.0]}},
    "integer and float alias": {"columns": ["age"], "domains": {"age": [1, 1.0]}},
    "a string for an integer": {"columns": ["age"], "domains": {"age": ["1", 2]}},
    "a bool for an integer": {"columns": ["age"], "domains": {"age": [True, 2]}},
    "a fraction for an integer": {"columns": ["age"], "domains": {"age": [1.5]}},
    "NaN category": {"columns": ["score"], "domains": {"score": [float("nan")]}},
    "a number for a string": {"columns": ["sex"], "domains": {"sex": ["F", 1]}},
    "a datetime for a date": {"columns": ["day"], "domains": {"day": [dt.datetime(2024, 1, 1)]}},
    "a date for a timestamp": {"columns": ["at"], "domains": {"at": [dt.date(2024, 1, 1)]}},
    "a naive instant": {"columns": ["at"], "domains": {"at": [dt.datetime(2024, 1, 1)]}},
    "datetime bounds for a date": {
        "columns": ["day"],
        "domains": {"day": (dt.datetime(2024, 1, 1), dt.datetime(2024, 2, 1))},
    },
    "NaN bound": {"columns": ["score"], "domains": {"score": (float("nan"), 1.0)}},
    "infinite bound": {"columns": ["score"], "domains": {"score": (0.0, float("inf"))}},
    "empty bounds": {"columns": ["age"], "domains": {"age": (5, 5)}},
    "reversed bounds": {"columns": ["age"], "domains": {"age": (99, 17)}},
    "bins of a string": {"columns": ["sex"], "domains": {"sex": Bins(0, 1)}},
    "zero bins": {"columns": ["score"], "domains": {"score": Bins(0.0, 1.0, bins=0)}},
    "bool bins": {"columns": ["score"], "domains": {"score": Bins(0.0, 1.0, bins=True)}},
    # Rule 3: the per-row cost and a marginal's size are bounded by public constants.
    "too many categories": {
        "columns": ["sex"],
        "domains": {"sex": [f"c{i}" for i in range(MAX_CODES)]},
    },
    "too many bins": {"columns": ["score"], "domains": {"score": Bins(0.0, 1.0, bins=10**9)}},
    "a pair too large": {
        "columns": ["sex", "score"],
        "domains": {"sex": [f"c{i}" for i in range(5000)], "score": Bins(0.0, 1.0, bins=5000)},
    },
    "max_rows zero": {"domains": DOMAINS, "max_rows": 0},
    "max_rows bool": {"domains": DOMAINS, "max_rows": True},
    "max_rows huge": {"domains": DOMAINS, "max_rows": 2**40},
    "rows zero": {"domains": DOMAINS, "rows": 0},
    "rows float": {"domains": DOMAINS, "rows": 10.0},
    "iterations zero": {"domains": DOMAINS, "iterations": 0},
    "model size zero": {"domains": DOMAINS, "method": "aim", "max_model_mb": 0},
    "workload with mst": {"domains": DOMAINS, "workload": [("age", "sex")]},
    "workload of an unknown column": {
        "domains": DOMAINS,
        "method": "aim",
        "workload": [("age", "nope")],
    },
    "workload repeating a column": {
        "domains": DOMAINS,
        "method": "aim",
        "workload": [("age", "age")],
    },
    "budget over the Session's": {"domains": DOMAINS, "budget": dp.ZCDP(2.0)},
    "a PureDP budget": {"domains": DOMAINS, "budget": dp.PureDP(1.0)},
    "a budget too small for the samplers": {"domains": DOMAINS, "budget": dp.ZCDP(1e-300)},
    "a negative budget": {"domains": DOMAINS, "budget": -0.5},
    "a filter as source": {"domains": DOMAINS, "source": Query().filter("age > 30")},
    "a derived column as source": {
        "domains": DOMAINS,
        "source": Query().with_column("old", "age > 60"),
    },
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refusals_come_before_the_charge_and_ignore_the_rows(name: str) -> None:
    """An analyst probing for a data-dependent refusal: each public parameter that is
    refused must be refused the same way whoever is in the table, before anything is
    charged (a refusal after the charge, or one only on some tables, is a one-bit
    oracle on a row at a price the analyst sets)."""
    seen = []
    for table in (people(), outsider(people())):
        session = session_of(table)
        seen.append(outcome(session, **REFUSED[name]))
        assert session.spent == dp.ZCDP(0.0) and not session.history
        assert session.evaluate(Query().bound(max_rows=2).count(), budget=0.01) is not None
    assert seen[0] == seen[1] and not seen[0].startswith(("ok", "SessionLocked")), seen
    # A refusal never quotes the private data (the outsider's values).
    assert "zzz" not in seen[1] and str(SECRET_AGE) not in seen[1]


def test_a_puredp_session_is_refused_before_the_charge() -> None:
    """MST and AIM are Gaussian mechanisms accounted in zCDP: a PureDP Session cannot
    pay for them, and must say so before charging (whatever the budget given)."""
    session = session_of(people(), budget=dp.PureDP(1.0))
    for budget in (0.5, dp.ZCDP(0.1), dp.PureDP(0.5), "remaining"):
        with pytest.raises(InvalidParameter):
            session.synthesize(budget=budget, method="mst", domains=DOMAINS)
    assert session.spent == dp.PureDP(0.0) and not session.history


def test_max_rows_without_a_privacy_unit_is_refused() -> None:
    """Without a privacy unit each row is a person: a max_rows above 1 would scale the
    noise for a bound that nothing enforces (or enforce one nobody asked for)."""
    frame = people().to_pandas()
    session = session_of(frame, unit=None)
    with pytest.raises(InvalidParameter, match="max_rows"):
        session.synthesize(**RUN, domains=DOMAINS, columns=list(DOMAINS), max_rows=2)
    assert session.spent == dp.ZCDP(0.0) and not session.history
    # max_rows=1 without a unit runs, and a row is a person.
    result = session.synthesize(**RUN, domains=DOMAINS, columns=list(DOMAINS), rows=5)
    assert len(result.data) == 5


def test_a_filtered_source_over_several_tables_is_refused() -> None:
    """In a Session over several tables the analyst names the source; a filter (a
    predicate chosen by the analyst, e.g. on a victim's value) is not part of what
    synthesis measures and must be refused, not silently dropped or applied."""
    visits = people().to_pandas()[["uid", "age", "sex"]]
    session = dp.Session.from_tables({"visits": visits}, privacy_unit="uid", budget=TOTAL, rng=0)
    domains = {"age": (17, 99), "sex": ["F", "M"]}
    for source in (
        Query.from_table("visits").filter("age = 42"),
        Query.from_table("visits").with_column("x", "age * 2"),
        Query.from_table("visits").bound(max_rows=1).count(),
    ):
        with pytest.raises(InvalidParameter):
            session.synthesize(**RUN, domains=domains, source=source)
    assert session.spent == dp.ZCDP(0.0) and not session.history
    result = session.synthesize(**RUN, domains=domains, source=Query.from_table("visits"), rows=4)
    assert list(result.data.columns) == ["age", "sex"]


# ---------------------------------------------------------------- rule 4: contribution bounds
@pytest.mark.parametrize("max_rows", [1, 2, 3, 5])
def test_a_person_with_many_rows_in_one_cell_counts_at_most_max_rows(max_rows: int) -> None:
    """The victim's rows are copied 50 times into one cell (and 50 into another): the
    coded table must move by at most max_rows in L1 norm -- the sensitivity every
    measurement's noise is calibrated to."""
    base = people()
    heavy = with_person(
        base,
        age=[30] * 50 + [80] * 50,
        sex=["F"] * 50 + ["M"] * 50,
        score=[0.5] * 100,
        day=[dt.date(2024, 1, 2)] * 100,
        at=[dt.datetime(2024, 1, 1, 3, tzinfo=UTC)] * 100,
    )
    before = coded(session_of(base), DOMAINS, max_rows=max_rows)
    after = coded(session_of(heavy), DOMAINS, max_rows=max_rows)
    assert l1(before, after) == max_rows
    assert sum(after.values()) - sum(before.values()) == max_rows


@pytest.mark.parametrize("max_rows", [1, 2])
def test_removing_any_person_moves_the_coded_table_by_at_most_max_rows(max_rows: int) -> None:
    """Every person of a table with uneven contributions (1 to 7 rows, several cells),
    removed in turn: the bounding of the others must not change (it is a rule on each
    person's own rows and the salt), so the table moves by at most max_rows."""
    rng = np.random.default_rng(11)
    ids = np.repeat(np.arange(15), rng.integers(1, 8, 15))
    frame = pd.DataFrame(
        {
            "uid": ids,
            "sex": rng.choice(["F", "M", "X"], ids.size),
            "age": rng.integers(17, 40, ids.size),
        }
    )
    domains = {"sex": ["F", "M"], "age": Bins(17, 40, bins=4)}
    full = coded(session_of(frame), domains, max_rows=max_rows)
    assert sum(full.values()) == sum(min(max_rows, int(c)) for c in np.bincount(ids))
    for person in range(15):
        without = coded(session_of(frame[frame.uid != person]), domains, max_rows=max_rows)
        assert l1(full, without) <= max_rows, person


def test_rows_with_a_null_privacy_unit_are_dropped() -> None:
    """Rows with no person cannot be protected by a per-person bound: an analyst who
    plants (or knows of) many NULL-unit rows must not see them counted at all."""
    frame = people().to_pandas()
    orphans = frame.head(10).assign(uid=None)
    with_orphans = pd.concat([frame.astype({"uid": "Int64"}), orphans.astype({"uid": "Int64"})])
    domains = {"sex": ["F", "M"], "age": (17, 99)}
    assert coded(session_of(with_orphans), domains, max_rows=3) == coded(
        session_of(frame), domains, max_rows=3
    )


def test_the_unit_is_the_same_equality_as_for_queries() -> None:
    """A unit column with a case-insensitive collation: 'Bob' and 'bob' are one unit to
    the engine. Synthesis and the Session's queries must agree on who is a person (else
    the bound of one front end is not the other's): the total kept rows equal the
    bounded count of ``evaluate``'s plan with the same max_rows."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (uid VARCHAR COLLATE NOCASE, s VARCHAR)")
    con.execute(
        "INSERT INTO t VALUES ('Bob','a'),('Bob','a'),('bob','b'),('bob','b'),('BOB ','b'),"
        "('x','a'),(NULL,'a')"
    )
    session = dp.Session.from_duckdb(con, "t", privacy_unit="uid", budget=TOTAL, rng=0)
    query = Query().bound(max_rows=2).count()
    view, stripped = session._view_for(query, SALT)
    compiled = view._compile(stripped, 0.5, salt=SALT)
    counted = int(dict(view._engine.aggregate(compiled.plan))[()][0])
    kept = sum(coded(session, {"s": Categories(["a", "b"])}, max_rows=2).values())
    assert kept == counted


# ---------------------------------------------------------------- rule 2: the engine's equality
def unit_per_row(values: dict[str, list[Any]]) -> pd.DataFrame:
    n = len(next(iter(values.values())))
    return pd.DataFrame({"uid": range(n), **values})


def test_strings_are_compared_byte_by_byte() -> None:
    """'a', 'a ', 'A', NFC and NFD 'é', '' and NULL: a category matches its exact bytes
    only (a collation, trimming or Unicode folding in Python or the engine would put a
    row in a cell the other side does not agree on)."""
    nfc, nfd = unicodedata.normalize("NFC", "é"), unicodedata.normalize("NFD", "é")
    frame = unit_per_row({"t": ["a", "a ", "A", nfc, nfd, "", None, "a"]})
    counts = coded(session_of(frame), {"t": ["a", nfc, ""]})
    assert counts == {(0,): 2, (1,): 1, (2,): 1, (3,): 4}  # code 3: NULL and unlisted


def test_a_connection_collation_does_not_decide_equality() -> None:
    """The data owner's DuckDB connection sets a case-insensitive default collation and
    the column its own: 'A' must still not be the category 'a' (nor 'a ')."""
    con = duckdb.connect()
    con.execute("SET default_collation = 'nocase'")
    con.execute("CREATE TABLE t (uid INTEGER, t VARCHAR COLLATE NOCASE, e ENUM('a', 'A', 'b'))")
    con.execute(
        "INSERT INTO t VALUES (1, 'a', 'a'), (2, 'A', 'A'), (3, 'a ', 'b'), (4, NULL, NULL)"
    )
    session = dp.Session.from_duckdb(con, "t", privacy_unit="uid", budget=TOTAL, rng=0)
    assert coded(session, {"t": ["a", "b"]}) == {(0,): 1, (2,): 3}
    assert coded(session, {"e": ["a", "zzz"]}) == {(0,): 1, (2,): 3}


def test_signed_zero_nan_and_infinities_of_doubles() -> None:
    """-0.0 and 0.0 are one value; NaN is missing (the NULL code, never a bin: NaN
    compares above every number in DuckDB, which would put it in the last bin);
    infinities are clamped into the end bins like any value outside the bounds."""
    inf = float("inf")
    frame = unit_per_row({"x": [-0.0, 0.0, float("nan"), None, 1.0, -inf, inf]})
    session = session_of(frame)
    assert coded(session, {"x": Categories([0.0, 1.0])}) == {(0,): 2, (1,): 1, (2,): 4}
    assert coded(session, {"x": Bins(-1.0, 1.0, bins=2)}) == {(0,): 1, (1,): 4, (2,): 2}
    assert coded(session, {"x": Bins(-1.0, 1.0, bins=2, nulls=False)}) == {(0,): 1, (1,): 4}


def test_integer_keys_are_integers_whatever_their_spelling() -> None:
    """1 and 1.0 name one INTEGER value (accepted once, as 1); '1' and True are not
    integers (refused before the charge, REFUSED above). Rows of 1 land in the code of 1."""
    frame = unit_per_row({"k": [1, 1, 2, 3, None]})
    counts = coded(session_of(frame), {"k": Categories([1.0, 2])})
    assert counts == {(0,): 2, (1,): 1, (2,): 2}


@pytest.mark.parametrize("zone", ["UTC", "Pacific/Kiritimati", "America/Adak"])
def test_time_zones_of_the_connection_do_not_move_instants(zone: str) -> None:
    """The connection's time zone is the data owner's, not the analyst's: a TIMESTAMP
    WITH TIME ZONE is binned on its instant, a DATE on its day, in every zone."""
    con = duckdb.connect()
    con.execute(f"SET TimeZone = '{zone}'")
    con.execute("CREATE TABLE t (uid INTEGER, ts TIMESTAMPTZ, day DATE)")
    con.execute(
        "INSERT INTO t VALUES (1, '2024-01-01 23:30:00+00', '2024-01-01'), "
        "(2, '2024-01-02 00:30:00+00', '2024-01-02'), (3, 'infinity', 'infinity')"
    )
    session = dp.Session.from_duckdb(con, "t", privacy_unit="uid", budget=TOTAL, rng=0)
    bounds = Bins(dt.datetime(2024, 1, 1, tzinfo=UTC), dt.datetime(2024, 1, 3, tzinfo=UTC), bins=2)
    assert coded(session, {"ts": bounds}) == {(0,): 1, (1,): 1, (2,): 1}
    days = Bins(dt.date(2024, 1, 1), dt.date(2024, 1, 2), bins=2)
    assert coded(session, {"day": days}) == {(0,): 1, (1,): 1, (2,): 1}


def test_nulls_false_drops_the_rows_outside_the_domain() -> None:
    """With nulls=False there is no NULL code: unlisted and missing values are dropped
    (a rule on each row alone), never put into a listed category."""
    frame = unit_per_row({"t": ["a", "b", "zzz", None, "a"]})
    counts = coded(session_of(frame), {"t": Categories(["a", "b"], nulls=False)})
    assert counts == {(0,): 2, (1,): 1}


# ---------------------------------------------------------------- rule 1: fail closed
def _raise_secret(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("row of alice: salary 52000")


FAILURES = {
    "reading the coded table": ("dpkit.analytics._synthesis.cell_counts", _raise_secret),
    "fitting the model": ("dpkit.synth._mst.run_mst", _raise_secret),
    "measuring a marginal": ("dpkit.synth._marginals.PrivateMarginals.measure", _raise_secret),
    "an engine's out-of-memory": (
        "dpkit.analytics._synthesis.cell_counts",
        lambda *a, **k: (_ for _ in ()).throw(MemoryError("alice")),
    ),
}


@pytest.mark.parametrize("name", list(FAILURES))
def test_a_failure_after_the_charge_locks_the_session(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever fails after the charge -- the read, a measurement, the model -- the run
    must not return partial data or quote the cause: the Session charges its scope's
    whole budget, locks, and refuses everything afterwards."""
    target, replacement = FAILURES[name]
    monkeypatch.setattr(target, replacement)
    session = session_of(people())
    with pytest.raises(SessionLocked) as info:
        session.synthesize(**RUN, domains=DOMAINS)
    err = info.value
    assert "alice" not in str(err) and err.__cause__ is None and err.__context__ is None
    assert session.spent == TOTAL
    with pytest.raises(SessionLocked):
        session.synthesize(**RUN, domains=DOMAINS)
    with pytest.raises(SessionLocked):
        session.evaluate(Query().bound(max_rows=2).count(), budget=0.01)


def test_the_rows_are_read_after_the_charge_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one statement that reads rows runs after the charge, and once: a run must not
    read rows to decide whether (or how much) to charge."""
    session = session_of(people())
    seen: list[Any] = []
    original = synthesis.cell_counts

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(session.spent)
        return original(*args, **kwargs)

    monkeypatch.setattr(synthesis, "cell_counts", spy)
    session.synthesize(**RUN, domains=DOMAINS, rows=3)
    assert seen == [dp.ZCDP(0.5)]


def test_a_failure_while_binding_spends_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The statement is bound (typed, planned) before the charge; if binding fails the
    run is refused with nothing spent and the Session stays open."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise DataError("the statement does not bind")

    monkeypatch.setattr(synthesis, "bind_cell_counts", refuse)
    session = session_of(people())
    with pytest.raises(DataError):
        session.synthesize(**RUN, domains=DOMAINS)
    assert session.spent == dp.ZCDP(0.0) and not session.history


# ---------------------------------------------------------------- the output and the ledger
def test_the_output_shape_is_public() -> None:
    """With rows= given, the synthetic table has exactly that many rows, the requested
    columns in order, and the same dtypes on neighbouring tables (here: one person
    added whose values are outside every domain)."""
    columns = ["sex", "age", "score", "day", "at"]
    shapes = []
    for table in (people(), outsider(people())):
        result = session_of(table).synthesize(**RUN, domains=DOMAINS, columns=columns, rows=37)
        assert len(result.data) == 37 and list(result.data.columns) == columns
        shapes.append(dict(result.data.dtypes.astype(str)))
        assert result.guarantee == dp.ZCDP(0.5)
    assert shapes[0] == shapes[1]


def test_the_output_holds_public_values_only() -> None:
    """A planted secret -- a category spelling no domain lists, a number outside the
    bounds -- never reaches the synthetic table: categorical values come from the
    public list, numbers from inside the public bounds."""
    secret = with_person(people(), sex=["Alice-SSN-123"] * 3, age=[10**9] * 3, score=[123.456] * 3)
    result = session_of(secret).synthesize(
        **RUN,
        columns=["sex", "age", "score"],
        domains={"sex": ["F", "M"], "age": (17, 99), "score": (0.0, 1.0)},
        max_rows=3,
        rows=200,
    )
    data = result.data
    assert set(data["sex"].dropna()) <= {"F", "M"}
    assert data["age"].dropna().between(17, 99).all()
    assert data["score"].dropna().between(0.0, 1.0).all()


def test_the_ledger_records_one_spend_per_run() -> None:
    """Each run is charged once, at its budget, with a description of public parameters
    only; the steps inside the run are accounted inside that charge."""
    session = session_of(outsider(people()))
    session.synthesize(budget=dp.ZCDP(0.25), method="mst", domains=DOMAINS)
    session.synthesize(
        budget=dp.ZCDP(0.125), method="mst", domains={"sex": ["F", "M"]}, columns=["sex"]
    )
    records = session.history
    assert [r.amount for r in records] == [(Fraction(1, 4),), (Fraction(1, 8),)]
    assert session.spent == dp.ZCDP(0.375)
    for record in records:
        assert '"synthesize": "mst"' in record.description
        assert "zzz" not in record.description and str(SECRET_AGE) not in record.description


def test_the_run_spends_within_its_budget() -> None:
    """The run's steps (measurements and selections) add up to at most the charge, and
    the released guarantee is the charge: no step is paid for outside the ledger."""
    session = session_of(people())
    result = session.synthesize(budget=dp.ZCDP(0.2), method="mst", domains=DOMAINS)
    assert result.guarantee == dp.ZCDP(0.2)
    assert len(result.measurements) >= len(DOMAINS)
    assert session.spent == dp.ZCDP(0.2) and len(session.history) == 1


# ------------------------------------------------ defects found by this file, now fixed
EXTREMES = {
    "BIGINT near 2^63, bins below": (pa.int64(), 2**63 - 1, (-10, 10)),
    "BIGINT at -2^63, bins above": (pa.int64(), -(2**63), (5, 10)),
    "UBIGINT above 2^63": (pa.uint64(), 2**64 - 1, (0, 10)),
}


@pytest.mark.parametrize("name", list(EXTREMES))
def test_extreme_integers_cannot_fail_after_the_charge(name: str) -> None:
    """The victim's integer is at the end of its type: binning it must not raise (a
    one-bit oracle on 'does anyone have a value near 2^63'); it is clamped into the
    end bin like any value outside the public bounds."""
    kind, extreme, bounds = EXTREMES[name]
    seen = []
    for victim in (False, True):
        table = pa.table(
            {
                "uid": pa.array([1, 2, 3], pa.int64()),
                "x": pa.array([1, 2, extreme if victim else 3], kind),
            }
        )
        seen.append(outcome(session_of(table), domains={"x": bounds}))
    assert seen == ["ok", "ok"], seen


@pytest.mark.parametrize("bounds", [(-(2**70), 2**70), (-1e300, 1e300)], ids=["2^70", "1e300"])
def test_wide_public_integer_bounds_are_refused_or_run(bounds: tuple[Any, Any]) -> None:
    """Public bounds the analyst chooses: either refused before the charge or run; a
    failure after the charge charges the whole scope for a public mistake."""
    table = pa.table({"uid": pa.array([1, 2, 3], pa.int64()), "x": pa.array([1, 2, 3], pa.int64())})
    assert outcome(session_of(table), domains={"x": bounds}) != "SessionLocked"


def test_date_bins_up_to_the_last_date_run() -> None:
    """The widest public date domain Python has (years 1 to 9999) must run (or be refused
    before the charge)."""
    frame = pd.DataFrame({"uid": [1, 2, 3], "day": [dt.date(2000, 1, 1)] * 3})
    session = session_of(pa.Table.from_pandas(frame, preserve_index=False))
    assert outcome(session, domains={"day": (dt.date(1, 1, 1), dt.date(9999, 12, 31))}) == "ok"


@pytest.mark.parametrize("zone", [None, UTC])
def test_timestamp_bins_up_to_the_last_microsecond_run(zone: Any) -> None:
    """The widest public timestamp domain Python has: its upper bound, 253402300799999999
    microseconds, rounds up past year 9999 as a float64. Showing the bins' labels and
    drawing values at that end failed after the charge (OverflowError), locking the
    Session for a public choice; it must run, and draw only representable datetimes."""
    first = dt.datetime(1, 1, 1, tzinfo=zone)
    last = dt.datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=zone)
    frame = pd.DataFrame({"uid": [1, 2, 3], "at": [last] * 3})
    session = session_of(pa.Table.from_pandas(frame, preserve_index=False))
    result = session.synthesize(
        **{**RUN, "rows": 50}, domains={"at": Bins(first, last, bins=2, nulls=False)}
    )
    drawn = result.data["at"].dropna()
    assert len(drawn) == 50 and all(value.year <= 9999 for value in drawn.dt.to_pydatetime())


def test_tiny_real_bins_cannot_read_another_column() -> None:
    """The schema has a text column named ``inf``; the analyst gives bounds whose span
    is so small that the scale overflows. The run must not read ``inf`` (or fail on the
    tables where one of its values is not a number)."""
    seen = []
    for victim in (False, True):
        frame = pd.DataFrame(
            {"uid": [1, 2, 3], "x": [1.0, 2.0, 3.0], "inf": ["1", "2", "oops" if victim else "3"]}
        )
        seen.append(outcome(session_of(frame), columns=["x"], domains={"x": (0.0, 5e-324)}))
    assert seen[0] == seen[1] and "SessionLocked" not in seen, seen


def test_the_dtype_of_an_instant_column_is_the_schemas() -> None:
    """A column of instants is always tz-aware in the output, whatever was sampled."""
    when = dt.datetime(2024, 1, 1, tzinfo=UTC)
    dtypes = []
    for value in (when, None):
        frame = pd.DataFrame(
            {"uid": range(40), "at": pd.Series([value] * 40, dtype="datetime64[us, UTC]")}
        )
        result = session_of(frame).synthesize(
            budget=1.0, method="mst", domains={"at": Categories([when])}, rows=5
        )
        dtypes.append(result.data["at"].dtype)
    assert all(isinstance(d, pd.DatetimeTZDtype) for d in dtypes), dtypes
