"""Attacks through the source itself: a curator's source whose own expressions raise on
one row (issue 27, section 1, "Sources whose own expressions raise").

The curator hands dpkit a view, a table with a generated column, a table of an attached
SQLite database, a Python object reached by a replacement scan, or a Spark DataFrame
built in the curator's session (ANSI mode on, a Python UDF). One row -- alice's -- holds
a value on which that source's own expression fails (``CAST('n/a' AS INTEGER)``). Read
in place, the source fails inside a query iff alice's row passes the analyst's filter
(engines push filters below the source's projection): a one-bit oracle on alice's salary
read after the charge, at a price the analyst chooses.

What must hold (DESIGN.md, threat model, rule 1): such a source is evaluated once, when
the Session is created, so the failure is a DataError there -- before the analyst runs
anything, nothing spent, no ledger written, no row value in the message -- and on every
neighbouring table where the source is total the analyst's queries all succeed and
answer alike (success, error text, budget spent).
"""

from __future__ import annotations

import datetime
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import Query
from dpkit.errors import DataError
from dpkit.testing import session_transcript

TINY = dp.PureDP(1e-6)
#: Thresholds of the attacker's bisection on alice's salary (52,000 in the tables).
THRESHOLDS = (0, 45_000, 60_000)
#: Alice's stored age: a value the source's expression fails on, or one it reads.
BAD, GOOD = "n/a", "30"
#: Rows besides alice's: enough that DuckDB infers a pandas object column's type from
#: the others (it samples 1,000 rows evenly: every third of 3,000, not alice's, last).
OTHERS = [(f"p{i}", 30_000.0 + i, str(20 + i % 50)) for i in range(2_999)]


def rows(alice: tuple[float, str] | None) -> list[tuple[str, float, str]]:
    """The staff table: the others, then alice (salary, raw age) unless None."""
    return OTHERS + ([("alice", *alice)] if alice is not None else [])


#: Neighbours on which every source is total: alice with another salary, or absent.
TOTAL_NEIGHBOURS = [(52_000.0, GOOD), (30_000.0, GOOD), None]


def queries() -> list[Query]:
    return [
        Query()
        .filter(f"name = 'alice' AND salary >= {t}")
        .bound(max_rows=1)
        .sum("age", bounds=(0.0, 100.0))
        for t in THRESHOLDS
    ]


def transcript(open_session: Callable[[Path], dp.Session], ledger: Path) -> list[str]:
    """What the analyst sees: the creation's outcome; then, per query, 'ok' or the
    error's class and text; then the budget spent."""
    try:
        session = open_session(ledger)
    except dp.DPError as err:
        assert BAD not in str(err)  # no row value in the message
        return [f"created: {type(err).__name__}", f"ledger written: {ledger.exists()}"]
    return ["created", *session_transcript(session, list(queries()), budget=TINY)]


def check(
    open_session: Callable[[list[tuple[str, float, str]], Path], dp.Session], tmp: Path
) -> None:
    """The source that fails on alice's row fails at creation, spending nothing; its
    total neighbours answer every query, alike."""
    failing = transcript(lambda ledger: open_session(rows((52_000.0, BAD)), ledger), tmp / "bad")
    assert failing == ["created: DataError", "ledger written: False"]
    runs = [
        transcript(lambda ledger, a=alice: open_session(rows(a), ledger), tmp / f"total{i}")
        for i, alice in enumerate(TOTAL_NEIGHBOURS)
    ]
    assert runs[0] == runs[1] == runs[2]
    assert runs[0][:-1] == ["created"] + ["ok"] * len(THRESHOLDS)


# ------------------------------------------------------------------ DuckDB


def table(con: Any, name: str, data: list[tuple[Any, ...]], columns: str) -> None:
    """CREATE TABLE ``name`` (``columns``) holding ``data``."""
    con.execute(f"CREATE TABLE {name} ({columns})")
    frame = pd.DataFrame(data)
    con.register("__rows", frame)
    con.execute(f"INSERT INTO {name} SELECT * FROM __rows")
    con.unregister("__rows")


def duckdb_view(data: list[tuple[str, float, str]], ledger: Path) -> dp.Session:
    con = duckdb.connect()
    table(con, "raw", data, "name VARCHAR, salary DOUBLE, age_raw VARCHAR")
    con.execute(
        "CREATE VIEW staff AS SELECT name, salary, CAST(age_raw AS INTEGER) AS age FROM raw"
    )
    return dp.Session.from_duckdb(con, "staff", budget=dp.PureDP(1.0), ledger=ledger, rng=0)


def duckdb_generated_column(data: list[tuple[str, float, str]], ledger: Path) -> dp.Session:
    # DuckDB checks a generated column on INSERT, not on UPDATE: the bad value gets in.
    # Every row is inserted with a good age, then given its own by one UPDATE (one per
    # row cost seconds: ~2,950 of the ages differ from GOOD).
    con = duckdb.connect()
    table(con, "raw", data, "name VARCHAR, salary DOUBLE, a VARCHAR")
    con.execute(
        "CREATE TABLE staff (name VARCHAR, salary DOUBLE, age_raw VARCHAR, "
        "age INTEGER GENERATED ALWAYS AS (CAST(age_raw AS INTEGER)) VIRTUAL)"
    )
    con.execute("INSERT INTO staff (name, salary, age_raw) SELECT name, salary, ? FROM raw", [GOOD])
    con.execute("UPDATE staff SET age_raw = raw.a FROM raw WHERE staff.name = raw.name")
    assert con.execute(
        "SELECT count(*) FROM staff JOIN raw USING (name) WHERE age_raw = a"
    ).fetchone() == (len(data),)
    con.execute("DROP TABLE raw")
    return dp.Session.from_duckdb(con, "staff", budget=dp.PureDP(1.0), ledger=ledger, rng=0)


def duckdb_replacement_scan(data: list[tuple[str, float, str]], ledger: Path) -> dp.Session:
    # A pandas DataFrame reached by name: DuckDB infers an object column's type from a
    # sample of its values (INTEGER here) and fails converting alice's 'n/a'.
    staff_frame = pd.DataFrame(
        {
            "name": [r[0] for r in data],
            "salary": [r[1] for r in data],
            "age": pd.Series([int(r[2]) if r[2] != BAD else r[2] for r in data], dtype=object),
        }
    )
    assert len(staff_frame) == len(data)
    con = duckdb.connect()
    # Replacement scans look for Python variables in every frame of the stack (the
    # curator's, here), also from the cursors dpkit's queries run on.
    con.execute("SET GLOBAL python_scan_all_frames = true")
    return dp.Session.from_duckdb(con, "staff_frame", budget=dp.PureDP(1.0), ledger=ledger, rng=0)


def duckdb_sqlite_table(data: list[tuple[str, float, str]], ledger: Path) -> dp.Session:
    # SQLite is dynamically typed: an INTEGER column stores 'n/a' as text, and DuckDB's
    # SQLite scanner fails on it when it reads that row.
    path = ledger.with_suffix(".sqlite")
    with sqlite3.connect(path) as lite:
        lite.execute("CREATE TABLE staff (name TEXT, salary REAL, age INTEGER)")
        lite.executemany(
            "INSERT INTO staff VALUES (?, ?, ?)",
            [(n, s, int(a) if a != BAD else a) for n, s, a in data],
        )
    lite.close()
    con = duckdb.connect(str(path))  # DuckDB opens a SQLite file with its extension
    return dp.Session.from_duckdb(con, "staff", budget=dp.PureDP(1.0), ledger=ledger, rng=0)


def sqlite_extension_missing() -> str | None:
    try:
        duckdb.connect().execute("LOAD sqlite")
    except duckdb.Error as err:
        return f"DuckDB's sqlite extension is not available here ({type(err).__name__})"
    return None


DUCKDB_SOURCES = {
    "view": duckdb_view,
    "generated-column": duckdb_generated_column,
    "replacement-scan": duckdb_replacement_scan,
    "sqlite-table": duckdb_sqlite_table,
}


@pytest.mark.parametrize("source", list(DUCKDB_SOURCES))
def test_a_duckdb_source_that_fails_on_a_row_is_no_oracle(tmp_path: Path, source: str) -> None:
    if source == "sqlite-table" and (reason := sqlite_extension_missing()) is not None:
        pytest.skip(reason)
    check(DUCKDB_SOURCES[source], tmp_path)


def test_a_registered_dataframe_is_refused_at_creation_on_every_neighbour(
    tmp_path: Path,
) -> None:
    # A DataFrame registered on the connection is visible to that connection only, not
    # to the cursors dpkit reads through: refused, alike on every table, spending nothing.
    seen = []
    for i, alice in enumerate([(52_000.0, BAD), *TOTAL_NEIGHBOURS]):
        con = duckdb.connect()
        con.register("staff", pd.DataFrame(rows(alice), columns=["name", "salary", "age"]))
        ledger = tmp_path / f"l{i}"
        with pytest.raises(DataError, match="registered on the connection") as info:
            dp.Session.from_duckdb(con, "staff", budget=dp.PureDP(1.0), ledger=ledger)
        assert not ledger.exists()
        seen.append(str(info.value))
    assert len(set(seen)) == 1


# ------------------------------------------------------------------ Spark


def caller_session(spark: Any) -> Any:
    """The curator's own SparkSession, in ANSI mode (Spark 4's default)."""
    caller = spark.newSession()
    caller.conf.set("spark.sql.ansi.enabled", "true")
    return caller


def spark_staff(session: Any, data: list[tuple[str, float, str]]) -> Any:
    return session.createDataFrame(data, "name string, salary double, age_raw string")


def test_a_cast_in_the_callers_ansi_session_is_no_oracle(spark: Any, tmp_path: Path) -> None:
    caller = caller_session(spark)

    def open_session(data: list[tuple[str, float, str]], ledger: Path) -> dp.Session:
        frame = spark_staff(caller, data).selectExpr(
            "name", "salary", "CAST(age_raw AS INT) AS age"
        )
        return dp.Session.from_spark(frame, budget=dp.PureDP(1.0), ledger=ledger, rng=0)

    check(open_session, tmp_path)


def test_a_python_udf_is_evaluated_once_and_is_no_oracle(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions
    from pyspark.sql.types import IntegerType

    caller = caller_session(spark)
    calls = caller.sparkContext.accumulator(0)

    def parse(text: str) -> int:
        calls.add(1)
        return int(text)  # ValueError on 'n/a'

    # A lambda: PySpark reads a function's type hints as a pandas UDF's signature.
    age = functions.udf(lambda text: parse(text), IntegerType())
    # The UDF's call count when each creation starts and when it has returned: check()
    # runs a Session's queries between its creation and the next one (or the end).
    counts: list[tuple[str, int]] = []

    def open_session(data: list[tuple[str, float, str]], ledger: Path) -> dp.Session:
        counts.append(("start", calls.value))
        frame = spark_staff(caller, data).select("name", "salary", age("age_raw").alias("age"))
        session = dp.Session.from_spark(frame, budget=dp.PureDP(1.0), ledger=ledger, rng=0)
        counts.append(("created", calls.value))
        return session

    check(open_session, tmp_path)
    counts.append(("end", calls.value))
    # Materialised at creation (which calls the UDF): the analyst's queries, on every
    # total neighbour, never call the curator's UDF.
    created = [i for i, (event, _) in enumerate(counts) if event == "created"]
    assert len(created) == len(TOTAL_NEIGHBOURS)
    for i in created:
        assert counts[i][1] > counts[i - 1][1], "the creation did not evaluate the UDF"
        assert counts[i + 1][1] == counts[i][1], "a query called the curator's UDF"


def test_parquet_read_with_rebase_exception_fails_at_creation_not_in_a_query(
    spark: Any, tmp_path: Path
) -> None:
    # With a rebase mode of EXCEPTION (Spark 3's default), Spark's Parquet reader raises
    # on a date before 1582 in a file written by pyarrow: Session.from_path then copies
    # the file at creation, where that failure spends nothing.
    from pyspark.sql import SparkSession

    # The curator's session: the one Session.from_path reads in (the active one).
    active = SparkSession.getActiveSession()
    assert active is not None
    key = "spark.sql.parquet.datetimeRebaseModeInRead"
    before = active.conf.get(key)
    active.conf.set(key, "EXCEPTION")
    try:
        outcomes = []
        for born in (datetime.date(1000, 1, 1), datetime.date(2000, 1, 1)):
            frame = pd.DataFrame(rows((52_000.0, GOOD)), columns=["name", "salary", "age"])
            frame["age"] = frame["age"].astype(int)
            frame["born"] = [
                born if n == "alice" else datetime.date(1990, 1, 1) for n in frame["name"]
            ]
            path = tmp_path / f"staff-{born}.parquet"
            frame.to_parquet(path)
            ledger = tmp_path / f"ledger-{born}"

            def open_session(ledger: Path, path: Path = path) -> dp.Session:
                return dp.Session.from_path(
                    path, budget=dp.PureDP(1.0), ledger=ledger, engine="spark", rng=0
                )

            outcomes.append(transcript(open_session, ledger))
        assert outcomes[0] == ["created: DataError", "ledger written: False"]
        assert outcomes[1][:-1] == ["created"] + ["ok"] * len(THRESHOLDS)
    finally:
        active.conf.set(key, before)


@pytest.mark.parametrize("how", ["reader option", "curator's session setting"])
def test_a_parquet_scan_that_raises_on_an_ancient_date_is_copied_at_creation(
    spark: Any, tmp_path: Path, how: str
) -> None:
    # The curator hands from_spark a bare Parquet scan (read in place, no copy) whose
    # reader raises on alice's date of birth, year 1000, with a rebase mode of
    # EXCEPTION -- given as the reader's option, or set in the curator's session. Read
    # in place, a query would fail iff alice's row passes the filter: the scan must be
    # copied at creation instead, where the failure spends nothing.
    caller = spark.newSession()
    key = "spark.sql.parquet.datetimeRebaseModeInRead"
    if how != "reader option":
        caller.conf.set(key, "EXCEPTION")
    outcomes = []
    for born in (datetime.date(1000, 1, 1), datetime.date(2000, 1, 1)):
        frame = pd.DataFrame(rows((52_000.0, GOOD)), columns=["name", "salary", "age"])
        frame["age"] = frame["age"].astype(int)
        frame["born"] = [born if n == "alice" else datetime.date(1990, 1, 1) for n in frame["name"]]
        path = tmp_path / f"staff-{born}.parquet"
        frame.to_parquet(path)
        reader = caller.read
        if how == "reader option":
            reader = reader.option("datetimeRebaseMode", "EXCEPTION")

        def open_session(ledger: Path, path: Path = path, reader: Any = reader) -> dp.Session:
            scan = reader.parquet(str(path))
            return dp.Session.from_spark(scan, budget=dp.PureDP(1.0), ledger=ledger, rng=0)

        outcomes.append(transcript(open_session, tmp_path / f"ledger-{born}"))
    assert outcomes[0] == ["created: DataError", "ledger written: False"]
    assert outcomes[1][:-1] == ["created"] + ["ok"] * len(THRESHOLDS)


def _staff_seen(folder: Path, alice_seen: int) -> Path:
    """A Parquet file pyarrow writes without complaint: 3,000 rows sorted by salary in
    row groups of 500 (alice's, 52,000, last), and a TIMESTAMP(MILLIS) column ``seen``
    holding ``alice_seen`` ms on alice's row (2^62 overflows the conversion to
    microseconds of Spark's and DuckDB's readers)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 3000
    seen = [1_600_000_000_000] * (n - 1) + [alice_seen]
    table = pa.table(
        {
            "name": [f"p{i}" for i in range(n - 1)] + ["alice"],
            "salary": [30_000.0 + i for i in range(n - 1)] + [52_000.0],
            "seen": pa.array(seen, pa.timestamp("ms", tz="UTC")),
        }
    )
    path = folder / "staff.parquet"
    pq.write_table(table, path, row_group_size=500)
    return path


def _seen_queries() -> list[Query]:
    """The bisection on alice's salary, each query reading the column ``seen``."""
    return [
        Query().filter(f"salary >= {t} AND seen IS NOT NULL").bound(max_rows=1).count()
        for t in THRESHOLDS
    ]


@pytest.mark.parametrize("alice_seen", [2**62, 1_600_000_000_000])
def test_a_parquet_scan_whose_reader_fails_on_one_value_fails_at_creation(
    spark: Any, tmp_path: Path, alice_seen: int
) -> None:
    # A file pyarrow writes without complaint: a TIMESTAMP(MILLIS) column, and alice's
    # value, 2^62 ms, overflows Spark's conversion to microseconds. Rows sorted by
    # salary in row groups of 500, so a filter on salary skips alice's group by its
    # statistics: read in place, `salary >= t` would fail iff alice's salary (52,000)
    # is at least t -- a bisection. from_spark copies the bare scan at creation, where
    # the failure spends nothing (found by an adversarial review of reading such scans
    # in place, 2026-11-30; that change was reverted).
    path = _staff_seen(tmp_path, alice_seen)
    ledger = tmp_path / "ledger"
    try:
        session = dp.Session.from_spark(
            spark.read.parquet(str(path)), budget=dp.PureDP(1.0), ledger=ledger, rng=0
        )
    except DataError:
        assert alice_seen == 2**62 and not ledger.exists()
        return
    assert alice_seen != 2**62, "the failing scan was read in place"
    seen = session_transcript(session, _seen_queries(), budget=TINY)
    assert seen[:-1] == ["ok"] * len(THRESHOLDS)


def test_partitions_whose_files_disagree_on_a_type_fail_at_creation(
    spark: Any, tmp_path: Path
) -> None:
    # A partitioned folder, no reader option: region=a holds `amount` as DOUBLE, and
    # region=b (alice's) as STRING. Read in place, only a query whose filter keeps a
    # region=b row would fail -- after its charge. The scan is copied at creation.
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "staff"
    for region, amount in (("a", pa.array([1.0, 2.0])), ("b", pa.array(["3", "4"]))):
        (folder / f"region={region}").mkdir(parents=True)
        names = ["p1", "p2"] if region == "a" else ["p3", "alice"]
        pq.write_table(
            pa.table({"name": names, "amount": amount}), folder / f"region={region}" / "x.parquet"
        )
    with pytest.raises(DataError):
        dp.Session.from_spark(spark.read.parquet(str(folder)), budget=dp.PureDP(1.0))


@pytest.mark.parametrize("alice_seen", [2**62, 1_600_000_000_000])
@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_from_path_parquet_whose_reader_fails_on_one_value_fails_at_creation(
    spark: Any, tmp_path: Path, engine: str, alice_seen: int
) -> None:
    # from_path reads Parquet in place on both engines. Read in place without more,
    # alice's 2^62 ms failed a query after its charge (on Spark only for filters that
    # keep her row group: 45,000 locked the Session, 60,000 answered). Every value is
    # now read once at creation, where the failure is a DataError that spends nothing.
    path = _staff_seen(tmp_path, alice_seen)
    ledger = tmp_path / "ledger"
    try:
        session = dp.Session.from_path(
            path, budget=dp.PureDP(1.0), ledger=ledger, rng=0, engine=engine
        )
    except DataError:
        assert alice_seen == 2**62 and not ledger.exists()
        return
    seen = session_transcript(session, _seen_queries(), budget=TINY)
    assert seen[:-1] == ["ok"] * len(THRESHOLDS), seen


@pytest.mark.parametrize("alice_seen", [2**62, 1_600_000_000_000])
@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_a_second_parquet_table_whose_reader_fails_on_one_value_fails_at_creation(
    spark: Any, tmp_path: Path, engine: str, alice_seen: int
) -> None:
    # A Session over several files: the failing file is the second table, which the
    # Spark engine registers beside the first (SparkEngine.register), not the first.
    first = tmp_path / "first"
    first.mkdir()
    good = _staff_seen(first, 1_600_000_000_000)
    bad = _staff_seen(tmp_path, alice_seen)
    ledger = tmp_path / "ledger"
    try:
        session = dp.Session.from_tables(
            {"people": good, "visits": bad},
            privacy_unit="name",
            budget=dp.PureDP(1.0),
            ledger=ledger,
            rng=0,
            engine=engine,
        )
    except DataError:
        assert alice_seen == 2**62 and not ledger.exists()
        return
    assert alice_seen != 2**62, "the failing file was read in place"
    query = Query.from_table("visits").filter("seen IS NOT NULL").bound(max_rows=1).count()
    assert session_transcript(session, [query], budget=TINY)[:-1] == ["ok"]


#: Filters whose answer on a row group the engines could take from Parquet's statistics
#: (which leave NaN out): with their true count on the file of _nan_neighbour, for
#: alice's value ``a``.
NAN_FILTERS: dict[str, Callable[[float], int]] = {
    "f <> 1": lambda a: int(a != 1) + 301,
    "NOT (f = 1)": lambda a: int(a != 1) + 301,
    "f > 2": lambda a: int(a > 2) + 301,
    "f + 0 > 2": lambda a: int(a > 2) + 301,
    "isnan(f)": lambda a: 300,
    "NOT isnan(f)": lambda a: 2,
    "u >= 0 AND f <= 1": lambda a: int(a <= 1),
}


def _nan_neighbour(folder: Path, alice: float, *, tail: bool = True) -> Path:
    """alice (u = 0) shares a row group with 300 NaN rows, as pyarrow writes them: the
    group's min and max are alice's value. A last row group holds 5.0 (with ``tail``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    values = [alice, *[float("nan")] * 300, *([5.0] if tail else [])]
    path = folder / f"nan_{alice}.parquet"
    table = pa.table({"u": list(range(len(values))), "f": pa.array(values, pa.float64())})
    pq.write_table(table, path, row_group_size=301)
    return path


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_parquet_statistics_without_nan_decide_nothing_about_other_rows(
    spark: Any, tmp_path: Path, engine: str
) -> None:
    # The attacker reads Parquet's row-group statistics through the engine's pruning:
    # with alice's value at 1.0, a group of NaN rows has min = max = 1.0, so `f <> 1`
    # pruned the whole group (300 other persons uncounted), `isnan(f)` was folded to
    # false (their NaN clamped into sums); at 2.0 they were counted. One person's value
    # moved a count by 300 (DuckDB issue 25521; Spark prunes the same way). Every
    # answer must be the row-by-row one, on both engines.
    for alice in (1.0, 2.0):
        path = _nan_neighbour(tmp_path, alice)
        session = dp.Session.from_path(
            path, privacy_unit="u", budget=dp.PureDP(1e8), rng=0, engine=engine
        )
        for expression, truth in NAN_FILTERS.items():
            query = Query().filter(expression).bound(max_rows=1).count()
            released = session.evaluate(query, budget=dp.PureDP(1e6)).dataframe["count"]
            assert round(float(released.iloc[0])) == truth(alice), (alice, expression)
        # NaN is missing in a sum: alice's value and the 5.0, whatever the statistics.
        total = session.evaluate(
            Query().bound(max_rows=1).sum("f", bounds=(0.0, 10.0)), budget=dp.PureDP(1e6)
        ).dataframe["sum_f"]
        assert abs(float(total.iloc[0]) - (alice + 5.0)) < 0.01, alice


@pytest.mark.parametrize("target", ["BIGINT", "DECIMAL(18,3)", "text"])
@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_parquet_statistics_without_nan_cross_no_schema_conversion(
    spark: Any, tmp_path: Path, engine: str, target: str
) -> None:
    # The same file read with schema={"f": <not a float>}: DuckDB carried the statistics
    # through the conversion, concluded it could not fail, and folded `f IS NULL` to
    # false: 0 instead of 300 with alice at 1.0, 301 with alice at 1e300 (found by the
    # second review). The NaN rows convert to NULL; alice's value converts or not.
    # One row group (the file's statistics are the group's: DuckDB folded then).
    if target == "text":
        target = "VARCHAR" if engine == "duckdb" else "STRING"
    for alice in (1.0, 1e300):
        path = _nan_neighbour(tmp_path, alice, tail=False)
        session = dp.Session.from_path(
            path,
            privacy_unit="u",
            budget=dp.PureDP(1e8),
            rng=0,
            engine=engine,
            schema={"f": target},
        )
        if target in ("VARCHAR", "STRING"):  # NaN is the text 'nan' ('NaN' on Spark)
            expression, truth = "lower(f) = 'nan'", 300
        else:
            expression, truth = "f IS NULL", 300 + int(alice > 1e15)
        query = Query().filter(expression).bound(max_rows=1).count()
        released = session.evaluate(query, budget=dp.PureDP(1e6)).dataframe["count"]
        assert round(float(released.iloc[0])) == truth, (alice, target)
