"""An analyst's attacks on the staged plan of ``describe`` (issue 28).

The threat model (DESIGN.md, "Threat model of the Session"): the analyst is trusted
with the schema and every public parameter -- here the table's column types, all of
describe's options (columns, weights, max_rows, top, confidence, date_range) and the
budget -- never with a row value. describe now decides in stages: it chooses max_rows
privately, skips text columns whose selection threshold exceeds the released row count
or whose released distinct count leaves no room for a category, gives their shares to
the other columns, releases only the percentiles and max whose accuracy
(``Session.explain``) is useful at the released count, and writes missing shares,
"share of 1" labels and alerts. Each of these is allowed to depend on releases and
public parameters only. The attacks, in the attacker's words:

1. *"I run describe on a table and on its neighbour with my planted row. If any
   decision reads the rows other than through a release, I will see a different
   query, a different budget, or a different line in the summary."* Checked by
   replay: describe runs on A and every release is recorded; then on the neighbour B,
   where each query really runs and is charged on B's rows but answers with A's
   release. With the releases equal, everything the analyst observes must be equal:
   the queries and their budgets in order, the ``explain`` calls and answers, the
   progress labels, the ledger and the whole JSON summary (withheld reasons, notes,
   alerts, labels, budget lines). B's own releases must have the shape of A's (the
   same columns and public groups, finite where A's are), so nothing B's rows hold
   (NaN, infinities, 10^9, a far date) shows in a release's structure either.
2. *"I plant marker values in one row and grep everything describe prints."*
3. *"I make describe split and re-split the budget over 200 weighted columns, under
   each kind of budget, on a half-spent ledger, until its rounding asks for more than
   is left -- which the ledger refuses after the earlier charges."* The default run
   splits over 48 columns; ``--runslow`` adds the 200.
4. *"I give it tables where every stage degenerates: no rows, only the privacy unit,
   every column skipped, one person with 10^5 rows, extremes of every type; if it
   fails after the first charge, the failure itself is my answer."*
5. The CSV encoding refusal (first 64 KiB only) is attacked in
   tests/adversarial/test_csv_encoding.py and not repeated here.
"""

from __future__ import annotations

import io
import json
import math
import re
from dataclasses import dataclass, field
from datetime import date
from fractions import Fraction
from typing import Any

import duckdb
import numpy as np
import pytest
from rich.console import Console

import dpkit as dp
from dpkit.analytics import Query
from dpkit.analytics.describe import describe, plan_describe
from dpkit.report import DatasetSummary, html_report, render_terminal, to_json
from dpkit.testing import seeded

COLUMNS = (
    ("person", "BIGINT"),
    ("age", "INTEGER"),  # integers over a wide range: percentiles and max
    ("income", "DOUBLE"),  # continuous: percentiles, max, withheld at small n
    ("rating", "DOUBLE"),  # 1-5 stored as DOUBLE: the private integer check
    ("member", "INTEGER"),  # 0/1: the "share of 1" label
    ("city", "VARCHAR"),  # three categories: key selection
    ("code", "VARCHAR"),  # an identifier: skipped after its distinct count
    ("flag", "BOOLEAN"),
    ("joined", "DATE"),
    ("seen", "TIMESTAMP"),
)
SCHEMA = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)

#: ``n`` rows, ``per`` rows per person.
BASE = """
SELECT i // {per}, 18 + (i * 7) % 70, exp((i % 97) / 10.0), 1 + i % 5, (i % 3 = 0)::INTEGER,
       ['north', 'south', 'east'][1 + i % 3], 'id-' || i, i % 4 = 0,
       DATE '2001-01-01' + (i * 13 % 4000)::INTEGER,
       TIMESTAMP '2010-01-01' + to_seconds(i * 3601)
FROM range({n}) r(i)
"""
#: The attacker's row(s): one person (id ``person``) with ``k`` rows of markers and
#: extremes. None of these values can come out of a private release of one person.
MARKER_TEXT = "SECRET-MARKER-7f3a"
MARKER_CODE = "SECRET-CODE-c0d3"
PLANTED = f"""
SELECT {{person}}, 987654321, 31415926.5358979, 'nan'::DOUBLE, -7777777, '{MARKER_TEXT}',
       '{MARKER_CODE}', NULL, DATE '2087-03-14', 'infinity'::TIMESTAMP
FROM range({{k}})
"""
#: How the planted values could be printed (repr, thousands separators, dates), as
#: whole numbers: not inside another number's digits (0.52602708 holds "2087").
MARKER_PATTERNS = tuple(
    re.compile(rf"(?<![\w.,]){p}(?![\w,])")
    for p in (
        MARKER_TEXT,
        MARKER_CODE,
        r"987,?654,?321(\.0*)?",
        r"9\.87654\d*e\+0?8",
        r"31,?415,?926(\.\d*)?",
        r"3\.14159\d*e\+0?7",
        r"2087(-03(-14)?)?",
        # Far from any noisy count: -77 was, and a histogram's interval bound of
        # -77.0 (noise, not the value) matched it.
        r"-7,?777,?777(\.0*)?",
    )
)
#: A person id no base table uses.
ATTACKER = 10**9


def _session(
    *parts: str, unit: str | None, budget: Any, seed: int = 7, columns: str = SCHEMA
) -> dp.Session:
    """A Session over a DuckDB table made of the ``INSERT ... SELECT`` parts."""
    connection = duckdb.connect()
    connection.execute(f"CREATE TABLE t ({columns})")
    for part in parts:
        connection.execute(f"INSERT INTO t {part}")
    return dp.Session.from_duckdb(
        connection, "t", privacy_unit=unit, budget=budget, rng=seeded(seed)
    )


def _base(n: int, per: int = 1) -> str:
    return BASE.format(n=n, per=per)


def _planted(k: int = 1) -> str:
    return PLANTED.format(person=ATTACKER, k=k)


# ------------------------------------------------------------------ replay


@dataclass
class Tape:
    """What describe asked of a Session and what it was answered, in order."""

    evaluations: list[tuple[Query, Any, Any]] = field(default_factory=list)
    explanations: list[tuple[Query, Any, str]] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)


def _record(session: dp.Session, tape: Tape) -> None:
    evaluate, explain = session.evaluate, session.explain

    def recording_evaluate(query: Query, *, budget: Any, **options: Any) -> Any:
        result = evaluate(query, budget=budget, **options)
        tape.evaluations.append((query, budget, result))
        return result

    def recording_explain(query: Query, *, budget: Any, **options: Any) -> Any:
        found = explain(query, budget=budget, **options)
        tape.explanations.append((query, budget, repr(found)))
        return found

    session.evaluate = recording_evaluate  # type: ignore[method-assign]
    session.explain = recording_explain  # type: ignore[method-assign]


def _replay(session: dp.Session, tape: Tape, seen: Tape) -> None:
    """Answer every query on ``session`` with the release ``tape`` recorded, after
    running it (and charging it) on ``session``'s own rows; check each step against
    the tape as it happens, so a divergence is reported where it starts."""
    evaluate, explain = session.evaluate, session.explain

    def replaying_evaluate(query: Query, *, budget: Any, **options: Any) -> Any:
        i = len(seen.evaluations)
        assert i < len(tape.evaluations), f"the neighbour's plan runs a query #{i} A's did not"
        query_a, budget_a, result_a = tape.evaluations[i]
        assert query == query_a, f"query #{i} differs on the neighbour:\n{query}\n{query_a}"
        assert budget == budget_a, (
            f"query #{i} is charged {budget} on the neighbour, not {budget_a}"
        )
        own = evaluate(query, budget=budget, **options)
        assert _shape(own, query) == _shape(result_a, query), f"release #{i} has another shape"
        seen.evaluations.append((query, budget, own))
        return result_a

    def replaying_explain(query: Query, *, budget: Any, **options: Any) -> Any:
        i = len(seen.explanations)
        found = explain(query, budget=budget, **options)
        assert i < len(tape.explanations), f"the neighbour's plan explains a query #{i} A's did not"
        assert (query, budget, repr(found)) == tape.explanations[i], f"explain #{i} differs"
        seen.explanations.append((query, budget, repr(found)))
        return found

    session.evaluate = replaying_evaluate  # type: ignore[method-assign]
    session.explain = replaying_explain  # type: ignore[method-assign]


def _shape(result: Any, query: Query) -> tuple[Any, ...]:
    """The structure of a release: its columns, and unless its keys were selected
    privately, its public groups and which of its numbers are finite."""
    names = tuple(sorted(result.columns))
    if query.selection is not None:
        return names
    groups = set(result.group_columns)
    parts = []
    for name in names:
        values = np.asarray(result.columns[name])
        if name in groups or values.dtype.kind in "OUS":  # keys, and notes on releases
            parts.append((name, tuple(str(v) for v in values)))
        else:
            parts.append((name, tuple(np.isfinite(values.astype(np.float64)).tolist())))
    return names, tuple(parts)


def _differs(one: Any, other: Any) -> bool:
    """Whether two releases differ in any column (shape or value)."""
    if set(one.columns) != set(other.columns):
        return True
    for name, values in one.columns.items():
        a, b = np.asarray(values), np.asarray(other.columns[name])
        if a.shape != b.shape or any(str(x) != str(y) for x, y in zip(a, b, strict=True)):
            return True
    return False


def _observed(summary: DatasetSummary) -> dict[str, Any]:
    """The summary's JSON, less its creation time."""
    out = json.loads(to_json(summary))
    out.pop("created", None)
    return out


def _ledger(session: dp.Session) -> list[tuple[Any, str]]:
    return [(r.amount, r.description) for r in session.history]


@dataclass(frozen=True)
class Case:
    a: tuple[str, ...]
    b: tuple[str, ...]
    unit: str | None
    budget: Any
    options: tuple[tuple[str, Any], ...] = ()


CASES = {
    # One more row (no privacy unit); small: most percentiles withheld, the
    # identifier skipped after its distinct count.
    "added row, ApproxDP, small n": Case(
        (_base(400),), (_base(400), _planted()), None, dp.ApproxDP(1.0, 1e-6)
    ),
    # The same, larger: percentiles and max released, categories selected.
    "added row, ApproxDP, large n": Case(
        (_base(4000),), (_base(4000), _planted()), None, dp.ApproxDP(4.0, 1e-6)
    ),
    # One row fewer: the attacker's row is in A.
    "removed row, PureDP": Case((_base(1500), _planted()), (_base(1500),), None, dp.PureDP(2.0)),
    # One more person with 3,000 rows; max_rows chosen privately.
    "added person, private max_rows": Case(
        (_base(3000, per=3),),
        (_base(3000, per=3), _planted(3000)),
        "person",
        dp.ApproxDP(2.0, 1e-6),
    ),
    # A person with 500 rows; max_rows given; zCDP; weights and a column subset.
    "added person, weights, ZCDP": Case(
        (_base(2000, per=2),),
        (_base(2000, per=2), _planted(500)),
        "person",
        dp.ZCDP(0.2),
        (
            ("max_rows", 2),
            ("weights", {"income": 40.0, "member": 0.01}),
            ("columns", ["income", "member", "rating", "joined", "flag"]),
            ("confidence", 0.9),
            ("date_range", (date(1990, 1, 1), date(2030, 1, 1))),
        ),
    ),
    # A table too small for key selection: text columns skipped for free.
    "added row, tiny table": Case(
        (_base(40),), (_base(40), _planted()), None, dp.ApproxDP(1.0, 1e-6)
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_every_decision_is_a_function_of_the_releases(case: Case) -> None:
    """Replay: with A's releases, the neighbour B shows exactly what A showed."""
    options = dict(case.options)
    tape, seen = Tape(), Tape()
    session_a = _session(*case.a, unit=case.unit, budget=case.budget)
    _record(session_a, tape)
    summary_a = describe(session_a, progress=tape.labels.append, **options)

    session_b = _session(*case.b, unit=case.unit, budget=case.budget)
    _replay(session_b, tape, seen)
    summary_b = describe(session_b, progress=seen.labels.append, **options)

    assert len(seen.evaluations) == len(tape.evaluations)
    assert len(seen.explanations) == len(tape.explanations)
    assert seen.labels == tape.labels
    assert _ledger(session_b) == _ledger(session_a)
    assert _observed(summary_b) == _observed(summary_a)
    # The attack had something to find: the plan made staged decisions, and the
    # planted rows changed what the engine computed (same seed, so the same noise:
    # B's own releases differ from A's only through the rows).
    assert tape.explanations, "describe explained nothing: no staged decision was made"
    assert any(
        _differs(own, recorded)
        for (_, _, own), (_, _, recorded) in zip(seen.evaluations, tape.evaluations, strict=True)
    ), "the planted rows changed no release: the neighbour is not a neighbour"


# ------------------------------------------------------------------ markers


def _printed(summary: DatasetSummary) -> str:
    """Everything describe's front ends show: JSON, terminal text, HTML."""
    console = Console(file=io.StringIO(), width=200, color_system=None)
    render_terminal(summary, console)
    terminal = console.file.getvalue()  # type: ignore[attr-defined]
    return "\n".join((to_json(summary), terminal, html_report(summary, with_plots=True)))


@pytest.mark.parametrize(
    ("unit", "budget", "k"),
    [(None, dp.ApproxDP(1.0, 1e-6), 1), ("person", dp.ApproxDP(2.0, 1e-6), 2000)],
    ids=["one row", "one person, 2000 rows"],
)
def test_planted_values_are_never_printed(unit: str | None, budget: Any, k: int) -> None:
    """Notes, alerts, withheld reasons, labels and budget lines quote no row value."""
    session = _session(_base(600, per=2), _planted(k), unit=unit, budget=budget)
    text = _printed(describe(session))
    found = [m.group() for p in MARKER_PATTERNS for m in p.finditer(text)]
    assert not found, f"planted values printed: {found}"


# ------------------------------------------------------------------ budget


def _wide(n_columns: int) -> tuple[str, str]:
    """A schema of ``n_columns`` columns cycling through every kind (text most often:
    its pre-check skips and reallocates), and its rows."""
    kinds = {
        "BOOLEAN": "(i + {j}) % 3 = 0",
        "VARCHAR": "'v' || ((i + {j}) % 4)",  # a few categories: selected
        "DOUBLE": "(i * {j}) % 1000 / 7.0",
        "IDENT": "'id-' || i",  # an identifier: skipped after its distinct count
        "INTEGER": "(i * {j}) % 6",  # counts per value
        "TEXT": "'w' || ((i * {j}) % 50)",  # 50 small categories: selected or not
        "DATE": "DATE '2000-01-01' + ((i * {j}) % 900)::INTEGER",
        "FLAG": "(i * {j}) % 7 = 0",
    }
    types = {"IDENT": "VARCHAR", "TEXT": "VARCHAR", "FLAG": "BOOLEAN"}
    order = list(kinds)
    names = [f"c{j}" for j in range(n_columns)]
    picked = [order[j % len(order)] for j in range(n_columns)]
    schema = ", ".join(
        ["person BIGINT", *(f"{c} {types.get(k, k)}" for c, k in zip(names, picked, strict=True))]
    )
    select = ", ".join(["i // 2", *(kinds[k].format(j=j + 1) for j, k in enumerate(picked))])
    return schema, f"SELECT {select} FROM range(300) r(i)"


def _total(budget: Any) -> Fraction:
    if isinstance(budget, dp.PureDP):
        return Fraction(budget.epsilon)
    assert isinstance(budget, dp.ZCDP)
    return Fraction(budget.rho)


def _charged(session: dp.Session) -> Fraction:
    return sum((Fraction(r.amount[0]) for r in session.history), Fraction(0))


def _claimed(summary: DatasetSummary) -> Fraction:
    spent = summary.budget
    return Fraction(spent.epsilon if isinstance(spent, dp.PureDP) else spent.rho)


WIDE = {
    "PureDP 1/3, privacy unit": (dp.PureDP(1 / 3), "person"),
    "ZCDP 0.123456789, rows": (dp.ZCDP(0.123456789), None),
    "ApproxDP 0.7, 1e-7, privacy unit": (dp.ApproxDP(0.7, 1e-7), "person"),
}


def _never_overspend(budget: Any, unit: str | None, n_columns: int) -> None:
    """``n_columns`` columns, log-uniform weights over five orders of magnitude, a ledger
    already partly spent: describe runs to the end (a request over what is left would
    be refused after earlier charges), the ledger's exact sum stays within the budget,
    and the summary never states less than was charged."""
    schema, rows = _wide(n_columns)
    session = _session(rows, unit=unit, budget=budget, columns=schema)
    count = Query().count() if unit is None else Query().bound(max_rows=1).count()
    session.evaluate(count, budget=0.3141592653589793)  # an odd, earlier spend
    before = _charged(session)
    names = [name for name, _ in plan_describe(session).columns]
    draws = np.random.default_rng(5).uniform(-2.5, 2.5, len(names))
    weights = {c: float(10.0**w) for c, w in zip(names, draws, strict=True)}
    summary = describe(session, weights=weights)

    charged = _charged(session)
    assert charged - before <= _claimed(summary), "the summary understates its spend"
    if isinstance(budget, dp.ApproxDP):
        stated = summary.guarantee
        assert isinstance(stated, dp.ApproxDP)
        assert stated.epsilon <= budget.epsilon and stated.delta <= budget.delta
    else:
        assert charged <= _total(budget)
        assert _claimed(summary) <= _total(budget)
    # The budget lines' fractions add up to at most 1, up to their float rounding (the
    # charges themselves are rounded down; the ledger's sum is checked exactly above).
    assert sum(Fraction(line.fraction) for line in summary.budget_split) <= 1 + 1e-12
    # Nothing is left that describe could still have used (it spends what remains).
    assert _amount(session.remaining) <= 1e-9 * _amount(session.spent)


@pytest.mark.parametrize(("budget", "unit"), list(WIDE.values()), ids=list(WIDE))
def test_many_weighted_columns_never_overspend(budget: Any, unit: str | None) -> None:
    """The default run's version of the 200-column attack below: 48 columns, each of
    the eight kinds of ``_wide`` six times (about a quarter of the shares, charges and
    DuckDB statements), with the same spread of weights, budgets, earlier spend and
    checks."""
    _never_overspend(budget, unit, 48)


@pytest.mark.slow
@pytest.mark.parametrize(("budget", "unit"), list(WIDE.values()), ids=list(WIDE))
def test_two_hundred_weighted_columns_never_overspend(budget: Any, unit: str | None) -> None:
    """The full attack: 200 columns (about 50 s in all, most of it DuckDB statements)."""
    _never_overspend(budget, unit, 200)


def _amount(guarantee: Any) -> float:
    return float(guarantee.epsilon if isinstance(guarantee, dp.PureDP) else guarantee.rho)


@pytest.mark.parametrize("spent", [0.5, 0.985, 0.995])
def test_a_nearly_spent_ledger_is_run_to_the_end_or_refused_before_a_charge(spent: float) -> None:
    """Below 1% of the budget describe refuses before charging anything; above, it
    runs to the end on the rest, never over it."""
    budget = dp.PureDP(1.0)
    session = _session(_base(500), unit=None, budget=budget)
    session.evaluate(Query().count(), budget=spent)
    charges = len(session.history)
    if spent > 0.99:
        with pytest.raises(dp.errors.BudgetExceeded):
            describe(session)
        assert len(session.history) == charges, "describe charged before refusing"
        return
    describe(session, weights={"income": 1e5})
    assert _charged(session) <= _total(budget)


TOO_SMALL = {
    # Public parameters only: every run stops at the same query.
    "a column weighted 1e-6, PureDP 3e-5": (None, dp.PureDP(3e-5), {"weights": {"income": 1e-6}}),
    # The stop depends on the released counts of the max_rows ladder: after 2 charges
    # when they climb to a bound of 4 (sensitivity 4), after 3 when they stop at 2 and
    # the rows-dropped count (sensitivity 10 x max_rows) is refused.
    "a privacy unit, PureDP 3e-10": ("person", dp.PureDP(3e-10), {}),
}


@pytest.mark.parametrize(
    ("unit", "budget", "options"), list(TOO_SMALL.values()), ids=list(TOO_SMALL)
)
def test_a_budget_too_small_for_one_share_is_refused_before_the_first_charge(
    unit: str | None, budget: Any, options: dict[str, Any]
) -> None:
    """*"I set a budget and weights that describe accepts, and whose smallest share is
    below what the exact samplers can calibrate."* Each query refuses that before its
    own charge (dpkit.analytics._accounting: noise scale above 2^40), but describe has
    charged the queries before it by then: charge, then fail -- the budget spent for
    nothing, and with a privacy unit, where it stops depends on released counts.

    describe must find this from the plan before the first charge (every share it
    may take, at the largest sensitivity it may use: max_rows 64 when chosen
    privately, 10 x max_rows for the rows dropped, MAX_GROUPS_PER_PERSON groups) and
    refuse, or run to the end (withholding what cannot be calibrated).
    """
    session = _session(_base(300, per=3), unit=unit, budget=budget)
    try:
        describe(session, **options)
    except dp.errors.DPError as err:
        spent = len(session.history)
        assert not spent, f"describe failed after {spent} charges: {type(err).__name__}: {err}"


# ------------------------------------------------------------------ degenerate tables


def _only_unit(n: int) -> tuple[str, str]:
    return "person BIGINT", f"SELECT i // 3 FROM range({n}) r(i)"


ALL_KINDS_NULL = "SELECT i, " + ", ".join(["NULL"] * (len(COLUMNS) - 1)) + " FROM range(300) r(i)"
EXTREMES = """
SELECT i, 2147483647, 'inf'::DOUBLE, '-inf'::DOUBLE, -2147483648, repeat('x', 5000),
       '', true, 'infinity'::DATE, '-infinity'::TIMESTAMP
FROM range(300) r(i)
"""
FAR = """
SELECT i, -2147483648, 1e308, -1e-308, 2147483647, 'a', 'a', false, DATE '0001-01-01',
       TIMESTAMP '9999-12-31 23:59:59'
FROM range(300) r(i)
"""
ENDS_SCHEMA = (
    "person BIGINT, b HUGEINT, u UBIGINT, d DECIMAL(38, 10), f FLOAT, s SMALLINT, "
    "z TIMESTAMPTZ, n TIMESTAMP_NS, t TIME, v INTERVAL"
)
ENDS = """
SELECT i % 7, {sign}170141183460469231731687303715884105727::HUGEINT,
       CASE WHEN '{sign}' = '' THEN 18446744073709551615 ELSE 0 END::UBIGINT,
       {sign}9999999999999999999999999999.9999999999, 'nan'::FLOAT, {sign}32767,
       {end}::TIMESTAMPTZ, {end}::TIMESTAMP_NS, TIME '23:59:59', INTERVAL 1000 YEAR
FROM range(200) r(i)
"""
DEGENERATE: dict[str, tuple[tuple[str, ...], str | None, str, Any, dict[str, Any]]] = {
    "no rows": ((), "person", SCHEMA, dp.ApproxDP(1.0, 1e-6), {}),
    "no rows, PureDP, no unit": ((), None, SCHEMA, dp.PureDP(1.0), {}),
    "only the privacy unit": ((_only_unit(900)[1],), "person", "person BIGINT", dp.ZCDP(0.1), {}),
    "only the privacy unit, no rows": ((), "person", "person BIGINT", dp.ApproxDP(1.0, 1e-6), {}),
    "every column skipped": (
        (_base(30),),
        None,
        SCHEMA,
        dp.ApproxDP(0.5, 1e-6),
        {"columns": ["city", "code"]},
    ),
    "one person, 10^5 rows": ((_base(100_000, per=100_000),), "person", SCHEMA, dp.ZCDP(0.5), {}),
    "one person, 10^5 rows, among 300": (
        (_base(300), _planted(100_000)),
        "person",
        SCHEMA,
        dp.ApproxDP(1.0, 1e-6),
        {},
    ),
    "every value missing": ((ALL_KINDS_NULL,), "person", SCHEMA, dp.ApproxDP(1.0, 1e-6), {}),
    "infinities and empty text": ((EXTREMES,), None, SCHEMA, dp.ApproxDP(1.0, 1e-6), {}),
    "ends of every type": ((FAR,), None, SCHEMA, dp.PureDP(1.0), {}),
    "tiny budget": ((_base(300),), None, SCHEMA, dp.ApproxDP(1e-4, 1e-9), {}),
    "huge budget": (
        (_base(300),),
        "person",
        SCHEMA,
        dp.ZCDP(1e4),
        {"date_range": (date(2000, 1, 1), date(2001, 1, 1))},
    ),
    "no columns asked for": ((_base(300),), None, SCHEMA, dp.PureDP(1.0), {"columns": []}),
    "every numeric type at its ends": (
        (ENDS.format(sign="", end="'infinity'"), ENDS.format(sign="-", end="'-infinity'")),
        "person",
        ENDS_SCHEMA,
        dp.ApproxDP(1.0, 1e-6),
        {},
    ),
}


@pytest.mark.filterwarnings("ignore::dpkit.errors.WeakGuaranteeWarning")  # "huge budget"
@pytest.mark.parametrize("name", list(DEGENERATE))
def test_degenerate_tables_run_to_the_end_within_budget(name: str) -> None:
    """Whatever the table, describe and its renderers finish once the first charge is
    made (a failure there would itself depend on the rows), within the budget."""
    parts, unit, schema, budget, options = DEGENERATE[name]
    session = _session(*parts, unit=unit, budget=budget, columns=schema)
    summary = describe(session, **options)
    _printed(summary)  # the CLI renders after the spend: it must not fail either
    if not isinstance(budget, dp.ApproxDP):
        assert _charged(session) <= _total(budget)
    for column in summary.columns:
        for statistic in column.statistics:
            if statistic.estimate is not None:
                assert math.isfinite(statistic.estimate), (column.name, statistic.name)


def test_columns_skipped_from_the_row_count_spend_nothing_of_their_own() -> None:
    """*"Two text columns of a 30-row table: does describe pay for them anyway?"* The
    selection threshold exceeds the released row count, so both are skipped from that
    release alone: one charge (the rows), both budget lines unspent (the shares stay in
    the Session, having no column to go to), and the summary states what was charged."""
    session = _session(_base(30), unit=None, budget=dp.ApproxDP(0.5, 1e-6))
    summary = describe(session, columns=["city", "code"])
    assert [c.name for c in summary.columns] == ["city", "code"]
    assert all(c.notes[0].startswith("Skipped: too few rows") for c in summary.columns)
    assert len(session.history) == 1
    assert [line.mechanism for line in summary.budget_split[1:]] == ["unspent", "unspent"]
    assert _charged(session) <= _claimed(summary)
