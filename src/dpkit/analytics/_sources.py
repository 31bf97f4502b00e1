"""Files opened as DuckDB tables that no row value can make fail.

The Session's threat model (DESIGN.md, Conventions) trusts the analyst with the schema
and public parameters, never with row values: whether a query succeeds, what its error
says and how long it takes to fail may depend on the schema and public parameters
only. A file read by DuckDB with sniffed types breaks this: a CSV whose integer column
holds ``oops`` on a line past the sniffer's sample fails on the first query that
reaches it -- after earlier queries spent budget -- and DuckDB's message quotes the
line (``Original Line: ...``). So :func:`open_file` reads a file once, when the
Session is created, into a table of a private DuckDB database:

CSV (``.csv``, ``.csv.gz``, ``.tsv``, ``.tsv.gz``)
    DuckDB's sniffer (``sniff_csv``, over a sample of rows: 20,480 by default) finds
    the dialect (delimiter, quote, escape, header) and the column types once. The file
    is then read with those options fixed and every column as text
    (``auto_detect=false``, VARCHAR columns), with ``ignore_errors=true`` and
    ``strict_mode=false``, and each column is converted with ``TRY_CAST`` (or
    ``TRY_STRPTIME`` with a sniffed date format). So a value that does not parse as its
    column's type becomes NULL (missing, as the Session's NULL rule says); a line with
    too few fields, invalid UTF-8 or longer than DuckDB's ``max_line_size`` (2 MB) is
    skipped; fields past the header's width are dropped; an unterminated quote can
    swallow the lines after it into one field. ``null_padding`` is not used: with
    quoted newlines DuckDB's parallel reader refuses it (an error that depends on the
    rows). Reading raises on none of these: a fuzzer writing 1 to 4 random lines of
    delimiters, quotes, CR, NUL, invalid UTF-8 and (sometimes) 3 MB of text into 600
    files of up to 40,000 rows got no error from the read; 23 files failed in the
    sniffer (no dialect found in a sample full of such lines, or a line over 2 MB in
    it), at creation, as DataError. The rows read did not depend on the number of
    threads (1 to 16).

    Without ``schema=``, the column types -- like the dialect and header -- are sniffed
    from the file (a sample of rows), and that sniffed schema is treated as public: it
    names the columns and is shown in errors, explanations and reports. A single row in
    the sample can change it (``oops`` in an integer column makes it VARCHAR). Pass
    ``schema=`` (column -> DuckDB type) if the types themselves are sensitive; the
    columns it names are converted to those types whatever the rows hold.

Parquet (``.parquet``, ``.pq``)
    The types are the file's metadata (its footer: public schema), read at creation;
    ``schema=`` converts columns with ``TRY_CAST``. The rows are read in place (a view),
    not copied: a typed column has no value that fails to parse. What can still fail is
    a corrupt page or an invalid UTF-8 string; that happens while a query runs, after
    its charge (charge-then-fail, the same for every query that reads that column, and
    the message names the error's class only). Copying the file at creation would only
    move that bit to creation, where it would be learnt for free, and cost more than a
    query: 0.47 s per Session for 10^7 rows (the issue-6 Session benchmark, whose one
    query then runs in 0.6-0.7 s on the copy or on the file alike).

A file that cannot be read raises :class:`~dpkit.errors.DataError` at creation,
naming the file and the class of DuckDB's error only: DuckDB's message can quote
rows, so it is neither shown nor chained.

Why copy the file into a table rather than keep a view that re-reads it (DuckDB 2.0.1,
2 cores; a CSV of 6 columns -- integers, a float, a string, a date, a boolean -- with
10^6 rows (37 MB) or 10^7 rows (394 MB); "open" includes the ~0.2 s of importing
DuckDB; peak RSS by ``/usr/bin/time -v``, of which 62 MB is Python with DuckDB
imported). With DuckDB alone, opening the file and then running 5 queries (a count, a
filtered count, a group-by, a clamped sum, a count of persons)::

                            10^6 rows                  10^7 rows
    storage                 open    5 queries  peak    open    5 queries  peak
    view of read_csv        0.27 s  0.33 s     152 MB  0.28 s  2.33 s     353 MB
    view, TRY_CAST read     0.28 s  0.38 s     191 MB  0.28 s  2.40 s     296 MB
    in-memory table         0.42 s  0.03 s     188 MB  1.55 s  0.13 s     660 MB
    temporary-file table    0.50 s  0.02 s     173 MB  2.21 s  0.09 s     323 MB

(the first row is how files were read before this module, with sniffed types)

Then through the Session, ``Session.from_path(..., privacy_unit="person")`` and 5
queries ``Query().bound(max_rows=10).count()``: before (a view of ``read_csv``), 10^6
rows open in 0.10 s and the counts take 0.46 s (169 MB); 10^7 rows 0.10 s and 2.57 s
(313 MB). Now (temporary database file): 0.33 s and 0.09 s (178 MB); 2.03 s and
0.21 s (309 MB; the file is 77 MB). The copy costs about four reads of the file and is
repaid within a handful of queries (every query of a view re-parses the whole file;
``describe`` runs dozens), and it moves every read failure to creation. The temporary
file keeps memory flat as the data grows (DuckDB compresses it and its buffer manager
evicts), where an in-memory table holds about 60 bytes a row and, past DuckDB's memory
limit, spills to ``.tmp`` under the working directory. The file lives in a private
directory (``tempfile.mkdtemp``, mode 0700). On POSIX systems it is unlinked as soon as
it is written (DuckDB keeps it open and never reopens it by name: queries, spilling
included, run as before), so the copy of the rows lasts no longer than the process,
even a killed one; the directory, where DuckDB spills, is removed when the connection
is garbage-collected or the interpreter exits (a killed process leaves it, empty or
with spill files). Elsewhere the file itself stays until then.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpkit.analytics._engine import NUMBER_TYPES
from dpkit.errors import DataError, InvalidParameter

__all__ = ["CSV_SUFFIXES", "PARQUET_SUFFIXES", "OpenedFile", "check_schema", "open_file"]

CSV_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".tsv.gz")
PARQUET_SUFFIXES = (".parquet", ".pq")

#: The table the file is copied into, in its own database.
_TABLE = "__dpkit_data"

#: Canonical names (as ``duckdb.sqltype`` prints them) of the scalar types a column
#: may be converted to; DECIMAL(p,s) is matched apart. Nested types, ENUM and JSON are
#: left out: the Session computes on numbers, strings, booleans and dates.
_SCALAR_TYPES = frozenset(
    {
        *(t for t in NUMBER_TYPES if t not in ("REAL", "DECIMAL")),  # REAL is FLOAT
        "BOOLEAN",
        "VARCHAR",
        "DATE",
        "TIME",
        "TIMESTAMP",
        "TIMESTAMP_S",
        "TIMESTAMP_MS",
        "TIMESTAMP_NS",
        "TIMESTAMP WITH TIME ZONE",
    }
)
_DECIMAL = re.compile(r"DECIMAL\(\d{1,2},\d{1,2}\)")

#: Turns off DuckDB 2.0's type_pushdown for the copy (see :func:`_create_table`).
_NO_TYPE_PUSHDOWN = "SET disabled_optimizers = 'type_pushdown'"


@dataclass(frozen=True)
class OpenedFile:
    """A file copied into a private DuckDB database.

    Attributes
    ----------
    connection:
        The ``duckdb.DuckDBPyConnection`` of that database (its only user).
    relation:
        The quoted name of the table holding the rows.
    """

    connection: Any
    relation: str


def _canonical_type(name: str) -> str | None:
    """DuckDB's canonical spelling of type ``name``, or None if it is not allowed."""
    import duckdb

    try:
        canonical = str(duckdb.sqltype(name))
    except (duckdb.Error, TypeError, ValueError, RuntimeError):
        return None
    if canonical in _SCALAR_TYPES or _DECIMAL.fullmatch(canonical):
        return canonical
    return None


def check_schema(schema: object, owner: str) -> dict[str, str] | None:
    """Validate a ``schema=`` argument: None, or column name -> allowed DuckDB type.

    Returns the mapping with canonical type names. Raises
    :class:`~dpkit.errors.InvalidParameter` on anything else; whether the columns exist
    is checked by :func:`open_file`, once the header is known.
    """
    if schema is None:
        return None
    expected = "None or a mapping of column names to DuckDB type names (e.g. 'BIGINT')"
    if not isinstance(schema, Mapping):
        raise InvalidParameter.for_parameter("schema", owner, expected, schema)
    checked: dict[str, str] = {}
    for column, type_name in schema.items():
        if not isinstance(column, str) or not isinstance(type_name, str):
            raise InvalidParameter.for_parameter("schema", owner, expected, schema)
        canonical = _canonical_type(type_name)
        if canonical is None:
            raise InvalidParameter(
                f"The 'schema' parameter of {owner} gives column {column!r} the type "
                f"{type_name!r}, which is not a DuckDB scalar type dpkit can read. Use one "
                f"of {sorted(_SCALAR_TYPES)} or DECIMAL(p,s)."
            )
        checked[column] = canonical
    return checked


def open_file(file: Path, *, schema: Mapping[str, str] | None, owner: str) -> OpenedFile:
    """Open ``file`` in a private DuckDB database: a CSV is copied into a table that no
    row value can make a later query fail on; a Parquet file is a typed view over the
    file (module docstring).

    Parameters
    ----------
    file:
        An existing file whose name ends with one of :data:`CSV_SUFFIXES` or
        :data:`PARQUET_SUFFIXES`.
    schema:
        Checked by :func:`check_schema`: columns converted to these types with
        ``TRY_CAST`` (a value that does not parse becomes NULL); other columns keep the
        sniffed (CSV) or stored (Parquet) type.
    owner:
        The caller's name, for messages.

    Raises
    ------
    DataError
        If the format is unknown, a ``schema`` column does not exist, or DuckDB cannot
        read the file (the message names DuckDB's error class only).
    """
    import duckdb

    name = file.name.lower()
    if not name.endswith(CSV_SUFFIXES + PARQUET_SUFFIXES):
        raise DataError(
            f"{owner}: cannot tell the format of {file.name!r}; use a .parquet or .csv "
            "file, or Session.from_duckdb."
        )
    directory = tempfile.mkdtemp(prefix="dpkit-")
    database = Path(directory) / "data.duckdb"
    try:
        connection = duckdb.connect(str(database))
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    # The folder (DuckDB spills there too) goes with the connection or at exit; on POSIX
    # an open file can be unlinked, so the connection need not be closed first.
    remove = weakref.finalize(connection, shutil.rmtree, directory, ignore_errors=True)
    literal = _string(str(file.resolve()))
    try:
        connection.execute("SET enable_progress_bar = false")
        if name.endswith(CSV_SUFFIXES):
            columns, reader = _csv_read(connection, literal, schema, owner, file.name)
            _create_table(connection, columns, reader)
        else:
            columns, reader = _parquet_read(connection, literal, schema, owner, file.name)
            # Read in place (module docstring): a view over the file, typed by its footer.
            select = ", ".join(columns)
            connection.execute(f"CREATE VIEW {_ident(_TABLE)} AS SELECT {select} FROM {reader}")
        if os.name == "posix":
            # DuckDB holds the file open and never reopens it by name, so unlinking it
            # now lets the copy of the rows die with the process, even a killed one.
            with contextlib.suppress(OSError):
                database.unlink()
    except duckdb.Error as err:
        connection.close()
        remove()
        # The class only, and nothing chained: DuckDB's message can quote a line.
        raise DataError(
            f"{owner}: DuckDB cannot read {file.name!r} ({type(err).__name__}). Its message "
            "is not shown because it may quote row values; nothing was spent."
        ) from None
    except BaseException:
        connection.close()
        remove()
        raise
    return OpenedFile(connection=connection, relation=_ident(_TABLE))


def _create_table(connection: Any, columns: list[str], reader: str) -> None:
    """``CREATE TABLE`` of the ``columns`` (SQL expressions) of ``reader``'s rows, each
    conversion done as written."""
    import duckdb

    table, select = _ident(_TABLE), ", ".join(columns)
    try:
        # DuckDB 2.0's type_pushdown moves a TRY_CAST into the CSV reader, where with
        # ignore_errors a value that does not parse drops its whole line instead of
        # becoming NULL (measured: 30,100 rows of 30,101, and a different count when
        # other columns are read).
        connection.execute(_NO_TYPE_PUSHDOWN)
    except duckdb.Error:
        # A DuckDB that does not know that name: copy the text, then convert it (a
        # table scan has nothing to push a cast into).
        raw = _ident(_TABLE + "_text")
        connection.execute(f"CREATE TABLE {raw} AS SELECT * FROM {reader}")
        connection.execute(f"CREATE TABLE {table} AS SELECT {select} FROM {raw}")
        connection.execute(f"DROP TABLE {raw}")
    else:
        connection.execute(f"CREATE TABLE {table} AS SELECT {select} FROM {reader}")
        connection.execute("RESET disabled_optimizers")
    connection.execute("CHECKPOINT")


def _csv_read(
    connection: Any, literal: str, schema: Mapping[str, str] | None, owner: str, label: str
) -> tuple[list[str], str]:
    """The columns (conversions of text) and the reader of a CSV file."""
    sniffed = _sniff(connection, literal)
    columns = [(str(c["name"]), str(c["type"])) for c in sniffed["Columns"]]
    types = _apply_schema(dict(columns), schema, owner, label)

    def option(key: str) -> str:
        value = sniffed[key]
        return _string("" if value is None or value == "(empty)" else str(value))

    varchar = ", ".join(f"{_string(c)}: 'VARCHAR'" for c, _ in columns)
    new_line = sniffed["NewLineDelimiter"]
    reader = (
        f"read_csv({literal}, auto_detect = false, columns = {{{varchar}}}, "
        f"delim = {option('Delimiter')}, quote = {option('Quote')}, "
        f"escape = {option('Escape')}, comment = {option('Comment')}, "
        f"header = {'true' if sniffed['HasHeader'] else 'false'}, "
        f"skip = {int(sniffed['SkipRows'])}, "
        + ("" if new_line in (None, "(empty)") else f"new_line = {option('NewLineDelimiter')}, ")
        + "ignore_errors = true, strict_mode = false)"
    )
    formats = {"DATE": sniffed.get("DateFormat"), "TIMESTAMP": sniffed.get("TimestampFormat")}
    converted = [f"{_convert(_ident(c), types[c], formats)} AS {_ident(c)}" for c, _ in columns]
    return converted, reader


def _sniff(connection: Any, literal: str) -> dict[str, Any]:
    """DuckDB's sniffer's findings on a CSV file (dialect, header, column types)."""
    import duckdb

    # ignore_errors makes the sniffer pass over a malformed line of its sample rather
    # than fail or pick another dialect because of it. Strict mode first, as DuckDB
    # reads by default: without it the sniffer prefers no escape character, and
    # "a ""b""" would keep its doubled quotes. If that fails (on files with 1-2 lines
    # of random junk: 57 of 300 sniffed), strict_mode=false (300 of 300).
    sniff = f"SELECT * FROM sniff_csv({literal}, ignore_errors = true"
    try:
        cursor = connection.execute(sniff + ")")
    except duckdb.Error:
        cursor = connection.execute(sniff + ", strict_mode = false)")
    fields = [d[0] for d in cursor.description]
    return dict(zip(fields, cursor.fetchone(), strict=True))


def _parquet_read(
    connection: Any, literal: str, schema: Mapping[str, str] | None, owner: str, label: str
) -> tuple[list[str], str]:
    """The columns (converted where ``schema`` names them) and the reader of a Parquet
    file."""
    reader = f"read_parquet({literal})"
    # DESCRIBE reads the footer (metadata) only.
    stored = {
        str(r[0]): str(r[1])
        for r in connection.execute(f"DESCRIBE SELECT * FROM {reader}").fetchall()
    }
    types = _apply_schema(stored, schema, owner, label)
    columns = [
        _ident(c)
        if c not in (schema or {})
        else f"{_convert(_ident(c), types[c], {})} AS {_ident(c)}"
        for c in stored
    ]
    return columns, reader


def _apply_schema(
    found: dict[str, str], schema: Mapping[str, str] | None, owner: str, label: str
) -> dict[str, str]:
    """Column -> type to convert to: ``schema`` over what was found in the file."""
    types = dict(found)
    for column, type_name in (schema or {}).items():
        if column not in found:
            raise DataError(
                f"{owner}: the 'schema' parameter names column {column!r}, which {label!r} "
                f"does not have. Available columns: {list(found)}."
            )
        types[column] = type_name
    return types


def _convert(column: str, type_name: str, formats: Mapping[str, object]) -> str:
    """SQL converting text (or a stored value) to ``type_name``; NULL where it fails."""
    if _canonical_type(type_name) is None:
        # A sniffed type outside the allow-list (none today): text is total.
        type_name = "VARCHAR"
    fmt = formats.get(type_name)
    if isinstance(fmt, str) and fmt:
        # The sniffer found a date/timestamp format (e.g. %d/%m/%Y) that CAST ignores.
        return f"TRY_CAST(TRY_STRPTIME({column}, {_string(fmt)}) AS {type_name})"
    return f"TRY_CAST({column} AS {type_name})"


def _string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
