"""Sources opened as DuckDB tables that no row value can make fail: files, and the
tables and views of a caller's DuckDB connection.

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

    :class:`CsvOptions` fixes what the sniffer would otherwise guess: the ``encoding``
    (``utf-8``, ``utf-16`` or ``latin-1``, what DuckDB's reader decodes), the
    ``delimiter`` (one character) and ``na_values`` (texts read as missing, besides the
    empty field). They are checked by :func:`check_csv_options` before the file is
    touched (an unknown encoding name is an :class:`~dpkit.errors.InvalidParameter`)
    and passed to both the sniffer and the reader, so they change which text is a field
    or NULL, never whether the read fails. A file in UTF-16 or latin-1 is first
    transcoded to UTF-8 by Python's codecs into the private directory below (bytes that
    do not decode become U+FFFD), because DuckDB's own decoders fail on some bytes (its
    latin-1 refuses 0x80-0x9f: a row value would make the read fail); that copy is
    deleted once read (a process killed meanwhile leaves it in the 0700 directory).

    A file whose first 64 KiB do not decode in the chosen encoding (a Latin-1 file
    read as UTF-8, whose accented lines DuckDB would skip; a UTF-16 file read as UTF-8)
    is refused as :class:`~dpkit.errors.DataError`, naming the option to use, before
    DuckDB opens it: :mod:`dpkit.analytics._csv_encoding`.

    A file with no content (0 bytes, or only line ends, spaces and a byte-order mark,
    compressed or not) has no header, so no schema: DuckDB would invent a column
    ``column0``. It is refused as :class:`~dpkit.errors.DataError` before DuckDB opens
    it. A file with a header and no rows is *not* refused: its schema is public, and
    whether it holds rows is a fact about the data, which a refusal would reveal for
    free (a dataset with no rows and one with a row are neighbours). It is read as an
    empty table, and queries on it are charged and released like any others.

Parquet (``.parquet``, ``.pq``)
    The types are the file's metadata (its footer: public schema), read at creation;
    ``schema=`` converts columns with ``TRY_CAST``. The rows are read in place (a view),
    not copied: a typed column has no value that fails to parse. What can still fail is
    the reader's conversion of one value: a ``TIMESTAMP(MILLIS)`` of 2^62 ms (pyarrow
    writes it; the conversion to microseconds overflows), a corrupt page, invalid
    UTF-8. Read only by queries, such a failure would come after a charge, and only
    for filters that keep its row group (row-group statistics): a bisection on a row
    value, stopped at its first bit by the fail-closed rule. So every value of the view
    is read once at creation (:func:`_read_every_value`, a hash of each column, nothing
    kept): the failure is a DataError there, nothing spent, and decoding being a
    function of the file, every later query converts the same values. Cost: one scan,
    0.2 s for 10^7 rows of 10 columns (2 cores), against ~0.5 s to copy them.

    A FLOAT or DOUBLE column is read through ``TRY(column)``: Parquet's row-group
    statistics leave NaN out of min and max, and DuckDB's optimizer took them for
    bounds of every value, pruning a group for ``f <> 1`` and folding ``isnan(f)`` to
    false when its finite values allowed it, so one row's value decided how the NaN
    rows of others were counted (DuckDB issue 25521; tests/adversarial/
    test_source_attacks.py). No statistic crosses ``TRY``; the values are the same.

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
it is written, after a checkpoint that empties DuckDB's write-ahead log (a second file,
reopened by name; :func:`seal_private_database`). DuckDB keeps the database file open
and never reopens it by name: queries, spilling included, run as before. So the copy of
the rows lasts no longer than the process,
even a killed one; the directory, where DuckDB spills, is removed when the connection
is garbage-collected or the interpreter exits (a killed process leaves it, empty or
with spill files). Elsewhere the file itself stays until then.

Tables and views of a DuckDB connection (``Session.from_duckdb``)
    Applied by :mod:`dpkit.analytics._duckdb_source`.
    A name can resolve to a view, whose own expressions DuckDB evaluates inside the
    query, below the analyst's filter: ``SELECT name, salary, CAST(age_raw AS INTEGER)
    AS age FROM raw`` fails iff the row with ``age_raw = 'n/a'`` passes the filter, a
    one-bit oracle after the charge. So do a table's generated (virtual) columns (an
    UPDATE puts a value in that the INSERT check would refuse), a table of an attached
    SQLite database (dynamically typed: the scanner fails on a text in an INTEGER
    column, and filters are pushed into SQLite), a replacement scan of a file or of a
    pandas DataFrame (an object column's type is inferred from a sample of its values)
    and whatever an extension adds. Rule: the name is read in place only if DuckDB's
    binder resolves it to a base table of a database in DuckDB's own format (not
    temporary, no generated column): the catalog (``duckdb_tables()``,
    ``duckdb_databases()``, ``duckdb_columns()``) lists the candidates, and the name
    must bind to the same unoptimised logical plan as the candidate's qualified name
    (a scan of that table), which is then what the Session reads. Anything else is
    evaluated once, when the Session is created, and copied into a table of a private
    database as a CSV file is (a temporary file in a 0700 directory, unlinked once
    written): a row that makes the source fail makes creation fail, as a DataError
    naming the error's class only, before anything is spent.

    The copy is read through a new cursor of the caller's connection and streamed as
    Arrow (the PyCapsule protocol, no pyarrow needed) into the private database, so the
    caller's connection is only read: its settings (``SET SESSION`` on the cursor
    only), pending result, transaction and catalog are untouched, and a read-only
    database works. Types are kept (``arrow_lossless_conversion``) except ENUM, which
    becomes VARCHAR. What the cursor cannot see is refused at creation: a DataFrame
    registered on the connection, a temporary table or view (they belong to that
    connection; dpkit's queries have always run on cursors).

    Cost (DuckDB 2.0.1, 2 cores shared with other jobs: +-15%): a view over a 6-column
    in-memory table (BIGINT, VARCHAR, DOUBLE, DATE, BOOLEAN, and a VARCHAR cast to
    INTEGER by the view); "queries" are 5 statements on the relation (a count, a
    filtered count, a group-by, a clamped sum, a distinct count); peak RSS of the
    process, which holds the caller's table (130 MB at 10^6 rows, 428 MB at 10^7)::

                        10^6 rows                  10^7 rows
        view            open    5 queries  peak    open    5 queries  peak
        in place        0.00 s  0.31 s     152 MB  0.00 s  2.91 s     665 MB
        copied          0.67 s  0.12 s     181 MB  6.04 s  2.72 s     710 MB

    A base table read in place costs the check only (0.06 s at 10^6 rows, 0.11 s at
    10^7). Through the Session (5 ``evaluate`` of counts and sums with a privacy unit)
    the copy answers as fast as the view: 3.0 s vs 3.3 s at 10^6 rows, 44.7 s vs
    41.0 s at 10^7 (within the noise). Copying into an in-memory database instead
    takes 2.7 s at 10^7 rows but holds the copy in memory (about 300 MB more);
    ``ATTACH ':memory:'`` on the caller's database takes 2.0 s and as much memory,
    shows in the caller's catalog, and is refused on a read-only database.

    The check is made once: a table that the caller later replaces by a view of the
    same name (or alters) is then read as it is. The caller is the curator, who holds
    the rows; the analyst has no access to the connection.

pandas and Arrow tables (``Session.from_pandas``, ``Session.from_arrow``)
    Copied once into an in-memory DuckDB table of a private connection when the Session
    is created (never scanned in place): a value that DuckDB cannot convert (an object
    column of mixed types) fails there, as a DataError naming the class only.

Polars DataFrames and LazyFrames (``Session.from_polars``)
    A LazyFrame is collected once, at creation (:func:`polars_stream`): its plan may
    fail on a row (a strict cast, a ``str.to_integer``), which must happen before
    anything is spent; a failure is a DataError naming the error's class only. The
    DataFrame is then handed to DuckDB as an Arrow C stream (the PyCapsule protocol,
    Polars 1.2 and later; ``to_arrow`` before, which needs pyarrow): DuckDB reads
    Polars' own buffers, with no pandas conversion and no Python objects, and copies
    them once into its table, as for an Arrow table. Types are what DuckDB makes of
    the Arrow types, as for ``from_arrow``: Categorical and Enum become VARCHAR,
    Decimal DECIMAL(p,s), Datetime with a time zone TIMESTAMP WITH TIME ZONE, Date
    DATE, Null ``"NULL"``, List and Struct nested types (the Session refuses to
    compute on those when a query names them, from the public schema). An Object
    column cannot be exported and fails at creation (DataError).
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import gzip
import os
import re
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpkit.analytics._csv_encoding import check_encoding
from dpkit.analytics.engines import NUMBER_TYPES
from dpkit.errors import DataError, InvalidParameter

__all__ = [
    "CSV_ENCODINGS",
    "CSV_SUFFIXES",
    "PARQUET_SUFFIXES",
    "CsvOptions",
    "OpenedFile",
    "PrivateDatabase",
    "check_csv_options",
    "check_schema",
    "is_polars",
    "open_file",
    "polars_stream",
    "private_database",
]

CSV_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".tsv.gz")
PARQUET_SUFFIXES = (".parquet", ".pq")

#: Encodings DuckDB's CSV reader decodes without an extension (DuckDB 1.1 to 2.0).
CSV_ENCODINGS = ("utf-8", "utf-16", "latin-1")
#: Python's codec name -> DuckDB's name of that encoding.
_CODECS = {"utf-8": "utf-8", "utf-16": "utf-16", "latin-1": "latin-1", "iso8859-1": "latin-1"}
#: Longest text accepted as an NA marker (a public option, not a row value).
_MAX_NA_LENGTH = 256

#: The table the file is copied into, in its own database.
_TABLE = "__dpkit_data"
#: The name of that database's file in its private directory.
_DATABASE = "data.duckdb"

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


@dataclass(frozen=True)
class CsvOptions:
    """Reading options of a CSV file, fixed instead of sniffed (build with
    :func:`check_csv_options`).

    Attributes
    ----------
    encoding:
        One of :data:`CSV_ENCODINGS`.
    delimiter:
        The field separator (one character), or None to let DuckDB sniff it.
    na_values:
        Texts read as missing (NULL), besides the empty field.
    """

    encoding: str = "utf-8"
    delimiter: str | None = None
    na_values: tuple[str, ...] = ()


def check_csv_options(
    *,
    encoding: object = None,
    delimiter: object = None,
    na_values: object = None,
    owner: str,
) -> CsvOptions:
    """Validate CSV reading options; raise :class:`~dpkit.errors.InvalidParameter` on a
    bad one. Touches no file.

    ``encoding`` is any Python spelling of a name in :data:`CSV_ENCODINGS` (``utf8``,
    ``ISO-8859-1``, ...); ``delimiter`` one character (``"\\t"`` and ``"tab"`` are read
    as a tab); ``na_values`` a sequence of strings without line ends.
    """
    checked_encoding = "utf-8"
    if encoding is not None:
        known = None
        if isinstance(encoding, str):
            with contextlib.suppress(LookupError):
                known = _CODECS.get(codecs.lookup(encoding).name)
        if known is None:
            raise InvalidParameter.for_parameter(
                "encoding", owner, f"one of {list(CSV_ENCODINGS)}", encoding
            )
        checked_encoding = known
    checked_delimiter: str | None = None
    if delimiter is not None:
        if isinstance(delimiter, str) and delimiter.lower() in ("\\t", "tab"):
            delimiter = "\t"
        if (
            not isinstance(delimiter, str)
            or len(delimiter) != 1
            or delimiter in '\r\n"\x00'
            or delimiter.isalnum()
        ):
            raise InvalidParameter.for_parameter(
                "delimiter",
                owner,
                "one character that is not a letter, digit, quote or line end "
                "(e.g. ',', ';', '|', 'tab')",
                delimiter,
            )
        checked_delimiter = delimiter
    checked_na: list[str] = []
    if na_values is not None:
        values = [na_values] if isinstance(na_values, str) else na_values
        expected = f"a sequence of strings without line ends, each at most {_MAX_NA_LENGTH} long"
        try:
            items = list(values)  # type: ignore[call-overload]
        except TypeError:
            raise InvalidParameter.for_parameter("na_values", owner, expected, na_values) from None
        for item in items:
            if (
                not isinstance(item, str)
                or len(item) > _MAX_NA_LENGTH
                or any(c in item for c in "\r\n\x00")
            ):
                raise InvalidParameter.for_parameter("na_values", owner, expected, na_values)
            if item not in checked_na:
                checked_na.append(item)
    return CsvOptions(checked_encoding, checked_delimiter, tuple(checked_na))


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


def open_file(
    file: Path,
    *,
    schema: Mapping[str, str] | None,
    owner: str,
    csv: CsvOptions | None = None,
    into: PrivateDatabase | None = None,
    table: str = _TABLE,
    copy: bool = False,
) -> OpenedFile:
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
    csv:
        Checked by :func:`check_csv_options`: encoding, delimiter and NA texts of a CSV
        file (default: UTF-8, sniffed delimiter, only empty fields missing).
    into:
        A private database (:func:`private_database`) to add the table to, as table
        ``table``, instead of a new one (a Session over several tables); on failure the
        caller closes it.
    copy:
        Copy a Parquet file into a table too, instead of a view reading it in place
        (public tables: read once, then immutable).

    Raises
    ------
    InvalidParameter
        If ``csv`` sets options and the file is Parquet (decided from the name).
    DataError
        If the format is unknown, the file has no content (so no header), its start
        is not valid in the chosen encoding, a ``schema`` column does not exist, or
        DuckDB cannot read the file (the message names DuckDB's error class only).
    """
    import duckdb

    name = file.name.lower()
    if not name.endswith(CSV_SUFFIXES + PARQUET_SUFFIXES):
        raise DataError(
            f"{owner}: cannot tell the format of {file.name!r}; use a .parquet or .csv "
            "file, or Session.from_duckdb."
        )
    is_csv = name.endswith(CSV_SUFFIXES)
    if not is_csv and csv is not None and csv != CsvOptions():
        raise InvalidParameter(
            f"{owner}: encoding, delimiter and NA values apply to CSV files; "
            f"{file.name!r} is Parquet (its types and missing values are in the file)."
        )
    _refuse_blank(file, is_csv, owner)
    if is_csv:
        check_encoding(file, (csv or CsvOptions()).encoding, owner)
    database = into if into is not None else private_database()
    connection, directory, remove = database.connection, database.directory, database.remove
    literal = _string(_unpatterned(file, directory))
    try:
        if is_csv:
            options = csv if csv is not None else CsvOptions()
            if options.encoding != "utf-8":
                # DuckDB's own decoders fail on some bytes (its latin-1 refuses 0x80-0x9f,
                # "File is not latin-1 encoded"): a row value would make the read fail.
                # Python's decoders, with errors="replace", are total.
                text = Path(directory) / "source.csv"
                _transcode(file, text, options.encoding)
                literal = _string(str(text))
                options = dataclasses.replace(options, encoding="utf-8")
            columns, reader = _csv_read(connection, literal, schema, owner, file.name, options)
            _create_table(connection, columns, reader, table)
            with contextlib.suppress(OSError):
                (Path(directory) / "source.csv").unlink()
        else:
            columns, reader = _parquet_read(
                connection, literal, schema, owner, file.name, hive=file.is_dir()
            )
            # Read in place (module docstring): a view over the file, typed by its footer.
            select = ", ".join(columns)
            what = "TABLE" if copy else "VIEW"
            connection.execute(f"CREATE {what} {_ident(table)} AS SELECT {select} FROM {reader}")
            if not copy:
                _read_every_value(connection, _ident(table))
        seal_private_database(connection, directory)
    except duckdb.Error as err:
        if into is None:
            connection.close()
            remove()
        # The class only, and nothing chained: DuckDB's message can quote a line.
        raise DataError(
            f"{owner}: DuckDB cannot read {file.name!r} ({type(err).__name__}). Its message "
            "is not shown because it may quote row values; nothing was spent."
        ) from None
    except BaseException:
        if into is None:
            connection.close()
            remove()
        raise
    return OpenedFile(connection=connection, relation=_ident(table))


@dataclass(frozen=True)
class PrivateDatabase:
    """A DuckDB database in a file of a private directory (:func:`private_database`)."""

    connection: Any
    directory: str
    #: Removes the directory (run it to remove the directory at once).
    remove: weakref.finalize[Any, Any]


def private_database() -> PrivateDatabase:
    """A new private DuckDB database (:func:`_private_database`)."""
    connection, directory, remove = _private_database()
    return PrivateDatabase(connection, directory, remove)


def _private_database() -> tuple[Any, str, weakref.finalize[Any, Any]]:
    """A new DuckDB database in a file of a new private directory (``mkdtemp``, mode
    0700): its connection, the directory, and the finalizer that removes the directory
    (run it to remove the directory at once)."""
    import duckdb

    directory = tempfile.mkdtemp(prefix="dpkit-")
    try:
        connection = duckdb.connect(str(Path(directory) / _DATABASE))
        connection.execute("SET enable_progress_bar = false")
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    # The folder (DuckDB spills there too) goes with the connection or at exit; on POSIX
    # an open file can be unlinked, so the connection need not be closed first.
    remove = weakref.finalize(connection, shutil.rmtree, directory, ignore_errors=True)
    return connection, directory, remove


#: Characters DuckDB's readers take as a glob pattern in a path.
_GLOB_CHARACTERS = frozenset("*?[]{}")


def _unpatterned(file: Path, directory: str) -> str:
    """The path DuckDB should read ``file`` by: its own, unless that contains a glob
    character -- DuckDB's readers take ``a[1].parquet`` as a pattern and read
    ``a1.parquet`` instead, silently (found by the adversarial review) -- in which case
    a symbolic link to it in the private ``directory``, which lives as long as the
    database (a Parquet view reads through it at every query)."""
    resolved = str(file.resolve())
    if not _GLOB_CHARACTERS.intersection(resolved):
        return resolved
    # The format's suffix only (".csv.gz"), never other parts of the name: a link named
    # source-<hex>.[1].parquet would be a pattern again.
    suffix = next(s for s in CSV_SUFFIXES + PARQUET_SUFFIXES if file.name.lower().endswith(s))
    link = Path(directory) / f"source-{uuid.uuid4().hex}{suffix}"
    try:
        os.symlink(resolved, link)
    except OSError:
        raise DataError(
            f"{file.name!r}: its path has a character DuckDB reads as a glob pattern "
            f"({sorted(_GLOB_CHARACTERS.intersection(resolved))}), and no link to it could "
            "be made; rename the file or its folder."
        ) from None
    return str(link)


def seal_private_database(connection: Any, directory: str) -> None:
    """Once the rows are written: checkpoint, then unlink the database file of
    :func:`_private_database` (POSIX).

    The checkpoint moves everything written into the database file and deletes its
    write-ahead log, which DuckDB names ``data.duckdb.wal`` beside it and reopens by
    name. Without it a table smaller than DuckDB's automatic checkpoint (16 MB of log)
    stays in that log, a second file holding the rows, which a killed process left
    behind (found in /tmp: ``from_tables`` copies and copied Parquet files).
    """
    connection.execute("CHECKPOINT")
    if os.name == "posix":
        # DuckDB holds the file open and never reopens it by name, so unlinking it now
        # lets the copy of the rows die with the process, even a killed one.
        with contextlib.suppress(OSError):
            (Path(directory) / _DATABASE).unlink()


def _transcode(file: Path, target: Path, encoding: str) -> None:
    """Copy ``file`` (plain or gzip) to ``target`` as UTF-8, decoding it with Python's
    ``encoding`` codec; bytes that do not decode become U+FFFD. Line ends are kept."""
    opener: Any = gzip.open if file.name.lower().endswith(".gz") else open
    with (
        opener(file, "rb") as raw,
        open(target, "w", encoding="utf-8", newline="") as out,
    ):
        reader = codecs.getreader(encoding)(raw, "replace")
        while chunk := reader.read(1 << 20):
            out.write(chunk)


def _refuse_blank(file: Path, is_csv: bool, owner: str) -> None:
    """Refuse a file with no content, hence no header and no schema (module docstring).

    Reads up to the first byte that is not a byte-order mark, line end, space or NUL:
    one block for any file with a header.
    """
    message = (
        f"{owner}: {file.name!r} is empty ({{}}): it has no header, so no columns to "
        "summarise. Nothing was spent."
    )
    try:
        size = file.stat().st_size
    except OSError as err:
        raise DataError(f"{owner}: cannot read {file.name!r} ({type(err).__name__}).") from None
    if size == 0:
        raise DataError(message.format("0 bytes"))
    if not is_csv:
        return
    opener: Any = gzip.open if file.name.lower().endswith(".gz") else open
    try:
        with opener(file, "rb") as stream:
            first = True
            while block := stream.read(1 << 16):
                if first:
                    for bom in (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
                        block = block.removeprefix(bom)
                    first = False
                if block.strip(b" \t\r\n\x00"):
                    return
    except (OSError, EOFError, gzip.BadGzipFile):
        # Not readable as plain or gzip bytes: let DuckDB try, and fail by class.
        return
    raise DataError(message.format("no text but line ends and spaces"))


def _create_table(connection: Any, columns: list[str], reader: str, name: str = _TABLE) -> None:
    """``CREATE TABLE`` of the ``columns`` (SQL expressions) of ``reader``'s rows, each
    conversion done as written."""
    import duckdb

    table, select = _ident(name), ", ".join(columns)
    try:
        # DuckDB 2.0's type_pushdown moves a TRY_CAST into the CSV reader, where with
        # ignore_errors a value that does not parse drops its whole line instead of
        # becoming NULL (measured: 30,100 rows of 30,101, and a different count when
        # other columns are read).
        connection.execute(_NO_TYPE_PUSHDOWN)
    except duckdb.Error:
        # A DuckDB that does not know that name: copy the text, then convert it (a
        # table scan has nothing to push a cast into).
        raw = _ident(name + "_text")
        connection.execute(f"CREATE TABLE {raw} AS SELECT * FROM {reader}")
        connection.execute(f"CREATE TABLE {table} AS SELECT {select} FROM {raw}")
        connection.execute(f"DROP TABLE {raw}")
    else:
        connection.execute(f"CREATE TABLE {table} AS SELECT {select} FROM {reader}")
        connection.execute("RESET disabled_optimizers")
    connection.execute("CHECKPOINT")


def _csv_read(
    connection: Any,
    literal: str,
    schema: Mapping[str, str] | None,
    owner: str,
    label: str,
    options: CsvOptions,
) -> tuple[list[str], str]:
    """The columns (conversions of text) and the reader of a CSV file."""
    sniffed = _sniff(connection, literal, _fixed_options(options))
    columns = [(str(c["name"]), str(c["type"])) for c in sniffed["Columns"]]
    types = _apply_schema(dict(columns), schema, owner, label)

    def option(key: str) -> str:
        value = sniffed[key]
        return _string("" if value is None or value == "(empty)" else str(value))

    varchar = ", ".join(f"{_string(c)}: 'VARCHAR'" for c, _ in columns)
    new_line = sniffed["NewLineDelimiter"]
    reader = (
        f"read_csv({literal}, auto_detect = false, columns = {{{varchar}}}, "
        f"{_fixed_options(options, delimiter=False)}"
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


def _fixed_options(options: CsvOptions, *, delimiter: bool = True) -> str:
    """``read_csv`` / ``sniff_csv`` arguments for the options the user fixed (each
    followed by a comma and a space; empty when none is set). The reader takes the
    delimiter from the sniffer's findings (the same, when fixed)."""
    parts = [f"encoding = {_string(options.encoding)}"] if options.encoding != "utf-8" else []
    if delimiter and options.delimiter is not None:
        parts.append(f"delim = {_string(options.delimiter)}")
    if options.na_values:
        # The empty field stays missing, as without the option.
        texts = ", ".join(_string(t) for t in dict.fromkeys(("", *options.na_values)))
        parts.append(f"nullstr = [{texts}]")
    return "".join(p + ", " for p in parts)


def _sniff(connection: Any, literal: str, fixed: str = "") -> dict[str, Any]:
    """DuckDB's sniffer's findings on a CSV file (dialect, header, column types)."""
    import duckdb

    # ignore_errors makes the sniffer pass over a malformed line of its sample rather
    # than fail or pick another dialect because of it. Strict mode first, as DuckDB
    # reads by default: without it the sniffer prefers no escape character, and
    # "a ""b""" would keep its doubled quotes. If that fails (on files with 1-2 lines
    # of random junk: 57 of 300 sniffed), strict_mode=false (300 of 300).
    sniff = f"SELECT * FROM sniff_csv({literal}, {fixed}ignore_errors = true"
    try:
        cursor = connection.execute(sniff + ")")
    except duckdb.Error:
        cursor = connection.execute(sniff + ", strict_mode = false)")
    fields = [d[0] for d in cursor.description]
    return dict(zip(fields, cursor.fetchone(), strict=True))


def _read_every_value(connection: Any, relation: str) -> None:
    """Read and convert every value of ``relation`` once, keeping nothing (a hash of
    each column, which no statistic or metadata can answer): a value that DuckDB's
    Parquet reader cannot convert -- a ``TIMESTAMP(MILLIS)`` of 2^62 ms, a decimal
    beyond its precision, invalid UTF-8, a corrupt page -- raises here, at creation,
    where it spends nothing, instead of in the first query that reads it, after its
    charge and only when the query's filter keeps its row group (a bisection on a row
    value through row-group statistics; tests/adversarial/test_source_attacks.py).
    Decoding is a function of the file alone, so once every value converted here, the
    same values convert in every query. Cost: one scan, as fast as DuckDB decodes
    (module docstring)."""
    columns = [str(r[0]) for r in connection.execute(f"DESCRIBE {relation}").fetchall()]
    if columns:
        hashes = ", ".join(f"bit_xor(hash({_ident(c)}))" for c in columns)
        connection.execute(f"SELECT {hashes} FROM {relation}").fetchall()


def _parquet_read(
    connection: Any,
    literal: str,
    schema: Mapping[str, str] | None,
    owner: str,
    label: str,
    *,
    hive: bool = False,
) -> tuple[list[str], str]:
    """The columns (converted where ``schema`` names them) and the reader of a Parquet
    file, or of a folder of them (``hive``: its k=v folders are columns)."""
    # One file: no partition columns read from the names of the folders above it (a
    # file under k=NaN/ had a column k); a folder's k=v partitions are its columns.
    reader = (
        f"read_parquet({literal})"
        if hive
        else f"read_parquet({literal}, hive_partitioning = false)"
    )
    # DESCRIBE reads the footer (metadata) only.
    stored = {
        str(r[0]): str(r[1])
        for r in connection.execute(f"DESCRIBE SELECT * FROM {reader}").fetchall()
    }
    types = _apply_schema(stored, schema, owner, label)
    columns = []
    for c in stored:
        value = _ident(c)
        if stored[c].upper() in _NAN_TYPES:
            # Parquet's min/max statistics leave NaN out (its specification; pyarrow,
            # Spark and DuckDB write them so), and DuckDB's optimizer trusts them as
            # bounds of every value: it pruned a row group for `f <> 1` or `f > 2`, and
            # folded `isnan(f)` to false, whenever the group's other values were finite,
            # dropping or clamping its NaN rows (DuckDB issue 25521). One person's value
            # then decided how 1,000 other rows were counted (found by the adversarial
            # review). No statistic reaches a query through TRY: the value is the same,
            # read per row. Decided on the stored type, before schema= converts it:
            # DuckDB carries the statistics through a cast (a DOUBLE read as BIGINT had
            # `f IS NULL` folded to false; found by the second review).
            value = f"TRY({value})"
        if c in (schema or {}):
            value = _convert(value, types[c], {})
        columns.append(value if value == _ident(c) else f"{value} AS {_ident(c)}")
    return columns, reader


#: Column types with NaN, which Parquet's statistics do not bound (_parquet_read).
_NAN_TYPES = frozenset({"FLOAT", "DOUBLE", "REAL", "FLOAT4", "FLOAT8"})


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


def is_polars(value: object) -> bool:
    """Whether ``value`` is a Polars DataFrame or LazyFrame (Polars is not imported)."""
    return _polars_kind(value) is not None


def _polars_kind(value: object) -> str | None:
    """``"DataFrame"``, ``"LazyFrame"`` or None (not a Polars frame)."""
    for cls in type(value).__mro__:
        if cls.__module__.partition(".")[0] == "polars" and cls.__name__ in (
            "DataFrame",
            "LazyFrame",
        ):
            return cls.__name__
    return None


def polars_stream(data: Any, owner: str) -> object:
    """A Polars DataFrame, or a LazyFrame collected now, as an object DuckDB registers
    and reads without a pandas conversion (module docstring).

    Raises
    ------
    InvalidParameter
        If ``data`` is not a Polars DataFrame or LazyFrame.
    DataError
        If a column has the Object type (no Arrow form: Polars would export memory
        addresses), or collecting the LazyFrame fails (the message names the error's
        class only).
    """
    kind = _polars_kind(data)
    if kind is None:
        raise InvalidParameter.for_parameter(
            "dataframe", owner, "a polars.DataFrame or polars.LazyFrame", data
        )
    frame = _polars_call(data.collect, owner) if kind == "LazyFrame" else data
    objects = [name for name, dtype in frame.schema.items() if str(dtype) == "Object"]
    if objects:
        raise DataError(
            f"{owner}: column(s) {objects} have the Polars type Object (Python objects), "
            "which has no Arrow form; cast them to a Polars type first. Nothing was spent."
        )
    return _polars_call(lambda: _polars_export(frame), owner)


def _polars_call(function: Any, owner: str) -> Any:
    """``function()``, a failure raised as DataError naming its class only."""
    try:
        return function()
    except BaseException as err:
        if isinstance(err, KeyboardInterrupt | SystemExit | GeneratorExit):
            raise
        failure = type(err).__name__
    # Polars' messages quote values (a strict cast names the value that failed), and a
    # Rust panic derives from BaseException: the class only, raised outside the except
    # block so that nothing is chained, not even as context.
    raise DataError(
        f"{owner}: computing the Polars frame failed ({failure}). Its message is not "
        "shown because it may quote row values; nothing was spent."
    )


def _polars_export(frame: Any) -> object:
    """A collected Polars DataFrame as an Arrow C stream (or a pyarrow Table)."""
    import duckdb
    import polars as pl

    # DuckDB refuses an Arrow array of the null type that has rows ("a non-zero null
    # count but no validity bitmap"), which would make creation fail on a frame with
    # rows and not on an empty one. Null types are sent as BOOLEAN instead, whatever
    # the rows; a column of type Null is made NULL-typed again by DuckDB (the type
    # from_arrow gives it); inside a List, Array or Struct it stays BOOLEAN.
    schema = dict(frame.schema.items())
    nulls = [name for name, dtype in schema.items() if dtype == pl.Null]
    casts = {name: _without_null(dtype, pl) for name, dtype in schema.items()}
    casts = {name: dtype for name, dtype in casts.items() if dtype != schema[name]}
    if casts:
        frame = frame.with_columns(pl.col(name).cast(dtype) for name, dtype in casts.items())
    # Arrow's C stream over Polars' own buffers: no pyarrow, no copy until DuckDB's;
    # Polars before 1.2 has no such stream: its to_arrow (which needs pyarrow).
    stream = hasattr(frame, "__arrow_c_stream__")
    exported: object = _ArrowStream(frame) if stream else frame.to_arrow()
    if not nulls:
        return exported
    connection = duckdb.connect()
    connection.register("__dpkit_polars", exported)
    replace = ", ".join(f"NULL AS {_ident(name)}" for name in nulls)
    relation = connection.sql(f"SELECT * REPLACE ({replace}) FROM __dpkit_polars")
    return _ArrowStream(_arrow_stream(relation), keep=connection)


def _without_null(dtype: Any, pl: Any) -> Any:
    """``dtype`` with the Null type, at any depth, replaced by Boolean."""
    if dtype == pl.Null:
        return pl.Boolean
    if isinstance(dtype, pl.List):
        return pl.List(_without_null(dtype.inner, pl))
    if isinstance(dtype, pl.Array):
        return pl.Array(_without_null(dtype.inner, pl), dtype.shape)
    if isinstance(dtype, pl.Struct):
        return pl.Struct({f.name: _without_null(f.dtype, pl) for f in dtype.fields})
    return dtype


class _ArrowStream:
    """An object's rows as an Arrow C stream (the PyCapsule protocol), which DuckDB
    registers without pyarrow; ``keep`` is held as long as the stream (the DuckDB
    connection a relation reads from)."""

    def __init__(self, source: Any, keep: object = None) -> None:
        self._source = source
        self._keep = keep

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self._source.__arrow_c_stream__(requested_schema)


def _string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class _Stream:
    """A relation's rows as an Arrow C stream (the PyCapsule protocol), which another
    DuckDB database reads without pyarrow (it refuses the relation object itself)."""

    def __init__(self, relation: Any) -> None:
        self._relation = relation

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return self._relation.__arrow_c_stream__(requested_schema)


#: Rows per Arrow batch when a DuckDB before the PyCapsule protocol copies a relation.
_BATCH_ROWS = 122_880


def _arrow_stream(relation: Any) -> object:
    """The rows of a DuckDB ``relation``, streamed in batches, for another database."""
    if hasattr(relation, "__arrow_c_stream__"):
        return _Stream(relation)
    # DuckDB before the PyCapsule protocol: a pyarrow RecordBatchReader.
    reader = getattr(relation, "to_arrow_reader", None) or relation.fetch_record_batch
    return reader(_BATCH_ROWS)
