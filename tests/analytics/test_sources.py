"""Unit tests of dpkit.analytics._sources: files copied into a private DuckDB table."""

from __future__ import annotations

import gc
import gzip
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from dpkit.analytics import _sources
from dpkit.analytics._duckdb_source import open_duckdb
from dpkit.analytics._sources import check_csv_options, check_schema, open_file
from dpkit.errors import DataError, InvalidParameter

CLEAN = {
    "comma.csv": b"a,b,c\n1,x,1.5\n2,y,2.5\n3,,\n",
    "semicolon.csv": b"a;b\n1;x\n2;y\n",
    "tab.tsv": b"a\tb\n1\tx\n2\ty\n",
    "quoted.csv": b'a,b\n1,"x, with comma"\n2,"y ""quoted"""\n',
    "dates.csv": b"d,t\n25/12/2020,2020-01-01 10:00:00\n01/02/2021,2021-03-04 11:12:13\n",
    "bools.csv": b"flag,n\ntrue,1\nfalse,2\n",
    "no_header.csv": b"1,2\n3,4\n5,6\n",
    "crlf.csv": b"a,b\r\n1,x\r\n2,y\r\n",
    "bom.csv": b"\xef\xbb\xbfa,b\n1,2\n",
    "duplicate_names.csv": b"a,a,b c\n1,2,3\n",
    "header_only.csv": b"a,b\n",
}


def read(
    path: Path, schema: dict[str, str] | None = None
) -> tuple[list[str], list[tuple[Any, ...]]]:
    opened = open_file(path, schema=schema, owner="test")
    con = opened.connection
    types = [str(r[1]) for r in con.execute(f"DESCRIBE {opened.relation}").fetchall()]
    return types, con.execute(f"SELECT * FROM {opened.relation}").fetchall()


@pytest.mark.parametrize("name", list(CLEAN))
def test_a_clean_file_reads_as_duckdb_reads_it(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(CLEAN[name])
    types, rows = read(path)
    relation = duckdb.sql(f"SELECT * FROM read_csv('{path}')")
    assert relation is not None
    assert types == [str(t) for t in relation.types]
    assert rows == relation.fetchall()


def test_gzip_and_large_files_read_as_duckdb_reads_them(tmp_path: Path) -> None:
    frame = pd.DataFrame({"n": range(50_000), "x": [i / 7 for i in range(50_000)]})
    frame["s"] = frame["n"].map(lambda i: f"s{i % 13}")
    path = tmp_path / "big.csv.gz"
    path.write_bytes(gzip.compress(frame.to_csv(index=False).encode()))
    types, rows = read(path)
    assert types == ["BIGINT", "DOUBLE", "VARCHAR"]
    assert rows == duckdb.execute(f"SELECT * FROM read_csv('{path}')").fetchall()


def bad_value_file(tmp_path: Path) -> Path:
    lines = ["a,b"] + [f"{i},x" for i in range(30_000)] + ["oops,y", "7,z"]
    path = tmp_path / "bad.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_value_that_does_not_parse_is_null_not_a_dropped_line(tmp_path: Path) -> None:
    types, rows = read(bad_value_file(tmp_path))
    assert types == ["BIGINT", "VARCHAR"]
    assert len(rows) == 30_002
    assert (None, "y") in rows


def test_without_the_type_pushdown_switch_the_text_is_copied_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A DuckDB that does not know the optimizer's name takes the two-step path.
    monkeypatch.setattr(
        _sources, "_NO_TYPE_PUSHDOWN", "SET disabled_optimizers = 'no_such_optimizer'"
    )
    opened = open_file(bad_value_file(tmp_path), schema=None, owner="test")
    tables = opened.connection.execute("SELECT table_name FROM duckdb_tables()").fetchall()
    assert tables == [("__dpkit_data",)]
    rows = opened.connection.execute(f"SELECT * FROM {opened.relation}").fetchall()
    assert len(rows) == 30_002 and (None, "y") in rows


def test_schema_converts_csv_and_parquet_columns(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("a,b\n1,2.5\nx,3\n")
    types, rows = read(csv, {"a": "INTEGER", "b": "DECIMAL(4,1)"})
    assert types == ["INTEGER", "DECIMAL(4,1)"]
    assert [r[0] for r in rows] == [1, None]
    parquet = tmp_path / "t.parquet"
    pd.DataFrame({"a": ["1", "x"], "b": [1.5, 2.5]}).to_parquet(parquet)
    types, rows = read(parquet, {"a": "BIGINT"})
    assert types == ["BIGINT", "DOUBLE"]
    assert rows == [(1, 1.5), (None, 2.5)]


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("int", "INTEGER"),
        ("bigint", "BIGINT"),
        ("decimal(10,2)", "DECIMAL(10,2)"),
        ("text", "VARCHAR"),
        ("timestamptz", "TIMESTAMP WITH TIME ZONE"),
        ("bool", "BOOLEAN"),
    ],
)
def test_check_schema_canonicalises_type_names(given: str, canonical: str) -> None:
    assert check_schema({"c": given}, "test") == {"c": canonical}


@pytest.mark.parametrize(
    "schema",
    [
        {"c": "JSON"},
        {"c": "STRUCT(a INT)"},
        {"c": "MAP(INT, INT)"},
        {"c": "ENUM('a')"},
        {"c": "VARCHAR); SELECT 1; --"},
        {1: "INT"},
        ["c"],
    ],
    ids=["json", "struct", "map", "enum", "injection", "non-str-key", "list"],
)
def test_check_schema_refuses_non_scalar_and_malformed_types(schema: object) -> None:
    with pytest.raises(InvalidParameter, match="'schema'"):
        check_schema(schema, "test")


def test_unknown_format_is_a_data_error(tmp_path: Path) -> None:
    path = tmp_path / "t.xlsx"
    path.write_bytes(b"")
    with pytest.raises(DataError, match="cannot tell the format"):
        open_file(path, schema=None, owner="test")


def test_the_private_copy_goes_with_its_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    csv = tmp_path / "t.csv"
    csv.write_text("a\n1\n")
    opened = open_file(csv, schema=None, owner="test")
    [directory] = (tmp_path / "tmp").iterdir()
    assert directory.name.startswith("dpkit-")
    assert directory.stat().st_mode & 0o077 == 0  # private to its user
    if os.name == "posix":  # unlinked once written, and still read
        assert not (directory / "data.duckdb").exists()
    assert opened.connection.execute(f"SELECT * FROM {opened.relation}").fetchall() == [(1,)]
    del opened
    gc.collect()
    assert list((tmp_path / "tmp").iterdir()) == []
    # A file that cannot be read leaves nothing behind either.
    broken = tmp_path / "t.parquet"
    broken.write_bytes(b"not parquet")
    with pytest.raises(DataError, match=r"\(\w+Exception\)"):
        open_file(broken, schema=None, owner="test")
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.skipif(os.name != "posix", reason="unlinking an open file is POSIX")
def test_a_killed_process_leaves_no_copy_of_the_rows(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("a\n" + "\n".join(str(i) for i in range(1000)) + "\n")
    script = (
        "import os, signal; from pathlib import Path; "
        "from dpkit.analytics._sources import open_file; "
        f"o = open_file(Path({str(csv)!r}), schema=None, owner='t'); "
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    temp = tmp_path / "tmp"
    temp.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", script], env={**os.environ, "TMPDIR": str(temp)}, check=False
    )
    assert proc.returncode == -signal.SIGKILL
    left = [p for p in temp.rglob("*") if p.is_file()]
    assert left == []


# ------------------------------------------------------------------ fixed CSV options


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("zero.csv", b""),
        ("zero.parquet", b""),
        ("blank.csv", b"\n\r\n  \n"),
        ("bom.csv", b"\xef\xbb\xbf\n"),
        ("utf16.csv", b"\xff\xfe\n\x00"),
        ("empty.csv.gz", gzip.compress(b"")),
        ("blank.csv.gz", gzip.compress(b"\n\n")),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_file_without_content_is_refused_before_duckdb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, content: bytes
) -> None:
    # DuckDB would invent a column 'column0' and read 0 or more empty rows.
    path = tmp_path / name
    path.write_bytes(content)
    monkeypatch.setattr(duckdb, "connect", lambda *a, **k: pytest.fail("DuckDB opened"))
    with pytest.raises(DataError, match=r"is empty .*no header"):
        open_file(path, schema=None, owner="test")


def test_a_header_only_file_is_an_empty_table_not_a_refusal(tmp_path: Path) -> None:
    # Whether a file has rows is a fact about the data: refusing it would reveal that.
    path = tmp_path / "header.csv"
    path.write_bytes(b"a,b\n")
    opened = open_file(path, schema={"a": "BIGINT"}, owner="test")
    con = opened.connection
    assert [r[:2] for r in con.execute(f"DESCRIBE {opened.relation}").fetchall()] == [
        ("a", "BIGINT"),
        ("b", "VARCHAR"),
    ]
    assert con.execute(f"SELECT count(*) FROM {opened.relation}").fetchall() == [(0,)]


def read_with(path: Path, **options: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
    opened = open_file(
        path, schema=None, owner="test", csv=check_csv_options(owner="test", **options)
    )
    con = opened.connection
    types = [str(r[1]) for r in con.execute(f"DESCRIBE {opened.relation}").fetchall()]
    return types, con.execute(f"SELECT * FROM {opened.relation}").fetchall()


def test_na_values_are_missing_and_keep_the_column_numeric(tmp_path: Path) -> None:
    path = tmp_path / "na.csv"
    path.write_bytes(b"n,s\n1,a\nNA,-\n3,\n")
    assert read(path)[0] == ["VARCHAR", "VARCHAR"]  # 'NA' makes the sniffer say text
    types, rows = read_with(path, na_values=["NA", "-"])
    assert types == ["BIGINT", "VARCHAR"]
    assert rows == [(1, "a"), (None, None), (3, None)]


@pytest.mark.parametrize(
    ("content", "options", "expected"),
    [
        ("a|b\n1|x,y\n", {"delimiter": "|"}, [(1, "x,y")]),
        ("a\tb\n1\tx\n", {"delimiter": "tab"}, [(1, "x")]),
        ("a\tb\n1\tx\n", {"delimiter": "\\t"}, [(1, "x")]),
        ("a;b\n1;x\n", {"delimiter": ","}, [("1;x",)]),  # fixed, not sniffed
    ],
    ids=["pipe", "tab-word", "tab-escape", "fixed-comma"],
)
def test_a_fixed_delimiter_is_used(
    tmp_path: Path, content: str, options: dict[str, Any], expected: list[tuple[Any, ...]]
) -> None:
    path = tmp_path / "d.csv"
    path.write_text(content)
    assert read_with(path, **options)[1] == expected


@pytest.mark.parametrize(
    ("encoding", "codec"),
    [("latin-1", "latin-1"), ("ISO-8859-1", "latin-1"), ("utf-16", "utf-16"), ("UTF8", "utf-8")],
)
def test_an_encoding_decodes_names_and_values(tmp_path: Path, encoding: str, codec: str) -> None:
    path = tmp_path / "enc.csv"
    path.write_bytes("café,ville\n1,Zürich\n2,Genève\n".encode(codec))
    _, rows = read_with(path, encoding=encoding)
    opened = open_file(
        path, schema=None, owner="t", csv=check_csv_options(encoding=encoding, owner="t")
    )
    names = [r[0] for r in opened.connection.execute(f"DESCRIBE {opened.relation}").fetchall()]
    assert names == ["café", "ville"]
    assert rows == [(1, "Zürich"), (2, "Genève")]


@pytest.mark.parametrize(
    "options",
    [
        {"encoding": "cp1252"},
        {"encoding": "no-such-codec"},
        {"encoding": b"utf-8"},
        {"delimiter": ""},
        {"delimiter": ";;"},
        {"delimiter": '"'},
        {"delimiter": "\n"},
        {"delimiter": "a"},
        {"na_values": ["a\nb"]},
        {"na_values": [1]},
        {"na_values": 5},
        {"na_values": ["x" * 300]},
    ],
    ids=lambda o: repr(o)[:40],
)
def test_bad_csv_options_are_invalid_parameters(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidParameter, match="parameter of test"):
        check_csv_options(owner="test", **options)


def test_csv_options_are_refused_for_parquet_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.parquet"
    pd.DataFrame({"a": [1]}).to_parquet(path)
    monkeypatch.setattr(duckdb, "connect", lambda *a, **k: pytest.fail("DuckDB opened"))
    with pytest.raises(InvalidParameter, match="apply to CSV files"):
        open_file(path, schema=None, owner="t", csv=check_csv_options(owner="t", delimiter=";"))


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "latin-1"])
def test_undecodable_bytes_never_make_the_read_fail(tmp_path: Path, encoding: str) -> None:
    # Row values under a fixed encoding: bytes that do not decode are skipped (UTF-8)
    # or replaced (others), never an error. DuckDB's own latin-1 decoder fails on
    # 0x80-0x9f, so without transcoding in Python this fails. The junk lies past the
    # first 64 KiB, which the encoding check reads (dpkit.analytics._csv_encoding);
    # inside them the file is read or refused as a DataError, nothing else.
    import random

    from dpkit.analytics._csv_encoding import ENCODING_SAMPLE_BYTES

    rand = random.Random(encoding)
    rows = 5000 if encoding == "utf-16" else 9000
    head = "a,b\n" + "".join(f"{i},x{i}\n" for i in range(rows))
    assert len(head.encode(encoding)) > ENCODING_SAMPLE_BYTES
    short = "a,b\n" + "".join(f"{i},x{i}\n" for i in range(50))
    for trial in range(20):
        junk = bytes(rand.randrange(256) for _ in range(rand.randrange(1, 200)))
        path = tmp_path / f"j{trial}.csv"
        path.write_bytes(head.encode(encoding) + junk + "\n7,z\n".encode(encoding))
        _, read = read_with(path, encoding=encoding, delimiter=",")
        assert len(read) >= rows
        path.write_bytes(short.encode(encoding) + junk + "\n7,z\n".encode(encoding))
        try:
            _, read = read_with(path, encoding=encoding, delimiter=",")
        except DataError as err:
            assert encoding != "latin-1" and "nothing was spent" in str(err)
        else:
            assert len(read) >= 50


# ------------------------------------------------------------------ DuckDB relations


def caller() -> Any:
    """A caller's connection: a base table, a view, a generated column, an attached
    database holding a table of the same name."""
    con = duckdb.connect()
    con.execute("CREATE TABLE raw AS SELECT range AS i, range::VARCHAR AS s FROM range(5)")
    con.execute("CREATE VIEW v AS SELECT i, CAST(s AS INTEGER) AS n FROM raw")
    con.execute("CREATE TABLE g (s VARCHAR, n INTEGER GENERATED ALWAYS AS (CAST(s AS INTEGER)))")
    con.execute("INSERT INTO g (s) VALUES ('1')")
    con.execute("ATTACH ':memory:' AS other")
    con.execute("CREATE TABLE other.main.raw AS SELECT 'other' AS x")
    return con


def test_a_plain_base_table_is_read_in_place_by_its_qualified_name() -> None:
    con = caller()
    for name in ("raw", "RAW"):  # DuckDB's names are case-insensitive
        opened = open_duckdb(con, name, owner="t")
        assert opened.connection is con
        assert opened.relation == '"memory"."main"."raw"'


@pytest.mark.parametrize("name", ["v", "g"])
def test_a_view_or_a_generated_column_is_copied_with_its_types(name: str) -> None:
    con = caller()
    opened = open_duckdb(con, name, owner="t")
    assert opened.connection is not con
    copy = opened.connection.execute(f"SELECT * FROM {opened.relation} ORDER BY ALL").fetchall()
    assert copy == con.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall()
    types = opened.connection.execute(f"DESCRIBE {opened.relation}").fetchall()
    assert [t[:2] for t in types] == [t[:2] for t in con.execute(f"DESCRIBE {name}").fetchall()]


def test_a_copy_keeps_duckdb_types_through_arrow() -> None:
    con = duckdb.connect()
    con.execute(
        "CREATE VIEW v AS SELECT 1::HUGEINT AS h, uuid() AS u, 1.5::DECIMAL(20,3) AS d, "
        "TIMESTAMPTZ '2020-01-01 10:00+00' AS t, DATE '2020-01-01' AS day, [1, 2] AS l"
    )
    opened = open_duckdb(con, "v", owner="t")
    types = opened.connection.execute(f"DESCRIBE {opened.relation}").fetchall()
    assert [t[:2] for t in types] == [t[:2] for t in con.execute("DESCRIBE v").fetchall()]


def test_the_callers_connection_is_untouched() -> None:
    con = caller()
    con.execute("SET explain_output = 'physical_only'")
    databases = con.execute("SELECT database_name FROM duckdb_databases()").fetchall()
    options = "SELECT name, value FROM duckdb_settings() ORDER BY name"
    everywhere = con.cursor().execute(options).fetchall()  # the database's settings
    pending = con.execute("SELECT i FROM raw ORDER BY i")  # a result not yet fetched
    for name in ("raw", "v"):
        open_duckdb(con, name, owner="t")
    assert pending.fetchall() == [(i,) for i in range(5)]  # its result still there
    settings = (
        "SELECT current_setting('explain_output'), current_setting('arrow_lossless_conversion')"
    )
    assert con.execute(settings).fetchall() == [("physical_only", False)]
    assert con.execute("SELECT database_name FROM duckdb_databases()").fetchall() == databases
    assert con.cursor().execute(options).fetchall() == everywhere


def test_a_view_of_a_read_only_database_is_copied(tmp_path: Path) -> None:
    path = tmp_path / "db.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE raw AS SELECT '7' AS s")
        con.execute("CREATE VIEW v AS SELECT CAST(s AS INTEGER) AS n FROM raw")
    con = duckdb.connect(str(path), read_only=True)
    opened = open_duckdb(con, "v", owner="t")
    assert opened.connection.execute(f"SELECT * FROM {opened.relation}").fetchall() == [(7,)]
    assert open_duckdb(con, "raw", owner="t").relation == '"db"."main"."raw"'


def test_a_failing_copy_leaves_nothing_and_names_the_class_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    con = duckdb.connect()
    con.execute("CREATE TABLE raw AS SELECT 'secret-value' AS s")
    con.execute("CREATE VIEW v AS SELECT CAST(s AS INTEGER) AS n FROM raw")
    with pytest.raises(DataError, match=r"failed \(\w+Exception;") as info:
        open_duckdb(con, "v", owner="t")
    assert "secret" not in str(info.value) and info.value.__cause__ is None
    assert list((tmp_path / "tmp").iterdir()) == []
    # A copy that works lives in a private directory, removed with its connection.
    con.execute("CREATE VIEW w AS SELECT length(s) AS n FROM raw")
    opened = open_duckdb(con, "w", owner="t")
    [directory] = (tmp_path / "tmp").iterdir()
    assert directory.stat().st_mode & 0o077 == 0
    del opened
    gc.collect()
    assert list((tmp_path / "tmp").iterdir()) == []


def test_names_that_do_not_resolve_on_a_cursor_are_data_errors() -> None:
    con = caller()
    con.execute("CREATE TEMP TABLE tmp AS SELECT 1 AS x")
    con.register("frame", pd.DataFrame({"x": [1]}))
    for name in ("missing", "tmp", "frame"):
        with pytest.raises(DataError, match="visible to that connection only"):
            open_duckdb(con, name, owner="t")
    with pytest.raises(InvalidParameter, match="connection"):
        open_duckdb("not a connection", "raw", owner="t")


@pytest.mark.parametrize("name", ["a[1].parquet", "a*.parquet", "a?.csv", "a{1}.csv"])
def test_a_file_whose_name_is_a_glob_pattern_is_read_itself(tmp_path: Path, name: str) -> None:
    # DuckDB's readers take a path as a pattern: a[1].parquet read a1.parquet instead,
    # silently (found by the adversarial review). Each file is read by its own name.
    frame = pd.DataFrame({"x": [1, 2, 3]})
    decoy = pd.DataFrame({"x": list(range(100))})
    target = tmp_path / name
    for path, rows in (
        (target, frame),
        (
            tmp_path
            / name.replace("[1]", "1").replace("*", "1").replace("?", "1").replace("{1}", "1"),
            decoy,
        ),
    ):
        if path.suffix == ".csv":
            rows.to_csv(path, index=False)
        else:
            rows.to_parquet(path)
    opened = open_file(target, schema=None, owner="test")
    count = opened.connection.execute(f"SELECT count(*) FROM {opened.relation}").fetchone()
    assert count == (3,)


def test_a_parquet_file_in_a_folder_named_like_a_partition_has_its_own_columns(
    tmp_path: Path,
) -> None:
    # A single file is not a hive-partitioned dataset: k=NaN/ adds no column k.
    folder = tmp_path / "k=NaN"
    folder.mkdir()
    pd.DataFrame({"x": [1.0, 2.0]}).to_parquet(folder / "d.parquet")
    opened = open_file(folder / "d.parquet", schema=None, owner="test")
    columns = [r[0] for r in opened.connection.execute(f"DESCRIBE {opened.relation}").fetchall()]
    assert columns == ["x"]


def test_a_folder_of_hive_partitions_keeps_its_partition_columns(tmp_path: Path) -> None:
    # A folder read as one Parquet table (its name ends in .parquet): its k=v folders
    # are columns, as before single files stopped reading them (found by the review).
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "sales.parquet"
    for uid in (1, 2):
        (folder / f"uid={uid}").mkdir(parents=True)
        pq.write_table(pa.table({"amount": [10, 20]}), folder / f"uid={uid}" / "part-0.parquet")
    opened = open_file(folder, schema=None, owner="test")
    rows = opened.connection.execute(
        f"SELECT uid, sum(amount) FROM {opened.relation} GROUP BY uid ORDER BY uid"
    ).fetchall()
    assert rows == [(1, 30), (2, 30)]
