"""A CSV file not valid in the chosen encoding is refused at creation, spending nothing
(dpkit.analytics._csv_encoding; issue 28, "refuse before spending")."""

from __future__ import annotations

import codecs
import gzip
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

import dpkit as dp
from dpkit.analytics import Query
from dpkit.analytics._csv_encoding import ENCODING_SAMPLE_BYTES, check_encoding
from dpkit.analytics._sources import check_csv_options, open_file
from dpkit.errors import DataError, InvalidParameter

CITIES = ("Zürich", "Genève", "Málaga", "Köln", "Paris", "Bern")
BUDGET = dp.PureDP(2.0)


def table_text(rows: int = 600) -> str:
    lines = ["id,ville,âge"] + [f"{i},{CITIES[i % 6]},{20 + i % 50}" for i in range(rows)]
    return "\n".join(lines) + "\n"


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def refused(path: Path, encoding: str | None = None) -> str:
    """The message of the DataError that opening ``path`` raises, DuckDB never opened."""
    options = check_csv_options(encoding=encoding, owner="test")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(duckdb, "connect", lambda *a, **k: pytest.fail("DuckDB opened"))
        with pytest.raises(DataError) as error:
            open_file(path, schema=None, owner="test", csv=options)
    return str(error.value)


def rows(path: Path, encoding: str | None = None) -> list[tuple[Any, ...]]:
    options = check_csv_options(encoding=encoding, owner="test")
    opened = open_file(path, schema=None, owner="test", csv=options)
    return opened.connection.execute(f"SELECT * FROM {opened.relation}").fetchall()


# ------------------------------------------------------------------ what is refused


@pytest.mark.parametrize("name", ["fr.csv", "fr.csv.gz", "fr.tsv"])
def test_a_latin1_file_read_as_utf8_is_refused_with_the_option_to_use(
    tmp_path: Path, name: str
) -> None:
    text = table_text()
    path = write(
        tmp_path / name, text.replace(",", "\t" if "tsv" in name else ",").encode("latin-1")
    )
    message = refused(path)
    assert repr(name) in message and "is not valid UTF-8" in message
    assert "a byte in its start" in message  # never where: it would point at a row
    assert ("decompressed" in message) == name.endswith(".gz")
    assert "--encoding latin-1" in message and "encoding='latin-1'" in message
    assert "nothing was spent" in message
    # The same file, with the option the message names.
    assert rows(path, "latin-1")[:2] == [(0, "Zürich", 20), (1, "Genève", 21)]
    assert len(rows(path, "ISO-8859-1")) == 600


@pytest.mark.parametrize(
    ("data", "encoding", "expected"),
    [
        (codecs.BOM_UTF16_LE + "a,b\n1,2\n".encode("utf-16-le"), None, "--encoding utf-16"),
        (codecs.BOM_UTF16_BE + "a,b\n1,2\n".encode("utf-16-be"), None, "--encoding utf-16"),
        ("a,b\n1,2\n".encode("utf-16-le"), None, "holds a NUL byte"),
        ("a,b\n1,2\n".encode("utf-16-be"), None, "holds a NUL byte"),
        ("a,b\n1,2\n".encode("utf-16-le"), "utf-16", "does not start with a UTF-16"),
        ("a,b\n1,é\n".encode(), "utf-16", "leave the encoding out"),
        (codecs.BOM_UTF8 + b"a,b\n1,2\n", "latin-1", "It is UTF-8"),
        (codecs.BOM_UTF8 + b"a,b\n1,2\n", "utf-16", "It is UTF-8"),
        (codecs.BOM_UTF16_LE + "a,b\n".encode("utf-16-le"), "latin-1", "It is UTF-16"),
        ("a,b\n1,2\n".encode("utf-32"), None, "convert the file to UTF-8"),
        ("a,b\n1,2\n".encode("utf-32"), "utf-16", "convert the file to UTF-8"),
        (codecs.BOM_UTF16_LE + b"a\x00\x00\xdc\n\x00", "utf-16", "a byte in its start"),
    ],
    ids=[
        "utf16le-as-utf8",
        "utf16be-as-utf8",
        "utf16le-no-bom",
        "utf16be-no-bom",
        "utf16-no-bom-as-utf16",
        "utf8-as-utf16",
        "utf8-bom-as-latin1",
        "utf8-bom-as-utf16",
        "utf16-bom-as-latin1",
        "utf32",
        "utf32-as-utf16",
        "utf16-lone-surrogate",
    ],
)
def test_byte_order_marks_and_utf16_are_refused_clearly(
    tmp_path: Path, data: bytes, encoding: str | None, expected: str
) -> None:
    message = refused(write(tmp_path / "t.csv", data), encoding)
    assert expected in message and "nothing was spent" in message


@pytest.mark.parametrize(
    ("data", "encoding", "expected"),
    [
        ("id,ville\n1,Genève\n".encode(), None, [(1, "Genève")]),
        (codecs.BOM_UTF8 + "id,ville\n1,Genève\n".encode(), None, [(1, "Genève")]),
        ("id,ville\n1,Genève\n".encode("utf-16"), "utf-16", [(1, "Genève")]),
        ("id,ville\n1,Genève\n".encode("utf-16-be"), None, None),  # refused: NUL in line 1
        ("id,ville\n1,Genève\n".encode(), "latin-1", [(1, "GenÃ¨ve")]),  # every byte decodes
    ],
    ids=["utf8", "utf8-bom", "utf16-bom", "utf16be-no-bom", "utf8-as-latin1"],
)
def test_what_is_accepted(
    tmp_path: Path, data: bytes, encoding: str | None, expected: list[tuple[Any, ...]] | None
) -> None:
    path = write(tmp_path / "t.csv", data)
    if expected is None:
        refused(path, encoding)
    else:
        assert rows(path, encoding) == expected


def test_only_the_first_64_kib_are_checked(tmp_path: Path) -> None:
    assert ENCODING_SAMPLE_BYTES == 65536
    head = b"a,b\n" + b"1,x\n" * (ENCODING_SAMPLE_BYTES // 4)
    # A Latin-1 "©" (0xA9, never valid where a UTF-8 character starts) at the first
    # offset past the sample: not looked at.
    path = write(tmp_path / "past.csv", head[:ENCODING_SAMPLE_BYTES] + b"\xa9\n2,y\n")
    check_encoding(path, "utf-8", "test")
    # At the last offset of the sample: refused (the message never says where).
    path = write(tmp_path / "last.csv", head[: ENCODING_SAMPLE_BYTES - 1] + b"\xa9\n2,y\n")
    with pytest.raises(DataError, match="a byte in its start does not decode"):
        check_encoding(path, "utf-8", "test")


@pytest.mark.parametrize("tail", [b"\xa9\n2,y\n", b""], ids=["file-goes-on", "file-ends"])
def test_a_character_cut_by_the_sample_end_is_not_an_error(tmp_path: Path, tail: bytes) -> None:
    # "é" is C3 A9: its first byte is the sample's last. Whether the file goes on is
    # not in the sample, so both files get the same answer.
    head = b"a,b\n" + b"1,x\n" * (ENCODING_SAMPLE_BYTES // 4)
    path = write(tmp_path / "cut.csv", head[: ENCODING_SAMPLE_BYTES - 1] + b"\xc3" + tail)
    check_encoding(path, "utf-8", "test")


def test_an_unreadable_file_is_left_to_the_engine(tmp_path: Path) -> None:
    path = tmp_path / "broken.csv.gz"
    path.write_bytes(b"not gzip at all")
    check_encoding(path, "utf-8", "test")  # nothing raised here
    with pytest.raises(DataError, match="DuckDB cannot read"):
        open_file(path, schema=None, owner="test")


def test_spark_reading_refuses_before_spark_is_touched(tmp_path: Path) -> None:
    from dpkit.analytics.engines.spark import read_path

    path = write(tmp_path / "fr.csv", table_text().encode("latin-1"))
    with pytest.raises(DataError, match="--encoding latin-1"):
        read_path(None, str(path), None, "test")
    options = check_csv_options(encoding="utf-16", owner="test")
    with pytest.raises(DataError, match="does not start with a UTF-16"):
        read_path(None, str(path), None, "test", options)


# ------------------------------------------------------------------ through the Session


def test_session_from_path_refuses_and_spends_nothing(tmp_path: Path) -> None:
    path = write(tmp_path / "fr.csv", table_text().encode("latin-1"))
    ledger = tmp_path / "ledger.sqlite"
    with pytest.raises(DataError, match=r"encoding='latin-1' in Session\.from_path"):
        dp.Session.from_path(path, budget=BUDGET, ledger=ledger)
    # With the encoding: every row is there, and the ledger shows nothing spent before.
    session = dp.Session.from_path(path, budget=BUDGET, ledger=ledger, encoding="latin-1", rng=1)
    assert session.spent == dp.PureDP(0.0)
    assert session.columns == {"id": "BIGINT", "ville": "VARCHAR", "âge": "BIGINT"}
    count = session.evaluate(Query().count(), budget=dp.PureDP(1.0)).dataframe["count"].iloc[0]
    assert abs(count - 600) < 20  # eps = 1: P(|X| >= 20) = 2e-9


def test_session_from_path_takes_delimiter_and_na_values(tmp_path: Path) -> None:
    path = write(tmp_path / "t.csv", b"n;s\n1;a\nNA;b\n3;c\n")
    session = dp.Session.from_path(path, budget=BUDGET, delimiter=";", na_values=["NA"])
    assert session.columns == {"n": "BIGINT", "s": "VARCHAR"}


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("t.csv", {"encoding": "cp1252"}, "'encoding'"),
        ("t.csv", {"delimiter": ";;"}, "'delimiter'"),
        ("t.parquet", {"encoding": "latin-1"}, "apply to CSV files"),
    ],
    ids=["unknown-encoding", "bad-delimiter", "parquet"],
)
def test_session_from_path_checks_csv_options(
    tmp_path: Path, name: str, options: dict[str, Any], message: str
) -> None:
    path = tmp_path / name
    if name.endswith(".parquet"):
        pd.DataFrame({"a": [1]}).to_parquet(path)
    else:
        path.write_text("a\n1\n")
    with pytest.raises(InvalidParameter, match=message):
        dp.Session.from_path(path, budget=BUDGET, **options)
