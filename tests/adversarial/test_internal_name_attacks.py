"""Attacks with columns named like dpkit's own SQL names, written as an attacker would.

dpkit writes its statements with internal names: column aliases (``__u``, ``__c0``,
``__hl``, ``__dpkit_pk0``...), CTE and subquery names (``__base``, ``__pairs``,
``__src``...) and derived columns (``<column>__epoch``, ``<column>_days``,
``<alias>_value``...). The schema is the analyst's to choose and is public, so an
analyst can open a Session on a table whose columns carry exactly those names, in any
case (DuckDB and Spark resolve names ignoring case). If a generated statement then binds
a reference to the *table's* column instead of dpkit's alias, it can

* change a result silently (a count reading the wrong column: a privacy failure), or
* fail on some tables only, after the charge (a CAST of the shadow column that fails
  when one row holds 'abc'): a one-bit oracle on that row, at a price the analyst sets.

What must hold (DESIGN.md, "Threat model of the Session"): for every front door
(``from_pandas``, ``from_arrow``, ``from_duckdb``, ``from_spark``, ``from_tables``) and
every query shape, on neighbouring tables (with and without a victim whose rows hold
the poison: 'abc', NULL, 2^63 - 1, a 1 among 0s), either

* the query is refused before the charge on every one of them alike (a dpkit error,
  nothing spent, ``session.history`` empty): a refusal that depends on the schema only,
  or
* it runs on every one of them, and each result is exactly the result of the same
  query, with the same ``rng`` seed, on the same rows without the shadow columns
  (dpkit's seeded noise is reproducible for identical inputs): the shadow columns are
  ignored;

never ``SessionLocked``, never an exception that is not dpkit's.

The internal names are read from the sources when the tests are collected (every
``__name`` token of ``src/dpkit/analytics``; ``{i}``-numbered ones for 0..3), so a new
alias is covered without editing this file.

Written by the review of internal names. One attack worked when it was written
(``test_synthesis_with_a_column_named_like_a_code_table_column``): a synthesized column
named ``__c`` or ``__k`` (any case) next to a categorical column makes the cell-count
statement ambiguous; with private domains it fails after the reserve's charge and locks
the Session.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dpkit as dp
import dpkit.analytics
from dpkit.analytics import KeySet, Query
from dpkit.analytics.describe import describe
from dpkit.errors import DataError, DPError, SessionLocked

# ------------------------------------------------------------------ the internal names
SOURCES = Path(dpkit.analytics.__file__).parent
#: An identifier starting with two underscores, with an optional f-string placeholder
#: right after it (``__c{i}``, ``__dpkit_tk{i}``, ``__v{name}``).
_TOKEN = re.compile(r"(?<![A-Za-z0-9_])(__[A-Za-z][A-Za-z0-9_]*?)(\{[^{}]*\})?(?![A-Za-z0-9_{])")
#: What a placeholder stands for: small indices, and the ``{j}_{i}`` of the shared scan.
_INDICES = ("0", "1", "2", "3", "0_0", "1_0")


def _internal_names() -> list[str]:
    names: set[str] = set()
    for path in sorted(SOURCES.rglob("*.py")):
        for match in _TOKEN.finditer(path.read_text(encoding="utf-8")):
            stem, placeholder = match.group(1), match.group(2)
            if placeholder:
                names.update(f"{stem}{i}" for i in _INDICES)
            elif not stem.endswith("_"):  # Python's dunders (__init__) and bare prefixes
                names.add(stem)
    return sorted(names)


def _repeated_instances() -> set[str]:
    """The names ``_internal_names`` makes from a placeholder at an index other than
    the first (``__dpkit_pk1``, ``__dpkit_pk0_0``, ...), and the sources write nowhere
    else: another number on a stem that is there at index 0 too."""
    written, first, repeated = set(), set(), set()
    for path in sorted(SOURCES.rglob("*.py")):
        for match in _TOKEN.finditer(path.read_text(encoding="utf-8")):
            stem, placeholder = match.group(1), match.group(2)
            if placeholder:
                first.add(f"{stem}{_INDICES[0]}")
                repeated.update(f"{stem}{i}" for i in _INDICES[1:])
            else:
                written.add(stem)
    return repeated - written - first


INTERNAL = _internal_names()
#: Names with dpkit's own prefix: refused at creation by from_tables, by per_person at
#: the query; the others are legal column names everywhere.
PREFIXED = [n for n in INTERNAL if n.casefold().startswith("__dpkit")]
PLAIN = [n for n in INTERNAL if not n.casefold().startswith("__dpkit")]
#: PREFIXED split: every stem once (at index 0), and its other numbered instances.
PREFIXED_REPEATS = sorted(set(PREFIXED) & _repeated_instances())
PREFIXED_STEMS = [n for n in PREFIXED if n not in PREFIXED_REPEATS]

CASES: dict[str, Callable[[str], str]] = {
    "as_written": lambda n: n,
    "upper": str.upper,  # __U, __DPKIT_PK0
    "mixed": lambda n: n[:2] + n[2:].capitalize(),  # __U, __Dpkit_pk0, __Src
}


def test_the_names_are_read_from_the_sources() -> None:
    """The extraction cannot silently come back empty: it holds every ``AS __name``
    alias and the names the earlier reviews found."""
    aliases = set()
    for path in SOURCES.rglob("*.py"):
        aliases |= set(re.findall(r"AS (__[A-Za-z0-9_]+)\b", path.read_text(encoding="utf-8")))
    # ``AS __a{i}`` is read as its stem __a, whose instances are __a0, __a1, ...
    missing = [a for a in aliases if a not in INTERNAL and f"{a}0" not in INTERNAL]
    assert aliases and not missing, missing
    known = {"__u", "__c0", "__e0", "__d0", "__src", "__n", "__hl", "__pairs", "__base"}
    known |= {"__dpkit_pk0", "__dpkit_tu", "__dpkit_a0", "__g0", "__v0_0"}
    assert known <= set(INTERNAL), sorted(known - set(INTERNAL))
    assert len(PLAIN) > 80 and len(PREFIXED) > 20
    # The split of the prefixed names (a stem's numbered instances): nothing lost.
    assert sorted(PREFIXED_STEMS + PREFIXED_REPEATS) == PREFIXED
    assert {"__dpkit_pk0", "__dpkit_tu", "__dpkit_a0"} <= set(PREFIXED_STEMS)
    assert {"__dpkit_pk1", "__dpkit_pk0_0"} <= set(PREFIXED_REPEATS)


# --------------------------------------------------------------------------- tables
VICTIM = 999
PEOPLE = 20
ROWS = 60
KEYS = KeySet.from_values(g=["a", "b", "c"])
BUDGET = dp.ApproxDP(10.0, 1e-6)
SEED = 5
#: Poisons, each (value in the victim's rows, value in the other rows, dtype).
POISONS: dict[str, tuple[Any, Any, str]] = {
    "text": ("abc", "1", "str"),  # a CAST to a number fails on the victim's rows only
    "huge": (2**63 - 1, 0, "int64"),  # arithmetic overflows on them
    "null": (None, 1.0, "Float64"),  # NULL there only
    "flag": (1, 0, "int64"),  # read as a unit, a key or a count, it moves the result
}
KINDS = list(POISONS)


def crowd(victim: bool, dated: bool = False) -> pd.DataFrame:
    """PEOPLE persons, a few rows each; with ``victim``, person VICTIM's three rows
    (last); with ``dated``, a DATE column ``d`` too."""
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {
            "uid": rng.integers(0, PEOPLE, ROWS),
            "g": rng.choice(["a", "b", "c"], ROWS),
            "x": rng.uniform(0.0, 10.0, ROWS),
            "k": rng.integers(0, 4, ROWS),
        }
    )
    if victim:
        extra = pd.DataFrame({"uid": [VICTIM] * 3, "g": ["a"] * 3, "x": [9.5] * 3, "k": [1] * 3})
        frame = pd.concat([frame, extra], ignore_index=True)
    if dated:
        days = (np.arange(len(frame)) * 17) % 900
        frame["d"] = [dt.date(2020, 1, 1) + dt.timedelta(days=int(n)) for n in days]
    return frame


def with_shadows(
    frame: pd.DataFrame, names: list[str], shift: int = 0, kinds: list[str] = KINDS
) -> pd.DataFrame:
    """``frame`` with one more column per name: name ``i`` holds the poison
    ``kinds[(i + shift) % len(kinds)]`` in the victim's rows, a harmless value of the
    same type elsewhere."""
    victim = (frame["uid"] == VICTIM).to_numpy() if "uid" in frame else np.zeros(len(frame), bool)
    columns: dict[str, Any] = {}
    for i, name in enumerate(names):
        poison, harmless, dtype = POISONS[kinds[(i + shift) % len(kinds)]]
        columns[name] = pd.array([poison if v else harmless for v in victim], dtype=dtype)
    return pd.concat([frame, pd.DataFrame(columns, index=frame.index)], axis=1)


def keep(frame: pd.DataFrame, victim: bool) -> pd.DataFrame:
    """``frame``, without the victim's rows unless ``victim`` (its neighbour)."""
    if victim:
        return frame
    return frame[frame["uid"] != VICTIM].reset_index(drop=True)


# ------------------------------------------------------------------------ front doors
def open_session(
    frame: pd.DataFrame, door: str = "pandas", spark: Any = None, unit: str = "uid"
) -> dp.Session:
    kwargs: dict[str, Any] = {"privacy_unit": unit, "budget": BUDGET, "rng": SEED}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        if door == "pandas":
            return dp.Session.from_pandas(frame, **kwargs)
        if door == "arrow":
            table = pa.Table.from_pandas(frame, preserve_index=False)
            return dp.Session.from_arrow(table, **kwargs)
        if door == "duckdb":
            # A real table in the analyst's own database.
            connection = duckdb.connect()
            connection.register("incoming", frame)
            connection.execute("CREATE TABLE visits AS SELECT * FROM incoming")
            connection.unregister("incoming")
            return dp.Session.from_duckdb(connection, "visits", **kwargs)
        if door == "spark":
            return dp.Session.from_spark(spark.createDataFrame(frame), **kwargs)
    raise AssertionError(door)


# ---------------------------------------------------------------------- the checker
Action = Callable[[dp.Session], Any]


def outcome(session: dp.Session, action: Action) -> str:
    """What the analyst sees: ``ok: <result>``, ``refused: <dpkit error>`` (then nothing
    was spent), or what must never happen: ``LOCKED``, ``NOT DPKIT``, ``SPENT``."""
    before = (session.spent, len(session.history))
    try:
        result = action(session)
    except SessionLocked as err:
        return f"LOCKED: {err}"
    except DPError as err:
        if (session.spent, len(session.history)) != before or before[1]:
            return f"SPENT, then refused: {type(err).__name__}: {err}"
        return f"refused: {type(err).__name__}"
    except Exception as err:  # the attack's point: any other exception
        return f"NOT DPKIT: {type(err).__name__}: {err}"
    return f"ok: {result}"


def opened(frame: pd.DataFrame, action: Action, **kwargs: Any) -> str:
    """``outcome`` on a Session of ``frame``; a refusal at creation is one too."""
    try:
        session = open_session(frame, **kwargs)
    except DPError as err:
        return f"refused: at creation: {type(err).__name__}"
    return outcome(session, action)


_CLEAN: dict[tuple[str, bool], str] = {}


def clean(key: str, action: Action, dated: bool = False) -> dict[str, str]:
    """The outcomes on the clean neighbours (from_pandas), computed once per ``key``."""
    out = {}
    for victim in (True, False):
        if (key, victim) not in _CLEAN:
            _CLEAN[key, victim] = opened(crowd(victim, dated), action)
        out["clean+victim" if victim else "clean"] = _CLEAN[key, victim]
    return out


def shadowed(
    names: list[str],
    shift: int,
    key: str,
    action: Action,
    dated: bool = False,
    kinds: list[str] = KINDS,
    **kwargs: Any,
) -> dict[str, str]:
    """The outcomes on the neighbours with the shadow columns and without them."""
    seen = clean(key, action, dated)
    poisoned, neighbour = _poisoned(tuple(names), shift, dated, tuple(kinds))
    seen["shadow+victim"] = opened(poisoned, action, **kwargs)
    seen["shadow"] = opened(neighbour, action, **kwargs)
    return seen


@functools.cache
def _poisoned(
    names: tuple[str, ...], shift: int, dated: bool, kinds: tuple[str, ...]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The shadowed table and its neighbour without the victim, built once per
    arguments (~40 ms for a column per internal name; the query shapes of one front
    door, case and shift share them). Read only: the front doors copy them."""
    poisoned = with_shadows(crowd(True, dated), list(names), shift, list(kinds))
    return poisoned, keep(poisoned, False)


def check(seen: dict[str, str]) -> None:
    """``seen``: outcome by table. The shadowed tables are either all refused alike,
    before the charge (a refusal on the schema only), or each gives exactly the result
    of its clean twin (the same rows without the shadow columns)."""
    bad = {t: o[:2000] for t, o in seen.items() if not o.startswith(("ok", "refused"))}
    assert not bad, bad
    assert seen["clean"].startswith("ok") and seen["clean+victim"].startswith("ok"), seen
    shadows = {t: o for t, o in seen.items() if t.startswith("shadow")}
    refusals = {o for o in shadows.values() if o.startswith("refused")}
    if refusals:
        assert set(shadows.values()) == refusals and len(refusals) == 1, shadows
        return
    for table, result in shadows.items():
        twin = "clean+victim" if table.endswith("+victim") else "clean"
        assert result == seen[twin], (table, result, seen[twin])


def evaluated(query: Query) -> Action:
    def run(session: dp.Session) -> str:
        return repr(session.evaluate(query, budget=1.0).dataframe.to_dict("list"))

    return run


# ---------------------------------------------------------------------- query shapes
SHAPES: dict[str, Query] = {
    "count": Query().bound(max_rows=5).count(),
    "sum_mean": Query().bound(max_rows=5).sum("x", bounds=(0, 10)).mean("x", bounds=(0, 10)),
    "quantile": Query().bound(max_rows=5).quantile("x", [0.25, 0.5], bounds=(0, 10)),
    "max": Query().bound(max_rows=5).max("x", bounds=(0, 10)).min("x", bounds=(0, 10)),
    "count_distinct": Query().bound(max_rows=5).count_distinct().count_distinct("k"),
    "public_keys": Query()
    .group_by("g", keys=KEYS)
    .bound(max_rows=5, max_groups=2)
    .count()
    .sum("x", bounds=(0, 10))
    .median("x", bounds=(0, 10)),
    "private_keys": Query().group_by("g", keys="private").bound(max_rows=5, max_groups=2).count(),
    "two_keys": Query()
    .group_by("g", "k", keys=KeySet.from_values(g=["a", "b", "c"], k=[0, 1, 2, 3]))
    .bound(max_rows=3, max_groups=3)
    .count()
    .count_distinct(),
    "bins": Query().group_by_bins("x", [0, 5, 10]).bound(max_rows=5, max_groups=2).count(),
    "total": Query()
    .group_by("g", keys=KEYS)
    .bound(max_total_rows=6, max_groups=2)
    .count()
    .sum("x", bounds=(0, 10)),
    "per_person": Query()
    .per_person(n="count", s=("sum", "x"), top=("max", "g"))
    .bound(max_rows=1)
    .sum("n", bounds=(0, 10))
    .sum("s", bounds=(0, 50)),
    "filter_with_column": Query()
    .filter("x > 2")
    .with_column("y", "x * 2")
    .bound(max_rows=5)
    .sum("y", bounds=(0, 20))
    .quantile("y", [0.5], bounds=(0, 20)),
}

#: (front door, case, shift of the poisons): each name meets a different poison in
#: each; the slow run adds every other combination.
_DEFAULT = [("pandas", "as_written", 0), ("pandas", "upper", 2), ("arrow", "mixed", 1)]
_DEFAULT += [("duckdb", "upper", 3)]
_SLOW = [
    (door, case, shift)
    for door in ("pandas", "arrow", "duckdb")
    for case in CASES
    for shift in range(len(KINDS))
    if (door, case, shift) not in _DEFAULT
]


def _shape_params() -> list[Any]:
    out = []
    for combination in _DEFAULT + _SLOW:
        marks = [pytest.mark.slow] if combination in _SLOW else []
        door, case, shift = combination
        for shape in SHAPES:
            name = f"{door}-{case}-{shift}-{shape}"
            out.append(pytest.param(door, case, shift, shape, marks=marks, id=name))
    return out


@pytest.mark.parametrize("door, case, shift, shape", _shape_params())
def test_shadow_columns_are_ignored_by_every_query_shape(
    door: str, case: str, shift: int, shape: str
) -> None:
    """The table holds a column for every internal name (but the __dpkit ones), in the
    given case; the victim's rows hold the poisons. Every query shape gives exactly the
    result it gives on the same rows without those columns (compared with from_pandas:
    the front door does not matter either)."""
    names = [CASES[case](n) for n in PLAIN]
    action = evaluated(SHAPES[shape])
    check(shadowed(names, shift, shape, action, door=door))


@pytest.mark.parametrize("case", ["as_written", "upper"])
@pytest.mark.parametrize("shape", ["count", "per_person", "private_keys", "filter_with_column"])
def test_dpkit_prefixed_shadow_columns_run_cleanly_or_are_refused_by_name(
    case: str, shape: str
) -> None:
    """Columns named like dpkit's __dpkit_ names (per_person's step, the join's
    truncation, the sources' registered tables): a single-table Session accepts them;
    a query ignores them or is refused by name (per_person), before the charge, on
    every table alike."""
    names = [CASES[case](n) for n in PREFIXED]
    check(shadowed(names, 0, shape, evaluated(SHAPES[shape])))


# ------------------------------------------------------------------------------ SQL
STATEMENTS = {
    "aggregates": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, "
    "max_rows_contributed = 5) COUNT(*) AS n, SUM(x, contribution_bounds_per_row => (0, 10)) "
    "AS s, AVG(x * 2, contribution_bounds_per_row => (0, 20)), COUNT(x), "
    "PERCENTILE_CONT(x, 0.5, contribution_bounds_per_row => (0, 10)) AS m, "
    "COUNT(DISTINCT uid) AS persons FROM data WHERE k >= 1",
    "group_by": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-7, "
    "max_rows_contributed = 5, max_groups_contributed = 2) g, COUNT(*) AS n, "
    "MAX(x, contribution_bounds_per_row => (0, 10)) AS top FROM data GROUP BY g",
    "per_person": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) COUNT(*) AS c, "
    "AVG(s, contribution_bounds_per_row => (0, 100)) AS a FROM (SELECT uid, SUM(x * 2) AS s, "
    "COUNT(k) AS n FROM data WHERE x > 1 GROUP BY uid HAVING COUNT(*) >= 2 AND MAX(x) > 1) AS p",
}
#: Names the SQL layer derives (dpkit.analytics._sql_query: ``fresh``, ``having_N``):
#: a table column of the same name must not be read in their place.
SQL_DERIVED = ["avg_value", "s_value", "count_not_null", "group_1", "having_1", "having_2"]


def sql_run(statement: str) -> Action:
    def run(session: dp.Session) -> str:
        # Values only: an unnamed output column is named after a derived column, whose
        # name avoids the schema's (public), so the name may differ.
        return repr(list(session.sql(statement).dataframe.to_dict("list").values()))

    return run


@pytest.mark.parametrize("case", ["upper", pytest.param("as_written", marks=pytest.mark.slow)])
@pytest.mark.parametrize("statement", list(STATEMENTS))
def test_sql_front_door_ignores_shadow_columns(case: str, statement: str) -> None:
    names = [CASES[case](n) for n in [*PLAIN, *SQL_DERIVED]]
    action = sql_run(STATEMENTS[statement])
    check(shadowed(names, 1, f"sql-{statement}", action))


# -------------------------------------------------------------------------- describe
#: describe's derived columns (``<column>__flag``, ``__epoch``, ``__fractional``...,
#: read from the sources) for the columns x and d, and those of the epoch.
DESCRIBE_DERIVED = sorted(
    {
        f"{column}{suffix}"
        for suffix in re.findall(
            r"f\"\{[a-z]+\}(__[a-z]+)\"",
            "".join(p.read_text(encoding="utf-8") for p in SOURCES.rglob("*.py")),
        )
        for column in ("x", "d", "d__epoch")
    }
)


def summary(session: dp.Session) -> str:
    result = describe(session, columns=["g", "x", "k", "d"], max_rows=3)
    return repr((result.budget_split, result.columns, session.spent))


@pytest.mark.parametrize("case", ["upper", pytest.param("as_written", marks=pytest.mark.slow)])
def test_describe_ignores_shadow_columns(case: str) -> None:
    """describe's own derived columns (x__fractional, x__outside, d__epoch, ...) avoid
    every table column, whatever its case: the summary is that of the table without
    the shadows."""
    assert "x__fractional" in DESCRIBE_DERIVED and "d__epoch" in DESCRIBE_DERIVED
    names = [CASES[case](n) for n in [*PLAIN, *DESCRIBE_DERIVED]]
    check(shadowed(names, 0, "describe", summary, dated=True))


# ------------------------------------------------------------------------- synthesis
def synthesized(domains: dict[str, Any]) -> Action:
    def run(session: dp.Session) -> str:
        data = session.synthesize(
            budget=1.0,
            method="mst",
            columns=list(domains),
            domains=domains,
            iterations=20,
            rows=10,
        )
        return repr((data.data.to_dict("list"), session.spent))

    return run


SYNTH_DOMAINS: dict[str, dict[str, Any]] = {
    "public": {"g": ["a", "b", "c"], "x": (0.0, 10.0), "k": [0, 1, 2, 3]},
    "private": {"g": "private", "x": "private", "k": [0, 1, 2, 3], "d": "private"},
}
#: The derived columns of private domains (dpkit.analytics._synthesis_domains.days_column).
SYNTH_DERIVED = ["d_days", "d_seconds", "x_days"]


@pytest.mark.parametrize("domains", list(SYNTH_DOMAINS))
@pytest.mark.parametrize("case", ["as_written", "upper"])
def test_synthesis_ignores_shadow_columns(domains: str, case: str) -> None:
    names = [CASES[case](n) for n in [*PLAIN, *SYNTH_DERIVED]]
    action = synthesized(SYNTH_DOMAINS[domains])
    check(shadowed(names, 3, f"synth-{domains}", action, dated=True))


def _synthesis_table(name: str) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {
            "uid": rng.integers(0, 150, 400),
            "g": rng.choice(["a", "b", "c"], 400),
            name: rng.uniform(0.0, 10.0, 400),
        }
    )


def _synthesis_session(frame: Any, engine: str = "duckdb") -> dp.Session:
    kwargs: dict[str, Any] = {
        "privacy_unit": "uid",
        "budget": dp.ApproxDP(20.0, 1e-6),
        "selection_delta": 1e-7,
        "rng": SEED,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        if engine == "spark":
            return dp.Session.from_spark(frame, **kwargs)
        return dp.Session.from_pandas(frame, **kwargs)


def _synthesize_g_and(column: str, category: Any) -> Action:
    def run(session: dp.Session) -> str:
        data = session.synthesize(
            budget=1.0,
            method="mst",
            columns=["g", column],
            domains={"g": category, column: (0.0, 10.0)},
            iterations=20,
            rows=8,
        )
        return repr(list(data.data.to_dict("list").values()))

    return run


@pytest.mark.parametrize("domains", ["public", "private"])
@pytest.mark.parametrize("name", ["__c", "__k", "__C", "__K"])
def test_synthesis_with_a_column_named_like_a_code_table_column(name: str, domains: str) -> None:
    """DEFECT (rule 1; found by this review). Synthesis counts the cells of every
    column in one statement (dpkit.analytics.engines._cells.cell_counts_sql): a
    categorical column is coded by ``LEFT JOIN __d{i}``, a VALUES table of columns
    ``(__k, __c)``, while a numeric (date, boolean...) column is read *unqualified*
    (``_code_sql``: ``engine.canonical_key_sql(engine.q(column.name), ...)``). A
    numeric column named ``__c`` or ``__k`` (any case) next to a categorical one makes
    the reference ambiguous, and DuckDB and Spark refuse to bind the statement. With
    public domains the binder error (an EngineError that quotes the generated SQL)
    comes before the charge; with a domain found privately the statement is built and
    bound only after the reserve's charge (dpkit.analytics._synthesis, ``run`` of the
    discovery branch): the run fails after the charge and locks the Session, the whole
    remaining budget charged.

    Correct: the run of the same table with the column renamed ``_c`` (``__src.``-
    qualified, the reference means the same), or a refusal by name before the charge.
    Fix: qualify the column in ``_code_sql`` (``f"__src.{engine.q(column.name)}"``),
    and bind a statement of the same shape before the reserve is charged."""
    assert name.casefold() in INTERNAL
    twin = "_" + name.lstrip("_")  # sorts where ``name`` does, among the columns
    category: Any = ["a", "b", "c"] if domains == "public" else "private"
    attacked, reference = (
        outcome(_synthesis_session(_synthesis_table(column)), _synthesize_g_and(column, category))
        for column in (name, twin)
    )
    assert reference.startswith("ok"), reference
    assert attacked == reference or attacked in (
        "refused: InvalidParameter",
        "refused: DataError",
    ), attacked


# ----------------------------------------------------------------------- partitions
def partitioned(column: str) -> Action:
    def run(session: dp.Session) -> str:
        parts = session.partition(column, ["a", "b", "c"], budgets=1.0)
        query = Query().bound(max_rows=5).count().sum("x", bounds=(0, 10)).count_distinct()
        return repr([parts[k].evaluate(query, budget=1.0).dataframe.to_dict("list") for k in "abc"])

    return run


def test_partition_ignores_shadow_columns() -> None:
    names = [CASES["upper"](n) for n in PLAIN]
    check(shadowed(names, 2, "partition-g", partitioned("g")))


#: Names of the partition's and the bounding's SQL (SqlEngine._source, _rows,
#: _bounded; per_person; the join's truncation) for a unit or a partition column.
ROLE_NAMES = ["__u", "__pu", "__pc", "__hl", "__p", "__q", "__r", "__src", "__dpkit_pb0"]


def renamed(key: str, action: Action, old: str, new: str, attack: Action, **kw: Any) -> dict:
    """The clean outcomes (``action``) and those of ``attack`` on the clean tables with
    the column ``old`` renamed ``new``."""
    seen = clean(key, action)
    for victim in (True, False):
        frame = crowd(victim).rename(columns={old: new})
        seen["shadow+victim" if victim else "shadow"] = opened(frame, attack, **kw)
    return seen


@pytest.mark.parametrize("case", ["upper", pytest.param("as_written", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", ROLE_NAMES[:7])
def test_a_partition_column_named_like_an_internal_name(name: str, case: str) -> None:
    assert name in INTERNAL
    column = CASES[case](name)
    check(renamed("partition-g", partitioned("g"), "g", column, partitioned(column)))


@pytest.mark.parametrize("case", ["as_written", "upper"])
@pytest.mark.parametrize("name", ["__u", "__pu", "__src", "__dpkit_pb0"])
@pytest.mark.parametrize("shape", ["private_keys", "per_person"])
def test_a_privacy_unit_named_like_an_internal_name(name: str, case: str, shape: str) -> None:
    """The unit is named like dpkit's unit alias (``__u``), the partition's (``__pu``),
    per_person.s (``__dpkit_pb0``): the results are those of the unit named ``uid`` (for
    the __dpkit prefix, per_person is refused by name, before the charge)."""
    assert name in INTERNAL
    unit = CASES[case](name)
    action = evaluated(SHAPES[shape])
    check(renamed(shape, action, "uid", unit, action, unit=unit))


@pytest.mark.slow
@pytest.mark.parametrize("case", ["as_written", "upper"])
@pytest.mark.parametrize("name", INTERNAL)
def test_a_privacy_unit_or_partition_named_like_any_internal_name(name: str, case: str) -> None:
    column = CASES[case](name)
    for shape in ("count", "per_person"):
        action = evaluated(SHAPES[shape])
        check(renamed(shape, action, "uid", column, action, unit=column))
    check(renamed("partition-g", partitioned("g"), "g", column, partitioned(column)))


# ----------------------------------------- expressions over columns named like aliases
def expressions(x: str, k: str, g: str) -> dict[str, Query]:
    return {
        "rows": Query()
        .filter(f"{k} >= 1")
        .with_column("y", f"{x} * 2")
        .with_column("h", f"upper({g})")
        .group_by("h", keys=KeySet.from_values(h=["A", "B", "C"]))
        .bound(max_rows=5, max_groups=2)
        .count()
        .sum("y", bounds=(0, 20))
        .quantile("y", [0.5], bounds=(0, 20))
        .count_distinct(),
        "per_person": Query()
        .filter(f"{x} > 1")
        .per_person(s=("sum", f"{x} + {k}"), top=("max", g))
        .bound(max_rows=1)
        .sum("s", bounds=(0, 100))
        .max("s", bounds=(0, 100)),
    }


@pytest.mark.parametrize(
    "names", [("__xr", "__i", "__c0"), ("__X", "__GI", "__V0_0"), ("__v", "__n", "__e")]
)
@pytest.mark.parametrize("query", ["rows", "per_person"])
def test_expressions_over_columns_named_like_internal_names(
    names: tuple[str, str, str], query: str
) -> None:
    """Query refuses __ names where it names a column itself (``sum("__x")``), but an
    expression may read one (the schema is public): filter, with_column and
    per_person's arguments read the table's column, never dpkit's alias of that name."""
    assert all(n.casefold() in {m.casefold() for m in INTERNAL} for n in names)
    x, k, g = names
    seen = clean(f"expr-{query}", evaluated(expressions("x", "k", "g")[query]))
    attack = evaluated(expressions(x, k, g)[query])
    for victim in (True, False):
        frame = crowd(victim).rename(columns={"x": x, "k": k, "g": g})
        seen["shadow+victim" if victim else "shadow"] = opened(frame, attack)
    check(seen)


# --------------------------------------------------------------- several tables, joins
def people(victim: bool) -> pd.DataFrame:
    frame = pd.DataFrame({"uid": np.arange(PEOPLE), "age": np.arange(PEOPLE) * 3 + 18})
    if victim:
        frame = pd.concat([frame, pd.DataFrame({"uid": [VICTIM], "age": [77]})], ignore_index=True)
    return frame


REGIONS = pd.DataFrame({"g": ["a", "b", "c"], "region": ["n", "s", "n"]})
REGION_KEYS = KeySet.from_values(region=["n", "s"])

JOINS: dict[str, Any] = {
    "private": Query.from_table("visits")
    .join("people", on="uid", truncate=2, columns=["age"])
    .bound(max_rows=5)
    .count()
    .sum("age", bounds=(0, 100))
    .quantile("age", [0.5], bounds=(0, 100)),
    "left_per_person": Query.from_table("people")
    .join("visits", on="uid", how="left", truncate=3, columns=["x"])
    .per_person(n=("count", "x"), s=("sum", "x"))
    .bound(max_rows=1)
    .sum("n", bounds=(0, 3))
    .sum("s", bounds=(0, 30)),
    "public": Query.from_table("visits")
    .join("regions", on="g", columns=["region"])
    .group_by("region", keys=REGION_KEYS)
    .bound(max_rows=5, max_groups=2)
    .count(),
    "public_private_keys": Query.from_table("visits")
    .join("regions", on="g", columns=["region"])
    .group_by("region", keys="private")
    .bound(max_total_rows=5, max_groups=2)
    .count(),
    "sql": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, max_rows_contributed = 5, "
    "join_truncate = 2) COUNT(*) AS n, AVG(age, contribution_bounds_per_row => (0, 100)) AS a "
    "FROM visits JOIN people USING (uid)",
    "sql_public": "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-7, "
    "max_rows_contributed = 5, max_groups_contributed = 2) region, COUNT(*) AS n "
    "FROM visits JOIN regions USING (g) GROUP BY region",
}


def shop(tables: dict[str, pd.DataFrame], public: pd.DataFrame) -> dp.Session:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dp.InsecureRandomWarning)
        return dp.Session.from_tables(
            tables, privacy_unit="uid", public={"regions": public}, budget=BUDGET, rng=SEED
        )


@functools.cache
def _join_shadows() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """visits and people (with the victim) and the public table, with the upper-case
    shadow columns of test_joins_ignore_shadow_columns: built once per process (~0.1 s
    each: a column per internal name), the same for every join. Read only: the front
    door copies them."""
    names = [CASES["upper"](n) for n in PLAIN]
    return (
        with_shadows(crowd(True), names),
        with_shadows(people(True), names, 1),
        with_shadows(REGIONS, names, 2),
    )


@pytest.mark.parametrize("join", list(JOINS))
def test_joins_ignore_shadow_columns(join: str) -> None:
    """Session.from_tables with shadow columns (upper case) in the base table, the
    joined private table and the public table; the builder brings the columns it names.
    SQL brings every column of the joined table, so there the shadows are in the base
    table only (two tables' columns of one name are refused by name, before the
    charge: that refusal is not what this test is after)."""
    sql = isinstance(JOINS[join], str)
    action = sql_run(JOINS[join]) if sql else evaluated(JOINS[join])
    shadowed_visits, shadowed_people, shadowed_regions = _join_shadows()
    seen = {}
    for victim in (True, False):
        suffix = "+victim" if victim else ""
        tables = {"visits": crowd(victim), "people": people(victim)}
        seen[f"clean{suffix}"] = outcome(shop(tables, REGIONS), action)
        tables["visits"] = keep(shadowed_visits, victim)
        public = REGIONS
        if not sql:
            tables["people"] = keep(shadowed_people, victim)
            public = shadowed_regions
        seen[f"shadow{suffix}"] = outcome(shop(tables, public), action)
    check(seen)


@pytest.mark.parametrize(
    "names",
    [
        # The refusal is by prefix (casefolded), whatever follows it: the default run
        # tries every stem once (__dpkit_pk0, __dpkit_tu, ...: 18 names), the slow run
        # adds the other numbers of the numbered stems (__dpkit_pk1, __dpkit_pk0_0,
        # ...: 30 more, each a Session over several tables opened until it refuses).
        pytest.param(PREFIXED_STEMS, id="stems"),
        pytest.param(PREFIXED_REPEATS, id="numbered", marks=pytest.mark.slow),
    ],
)
@pytest.mark.parametrize(
    "case",
    [
        "as_written",
        pytest.param("upper", marks=pytest.mark.slow),
        pytest.param("mixed", marks=pytest.mark.slow),
    ],
)
def test_several_tables_refuse_the_dpkit_prefix_at_creation(case: str, names: list[str]) -> None:
    visits, persons = crowd(True), people(True)  # read only: the front door copies them
    for name in names:
        column = CASES[case](name)
        with pytest.raises(DataError, match="__dpkit"):
            shop({"visits": visits.assign(**{column: 1}), "people": persons}, REGIONS)


# ---------------------------------------------------------------------------- Spark
@pytest.mark.parametrize(
    "shapes",
    [
        # per_person: the statement with the most aliases of its own; the rest slow
        # (Spark runs each query in seconds).
        ("per_person",),
        pytest.param(tuple(s for s in SHAPES if s != "per_person"), marks=pytest.mark.slow),
    ],
)
def test_spark_ignores_shadow_columns(spark: Any, shapes: tuple[str, ...]) -> None:
    """from_spark (case-insensitive analysis, its own SQL) with upper-case shadows
    holding text and flags: the same results as DuckDB on the rows without them."""
    names = [CASES["upper"](n) for n in PLAIN]
    for shape in shapes:
        action = evaluated(SHAPES[shape])
        check(shadowed(names, 1, shape, action, kinds=["text", "flag"], door="spark", spark=spark))


@pytest.mark.slow
@pytest.mark.parametrize("domains", ["public", "private"])
def test_spark_synthesis_with_a_column_named_like_a_code_table_column(
    spark: Any, domains: str
) -> None:
    """The DEFECT of test_synthesis_with_a_column_named_like_a_code_table_column, on
    Spark (AMBIGUOUS_REFERENCE; SessionLocked with a private domain)."""
    category: Any = ["a", "b", "c"] if domains == "public" else "private"
    attacked, reference = (
        outcome(
            _synthesis_session(spark.createDataFrame(_synthesis_table(column)), "spark"),
            _synthesize_g_and(column, category),
        )
        for column in ("__K", "_K")
    )
    assert reference.startswith("ok"), reference
    assert attacked == reference or attacked in (
        "refused: InvalidParameter",
        "refused: DataError",
    ), attacked
