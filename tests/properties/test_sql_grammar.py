"""The grammar property of the front door, extended to SQL text.

The Python builder's property (tests/adversarial/test_expression_oracles.py and
tests/adversarial/test_front_door_attacks.py): a query over one schema is refused before
the charge on every table of that schema, or runs on every one -- whether it fails, and
how, never depends on row values (docs/analytics.md, "Threat model", rule 1). Here
hypothesis writes statements from the grammar of ``SELECT WITH DIFFERENTIAL_PRIVACY``
(dpkit.analytics._sql_query: random columns, expressions from the allowed functions and
a few outside them, filters, GROUP BY columns and expressions, aggregates with bounds,
joins with a public table, OPTIONS, ORDER BY and LIMIT) and runs each on Sessions over
tables of one schema with very different rows: empty, all NULL, NaN and infinities,
extreme integers and dates, long strings, one person with many rows, and a crowd whose
keys private selection releases. Every statement must be refused on every table with
the same class and message and nothing spent, or succeed on every table with the same
output columns; never fail after its charge.

The Sessions are built once (0.3 s each) and reused across examples: every table sees
the same statements in the same order, so their budgets stay equal and any difference
in outcome is the data's. The default run draws 15 statements of the first grammar and
8 of the per-person one (each run on every table); ``--runslow`` adds 400 and 300.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpkit as dp

PRIVATE = pa.schema(
    [
        ("uid", pa.int64()),
        ("i", pa.int64()),
        ("x", pa.float64()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("b", pa.bool_()),
    ]
)
PUBLIC = pa.table(
    {"s": ["a", "b", "c", "(("], "label": ["A", "B", "C", "P"], "w": [0.5, 1.0, 2.0, -1.0]}
)
BIG = 2**63 - 1


def _rows_extreme() -> list[dict[str, Any]]:
    floats = [float("nan"), float("inf"), float("-inf"), -0.0, 1e308, -1e308, 5e-324]
    ints = [BIG, -BIG - 1, 0, -1, 2**31]
    dates = [dt.date(1, 1, 1), dt.date(9999, 12, 31), dt.date(1970, 1, 1)]
    strings = ["", "(", "\u0000", "n\u0301", "\U0001f600", "2020-01-01", "9" * 30, "NaN"]
    return [
        {
            "uid": k,
            "i": ints[k % len(ints)],
            "x": floats[k % len(floats)],
            "s": strings[k % len(strings)],
            "d": dates[k % len(dates)],
            "b": (True, False, None)[k % 3],
        }
        for k in range(24)
    ]


def _rows_long() -> list[dict[str, Any]]:
    # One person with 200 rows, long strings (a pattern's worst case), a few others.
    rows = [
        {
            "uid": 1,
            "i": k,
            "x": float(k),
            "s": ("x" * 999 + "(") if k % 2 else "a" * 1000,
            "d": dt.date(2020, 1, 1) + dt.timedelta(days=k),
            "b": k % 2 == 0,
        }
        for k in range(200)
    ]
    return rows + [
        {"uid": 2 + k, "i": -k, "x": -1.0, "s": "b", "d": None, "b": None} for k in range(5)
    ]


def _rows_crowd() -> list[dict[str, Any]]:
    # Enough persons per key that private key selection releases keys.
    return [
        {
            "uid": k,
            "i": k % 7,
            "x": (k % 10) / 10,
            "s": "abc"[k % 3],
            "d": dt.date(2020, 1 + k % 12, 1),
            "b": k % 2 == 0,
        }
        for k in range(600)
    ]


TABLES = {
    "empty": [],
    "nulls": [{"uid": k, "i": None, "x": None, "s": None, "d": None, "b": None} for k in range(6)],
    "extreme": _rows_extreme(),
    "long": _rows_long(),
    "crowd": _rows_crowd(),
}


@functools.cache
def sessions() -> dict[str, dp.Session]:
    return {
        name: dp.Session.from_tables(
            {"t": pa.Table.from_pylist(rows, schema=PRIVATE)},
            privacy_unit="uid",
            public={"pub": PUBLIC},
            budget=dp.ApproxDP(1e4, 1e-2),
            rng=0,
        )
        for name, rows in TABLES.items()
    }


# ------------------------------------------------------------------ the grammar
_NUMBER = st.sampled_from(
    ["0", "1", "-1", "2", "0.5", "1e308", "9223372036854775807", "-9223372036854775808"]
)
_NUMERIC_COLUMN = st.sampled_from(
    ["i", "x", "t.i", "t.x", "CHAR_LENGTH(s)", "EXTRACT(YEAR FROM d)", "STRPOS(s, 'a')"]
)


@st.composite
def numeric(draw: st.DrawFn, depth: int = 2) -> str:
    if depth == 0:
        return draw(st.one_of(_NUMERIC_COLUMN, _NUMBER))
    a, b = draw(numeric(depth - 1)), draw(numeric(depth - 1))
    kind = draw(st.integers(0, 7))
    if kind == 0:
        return draw(st.one_of(_NUMERIC_COLUMN, _NUMBER))
    if kind == 1:
        return f"({a} {draw(st.sampled_from(['+', '-', '*', '/']))} {b})"
    if kind == 2:
        fn = draw(st.sampled_from(["ABS", "SQRT", "LN", "EXP", "FLOOR", "SIGN", "CEIL"]))
        return f"{fn}({a})"
    if kind == 3:
        fn = draw(st.sampled_from(["DIV", "MOD", "POW", "IEEE_DIVIDE", "SAFE_DIVIDE", "LEAST"]))
        return f"{fn}({a}, {b})"
    if kind == 4:
        target = draw(st.sampled_from(["INT64", "FLOAT64", "NUMERIC", "BOOL", "STRING"]))
        source = draw(st.sampled_from([a, "s", "d", "x", "b"]))
        return f"CAST({source} AS {target})"
    if kind == 5:
        return f"CASE WHEN {draw(predicate(depth - 1))} THEN {a} ELSE {b} END"
    if kind == 6:
        return f"IF({draw(predicate(depth - 1))}, {a}, {b})"
    return f"COALESCE({a}, {b})"


_STRING = st.sampled_from(
    ["s", "LOWER(s)", "SUBSTR(s, 1, 2)", "CONCAT(s, 'x')", "CAST(i AS STRING)", "'a'", "TRIM(s)"]
)
_ATOMS = st.sampled_from(
    [
        "b",
        "s IS NULL",
        "x IS NOT NULL",
        "s IN ('a', 'b', '(')",
        "i BETWEEN -1 AND 5",
        "s LIKE '%a%'",
        "REGEXP_CONTAINS(s, 'a+')",
        "REGEXP_CONTAINS(s, s)",
        "STARTS_WITH(s, 'a')",
        "d > DATE '2000-01-01'",
        "CAST(s AS DATE) > d",
        "IS_NAN(x)",
        "IS_INF(x)",
        "DATE_DIFF(d, DATE '2000-01-01', DAY) > 10",
        "DATE_TRUNC(d, MONTH) = DATE '2020-01-01'",
        "LENGTH(REPEAT(s, 3)) > 1",
        "LENGTH(s) > 1",
        "RAND() < 0.5",
        "uid = 1",
    ]
)


@st.composite
def predicate(draw: st.DrawFn, depth: int = 2) -> str:
    kind = draw(st.integers(0, 4))
    if depth == 0 or kind == 0:
        return draw(_ATOMS)
    if kind == 1:
        op = draw(st.sampled_from(["=", "<", ">=", "<>", "!="]))
        return f"{draw(numeric(depth - 1))} {op} {draw(numeric(depth - 1))}"
    if kind == 2:
        return f"{draw(_STRING)} = {draw(_STRING)}"
    if kind == 3:
        join = draw(st.sampled_from(["AND", "OR"]))
        return f"({draw(predicate(depth - 1))} {join} {draw(predicate(depth - 1))})"
    return f"NOT ({draw(predicate(depth - 1))})"


_BOUNDS = st.sampled_from(
    ["(0, 1)", "(-1, 1)", "(0, 100)", "(-1e6, 1e6)", "(5e12, 5000000000001)", "(-1e300, 1e300)"]
)


@st.composite
def aggregate(draw: st.DrawFn, index: int) -> str:
    kind = draw(st.integers(0, 6))
    value = draw(st.one_of(st.sampled_from(["x", "i", "t.x"]), numeric(1)))
    alias = f" AS a{index}"
    if kind == 0:
        return "COUNT(*)" + alias
    if kind == 1:
        return draw(st.sampled_from(["COUNT(DISTINCT uid)", "COUNT(DISTINCT t.uid)"])) + alias
    if kind == 2:
        inner = draw(st.sampled_from(["s", "d", "b", value]))
        distinct = draw(st.sampled_from(["", "DISTINCT "]))
        return f"COUNT({distinct}{inner})" + alias
    bounds = draw(_BOUNDS)
    key = draw(st.sampled_from(["contribution_bounds_per_row", "contribution_bounds_per_group"]))
    if kind == 3:
        q = draw(st.sampled_from(["0", "0.25", "0.5", "1"]))
        return f"PERCENTILE_CONT({value}, {q}, {key} => {bounds})" + alias
    fn = draw(
        st.sampled_from(["SUM", "AVG", "VAR_POP", "VARIANCE", "STDDEV", "MEDIAN", "MIN", "MAX"])
    )
    return f"{fn}({value}, {key} => {bounds})" + alias


_GROUPS = {
    "none": ([], ""),
    "s": (["s"], "s"),
    "b": (["b"], "b"),
    "d": (["d"], "d"),
    "i": (["i"], "i"),
    "cast": (["CAST(x AS INT64)"], "CAST(x AS INT64)"),
    "year": (["EXTRACT(YEAR FROM d)"], "EXTRACT(YEAR FROM d)"),
    "substr": (["SUBSTR(s, 1, 1)"], "SUBSTR(s, 1, 1)"),
    "label": (["p.label"], "p.label"),
    "s-label": (["s", "p.label"], "s, p.label"),
}
_JOINS = [
    "",
    " JOIN pub p USING (s)",
    " LEFT JOIN pub p ON t.s = p.s",
    " JOIN pub AS p ON p.s = t.s",
]


@st.composite
def statement(draw: st.DrawFn) -> str:
    join = draw(st.sampled_from(_JOINS))
    group_names = [g for g in _GROUPS if join or "label" not in g]
    group = draw(st.sampled_from(group_names))
    selected, group_by = _GROUPS[group]
    options = ["epsilon = 0.01", "delta = 1e-9", "key_selection_delta = 1e-12"]
    if draw(st.booleans()):
        options.append(f"max_groups_contributed = {draw(st.sampled_from([1, 2, 3]))}")
    if draw(st.booleans()):
        options.append(f"max_rows_contributed = {draw(st.sampled_from([1, 2, 50]))}")
    if draw(st.booleans()):
        options.append(f"max_total_rows_contributed = {draw(st.sampled_from([1, 3, 60]))}")
    if group in ("s", "label", "s-label", "b") and draw(st.booleans()):
        options.append("group_keys = pub")  # (pub has no column b: a public refusal)
    aggregates = [draw(aggregate(k)) for k in range(draw(st.integers(1, 3)))]
    items = [*selected, *aggregates]
    text = (
        f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS ({', '.join(options)}) "
        f"{', '.join(items)} FROM t{join}"
    )
    if draw(st.booleans()):
        text += f" WHERE {draw(predicate())}"
    if group_by:
        text += f" GROUP BY {group_by}"
    if draw(st.booleans()):
        text += f" ORDER BY a0 {draw(st.sampled_from(['ASC', 'DESC']))}"
        if draw(st.booleans()):
            text += f" LIMIT {draw(st.sampled_from([0, 1, 5]))}"
    return text


_PERSON_VALUES = ["pn", "ps", "pm", "pa", "pc"]


@st.composite
def person_statement(draw: st.DrawFn) -> str:
    """A statement over a subquery in FROM grouped by the privacy unit (the per-person
    step), or over one that is not (refused on every table)."""
    join = draw(st.sampled_from(_JOINS))
    by = draw(st.sampled_from(["", "s", "d", "i"]))
    key = draw(st.sampled_from(["uid", "t.uid", *(["uid"] * 3), "i"]))
    group = ", ".join(g for g in (key, by) if g)
    inner = [
        "COUNT(*) AS pn",
        f"SUM({draw(numeric(1))}) AS ps",
        f"{draw(st.sampled_from(['MAX', 'MIN']))}({draw(st.sampled_from(['x', 'i', 'd', 's']))})"
        " AS pm",
        f"AVG({draw(st.sampled_from(['i', 'x', 'CAST(s AS FLOAT64)']))}) AS pa",
        f"COUNT({draw(st.sampled_from(['d', 's', 'x']))}) AS pc",
    ]
    subquery = f"SELECT {group}, {', '.join(inner)} FROM t{join}"
    if draw(st.booleans()):
        subquery += f" WHERE {draw(predicate(1))}"
    subquery += f" GROUP BY {group}"
    if draw(st.booleans()):
        having = draw(st.sampled_from(["pn > 1", "COUNT(*) >= 2", "SUM(i) > 0", "MAX(x) < ps"]))
        subquery += f" HAVING {having}"
    bounds = draw(_BOUNDS)
    aggregates = ["COUNT(*) AS a0"]
    for index, value in enumerate(
        draw(st.lists(st.sampled_from(_PERSON_VALUES), min_size=1, max_size=3)), start=1
    ):
        fn = draw(st.sampled_from(["SUM", "AVG", "MAX", "PERCENTILE_CONT"]))
        level = ", 0.5" if fn == "PERCENTILE_CONT" else ""
        aggregates.append(
            f"{fn}({value}{level}, contribution_bounds_per_row => {bounds}) AS a{index}"
        )
    options = ["epsilon = 0.01", "delta = 1e-9", "key_selection_delta = 1e-12"]
    if draw(st.booleans()):
        options.append(f"max_rows_contributed = {draw(st.sampled_from([1, 2]))}")
    outer_group = draw(st.sampled_from(["", "pn", *([by] if by else [])]))
    selected = [outer_group] if outer_group else []
    text = (
        f"SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS ({', '.join(options)}) "
        f"{', '.join([*selected, *aggregates])} FROM ({subquery}) AS pp"
    )
    if draw(st.booleans()):
        text += f" WHERE {draw(st.sampled_from(['pn >= 2', 'ps > 0', 'pp.pa IS NOT NULL']))}"
    if outer_group:
        text += f" GROUP BY {outer_group}"
    return text


# ------------------------------------------------------------------ the property
def _left(session: dp.Session) -> object:
    try:
        return (session.remaining, session.remaining_selection_delta, len(session.history))
    except dp.DPError as err:
        return f"unreadable: {type(err).__name__}"


def outcome(session: dp.Session, text: str) -> tuple[str, str]:
    """``("ok", output columns)``, ``("refused", class: message)`` (a dpkit error with
    nothing spent) or ``("failed", ...)`` (after a charge, or not a dpkit error)."""
    before = _left(session)
    try:
        result = session.sql(text)
    except Exception as err:
        described = f"{type(err).__name__}: {err}"
        if isinstance(err, dp.DPError) and _left(session) == before:
            return "refused", described
        return "failed", described
    return "ok", ",".join(result.columns)


def check(text: str) -> None:
    seen = {name: outcome(session, text) for name, session in sessions().items()}
    kinds = {kind for kind, _ in seen.values()}
    assert "failed" not in kinds, (text, seen)
    assert len(set(seen.values())) == 1, (text, seen)
    if "refused" in kinds:
        # A refusal is one of the threat model's: a refusal before the charge.
        (described,) = {d for _, d in seen.values()}
        assert described.split(":")[0] in {
            "SqlError",
            "InvalidParameter",
            "DataError",
            "EngineError",
        }, described


_SETTINGS: dict[str, Any] = {
    "deadline": None,
    "derandomize": True,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


# The default run draws 15 statements (derandomized: the same 15 every run), each
# checked on all five tables; --runslow adds the 400 below.
@settings(max_examples=15, **_SETTINGS)
@given(text=statement())
def test_every_statement_is_refused_on_every_table_or_runs_on_every_table(text: str) -> None:
    check(text)


@pytest.mark.slow
@settings(max_examples=400, **_SETTINGS)
@given(text=statement())
def test_every_statement_is_refused_on_every_table_or_runs_on_every_table_slow(text: str) -> None:
    check(text)


@settings(max_examples=8, **_SETTINGS)
@given(text=person_statement())
def test_every_per_person_statement_is_refused_everywhere_or_runs_everywhere(text: str) -> None:
    check(text)


@pytest.mark.slow
@settings(max_examples=300, **_SETTINGS)
@given(text=person_statement())
def test_every_per_person_statement_is_refused_everywhere_or_runs_everywhere_slow(
    text: str,
) -> None:
    check(text)


def test_the_tables_differ_and_the_grammar_reaches_both_outcomes() -> None:
    # The property is not vacuous: the statements below run (on every table) or are
    # refused (on every table), and the crowd's keys are released where empty's are not.
    grouped = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-9, "
        "key_selection_delta = 1e-12) s, COUNT(*) AS a0 FROM t GROUP BY s"
    )
    check(grouped)
    keys = {
        name: len(s.sql(grouped).columns["s"]) for name, s in sessions().items() if name != "long"
    }
    assert keys["crowd"] == 3 and keys["empty"] == 0
    check(grouped.replace("COUNT(*)", "COUNT(RAND())"))
    refused = outcome(sessions()["empty"], grouped.replace("COUNT(*)", "COUNT(RAND())"))
    assert refused[0] == "refused"


def test_per_person_statements_reach_both_outcomes() -> None:
    runs = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-9) COUNT(*) AS a0, "
        "SUM(pn, contribution_bounds_per_row => (0, 5)) AS a1 "
        "FROM (SELECT uid, COUNT(*) AS pn FROM t GROUP BY uid) AS pp"
    )
    check(runs)
    assert outcome(sessions()["crowd"], runs)[0] == "ok"
    row_by_row = runs.replace("SELECT uid,", "SELECT i,").replace("GROUP BY uid", "GROUP BY i")
    check(row_by_row)
    assert outcome(sessions()["crowd"], row_by_row)[0] == "refused"
