"""Attacks on a Session over several tables (``Session.from_tables``): joins, public
tables, ``public_query``, ``KeySet.from_table`` and partitions by table.

The analyst of the threat model (DESIGN.md, "Threat model of the Session";
docs/analytics.md) knows the schema and the public tables, never a private row, and
tries to (1) make a query fail after its charge on some databases only, (2) make Python
and the engine disagree on which keys are equal, (3) blow up the cost of a query beyond
public numbers, (4) read private rows or files through ``public_query``, change a
public table after creation, or get a joined view whose rows for one person depend on
another person's rows (the stability argument of dpkit.analytics._joins).

Each test is the attack as the analyst would run it and passes when dpkit defends. An
attack that works today is kept, marked ``xfail(strict=True)`` with the defect as its
reason: fixing the defect turns it into a failure (XPASS) to be unmarked.
"""

from __future__ import annotations

import contextlib
import decimal
import functools
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpkit as dp
from dpkit.analytics import KeySet, Query
from dpkit.errors import DataError, InvalidParameter

#: One tiny budget per query: only success or failure (and the spend) is observed.
TINY = dp.PureDP(1e-6)


def open_session(
    private: dict[str, Any],
    public: dict[str, Any] | None = None,
    *,
    unit: str | dict[str, str] = "person",
    **options: Any,
) -> dp.Session:
    return dp.Session.from_tables(
        private, privacy_unit=unit, public=public, budget=dp.PureDP(1.0), rng=0, **options
    )


def exact(session: dp.Session, query: Query, salt: int = 7) -> dict[Any, list[Any]]:
    """The exact (noise-free) aggregates of ``query``: the engine's plan, run directly."""
    view, stripped = session._view_for(query, salt)
    compiled = view._compile(stripped, 0.5, salt=salt)
    return dict(view._engine.aggregate(compiled.plan))


def count(session: dp.Session, query: Query, salt: int = 7) -> int:
    return int(exact(session, query, salt)[()][0])


def outcome(session: dp.Session, query: Query) -> str:
    """What the analyst sees of one query: ok or the error's class (its text carries the
    time for SessionLocked), and what was spent."""
    try:
        session.evaluate(query, budget=TINY)
        seen = "ok"
    except dp.DPError as err:
        seen = type(err).__name__
    return f"{seen}; spent {session.spent!r}"


def visits(n: int = 60, persons: int = 12, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "person": rng.integers(0, persons, n),
            "region": rng.choice(["n", "s", "e"], n),
            "amount": rng.uniform(0.0, 10.0, n).round(2),
        }
    )


def people(persons: int = 12, seed: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(persons), 2)  # two rows per person: truncation matters
    return pd.DataFrame(
        {
            "person": ids,
            "age": rng.integers(18, 90, ids.size),
            "city": rng.choice(["a", "b"], ids.size),
        }
    )


REGIONS = pd.DataFrame(
    {"region": ["n", "s", "e", "n"], "label": ["North", "South", "East", "Nord"]}
)


def shop() -> dp.Session:
    return open_session({"visits": visits(), "people": people()}, {"regions": REGIONS.copy()})


@pytest.fixture(scope="module")
def refusing_shop() -> dp.Session:
    """One ``shop()`` for the tests whose every call on it must be refused before the
    charge (each case asserts that it still has spent nothing and recorded nothing, and
    that its public tables and settings are intact): a refusal leaves no state, so the
    next case meets the Session as new. Opening one is ~40 ms of DuckDB catalog set-up;
    a test that spends or may change the Session opens its own."""
    return shop()


# ---------------------------------------------------------------- refusals before the charge
# Every refusal reads the schema and the public tables only: it spends nothing, leaves
# no ledger record, and is the same on every database of the schema.

REFUSED: dict[str, Callable[[], Query]] = {
    "starts from a public table": lambda: Query.from_table("regions").count(),
    "private join without truncate": lambda: (
        Query.from_table("visits").join("people", on="person").bound(max_rows=1).count()
    ),
    "truncate on a public table": lambda: (
        Query.from_table("visits")
        .join("regions", on="region", truncate=1)
        .bound(max_rows=1)
        .count()
    ),
    "self-join": lambda: (
        Query.from_table("visits").join("visits", on="person", truncate=1).bound(max_rows=1).count()
    ),
    "the same table twice": lambda: (
        Query.from_table("visits")
        .join("regions", on="region")
        .join("regions", on={"label": "label"})
        .bound(max_rows=1)
        .count()
    ),
    "unknown table (case)": lambda: Query.from_table("VISITS").bound(max_rows=1).count(),
    "join key of another kind": lambda: (
        Query.from_table("visits")
        .join("people", on={"region": "age"}, truncate=1)
        .bound(max_rows=1)
        .count()
    ),
    "double key with integer key": lambda: (
        Query.from_table("visits")
        .join("people", on={"amount": "age"}, truncate=1)
        .bound(max_rows=1)
        .count()
    ),
    "the joined table's unit as a column": lambda: (
        Query.from_table("visits")
        .join("people", on="person", truncate=1, columns=["person"])
        .bound(max_rows=1)
        .count()
    ),
    "injection in on": lambda: (
        Query.from_table("visits")
        .join("regions", on={'region" OR 1=1 --': "region"})
        .bound(max_rows=1)
        .count()
    ),
    "injection in columns": lambda: (
        Query.from_table("visits")
        .join("regions", on="region", columns=['label", (SELECT 1) AS "x'])
        .bound(max_rows=1)
        .count()
    ),
    "keys from a private table": lambda: (
        Query.from_table("visits")
        .group_by("region", keys=KeySet.from_table("visits", "region"))
        .bound(max_rows=1, max_groups=1)
        .count()
    ),
    "keys from an unknown column": lambda: (
        Query.from_table("visits")
        .join("regions", on="region")
        .group_by("nope", keys=KeySet.from_table("regions", "nope"))
        .bound(max_rows=1, max_groups=1)
        .count()
    ),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refusals_come_before_the_charge(name: str, refusing_shop: dp.Session) -> None:
    session = refusing_shop
    query = REFUSED[name]()
    for run in (session.explain, session.evaluate):
        with pytest.raises((InvalidParameter, DataError)):
            run(query, budget=TINY)
    assert session.spent == dp.PureDP(0.0) and not session.history


def test_a_column_clash_ignoring_case_is_refused() -> None:
    # The engines resolve names ignoring case: "AMOUNT" of people would shadow (or be
    # shadowed by) visits' "amount" in every expression after the join.
    loud = people().assign(AMOUNT=1.0)
    session = open_session({"visits": visits(), "people": loud})
    query = Query.from_table("visits").join("people", on="person", truncate=1)
    with pytest.raises(InvalidParameter, match="clashes"):
        session.evaluate(query.bound(max_rows=1).sum("AMOUNT", bounds=(0, 1)), budget=TINY)
    assert session.spent == dp.PureDP(0.0)


def test_creation_refuses_units_of_different_kinds_and_reserved_names() -> None:
    text_ids = people().assign(person=lambda f: f["person"].astype(str))
    with pytest.raises(InvalidParameter):
        open_session({"visits": visits(), "people": text_ids})
    for bad in ({"__x": visits()}, {"v": visits(), "V": visits()}):
        with pytest.raises(InvalidParameter):
            open_session(bad)
    with pytest.raises(InvalidParameter):
        open_session({"visits": visits()}, {"VISITS": REGIONS})


def test_a_single_table_session_refuses_joins_and_table_keys() -> None:
    session = dp.Session.from_pandas(visits(), privacy_unit="person", budget=dp.PureDP(1.0))
    for query in (
        Query.from_table("visits").bound(max_rows=1).count(),
        Query().join("regions", on="region").bound(max_rows=1).count(),
        Query()
        .group_by("region", keys=KeySet.from_table("regions", "region"))
        .bound(max_rows=1, max_groups=1)
        .count(),
    ):
        with pytest.raises(InvalidParameter):
            session.evaluate(query, budget=TINY)
    with pytest.raises(InvalidParameter):
        session.public_query("SELECT 1")
    assert session.spent == dp.PureDP(0.0)


# ---------------------------------------------------------------- public_query escapes
ESCAPES = [
    "SELECT * FROM visits",
    "SELECT * FROM __dpkit_t0",
    "SELECT * FROM query_table('__dpkit_t0')",
    "SELECT * FROM secret_frame",  # a pandas DataFrame of the caller (replacement scan)
    "SELECT * FROM read_csv('{csv}')",
    "SELECT * FROM '{csv}'",
    "SELECT * FROM read_text('{csv}')",
    "SELECT * FROM read_blob('{csv}')",
    "SELECT * FROM glob('{dir}/*')",
    "SELECT * FROM sniff_csv('{csv}')",
    "SELECT * FROM query('SELECT * FROM read_csv(''{csv}'')')",
    "ATTACH '{dir}/x.db' AS x",
    "COPY regions TO '{dir}/out.csv'",
    "EXPORT DATABASE '{dir}/export'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "SET python_scan_all_frames = true",
    "RESET enable_external_access",
    "PRAGMA database_list",
    "SELECT 1; SELECT 2",
    "SELECT * FROM regions; DROP TABLE regions",
    "DROP TABLE regions",
    "DELETE FROM regions",
    "INSERT INTO regions VALUES ('x', 'y')",
    "UPDATE regions SET label = 'z'",
    "CREATE TABLE z AS SELECT 1",
    "CREATE MACRO m() AS 1",
    "DETACH memory",
    "CHECKPOINT",
    "SELECT getenv('HOME')",
]


@pytest.mark.parametrize("template", ESCAPES)
def test_public_query_reads_public_tables_only_and_changes_nothing(
    template: str, tmp_path: Path, refusing_shop: dp.Session
) -> None:
    secret_frame = visits()  # noqa: F841 -- what a replacement scan would find
    csv = tmp_path / "secret.csv"
    csv.write_text("person,salary\n1,52000\n")
    session = refusing_shop
    sql = template.format(csv=csv, dir=tmp_path)
    with pytest.raises((InvalidParameter, DataError)):
        session.public_query(sql)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.csv"]
    frame = session.public_query("SELECT * FROM regions ORDER BY region, label")
    assert frame.to_dict("list") == REGIONS.sort_values(["region", "label"]).to_dict("list")
    settings = session.public_query(
        "SELECT value FROM duckdb_settings() WHERE name = 'enable_external_access'"
    )
    assert settings["value"].tolist() == ["false"]
    assert session.spent == dp.PureDP(0.0)


@pytest.mark.parametrize(
    "sql",
    [
        "WITH d AS (DELETE FROM regions RETURNING *) SELECT count(*) FROM d",
        "WITH d AS (INSERT INTO regions VALUES ('w', 'West') RETURNING *) SELECT 1 FROM d",
        "WITH d AS (UPDATE regions SET region = 'n' RETURNING *) SELECT 1 FROM d",
    ],
    ids=["delete", "insert", "update"],
)
def test_public_query_cannot_modify_a_public_table_through_a_cte(sql: str) -> None:
    # Found by this review: a data-modifying CTE parses as a SELECT. Refused on the tree,
    # and every public query runs in a transaction rolled back.
    session = shop()
    query = (
        Query.from_table("visits")
        .join("regions", on="region")
        .group_by("region", keys=KeySet.from_table("regions", "region"))
        .bound(max_rows=1, max_groups=1)
        .count()
    )
    before = str(session.explain(query, budget=0.1))
    fresh = shop()
    with contextlib.suppress(InvalidParameter, DataError):  # refused: the defence
        session.public_query(sql)
    after = session.public_query("SELECT * FROM regions ORDER BY region, label")
    assert after.to_dict("list") == REGIONS.sort_values(["region", "label"]).to_dict("list")
    # The multiplicity (cached or not) and the public keys are those read at creation.
    assert str(fresh.explain(query, budget=0.1)) == before
    assert exact(session, query) == exact(fresh, query)


# ---------------------------------------------------------------- public tables are read once
def test_a_public_file_changed_after_creation_changes_nothing(tmp_path: Path) -> None:
    csv, parquet = tmp_path / "regions.csv", tmp_path / "zones.parquet"
    REGIONS.to_csv(csv, index=False)
    pq.write_table(pa.table({"region": ["n", "s"], "zone": ["z1", "z2"]}), parquet)
    frame = REGIONS.copy()
    session = open_session({"visits": visits()}, {"regions": csv, "zones": parquet, "frame": frame})
    queries = [
        Query.from_table("visits")
        .join(table, on="region", columns=[column])
        .group_by(column, keys=KeySet.from_table(table, column))
        .bound(max_rows=2, max_groups=1)
        .count()
        for table, column in (("regions", "label"), ("zones", "zone"), ("frame", "label"))
    ]
    before = [exact(session, q) for q in queries]
    shown = [str(session.explain(q, budget=0.1)) for q in queries]
    public_before = session.public_query("SELECT * FROM zones ORDER BY region")

    # The owner (or anyone who can write the files) rewrites them: every key 'n', more
    # rows, another zone name; and mutates the DataFrame given.
    pd.DataFrame({"region": ["n"] * 50, "label": ["X"] * 50}).to_csv(csv, index=False)
    pq.write_table(pa.table({"region": ["n"] * 50, "zone": ["zz"] * 50}), parquet)
    frame.loc[:, "region"] = "n"
    frame.loc[:, "label"] = "X"

    assert [exact(session, q) for q in queries] == before
    assert [str(session.explain(q, budget=0.1)) for q in queries] == shown
    assert session.public_query("SELECT * FROM zones ORDER BY region").equals(public_before)


# ------------------------------------------------------------ rule 1: no failure after the charge
def decimal_tables(big: bool, where: str) -> tuple[dict[str, Any], dict[str, Any], Query]:
    """Neighbouring databases: one person's id or code is 10^30 (fits DECIMAL(38,0)) or
    a small number. Both sides' types are DECIMAL, the same key category."""
    value = decimal.Decimal(10**30 if big else 6)
    wide = pa.decimal128(38, 0)
    fine = pa.decimal128(38, 10)
    if where == "join key":
        private = {
            "visits": pa.table(
                {"person": [1, 2, 3], "code": pa.array([5, 7, value], wide)},
            )
        }
        public = {"codes": pa.table({"code": pa.array([5], fine), "label": ["x"]})}
        query = Query.from_table("visits").join("codes", on="code").bound(max_rows=1).count()
        return private, public, query
    # The person of id 10^30 has visits only (DECIMAL(38,10) cannot hold the id).
    private = {
        "visits": pa.table({"person": pa.array([1, 2, value], wide), "x": [1, 2, 3]}),
        "people": pa.table({"person": pa.array([1, 2, 3], fine), "age": [30, 40, 50]}),
    }
    if where == "partition":
        query = Query.from_table("visits").bound(max_rows=1).count()
    else:
        query = (
            Query.from_table("visits").join("people", on="person", truncate=1).bound(max_rows=1)
        ).count()
    return private, {}, query


@pytest.mark.parametrize("where", ["join key", "privacy unit", "partition"])
def test_decimal_keys_of_different_scales_cannot_fail_after_the_charge(where: str) -> None:
    # DECIMAL keys or units of one category but different scales would be compared in
    # DuckDB's common type, whose cast raises on a row >= 10^28 (found by this review):
    # they are refused on the schema, before anything is spent, whatever the rows.
    seen = []
    for big in (False, True):
        private, public, query = decimal_tables(big, where)
        try:
            session = open_session(private, public)
            if where == "partition":
                session = session.partition("age", [30, 40, 50], budgets=0.5, table="people")[30]
            seen.append(outcome(session, query))
        except InvalidParameter as err:
            seen.append(f"refused: {err}")
    assert seen[0] == seen[1]
    assert "SessionLocked" not in seen[0]


@pytest.mark.parametrize("scale", [(38, 10), (20, 2)])
def test_decimal_units_of_different_scales_are_one_equality(scale: tuple[int, int]) -> None:
    # A partition by another private table keeps 'unit IN (units assigned there)': with
    # DECIMAL units of different scales DuckDB would cast and round 5.5 to 6, putting
    # person 6's rows in person 5.5's part (found by this review). Such units are refused.
    d = decimal.Decimal
    with pytest.raises(InvalidParameter, match="same kind of value"):
        open_session(
            {
                "visits": pa.table({"person": pa.array([d(6)], pa.decimal128(38, 0)), "x": [1]}),
                "people": pa.table(
                    {"person": pa.array([d("5.5")], pa.decimal128(*scale)), "city": ["a"]}
                ),
            }
        )


def target_tables(case: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The target (person 0) present with a row that joins, present with a row that does
    not, or absent from people; one public table with NULLs and text in a number-like
    column, zero rates."""
    base = pd.DataFrame(
        {"person": [0, 1, 2, 3], "region": ["s", "n", "n", "e"], "amount": [1.0, 2.0, 3.0, 4.0]}
    )
    who = pd.DataFrame({"person": [0, 1, 2, 3], "age": [30, 0, 45, 51], "city": ["a"] * 4})
    if case == "no match":
        who = who.assign(person=[99, 1, 2, 3])
    elif case == "absent":
        who = who.iloc[1:]
        base = base.iloc[1:]
    rates = pd.DataFrame(
        {"region": ["n", "s", "e"], "rate": [0.0, 2.0, None], "code": ["5", "oops", None]}
    )
    return base, who, rates


LEFT_JOIN_QUERIES: dict[str, Callable[[Query], Query]] = {
    "filter on a NULL from the left join": lambda q: q.filter("age + 1 > 30"),
    "division by a joined zero": lambda q: q.filter("amount / rate > 1"),
    "integer division by a joined zero": lambda q: q.filter(
        "CAST(amount AS BIGINT) // CAST(age AS BIGINT) > 0"
    ),
    "cast of a joined text": lambda q: q.filter("CAST(code AS INTEGER) > 3"),
    "derived from NULLs": lambda q: q.with_column("y", "amount * rate + age").filter("y > 1"),
    "sum of a joined column": lambda q: q.filter("city = 'a'"),
}


@pytest.mark.parametrize("name", list(LEFT_JOIN_QUERIES))
def test_joined_columns_cannot_fail_on_some_rows_only(name: str) -> None:
    seen = []
    for case in ("match", "no match", "absent"):
        base, who, rates = target_tables(case)
        session = open_session({"visits": base, "people": who}, {"rates": rates})
        query = (
            Query.from_table("visits")
            .join("rates", on="region", how="left")
            .join("people", on="person", how="left", truncate=1)
        )
        query = LEFT_JOIN_QUERIES[name](query).bound(max_rows=1)
        results = [
            outcome(session, query.count()),
            outcome(session, query.sum("age", bounds=(0, 100))),
        ]
        seen.append(results)
    assert seen[0] == seen[1] == seen[2]


#: Filters on a table of persons alone (joined on the unit, inner): each is pushed into
#: that table and its persons restrict the other tables' rows (_joins._selects_persons).
#: The attacker puts a value the filter fails on in one person's row.
PERSONS_FILTERS = {
    "cast of the person's text": "CAST(code AS INTEGER) > 3",
    "division by the person's zero": "100 // age > 1",
    "overflow of the person's number": "CAST(age AS TINYINT) * 100 > 10",
    "an OR around a failing term": "city = 'z' OR CAST(code AS INTEGER) > 3",
}


@pytest.mark.parametrize("name", list(PERSONS_FILTERS))
def test_a_persons_filter_cannot_fail_on_one_persons_row(name: str) -> None:
    # Person 0 (the target) has a row on which the filter fails (text 'oops', age 0 or
    # 1,000), a row on which it holds, or no row. Whatever the target's row, every query
    # succeeds the same way and spends the same: the failing value makes the filter
    # NULL for that row (a row of the target's own), in the persons' set as in the
    # truncation, never an error.
    seen = []
    targets: list[tuple[str, int] | None] = [("oops", 0), ("5", 1_000), ("5", 30), None]
    for target_row in targets:
        base = pd.DataFrame(
            {"person": [0, 1, 2, 3, 0], "visit": [1, 2, 3, 4, 5], "amount": [1.0, 2, 3, 4, 5]}
        )
        items = base[["person", "visit"]].assign(price=[9.0, 8, 7, 6, 5])
        who = pd.DataFrame(
            {"person": [1, 2, 3], "age": [30, 40, 50], "code": ["7", "8", "9"], "city": "a"}
        )
        if target_row is not None:
            code, age = target_row
            target = {"person": [0], "age": [age], "code": [code], "city": ["a"]}
            who = pd.concat([pd.DataFrame(target), who], ignore_index=True)
        session = open_session({"visits": base, "items": items, "people": who})
        query = (
            Query.from_table("visits")
            .join("items", on="visit", truncate=1)
            .join("people", on="person", truncate=1)
            .filter(PERSONS_FILTERS[name])
            .bound(max_rows=2)
        )
        seen.append(
            [outcome(session, query.count()), outcome(session, query.sum("price", bounds=(0, 10)))]
        )
    assert seen[0] == seen[1] == seen[2] == seen[3]
    assert all(result.startswith("ok") for result in seen[0])


# ---------------------------------------------------------------- rule 2: the engine's equality
def test_join_keys_compare_in_canonical_form() -> None:
    nfc = unicodedata.normalize("NFC", "é")
    nfd = unicodedata.normalize("NFD", "é")
    private = pd.DataFrame(
        {
            "person": range(9),
            "x": [-0.0, 0.0, float("nan"), None, 1.0, 2.0, 2.0, 3.0, 3.0],
            "t": ["a", "a ", "A", nfc, nfd, None, "b", "", "b"],
        }
    )
    public_x = pd.DataFrame({"x": [0.0, -0.0, float("nan"), None], "px": [1, 2, 3, 4]})
    public_t = pd.DataFrame({"t": ["a", nfc, None, ""], "pt": [1, 2, 3, 4]})
    session = open_session({"v": private}, {"px": public_x, "pt": public_t})
    by_x = Query.from_table("v").join("px", on="x").bound(max_rows=5).count()
    by_t = Query.from_table("v").join("pt", on="t").bound(max_rows=5).count()
    # -0.0 and 0.0 are one key (two public rows each: M = 2); NaN and NULL never match.
    assert count(session, by_x) == 4
    assert "at most 2 row(s) per key" in "\n".join(session.explain(by_x, budget=0.1).source)
    # Byte-wise: "a " != "a", "A" != "a", NFD != NFC; "" is a key, NULL is not.
    assert count(session, by_t) == 3
    # Keys of a public table: one zero, released as +0.0; NaN and NULL left out.
    keys = (
        Query.from_table("v")
        .group_by("x", keys=KeySet.from_table("px", "x"))
        .bound(max_rows=5, max_groups=1)
        .count()
    )
    result = exact(session, keys)
    assert list(result) == [(0.0,)] and np.copysign(1.0, next(iter(result))[0]) == 1.0
    assert result[(0.0,)][0] == 2


def test_timestamps_with_zones_join_on_the_instant() -> None:
    instant = pd.Timestamp("2024-03-31 01:30", tz="UTC")
    private = pd.DataFrame(
        {"person": [1, 2], "at": [instant.tz_convert("Europe/Paris"), instant + pd.Timedelta("1h")]}
    )
    public = pd.DataFrame({"at": [instant.tz_convert("America/New_York")], "tag": ["x"]})
    naive = pd.DataFrame({"at": [instant.tz_localize(None)], "tag": ["x"]})
    session = open_session({"v": private}, {"p": public, "naive": naive})
    assert count(session, Query.from_table("v").join("p", on="at").bound(max_rows=1).count()) == 1
    with pytest.raises(InvalidParameter):
        session.evaluate(
            Query.from_table("v").join("naive", on="at").bound(max_rows=1).count(), budget=TINY
        )
    assert session.spent == dp.PureDP(0.0)


def test_unsigned_and_huge_integer_units_join_without_failing() -> None:
    # UBIGINT ids above 2^63 and BIGINT ids: one key category; the comparison must not
    # cast the UBIGINT side to BIGINT (a failure on the rows holding such an id).
    seen = []
    for huge in (False, True):
        ids = pa.array([1, 2, 2**64 - 1 if huge else 3], pa.uint64())
        small = pa.array([1, 2, 3], pa.int64())
        session = open_session(
            {
                "visits": pa.table({"person": ids, "x": [1, 2, 3]}),
                "people": pa.table({"person": small, "age": [1, 2, 3]}),
            }
        )
        query = Query.from_table("visits").join("people", on="person", truncate=1)
        seen.append(outcome(session, query.bound(max_rows=1).count()))
        parts = session.partition("age", [1, 2, 3], budgets=0.1, table="people")
        seen.append(outcome(parts[3], Query.from_table("visits").bound(max_rows=1).count()))
    assert seen[:2] == seen[2:] and "SessionLocked" not in "".join(seen)


# ---------------------------------------------------------------- stability of the joined view
def neighbours(private: dict[str, pd.DataFrame], person: int) -> dict[str, pd.DataFrame]:
    return {name: frame[frame["person"] != person] for name, frame in private.items()}


JOIN_SHAPES: dict[str, Callable[[], Query]] = {
    "public, duplicate keys": lambda: Query.from_table("visits").join("regions", on="region"),
    "public, left": lambda: Query.from_table("visits").join("regions", on="region", how="left"),
    "private, truncate 1": lambda: Query.from_table("visits").join(
        "people", on="person", truncate=1
    ),
    "private, left, truncate 2": lambda: Query.from_table("visits").join(
        "people", on="person", how="left", truncate=2
    ),
    "private then public": lambda: (
        Query.from_table("visits")
        .join("people", on="person", truncate=2)
        .join("regions", on="region")
    ),
    "private on another key": lambda: Query.from_table("people").join(
        "visits", on={"age": "person"}, truncate=3
    ),
}


@functools.cache
def neighbour_shop(removed: int | None) -> dp.Session:
    """The database of ``shop()`` with person ``removed`` taken out of every private
    table (None: no one), opened once per process for the shapes below: they read
    exact counts only (nothing spent, no state), and opening a Session over several
    tables is ~40 ms, 13 of them per shape."""
    tables = {"visits": visits(), "people": people()}
    if removed is not None:
        tables = neighbours(tables, removed)
    return open_session(tables, {"regions": REGIONS.copy()})


@pytest.mark.parametrize("shape", list(JOIN_SHAPES))
def test_one_person_changes_the_joined_count_by_at_most_the_bound(shape: str) -> None:
    # Neighbouring databases: one person removed from every private table. With the same
    # salt, the bounded count moves by at most max_rows (a person's joined rows depend
    # on that person's rows and the public tables only; bounding comes after the join).
    max_rows = 2
    query = JOIN_SHAPES[shape]().bound(max_rows=max_rows).count()
    full = count(neighbour_shop(None), query)
    for person in range(12):
        less = count(neighbour_shop(person), query)
        assert 0 <= full - less <= max_rows, (person, full, less)


def test_a_public_key_of_huge_multiplicity_is_shown_and_bounded() -> None:
    heavy = pd.DataFrame({"region": ["n"] * 1000 + ["s"], "label": ["N"] * 1000 + ["S"]})
    base = pd.DataFrame({"person": [1, 2, 2], "region": ["n", "s", "s"], "amount": [1.0] * 3})
    session = open_session({"visits": base}, {"regions": heavy})
    query = Query.from_table("visits").join("regions", on="region").bound(max_rows=3).count()
    shown = "\n".join(session.explain(query, budget=0.1).source)
    assert "at most 1000 row(s) per key" in shown
    assert count(session, query) == 3 + 2  # person 1: 1000 joined rows, 3 kept


def test_a_column_named_like_an_internal_alias_cannot_break_truncation() -> None:
    # Found by this review: a table column named like dpkit's internal alias (__tu) was
    # partitioned by instead of the unit. Truncation now names its columns, and a
    # column starting with __dpkit (dpkit's own prefix) is refused at creation.
    target = pd.DataFrame({"person": [0], "x": [1]})
    others = 40
    with_others = pd.DataFrame(
        {"person": range(others + 1), "__tu": [0] * (others + 1), "age": range(others + 1)}
    )
    alone = with_others.iloc[:1]
    query = (
        Query.from_table("visits")
        .join("people", on="person", truncate=1, columns=["age"])
        .bound(max_rows=1)
        .count()
    )
    for salt in range(1, 6):
        counts = [
            count(open_session({"visits": target, "people": p}), query, salt=salt)
            for p in (alone, with_others)
        ]
        # The target's one visit joins their one people row, whatever the others hold.
        assert counts == [1, 1], (salt, counts)


# ---------------------------------------------------------------- partitions by table
def test_partition_by_another_private_table_puts_each_person_in_one_part() -> None:
    tables = {"visits": visits(), "people": people()}
    session = open_session(tables, {"regions": REGIONS.copy()})
    parts = session.partition("city", ["a", "b"], budgets=0.2, table="people")
    persons = Query.from_table("visits").bound(max_rows=1).count()  # one row per person
    rows = Query.from_table("visits").bound(max_rows=100).count()
    per_part = [count(parts[k], persons) for k in ("a", "b")]
    with_people = set(tables["people"]["person"]) & set(tables["visits"]["person"])
    assert sum(per_part) == len(with_people)
    assert sum(count(parts[k], rows) for k in ("a", "b")) == len(
        tables["visits"][tables["visits"]["person"].isin(with_people)]
    )
    # The part's people rows are those with its city, of persons assigned to it.
    joined = Query.from_table("visits").join("people", on="person", truncate=2)
    for key in ("a", "b"):
        cities = exact(
            parts[key],
            joined.group_by("city", keys=KeySet.from_values(city=["a", "b"]))
            .bound(max_rows=100, max_groups=2)
            .count(),
        )
        other = ("a" if key == "b" else "b",)
        assert cities.get(other, [0])[0] == 0 and cities[(key,)][0] > 0
    # Nested, across tables: a part of a part sees at most its parent's persons.
    inner = parts["a"].partition("region", ["n", "s", "e"], budgets=0.5, table="visits")
    assert sum(count(inner[k], persons) for k in ("n", "s", "e")) <= per_part[0]


def test_partition_refusals_before_the_charge() -> None:
    session = shop()
    for column, table in (
        ("region", "regions"),  # a public table
        ("city", None),  # several private tables, none named
        ("person", "people"),  # the privacy unit
        ("nope", "people"),
        ("city", "PEOPLE"),
    ):
        with pytest.raises((InvalidParameter, DataError)):
            session.partition(column, ["a"], budgets=0.5, table=table)
    assert session.spent == dp.PureDP(0.0) and not session.history


# ---------------------------------------------------------------- what explain and the ledger show
def test_explain_and_history_show_public_information_only(tmp_path: Path) -> None:
    query = (
        Query.from_table("visits")
        .join("regions", on="region")
        .join("people", on="person", truncate=1)
        .group_by("label", keys=KeySet.from_table("regions", "label"))
        .bound(max_rows=2, max_groups=2)
        .count()
    )
    shown = []
    for seed in (1, 5):
        session = open_session(
            {"visits": visits(seed=seed, n=40 + seed), "people": people(seed=seed)},
            {"regions": REGIONS.copy()},
        )
        shown.append(str(session.explain(query, budget=0.1)))
        part = session.partition("city", ["a"], budgets=0.5, table="people")["a"]
        shown.append(str(part.explain(query, budget=0.1)))
    assert shown[0] == shown[2] and shown[1] == shown[3]

    # The ledger: reopened on a neighbouring database it carries the spend; the same
    # data with the roles or the units changed is another Session and is refused.
    ledger = tmp_path / "ledger.sqlite"
    first = open_session({"visits": visits(), "people": people()}, ledger=ledger, source="shop")
    first.evaluate(Query.from_table("visits").bound(max_rows=1).count(), budget=0.25)
    again = open_session(
        neighbours({"visits": visits(), "people": people()}, 3), ledger=ledger, source="shop"
    )
    assert again.spent == dp.PureDP(0.25)
    assert "52000" not in str(again.history)
    for private, public, unit in (
        ({"visits": visits()}, {"people": people()}, "person"),
        (
            {"visits": visits(), "people": people().rename(columns={"person": "pid"})},
            None,
            {"visits": "person", "people": "pid"},
        ),
    ):
        with pytest.raises(DataError):
            open_session(private, public, unit=unit, ledger=ledger, source="shop")


# ---------------------------------------------------------------- names
@pytest.mark.parametrize(
    "name",
    ['we"ird', "semi; DROP TABLE x; --", "back`tick", "naïve", "with space", "select"],
)
def test_quoted_and_hostile_names_are_names(name: str) -> None:
    private = visits().rename(columns={"region": name})
    public = REGIONS.rename(columns={"region": name})
    session = open_session({name: private}, {f"{name}_p": public})
    query = Query.from_table(name).join(f"{name}_p", on=name).bound(max_rows=100).count()
    # 'n' appears twice in the public table: its visits count twice.
    expected = int((private[name] != "n").sum() + 2 * (private[name] == "n").sum())
    assert count(session, query) == expected
    quoted = '"' + f"{name}_p".replace('"', '""') + '"'
    assert len(session.public_query(f"SELECT * FROM {quoted}")) == len(REGIONS)
    assert session.spent == dp.PureDP(0.0)


# ---------------------------------------------------------------- Spark
@pytest.mark.slow
def test_spark_joined_columns_cannot_fail_on_some_rows_only(spark: Any) -> None:
    # Spark 4's ANSI mode raises on a division by zero and on a bad cast: the joined
    # public columns (a zero rate, the text 'oops') meet the target's row only.
    seen = []
    for case in ("match", "absent"):
        base, who, rates = target_tables(case)
        session = open_session(
            {"visits": spark.createDataFrame(base), "people": spark.createDataFrame(who)},
            {"rates": rates},
            engine="spark",
        )
        query = (
            Query.from_table("visits")
            .join("rates", on="region", how="left")
            .join("people", on="person", how="left", truncate=1)
        )
        seen.append(
            [
                outcome(session, LEFT_JOIN_QUERIES[name](query).bound(max_rows=1).count())
                for name in ("division by a joined zero", "cast of a joined text")
            ]
        )
    assert seen[0] == seen[1]
    assert all(s.startswith("ok") for s in seen[0])


@pytest.mark.slow
def test_spark_internal_alias_column_is_refused_before_the_charge(spark: Any) -> None:
    who = pd.DataFrame({"person": [0, 1], "__tu": [0, 0], "age": [1, 2]})
    session = open_session(
        {
            "visits": spark.createDataFrame(pd.DataFrame({"person": [0], "x": [1]})),
            "people": spark.createDataFrame(who),
        },
        engine="spark",
    )
    query = Query.from_table("visits").join("people", on="person", truncate=1, columns=["age"])
    try:
        session.evaluate(query.bound(max_rows=1).count(), budget=TINY)
    except dp.DPError as err:
        assert not isinstance(err, dp.SessionLocked)
        assert session.spent == dp.PureDP(0.0)
