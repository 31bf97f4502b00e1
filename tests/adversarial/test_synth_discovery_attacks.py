"""Attacks on synthesis with domains found privately, and on ``dpkit synth``.

A column with no public domain (or ``domains={"c": "private"}``) gets one inside the
run's single charge: the Session opens a *reserve* (``Session._reserve``, a one-part
partition of the ledger charged once), the reserve runs ordinary Session queries --
private key selection for categories, the occupied power-of-two bins of ``dpkit
describe`` for numbers (:mod:`dpkit.analytics._synthesis_domains`) -- and MST or AIM
then measure on what is left of it. Everything after the reserve's charge runs inside
``run_after_charge`` (fails closed).

The analyst of the threat model (DESIGN.md, "Threat model of the Session") knows the
schema and every public parameter and wants row values. These attacks try to (1) make
a run fail after the reserve's charge on some tables only (awkward values: strings that
look like numbers, NUL bytes, huge strings, NaN, infinities, -0.0, all-NULL columns,
identifiers, empty tables, nothing above the threshold, integers beyond 2^53), (2) make
the accounting wrong (more than one parent spend, a reserve spending beyond its budget,
a reserve reused without a charge, threads overspending), (3) make one person's rows
release a category, (4) get categories that are not the engine's canonical keys, and
(5) through ``dpkit synth``: options that crash or are read after the charge, output
paths that fail after it, the non-private comparison without its mark, engine messages.

``tests/adversarial/test_synth_attacks.py`` covers synthesis with public domains; its
attacks are not repeated here. Each test is the attack as the analyst would run it and
passes when dpkit defends. Eight attacks worked when the file was written (integers
beyond 2^53 locking the Session, a tiny selection delta, a reserve reopened by a Session
seeded alike, JSON bins of Infinity or the wrong type, a huge integer bound, a dangling
symlink, outputs overwriting each other or the data); all were fixed and stay as tests.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import threading
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from typer.testing import CliRunner

import dpkit as dp
import dpkit.analytics.session as session_module
from dpkit.analytics import Query
from dpkit.analytics._synthesis_domains import MAX_DISCOVERED
from dpkit.analytics.engines._cells import CellSpec, cell_counts
from dpkit.cli.main import app
from dpkit.errors import BudgetExceeded, DataError, InvalidParameter, SessionLocked

#: An ApproxDP Session large enough that key selection's threshold is small (about 13
#: distinct persons at budget=1.0), so awkward values are released, not only refused.
TOTAL = dp.ApproxDP(20.0, 1e-6)
SELECTION_DELTA = 1e-7
#: One run: MST (fast), few fitting iterations, a few sampled rows.
RUN: dict[str, Any] = {"budget": 1.0, "method": "mst", "iterations": 20, "rows": 5}
REFUSALS = (InvalidParameter, DataError, BudgetExceeded)
PERSONS = 120
SECRET = "SECRET-of-person-999"

runner = CliRunner()


# ---------------------------------------------------------------------------- helpers
def approx_session(
    data: Any,
    *,
    unit: str | None = "uid",
    selection_delta: float = SELECTION_DELTA,
    ledger: Path | None = None,
    rng: int | None = 0,
) -> dp.Session:
    """An ApproxDP Session with a key-selection delta (needed to find categories)."""
    kwargs: dict[str, Any] = {
        "privacy_unit": unit,
        "budget": TOTAL,
        "selection_delta": selection_delta,
        "ledger": ledger,
        "rng": rng,
    }
    if isinstance(data, pa.Table):
        return dp.Session.from_arrow(data, **kwargs)
    return dp.Session.from_pandas(data, **kwargs)


def outcome(session: dp.Session, **kwargs: Any) -> str:
    """What the analyst sees of one run: ok (one parent spend), a refusal (then nothing
    was spent), or SessionLocked."""
    before = (session.spent, len(session.history))
    try:
        session.synthesize(**{**RUN, **kwargs})
    except SessionLocked:
        return "SessionLocked"
    except REFUSALS as err:
        assert (session.spent, len(session.history)) == before, "a refusal after the charge"
        return f"{type(err).__name__}: {err}"
    assert len(session.history) == before[1] + 1, "a run is one spend of its Session"
    return "ok"


def column_table(kind: pa.DataType, values: list[Any], victim: list[Any] | None = None) -> pa.Table:
    """PERSONS persons with one row each, column ``v`` cycling through ``values``; with
    ``victim``, person 999 added with one row per value of ``victim``."""
    cells = [values[i % len(values)] for i in range(PERSONS)]
    ids = list(range(PERSONS))
    if victim is not None:
        cells += victim
        ids += [999] * len(victim)
    return pa.table({"uid": pa.array(ids, pa.int64()), "v": pa.array(cells, kind)})


def history_scopes(session: dp.Session) -> dict[str, list[tuple[Fraction, ...]]]:
    """Every scope of the Session's ledger with its spends' amounts."""
    out: dict[str, list[tuple[Fraction, ...]]] = {}
    for record in session._ledger.history():
        out.setdefault(record.scope, []).append(tuple(record.amount))
    return out


# ------------------------------------------- discovery: refusals before the reserve's charge
def test_categories_without_a_selection_delta_are_refused_before_the_charge() -> None:
    """A ZCDP Session (no key-selection delta), or an ApproxDP Session whose selection
    delta is zero, cannot find categories privately: the run -- and its explanation --
    must be refused before anything is charged, whoever is in the table."""
    frame = pd.DataFrame(
        {
            "uid": range(40),
            "c": ["a", "b"] * 20,
            "day": [dt.date(2024, 1, 1)] * 40,
            "moment": [dt.datetime(2024, 1, 1, 12)] * 40,
        }
    )
    zcdp = dp.Session.from_pandas(frame, privacy_unit="uid", budget=dp.ZCDP(1.0), rng=0)
    no_delta = approx_session(frame, selection_delta=0.0)
    for session in (zcdp, no_delta):
        for domains in (None, {"c": "private"}):
            with pytest.raises(InvalidParameter, match="key selection"):
                session.synthesize(**RUN, columns=["c"], domains=domains)
            with pytest.raises(InvalidParameter, match="key selection"):
                session.explain_synthesis(budget=1.0, method="mst", columns=["c"])
        assert not session.history
    assert zcdp.spent == dp.ZCDP(0.0) and no_delta.spent == dp.ZCDP(0.0)
    # Numbers, dates and timestamps need no selection delta: a ZCDP Session finds their
    # range (a date's on its days, a timestamp's on its seconds), charged once.
    numbers = frame.assign(x=1.5)
    for column in ("x", "day", "moment"):
        zcdp = dp.Session.from_pandas(numbers, privacy_unit="uid", budget=dp.ZCDP(1.0), rng=0)
        assert outcome(zcdp, columns=[column]) == "ok"


# ------------------------------------------- discovery: awkward values after the charge
AWKWARD: dict[str, tuple[pa.DataType, list[Any], list[Any]]] = {
    "strings that look like numbers": (
        pa.string(),
        ["1", "2.0", "-0", "NaN", "inf", "1e5"],
        ["0x10", "+1", "-0.0"],
    ),
    "NUL bytes": (pa.string(), ["a\x00b", "\x00", "a"], ["\x00\x00", SECRET + "\x00"]),
    "huge strings": (pa.string(), ["x" * 100_000, "y"], ["z" * 300_000]),
    "empty and blank strings": (pa.string(), ["", " ", "\t"], ["", "\n"]),
    "Unicode forms": (pa.string(), ["é", "e\u0301", "É"], ["\ufb01", "\u00c5", "A\u030a"]),
    "an identifier (every value unique)": (
        pa.string(),
        [f"id-{i}" for i in range(PERSONS)],
        [SECRET],
    ),
    "all NULL but the victim's": (pa.string(), [None], [SECRET]),
    "NaN, infinities and -0.0 without bounds": (
        pa.float64(),
        [float("nan"), float("inf"), float("-inf"), -0.0, 0.0],
        [float("nan"), -0.0],
    ),
    "all NaN": (pa.float64(), [float("nan")], [1.5]),
    "huge and tiny doubles": (pa.float64(), [1e300, -1e300, 5e-324], [float("inf")]),
    "all NULL integers but the victim's": (pa.int64(), [None], [7]),
    "integers at the ends of a small type": (pa.int8(), [-128, 127, 0], [-128]),
}


@pytest.mark.parametrize("name", list(AWKWARD))
def test_awkward_values_cannot_fail_after_the_reserve_is_charged(name: str) -> None:
    """The analyst leaves the domain to be found privately on a column whose values are
    awkward for a key or a range, and adds a neighbour (person 999) with more of them:
    on both tables the run must complete (a failure after the reserve's charge is a
    one-bit oracle at a price the analyst sets, and locks the Session), be charged
    once, and release only the engine's keys."""
    kind, values, victim = AWKWARD[name]
    seen = []
    for table in (column_table(kind, values), column_table(kind, values, victim)):
        session = approx_session(table)
        seen.append(outcome(session, domains={"v": "private"}))
    assert seen == ["ok", "ok"], seen


def test_an_enum_column_with_nothing_above_the_threshold_runs() -> None:
    """An ENUM column (pandas categorical) with too few persons: no key passes the
    threshold, and the placeholder standing for 'no category' ('' -- not a member of the
    enum) must not fail after the charge."""
    frame = pd.DataFrame({"uid": range(5), "v": pd.Categorical(["a", "b", "a", "b", "a"])})
    session = approx_session(frame)
    assert session._schema["v"].startswith("ENUM(")
    assert outcome(session) == "ok"


@pytest.mark.parametrize("kind", [pa.string(), pa.float64(), pa.int64()], ids=str)
def test_an_empty_table_runs(kind: pa.DataType) -> None:
    """No rows at all (a typed, empty table): the run finds nothing and must still
    complete, charged once."""
    table = pa.table({"uid": pa.array([], pa.int64()), "v": pa.array([], kind)})
    assert outcome(approx_session(table)) == "ok"


# ------------------------------------------- defect: integers beyond 2^53
BEYOND_2_53: dict[str, tuple[pa.DataType, Any]] = {
    "BIGINT nanosecond timestamps": (pa.int64(), 1_700_000_000_000_000_000),
    "BIGINT at 2^53": (pa.int64(), 2**53),
    "BIGINT near -2^63": (pa.int64(), -(2**63) + 1000),
    "UBIGINT near 2^64": (pa.uint64(), 2**64 - 1000),
    "DECIMAL(38,0) near 1e30": (pa.decimal128(38, 0), Decimal(10**30)),
}


@pytest.mark.parametrize("name", list(BEYOND_2_53))
def test_integers_beyond_2_53_cannot_lock_the_session(name: str) -> None:
    """A column of large integers (nanosecond timestamps stored as BIGINT, 64-bit
    identifiers, DECIMAL(38,0) amounts) left to be found privately: the range found is
    post-processing of a release, so it must be coded (clamped, say), never refused
    after the charge."""
    kind, base = BEYOND_2_53[name]
    values = [base + i for i in range(PERSONS)] if base > 0 else [base - i for i in range(3)]
    session = approx_session(column_table(kind, values))
    assert outcome(session) == "ok"


# ------------------------------------------- defect: a tiny public selection delta
@pytest.mark.parametrize("selection_delta", [5e-324, 1e-320])
def test_a_tiny_selection_delta_is_refused_before_the_charge(selection_delta: float) -> None:
    """The analyst picks a denormal key-selection delta for the Session (a public
    parameter). Whatever the table, the run must either work or be refused before its
    charge: a refusal after it charges the whole Session for a public mistake."""
    table = column_table(pa.string(), ["a", "b"])
    session = approx_session(table, selection_delta=selection_delta)
    assert outcome(session) != "SessionLocked"


# ------------------------------------------- key selection: one person, many rows
def test_a_person_with_many_rows_counts_once_per_category(monkeypatch: pytest.MonkeyPatch) -> None:
    """Person 999 has 300 rows of each of three secret values (and max_rows=3). Key
    selection must count distinct persons: each secret's exact count is 1, the noise
    and threshold are calibrated to the person's 3 groups, the threshold is above 1
    (so without noise no secret appears), and no secret is released."""
    seen: list[tuple[Any, ...]] = []
    original = session_module.release

    def spy(compiled: Any, query: Any, exact: Any, threshold: Any, *a: Any, **k: Any) -> Any:
        index = [s.aggregation for s in compiled.specs].index("__selection")
        counts = {key[0]: int(values[index]) for key, values in exact.items()}
        seen.append((threshold, compiled.selection_noise.groups, counts))
        return original(compiled, query, exact, threshold, *a, **k)

    monkeypatch.setattr(session_module, "release", spy)
    rng = np.random.default_rng(0)
    base = pd.DataFrame({"uid": np.arange(200), "v": rng.choice(["a", "b"], 200)})
    secrets = [f"{SECRET}-{i}" for i in range(3)]
    victim = pd.DataFrame({"uid": [999] * 900, "v": np.repeat(secrets, 300)})
    session = approx_session(pd.concat([base, victim], ignore_index=True))
    result = session.synthesize(**RUN, max_rows=3)
    ((threshold, groups, counts),) = seen
    assert groups == 3 and threshold >= 2
    assert all(counts[s] == 1 for s in secrets), counts
    assert counts["a"] + counts["b"] == 200  # distinct persons, not rows
    assert not set(secrets) & set(result.codings[0].values)
    assert not set(secrets) & set(result.data["v"].dropna())


def test_at_most_max_discovered_categories_are_kept() -> None:
    """1,200 categories, each held by 30 persons (all above the threshold at this
    budget): at most MAX_DISCOVERED are kept (a public bound on the marginals' size),
    each one a value of the data."""
    values = [f"k{i:04d}" for i in range(1200)]
    frame = pd.DataFrame({"v": np.repeat(values, 30)})
    session = dp.Session.from_pandas(
        frame, budget=dp.ApproxDP(60.0, 1e-6), selection_delta=SELECTION_DELTA, rng=0
    )
    result = session.synthesize(**RUN)
    kept = result.codings[0].values
    assert len(kept) == MAX_DISCOVERED and set(kept) <= set(values)
    assert len(session.history) == 1


def test_the_discovered_categories_are_the_engines_canonical_keys() -> None:
    """A DuckDB column with a case-insensitive collation holds 'Bob', 'bob' and 'BOB '
    (40 persons each). The categories found must be the engine's canonical keys (compared
    byte by byte, as every Session query compares them), and coding the rows with them
    must put each person in their own value's cell -- not Python's equality, not the
    collation's."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t (uid INTEGER, v VARCHAR COLLATE NOCASE)")
    spellings = ["Bob", "bob", "BOB "]
    con.execute(
        "INSERT INTO t SELECT i, CASE i % 3 WHEN 0 THEN 'Bob' WHEN 1 THEN 'bob' ELSE 'BOB ' "
        "END FROM range(120) AS r(i)"
    )
    session = dp.Session.from_duckdb(
        con, "t", privacy_unit="uid", budget=TOTAL, selection_delta=SELECTION_DELTA, rng=0
    )
    result = session.synthesize(**RUN)
    (coding,) = result.codings
    assert sorted(coding.values) == sorted(spellings)
    view, _ = session._view_for(Query(), 7)
    codes, counts = cell_counts(view._engine, CellSpec((coding,), view._unit, 1, 7))
    assert sorted(int(n) for n in counts) == [40, 40, 40]
    assert int(codes.max()) < len(spellings)  # no row fell into the NULL code


# ------------------------------------------- accounting
def test_one_parent_spend_per_run_and_the_reserve_stays_within_it() -> None:
    """Two runs that find domains: the parent ledger shows exactly one spend per run,
    of the run's rho and its share of the selection delta; remaining and
    remaining_selection_delta drop by exactly that; each run has its own reserve, whose
    spends (the domain queries and the measurements) add up to exactly its rho."""
    table = column_table(pa.string(), ["a", "b", "c"]).append_column(
        "x", pa.array(np.linspace(0.0, 50.0, PERSONS))
    )
    session = approx_session(table)
    rho, delta, _ = session._ledger.budget(session._scope)
    zero = Fraction(0)  # the pure epsilon at face value: synthesis spends none
    for run in (1, 2):
        session.synthesize(**{**RUN, "budget": 0.25})
        assert len(session.history) == run
        assert tuple(session.history[-1].amount) == (rho / 4, delta / 4, zero)
        assert session._ledger.spent(session._scope) == (run * rho / 4, run * delta / 4, zero)
        assert session.remaining_selection_delta == float(delta - run * delta / 4)
    reserves = {s: a for s, a in history_scopes(session).items() if s != session._scope}
    assert len(reserves) == 2, reserves  # one reserve per run, never shared
    for scope, amounts in reserves.items():
        budget = session._ledger.budget(scope)
        assert budget == (rho / 4, delta / 4, zero)
        spent = tuple(sum(a[i] for a in amounts) for i in range(2))
        assert spent[0] == budget[0] and spent[1] <= budget[1], (scope, spent, budget)
        # Key selection, the range and the quantile edges of x, then the measurements.
        assert len(amounts) == 4


def test_threads_cannot_overspend_a_small_budget() -> None:
    """Three threads run synthesize on one Session, each at 0.6 of its budget: at most
    one fits. Exactly one must run; the others are refused with nothing spent."""
    session = approx_session(column_table(pa.string(), ["a", "b"]), rng=None)
    rho, delta, _ = session._ledger.budget(session._scope)
    outcomes: list[str] = []

    def attack() -> None:
        try:
            session.synthesize(**{**RUN, "budget": 0.6})
            outcomes.append("ok")
        except BaseException as err:
            outcomes.append(type(err).__name__)

    threads = [threading.Thread(target=attack) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["BudgetExceeded", "BudgetExceeded", "ok"], outcomes
    (record,) = session.history
    spent = session._ledger.spent(session._scope)
    assert spent == tuple(record.amount) and spent[0] <= rho and spent[1] <= delta
    assert float(record.amount[0] / rho) == pytest.approx(0.6)


def test_a_reserve_cannot_be_reopened_by_a_session_seeded_alike(tmp_path: Path) -> None:
    """Reproducible research: the same seeded script runs twice on one persistent ledger
    (as with ``dpkit synth --seed 1 --ledger l.db``). Each run must be charged as a
    new run (two spends), and neither may lock the ledger."""
    ledger = tmp_path / "l.db"
    table = column_table(pa.string(), ["a", "b"])
    results = []
    for _ in range(2):
        session = approx_session(table, ledger=ledger, rng=0)
        results.append(outcome(session, budget=0.25))
    assert results == ["ok", "ok"], results
    runs = [r for r in session.history if '"synthesize"' in r.description]
    assert len(runs) == 2


# ------------------------------------------- failing closed inside discovery
def _raise_secret(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError(f"row of alice: {SECRET}")


@pytest.mark.parametrize(
    "target",
    ["dpkit.analytics._synthesis.discover", "dpkit.analytics.session.release"],
    ids=["finding the domains", "a domain query's release"],
)
def test_a_failure_while_finding_domains_locks_the_parent(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure after the reserve's charge -- in the discovery step or inside one of the
    reserve's own queries (which fails closed on the reserve first) -- must lock the
    Session and charge the *parent's* whole remaining budget, without the cause."""
    monkeypatch.setattr(target, _raise_secret)
    session = approx_session(column_table(pa.string(), ["a", "b"]))
    budget = session._ledger.budget(session._scope)
    with pytest.raises(SessionLocked) as info:
        session.synthesize(**{**RUN, "budget": 0.25})
    err = info.value
    assert "alice" not in str(err) and err.__cause__ is None and err.__context__ is None
    assert session._ledger.spent(session._scope) == budget  # (rho, delta, pure epsilon)
    assert session.remaining_selection_delta == 0.0
    with pytest.raises(SessionLocked):
        session.synthesize(**RUN)


# ------------------------------------------------------------------ dpkit synth
@pytest.fixture
def csv(tmp_path: Path) -> Path:
    rng = np.random.default_rng(2)
    frame = pd.DataFrame(
        {
            "uid": np.arange(200),
            "region": rng.choice(["n", "s"], 200),
            "minutes": rng.integers(0, 100, 200),
            "ns": rng.integers(1_700_000_000_000_000_000, 1_700_000_100_000_000_000, 200),
        }
    )
    path = tmp_path / "visits.csv"
    frame.to_csv(path, index=False)
    return path


def synth(csv: Path, *extra: str, domains: str | None = None) -> tuple[Any, int]:
    """Run ``dpkit synth`` on ``csv`` with a ledger; (result, spends in the ledger)."""
    ledger = csv.parent / "l.db"
    args = ["synth", str(csv), "--ledger", str(ledger), "--privacy-unit", "uid"]
    if "--rho" not in extra and "--epsilon" not in extra:
        args += ["--rho", "0.5"]
    args += ["--method", "mst", "--columns", "region,minutes", "--categories", "region=n,s"]
    if domains is not None:
        path = csv.parent / "domains.json"
        path.write_text(domains, encoding="utf-8")
        args += ["--domains", str(path)]
    result = runner.invoke(app, [*args, *extra])
    spends = 0
    if ledger.exists():
        with sqlite3.connect(ledger) as conn:
            spends = conn.execute("SELECT count(*) FROM spends").fetchone()[0]
    return result, spends


def refused_cleanly(result: Any, spends: int) -> bool:
    """Exit 2 with a message, no traceback, nothing spent."""
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    return result.exit_code == 2 and not crashed and spends == 0


WEIRD_DOMAINS = {
    "a nested object as a bound": '{"minutes": {"low": {"a": 1}, "high": 99}}',
    "a list as a bound": '{"minutes": {"low": [0], "high": 99}}',
    "a missing high": '{"minutes": {"low": 0}}',
    "NaN bins": '{"minutes": {"low": 0, "high": 99, "bins": NaN}}',
    "strings for integer categories": '{"minutes": ["0", "99"]}',
    "booleans for integer categories": '{"minutes": [true, false]}',
    "nested lists": '{"minutes": [[0, 1], [2]]}',
    "objects in a list": '{"minutes": [{"a": 1}]}',
    "null": '{"minutes": null}',
    "a string": '{"minutes": "private"}',
    "an empty list": '{"minutes": []}',
    "a huge list": json.dumps({"minutes": list(range(100_000))}),
    "an infinite bound": '{"minutes": [-Infinity, 99]}',
    "ISO dates for an integer": '{"minutes": {"low": "2020-01-01", "high": "2021-01-01"}}',
    "a top-level list": "[1, 2]",
    "an unknown column": '{"nope": [1, 2]}',
    "the privacy unit": '{"uid": [0, 10]}',
    "a NUL column name": '{"\\u0000": [1]}',
    "not JSON": "{minutes: [0, 99]",
    "a byte-order mark": '\ufeff{"minutes": [0, 99]}',
}


@pytest.mark.parametrize("name", list(WEIRD_DOMAINS))
def test_weird_domains_json_exits_2_and_spends_nothing(csv: Path, name: str) -> None:
    """The analyst's --domains file holds odd JSON: each is refused with exit 2, a
    message, no traceback, and nothing in the ledger."""
    result, spends = synth(csv, "-o", str(csv.parent / "s.parquet"), domains=WEIRD_DOMAINS[name])
    assert refused_cleanly(result, spends), (result.exit_code, result.output, spends)


BAD_OPTIONS = {
    "epsilon NaN": ["--epsilon", "nan"],
    "negative epsilon": ["--epsilon", "-1"],
    "delta above 1": ["--epsilon", "1", "--delta", "2"],
    "rho and epsilon": ["--rho", "0.5", "--epsilon", "1"],
    "infinite rho": ["--rho", "inf"],
    "max rows zero": ["--max-rows", "0"],
    "rows zero": ["--rows", "0"],
    "empty column names": ["--columns", ",,"],
    "an unknown column": ["--columns", "nope"],
    "the privacy unit as a column": ["--columns", "uid,region"],
    "an empty category list": ["--categories", "region="],
    "bounds that are not numbers": ["--bounds", "minutes=a:b"],
    "infinite bins": ["--bounds", "minutes=0:99:inf"],
    "an overflowing float bound": ["--bounds", "minutes=0:1e400"],
    "an unknown privacy unit": ["--privacy-unit", "nope"],
    "a folder as ledger": ["--ledger", "."],
}


@pytest.mark.parametrize("name", list(BAD_OPTIONS))
def test_bad_options_exit_2_before_anything_is_spent(csv: Path, name: str) -> None:
    """Every bad option is refused with exit 2 before the data is charged."""
    result, spends = synth(csv, "-o", str(csv.parent / "s.parquet"), *BAD_OPTIONS[name])
    assert refused_cleanly(result, spends), (result.exit_code, result.output, spends)


def test_infinite_bins_in_domains_json_exit_2(csv: Path) -> None:
    """``{"minutes": {"low": 0, "high": 99, "bins": Infinity}}`` (Python's JSON reads
    Infinity) must be refused like any other bad domain."""
    result, spends = synth(
        csv, "-o", str(csv.parent / "s.parquet"),
        domains='{"minutes": {"low": 0, "high": 99, "bins": Infinity}}',
    )  # fmt: skip
    assert refused_cleanly(result, spends), (result.exit_code, result.output)


@pytest.mark.parametrize("way", ["API", "--bounds", "--domains"])
def test_a_huge_integer_bound_is_a_refusal_not_a_crash(csv: Path, way: str) -> None:
    """A public bound too large for a float (10**400): refused as InvalidParameter before
    the charge (the API), exit 2 (the command line)."""
    huge = "9" * 400
    if way == "API":
        session = approx_session(pd.read_csv(csv))
        with pytest.raises(InvalidParameter):
            session.synthesize(**RUN, columns=["minutes"], domains={"minutes": (0, int(huge))})
        return
    out = str(csv.parent / "s.parquet")
    if way == "--bounds":
        result, spends = synth(csv, "-o", out, "--bounds", f"minutes=0:{huge}")
    else:
        result, spends = synth(csv, "-o", out, domains='{"minutes": [0, ' + huge + "]}")
    assert refused_cleanly(result, spends), (result.exit_code, result.output)


@pytest.mark.parametrize(
    "spec", ['"bins": true', '"bins": 2.5', '"nulls": "false"'], ids=["bool", "float", "str"]
)
def test_json_values_of_the_wrong_type_are_refused_not_coerced(csv: Path, spec: str) -> None:
    """``--domains`` with a bins or nulls of the wrong JSON type: refused (exit 2), not
    silently read as something else."""
    domains = '{"minutes": {"low": 0, "high": 99, ' + spec + "}}"
    result, spends = synth(csv, "-o", str(csv.parent / "s.parquet"), domains=domains)
    assert refused_cleanly(result, spends), (result.exit_code, result.output)


def test_a_text_column_without_a_domain_needs_epsilon_and_delta(csv: Path) -> None:
    """With --rho (a zCDP Session: no key-selection delta) a text column without
    categories cannot be found: exit 2, nothing spent. With --epsilon (an ApproxDP
    Session, half of its delta set aside for key selection) it is found privately,
    inside the run's one charge."""
    out = str(csv.parent / "s.parquet")
    for i, budget in enumerate((["--rho", "0.5"], ["--epsilon", "1"])):
        ledger = csv.parent / f"l{i}.db"
        args = ["synth", str(csv), "-o", out, "--ledger", str(ledger), *budget]
        result = runner.invoke(app, [*args, "--privacy-unit", "uid", "--columns", "region"])
        with sqlite3.connect(ledger) as conn:
            spends = conn.execute("SELECT count(*) FROM spends WHERE scope = 'root'").fetchone()[0]
        if budget[0] == "--rho":
            assert result.exit_code == 2 and "key selection" in result.output, result.output
            assert spends == 0
        else:
            assert result.exit_code == 0, result.output
            assert spends == 1


def test_a_timestamp_column_in_nanoseconds_does_not_lock_the_ledger(csv: Path) -> None:
    """``dpkit synth visits.csv --columns ns`` with no bounds for ``ns`` (nanoseconds
    since 1970, as many exports write instants): its range is found privately and must
    be usable, not lock the ledger."""
    args = ["synth", str(csv), "-o", str(csv.parent / "s.parquet"), "--rho", "0.5"]
    args += ["--ledger", str(csv.parent / "l.db"), "--privacy-unit", "uid", "--columns", "ns"]
    result = runner.invoke(app, [*args, "--method", "mst"])
    assert result.exit_code == 0 and "locked" not in result.output, result.output


def test_compare_with_real_needs_report_and_is_marked(csv: Path) -> None:
    """--compare-with-real is not private: without --report it is refused before
    anything is read or spent (also in a dry run); with it the report's section and the
    terminal both say NOT PRIVATE."""
    out = str(csv.parent / "s.parquet")
    for extra in ([], ["--dry-run"]):
        result, spends = synth(csv, "-o", out, "--compare-with-real", *extra)
        assert refused_cleanly(result, spends) and "--report" in result.output
    report = csv.parent / "r.html"
    result, spends = synth(
        csv, "-o", out, "--bounds", "minutes=0:99", "--report", str(report), "--compare-with-real"
    )
    assert result.exit_code == 0 and spends == 1, result.output
    assert "NOT PRIVATE" in result.output and "NOT PRIVATE" in report.read_text()


OUTPUTS = {
    "a folder as output": ["-o", "{dir}/sub.parquet/"],
    "a missing folder": ["-o", "{dir}/missing/s.parquet"],
    "a wrong suffix": ["-o", "{dir}/s.json"],
    "a folder as report": ["-o", "{dir}/s.parquet", "--report", "{dir}"],
    "a report in a missing folder": ["-o", "{dir}/s.parquet", "--report", "{dir}/no/r.html"],
    "a JSON summary in a missing folder": ["-o", "{dir}/s.parquet", "--json", "{dir}/no/s.json"],
}


@pytest.mark.parametrize("name", list(OUTPUTS))
def test_output_paths_are_checked_before_the_charge(csv: Path, name: str) -> None:
    """Output paths that cannot be written are refused before the run is charged (a
    failure after it would spend the budget for nothing)."""
    (csv.parent / "sub.parquet").mkdir()
    extra = [a.format(dir=csv.parent) for a in OUTPUTS[name]]
    result, spends = synth(csv, "--bounds", "minutes=0:99", *extra)
    assert refused_cleanly(result, spends), (result.exit_code, result.output, spends)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_folder_is_refused_before_the_charge(csv: Path) -> None:
    """A read-only output folder: refused before the charge."""
    folder = csv.parent / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        result, spends = synth(csv, "--bounds", "minutes=0:99", "-o", str(folder / "s.parquet"))
    finally:
        folder.chmod(0o755)
    assert refused_cleanly(result, spends), (result.exit_code, result.output)


@pytest.mark.parametrize("which", ["--output", "--report"])
def test_a_dangling_symlink_is_refused_before_the_charge(csv: Path, which: str) -> None:
    """The output (or report) path is a symbolic link into a folder that does not exist:
    it cannot be written, so it must be refused before the run is charged."""
    link = csv.parent / ("s.parquet" if which == "--output" else "r.html")
    link.symlink_to(csv.parent / "missing" / link.name)
    extra = ["-o", str(link)] if which == "--output" else ["-o", str(csv.parent / "t.parquet")]
    if which == "--report":
        extra += ["--report", str(link)]
    result, spends = synth(csv, "--bounds", "minutes=0:99", *extra)
    assert refused_cleanly(result, spends), (result.exit_code, result.output, spends)


@pytest.mark.parametrize("clash", ["report = output", "output = data"])
def test_outputs_cannot_overwrite_each_other_or_the_data(csv: Path, clash: str) -> None:
    """Two outputs (or an output and the input) naming one file: refused before the
    charge, never a silent overwrite."""
    if clash == "report = output":
        target = str(csv.parent / "s.csv")
        extra = ["-o", target, "--report", target]
    else:
        extra = ["-o", str(csv), "--report", str(csv.parent / "r.html"), "--compare-with-real"]
    result, spends = synth(csv, "--bounds", "minutes=0:99", *extra)
    assert refused_cleanly(result, spends), (result.exit_code, result.output, spends)


def test_a_failure_after_the_charge_prints_no_engine_message(
    csv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure after the charge (here planted in the domain-finding step, with a row's
    value in its text): the command prints the lock, exit 2, never the cause."""
    monkeypatch.setattr("dpkit.analytics._synthesis.discover", _raise_secret)
    result, spends = synth(csv, "-o", str(csv.parent / "s.parquet"))  # minutes: no bounds
    assert result.exit_code == 2 and "locked" in result.output, result.output
    assert "alice" not in result.output and SECRET not in result.output
    assert "Traceback" not in result.output and spends >= 1
